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


def test_shell_completion_lists_commands_and_options(monkeypatch: pytest.MonkeyPatch) -> None:
    """What argcomplete answers a shell (``eval "$(register-python-argcomplete lumber)"``) over lumber's parser."""
    import io
    import sys

    import argcomplete

    import lumber.compiler.cli as cli

    real = argcomplete.autocomplete
    # argcomplete writes debug output to fd 9, which under pytest is pytest's own: keep it on stderr
    monkeypatch.setattr(argcomplete.finders.CompletionFinder, "_init_debug_stream", lambda self: None)

    def complete(line: str) -> list[str]:
        monkeypatch.setenv("_ARGCOMPLETE", "1")
        monkeypatch.setenv("COMP_LINE", line)
        monkeypatch.setenv("COMP_POINT", str(len(line)))
        monkeypatch.setenv("_ARGCOMPLETE_IFS", "\v")
        out = io.StringIO()

        def done(code: int = 0) -> None:
            raise SystemExit(code)

        monkeypatch.setattr(argcomplete, "autocomplete",
                            lambda parser: real(parser, output_stream=out, exit_method=done))  # type: ignore[misc]
        monkeypatch.setattr(sys, "argv", ["lumber"])
        with pytest.raises(SystemExit):
            cli.main()  # argv None: the way the console script starts
        return out.getvalue().split("\v")

    assert {"predict", "explain", "report", "build"} <= set(complete("lumber "))
    assert "--no-header" in complete("lumber report model.txt cases.csv --no")


def test_every_command_describes_model_files_alike() -> None:
    """The README's list of model files, once: compile said "pickle" (read only with --trust-pickle) and left
    out CatBoost and .skops; report said "model file"."""
    from lumber.compiler.cli._options import MODEL_HELP

    for action in build_parser()._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                for a in sub._actions:
                    if a.dest == "model" and not a.option_strings and name not in ("init-constraints",):
                        assert a.help.startswith(MODEL_HELP), (name, a.help)
    assert "pickle with --trust-pickle" in MODEL_HELP and "CatBoost" in MODEL_HELP
