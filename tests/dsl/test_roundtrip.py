"""Round trip: compile(format_constraints(c)) == c for hypothesis-generated constraint models.

Feature names are drawn to stress the printer: names that need backquotes,
keywords, names that look like the sugar ``X0``/``dX`` of other features,
and schemas with odd category labels.
"""

from __future__ import annotations

import math
import warnings
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from lumber.compiler.dsl import format_constraints, parse_constraints
from lumber.ir import (
    Bound, Constraints, Direction, Event, Feature, FeatureEvent, FeatureKind, FeatureRule, Implication,
    LinearRelation, Membership, Norm, Plausibility, Scale, Schema, Target, Task,
)

NAMES = ["Age", "Age0", "Income", "dIncome", "d", "dd", "x", "x0", "f1", "f10", "order", "in", "_u",
         "PAY_0_Pay_delay>=1", "has space", "back`tick", "tab\there", "caf\u00e9"]
LABELS = ["own", "rent", "in", "two words", 'quote"d', "3", "-1.5", "true", "", 7, 12, 2.5, -3]

finite = st.floats(min_value=-1e9, max_value=1e9, allow_nan=False, allow_infinity=False)
nonzero = finite.filter(lambda v: v != 0.0)
costs = st.floats(min_value=0.0, max_value=1e6, allow_nan=False)


def code_strategy(feature: Feature | None) -> st.SearchStrategy[float]:
    if feature is not None and feature.categories:
        return st.integers(0, len(feature.categories) - 1).map(float)
    if feature is not None and feature.kind == FeatureKind.BINARY:
        return st.sampled_from([0.0, 1.0])
    return st.integers(0, 6).map(float)


@st.composite
def schemas(draw: Any) -> Schema:
    names = draw(st.lists(st.sampled_from(NAMES), min_size=1, max_size=8, unique=True))
    feats = []
    for n in names:
        kind = draw(st.sampled_from(list(FeatureKind)))
        cats = None
        if kind in (FeatureKind.CATEGORICAL, FeatureKind.ORDINAL) and draw(st.booleans()):
            cats = tuple(draw(st.lists(st.sampled_from(LABELS), min_size=1, max_size=5, unique_by=str)))
        feats.append(Feature(n, kind, cats))
    return Schema(tuple(feats), Task.BINARY, 1, (0.0,), classes=("no", "yes"))


@st.composite
def rules(draw: Any, feature: Feature, schema: Schema | None) -> FeatureRule:
    kind = feature.kind if schema is not None else FeatureKind.ORDINAL
    imm = draw(st.booleans())
    order = None
    if kind in (FeatureKind.CATEGORICAL, FeatureKind.ORDINAL) and draw(st.booleans()):
        if feature.categories:
            order = tuple(float(i) for i in draw(st.permutations(range(len(feature.categories)))))
        else:
            order = tuple(draw(st.lists(code_strategy(None), min_size=1, max_size=4, unique=True)))
    direction = Direction.ANY
    if not imm and (kind != FeatureKind.CATEGORICAL or order is not None):
        direction = draw(st.sampled_from(list(Direction)))
    lower = upper = None
    allowed = None
    if kind != FeatureKind.NUMERICAL and draw(st.booleans()):
        allowed = tuple(sorted(draw(st.lists(code_strategy(feature if schema else None), min_size=1, max_size=4,
                                             unique=True))))
    elif kind != FeatureKind.CATEGORICAL:
        lo = draw(st.none() | st.builds(Bound, finite, st.booleans()))
        hi = draw(st.none() | st.builds(Bound, finite, st.booleans()))
        if lo is not None and hi is not None and lo.relative == hi.relative and lo.value > hi.value:
            lo, hi = Bound(hi.value, hi.relative), Bound(lo.value, lo.relative)
        if direction == Direction.INCREASE and hi is not None and hi.relative and hi.value < 0:
            hi = Bound(-hi.value, True)
        if direction == Direction.DECREASE and lo is not None and lo.relative and lo.value > 0:
            lo = Bound(-lo.value, True)
        if lo is not None and hi is not None and lo.relative == hi.relative and lo.value > hi.value:
            hi = None
        lower, upper = lo, hi
    up = draw(st.none() | costs)
    down = draw(st.none() | costs | st.just(up))
    if kind == FeatureKind.CATEGORICAL and order is None and up != down:
        down = up
    r = FeatureRule(feature.name, imm, direction, lower, upper, allowed, order, up, down)
    if r == FeatureRule(feature.name):
        r = FeatureRule(feature.name, cost_up=1.0, cost_down=1.0)
    return r


@st.composite
def relations(draw: Any, names: list[str], condition: bool = False) -> LinearRelation:
    xs = draw(st.lists(st.sampled_from(names), min_size=0 if condition else 1, max_size=3, unique=True))
    x0s = draw(st.lists(st.sampled_from(names), min_size=0 if xs else 1, max_size=3, unique=True))
    return LinearRelation(tuple((n, draw(nonzero)) for n in xs), tuple((n, draw(nonzero)) for n in x0s),
                          draw(st.sampled_from(["<=", ">=", "=="])), draw(finite))


@st.composite
def conditions(draw: Any, schema: Schema | None, feats: list[Feature], ordered: set[str], role: str) -> Any:
    numeric = [f.name for f in feats if schema is None or f.kind != FeatureKind.CATEGORICAL]
    discrete = [f for f in feats if schema is None or f.kind != FeatureKind.NUMERICAL]
    choices = ["event"] + (["member"] if discrete else []) + (["relation"] if numeric else [])
    what = draw(st.sampled_from(choices))
    if what == "event":
        f = draw(st.sampled_from(feats))
        events = list(Event)
        if schema is not None and f.kind == FeatureKind.CATEGORICAL and f.name not in ordered:
            events = [Event.CHANGES, Event.UNCHANGED]
        return FeatureEvent(f.name, draw(st.sampled_from(events)))
    if what == "member":
        f = draw(st.sampled_from(discrete))
        vals = draw(st.lists(code_strategy(f if schema else None), min_size=1, max_size=3, unique=True))
        return Membership(f.name, tuple(sorted(vals)), role == "condition" and draw(st.booleans()))
    return draw(relations(numeric, condition=role == "condition"))


@st.composite
def constraint_models(draw: Any, with_schema: bool) -> tuple[Constraints, Schema | None]:
    schema = draw(schemas()) if with_schema else None
    feats = list(schema.features) if schema is not None else [Feature(n) for n in
                                                              draw(st.lists(st.sampled_from(NAMES), min_size=1,
                                                                            max_size=6, unique=True))]
    chosen = draw(st.lists(st.sampled_from(feats), max_size=len(feats), unique_by=lambda f: f.name))
    rule_list = tuple(draw(rules(f, schema)) for f in chosen)
    ordered = {r.feature for r in rule_list if r.order is not None}
    numeric = [f.name for f in feats if schema is None or f.kind != FeatureKind.CATEGORICAL]
    rels = tuple(draw(st.lists(relations(numeric), max_size=2))) if numeric else ()
    imps = []
    for _ in range(draw(st.integers(0, 2))):
        cond = draw(conditions(schema, feats, ordered, "condition"))
        then = tuple(draw(st.lists(conditions(schema, feats, ordered, "consequence"), min_size=1, max_size=2)))
        imps.append(Implication(cond, then))
    params = draw(st.lists(st.sampled_from([("contamination", 0.1), ("n_estimators", 100), ("max_samples", 0.5),
                                            ("random_state", 3)]), max_size=3, unique_by=lambda p: p[0]))
    plaus = draw(st.none() | st.just(Plausibility("isolation-forest", tuple(params))))
    if schema is not None:
        target = draw(st.none() | st.sampled_from(["no", "yes"]).map(lambda c: Target(label=c)))
    else:
        label = st.integers(-3, 5) | st.sampled_from(["a b", ">50K", "x"]) | st.just(2.5)
        lo, hi = sorted([draw(finite), draw(finite)])
        interval = st.sampled_from([(lo, hi), (-math.inf, hi), (lo, math.inf)])
        target = draw(st.none() | label.map(lambda v: Target(label=v)) | interval.map(lambda i: Target(interval=i)))
    c = Constraints(
        rules=rule_list, norm=draw(st.none() | st.sampled_from(list(Norm))),
        scale=draw(st.none() | st.sampled_from(list(Scale))), max_changes=draw(st.none() | st.integers(1, 9)),
        relations=rels, implications=tuple(imps), plausibility=plaus, target=target)
    return c, schema


def _compile(text: str, schema: Schema | None) -> Constraints:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return parse_constraints(text, schema)


@given(constraint_models(with_schema=False))
def test_round_trip_without_schema(model: tuple[Constraints, None]) -> None:
    c, _ = model
    text = format_constraints(c)
    again = _compile(text, None)
    assert again == c, text
    assert format_constraints(again) == text


@given(constraint_models(with_schema=True))
def test_round_trip_with_schema(model: tuple[Constraints, Schema]) -> None:
    c, schema = model
    text = format_constraints(c, schema)
    again = _compile(text, schema)
    assert again == c, text
    assert format_constraints(again, schema) == text


def test_sugar_collisions_are_printed_explicitly() -> None:
    """A feature named ``Age0`` next to ``Age``: the original of Age must not print as ``Age0``."""
    c = Constraints(rules=(FeatureRule("Age", cost_up=1.0, cost_down=1.0), FeatureRule("Age0", immutable=True)),
                    relations=(LinearRelation((("Age0", 1.0),), (("Age", 2.0),), "<=", 3.0),))
    text = format_constraints(c)
    assert "orig(Age)" in text and "Age0 + 2*orig(Age) <= 3" in text
    assert _compile(text, None) == c
