"""The README's command line tour runs: every ``$ lumber ...`` line, on the files ``lumber datasets export`` writes.

Numbers differ (the test exports a 10-tree model to stay fast), so each command's
output is compared in shape with the README's: the exit code, then the first line's
leading word (a CSV header or JSON keys exactly).
"""

from __future__ import annotations

import json
import re
import shlex
from pathlib import Path

import pytest

from lumber.compiler.cli import main

README = Path(__file__).resolve().parents[2] / "README.md"


def tour(heading: str = "Command line tour") -> list[tuple[str, list[str]]]:
    """(command, README's output lines) for each ``$ ...`` line of a README section."""
    text = README.read_text(encoding="utf-8")
    section = text.split(f"## {heading}", 1)[1].split("\n## ", 1)[0]
    steps: list[tuple[str, list[str]]] = []
    for block in re.findall(r"```\n(.*?)```", section, flags=re.S):
        lines = block.splitlines()
        i = 0
        while i < len(lines):
            line = lines[i]
            if not line.startswith("$ "):
                i += 1
                continue
            cmd = line[2:]
            while cmd.rstrip().endswith("\\"):
                i += 1
                cmd = cmd.rstrip()[:-1] + " " + lines[i].strip()
            i += 1
            out = []
            while i < len(lines) and not lines[i].startswith("$ ") and lines[i].strip():
                out.append(lines[i])
                i += 1
            steps.append((cmd, out))
    return steps


def _shape(line: str) -> object:
    if line.startswith("{"):
        return sorted(json.loads(line))
    if "," in line and " " not in line:
        return line
    return line.split()[0]


def test_readme_tour_runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    steps = tour()
    assert len(steps) >= 10 and steps[0][0].startswith("lumber datasets export adult tour")
    monkeypatch.chdir(tmp_path)
    for cmd, want in steps:
        if cmd.startswith("echo"):
            continue
        if cmd.startswith("lumber datasets export"):  # the same files, a smaller model: seconds, not minutes
            assert main(["datasets", "export", "adult", "tour", "--trees", "10", "--leaves", "8"]) == 0
            monkeypatch.chdir(tmp_path / "tour")
            capsys.readouterr()
            continue
        argv = shlex.split(cmd, comments=True)
        head = None
        if "|" in argv:  # only `| head -N` is used
            k = argv.index("|")
            assert argv[k + 1] == "head", cmd
            head, argv = int(argv[k + 2].lstrip("-")), argv[:k]
        assert argv[0] == "lumber", cmd
        if "adult_cut.txt" in argv:  # the README's bad-input example: the first 3000 bytes of a model
            Path("adult_cut.txt").write_bytes(Path("model.txt").read_bytes()[:3000])
        rc = main(argv[1:])
        out, err = capsys.readouterr()
        lines = out.splitlines()
        if head is not None:
            lines = lines[:head]
        if "adult_cut.txt" in argv:
            assert rc == 2 and "error: truncated model file" in err, (cmd, err)
            continue
        if want and want[0].startswith("error:"):  # a README error example: exit 2, its lines as shown
            assert rc == 2 and err.splitlines() == want, (cmd, err)
            assert "-o" not in argv or not Path(argv[argv.index("-o") + 1]).parent.exists()
            continue
        assert rc == 0, f"{cmd}\n{err}"
        assert "Traceback" not in err
        if want:
            assert lines, f"{cmd}: no output, the README shows {want[0]!r}"
            assert _shape(lines[0]) == _shape(want[0]), f"{cmd}:\n  got  {lines[0]}\n  want {want[0]}"


def test_readme_constraint_file_commands_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                             capsys: pytest.CaptureFixture[str]) -> None:
    """The "Constraint files" section's commands on the tour's files: they named a model nobody had
    (``adult_rf.skops``) and files it never showed. ``$ cat F`` lines write the shown text to F; the
    ``fmt --diff`` input is the diff's old side. Exit codes as the README states (check: 1 on errors)."""
    steps = tour("Constraint files")
    assert [c for c, _ in steps if c.startswith("lumber check")] == [
        "lumber check adult.lum --model model.txt", "lumber check mine.lum --model model.txt"]
    monkeypatch.chdir(tmp_path)
    assert main(["datasets", "export", "adult", "tour", "--trees", "10", "--leaves", "8"]) == 0
    monkeypatch.chdir(tmp_path / "tour")
    section = README.read_text(encoding="utf-8").split("## Constraint files", 1)[1].split("\n## ", 1)[0]
    diff = section.split("$ lumber fmt --diff messy.lum", 1)[1].split("```", 1)[0].splitlines()[1:]
    Path("messy.lum").write_text("".join(line[1:] + "\n" for line in diff
                                         if line[:1] in ("-", " ") and not line.startswith("---")))
    capsys.readouterr()
    for cmd, want in steps:
        argv = shlex.split(cmd, comments=True)
        if argv[0] == "cat":
            Path(argv[1]).write_text("\n".join(want) + "\n")
            continue
        assert argv[0] == "lumber", cmd
        rc = main(argv[1:])
        out, err = capsys.readouterr()
        assert "Traceback" not in err
        assert rc == (1 if "mine.lum" in cmd else 0), f"{cmd}\n{err}"
        shown = (out + err).splitlines()
        if want:
            assert shown and _shape(shown[0]) == _shape(want[0]), f"{cmd}:\n  got  {shown[:1]}\n  want {want[0]}"
            if "mine.lum" in cmd:
                assert [x for x in shown if ": error: " in x] == [x for x in want if ": error: " in x]
