"""The example files compile against the bundled data sets' schemas, labels included."""

from __future__ import annotations

from pathlib import Path

import pytest

from lumber.compiler.dsl import check_constraints, format_constraints, format_text, parse_constraints
from lumber.datasets import load
from lumber.ir import Direction, Schema, Task

EXAMPLES = Path(__file__).resolve().parents[2] / "lumber" / "datasets" / "examples"


def dataset_schema(name: str) -> Schema:
    """The schema of the model the tour trains: credit's example names EDUCATION's labels."""
    ds = load(name).labelled() if name == "credit" else load(name)
    return Schema(ds.features, Task.BINARY, 1, (0.0,), classes=(0, 1))


@pytest.mark.parametrize("name", ["adult", "compas", "credit"])
def test_example_compiles_and_round_trips(name: str) -> None:
    schema = dataset_schema(name)
    result = check_constraints(EXAMPLES / f"{name}.lum", schema)
    assert not result.warnings
    c = result.constraints
    assert c.target is not None and c.target.label in (0, 1)
    assert parse_constraints(format_constraints(c, schema), schema) == c
    text = (EXAMPLES / f"{name}.lum").read_text()
    assert format_text(text) == text


def test_credit_labels_become_codes() -> None:
    schema = dataset_schema("credit")
    c = parse_constraints(EXAMPLES / "credit.lum", schema)
    cats = schema.features[schema.index("EDUCATION")].categories
    allowed = c.rule("EDUCATION").allowed
    assert allowed is not None
    assert sorted(cats[int(v)] for v in allowed) == ["Graduate_school", "High_school", "University"]
    assert c.rule("PAY_0_Pay_delay>=1").direction == Direction.DECREASE
    rel = c.relations[0]
    assert rel.x_terms == (("PAY_AMT1", 1.0), ("PAY_AMT2", 1.0))
    assert rel.x0_terms == (("PAY_AMT1", -1.0), ("PAY_AMT2", -1.0), ("LIMIT_BAL", -0.1))


def test_adult_bounds_for_a_case() -> None:
    """The compiled model answers the analyses' questions: per-case intervals and costs."""
    schema = dataset_schema("adult")
    c = parse_constraints(EXAMPLES / "adult.lum", schema)
    names = schema.feature_names
    x0 = load("adult").X.iloc[0].to_numpy(dtype=float)
    lo, hi = c.bounds(names, x0)
    i = names.index("Age")
    assert lo[i] == x0[i] and hi[i] == 90
    j = names.index("Sex")
    assert lo[j] == hi[j] == x0[j]
    down, up = c.costs(names)
    assert up[names.index("CapitalGain")] == pytest.approx(1e-3)
