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


def test_cli_target_with_isolation_forest_plausibility(tmp_path, capsys) -> None:
    """`--target 1` (a string on the command line) names the class whose rows train the isolation forest."""
    import lightgbm as lgb
    import numpy as np

    import lumber
    from lumber.compiler.cli import main

    ds = lumber.datasets.load("adult")
    X, y = ds.X.iloc[:3000], ds.y[:3000]
    lgb.train({"objective": "binary", "num_leaves": 7, "verbose": -1, "seed": 0}, lgb.Dataset(X, y),
              num_boost_round=10).save_model(str(tmp_path / "m.txt"))
    X.to_csv(tmp_path / "train.csv", index=False)
    X.iloc[:3].to_csv(tmp_path / "cases.csv", index=False)
    (tmp_path / "c.lum").write_text("immutable Sex, NativeCountry\nplausible isolation-forest(contamination=0.1)\n")
    rc = main(["explain", str(tmp_path / "m.txt"), str(tmp_path / "cases.csv"), "--counterfactual", "--target", "1",
               "--constraints", str(tmp_path / "c.lum"), "--train", str(tmp_path / "train.csv"),
               "--time-limit", "20"])
    cap = capsys.readouterr()
    assert rc == 0, cap.err
    assert "too few reference rows" not in cap.err + cap.out
    assert "target class 1" in cap.out and np.sum([ln.startswith("row ") for ln in cap.out.splitlines()]) == 3
