"""Syntax errors as compiler diagnostics: friendly messages from example errors.

An error whose parser state and token match those of a known malformed example
gets that example's message and hint; others list what the parser expected.
Every example is tried at the start of a file and after a statement, since
LALR states differ between the two.
"""

from __future__ import annotations

import difflib
import re
from functools import lru_cache
from typing import Any, Callable

from lark import Token
from lark.exceptions import UnexpectedCharacters, UnexpectedEOF, UnexpectedInput, UnexpectedToken

from lumber.ir import Diagnostic, SourceSpan
from lumber.ir.diagnostics import error

from .lexicon import CLAUSE_KEYWORDS, KEYWORDS, STATEMENT_KEYWORDS

_TOKEN_NAMES = {
    "NAME": "a name", "QNAME": "a `quoted name`", "STRING": 'a "string"', "NUMBER": "a number",
    "_NL": "end of line", "$END": "end of file", "COMMA": "','", "COLON": "':'", "LPAR": "'('",
    "RPAR": "')'", "LBRACE": "'{'", "RBRACE": "'}'", "LE": "'<='", "GE": "'>='", "EQ": "'=='", "NE": "'!='",
    "LT": "'<'", "GT": "'>'", "ASSIGN": "'='", "PLUS": "'+'", "MINUS": "'-'", "STAR": "'*'", "SLASH": "'/'",
}


def _describe_expected(names: set[str]) -> str:
    out = set()
    for n in names:
        if n in _TOKEN_NAMES:
            out.add(_TOKEN_NAMES[n])
        elif n.lower() in KEYWORDS:
            out.add(f"'{n.lower()}'")
        else:
            out.add(n.lower())
    return ", ".join(sorted(out))


def _describe_token(tok: Token) -> str:
    if tok.type in ("_NL", "$END"):
        return _TOKEN_NAMES[tok.type]
    if tok.type == "NAME":
        return f"name '{tok.value}'"
    if tok.type == "QNAME":
        return f"quoted name {tok.value}"
    if tok.type == "NUMBER":
        return f"number {tok.value}"
    if tok.type == "STRING":
        return f"string {tok.value}"
    if tok.value in KEYWORDS:
        return f"keyword '{tok.value}'"
    return f"'{tok.value}'"


# Example errors: an error whose parser state and token type match an example's
# gets that example's message (each example is tried first and later in a file).
_EXAMPLES: dict[str, list[str]] = {
    "missing-colon": ["Age increase", "Age decrease", "Age between 1 and 2", "Age cost 2", "Age immutable",
                      "Age order a < b", "`A b` increase", "`A b` between 1 and 2", "`A b` cost 2"],
    "unknown-statement": ["foo bar", "foo 3", "foo `x`", "foo \"x\"", "foo {", "`x` y"],
    "trailing-comma": ["immutable A,", "increase A,", "Age: increase,", "Housing: in {a,}",
                       "plausible m(a=1,)", "if A increases then B >= 1 and"],
    "empty-set": ["Housing: in {}", "if H in {} then A >= 1"],
    "unclosed-set": ["Housing: in {a, b", "Housing: in {a b}", "if H in {a then B >= 1"],
    "bad-clause": ["Age: increasing", "Age: 3", "Age:", "Age: foo bar", "Age: `x`", "Age: \"x\"", "Age: < 3",
                   "Age: > 3", "Age: == 3", "Age: (", "Age: and", "Age: if", "Age: increase, foo",
                   "Age: increase, 3", "Age: increase, `x`", "Age: increase, \"x\"", "Age: increase, and"],
    "one-condition": ["if A increases and B increases then C >= 1", "if A >= 1 and B >= 1 then C >= 1",
                      "if H in {a} and B >= 1 then C >= 1"],
    "missing-then": ["if A increases B >= 1", "if A increases", "if A >= 1", "if A >= 1 B >= 2",
                     "if H in {a}", "if H in {a} B >= 1"],
    "missing-condition": ["if then A >= 1", "if", "if A increases then", "if A >= 1 then"],
    "missing-operand": ["A >= ", "A + >= 3", "changes <=", "Age: >=", "A >= 3 +", "A * >= 3", "Age: <=",
                        "Age: between 1 and", "Age: between and 3", "Age: between", "A >= (", "A >= -"],
    "missing-comparison": ["2*dA - dB", "A + 1", "A", "orig(A)", "3", "(A)", "A * 2"],
    "setting-word": ["norm", "norm 1", "scale", "scale 1", "norm \"l1\"", "scale \"std\""],
    "target-form": ["target", "target 1", "target class", "target between 1", "target between 1 and",
                    "target foo", "target class {a}"],
    "cost-form": ["Age: cost", "Age: cost up", "Age: cost 1 per", "Age: cost -1", "Age: cost down -1",
                  "Age: cost x"],
    "include-path": ["include common.lum", "include", "include `x`"],
    "order-form": ["Age: order", "Age: order a <", "Age: order {a, b}", "Age: order a b"],
    "plausible-form": ["plausible", "plausible isolation-forest(contamination)",
                       "plausible isolation-forest(contamination=0.1", "plausible isolation-forest(=1)",
                       "plausible isolation-forest contamination=0.1"],
    "name-list": ["immutable", "immutable 3", "increase", "decrease 1", "immutable A B", "immutable A; B"],
    "keyword-as-name": ["order: increase", "cost: increase", "immutable order", "immutable A, cost",
                        "if order increases then A >= 1", "order >= 3", "cost + 1 <= 3"],
}

_MESSAGES: dict[str, tuple[str, str]] = {
    "missing-colon": ("expected ':' after the feature name", "feature statements read `Age: increase, <= 90`"),
    "unknown-statement": ("unknown statement",
                          "statements start with a feature name and ':', a keyword "
                          f"({', '.join(STATEMENT_KEYWORDS)}) or a linear relation"),
    "trailing-comma": ("nothing after ','", "remove the trailing comma or add the missing item"),
    "empty-set": ("empty set", "list at least one value: `{own, rent}`"),
    "unclosed-set": ("set not closed", "a set reads `{a, b, c}` on one line"),
    "bad-clause": ("expected a clause after ':'",
                   f"clauses: {', '.join(CLAUSE_KEYWORDS)}; separate several with ','"),
    "one-condition": ("an 'if' takes exactly one condition",
                      "write one implication per condition, or combine them as a linear relation"),
    "missing-then": ("expected 'then' after the condition", "implications read `if Education increases then Age >= Age0 + 2`"),
    "missing-condition": ("expected a condition",
                          "conditions: `X increases|decreases|changes|is unchanged`, `X in {a, b}`, or a linear relation"),
    "missing-operand": ("expected a number or a feature", "e.g. `Age >= Age0 + 2`, `2*dIncome - dDebt <= 5000`"),
    "missing-comparison": ("expected a comparison (<=, >= or ==)",
                           "a linear relation compares two sides: `2*dIncome - dDebt <= 5000`"),
    "setting-word": ("expected a word after the keyword", "`norm l0|l1|l2|linf`, `scale std|minmax|none`"),
    "target-form": ("malformed target",
                    "`target class 1`, `target class \">50K\"`, `target between 0.2 and 0.5`, `target >= 3`, "
                    "`target probability of class 1 <= 0.3`"),
    "cost-form": ("malformed cost",
                  "`cost 2`, `cost up 1 per 1000`, `cost down 3` (costs are non-negative numbers)"),
    "include-path": ("expected a quoted file name after 'include'", 'e.g. `include "common.lum"`'),
    "order-form": ("malformed order", "an order lists levels lowest first: `order Preschool < HS < College`"),
    "plausible-form": ("malformed plausibility statement",
                       "e.g. `plausible isolation-forest(contamination=0.1)`"),
    "name-list": ("expected a comma-separated list of feature names", "e.g. `immutable Sex, Race`"),
    "keyword-as-name": ("a keyword cannot be a feature name here",
                        "quote the feature name with backquotes, e.g. `order`"),
}


@lru_cache(maxsize=4)
def _example_index(parse: Callable[[str], Any]) -> tuple[dict[tuple[int, str], str], dict[int, str]]:
    exact: dict[tuple[int, str], str] = {}
    by_state: dict[int, str] = {}
    for key, examples in _EXAMPLES.items():
        for ex in examples:
            for prefix in ("", "norm l1\n"):
                try:
                    parse(prefix + ex + "\n")
                except UnexpectedToken as u:
                    exact.setdefault((u.state.position, u.token.type), key)
                    by_state.setdefault(u.state.position, key)
                except UnexpectedInput:
                    pass
    return exact, by_state


_CHAR_HINTS = {
    "'": "strings use double quotes: \"...\"; feature names with odd characters use backquotes: `x>=1`",
    '"': "unterminated string: a string ends with '\"' on the same line",
    "`": "unterminated quoted name: it ends with '`' on the same line",
    ";": "statements end at the end of a line; put each on its own line",
    "[": "sets use braces: {a, b}",
    "]": "sets use braces: {a, b}",
    "&": "write 'and' (only between the consequences of an 'if')",
    "|": "there is no 'or'; write several statements",
    "\\": "a backslash continues a line only as its last character",
    "!": "'!=' is not supported; use 'in {...}' for categories",
}


def syntax_diagnostic(exc: UnexpectedInput, text: str, file: str | None, lines: list[str],
                      parse: Callable[[str], Any]) -> tuple[Diagnostic, int]:
    """A diagnostic for one Lark error, and the line to blank before trying again."""
    def src(ln: int) -> str | None:
        return lines[ln - 1] if 0 < ln <= len(lines) else None

    if isinstance(exc, UnexpectedCharacters):
        at = exc.pos_in_stream
        ch = text[at] if at is not None and at < len(text) else ""
        span = SourceSpan(file, exc.line, exc.column, exc.line, exc.column + 1)
        shown = repr(ch)[1:-1] if ch.isprintable() else f"U+{ord(ch):04X}" if ch else "?"
        notes = []
        if ch in _CHAR_HINTS:
            notes.append(_CHAR_HINTS[ch])
        elif ch.isalpha() or ch.isdigit():
            notes.append("names are ASCII letters, digits and '_'; quote other names with backquotes: `Âge`")
        msg = f"unexpected character '{shown}'" if ch.isprintable() else f"unexpected character {shown}"
        return error(msg, span, *notes, source_line=src(exc.line)), exc.line
    if isinstance(exc, UnexpectedToken):
        tok = exc.token
        line = tok.line if tok.line is not None else len(lines)
        col = tok.column if tok.column is not None else 1
        if tok.type in ("_NL", "$END"):
            end = col + 1
        else:
            end = tok.end_column if tok.end_line == tok.line and tok.end_column else col + 1
        span = SourceSpan(file, line, col, line, end)
        exact, by_state = _example_index(parse)
        pos = exc.state.position if exc.state is not None else None
        key = (exact.get((pos, tok.type)) or by_state.get(pos)) if pos is not None else None
        expected = _describe_expected(set(exc.accepts or exc.expected))
        before = (src(line) or "")[:col - 1]
        if key in ("missing-colon", "unknown-statement"):  # the state after a name is shared by all contexts
            if not re.fullmatch(r"\s*([A-Za-z_][A-Za-z0-9_]*|`([^`\\]|\\.)*`)\s*", before):
                key = None
            elif tok.type in ("NAME", "QNAME", "NUMBER", "STRING", "LBRACE"):
                key = "unknown-statement"
        if tok.type == "NUMBER" and before.endswith("`"):
            return error("a number right after a quoted name", span,
                         "the original value of a quoted name is written orig(`x`), its change delta(`x`)",
                         source_line=src(line)), line
        if tok.type not in ("NAME", "QNAME") and str(tok.value) in KEYWORDS and (
                "NAME" in (exc.accepts or exc.expected)) and key not in ("missing-colon", "bad-clause"):
            key = "keyword-as-name"
        if key in ("unclosed-set", "order-form"):  # the parser states after a label are shared
            key = "unclosed-set" if before.rfind("{") > before.rfind("}") else "order-form"
        first = _first_word(src(line) or "")
        if tok.type == "COLON" and first in KEYWORDS:
            msg = f"'{first}' is a keyword, not a feature name"
            text_line = src(line) or ""
            col0 = len(text_line) - len(text_line.lstrip()) + 1
            span = SourceSpan(file, line, col0, line, col0 + len(first))
            return error(msg, span, f"write a feature named like a keyword in backquotes: `{first}`: ...",
                         source_line=src(line)), line
        if key is not None:
            msg, note = _MESSAGES[key]
            notes = [note]
            if key == "unknown-statement":
                word = _first_word(src(line) or "")
                msg = f"unknown statement '{word}'" if word else msg
                close = difflib.get_close_matches(word, STATEMENT_KEYWORDS, n=1, cutoff=0.7)
                if close:
                    notes.insert(0, f"did you mean '{close[0]}'?")
                else:
                    msg += f" (unexpected {_describe_token(tok)})"
            elif key == "bad-clause" and tok.type == "NAME":
                close = difflib.get_close_matches(tok.value, CLAUSE_KEYWORDS, n=1, cutoff=0.6)
                msg = f"unknown clause '{tok.value}'"
                if close:
                    notes.insert(0, f"did you mean '{close[0]}'?")
                if re.search(r"\border\b", src(line) or ""):
                    notes.insert(0, "an order separates its levels with '<': `order a < b < c`")
            elif key == "keyword-as-name":
                msg = f"'{tok.value}' is a keyword, not a name"
                notes = [f"write a feature named like a keyword in backquotes (`{tok.value}`) "
                         f"and a category label in double quotes (\"{tok.value}\")"]
            elif key == "trailing-comma" or key == "missing-then" and tok.type == "_NL":
                msg = f"{msg} (unexpected {_describe_token(tok)})" if key != "trailing-comma" else msg
            else:
                msg = f"{msg}, found {_describe_token(tok)}"
            return error(msg, span, *notes, source_line=src(line)), line
        return error(f"unexpected {_describe_token(tok)}", span, f"expected {expected}",
                     source_line=src(line)), line
    if isinstance(exc, UnexpectedEOF):
        ln = len(lines)
        span = SourceSpan(file, ln, len(src(ln) or "") + 1)
        return error("unexpected end of file", span, "the last statement is incomplete",
                     source_line=src(ln)), ln
    span = SourceSpan(file, getattr(exc, "line", 1) or 1, getattr(exc, "column", 1) or 1)
    return error(f"syntax error: {exc}", span), span.line


def _first_word(line: str) -> str:
    m = re.match(r"\s*([A-Za-z_][A-Za-z0-9_]*|`[^`]*`)", line)
    return m.group(1) if m else ""
