"""Fuzzing: whatever the input, the constraint compiler answers with diagnostics, never a crash.

Inputs are sentences of the grammar (``hypothesis.extra.lark.from_lark``),
mutations of valid files, token soup, arbitrary text and arbitrary bytes.
Each must compile or raise :class:`lumber.ir.CompileError` whose rendering
names a position; the formatter must be a fixed point on whatever parses.
"""

from __future__ import annotations

import os
import tempfile
import warnings
from pathlib import Path

import lark
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.extra.lark import from_lark

from lumber.compiler.dsl import format_text, parse_constraints
from lumber.compiler.dsl.parse import KEYWORDS, grammar_text
from lumber.ir import CompileError

from .schemas import SCHEMAS

GOLDEN = Path(__file__).parent / "golden"
VALID = [p.read_text(encoding="utf-8") for p in sorted(GOLDEN.glob("ok_*.lum"))]
TOKENS = sorted(KEYWORDS) + ["Age", "Age0", "dIncome", "Housing", "own", "`x>=1`", '"s"', "3", "0.5", "1e3",
                             ":", ",", "{", "}", "(", ")", "<", "<=", ">=", "==", "=", "+", "-", "*", "/", "\n",
                             "#", "\\\n", "isolation-forest", "contamination=0.1"]
FUZZ = settings(deadline=None, suppress_health_check=list(HealthCheck))


def outcome(text: str, schema_name: str = "classifier") -> None:
    """Compile ``text``: success, or a CompileError with located diagnostics; nothing else."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            parse_constraints(text, SCHEMAS[schema_name])
    except CompileError as exc:
        assert exc.diagnostics
        rendered = exc.render()
        assert "error:" in rendered
        assert "Traceback" not in rendered
    else:
        once = format_text(text)
        assert format_text(once) == once


@pytest.fixture(scope="module")
def sentences() -> st.SearchStrategy[str]:
    p = lark.Lark(grammar_text(), parser="lalr")
    return from_lark(p, start="start", explicit={
        "WS": st.just(" "), "CONTINUATION": st.just(" \\\n"), "COMMENT": st.just("# c"),
        "_NL": st.sampled_from(["\n", "\n\n", "\n# note\n"]),
        "NAME": st.sampled_from(["Age", "Income", "Debt", "Housing", "Sex", "Age0", "dIncome", "own", "l1", "std"]),
    })


@FUZZ
@given(data=st.data())
def test_grammar_sentences(sentences: st.SearchStrategy[str], data: st.DataObject) -> None:
    text = data.draw(sentences)
    outcome(text, data.draw(st.sampled_from(sorted(SCHEMAS))))


@FUZZ
@given(base=st.sampled_from(VALID), cuts=st.lists(st.tuples(st.integers(0, 400), st.integers(0, 6),
                                                             st.sampled_from(TOKENS + [""])), max_size=4))
def test_mutated_valid_files(base: str, cuts: list[tuple[int, int, str]]) -> None:
    text = base
    for pos, length, insert in cuts:
        pos = pos % (len(text) + 1)
        text = text[:pos] + insert + text[pos + length:]
    outcome(text)


@FUZZ
@given(st.lists(st.sampled_from(TOKENS), max_size=25).map(" ".join))
def test_token_soup(text: str) -> None:
    outcome(text)


@FUZZ
@given(st.text(max_size=200))
def test_arbitrary_text(text: str) -> None:
    outcome(text)


@FUZZ
@given(st.binary(max_size=200))
def test_arbitrary_bytes_in_a_file(data: bytes) -> None:
    fd, name = tempfile.mkstemp(suffix=".lum")
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                parse_constraints(Path(name), SCHEMAS["classifier"])
        except CompileError as exc:
            assert exc.diagnostics
    finally:
        os.unlink(name)


def test_not_utf8_is_reported_with_position(tmp_path: Path) -> None:
    f = tmp_path / "bad.lum"
    f.write_bytes(b"immutable Sex\nAge: increase \xff\n")
    with pytest.raises(CompileError, match=r"bad.lum:2:15: error: file is not UTF-8 text \(byte 0xff\)"):
        parse_constraints(f, SCHEMAS["classifier"])


def test_huge_flat_expression_is_fine() -> None:
    text = "Income" + " + Income" * 3000 + " <= 5\n"
    c = parse_constraints(text, SCHEMAS["classifier"])
    assert c.relations[0].x_terms == (("Income", 3001.0),)


@pytest.mark.parametrize("text", ["-" * 500 + "Income <= 1", "(" * 2000 + "Income" + ")" * 2000 + " <= 1"])
def test_deep_nesting_is_a_diagnostic(text: str) -> None:
    with pytest.raises(CompileError, match="nested too deeply"):
        parse_constraints(text, SCHEMAS["classifier"])
