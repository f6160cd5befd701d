"""Output paths, one rule for every command (lumber.ir.atomic): an output file's folder must exist (a missing
one is refused, naming it, before any work); an output folder is created inside an existing folder; a file is
written whole (temp file + rename in its folder) or not at all."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import pytest

from lumber.compiler.cli import build_parser, main
from lumber.ir import OutputError, atomic_open

WRITERS = {"output", "keep", "dir"}  # the dests of every option or argument naming something lumber writes


def _subparsers() -> dict[str, argparse.ArgumentParser]:
    parser = build_parser()
    action = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return dict(action.choices)


def test_every_output_option_is_declared_and_checked_up_front() -> None:
    """A command with an output option names it in OUTPUTS (file or folder), so main checks it before work."""
    for name, sub in _subparsers().items():
        dests = {a.dest for a in sub._actions} & WRITERS
        declared = sub.get_default("_outputs")
        assert set(declared) == dests, (name, declared, dests)
        assert set(declared.values()) <= {"file", "folder"}, (name, declared)


def _argvs(d: Path, out: str) -> list[list[str]]:
    m, cases, train = str(d / "model.txt"), str(d / "cases.csv"), str(d / "train.csv")
    return [["predict", m, cases, "-o", out], ["compile", m, "--emit", "c", "-o", out],
            ["compile", m, "--passes", "polynomial", "-o", out],
            ["explain", m, cases, "--counterfactual", "-o", out], ["init-constraints", m, "-o", out],
            ["batch", m, cases, "--sensitive", "-o", out],
            ["report", m, cases, "--train", train, "-o", out], ["build", str(d / "lumber.toml"), "-o", out],
            ["demo", "--keep", out], ["datasets", "export", "adult", out]]


def test_a_missing_folder_is_refused_by_every_command(age_hours: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (age_hours / "lumber.toml").write_text('[model]\npath = "model.txt"\n[data]\ncases = "cases.csv"\n')
    missing = age_hours / "no" / "such"
    for argv in _argvs(age_hours, str(missing / "out.x")):
        assert main(argv) == 2, argv
        err = capsys.readouterr().err
        assert f"the folder '{missing}' does not exist" in err and "mkdir -p" in err, (argv, err)
        assert "Traceback" not in err
    assert not (age_hours / "no").exists(), "a folder was created for a refused output"


def test_an_output_folder_is_created_inside_an_existing_one(age_hours: Path, tmp_path: Path) -> None:
    import sys

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "report"))
    from reportdocs import document

    doc = tmp_path / "report.json"
    doc.write_text(json.dumps(document()))
    assert main(["report", "--render", str(doc), "-o", str(tmp_path / "fresh")]) == 0
    assert (tmp_path / "fresh" / "report.html").is_file()
    assert main(["report", "--render", str(doc), "-o", str(tmp_path / "gone" / "fresh")]) == 2
    assert not (tmp_path / "gone").exists()


def test_a_failed_write_leaves_the_old_file_and_no_temp(tmp_path: Path) -> None:
    target = tmp_path / "model.so"
    target.write_bytes(b"old")
    with pytest.raises(RuntimeError), atomic_open(target, "wb") as fh:
        fh.write(b"half of the new")
        raise RuntimeError("the compiler died")
    assert target.read_bytes() == b"old" and sorted(p.name for p in tmp_path.iterdir()) == ["model.so"]
    with atomic_open(target, "wb") as fh:
        fh.write(b"new")
    assert target.read_bytes() == b"new" and sorted(p.name for p in tmp_path.iterdir()) == ["model.so"]


def test_the_python_api_follows_the_same_rule(age_hours: Path) -> None:
    import lumber

    forest = lumber.load(age_hours / "model.txt")
    with pytest.raises(OutputError, match="does not exist"):
        forest.save(age_hours / "missing" / "m.lumber")
    forest.save(age_hours / "m.lumber")
    assert lumber.load(age_hours / "m.lumber").n_trees == forest.n_trees
