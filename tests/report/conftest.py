"""A real report, made once per session with ``lumber report`` from the build tests' small project."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "build"))


@pytest.fixture(scope="session")
def real_report(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Folder holding report.html/.md/.json of the project's four cases (no compile targets)."""
    from buildproject import make_project
    from lumber.compiler.cli import main

    proj = make_project(tmp_path_factory.mktemp("report-project"))
    out = proj / "report"
    code = main(["report", str(proj / "model.txt"), str(proj / "cases.csv"), "--train", str(proj / "train.csv"),
                 "--constraints", str(proj / "recourse.lum"), "--time-limit", "10", "-o", str(out),
                 "--title", "Income model"])
    assert code == 0
    return out
