"""Class names and value words (``Schema.class_names``, ``Feature.words``): display only, everywhere a
decision or a value is printed, round-tripped through JSON, and refused when they cannot mean anything."""

from __future__ import annotations

import numpy as np
import pytest
from builders import make_forest

from lumber.compiler.dsl import parse_constraints
from lumber.ir import Feature, FeatureKind, Schema, Task, ValidationError
from lumber.ir.decision import resolve_target
from lumber.ir.display import Display, readable
from lumber.ir.schema import Cutoff
from lumber.passes.analyses.reasons import CaseReasons, Reason, value_words

FLAG = "PAY_0_Pay_delay>=1"


def _schema() -> Schema:
    return Schema((Feature("AGE"), Feature(FLAG, FeatureKind.BINARY)), Task.BINARY, 1, (0.0,))


def test_named_schema_round_trips_and_decides_as_before() -> None:
    s = _schema().named(("paid", "default"), {FLAG: ((1, "payment delayed 1+ month"), (0, "paid on time"))})
    assert s.class_names == ("paid", "default") and s.class_text(1) == "default"
    assert s.features[1].kind == FeatureKind.BINARY  # words never turn a flag into a category
    assert s.features[1].word(1.0) == "payment delayed 1+ month" and s.features[1].word(0.5) is None
    assert Schema.from_dict(s.to_dict()) == s
    m = np.array([-1.0, 2.0])
    np.testing.assert_array_equal(s.decide(m), _schema().decide(m))  # predict returns the labels, as before
    assert _schema().class_text(1) == "class 1"


@pytest.mark.parametrize("names", [("paid",), ("paid", "paid"), ("paid", " ")])
def test_class_names_must_name_each_class_once(names: tuple[str, ...]) -> None:
    with pytest.raises(ValidationError):
        _schema().named(names)


def test_words_for_an_unknown_feature_are_refused() -> None:
    with pytest.raises(ValidationError, match="unknown feature"):
        _schema().named(words={"SEX": ((0, "male"),)})


def test_targets_rules_and_reasons_print_names() -> None:
    s = _schema().named(("paid", "default"), {FLAG: ((1, "payment delayed 1+ month"),)})
    t = resolve_target(s.with_(cutoff=Cutoff(0.3)), 0)
    assert t.describe() == "paid (P(default) <= 0.3)"
    assert Cutoff(0.3).describe(s.class_text(1)) == "default when P(default) > 0.3"
    forest = make_forest([(FLAG, 0.5, -1.0, 1.0)], s.features, task=Task.BINARY)
    forest = forest.replace(schema=forest.schema.named(("paid", "default")))
    shown = Display(forest)
    assert shown.value(1, 1.0) == "payment delayed 1+ month" and shown.value(1, 0.0) == "0"
    assert shown.threshold(1, 0.5) == "0.5"  # thresholds stay numbers
    assert value_words(forest.schema, shown, 1, 1.0) == f"{FLAG}: payment delayed 1+ month"
    assert value_words(forest.schema, shown, 1, 0.0) == f"{FLAG}: no"  # a 0/1 flag without words for 0
    case = CaseReasons(3, 1, [Reason(FLAG, 0.6, 1.0, f"{FLAG}: payment delayed 1+ month")], "A1",
                       decision_name=s.class_text(1))
    assert case.lines()[0] == "row 3 (A1): decided default; principal reasons:"
    assert case.to_dict()["decision"] == 1 and case.to_dict()["decision_text"] == "default"


def test_constraint_file_names_classes_and_values() -> None:
    c = parse_constraints('class 0 means paid, 1 means "default"\n'
                          f'`{FLAG}`: decrease, 1 means "payment delayed 1+ month"\n', _schema())
    assert c.rule(FLAG).direction.name == "DECREASE"  # the flag's rule is unchanged by its words
    s = c.named(_schema())
    assert s.class_names == ("paid", "default") and s.features[1].word(1.0) == "payment delayed 1+ month"
    only_one = parse_constraints("class 1 means default\n", _schema()).named(_schema())
    assert only_one.class_names == ("class 0", "default")


def test_readable_never_prints_scientific_notation() -> None:
    assert readable(5.989e-08) == "0.00000006" and readable(5.29864e-05) == "0.00005"
    assert readable(505001.0) == "505,001" and readable(0.57320) == "0.5732" and readable(0.0) == "0"
