"""A report a reviewer can sign: cases by ID, at most N principal reasons in words each, the bank's cutoff,
fragile changes flagged, and no counterfactual offered that changes an immutable feature."""

from __future__ import annotations

import json
from pathlib import Path

import lightgbm as lgb
import numpy as np
import pandas as pd
import pytest
from buildproject import make_project

from lumber.compiler.cli import main


@pytest.fixture(scope="module")
def decision_report(tmp_path_factory: pytest.TempPathFactory) -> Path:
    proj = make_project(tmp_path_factory.mktemp("decision-project"))
    cases = pd.read_csv(proj / "train.csv").drop(columns=["income"]).iloc[:12]
    cases.insert(0, "application_id", [f"APP-{i:02d}" for i in range(len(cases))])
    cases.to_csv(proj / "ids.csv", index=False)
    out = proj / "report"
    assert main(["report", str(proj / "model.txt"), str(proj / "ids.csv"), "--id", "application_id",
                 "--train", str(proj / "train.csv"), "--label", "income", "--constraints",
                 str(proj / "recourse.lum"), "--threshold", "0.3", "--reasons", "3", "--max-cases", "12",
                 "--analyses", "attribution,counterfactual", "--time-limit", "10", "-o", str(out), "-q"]) == 0
    return proj


def test_cases_carry_ids_reasons_and_the_cutoff(decision_report: Path) -> None:
    proj = decision_report
    doc = json.loads((proj / "report" / "report.json").read_text())
    c = doc["cases"]
    assert c["decision_rule"]["value"] == 0.3 and c["reasons_schema"] == "lumber.reasons/2"
    booster = lgb.Booster(model_file=str(proj / "model.txt"))
    frame = pd.read_csv(proj / "ids.csv")
    p = booster.predict(frame.drop(columns=["application_id"]))
    assert ((p > 0.3) != (p > 0.5)).any(), "the cutoff must matter for these cases"
    for it, pi, app in zip(c["items"], p, frame["application_id"]):
        assert it["id"] == app
        assert it["prediction"] == int(pi > 0.3)  # the bank's cutoff, checked on the source model
        assert 0 < len(it["reasons"]) <= 3
        assert all(r["contribution"] > 0 and r["value_text"].startswith(r["feature"] + ": ") for r in it["reasons"])
    md = (proj / "report" / "report.md").read_text()
    assert "Decision rule: class 1 when P(class 1) > 0.3" in md
    assert "### Case APP-03 (row 3): decided class" in md
    assert "#### Why: principal reasons" in md


def test_no_immutable_change_offered_and_fragile_flags(decision_report: Path) -> None:
    doc = json.loads((decision_report / "report" / "report.json").read_text())
    immutable = {"Sex", "NativeCountry", "MaritalStatus", "Relationship"} & set(
        doc["constraints"]["immutable"])
    assert immutable
    material = doc["cases"]["materiality"]
    for it in doc["cases"]["items"]:
        cf = it["counterfactual"]
        for ch in cf.get("changes", []):
            assert ch["feature"] not in immutable
            if isinstance(ch.get("delta"), (int, float)) and ch["feature"] in material:
                assert ch["fragile"] == (abs(ch["delta"]) < material[ch["feature"]])
    train = pd.read_csv(decision_report / "train.csv")
    assert material["Age"] == pytest.approx(0.01 * float(np.std(train["Age"])), rel=1e-9)


def test_a_counterfactual_outside_the_rules_is_withheld() -> None:
    """A change of an immutable feature, or to a value no training row shows (AGE 23 -> 75 where the rows end
    at 60), is never offered as advice; a change below materiality is flagged fragile."""
    from types import SimpleNamespace

    from lumber.compiler.build.document import _offered
    from lumber.ir import Constraints, Feature, Schema, Task

    schema = Schema((Feature("AGE"), Feature("SEX"), Feature("PAY_AMT1")), Task.BINARY, 1, (0.0,))
    train = SimpleNamespace(X=np.array([[20.0, 0.0, 0.0], [60.0, 1.0, 5000.0]]))
    st = SimpleNamespace(inp=SimpleNamespace(constraints=Constraints.from_mapping({"immutable": ["SEX"]}),
                                             table=lambda role: train if role == "train" else None,
                                             forest=SimpleNamespace(schema=schema)))
    material = {"AGE": 0.2, "PAY_AMT1": 25.0}

    def cf(*changes: tuple[str, float, float]) -> dict:
        return {"status": "optimal", "verified": True, "changes": [
            {"feature": f, "before": a, "after": b, "delta": b - a} for f, a, b in changes]}

    ok = _offered(st, cf(("PAY_AMT1", 0.0, 1.0), ("AGE", 30.0, 32.0)), material)
    assert ok["status"] == "optimal" and [c["fragile"] for c in ok["changes"]] == [True, False]
    old = _offered(st, cf(("AGE", 23.0, 75.0)), material)
    assert old["status"] == "withheld" and not old["changes"] and "outside the training rows' range" in old["message"]
    sex = _offered(st, cf(("SEX", 0.0, 1.0)), material)
    assert sex["status"] == "withheld" and "immutable" in sex["message"]
