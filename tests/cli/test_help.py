"""Every option of every command has help text, and ``lumber --help`` lists the commands with examples."""

from __future__ import annotations

import argparse

import pytest

from lumber.compiler.cli import build_parser, main


def test_every_option_has_help() -> None:
    missing = []
    for action in build_parser()._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                missing += [f"{name} {a.option_strings or a.dest}" for a in sub._actions
                            if a.help is None and not isinstance(a, argparse._HelpAction)]
    assert not missing, "options without help: " + ", ".join(missing)


def test_top_level_help_lists_commands_with_examples(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["--help"])
    out = capsys.readouterr().out
    for cmd in ("inspect", "predict", "compile", "explain", "report", "build", "check", "datasets", "demo"):
        assert f"  {cmd}" in out
    assert "lumber predict model.txt cases.csv" in out and "lumber datasets export adult tour" in out
