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


def test_cli_target_flag_with_isolation_forest_plausibility(files, capsys) -> None:
    """`--target 1` beside `plausible isolation-forest(...)` in the file: the forest is fitted on the reference
    rows the model gives class 1, and every returned point is plausible and verified on the model."""
    from sklearn.ensemble import IsolationForest

    from lumber.passes.analyses.counterfactual import isolation_threshold, path_lengths

    tmp, m, d = files
    (tmp / "plausible.lum").write_text("immutable Sex, Race\nplausible isolation-forest(contamination=0.1)\n")
    out = tmp / "plausible.json"
    rc = main(["explain", str(tmp / "model.skops"), str(tmp / "cases.csv"), "--counterfactual", "--target", "1",
               "--constraints", str(tmp / "plausible.lum"), "--train", str(tmp / "train.csv"), "-o", str(out)])
    cap = capsys.readouterr()
    assert rc == 0, cap.err
    assert "too few reference rows" not in cap.err + cap.out and "target class 1" in cap.out
    import lumber.compiler.api.counterfactual as api

    rows = d.X.to_numpy(dtype=float)[m.predict(d.X) == 1]
    iso = IsolationForest(n_estimators=api.ISOLATION_TREES, max_samples=min(api.ISOLATION_SAMPLES, len(rows)),
                          random_state=0).fit(rows)
    fi = lumber.load(iso)
    delta = isolation_threshold(fi, rows, 0.1)
    doc = json.loads(out.read_text())["analyses"]["counterfactual"]
    assert len(doc["cases"]) == 6
    for case in doc["cases"]:
        assert case["status"] == "optimal" and case["verified"], case
        x = np.array([case["counterfactual"][c] for c in d.X.columns], dtype=float)
        assert m.predict(d.X.iloc[:1] * 0 + x)[0] == 1
        assert path_lengths(fi, x[None, :])[0] >= delta - 1e-9
