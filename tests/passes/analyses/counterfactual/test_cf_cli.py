"""``lumber explain MODEL DATA.csv --counterfactual --constraints FILE -o out.json``."""

from __future__ import annotations

import json

import numpy as np
import pytest
import skops.io as sio
from sklearn.ensemble import RandomForestClassifier

import lumber
from lumber.compiler.cli import main


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    d = lumber.datasets.load("compas")
    tmp = tmp_path_factory.mktemp("cf")
    m = RandomForestClassifier(n_estimators=10, max_depth=4, random_state=0).fit(d.X, d.y)
    sio.dump(m, tmp / "model.skops")
    d.X.iloc[:6].to_csv(tmp / "cases.csv", index=False)
    d.X.to_csv(tmp / "train.csv", index=False)
    (tmp / "recourse.lum").write_text("immutable Sex, Race\nAgeGroup: increase\nnorm l1\ntarget class 0\n")
    (tmp / "stuck.lum").write_text("immutable AgeGroup, ChargeDegree, PriorsCount, Race, Sex\ntarget class 0\n")
    return tmp, m, d


def test_cli_writes_verified_counterfactuals(files, capsys) -> None:
    tmp, m, d = files
    out = tmp / "out.json"
    rc = main(["explain", str(tmp / "model.skops"), str(tmp / "cases.csv"), "--counterfactual", "--constraints",
               str(tmp / "recourse.lum"), "--scale", "minmax", "--train", str(tmp / "train.csv"), "-o", str(out)])
    assert rc == 0
    doc = json.loads(out.read_text())["analyses"]["counterfactual"]
    assert len(doc["cases"]) == 6 and doc["norm"] == "l1" and doc["reference"] == "train"
    for case in doc["cases"]:
        assert case["status"] == "optimal" and case["verified"]
        x = np.array([case["counterfactual"][c] for c in d.X.columns], dtype=float)
        assert m.predict(d.X.iloc[:1] * 0 + x)[0] == 0
        changed = {c["feature"] for c in case["changes"]}
        assert not changed & {"Sex", "Race"}
    assert "counterfactuals (norm l1" in capsys.readouterr().out


def test_cli_reports_infeasible_cases(files) -> None:
    tmp, m, d = files
    out = tmp / "stuck.json"
    rc = main(["explain", str(tmp / "model.skops"), str(tmp / "cases.csv"), "--counterfactual", "--constraints",
               str(tmp / "stuck.lum"), "-o", str(out), "-q"])
    assert rc == 0
    doc = json.loads(out.read_text())["analyses"]["counterfactual"]
    statuses = {c["status"] for c in doc["cases"]}
    pred = m.predict(d.X.iloc[:6])
    assert statuses == ({"optimal", "infeasible"} if (pred == 0).any() and (pred == 1).any() else statuses)
    for c, p in zip(doc["cases"], pred):
        assert c["status"] == ("optimal" if p == 0 else "infeasible")


def test_cli_bad_target_is_an_error(files, capsys) -> None:
    tmp, _, _ = files
    rc = main(["explain", str(tmp / "model.skops"), str(tmp / "cases.csv"), "--counterfactual", "--target", "7",
               "-o", str(tmp / "bad.json")])
    assert rc != 0
    assert "not a class" in capsys.readouterr().err
    assert not (tmp / "bad.json").exists()
