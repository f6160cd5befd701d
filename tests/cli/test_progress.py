"""Progress on stderr for long work (batch, build, report, multi-row explain): a bar on a terminal, timed
log lines when stderr is not one, nothing with --quiet, never on stdout. A fake TTY stands in for the
terminal, a fake clock for the time between log lines."""

from __future__ import annotations

import io
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from builders import categorical, make_forest
from lumber.compiler.cli import main
from lumber.runtime.progress import Progress, enabled
from lumber.ir import PostTransform, Task


class FakeTTY(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_enabled_unless_quiet() -> None:
    assert enabled(stream=FakeTTY()) and not enabled(quiet=True, stream=FakeTTY())
    assert enabled(stream=io.StringIO()) and not enabled(quiet=True, stream=io.StringIO())


def test_bar_draws_on_a_terminal_only() -> None:
    tty, pipe = FakeTTY(), io.StringIO()
    for stream in (tty, pipe):
        with Progress(3, 0, None, "work", stream) as bar:
            for _ in range(3):
                bar.update(1)
    assert "work" in tty.getvalue() and "3/3" in tty.getvalue()
    assert pipe.getvalue() == ""


def test_log_lines_when_not_a_terminal() -> None:
    """Off a terminal: a line per LOG_EVERY seconds with rows done, rows/s and time left, and a last line;
    a run shorter than that logs nothing."""
    from lumber.runtime.progress import LOG_EVERY

    now = [0.0]
    pipe = io.StringIO()
    with Progress(200, 0, True, "counterfactual", pipe, clock=lambda: now[0]) as bar:
        bar.update(10)
        assert pipe.getvalue() == ""
        now[0] = LOG_EVERY
        bar.update(10)  # 20 rows in 30 s
        now[0] = 2 * LOG_EVERY
        bar.update(20, failed=1)
        now[0] = 100.0
        bar.update(160)
    lines = pipe.getvalue().splitlines()
    assert lines[0] == "counterfactual: 20/200 rows, 0.67 rows/s, about 4m30s left"
    assert lines[1] == "counterfactual: 40/200 rows, 1 failed, 0.67 rows/s, about 4m00s left"
    assert lines[-1] == "counterfactual: 200/200 rows, 1 failed, 2.00 rows/s in 1m40s"
    quick = io.StringIO()
    with Progress(5, 0, True, "work", quick, clock=lambda: 1.0) as bar:
        bar.update(5)
    assert quick.getvalue() == ""


@pytest.fixture
def files(tmp_path: Path) -> Path:
    f = make_forest([("a", 0.5, -1.0, ("c", {1, 2}, 0.5, 2.0)), ("a", 1.5, 0.25, -0.25)],
                    ["a", categorical("c", ["x", "y", "z"])], task=Task.BINARY,
                    post_transform=PostTransform.SIGMOID, classes=[0, 1])
    f.save(tmp_path / "m.lumber")
    pd.DataFrame({"a": [1.0, 0.2, 2.0, 0.7], "c": ["y", "x", "z", "x"]}).to_csv(tmp_path / "cases.csv", index=False)
    return tmp_path


def _run(argv: list[str], monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> tuple[str, str]:
    tty = FakeTTY()
    capsys.readouterr()
    monkeypatch.setattr(sys, "stderr", tty)
    try:
        assert main(argv) == 0
    finally:
        monkeypatch.undo()
    return capsys.readouterr().out, tty.getvalue()


def test_explain_report_batch_show_progress_on_a_terminal(files: Path, monkeypatch: pytest.MonkeyPatch,
                                                          capsys: pytest.CaptureFixture[str]) -> None:
    m, cases = str(files / "m.lumber"), str(files / "cases.csv")
    explain = ["explain", m, cases, "--counterfactual", "--time-limit", "5"]
    out, err = _run(explain, monkeypatch, capsys)
    assert "counterfactual" in err and "4/4" in err and "4/4" not in out
    assert "4/4" not in _run(explain + ["--rows", "1"], monkeypatch, capsys)[1]  # one case: no bar
    assert _run(explain + ["--quiet"], monkeypatch, capsys)[1] == ""
    report = ["report", m, cases, "--analyses", "sensitive", "--sections", "cases", "--formats", "json",
              "--scale", "none", "-o", str(files / "r")]
    out, err = _run(report, monkeypatch, capsys)
    assert "explaining 4 of the 4 cases" in err and "sensitive" in err and "4/4" in err
    assert _run(report + ["--quiet"], monkeypatch, capsys)[1] == ""
    batch = ["batch", m, cases, "--sensitive", "-o", str(files / "b.jsonl")]
    assert "4/4" in _run(batch, monkeypatch, capsys)[1]
    assert _run(batch + ["--quiet", "-o", str(files / "b2.jsonl")], monkeypatch, capsys) == ("", "")


def test_no_progress_when_stderr_is_not_a_terminal(files: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["explain", str(files / "m.lumber"), str(files / "cases.csv"), "--counterfactual"]) == 0
    assert "4/4" not in capsys.readouterr().err


def test_multi_row_rules_show_progress_on_a_terminal(files: Path, monkeypatch: pytest.MonkeyPatch,
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    rng = np.random.default_rng(0)
    train = pd.DataFrame({"a": rng.uniform(0, 2, 200), "c": rng.choice(["x", "y", "z"], 200)})
    train.to_csv(files / "train.csv", index=False)
    explain = ["explain", str(files / "m.lumber"), str(files / "cases.csv"), "--rules", "--train",
               str(files / "train.csv"), "--rows", "0,1"]
    out, err = _run(explain, monkeypatch, capsys)
    assert "rules" in err and "2/2" in err and "row 1:" in out and "row 1:" not in err
    assert _run(explain + ["--quiet"], monkeypatch, capsys)[1] == ""
