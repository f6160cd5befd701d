"""``--no-header`` means one thing in every command that reads CSV files: no header row, columns by position in
the model's feature order. ``report`` and ``build`` (``[data] header = false``) give what a header gives."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from builders import categorical, make_forest
from lumber.compiler.cli import main
from lumber.ir import PostTransform, Task


@pytest.fixture
def project(tmp_path: Path) -> Path:
    f = make_forest([("a", 0.5, -1.0, ("c", {1, 2}, 0.5, 2.0)), ("a", 1.5, 0.25, -0.25)],
                    ["a", categorical("c", ["x", "y", "z"])], task=Task.BINARY,
                    post_transform=PostTransform.SIGMOID, classes=[0, 1])
    f.save(tmp_path / "m.lumber")
    frame = pd.DataFrame({"a": [1.0, 0.2, 2.0, 0.7], "c": ["y", "x", "z", "x"]})
    frame.to_csv(tmp_path / "named.csv", index=False)
    frame.to_csv(tmp_path / "bare.csv", index=False, header=False)
    return tmp_path


def _cases(out: Path) -> list:  # type: ignore[type-arg]
    doc = json.loads((out / "report.json").read_text())
    return [{k: c.get(k) for k in ("row", "prediction", "sensitive")} for c in doc["cases"]["items"]]


def test_report_no_header_matches_the_named_file(project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    common = ["--analyses", "sensitive", "--sections", "cases", "--formats", "json", "--scale", "none"]
    assert main(["report", str(project / "m.lumber"), str(project / "named.csv"), "-o", str(project / "r1"),
                 *common]) == 0
    assert main(["report", str(project / "m.lumber"), str(project / "bare.csv"), "--no-header", "-o",
                 str(project / "r2"), *common]) == 0
    assert "explaining 4 of the 4 cases" in capsys.readouterr().err
    assert _cases(project / "r1") == _cases(project / "r2") and len(_cases(project / "r1")) == 4
    assert main(["report", str(project / "m.lumber"), str(project / "bare.csv"), "-o", str(project / "r3"),
                 *common]) == 2  # without the flag a bare file is refused, not read with its first row lost
    assert "have no column" in capsys.readouterr().err


def test_build_no_header_flag_and_key(project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    toml = ('[model]\npath = "m.lumber"\n[data]\ncases = "{cases}"\n{extra}[compile]\ntargets = []\n'
            '[explain]\nanalyses = ["sensitive"]\nscale = "none"\n[report]\nsections = ["cases"]\nformats = ["json"]\n')
    (project / "named.toml").write_text(toml.format(cases="named.csv", extra=""))
    (project / "bare.toml").write_text(toml.format(cases="bare.csv", extra="header = false\n"))
    (project / "flag.toml").write_text(toml.format(cases="bare.csv", extra=""))
    assert main(["build", str(project / "named.toml"), "-q", "-o", str(project / "b1")]) == 0
    assert main(["build", str(project / "bare.toml"), "-q", "-o", str(project / "b2")]) == 0
    assert main(["build", str(project / "flag.toml"), "-q", "--no-header", "-o", str(project / "b3")]) == 0
    assert _cases(project / "b1") == _cases(project / "b2") == _cases(project / "b3")
    capsys.readouterr()
    assert main(["build", str(project / "flag.toml"), "-q", "-o", str(project / "b4")]) == 2
    assert "have no column" in capsys.readouterr().err
    (project / "label.toml").write_text(toml.format(cases="bare.csv", extra='header = false\nlabel = "y"\n'))
    assert main(["build", str(project / "label.toml"), "-q", "-o", str(project / "b5")]) == 2
    assert "a label column needs a header row" in capsys.readouterr().err


def test_no_header_has_one_help_text_everywhere() -> None:
    import argparse

    from lumber.compiler.cli import build_parser

    texts = {}
    for action in build_parser()._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                for a in sub._actions:
                    if "--no-header" in a.option_strings:
                        texts[name] = a.help.split(" (overrides")[0]
    assert {"predict", "explain", "batch", "report", "build"} <= set(texts)
    assert len(set(texts.values())) == 1, texts
    assert np.all([isinstance(t, str) for t in texts.values()])
