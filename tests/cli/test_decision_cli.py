"""``--threshold``, ``--id`` and ``--reasons`` on predict and explain."""

from __future__ import annotations

import json
from pathlib import Path

import lightgbm as lgb
import numpy as np
import pandas as pd
import pytest

from lumber.compiler.cli import main


@pytest.fixture
def with_ids(age_hours: Path) -> Path:
    cases = pd.read_csv(age_hours / "train.csv").drop(columns=["label"]).iloc[:40]
    cases.insert(0, "application_id", [f"A{i:03d}" for i in range(len(cases))])
    cases.to_csv(age_hours / "ids.csv", index=False)
    return age_hours


def test_predict_threshold_and_ids(with_ids: Path, capsys: pytest.CaptureFixture[str]) -> None:
    d = with_ids
    out3, out5 = d / "p3.csv", d / "p5.csv"
    assert main(["predict", str(d / "model.txt"), str(d / "ids.csv"), "--id", "application_id", "--threshold", "0.3",
                 "-o", str(out3)]) == 0
    assert main(["predict", str(d / "model.txt"), str(d / "ids.csv"), "--id", "application_id", "-o", str(out5)]) == 0
    p3, p5 = pd.read_csv(out3), pd.read_csv(out5)
    assert list(p3["application_id"]) == [f"A{i:03d}" for i in range(40)]
    booster = lgb.Booster(model_file=str(d / "model.txt"))
    p = booster.predict(pd.read_csv(d / "ids.csv").drop(columns=["application_id"]))
    np.testing.assert_array_equal(p3["prediction"], (p > 0.3).astype(int))
    np.testing.assert_array_equal(p5["prediction"], (p > 0.5).astype(int))
    assert "ignoring" not in capsys.readouterr().err  # the ID column is named, not an unknown column
    assert main(["predict", str(d / "model.txt"), str(d / "ids.csv"), "--id", "applicationid"]) != 0
    assert "did you mean 'application_id'" in capsys.readouterr().err
    assert main(["predict", str(d / "model.txt"), str(d / "ids.csv"), "--threshold", "2"]) != 0
    assert "strictly between 0 and 1" in capsys.readouterr().err


def test_explain_reasons_with_ids(with_ids: Path, capsys: pytest.CaptureFixture[str]) -> None:
    d = with_ids
    out = d / "e.json"
    assert main(["explain", str(d / "model.txt"), str(d / "ids.csv"), "--id", "application_id", "--rows", "0:6",
                 "--contributions", "--counterfactual", "--reasons", "1", "--threshold", "0.3",
                 "--train", str(d / "train.csv"), "-o", str(out)]) == 0
    text = capsys.readouterr().out
    assert "row 3 [A003]:" in text
    js = json.loads(out.read_text())
    assert js["ids"] == [f"A{i:03d}" for i in range(6)] and js["decision_rule"]["value"] == 0.3
    reasons = js["analyses"]["contributions"]["reasons"]
    assert reasons["schema"] == "lumber.reasons/2" and reasons["per_case"] == 1
    booster = lgb.Booster(model_file=str(d / "model.txt"))
    p = booster.predict(pd.read_csv(d / "ids.csv").drop(columns=["application_id"]).iloc[:6])
    for case, pi in zip(reasons["cases"], p):
        assert case["id"] == f"A{case['row']:03d}" and case["decision"] == int(pi > 0.3)
        assert len(case["reasons"]) <= 1 and all(r["contribution"] > 0 for r in case["reasons"])
    cfs = {c["row"]: c for c in js["analyses"]["counterfactual"]["cases"]}
    assert all(c["id"] == f"A{r:03d}" for r, c in cfs.items())
    for case in reasons["cases"]:
        cf = cfs[case["row"]]
        proven = cf["status"] == "optimal" and cf["verified"] and cf["changes"]
        assert (case["reversal"] is not None) == bool(proven)


def test_batch_threshold_and_ids(with_ids: Path) -> None:
    d = with_ids
    out = d / "b.jsonl"
    assert main(["batch", str(d / "model.txt"), str(d / "ids.csv"), "--id", "application_id", "--rows", "0:5",
                 "--sensitive", "--threshold", "0.3", "--jobs", "1", "-o", str(out), "-q"]) == 0
    lines = [json.loads(x) for x in out.read_text().splitlines()[1:]]
    assert sorted(r["id"] for r in lines) == [f"A{i:03d}" for i in range(5)]
    assert all(r["id"] == f"A{r['row']:03d}" for r in lines)
    booster = lgb.Booster(model_file=str(d / "model.txt"))
    p = booster.predict(pd.read_csv(d / "ids.csv").drop(columns=["application_id"]).iloc[:5])
    for r in lines:
        assert r["status"] == "ok" and r["result"]["prediction"] == int(p[r["row"]] > 0.3)


def test_predict_parquet_ids(with_ids: Path) -> None:
    """The ID column streams through a Parquet input too, chunk by chunk."""
    pytest.importorskip("pyarrow", reason="pyarrow comes with the test extra")
    d = with_ids
    pd.read_csv(d / "ids.csv").to_parquet(d / "ids.parquet", index=False)
    out = d / "p.csv"
    assert main(["predict", str(d / "model.txt"), str(d / "ids.parquet"), "--id", "application_id", "--chunk-rows",
                 "7", "--threshold", "0.3", "-o", str(out), "--quiet"]) == 0
    got = pd.read_csv(out)
    assert list(got.columns[:2]) == ["application_id", "raw"]
    assert list(got["application_id"]) == [f"A{i:03d}" for i in range(40)]
    booster = lgb.Booster(model_file=str(d / "model.txt"))
    p = booster.predict(pd.read_csv(d / "ids.csv").drop(columns=["application_id"]))
    np.testing.assert_array_equal(got["prediction"], (p > 0.3).astype(int))
