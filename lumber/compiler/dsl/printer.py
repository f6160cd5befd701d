"""Canonical printing: syntax trees back to text, and constraint models to text.

:func:`format_program` is the formatter behind ``lumber fmt``: it re-prints a
parsed file with canonical spacing and punctuation, keeps every comment and
at most one blank line between statements, and never changes a literal, a
name's spelling or an include. ``format_program(parse(format_program(p)))``
equals ``format_program(p)``.

:func:`format_constraints` prints a :class:`~lumber.ir.Constraints` (one
statement per rule, relation, implication and setting) so that compiling the
text again gives an equal object: ``parse(format_constraints(c)) == c``.
"""

from __future__ import annotations

import math
from typing import Any, Sequence

from lumber.ir import (
    Bound, Constraints, Event, FeatureEvent, FeatureKind, LinearRelation, Membership, Schema, SourceSpan,
)

from . import ast as A
from .labels import lookup_code
from .names import DELTA, ORIG, VALUE, Resolver, is_bare_name, quote_name, quote_string

# -- syntax tree -> text ---------------------------------------------------------------------


def _name(n: A.Name) -> str:
    if n.quoted:
        body = n.text.replace("\\", "\\\\").replace("`", "\\`").replace("\n", "\\n").replace("\t", "\\t")
        return f"`{body}`"
    return n.text


def _label(lab: A.Label) -> str:
    return quote_string(lab.text) if lab.kind == "string" else lab.text


def _labels(labels: tuple[A.Label, ...]) -> str:
    return "{" + ", ".join(_label(x) for x in labels) + "}"


def expr(e: A.Expr) -> str:
    if isinstance(e, A.Num):
        return e.text
    if isinstance(e, A.Ref):
        return _name(e.name) if e.form == "plain" else f"{e.form}({_name(e.name)})"
    if isinstance(e, A.Neg):
        return ("+" if e.plus else "-") + expr(e.operand)
    if isinstance(e, A.Paren):
        return "(" + expr(e.inner) + ")"
    parts = [expr(e.first)]
    for op, t in e.rest:
        parts.append(f" {op} " if op in "+-" else op)
        parts.append(expr(t))
    return "".join(parts)


def _op(op: str) -> str:
    return "==" if op == "=" else op


def clause(c: A.Clause) -> str:
    if isinstance(c, A.CImmutable):
        return "immutable"
    if isinstance(c, A.CDirection):
        return c.direction
    if isinstance(c, A.CBetween):
        return f"between {expr(c.low)} and {expr(c.high)}"
    if isinstance(c, A.CCompare):
        return f"{_op(c.op)} {expr(c.value)}"
    if isinstance(c, A.CIn):
        return f"in {_labels(c.labels)}"
    if isinstance(c, A.COrder):
        return "order " + " < ".join(_label(x) for x in c.labels)
    if isinstance(c, A.CKind):
        return c.kind
    if isinstance(c, A.CStep):
        return f"step {c.amount.text}"
    if isinstance(c, A.CMeans):
        value = c.value.text if c.value.kind == "number" else quote_string(c.value.text)  # a bare word is no value here
        return f"{value} means {_label(c.words)}"
    side = f"{c.side} " if c.side else ""
    per = f" per {c.per.text}" if c.per is not None else ""
    return f"cost {side}{c.amount.text}{per}"


def condition(c: A.Cond) -> str:
    if isinstance(c, A.EventCond):
        return f"{_name(c.name)} {c.event}"
    if isinstance(c, A.MemberCond):
        return f"{expr(c.subject)} in {_labels(c.labels)}"
    return f"{expr(c.lhs)} {_op(c.op)} {expr(c.rhs)}"


def statement(st: A.Statement) -> str:
    if isinstance(st, A.Include):
        return f"include {quote_string(st.path)}"
    if isinstance(st, A.NameList):
        return f"{st.keyword} " + ", ".join(_name(n) for n in st.names)
    if isinstance(st, A.FeatureStmt):
        return f"{_name(st.name)}: " + ", ".join(clause(c) for c in st.clauses)
    if isinstance(st, A.RelationStmt):
        return condition(st.relation)
    if isinstance(st, A.ImplicationStmt):
        return f"if {condition(st.condition)} then " + " and ".join(condition(c) for c in st.then)
    if isinstance(st, A.ChangesStmt):
        return f"changes {_op(st.op)} {expr(st.value)}"
    if isinstance(st, A.Setting):
        return f"{st.keyword} {st.word}"
    if isinstance(st, A.PlausibleStmt):
        params = ", ".join(f"{p.name}={_label(p.value)}" for p in st.params or ())
        return f"plausible {st.method}" + (f"({params})" if params else "")
    if isinstance(st, A.TargetClass):
        return f"target class {_label(st.label)}"
    if isinstance(st, A.TargetThreshold):
        return f"target {st.score} {st.of_word} class {_label(st.label)} {_op(st.op)} {_label(st.value)}"
    if isinstance(st, A.OneHotStmt):
        return f"onehot {_name(st.name)} = {{" + ", ".join(_name(n) for n in st.members) + "}"
    if isinstance(st, A.ClassNames):
        return "class " + ", ".join(f"{_label(a)} means {_label(b)}" for a, b in st.names)
    assert isinstance(st, A.TargetRange)
    if st.op is None:
        return f"target between {_label(st.low)} and {_label(st.high)}"  # type: ignore[arg-type]
    return f"target {_op(st.op)} {_label(st.low if st.low is not None else st.high)}"  # type: ignore[arg-type]


def format_program(program: A.Program) -> str:
    """The canonical text of a parsed file (comments kept, at most one blank line in a row)."""
    src = A.split_lines(program.text)
    items: list[tuple[int, int, str]] = []  # (first line, last line, text)
    trailing = {c.line: c for c in program.comments if not c.own_line}
    for st in program.statements:
        text = statement(st)
        end = st.span.end_line or st.span.line
        tc = trailing.pop(end, None)
        if tc is not None:
            text += "  " + tc.text
        items.append((st.span.line, end, text))
    for c in program.comments:
        if c.own_line:
            items.append((c.line, c.line, c.text))
    for c in trailing.values():  # a comment after a continued line's backslash is impossible; keep any rest
        items.append((c.line, c.line, c.text))
    items.sort()
    out: list[str] = []
    prev_end = None
    for first, last, text in items:
        if prev_end is not None and any(not src[i].strip() for i in range(prev_end, first - 1)):
            out.append("")
        out.append(text)
        prev_end = last
    return "\n".join(out) + "\n" if out else ""


# -- constraint model -> text -------------------------------------------------------------------

_NOWHERE = SourceSpan(None, 0, 0)


def number_text(v: float) -> str:
    """Shortest text that reads back as exactly ``v`` (integers without a decimal point)."""
    v = float(v)
    if not math.isfinite(v):
        raise ValueError(f"cannot print non-finite number {v}")
    if v == int(v) and abs(v) < 1e16:
        return str(int(v))
    return repr(v)


def _num(v: float) -> A.Expr:
    if v < 0:
        return A.Neg(A.Num(number_text(-v), _NOWHERE), _NOWHERE)
    return A.Num(number_text(v), _NOWHERE)


def _cost(side: str | None, v: float) -> A.CCost:
    """``cost 1 per 1000`` when that reads back exactly, else ``cost 0.0025``."""
    if 0 < v < 1:
        per = 1.0 / v
        if per < 1e16 and per == int(per) and 1.0 / per == v:
            return A.CCost(side, A.Num("1", _NOWHERE), A.Num(number_text(per), _NOWHERE), _NOWHERE)
    return A.CCost(side, A.Num(number_text(v), _NOWHERE), None, _NOWHERE)


def _feature_name(feature: str) -> A.Name:
    if "\r" in feature or feature == "":
        raise ValueError(f"feature name {feature!r} cannot be written in a constraint file")
    return A.Name(feature, not is_bare_name(feature), _NOWHERE)


def _ref(res: Resolver, feature: str, reading: str) -> A.Ref:
    bare = {VALUE: feature, ORIG: feature + "0", DELTA: "d" + feature}[reading]
    readable = not (reading == ORIG and feature[-1:].isdigit())  # `PAY_AMT10` would read as a feature
    if readable and is_bare_name(bare) and res.resolve(bare) == (feature, reading):
        return A.Ref(A.Name(bare, False, _NOWHERE), "plain", _NOWHERE)
    name = _feature_name(feature)
    if reading == VALUE:
        return A.Ref(A.Name(feature, True, _NOWHERE), "plain", _NOWHERE)
    return A.Ref(name, reading, _NOWHERE)


def _linear(terms: Sequence[tuple[float, A.Expr]]) -> A.Expr:
    """``c1*t1 + c2*t2 - ...`` as a syntax tree (coefficients 1 and -1 left out)."""
    if not terms:
        return A.Num("0", _NOWHERE)
    rest: list[tuple[str, A.Expr]] = []
    first: A.Expr | None = None
    for c, t in terms:
        mag = abs(c)
        body: A.Expr = t if mag == 1.0 else A.Chain(A.Num(number_text(mag), _NOWHERE), (("*", t),), _NOWHERE)
        if first is None:
            if c < 0:
                body = A.Neg(t, _NOWHERE) if mag == 1.0 else A.Chain(
                    A.Neg(A.Num(number_text(mag), _NOWHERE), _NOWHERE), (("*", t),), _NOWHERE)
            first = body
        else:
            rest.append(("-" if c < 0 else "+", body))
    assert first is not None
    return A.Chain(first, tuple(rest), _NOWHERE) if rest else first


def _relation(res: Resolver, r: LinearRelation) -> A.Relation:
    """Print changes as ``dX`` where ``x0`` holds ``-a`` for ``x``'s ``a``, if that keeps the term order."""
    x, x0 = list(r.x_terms), list(r.x0_terms)
    x0c = dict(x0)
    paired = {f for f, c in x if f in x0c and x0c[f] == -c}
    reread = [f for f, _ in x if f in paired] + [f for f, _ in x0 if f not in paired]
    if paired and reread == [f for f, _ in x0]:
        terms = [(c, _ref(res, f, DELTA if f in paired else VALUE)) for f, c in x]
        terms += [(c, _ref(res, f, ORIG)) for f, c in x0 if f not in paired]
    else:
        terms = [(c, _ref(res, f, VALUE)) for f, c in x] + [(c, _ref(res, f, ORIG)) for f, c in x0]
    return A.Relation(_linear(terms), r.op, _num(r.rhs), _NOWHERE)


def _bound(res: Resolver, feature: str, b: Bound) -> A.Expr:
    if not b.relative:
        return _num(b.value)
    ref = _ref(res, feature, ORIG)
    if b.value == 0:
        return ref
    return A.Chain(ref, (("-" if b.value < 0 else "+", A.Num(number_text(abs(b.value)), _NOWHERE)),), _NOWHERE)


class _Labels:
    """Codes -> labels a reader resolves back to the same codes."""

    def __init__(self, schema: Schema | None) -> None:
        self.features = {f.name: f for f in schema.features} if schema is not None else {}

    def label(self, feature: str, code: float) -> A.Label:
        f = self.features.get(feature)
        cats = f.categories if f is not None else None
        if cats and code == int(code) and 0 <= code < len(cats):
            lab = cats[int(code)]
            cand = _value_label(lab)
            if cand is not None and lookup_code(f, cand.kind, cand.text) == code:
                return cand
        lab2 = A.Label("number", number_text(code), _NOWHERE)
        if lookup_code(f, "number", lab2.text) != code:
            raise ValueError(f"code {code} of {feature!r} cannot be written so that it reads back the same")
        return lab2

    def labels(self, feature: str, codes: tuple[float, ...]) -> tuple[A.Label, ...]:
        return tuple(self.label(feature, c) for c in codes)


def _value_label(v: Any) -> A.Label | None:
    """A literal for a Python value: words stay bare when they can, other text is quoted."""
    if isinstance(v, bool):
        return A.Label("name", "true" if v else "false", _NOWHERE)
    if isinstance(v, str):
        if is_bare_name(v) and v not in ("true", "false"):
            return A.Label("name", v, _NOWHERE)
        if "\r" in v:
            return None
        return A.Label("string", v, _NOWHERE)
    try:
        f = float(v)
    except (TypeError, ValueError):
        return None
    if not math.isfinite(f):
        return None
    if isinstance(v, (int,)) or (hasattr(v, "dtype") and getattr(v.dtype, "kind", "") in "iu"):
        return A.Label("number", str(int(v)), _NOWHERE)
    return A.Label("number", repr(f), _NOWHERE)


def _param_label(v: Any) -> A.Label:
    if isinstance(v, str):
        return A.Label("string", v, _NOWHERE)
    lab = _value_label(v)
    if lab is None:
        raise ValueError(f"cannot print parameter value {v!r}")
    return lab


def _condition(res: Resolver, labels: _Labels, c: Any) -> A.Cond:
    if isinstance(c, FeatureEvent):
        word = {Event.INCREASES: "increases", Event.DECREASES: "decreases", Event.CHANGES: "changes",
                Event.UNCHANGED: "is unchanged"}[c.event]
        return A.EventCond(_feature_name(c.feature), word, _NOWHERE)
    if isinstance(c, Membership):
        ref = _ref(res, c.feature, ORIG if c.original else VALUE)
        return A.MemberCond(ref, labels.labels(c.feature, c.values), _NOWHERE)
    return _relation(res, c)


def _resolver(c: Constraints, schema: Schema | None) -> Resolver:
    if schema is not None:
        return Resolver(schema.feature_names, strict=True)
    declared = {r.feature for r in c.rules}
    for imp in c.implications:
        for cond in (imp.condition, *imp.then):
            if isinstance(cond, FeatureEvent):
                declared.add(cond.feature)
    return Resolver(declared, strict=False)


def constraints_program(c: Constraints, schema: Schema | None = None) -> A.Program:
    """A syntax tree that compiles back to ``c`` (labels instead of codes when ``schema`` names them)."""
    res = _resolver(c, schema)
    labels = _Labels(schema)
    kinds = {f.name: f.kind for f in schema.features} if schema is not None else {}
    out: list[A.Statement] = []
    for r in c.rules:
        cl: list[A.Clause] = []
        if r.immutable:
            cl.append(A.CImmutable(_NOWHERE))
        if r.direction.name != "ANY":
            cl.append(A.CDirection(r.direction.name.lower(), _NOWHERE))
        if r.lower is not None and r.upper is not None:
            if r.lower == r.upper:
                cl.append(A.CCompare("==", _bound(res, r.feature, r.lower), _NOWHERE))
            else:
                cl.append(A.CBetween(_bound(res, r.feature, r.lower), _bound(res, r.feature, r.upper), _NOWHERE))
        elif r.lower is not None:
            cl.append(A.CCompare(">=", _bound(res, r.feature, r.lower), _NOWHERE))
        elif r.upper is not None:
            cl.append(A.CCompare("<=", _bound(res, r.feature, r.upper), _NOWHERE))
        if r.allowed is not None:
            cl.append(A.CIn(labels.labels(r.feature, tuple(r.allowed)), _NOWHERE))
        if r.order is not None:
            cl.append(A.COrder(labels.labels(r.feature, tuple(r.order)), _NOWHERE))
        if r.domain is not None:
            cl.append(A.CKind(r.domain, _NOWHERE))
        if r.step is not None:
            cl.append(A.CStep(A.Num(number_text(r.step), _NOWHERE), _NOWHERE))
        if r.cost_up is not None and r.cost_up == r.cost_down:
            cl.append(_cost(None, r.cost_up))
        else:
            if r.cost_up is not None:
                cl.append(_cost("up", r.cost_up))
            if r.cost_down is not None:
                cl.append(_cost("down", r.cost_down))
        if not cl:
            raise ValueError(f"the rule for {r.feature!r} says nothing and cannot be printed")
        if kinds.get(r.feature) == FeatureKind.CATEGORICAL and (r.lower is not None or r.upper is not None):
            raise ValueError(f"{r.feature!r} is categorical and cannot have bounds")
        out.append(A.FeatureStmt(_feature_name(r.feature), tuple(cl), _NOWHERE))
    for g in c.onehot:
        out.append(A.OneHotStmt(_feature_name(g.name), tuple(_feature_name(m) for m in g.members), _NOWHERE))
    for rel in c.relations:
        out.append(A.RelationStmt(_relation(res, rel), _NOWHERE))
    for imp in c.implications:
        out.append(A.ImplicationStmt(_condition(res, labels, imp.condition),
                                     tuple(_condition(res, labels, t) for t in imp.then), _NOWHERE))
    if c.max_changes is not None:
        out.append(A.ChangesStmt("<=", A.Num(str(int(c.max_changes)), _NOWHERE), _NOWHERE))
    if c.norm is not None:
        out.append(A.Setting("norm", c.norm.name.lower(), _NOWHERE, _NOWHERE))
    if c.scale is not None:
        out.append(A.Setting("scale", c.scale.name.lower(), _NOWHERE, _NOWHERE))
    if c.plausibility is not None:
        params = tuple(A.Param(k, _param_label(v), _NOWHERE) for k, v in c.plausibility.params)
        out.append(A.PlausibleStmt(c.plausibility.method, _NOWHERE, params, _NOWHERE))
    if c.target is not None:
        t = c.target
        if t.cutoff is not None and t.below is None:
            raise ValueError("a decision rule without a side sought has no constraint-file form")
        if t.cutoff is not None:
            lab = _value_label(t.label)
            if lab is None:
                raise ValueError(f"cannot print target class {t.label!r}")
            if lab.kind == "name":
                lab = A.Label("string", lab.text, _NOWHERE)
            inclusive = t.cutoff.inclusive
            cmp = ("<" if inclusive else "<=") if t.below else (">=" if inclusive else ">")
            out.append(A.TargetThreshold(t.cutoff.on, _NOWHERE, "of", _NOWHERE, lab, cmp,
                                         A.Label("number", number_text(t.cutoff.value), _NOWHERE), _NOWHERE))
        elif t.interval is not None:
            lo, hi = t.interval
            if math.isinf(lo) and math.isinf(hi):
                raise ValueError("an unbounded target interval cannot be printed")
            lo_l = None if math.isinf(lo) else A.Label("number", number_text(lo), _NOWHERE)
            hi_l = None if math.isinf(hi) else A.Label("number", number_text(hi), _NOWHERE)
            op = None if lo_l is not None and hi_l is not None else (">=" if lo_l is not None else "<=")
            out.append(A.TargetRange(op, lo_l, hi_l, _NOWHERE))
        else:
            lab = _value_label(t.label)
            if lab is None:
                raise ValueError(f"cannot print target class {t.label!r}")
            if lab.kind == "name":
                lab = A.Label("string", lab.text, _NOWHERE)
            out.append(A.TargetClass(lab, _NOWHERE))
    if c.class_names:
        pairs = []
        for lab_v, name in c.class_names:
            lab = _value_label(lab_v)
            if lab is None:
                raise ValueError(f"cannot print class {lab_v!r}")
            pairs.append((lab, A.Label("string", name, _NOWHERE)))
        out.append(A.ClassNames(tuple(pairs), _NOWHERE))
    by_feature: dict[str, list[A.Clause]] = {}
    for feat, v, text in c.words:
        by_feature.setdefault(feat, []).append(A.CMeans(labels.label(feat, v), A.Label("string", text, _NOWHERE),
                                                        _NOWHERE))
    for feat, means in by_feature.items():
        out.append(A.FeatureStmt(_feature_name(feat), tuple(means), _NOWHERE))
    return A.Program(None, "", out, [])


def format_constraints(c: Constraints, schema: Schema | None = None) -> str:
    """Canonical text for a constraint model; compiling it (with the same schema) gives ``c`` back."""
    prog = constraints_program(c, schema)
    return "".join(statement(st) + "\n" for st in prog.statements)


__all__ = ["constraints_program", "expr", "format_constraints", "format_program", "number_text", "statement",
           "quote_name"]
