"""``lumber explain --contributions``: per-row values that add up, as the API gives them; the global
attribution says it is global."""

from __future__ import annotations

import json
from pathlib import Path

import lightgbm as lgb
import numpy as np
import pandas as pd
import pytest

import lumber
from lumber.compiler.cli import main


def test_contributions_add_up_and_match_the_api(age_hours: Path, capsys: pytest.CaptureFixture[str]) -> None:
    d = age_hours
    out = d / "c.json"
    assert main(["explain", str(d / "model.txt"), str(d / "cases.csv"), "--rows", "0,2", "--contributions",
                 "--train", str(d / "train.csv"), "--background", "40", "-o", str(out)]) == 0
    text = capsys.readouterr().out
    assert "against 40 reference rows" in text and "row 2: margin" in text
    js = json.loads(out.read_text())["analyses"]["contributions"]
    assert js["method"] == "interventional" and js["references"] == 40 and [r["row"] for r in js["rows"]] == [0, 2]
    booster = lgb.Booster(model_file=str(d / "model.txt"))
    cases = pd.read_csv(d / "cases.csv")
    margins = booster.predict(cases.iloc[[0, 2]], raw_score=True)
    base = js["base_value"]["1"]
    for r, m in zip(js["rows"], margins):
        vals = r["outputs"][0]["values"]
        assert base + sum(vals.values()) == pytest.approx(m, abs=1e-9)
    train = pd.read_csv(d / "train.csv").drop(columns=["label"]).to_numpy()
    pick = np.sort(np.random.default_rng(0).choice(len(train), size=40, replace=False))
    api = lumber.contributions(str(d / "model.txt"), cases.iloc[[0, 2]], train[pick])
    assert [js["rows"][0]["outputs"][0]["values"][f] for f in api.feature_names] == pytest.approx(
        api.values[0], abs=1e-12)


def test_path_dependent_without_train(age_hours: Path, capsys: pytest.CaptureFixture[str]) -> None:
    d = age_hours
    out = d / "c.json"
    assert main(["explain", str(d / "model.txt"), str(d / "cases.csv"), "--contributions", "-q", "-o",
                 str(out)]) == 0
    js = json.loads(out.read_text())["analyses"]["contributions"]
    booster = lgb.Booster(model_file=str(d / "model.txt"))
    pc = booster.predict(pd.read_csv(d / "cases.csv"), pred_contrib=True)
    assert js["method"] == "path-dependent" and js["base_value"]["1"] == pytest.approx(pc[0, -1], abs=1e-9)
    for r, want in zip(js["rows"], pc):
        assert list(r["outputs"][0]["values"].values()) == pytest.approx(want[:-1].tolist(), abs=1e-9)


def test_attribution_is_labelled_global(age_hours: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["explain", "--help"])
    helptext = " ".join(capsys.readouterr().out.split())
    assert "global attribution" in helptext and "per-row contributions" in helptext
    d = age_hours
    assert main(["explain", str(d / "model.txt"), str(d / "cases.csv"), "--attribution"]) == 0
    assert capsys.readouterr().out.startswith("global attribution")
