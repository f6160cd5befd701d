"""The issue's scenario, sized to run fast: a credit LightGBM from ``lumber datasets export credit``, rejected
applicants with an ``application_id`` column, ``lumber report ... --threshold 0.3`` with the exported
``credit.lum``, and ``lumber predict``/``lumber explain`` on the same files, read as a reviewer reads them.

Every case carries its ID and at most 4 principal reasons in words (a PAY flag reads "September payment
delayed 1+ month", never "yes"); decisions read "default"/"paid" in JSON, Markdown, HTML and predictions; the
bank's cutoff decides who is rejected and where each counterfactual lands on the source model; no change
offered breaks the constraint file or leaves the training rows' range, and changes below materiality are
flagged fragile; the HTML page, read in headless Chromium, explains its terms and prints no scientific
notation."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import lightgbm as lgb
import numpy as np
import pandas as pd
import pytest

from lumber.compiler.cli import main
from lumber.datasets import WORDS

CUTOFF = 0.3
CASES = 10


@pytest.fixture(scope="module")
def credit(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    d = tmp_path_factory.mktemp("credit")
    assert main(["datasets", "export", "credit", str(d), "--trees", "40", "--leaves", "15", "--cases", "2000"]) == 0
    booster = lgb.Booster(model_file=str(d / "model.txt"))
    cases = pd.read_csv(d / "cases.csv")
    p = booster.predict(_frame(booster, cases))
    # rejected at the bank's cutoff: half of them approved by the model's own 0.5, so the cutoff matters
    low = np.flatnonzero((p > CUTOFF) & (p <= 0.5))[: CASES // 2]
    high = np.flatnonzero(p > 0.5)[: CASES - len(low)]
    rejected = cases.iloc[np.sort(np.concatenate([low, high]))].reset_index(drop=True)
    rejected.insert(0, "application_id", [f"A{10000 + i}" for i in range(len(rejected))])
    rejected.to_csv(d / "rejected.csv", index=False)
    out = d / "report"
    assert main(["report", str(d / "model.txt"), str(d / "rejected.csv"), "--constraints", str(d / "credit.lum"),
                 "--train", str(d / "train.csv"), "--label", "DEFAULT_PAYEMENT", "--id", "application_id",
                 "--threshold", str(CUTOFF), "--max-cases", str(CASES), "--analyses",
                 "attribution,sensitive,counterfactual", "--time-limit", "10", "-o", str(out), "-q"]) == 0
    return {"dir": d, "booster": booster, "rejected": rejected, "out": out,
            "doc": json.loads((out / "report.json").read_text())}


def _frame(booster: lgb.Booster, rows: pd.DataFrame) -> pd.DataFrame:
    """The rows as the source model reads them: text columns as the Categoricals it was trained on."""
    out = rows.copy()
    text = [c for c in out.columns if not pd.api.types.is_numeric_dtype(out[c])]
    for c, cats in zip(text, booster.pandas_categorical):
        out[c] = pd.Categorical(out[c], categories=cats)
    return out


def _proba(booster: lgb.Booster, row: pd.Series) -> float:
    return float(booster.predict(_frame(booster, row.to_frame().T.infer_objects()))[0])


def test_every_case_has_its_id_and_at_most_4_reasons_in_words(credit: dict[str, Any]) -> None:
    items = credit["doc"]["cases"]["items"]
    assert [it["id"] for it in items] == list(credit["rejected"]["application_id"])
    flags = WORDS["credit"]
    for it in items:
        assert 0 < len(it["reasons"]) <= 4
        for r in it["reasons"]:
            name, _, words = r["value_text"].partition(": ")
            assert name == r["feature"] and words
            assert words not in ("yes", "no", "0", "1") or r["feature"] not in flags
            if r["feature"] in flags:
                assert words == dict(flags[r["feature"]])[r["value"]]
    md = (credit["out"] / "report.md").read_text()
    for it in items:
        assert f"### Case {it['id']} (row {it['row']}): decided default" in md


def test_decisions_read_by_class_name(credit: dict[str, Any]) -> None:
    c = credit["doc"]["cases"]
    assert c["class_names"] == ["paid", "default"]
    assert c["decision_rule"]["text"] == "default when P(default) > 0.3"
    assert all(it["decision"] == "default" for it in c["items"])
    md = (credit["out"] / "report.md").read_text()
    assert "decision sought: paid." in md and "Decision rule: default when P(default) > 0.3" in md
    assert "(probability of default: " in md and "decided class" not in md
    html = (credit["out"] / "report.html").read_text()
    assert "decided default" in html and "September payment" in html


def test_the_cutoff_decides_who_is_rejected_and_where_counterfactuals_land(credit: dict[str, Any]) -> None:
    booster, rejected = credit["booster"], credit["rejected"]
    features = rejected.drop(columns="application_id")
    p = booster.predict(_frame(booster, features))
    assert (p <= 0.5).sum() >= 1, "some applicants are rejected only at the bank's cutoff"
    landed = 0
    for it, (_, row) in zip(credit["doc"]["cases"]["items"], features.iterrows()):
        assert it["prediction"] == int(p[it["row"]] > CUTOFF) == 1
        cf = it.get("counterfactual") or {}
        if cf.get("status") != "optimal" or not cf.get("changes"):
            continue
        point = row.copy()
        for ch in cf["changes"]:
            point[ch["feature"]] = ch.get("after_text") if isinstance(row[ch["feature"]], str) else ch["after"]
        assert _proba(booster, point) <= CUTOFF  # the bank's boundary, on the source model
        assert cf["prediction"] == 0
        landed += 1
    assert landed >= 1


def test_no_change_breaks_the_rules_and_small_ones_are_fragile(credit: dict[str, Any]) -> None:
    doc = credit["doc"]
    immutable = set(doc["constraints"]["immutable"])
    assert {"MARRIAGE", "PAY_2_Pay_delay>=1"} <= immutable
    train = pd.read_csv(credit["dir"] / "train.csv")
    material = doc["cases"]["materiality"]
    for it in doc["cases"]["items"]:
        cf = it.get("counterfactual") or {}
        if cf.get("status") == "withheld":
            assert not cf.get("changes") and cf.get("message")
        for ch in cf.get("changes") or []:
            f = ch["feature"]
            assert f not in immutable
            if f == "AGE":
                assert ch["before"] <= ch["after"] <= ch["before"] + 5  # AGE: increase, <= AGE0 + 5
            if isinstance(ch.get("after"), (int, float)) and train[f].dtype.kind in "if":
                assert train[f].min() <= ch["after"] <= train[f].max() or ch["after"] == ch["before"]
            if isinstance(ch.get("delta"), (int, float)) and f in material:
                assert ch["fragile"] == (abs(ch["delta"]) < material[f])


def test_html_reads_plainly_in_chromium(credit: dict[str, Any], tmp_path: Path) -> None:
    from test_browser_reading import check_page, read

    doc = credit["doc"]
    facts = read((credit["out"] / "report.html").read_text(), tmp_path, "credit")
    check_page(facts, doc)
    body = facts["body"]
    assert facts["terms"], "the page uses technical terms: a glossary explains them"
    for it in doc["cases"]["items"]:
        assert f"Case {it['id']} (row {it['row']}): decided default" in body
    assert not re.search(r"Pay_delay>=1: (yes|no)\b", body)


def test_predict_and_explain_name_the_decisions(credit: dict[str, Any], capsys: pytest.CaptureFixture[str]) -> None:
    d = credit["dir"]
    assert main(["predict", str(d / "model.txt"), str(d / "rejected.csv"), "--id", "application_id",
                 "--threshold", str(CUTOFF), "--class-names", "paid,default"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == "application_id,raw,proba_0,proba_1,prediction,decision"
    assert all(ln.startswith("A1") and ln.endswith(",1,default") for ln in lines[1:])
    assert main(["explain", str(d / "model.txt"), str(d / "rejected.csv"), "--rows", "0", "--contributions",
                 "--id", "application_id", "--constraints", str(d / "credit.lum"), "--threshold", str(CUTOFF)]) == 0
    out = capsys.readouterr().out
    assert "row 0 [A10000]: decided default; principal reasons:" in out
    assert not re.search(r"\d[eE][+-]?\d", out)
    it = next(it for it in credit["doc"]["cases"]["items"] if (it.get("counterfactual") or {}).get("changes"))
    assert main(["explain", str(d / "model.txt"), str(d / "rejected.csv"), "--rows", str(it["row"]), "--sensitive",
                 "--counterfactual", "--id", "application_id", "--constraints", str(d / "credit.lum"), "--train",
                 str(d / "train.csv"), "--threshold", str(CUTOFF), "--time-limit", "10"]) == 0
    out = capsys.readouterr().out
    assert f"row {it['row']} [{it['id']}]: predicted default" in out and "target paid (P(default) <= 0.3)" in out
    assert "prediction default -> paid" in out
    assert not re.search(r"\d[eE][+-]?\d", out)
