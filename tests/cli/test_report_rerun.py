"""``lumber report`` into a folder holding an earlier report. The build behind it skips a build whose
inputs and build file are unchanged; a report has no build file, so the key held only the input files
and a re-run with another ``--norm`` (or ``--time-limit``, ``--target`` ...) said nothing and kept the
earlier results: l1 counterfactuals under an l2 request. The report's settings now stand for the file."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from lumber.compiler.cli import main


def _norms(doc: dict) -> set[str]:  # type: ignore[type-arg]
    return {c["counterfactual"]["norm"] for c in doc["cases"]["items"] if c.get("counterfactual")}


def test_a_rerun_with_other_options_recomputes(age_hours: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = age_hours / "rep"
    argv = ["report", str(age_hours / "model.txt"), str(age_hours / "cases.csv"), "--analyses", "counterfactual",
            "--time-limit", "5", "-q", "-o", str(out)]
    assert main(argv) == 0
    assert _norms(json.loads((out / "report.json").read_text())) == {"l1"}
    first = (out / "manifest.json").read_text()
    assert main(argv) == 0  # the same settings: up to date, the folder untouched
    assert (out / "manifest.json").read_text() == first
    assert main(argv + ["--norm", "l2"]) == 0
    assert _norms(json.loads((out / "report.json").read_text())) == {"l2"}
