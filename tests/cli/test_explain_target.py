"""`--target` as the explainers read it: a label for classifiers, an interval for regressors."""

from __future__ import annotations

import math

import pytest

from lumber.compiler.cli.explainers import parse_target
from lumber.ir import InputDataError, Task


def test_classifier_targets_pass_through() -> None:
    assert parse_target(">50K", Task.BINARY) == ">50K"
    assert parse_target(None, Task.REGRESSION) is None


@pytest.mark.parametrize("spec, lo, hi", [("1:2", 1.0, 2.0), (":3.5", -math.inf, 3.5), ("-1:", -1.0, math.inf)])
def test_regression_intervals(spec: str, lo: float, hi: float) -> None:
    assert parse_target(spec, Task.REGRESSION) == (lo, hi)


@pytest.mark.parametrize("spec", ["12", "a:b", "1:2:3"])
def test_bad_intervals_say_what_is_accepted(spec: str) -> None:
    with pytest.raises(InputDataError, match=r"is not an interval(?s:.*)--target LO:HI"):
        parse_target(spec, Task.REGRESSION)
