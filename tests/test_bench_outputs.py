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


def test_counterfactual_header_does_not_take_a_partial_runs_load(monkeypatch: pytest.MonkeyPatch) -> None:
    """A run of some sections merges into the file: the header names the machine only, and each section
    keeps its own run line (a table4-only run at load 9 must not relabel the other sections)."""
    monkeypatch.syspath_prepend(str(BENCH))
    spec = importlib.util.spec_from_file_location("bench_cf_header", BENCH / "counterfactual.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    out = {"machine": "x86_64, 2 cores", "versions": {"highspy": "1.0"}, "load": "9.0 9.0 9.0",
           "note": "1 origin, time limit 60 s", "table4": {"protocol": dict(mod.OCEAN_IF)},
           "dice": {"adult": {"validity": 1.0, "R": 1.5, "median_s": 2.0}},
           "section_meta": {"table4": {"run": "today", "load": "9.0 9.0 9.0", "note": "time limit 30 s per query"},
                            "dice": {"run": "last week", "load": "1.0 1.0 1.0", "note": "20 origins"}}}
    text = mod.markdown(out)
    header = text.splitlines()[2]
    assert header.startswith("Machine: x86_64, 2 cores; highspy 1.0.") and "9.0" not in header and "60 s" not in header
    assert "Run today, load average 9.0 9.0 9.0. time limit 30 s per query" in text
    assert "Run last week, load average 1.0 1.0 1.0. 20 origins" in text


def test_oblivious_recompose_forms_option(monkeypatch: pytest.MonkeyPatch) -> None:
    """``bench/oblivious.py --recompose --forms grow:10 grow:10:nobins`` picks the exact forms; a bad spec
    is a clear error naming the accepted form."""
    monkeypatch.syspath_prepend(str(BENCH))
    spec = importlib.util.spec_from_file_location("bench_oblivious_forms", BENCH / "oblivious.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, spec.name, mod)
    spec.loader.exec_module(mod)
    assert mod.parse_forms(["grow:10", "pack:8:nobins"]) == (("grow", 10), ("pack", 8, False))
    assert mod.parse_forms(["grow:10:r9", "grow:10:nobins:r2"]) == (("grow", 10, True, 9), ("grow", 10, False, 2))
    assert mod.parse_forms(["grow:auto"]) == (("grow", "auto"),)
    assert mod.parse_forms(None) == mod.RECOMPOSE_FORMS
    for bad in ("grow", "grow:x", "fast:8", "grow:10:bins", "grow:10:r", "grow:10:rx", "grow:10:r2:r3",
                "grow:10:nobins:nobins", "grow:0", "grow:automatic"):
        with pytest.raises(SystemExit, match="STRATEGY:DEPTH"):
            mod.parse_forms([bad])


def test_a_missing_output_folder_is_refused_before_the_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                           capsys: pytest.CaptureFixture[str]) -> None:
    """``--output`` in a folder that does not exist stops at once, naming the folder (not a traceback
    after the whole run)."""
    missing = tmp_path / "not-there"
    with pytest.raises(SystemExit, match=f"the folder '{missing}' does not exist"):
        _outputs(BENCH / "counterfactual.py", ["--output", str(missing / "cf")], monkeypatch, capsys)
    assert not missing.exists()
