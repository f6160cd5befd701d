"""Text -> syntax tree (:mod:`.ast`), with compiler-style syntax errors.

The LALR tables are built once per grammar version and cached in the user's
cache directory (never the package directory, which may be read-only); the
cache is written atomically so concurrent processes never read half a file.
Syntax errors are reported several at a time: after an error the offending
statement is blanked and the file parsed again (at most ``MAX_ERRORS``).
"""

from __future__ import annotations

import difflib
import hashlib
import os
import re
import sys
import tempfile
import threading
from functools import lru_cache
from importlib import resources
from pathlib import Path
from typing import Any, Callable

from lark import Lark, Token, Transformer
from lark.exceptions import UnexpectedCharacters, UnexpectedEOF, UnexpectedInput, UnexpectedToken

from lumber.ir import CompileError, Diagnostic, SourceSpan
from lumber.ir.diagnostics import error

from . import ast as A

MAX_ERRORS = 20
MAX_DEPTH = 64
"""Deepest expression nesting accepted (parentheses and unary signs)."""

KEYWORDS = frozenset({
    "include", "immutable", "increase", "decrease", "between", "and", "in", "order", "cost", "up", "down",
    "per", "if", "then", "increases", "decreases", "changes", "is", "unchanged", "norm", "scale",
    "plausible", "target", "class", "orig", "delta",
})
STATEMENT_KEYWORDS = ("include", "immutable", "increase", "decrease", "if", "changes", "norm", "scale",
                      "plausible", "target")
CLAUSE_KEYWORDS = ("immutable", "increase", "decrease", "between", "<=", ">=", "in", "order", "cost")
NAME_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")


class ConstraintError(CompileError):
    """A constraint file has syntax or semantic errors (CLI exit code 1)."""

    exit_code = 1


# -- the parser --------------------------------------------------------------------------


def grammar_text() -> str:
    return resources.files(__package__).joinpath("actionability.lark").read_text(encoding="utf-8")


def _cache_dir() -> Path | None:
    """A writable per-user cache directory, or None (then tables are rebuilt each process)."""
    candidates = []
    if os.environ.get("LUMBER_CACHE_DIR"):
        candidates.append(Path(os.environ["LUMBER_CACHE_DIR"]))
    if os.environ.get("XDG_CACHE_HOME"):
        candidates.append(Path(os.environ["XDG_CACHE_HOME"]) / "lumber")
    candidates.append(Path.home() / ".cache" / "lumber")
    candidates.append(Path(tempfile.gettempdir()) / f"lumber-{os.getuid() if hasattr(os, 'getuid') else 'user'}")
    for d in candidates:
        try:
            d.mkdir(parents=True, exist_ok=True)
            if os.access(d, os.W_OK):
                return d
        except OSError:
            continue
    return None


_OPTIONS: dict[str, Any] = dict(parser="lalr", lexer="basic", maybe_placeholders=True)


@lru_cache(maxsize=1)
def parser() -> Lark:
    """The LALR parser building :mod:`.ast` nodes while it parses (tables cached per grammar version)."""
    import io

    import lark

    text = grammar_text()
    key = hashlib.sha256(f"{text}\0{lark.__version__}\0{sys.version_info[:2]}".encode()).hexdigest()[:16]
    cdir = _cache_dir()
    path = cdir / f"dsl-{key}.lark-cache" if cdir is not None else None
    data = None
    if path is not None and path.is_file():
        try:
            data = path.read_bytes()
            return _with_builder(data)
        except Exception:  # a corrupt or foreign cache file: rebuild and overwrite it
            data = None
    buf = io.BytesIO()
    Lark(text, strict=_strict_available(), **_OPTIONS).save(buf)
    data = buf.getvalue()
    if path is not None:
        try:
            fd, tmp = tempfile.mkstemp(prefix=".dsl-", suffix=".tmp", dir=path.parent)
            with os.fdopen(fd, "wb") as fh:
                fh.write(data)
            os.replace(tmp, path)
        except OSError:
            pass
    return _with_builder(data)


def _with_builder(data: bytes) -> Lark:
    import io

    inst = Lark.__new__(Lark)
    return inst._load(io.BytesIO(data), transformer=_Builder())  # type: ignore[no-any-return]


def _strict_available() -> bool:
    try:
        import interegular  # noqa: F401
    except ImportError:
        return False
    return True


# -- tree -> AST (applied by the parser at each reduction) ---------------------------------


class _TooDeep(Exception):
    def __init__(self, span: SourceSpan) -> None:
        self.span = span


_STATE = threading.local()
"""Per-parse state of the (shared) builder: the file name and expression depths."""


def _start(x: Any) -> tuple[int, int] | None:
    if isinstance(x, Token):
        return x.line, x.column  # type: ignore[return-value]
    span = getattr(x, "span", None)
    if span is not None:
        return span.line, span.column
    if isinstance(x, (list, tuple)) and x:
        return _start(x[0])
    return None


def _end(x: Any) -> tuple[int, int] | None:
    if isinstance(x, Token):
        return x.end_line, x.end_column  # type: ignore[return-value]
    span = getattr(x, "span", None)
    if span is not None:
        return span.end_line or span.line, span.end_column or span.column
    if isinstance(x, (list, tuple)) and x:
        return _end(x[-1])
    return None


def _span_of(children: list[Any]) -> SourceSpan:
    """From the first positioned child's start to the last one's end."""
    first = last = None
    for c in children:
        first = _start(c)
        if first is not None:
            break
    for c in reversed(children):
        last = _end(c)
        if last is not None:
            break
    if first is None or last is None:
        return SourceSpan(_STATE.file, 1, 1)
    return SourceSpan(_STATE.file, first[0], first[1], last[0], last[1])


def _unescape(body: str) -> str:
    out = []
    i = 0
    while i < len(body):
        c = body[i]
        if c == "\\" and i + 1 < len(body):
            nxt = body[i + 1]
            out.append({"n": "\n", "t": "\t"}.get(nxt, nxt))
            i += 2
        else:
            out.append(c)
            i += 1
    return "".join(out)


def _toks(children: list[Any]) -> list[Any]:
    """Children minus keyword and punctuation tokens (kept: names, literals and subtrees)."""
    keep = {"NAME", "QNAME", "STRING", "NUMBER"}
    return [c for c in children if c is not None and (not isinstance(c, Token) or c.type in keep)]


class _Set:
    """``{a, b}``: its labels and the span including the braces."""

    def __init__(self, labels: tuple[A.Label, ...], span: SourceSpan) -> None:
        self.labels = labels
        self.span = span


class _Method:
    def __init__(self, name: str, span: SourceSpan) -> None:
        self.name = name
        self.span = span


class _Builder(Transformer):  # type: ignore[type-arg]
    """Parser callbacks -> :mod:`.ast` nodes (total: never raises except for over-deep nesting)."""

    def tsp(self, tok: Token) -> SourceSpan:
        return SourceSpan(getattr(_STATE, "file", None), tok.line, tok.column, tok.end_line, tok.end_column)

    def _deep(self, node: Any, *children: Any, base: int = 0) -> Any:
        depth: dict[int, int] = _STATE.depth
        d = max(base, 1 + max((depth.get(id(c), 0) for c in children), default=0))
        if d > MAX_DEPTH:
            raise _TooDeep(node.span)
        depth[id(node)] = d
        _STATE.keep.append(node)  # ids stay unique while the parse runs
        return node

    # leaves
    def name(self, ch: list[Any]) -> A.Name:
        sp = _span_of(ch)
        tok = ch[0]
        if tok.type == "QNAME":
            return A.Name(_unescape(tok.value[1:-1]), True, sp)
        return A.Name(tok.value, False, sp)

    def signed(self, ch: list[Any]) -> A.Label:
        sp = _span_of(ch)
        neg = any(isinstance(c, Token) and c.type == "MINUS" for c in ch)
        return A.Label("number", ("-" if neg else "") + ch[-1].value, sp)

    def label(self, ch: list[Any]) -> A.Label:
        sp = _span_of(ch)
        c = ch[0]
        if isinstance(c, A.Label):
            return c
        if c.type == "STRING":
            return A.Label("string", _unescape(c.value[1:-1]), sp)
        return A.Label("name", c.value, sp)

    def value_set(self, ch: list[Any]) -> _Set:
        sp = _span_of(ch)
        return _Set(tuple(c for c in ch if isinstance(c, A.Label)), sp)

    def cmp(self, ch: list[Any]) -> Token:
        return ch[0]  # type: ignore[no-any-return]

    direction = cmp
    side = cmp

    def event(self, ch: list[Any]) -> Token:
        tok = Token.new_borrow_pos("EVENT", " ".join(str(c) for c in ch), ch[0])
        tok.end_line, tok.end_column = ch[-1].end_line, ch[-1].end_column
        return tok

    def method(self, ch: list[Any]) -> _Method:
        sp = _span_of(ch)
        return _Method("-".join(c.value for c in ch if c.type == "NAME"), sp)

    # expressions
    def number(self, ch: list[Any]) -> A.Num:
        sp = _span_of(ch)
        return A.Num(ch[0].value, sp)

    def plain_ref(self, ch: list[Any]) -> A.Ref:
        name = self.name(ch)
        return A.Ref(name, "plain", name.span)

    def orig_ref(self, ch: list[Any]) -> A.Ref:
        sp = _span_of(ch)
        return A.Ref(_toks(ch)[0], "orig", sp)

    def delta_ref(self, ch: list[Any]) -> A.Ref:
        sp = _span_of(ch)
        return A.Ref(_toks(ch)[0], "delta", sp)

    def paren(self, ch: list[Any]) -> A.Paren:
        sp = _span_of(ch)
        return self._deep(A.Paren(ch[1], sp), ch[1])  # type: ignore[no-any-return]

    def neg(self, ch: list[Any]) -> A.Neg:
        sp = _span_of(ch)
        return self._deep(A.Neg(ch[1], sp), ch[1])  # type: ignore[no-any-return]

    def pos(self, ch: list[Any]) -> A.Neg:
        sp = _span_of(ch)
        return self._deep(A.Neg(ch[1], sp, plus=True), ch[1])  # type: ignore[no-any-return]

    def _chain(self, sp: SourceSpan, ch: list[Any], ops: str) -> A.Chain:
        left, op, right = ch
        if isinstance(left, A.Chain) and left.rest[0][0] in ops:
            node = A.Chain(left.first, left.rest + ((op.value, right),), sp)
            return self._deep(node, right, base=_STATE.depth.get(id(left), 1))  # type: ignore[no-any-return]
        return self._deep(A.Chain(left, ((op.value, right),), sp), left, right)  # type: ignore[no-any-return]

    def add(self, ch: list[Any]) -> A.Chain:
        return self._chain(_span_of(ch), ch, "+-")

    sub = add

    def mul(self, ch: list[Any]) -> A.Chain:
        return self._chain(_span_of(ch), ch, "*/")

    div = mul

    # clauses
    def c_immutable(self, ch: list[Any]) -> A.CImmutable:
        sp = _span_of(ch)
        return A.CImmutable(sp)

    def c_direction(self, ch: list[Any]) -> A.CDirection:
        sp = _span_of(ch)
        return A.CDirection(str(ch[0]), sp)

    def c_between(self, ch: list[Any]) -> A.CBetween:
        sp = _span_of(ch)
        lo, hi = _toks(ch)
        return A.CBetween(lo, hi, sp)

    def c_compare(self, ch: list[Any]) -> A.CCompare:
        sp = _span_of(ch)
        return A.CCompare(str(ch[0]), ch[1], sp)

    def c_in(self, ch: list[Any]) -> A.CIn:
        sp = _span_of(ch)
        return A.CIn(ch[1].labels, sp)

    def c_order(self, ch: list[Any]) -> A.COrder:
        sp = _span_of(ch)
        return A.COrder(tuple(c for c in ch if isinstance(c, A.Label)), sp)

    def c_cost(self, ch: list[Any]) -> A.CCost:
        sp = _span_of(ch)
        side = next((str(c) for c in ch if isinstance(c, Token) and c.type in ("UP", "DOWN")), None)
        nums = [A.Num(c.value, self.tsp(c)) for c in ch if isinstance(c, Token) and c.type == "NUMBER"]
        return A.CCost(side, nums[0], nums[1] if len(nums) > 1 else None, sp)

    # conditions
    def event_cond(self, ch: list[Any]) -> A.EventCond:
        sp = _span_of(ch)
        return A.EventCond(ch[0], str(ch[1]), sp)

    def member_cond(self, ch: list[Any]) -> A.MemberCond:
        sp = _span_of(ch)
        return A.MemberCond(ch[0], ch[2].labels, sp)

    def relation_cond(self, ch: list[Any]) -> A.Relation:
        sp = _span_of(ch)
        return A.Relation(ch[0], str(ch[1]), ch[2], sp)

    # statements
    def include(self, ch: list[Any]) -> A.Include:
        sp = _span_of(ch)
        return A.Include(_unescape(ch[1].value[1:-1]), sp)

    def immutable_list(self, ch: list[Any]) -> A.NameList:
        sp = _span_of(ch)
        return A.NameList("immutable", tuple(c for c in ch if isinstance(c, A.Name)), sp)

    def direction_list(self, ch: list[Any]) -> A.NameList:
        sp = _span_of(ch)
        return A.NameList(str(ch[0]), tuple(c for c in ch if isinstance(c, A.Name)), sp)

    def feature_stmt(self, ch: list[Any]) -> A.FeatureStmt:
        sp = _span_of(ch)
        return A.FeatureStmt(ch[0], tuple(c for c in ch[1:] if not isinstance(c, Token)), sp)

    def relation_stmt(self, ch: list[Any]) -> A.RelationStmt:
        sp = _span_of(ch)
        return A.RelationStmt(A.Relation(ch[0], str(ch[1]), ch[2], sp), sp)

    def implication(self, ch: list[Any]) -> A.ImplicationStmt:
        sp = _span_of(ch)
        conds = [c for c in ch if not isinstance(c, Token)]
        return A.ImplicationStmt(conds[0], tuple(conds[1:]), sp)

    def changes_stmt(self, ch: list[Any]) -> A.ChangesStmt:
        sp = _span_of(ch)
        return A.ChangesStmt(str(ch[1]), ch[2], sp)

    def norm_stmt(self, ch: list[Any]) -> A.Setting:
        sp = _span_of(ch)
        return A.Setting("norm", ch[1].value, self.tsp(ch[1]), sp)

    def scale_stmt(self, ch: list[Any]) -> A.Setting:
        sp = _span_of(ch)
        return A.Setting("scale", ch[1].value, self.tsp(ch[1]), sp)

    def param(self, ch: list[Any]) -> A.Param:
        sp = _span_of(ch)
        return A.Param(ch[0].value, ch[2], sp)

    def plausible_stmt(self, ch: list[Any]) -> A.PlausibleStmt:
        sp = _span_of(ch)
        method = ch[1]
        has_parens = any(isinstance(c, Token) and c.type == "LPAR" for c in ch)
        params = tuple(c for c in ch if isinstance(c, A.Param)) if has_parens else None
        return A.PlausibleStmt(method.name, method.span, params, sp)

    def target_class(self, ch: list[Any]) -> A.TargetClass:
        sp = _span_of(ch)
        return A.TargetClass(ch[2], sp)

    def target_between(self, ch: list[Any]) -> A.TargetRange:
        sp = _span_of(ch)
        lo, hi = [c for c in ch if isinstance(c, A.Label)]
        return A.TargetRange(None, lo, hi, sp)

    def target_compare(self, ch: list[Any]) -> A.TargetRange:
        sp = _span_of(ch)
        op, val = str(ch[1]), ch[2]
        if op in (">=", ">"):
            return A.TargetRange(op, val, None, sp)
        return A.TargetRange(op, None, val, sp)

    def start(self, ch: list[Any]) -> list[A.Statement]:
        sp = _span_of(ch)
        return [c for c in ch if c is not None and not isinstance(c, Token)]


# -- comments ------------------------------------------------------------------------------


def scan_comments(text: str) -> list[A.Comment]:
    """Every ``# ...`` outside strings and quoted names (for the formatter)."""
    out = []
    for ln, line in enumerate(A.split_lines(text), start=1):
        quote = None
        i = 0
        while i < len(line):
            c = line[i]
            if quote:
                if c == "\\":
                    i += 1
                elif c == quote:
                    quote = None
            elif c in "\"`":
                quote = c
            elif c == "#":
                out.append(A.Comment(line[i:].rstrip(), ln, i + 1, not line[:i].strip()))
                break
            i += 1
    return out


# -- syntax errors ---------------------------------------------------------------------------

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
                    "`target class 1`, `target class \">50K\"`, `target between 0.2 and 0.5`, `target >= 3`"),
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


@lru_cache(maxsize=1)
def _example_index() -> tuple[dict[tuple[int, str], str], dict[int, str]]:
    exact: dict[tuple[int, str], str] = {}
    by_state: dict[int, str] = {}
    p = parser()
    for key, examples in _EXAMPLES.items():
        for ex in examples:
            for prefix in ("", "norm l1\n"):
                try:
                    p.parse(prefix + ex + "\n")
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


def _syntax_diagnostic(exc: UnexpectedInput, text: str, file: str | None, lines: list[str]) -> tuple[Diagnostic, int]:
    """A diagnostic for one Lark error, and the line to blank before trying again."""
    def src(ln: int) -> str | None:
        return lines[ln - 1] if 0 < ln <= len(lines) else None

    if isinstance(exc, UnexpectedCharacters):
        ch = text[exc.pos_in_stream] if exc.pos_in_stream < len(text) else ""
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
        exact, by_state = _example_index()
        pos = exc.state.position if exc.state is not None else None
        key = exact.get((pos, tok.type)) or by_state.get(pos)
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


def _blank_statement(lines: list[str], line: int) -> bool:
    """Blank the statement around 1-based ``line`` (following backslash continuations)."""
    n = len(lines)
    if not 0 < line <= n:
        return False
    lo = line
    while lo > 1 and lines[lo - 2].rstrip().endswith("\\"):
        lo -= 1
    hi = line
    while hi < n and lines[hi - 1].rstrip().endswith("\\"):
        hi += 1
    changed = any(lines[i].strip() for i in range(lo - 1, hi))
    for i in range(lo - 1, hi):
        lines[i] = ""
    return changed


# -- entry points -----------------------------------------------------------------------------


def decode(data: bytes, file: str | None) -> str:
    """Bytes of a constraint file -> text (UTF-8, optional BOM), or a diagnostic."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        before = data[:exc.start]
        line = before.count(b"\n") + 1
        col = exc.start - (before.rfind(b"\n") + 1) + 1
        raise ConstraintError([error(f"file is not UTF-8 text (byte 0x{data[exc.start]:02x})",
                                     SourceSpan(file, line, col), "save the file as UTF-8")]) from None
    return text[1:] if text.startswith("\ufeff") else text


def parse_text(text: str, file: str | None = None) -> A.Program:
    """Parse one file's text into a :class:`~.ast.Program`; raise :class:`ConstraintError` on syntax errors."""
    if text.startswith("\ufeff"):
        text = text[1:]
    p = parser()
    lines = A.split_lines(text)
    work = list(lines)
    diags: list[Diagnostic] = []
    statements = None
    _STATE.file = file
    try:
        while True:
            _STATE.depth, _STATE.keep = {}, []
            try:
                statements = p.parse("\n".join(work) + "\n")
                break
            except UnexpectedInput as exc:
                diag, line = _syntax_diagnostic(exc, "\n".join(work) + "\n", file, lines)
                diags.append(diag)
                if len(diags) >= MAX_ERRORS or not _blank_statement(work, line):
                    break
            except _TooDeep as exc:
                diags.append(error(f"expression nested too deeply (more than {MAX_DEPTH} levels)", exc.span,
                                   source_line=_line(lines, exc.span.line)))
                if len(diags) >= MAX_ERRORS or not _blank_statement(work, exc.span.line):
                    break
    finally:
        _STATE.depth, _STATE.keep, _STATE.file = {}, [], None
    if diags:
        raise ConstraintError(diags)
    assert statements is not None
    return A.Program(file, text, statements, scan_comments(text))


def _line(lines: list[str], ln: int) -> str | None:
    return lines[ln - 1] if 0 < ln <= len(lines) else None


def parse_file(path: str | Path, display: str | None = None) -> A.Program:
    """Read and parse a constraint file (``display`` is the name used in diagnostics)."""
    p = Path(path)
    name = display if display is not None else str(path)
    try:
        if p.exists() and not p.is_file() and not p.is_dir():
            raise ConstraintError(f"{name}: not a regular file")
        data = p.read_bytes()
    except FileNotFoundError:
        raise ConstraintError(f"{name}: no such file") from None
    except IsADirectoryError:
        raise ConstraintError(f"{name}: is a directory, expected a constraint file") from None
    except OSError as exc:
        raise ConstraintError(f"{name}: cannot read ({exc.strerror or exc})") from None
    except ValueError:
        raise ConstraintError(f"{name}: invalid file name") from None
    return parse_text(decode(data, name), name)


ParseFn = Callable[[str], Any]
__all__ = ["ConstraintError", "KEYWORDS", "NAME_RE", "decode", "grammar_text", "parse_file", "parse_text",
           "parser", "scan_comments"]
