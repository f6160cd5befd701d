"""``make bench`` (every bench script in quick mode) never overwrites a full run's results.

Each script's ``--dry-run`` prints the files the run would write (computed by the
same code that writes them) and stops before any work; run in-process, all
scripts together take a few seconds.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[1] / "bench"
SCRIPTS = sorted(p for p in BENCH.glob("*.py") if p.name != "run_all.py" and not p.name.startswith("_"))


def _outputs(script: Path, flags: list[str], monkeypatch: pytest.MonkeyPatch,
             capsys: pytest.CaptureFixture[str]) -> list[str]:
    monkeypatch.syspath_prepend(str(BENCH))
    monkeypatch.setattr(sys, "argv", [str(script), *flags, "--dry-run"])
    spec = importlib.util.spec_from_file_location(f"bench_{script.stem}", script)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, spec.name, mod)  # dataclasses look their module up there
    spec.loader.exec_module(mod)
    capsys.readouterr()
    rc = mod.main()
    assert rc in (None, 0)
    return [line for line in capsys.readouterr().out.splitlines() if line.strip()]


@pytest.mark.parametrize("script", SCRIPTS, ids=[p.stem for p in SCRIPTS])
def test_quick_runs_write_their_own_files(script: Path, monkeypatch: pytest.MonkeyPatch,
                                          capsys: pytest.CaptureFixture[str]) -> None:
    full = _outputs(script, [], monkeypatch, capsys)
    quick = _outputs(script, ["--quick"], monkeypatch, capsys)
    assert full and quick, f"{script.name} --dry-run listed no files"
    assert not set(full) & set(quick), f"{script.name} --quick would overwrite {sorted(set(full) & set(quick))}"
    assert all("quick" in Path(p).name for p in quick), quick
    assert all(Path(p).parent == BENCH / "results" for p in full + quick), full + quick


def test_run_all_passes_quick_to_every_script(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
                                              ) -> None:
    monkeypatch.syspath_prepend(str(BENCH))
    spec = importlib.util.spec_from_file_location("bench_run_all", BENCH / "run_all.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    assert mod.main(["--list"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == len(SCRIPTS) and all(line.endswith(" --quick") for line in lines), lines
