"""Golden tests: every construct and every diagnostic of the constraint language.

Each ``golden/<case>.lum`` is compiled against the schema named on its first
line (``#! schema: classifier|multiclass|regression|none``, default
classifier) and the output is compared with ``golden/<case>.expected``:
diagnostics as rendered for a user, or for a valid file the statement count,
warnings, the canonical print of the compiled model and its JSON. Rewrite the
expected files with ``pytest tests/dsl --update-goldens`` and review the diff.
"""

from __future__ import annotations

import json
import re
import warnings
from pathlib import Path

import pytest

from lumber.compiler.dsl import ConstraintError, check_constraints, format_constraints, format_text, parse_constraints
from lumber.ir import CompileError

from .schemas import SCHEMAS

GOLDEN = Path(__file__).parent / "golden"
CASES = sorted(p.stem for p in GOLDEN.glob("*.lum") if not p.stem.startswith("_"))


def schema_name(text: str) -> str:
    m = re.match(r"#!\s*schema:\s*(\w+)", text)
    return m.group(1) if m else "classifier"


def run_case(name: str) -> tuple[str, bool]:
    """The rendered outcome of one case, and whether it compiled."""
    text = (GOLDEN / f"{name}.lum").read_text(encoding="utf-8", errors="replace")
    schema = SCHEMAS[schema_name(text)]
    try:
        result = check_constraints(Path(f"{name}.lum"), schema)
    except ConstraintError as exc:
        return exc.render() + "\n", False
    c = result.constraints
    out = [f"ok: {result.statements} statements"]
    out += [w.render() for w in result.warnings]
    out.append("--- canonical")
    out.append(format_constraints(c, schema).rstrip("\n"))
    out.append("--- json")
    out.append(json.dumps(c.to_dict(), indent=1, sort_keys=True, default=repr))
    return "\n".join(out) + "\n", True


def test_cases_exist() -> None:
    assert len(CASES) >= 60


@pytest.mark.parametrize("name", CASES)
def test_golden(name: str, monkeypatch: pytest.MonkeyPatch, update_goldens: bool) -> None:
    monkeypatch.chdir(GOLDEN)
    got, ok = run_case(name)
    expected_path = GOLDEN / f"{name}.expected"
    if update_goldens or not expected_path.exists():
        expected_path.write_text(got, encoding="utf-8")
        if not update_goldens:
            pytest.fail(f"wrote missing golden {expected_path.name}; review it")
    assert got == expected_path.read_text(encoding="utf-8")
    if name.startswith("err_"):
        assert not ok, "error cases must fail"
    elif name.startswith(("ok_", "warn_")):
        assert ok, "valid cases must compile"
    if name.startswith("warn_"):
        assert "warning:" in got


@pytest.mark.parametrize("name", [c for c in CASES if c.startswith(("ok_", "warn_"))])
def test_valid_cases_round_trip(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Canonical print compiles back to an equal model; the source formatter is a fixed point."""
    monkeypatch.chdir(GOLDEN)
    text = (GOLDEN / f"{name}.lum").read_text(encoding="utf-8")
    schema = SCHEMAS[schema_name(text)]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        c = parse_constraints(Path(f"{name}.lum"), schema)
        printed = format_constraints(c, schema)
        assert parse_constraints(printed, schema) == c
        assert format_constraints(parse_constraints(printed, schema), schema) == printed
        once = format_text(text)
        assert format_text(once) == once
        assert parse_constraints(once, schema, base_dir=GOLDEN) == c


def test_docs_catalogue_is_current() -> None:
    """docs/constraints.md's error catalogue is exactly what the golden cases produce."""
    from .catalogue import catalogue, current_section

    assert current_section() == catalogue(), "regenerate with: .venv/bin/python -m tests.dsl.catalogue"


def test_errors_are_compile_errors() -> None:
    with pytest.raises(CompileError, match="unknown feature 'Agee'"):
        parse_constraints("Agee: increase\n", SCHEMAS["classifier"])
