"""Ctrl-C: "interrupted", exit 130, nothing half-written, at any moment.

A SIGINT in the first second of ``lumber compile`` (numpy and the commands still loading) escaped as a
KeyboardInterrupt traceback (exit -2): ``main`` only caught it around the command itself, and the CLI
module imported the IR (numpy) at its top. Now the CLI module loads nothing heavy and ``main`` catches
the interrupt from its first line; a report interrupted mid-way leaves no output directory (nor a staged
one) and an earlier report where it was.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from lumber.compiler.cli import main


def test_the_cli_module_loads_nothing_heavy() -> None:
    code = ("import sys, lumber.compiler.cli; "
            "print(sorted(m for m in ('numpy', 'pandas', 'lumber.ir') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def test_an_interrupt_while_the_commands_load(monkeypatch: pytest.MonkeyPatch,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    import lumber.compiler.cli as cli

    def loading() -> list:  # type: ignore[type-arg]
        raise KeyboardInterrupt

    monkeypatch.setattr(cli, "_commands", loading)
    assert main(["inspect", "x.txt"]) == 130
    assert capsys.readouterr().err.strip() == "interrupted"


def test_a_report_interrupted_mid_way_writes_nothing(age_hours: Path, monkeypatch: pytest.MonkeyPatch,
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    import lumber.compiler.api.counterfactual as cf

    model, cases, out = str(age_hours / "model.txt"), str(age_hours / "cases.csv"), age_hours / "rep"
    argv = ["report", model, cases, "--analyses", "counterfactual", "--time-limit", "5", "-q", "-o", str(out)]
    real, calls = cf.solve_counterfactual, []

    def second_case_interrupted(*a, **kw):  # type: ignore[no-untyped-def]
        calls.append(1)
        if len(calls) == 2:
            raise KeyboardInterrupt
        return real(*a, **kw)

    monkeypatch.setattr(cf, "solve_counterfactual", second_case_interrupted)
    assert main(argv) == 130
    assert "interrupted" in capsys.readouterr().err
    assert not out.exists() and [p.name for p in age_hours.iterdir() if p.name.startswith(".")] == []
    monkeypatch.setattr(cf, "solve_counterfactual", real)
    assert main(argv) == 0
    before = {p.name: p.read_bytes() for p in out.iterdir() if p.is_file()}
    calls.clear()
    monkeypatch.setattr(cf, "solve_counterfactual", second_case_interrupted)
    argv += ["--norm", "l2"]  # another norm: computed (and interrupted) again
    assert main(argv) == 130
    assert {p.name: p.read_bytes() for p in out.iterdir() if p.is_file()} == before
