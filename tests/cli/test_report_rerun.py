"""``lumber report`` into a folder holding an earlier report. The build behind it skips a build whose
inputs and build file are unchanged; a report has no build file, so the key held only the input files
and a re-run with another ``--norm`` (or ``--time-limit``, ``--target`` ...) said nothing and kept the
earlier results: l1 counterfactuals under an l2 request. The report's settings now stand for the file."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from lumber.compiler.cli import main


def _norms(doc: dict) -> set[str]:  # type: ignore[type-arg]
    return {c["counterfactual"]["norm"] for c in doc["cases"]["items"] if c.get("counterfactual")}


def test_a_rerun_with_other_options_recomputes(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    import lightgbm as lgb

    rng = np.random.default_rng(0)
    X = pd.DataFrame({"Age": rng.integers(17, 90, 300), "Hours": rng.integers(1, 99, 300)}).astype(float)
    y = ((X.Age > 40) & (X.Hours > 35)).astype(int)
    lgb.LGBMClassifier(n_estimators=4, num_leaves=4, verbose=-1, min_child_samples=5).fit(X, y) \
        .booster_.save_model(str(tmp_path / "model.txt"))
    X.iloc[:3].to_csv(tmp_path / "cases.csv", index=False)
    out = tmp_path / "rep"
    argv = ["report", str(tmp_path / "model.txt"), str(tmp_path / "cases.csv"), "--analyses", "counterfactual",
            "--time-limit", "5", "-q", "-o", str(out)]
    assert main(argv) == 0
    assert _norms(json.loads((out / "report.json").read_text())) == {"l1"}
    first = (out / "manifest.json").read_text()
    assert main(argv) == 0  # the same settings: up to date, the folder untouched
    assert (out / "manifest.json").read_text() == first
    assert main(argv + ["--norm", "l2"]) == 0
    assert _norms(json.loads((out / "report.json").read_text())) == {"l2"}
