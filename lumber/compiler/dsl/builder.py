"""Parser callbacks: each grammar reduction builds a :mod:`.ast` node with its source span.

The callbacks run inside the LALR parser (Lark's ``transformer=`` option), so no
intermediate parse tree is built. Spans run from the first positioned child to
the last. One builder is shared by all parses; per-parse state (file name,
expression depths) is thread-local.
"""

from __future__ import annotations

import threading
from typing import Any, cast

from lark import Token, Transformer

from lumber.ir import SourceSpan

from . import ast as A

MAX_DEPTH = 64
"""Deepest expression nesting accepted (parentheses and unary signs)."""


class TooDeep(Exception):
    def __init__(self, span: SourceSpan) -> None:
        self.span = span


STATE = threading.local()
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
        return SourceSpan(STATE.file, 1, 1)
    return SourceSpan(STATE.file, first[0], first[1], last[0], last[1])


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


class Builder(Transformer):  # type: ignore[type-arg]
    """Parser callbacks -> :mod:`.ast` nodes (total: never raises except for over-deep nesting)."""

    def tsp(self, tok: Token) -> SourceSpan:
        return SourceSpan(getattr(STATE, "file", None), cast(int, tok.line), cast(int, tok.column), tok.end_line,
                          tok.end_column)

    def _deep(self, node: Any, *children: Any, base: int = 0) -> Any:
        depth: dict[int, int] = STATE.depth
        d = max(base, 1 + max((depth.get(id(c), 0) for c in children), default=0))
        if d > MAX_DEPTH:
            raise TooDeep(node.span)
        depth[id(node)] = d
        STATE.keep.append(node)  # ids stay unique while the parse runs
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
    value_kind = cmp

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
            return self._deep(node, right, base=STATE.depth.get(id(left), 1))  # type: ignore[no-any-return]
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

    def c_kind(self, ch: list[Any]) -> A.CKind:
        sp = _span_of(ch)
        return A.CKind(str(ch[0]), sp)

    def c_means(self, ch: list[Any]) -> A.CMeans:
        sp = _span_of(ch)
        return A.CMeans(ch[0], ch[2], sp)

    def word_value(self, ch: list[Any]) -> A.Label:
        return self.label(ch)

    def meaning(self, ch: list[Any]) -> tuple[A.Label, A.Label]:
        return (ch[0], ch[2])

    def class_names(self, ch: list[Any]) -> A.ClassNames:
        pairs = tuple(c for c in ch if isinstance(c, tuple))
        sp = _span_of([ch[0], *(lab for p in pairs for lab in p)])
        return A.ClassNames(pairs, sp)

    def c_step(self, ch: list[Any]) -> A.CStep:
        sp = _span_of(ch)
        return A.CStep(A.Num(ch[1].value, self.tsp(ch[1])), sp)

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

    def onehot_stmt(self, ch: list[Any]) -> A.OneHotStmt:
        sp = _span_of(ch)
        names = [c for c in ch if isinstance(c, A.Name)]
        return A.OneHotStmt(names[0], tuple(names[1:]), sp)

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

    def target_threshold(self, ch: list[Any]) -> A.TargetThreshold:
        sp = _span_of(ch)
        score, of = ch[1], ch[2]
        return A.TargetThreshold(score.value, self.tsp(score), of.value, self.tsp(of), ch[4], str(ch[5]), ch[6], sp)

    def start(self, ch: list[Any]) -> list[A.Statement]:
        return [c for c in ch if c is not None and not isinstance(c, Token)]
