"""``lumber explain MODEL DATA.csv --rules --train TRAIN.csv -o rules.json``."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from lumber.compiler.cli import main


@pytest.fixture(scope="module")
def files(compas_model: dict[str, Any], tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    d = tmp_path_factory.mktemp("rules_cli")
    model = d / "model.txt"
    compas_model["model"].booster_.save_model(str(model))
    train, data = d / "train.csv", d / "data.csv"
    compas_model["Xtr"].to_csv(train, index=False)
    compas_model["Xte"].iloc[:20].to_csv(data, index=False)
    return {"model": model, "train": train, "data": data, "dir": d}


def test_explain_rules(files: dict[str, Path], capsys: pytest.CaptureFixture[str]) -> None:
    out = files["dir"] / "rules.json"
    code = main(["explain", str(files["model"]), str(files["data"]), "--rules", "--train", str(files["train"]),
                 "--rows", "0:3", "-o", str(out)])
    assert code == 0
    doc = json.loads(out.read_text())
    rules = doc["analyses"]["rules"]
    assert [r["row"] for r in rules["results"]] == [0, 1, 2]
    assert rules["summary"]["n"] == 3 and rules["info"]["surrogate"] == "fitted"
    for r in rules["results"]:
        if r["status"] == "found":
            assert r["rules"][0]["probability"] >= 0.9 and r["samples"][0]["verified"]
    text = capsys.readouterr().out
    assert "counterfactual rules:" in text and "THEN class" in text


def test_explain_rules_target_and_constraints(files: dict[str, Path]) -> None:
    cons = files["dir"] / "c.lum"
    cons.write_text("immutable Race, Sex\n")
    out = files["dir"] / "r2.json"
    code = main(["explain", str(files["model"]), str(files["data"]), "--rules", "--train", str(files["train"]),
                 "--rows", "0,5", "--target", "0", "--constraints", str(cons), "--pi-c", "0.95", "-o", str(out), "-q"])
    assert code == 0
    doc = json.loads(out.read_text())["analyses"]["rules"]
    assert doc["info"]["pi_c"] == 0.95
    for r in doc["results"]:
        assert r["target"] == {"classes": [0]}
        assert all(rule["probability"] >= 0.95 for rule in r["rules"])
        assert not {"Race", "Sex"} & set(r["features"])


def test_explain_rules_needs_train(files: dict[str, Path], capsys: pytest.CaptureFixture[str]) -> None:
    out = files["dir"] / "never.json"
    code = main(["explain", str(files["model"]), str(files["data"]), "--rules", "-o", str(out)])
    assert code != 0 and not out.exists()
    assert "--rules needs training rows" in capsys.readouterr().err


def test_explain_rules_search_and_detector_flags(files: dict[str, Path], capsys: pytest.CaptureFixture[str]) -> None:
    out = files["dir"] / "r3.json"
    code = main(["explain", str(files["model"]), str(files["data"]), "--rules", "--train", str(files["train"]),
                 "--rows", "0", "--k-max", "0", "--contamination", "auto", "-o", str(out), "-q"])
    assert code == 0
    assert json.loads(out.read_text())["analyses"]["rules"]["info"]["k_max"] == 0
    bad = files["dir"] / "never2.json"
    code = main(["explain", str(files["model"]), str(files["data"]), "--rules", "--train", str(files["train"]),
                 "--rows", "0", "--contamination", "0.9", "-o", str(bad)])
    assert code != 0 and not bad.exists()
    assert "--contamination '0.9' is not accepted" in capsys.readouterr().err


def test_explain_rules_fallback_and_cell_size(files: dict[str, Path], capsys: pytest.CaptureFixture[str]) -> None:
    out = files["dir"] / "r_fallback.json"
    code = main(["explain", str(files["model"]), str(files["data"]), "--rules", "--train", str(files["train"]),
                 "--rows", "0", "--fallback", "smallest", "--min-cell-rows", "5", "-o", str(out), "-q"])
    assert code == 0
    info = json.loads(out.read_text())["analyses"]["rules"]["info"]
    assert info["fallback"] == "smallest" and info["min_cell_rows"] == 5 and info["robust_search"] is False
    code = main(["explain", str(files["model"]), str(files["data"]), "--rules", "--train", str(files["train"]),
                 "--rows", "0", "--min-cell-rows", "0", "-q"])
    assert code != 0 and "min_cell_rows must be >= 1" in capsys.readouterr().err


def test_explain_rules_robust_search_flag(files: dict[str, Path]) -> None:
    """``--robust-search`` reaches the explainer; a sample it returns is a verified inlier with its report."""
    out = files["dir"] / "r_robust.json"
    code = main(["explain", str(files["model"]), str(files["data"]), "--rules", "--train", str(files["train"]),
                 "--rows", "0", "--robust-search", "-o", str(out), "-q"])
    assert code == 0
    rules = json.loads(out.read_text())["analyses"]["rules"]
    assert rules["info"]["robust_search"] is True
    assert any(case.get("samples") for case in rules["results"])
    for case in rules["results"]:
        for s in case.get("samples", []):
            assert s["verified"] and s["inlier"] and len(s["robustness"]) == 3
