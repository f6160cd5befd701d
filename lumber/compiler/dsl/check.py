"""Syntax tree -> :class:`lumber.ir.Constraints`, checked against a model's schema.

One pass over the statements (includes expanded in place) collects what is
said about each feature, reporting unknown names (with the nearest spelling),
kind mismatches, non-linear arithmetic, duplicates and contradictions that
hold for every case; a final pass checks each feature's rule as a whole. All
problems are collected and raised together as one :class:`ConstraintError`;
warnings (statements with no effect) are returned with the result.
"""

from __future__ import annotations

import difflib
import math
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Sequence

from lumber.ir import (
    Bound, Constraints, Diagnostic, DiagnosticSink, Direction, Event, Feature, FeatureEvent, FeatureKind,
    FeatureRule, Implication, LinearRelation, Membership, Norm, OneHotGroup, Plausibility, Scale, Schema, Severity,
    SourceSpan, Target, Task, InputDataError, Cutoff,
)
from lumber.ir.constraints import NORM_WORDS, SCALE_NAMES

from . import ast as A
from .labels import as_float, is_number, lookup_code, param_value, plain, short_list, shown
from .names import DELTA, ORIG, Resolver, VALUE, quote_name
from .parse import ConstraintError, parse_file
from .plausibility import PLAUSIBILITY
from .printer import expr

SETTINGS: dict[str, tuple[Callable[[str], Norm | Scale], tuple[str, ...]]] = {
    "norm": (Norm.parse, NORM_WORDS), "scale": (Scale.parse, tuple(SCALE_NAMES))}
"""How each setting's word is read (the one parser of ``lumber.ir``) and the names a message suggests."""
EVENTS = {"increases": Event.INCREASES, "decreases": Event.DECREASES, "changes": Event.CHANGES,
          "is unchanged": Event.UNCHANGED}


@dataclass
class CheckResult:
    """A compiled constraint file: the model, warnings, and what was read."""

    constraints: Constraints
    warnings: list[Diagnostic]
    statements: int
    files: list[str]


# -- per-feature state -------------------------------------------------------------------


@dataclass
class _RuleState:
    feature: str
    span: SourceSpan
    fields: dict[str, tuple[Any, SourceSpan]] = field(default_factory=dict)

    def get(self, name: str) -> Any:
        v = self.fields.get(name)
        return v[0] if v is not None else None

    def where(self, name: str) -> SourceSpan | None:
        v = self.fields.get(name)
        return v[1] if v is not None else None


_FIELD_WORDS = {
    "immutable": "'immutable'", "direction": "a direction (increase/decrease)", "lower": "a lower bound",
    "upper": "an upper bound", "allowed": "an allowed set ('in')", "order": "an order", "cost_up": "an 'up' cost",
    "cost_down": "a 'down' cost", "domain": "a value kind (integer/binary/continuous)", "step": "a step",
}


_EXTRA_WORDS = {"lower": "bounds", "upper": "bounds", "allowed": "allowed set", "cost_up": "cost",
                "cost_down": "cost", "step": "step"}


class _Checker:
    def __init__(self, schema: Schema | None, base_dir: Path) -> None:
        self.schema = schema
        self.features: dict[str, Feature] = {f.name: f for f in schema.features} if schema is not None else {}
        self.base_dir = base_dir
        self.sink = DiagnosticSink()
        self.lines: dict[str | None, list[str]] = {}
        self.files: list[str] = []
        self.rules: dict[str, _RuleState] = {}
        self.relations: list[LinearRelation] = []
        self.implications: list[Implication] = []
        self.onehot: list[OneHotGroup] = []
        self.class_names: dict[str, tuple[str, SourceSpan]] = {}
        self._class_labels: dict[str, Any] = {}
        self.words: dict[tuple[str, float], tuple[str, SourceSpan]] = {}
        self._grouped: dict[str, SourceSpan] = {}
        self.settings: dict[str, tuple[Any, SourceSpan]] = {}
        self.statements = 0
        self.resolver = Resolver((), strict=False)

    # -- diagnostics ----------------------------------------------------------------------

    def _src(self, span: SourceSpan | None) -> str | None:
        if span is None:
            return None
        lines = self.lines.get(span.file, [])
        return lines[span.line - 1] if 0 < span.line <= len(lines) else None

    def err(self, msg: str, span: SourceSpan | None, *notes: str) -> None:
        self.sink.add(Diagnostic(Severity.ERROR, msg, span, tuple(notes), self._src(span)))

    def warn(self, msg: str, span: SourceSpan | None, *notes: str) -> None:
        self.sink.add(Diagnostic(Severity.WARNING, msg, span, tuple(notes), self._src(span)))

    # -- includes -------------------------------------------------------------------------

    def expand(self, program: A.Program, stack: list[Path], seen: set[Path]) -> list[A.Statement]:
        """The program's statements with includes replaced by the included files' statements."""
        self.lines.setdefault(program.file, program.lines)
        if program.file is not None and program.file not in self.files:
            self.files.append(program.file)
        here = stack[-1].parent if stack else self.base_dir
        out: list[A.Statement] = []
        for st in program.statements:
            if not isinstance(st, A.Include):
                out.append(st)
                continue
            if not st.path or "\0" in st.path:
                self.err("invalid file name in include", st.span)
                continue
            target = (here / st.path)
            try:
                key = target.resolve()
            except (OSError, RuntimeError):
                key = target.absolute()
            if key in stack:
                chain = " -> ".join(_show(p) for p in [*stack[stack.index(key):], key])
                self.err(f"include cycle: {chain}", st.span, "remove one of these includes")
                continue
            if key in seen:
                continue  # include-once: a file shared by several includes is read one time
            seen.add(key)
            display = os.path.relpath(target) if not Path(st.path).is_absolute() else st.path
            try:
                sub = parse_file(target, display)
            except ConstraintError as exc:
                diags = list(exc.diagnostics)
                if len(diags) == 1 and diags[0].location is None:
                    d = diags[0]
                    reason = d.message.split(": ", 1)[-1]
                    self.err(f"cannot include \"{st.path}\": {reason}", st.span,
                             f"included files are found relative to the including file's folder ({_show(here)})")
                else:
                    for d in diags:
                        self.sink.add(d)
                continue
            out.extend(self.expand(sub, [*stack, key], seen))
        return out

    # -- names ----------------------------------------------------------------------------

    def feature(self, name: A.Name) -> Feature | None:
        """A name in a feature position: the schema's feature, an unknown-name error, or a free name."""
        if self.schema is None:
            return Feature(name.text)
        f = self.features.get(name.text)
        if f is None:
            self._unknown(name.text, name.span)
        return f

    def _unknown(self, text: str, span: SourceSpan) -> None:
        guess = self.resolver.suggest(text)
        if guess is not None:
            self.err(f"unknown feature '{text}'", span, f"did you mean '{guess}'?")
        else:
            names = sorted(self.features)
            shown = ", ".join(names[:12]) + (", ..." if len(names) > 12 else "")
            self.err(f"unknown feature '{text}'", span, f"the model's features: {shown}")

    def kind(self, feature: str) -> FeatureKind | None:
        f = self.features.get(feature)
        return f.kind if f is not None else None

    # -- arithmetic -----------------------------------------------------------------------

    def linear(self, e: A.Expr) -> tuple[dict[tuple[str, str], float], float] | None:
        """``sum coef * ref + const`` for an expression, or None after reporting why not."""
        if isinstance(e, A.Num):
            v = e.value
            if not math.isfinite(v):
                self.err(f"number {e.text} is out of range", e.span)
                return None
            return {}, v
        if isinstance(e, A.Ref):
            r = self.resolver.resolve(e.name.text, e.name.quoted, e.form)
            if r is None:
                self._unknown(e.name.text, e.name.span)
                return None
            return {r: 1.0}, 0.0
        if isinstance(e, A.Paren):
            return self.linear(e.inner)
        if isinstance(e, A.Neg):
            inner = self.linear(e.operand)
            if inner is None:
                return None
            s = 1.0 if e.plus else -1.0
            return {k: s * c for k, c in inner[0].items()}, s * inner[1]
        assert isinstance(e, A.Chain)
        acc = self.linear(e.first)
        for op, term in e.rest:
            rhs = self.linear(term)
            if acc is None or rhs is None:
                acc = None
                continue
            acc = self._combine(acc, op, rhs, term)
        if acc is not None and not (math.isfinite(acc[1]) and all(math.isfinite(c) for c in acc[0].values())):
            self.err("arithmetic overflows (a coefficient is not finite)", e.span)
            return None
        return acc

    def _combine(self, a: tuple[dict, float], op: str, b: tuple[dict, float], term: A.Expr
                 ) -> tuple[dict, float] | None:
        if op in "+-":
            s = 1.0 if op == "+" else -1.0
            terms = dict(a[0])
            for k, c in b[0].items():
                terms[k] = terms.get(k, 0.0) + s * c
            return terms, a[1] + s * b[1]
        if op == "*":
            if a[0] and b[0]:
                self.err("not linear: a product of two features", term.span,
                         "constraints are linear: multiply features by numbers only")
                return None
            (terms, k) = (a[0], b[1]) if a[0] else (b[0], a[1])
            return {n: c * k for n, c in terms.items()}, a[1] * b[1]
        if b[0]:
            self.err("not linear: division by a feature", term.span, "divide by numbers only")
            return None
        if b[1] == 0:
            self.err("division by zero", term.span)
            return None
        return {n: c / b[1] for n, c in a[0].items()}, a[1] / b[1]

    def relation(self, rel: A.Relation, role: str) -> LinearRelation | None:
        """Lower ``lhs op rhs``; ``role`` is ``statement``, ``condition`` or ``consequence``."""
        op = {"=": "==", "<=": "<=", ">=": ">=", "==": "=="}.get(rel.op)
        if op is None:
            self._strict_op(rel.op, rel.span)
            return None
        left, right = self.linear(rel.lhs), self.linear(rel.rhs)
        if left is None or right is None:
            return None
        terms = dict(left[0])
        for k, c in right[0].items():
            terms[k] = terms.get(k, 0.0) - c
        const = left[1] - right[1]
        x: dict[str, float] = {}
        x0: dict[str, float] = {}
        bad = False
        for (feat, reading), c in terms.items():
            if self.kind(feat) == FeatureKind.CATEGORICAL:
                self.err(f"'{feat}' is categorical: its codes have no order, so it cannot appear in a linear relation",
                         rel.span, f"use a set instead: `if {feat} in {{...}} then ...`")
                bad = True
            if reading in (VALUE, DELTA):
                x[feat] = x.get(feat, 0.0) + c
            if reading in (ORIG, DELTA):
                x0[feat] = x0.get(feat, 0.0) + (c if reading == ORIG else -c)
        if bad:
            return None
        xt = tuple((f, c) for f, c in x.items() if c != 0.0)
        x0t = tuple((f, c) for f, c in x0.items() if c != 0.0)
        rhs = -const + 0.0
        out = LinearRelation(xt, x0t, op, rhs, rel.span)
        if not xt and role != "condition":
            if x0t:
                self.err("this relation involves only original values, which a counterfactual cannot change",
                         rel.span, "use it as the condition of an implication: `if Age0 >= 30 then ...`")
                return None
            holds = {"<=": 0.0 <= rhs, ">=": 0.0 >= rhs, "==": rhs == 0.0}[op]
            if not holds:
                self.err("this relation is never true: the features cancel out", rel.span)
                return None
            self.warn("this relation always holds: the features cancel out", rel.span, "it is ignored")
            return None
        return out

    def _strict_op(self, op: str, span: SourceSpan) -> None:
        if op == "!=":
            self.err("'!=' is not supported", span, "for categories write the allowed set: `X in {a, b}`")
        else:
            self.err(f"strict comparison '{op}' is not supported", span,
                     f"use '{op}='; for integer levels, move the bound to the next level")

    # -- labels ---------------------------------------------------------------------------

    def code(self, feat: str, label: A.Label) -> float | None:
        """A category label or number -> the feature's code (reporting why not)."""
        f = self.features.get(feat)
        found = lookup_code(f, label.kind, label.text)
        if found is not None:
            return found
        if label.kind == "number" and not math.isfinite(label.number):
            self.err(f"number {label.text} is out of range", label.span)
        elif f is None:
            self.err(f"category label '{label.text}' needs the model's schema to become a code", label.span,
                     "check with a model (`lumber check FILE --model MODEL`) or write the code as a number")
        elif label.kind != "number" and not f.categories:
            self.err(f"'{feat}' has no category labels in the model; write its codes as numbers", label.span)
        elif label.kind != "number":
            cats = f.categories or ()
            close = difflib.get_close_matches(label.text, [str(c) for c in cats], n=1, cutoff=0.6)
            self.err(f"unknown category '{label.text}' of '{feat}'", label.span,
                     f"did you mean '{close[0]}'?" if close else f"categories: {short_list(cats)}")
        elif f.categories:
            self.err(f"{label.text} is neither a category of '{feat}' nor a code in 0..{len(f.categories) - 1}",
                     label.span, f"categories: {short_list(f.categories)}")
        elif f.kind == FeatureKind.BINARY:
            self.err(f"'{feat}' is binary: its values are 0 and 1, not {label.text}", label.span)
        else:
            self.err(f"category codes are non-negative integers, not {label.text}", label.span)
        return None

    def codes(self, feat: str, labels: Sequence[A.Label], what: str) -> list[float] | None:
        out: list[float] = []
        seen: dict[float, A.Label] = {}
        ok = True
        for lab in labels:
            c = self.code(feat, lab)
            if c is None:
                ok = False
                continue
            if c in seen:
                self.err(f"'{lab.text}' is listed twice in {what}", lab.span,
                         f"it is the same value as '{seen[c].text}'" if seen[c].text != lab.text else "remove one")
                ok = False
                continue
            seen[c] = lab
            out.append(c)
        return out if ok else None

    # -- statements -----------------------------------------------------------------------

    def rule(self, feat: str, span: SourceSpan) -> _RuleState:
        st = self.rules.get(feat)
        if st is None:
            st = self.rules[feat] = _RuleState(feat, span)
        return st

    def set_field(self, st: _RuleState, name: str, value: Any, span: SourceSpan) -> None:
        prev = st.fields.get(name)
        if prev is None:
            st.fields[name] = (value, span)
            return
        if name == "direction" and prev[0] != value:
            self.err(f"'{st.feature}' cannot both increase and decrease", span,
                     f"the other direction is given at {prev[1]}",
                     f"to forbid any change write `immutable {_qn(st.feature)}`")
            return
        what = _FIELD_WORDS[name]
        if name == "immutable":
            self.err(f"'{st.feature}' is already immutable", span, f"first declared at {prev[1]}")
        else:
            self.err(f"'{st.feature}' already has {what}", span, f"first given at {prev[1]}",
                     "give each property of a feature once")

    def statement(self, st: A.Statement) -> None:
        if isinstance(st, A.NameList):
            for nm in st.names:
                f = self.feature(nm)
                if f is None:
                    continue
                rs = self.rule(f.name, nm.span)
                if st.keyword == "immutable":
                    self.set_field(rs, "immutable", True, nm.span)
                else:
                    self.direction(rs, st.keyword, nm.span)
        elif isinstance(st, A.FeatureStmt):
            f = self.feature(st.name)
            if f is None:
                return
            for cl in st.clauses:
                if isinstance(cl, A.CMeans):
                    self.means(f, cl)
            acts = [cl for cl in st.clauses if not isinstance(cl, A.CMeans)]
            if acts:  # words alone are display: they make no rule
                rs = self.rule(f.name, st.span)
                for cl in acts:
                    self.clause(rs, f, cl)
        elif isinstance(st, A.RelationStmt):
            rel = self.relation(st.relation, "statement")
            if rel is not None:
                self.relations.append(rel)
        elif isinstance(st, A.ImplicationStmt):
            cond = self.condition(st.condition, "condition")
            thens = [self.condition(c, "consequence") for c in st.then]
            if cond is not None and all(t is not None for t in thens):
                self.implications.append(Implication(cond, tuple(thens), st.span))  # type: ignore[arg-type]
        elif isinstance(st, A.ChangesStmt):
            self.changes(st)
        elif isinstance(st, A.Setting):
            parse, words = SETTINGS[st.keyword]
            try:
                val: Norm | Scale = parse(st.word)
            except InputDataError:
                close = difflib.get_close_matches(st.word.lower(), list(words), n=1, cutoff=0.5)
                self.err(f"unknown {st.keyword} '{st.word}'", st.word_span,
                         f"did you mean '{close[0]}'?" if close else f"expected one of: {', '.join(words)}")
                return
            self.setting(st.keyword, val, st.span)
        elif isinstance(st, A.PlausibleStmt):
            self.plausible(st)
        elif isinstance(st, (A.TargetClass, A.TargetRange, A.TargetThreshold)):
            self.target(st)
        elif isinstance(st, A.OneHotStmt):
            self.onehot_group(st)
        elif isinstance(st, A.ClassNames):
            self.name_classes(st)

    def means(self, f: Feature, cl: A.CMeans) -> None:
        """``1 means "payment delayed 1+ month"``: words for one value of a feature."""
        text = cl.words.text.strip()
        if not text:
            self.err("empty words", cl.words.span, 'write what the value means, e.g. `1 means "delayed 1+ month"`')
            return
        code = self.code(f.name, cl.value)
        if code is None:
            return
        prev = self.words.get((f.name, code))
        if prev is not None:
            self.err(f"'{f.name}' = {cl.value.text} already has words", cl.span, f"first given at {prev[1]}")
            return
        self.words[(f.name, code)] = (text, cl.span)

    def name_classes(self, st: A.ClassNames) -> None:
        """``class 0 means paid, 1 means default``: what the classes mean to people."""
        task = self.schema.task if self.schema is not None else None
        if task is not None and task not in (Task.BINARY, Task.MULTICLASS):
            self.err(f"class names need a classifier; this model's task is {task.name.lower()}", st.span)
            return
        for label, name in st.names:
            cls = self.class_label(label)
            if cls is None:
                continue
            text = name.text.strip()
            key = str(cls)
            if not text:
                self.err("empty class name", name.span, "write what the class means, e.g. `class 1 means default`")
            elif key in self.class_names:
                self.err(f"class {label.text} is named twice", label.span, f"first named at {self.class_names[key][1]}")
            elif any(text == t for t, _ in self.class_names.values()):
                self.err(f"two classes are named '{text}'", name.span, "give each class its own name")
            else:
                self.class_names[key] = (text, label.span)
                self._class_labels[key] = cls

    def onehot_group(self, st: A.OneHotStmt) -> None:
        members: list[str] = []
        ok = True
        for nm in st.members:
            f = self.feature(nm)
            if f is None:
                ok = False
                continue
            if self.kind(f.name) == FeatureKind.CATEGORICAL:
                self.err(f"'{f.name}' is categorical: it cannot be a one-hot column", nm.span,
                         "a one-hot group lists 0/1 columns, one per category")
                ok = False
            elif f.name in members:
                self.err(f"'{f.name}' is listed twice in one-hot group '{st.name.text}'", nm.span)
                ok = False
            elif f.name in self._grouped:
                self.err(f"'{f.name}' is already in a one-hot group", nm.span,
                         f"first grouped at {self._grouped[f.name]}")
                ok = False
            members.append(f.name)
        if len(members) < 2 and ok:
            self.err(f"one-hot group '{st.name.text}' needs at least two columns", st.span,
                     f"e.g. `onehot {st.name.text} = {{{st.name.text}_a, {st.name.text}_b}}`")
            ok = False
        if any(g.name == st.name.text for g in self.onehot):
            self.err(f"one-hot group '{st.name.text}' is declared twice", st.name.span)
            ok = False
        if ok:
            for m, nm in zip(members, st.members):
                self._grouped[m] = nm.span
            self.onehot.append(OneHotGroup(st.name.text, tuple(members), st.span))

    def setting(self, key: str, value: Any, span: SourceSpan) -> None:
        prev = self.settings.get(key)
        if prev is not None:
            self.err(f"'{key}' is given twice", span, f"first given at {prev[1]}")
            return
        self.settings[key] = (value, span)

    def direction(self, rs: _RuleState, word: str, span: SourceSpan) -> None:
        self.set_field(rs, "direction", Direction.INCREASE if word == "increase" else Direction.DECREASE, span)

    def clause(self, rs: _RuleState, f: Feature, cl: A.Clause) -> None:
        feat = f.name
        kind = self.kind(feat)
        if isinstance(cl, A.CImmutable):
            self.set_field(rs, "immutable", True, cl.span)
        elif isinstance(cl, A.CDirection):
            self.direction(rs, cl.direction, cl.span)
        elif isinstance(cl, (A.CBetween, A.CCompare)):
            if kind == FeatureKind.CATEGORICAL:
                self.err(f"a range on categorical feature '{feat}'", cl.span,
                         "its codes have no order; restrict it with a set: `in {a, b}`")
                return
            if isinstance(cl, A.CBetween):
                lo, hi = self.bound(feat, cl.low, ">="), self.bound(feat, cl.high, "<=")
                if lo is not None and hi is not None:
                    self.set_field(rs, "lower", lo, cl.span)
                    self.set_field(rs, "upper", hi, cl.span)
                return
            if cl.op in ("<", ">", "!="):
                self._strict_op(cl.op, cl.span)
                return
            b = self.bound(feat, cl.value, "==" if cl.op == "=" else cl.op)
            if b is None:
                return
            if cl.op in (">=", "==", "="):
                self.set_field(rs, "lower", b, cl.span)
            if cl.op in ("<=", "==", "="):
                self.set_field(rs, "upper", b, cl.span)
        elif isinstance(cl, A.CIn):
            if kind == FeatureKind.NUMERICAL:
                self.err(f"a category set on numerical feature '{feat}'", cl.span,
                         "restrict a numerical feature with a range: `between 20 and 60`",
                         "if the model does not record that it holds categories (scikit-learn), give the "
                         "kinds with `lumber check --data TRAIN.csv`")
                return
            codes = self.codes(feat, cl.labels, "the set")
            if codes is not None:
                self.set_field(rs, "allowed", tuple(sorted(codes)), cl.span)
        elif isinstance(cl, A.COrder):
            if kind in (FeatureKind.NUMERICAL, FeatureKind.BINARY):
                self.err(f"an order on {kind.name.lower()} feature '{feat}'", cl.span,
                         "orders are for categorical and ordinal features")
                return
            codes = self.codes(feat, cl.labels, "the order")
            if codes is None:
                return
            cats = self.features[feat].categories if feat in self.features else None
            if cats:
                missing = [str(cats[i]) for i in range(len(cats)) if float(i) not in codes]
                if missing:
                    self.err(f"the order of '{feat}' leaves out {short_list(missing)}", cl.span,
                             "list every category, lowest first")
                    return
            self.set_field(rs, "order", tuple(codes), cl.span)
        elif isinstance(cl, A.CKind):
            if kind == FeatureKind.CATEGORICAL:
                self.err(f"'{feat}' is categorical: it cannot be {cl.kind}", cl.span,
                         "restrict its categories with a set: `in {a, b}`")
                return
            if cl.kind != "binary" and kind == FeatureKind.BINARY:
                self.err(f"'{feat}' is binary in the model: it cannot be {cl.kind}", cl.span)
                return
            self.set_field(rs, "domain", cl.kind, cl.span)
        elif isinstance(cl, A.CStep):
            if kind == FeatureKind.CATEGORICAL:
                self.err(f"'{feat}' is categorical: a step does not apply", cl.span)
                return
            if not (math.isfinite(cl.amount.value) and cl.amount.value > 0):
                self.err(f"a step must be a positive number, not {cl.amount.text}", cl.amount.span,
                         "e.g. `step 1` for whole units, `step 0.01` for cents")
                return
            self.set_field(rs, "step", cl.amount.value, cl.span)
        elif isinstance(cl, A.CCost):
            amount = cl.amount.value
            if cl.per is not None:
                per = cl.per.value
                if per == 0:
                    self.err("'per 0': a cost per zero units", cl.per.span, "write `cost 1 per 1000` for 1 per 1000 units")
                    return
                amount = amount / per
            if not math.isfinite(amount):
                self.err("cost is out of range", cl.span)
                return
            if cl.side in (None, "up"):
                self.set_field(rs, "cost_up", amount, cl.span)
            if cl.side in (None, "down"):
                self.set_field(rs, "cost_down", amount, cl.span)

    def bound(self, feat: str, e: A.Expr, op: str) -> Bound | None:
        lin = self.linear(e)
        if lin is None:
            return None
        terms = {k: c for k, c in lin[0].items() if c != 0.0}
        if not terms:
            return Bound(lin[1])
        if terms == {(feat, ORIG): 1.0}:
            return Bound(lin[1], relative=True)
        orig = self.resolver.spell(feat, ORIG)
        self.err(f"a bound on '{feat}' must be a number or {orig} plus or minus a number", e.span,
                 f"to relate it to other values, write a linear relation on its own line: "
                 f"`{self.resolver.spell(feat)} {op} {expr(e)}`")
        return None

    def condition(self, c: A.Cond, role: str) -> Any:
        if isinstance(c, A.EventCond):
            f = self.feature(c.name)
            if f is None:
                return None
            ev = EVENTS[c.event]
            self._events.append((f.name, ev, c.span))
            return FeatureEvent(f.name, ev, c.span)
        if isinstance(c, A.MemberCond):
            subj = c.subject
            while isinstance(subj, A.Paren):
                subj = subj.inner
            if not isinstance(subj, A.Ref):
                self.err("the subject of 'in' must be a feature", c.subject.span,
                         "e.g. `Housing in {own}` (new value) or `Housing0 in {own}` (original value)")
                return None
            r = self.resolver.resolve(subj.name.text, subj.name.quoted, subj.form)
            if r is None:
                self._unknown(subj.name.text, subj.name.span)
                return None
            feat, reading = r
            if reading == DELTA:
                self.err("a change cannot be in a set of categories", subj.span,
                         f"test the new value ({self.resolver.spell(feat)}) or the original ({self.resolver.spell(feat, ORIG)})")
                return None
            if reading == ORIG and role == "consequence":
                self.err("a consequence cannot constrain an original value", c.span,
                         "original values are fixed; put the test in the 'if' part")
                return None
            if self.kind(feat) == FeatureKind.NUMERICAL:
                self.err(f"a category set on numerical feature '{feat}'", c.span,
                         f"use a relation instead, e.g. `{self.resolver.spell(feat)} >= 10`")
                return None
            codes = self.codes(feat, c.labels, "the set")
            if codes is None:
                return None
            return Membership(feat, tuple(sorted(codes)), reading == ORIG, c.span)
        return self.relation(c, role)

    def changes(self, st: A.ChangesStmt) -> None:
        if st.op != "<=":
            if st.op in ("<", ">", "!="):
                self._strict_op(st.op, st.span)
            else:
                self.err(f"'changes {st.op} ...' is not supported", st.span,
                         "limit the number of changed features with `changes <= N`")
            return
        lin = self.linear(st.value)
        if lin is None:
            return
        if lin[0]:
            self.err("the limit on changes must be a number", st.value.span, "e.g. `changes <= 3`")
            return
        n = lin[1]
        if n != int(n):
            self.err(f"the limit on changes must be a whole number, not {n:g}", st.value.span)
            return
        if n < 0:
            self.err(f"the limit on changes is negative ({int(n)})", st.value.span,
                     "`changes <= 0` forbids every change; use a positive limit")
            return
        if n == 0:
            self.warn("`changes <= 0` forbids every change: no counterfactual can exist", st.span)
        self.setting("changes", int(n), st.span)

    def plausible(self, st: A.PlausibleStmt) -> None:
        spec = PLAUSIBILITY.get(st.method)
        if spec is None:
            close = difflib.get_close_matches(st.method, list(PLAUSIBILITY), n=1, cutoff=0.5)
            self.err(f"unknown plausibility method '{st.method}'", st.method_span,
                     f"did you mean '{close[0]}'?" if close else f"known methods: {', '.join(PLAUSIBILITY)}")
            return
        params: list[tuple[str, Any]] = []
        ok = True
        for p in st.params or ():
            check = spec.get(p.name)
            if check is None:
                close = difflib.get_close_matches(p.name, list(spec), n=1, cutoff=0.5)
                self.err(f"unknown parameter '{p.name}' of {st.method}", p.span,
                         f"did you mean '{close[0]}'?" if close else f"parameters: {', '.join(spec)}")
                ok = False
                continue
            if any(n == p.name for n, _ in params):
                self.err(f"parameter '{p.name}' is given twice", p.span)
                ok = False
                continue
            value = param_value(p.value)
            expected = check(value)
            if expected is not None:
                self.err(f"{st.method} parameter '{p.name}' must be {expected}, not {p.value.text}", p.value.span)
                ok = False
                continue
            params.append((p.name, value))
        if ok:
            self.setting("plausible", Plausibility(st.method, tuple(params), st.span), st.span)

    def target(self, st: A.TargetClass | A.TargetRange | A.TargetThreshold) -> None:
        task = self.schema.task if self.schema is not None else None
        if isinstance(st, A.TargetThreshold):
            self.target_threshold(st, task)
            return
        if isinstance(st, A.TargetClass):
            if task is not None and task not in (Task.BINARY, Task.MULTICLASS):
                self.err(f"'target class' needs a classifier; this model's task is {task.name.lower()}", st.span,
                         "for a regression model write `target between 0.2 and 0.5`" if task == Task.REGRESSION else
                         "anomaly models have no target")
                return
            label = self.class_label(st.label)
            if label is not None:
                self.setting("target", Target(label=label), st.span)
            return
        if task is not None and task != Task.REGRESSION:
            self.err(f"a target interval needs a regression model; this model's task is {task.name.lower()}", st.span,
                     "for a classifier write `target class 1`" if task != Task.ANOMALY else "anomaly models have no target")
            return
        if st.op in ("<", ">", "!=", "==", "="):
            if st.op in ("==", "="):
                self.err("a regression target is an interval", st.span, "write `target between a and b`")
            else:
                self._strict_op(st.op, st.span)
            return
        lo = st.low.number if st.low is not None else -math.inf
        hi = st.high.number if st.high is not None else math.inf
        for lab in (st.low, st.high):
            if lab is not None and not math.isfinite(lab.number):
                self.err(f"number {lab.text} is out of range", lab.span)
                return
        if lo > hi:
            self.err(f"empty target interval: {lo:g} is above {hi:g}", st.span, "write the lower end first")
            return
        self.setting("target", Target(interval=(lo, hi)), st.span)

    def target_threshold(self, st: A.TargetThreshold, task: Task | None) -> None:
        """``target probability of class 1 <= 0.3``: the decision rule (class 1 iff its probability is
        above 0.3) and the side of it sought, on a binary classifier's positive class."""
        example = "write `target probability of class 1 <= 0.3` or `target margin of class 1 > 0`"
        if st.score not in ("probability", "margin"):
            self.err(f"unknown score '{st.score}': a threshold is on the probability or the margin", st.score_span,
                     example)
            return
        if st.of_word != "of":
            self.err(f"expected 'of' after '{st.score}', not '{st.of_word}'", st.of_span, example)
            return
        if st.op in ("==", "=", "!="):
            self.err(f"a threshold target compares with <, <=, > or >=, not '{st.op}'", st.span, example)
            return
        if task is not None and task != Task.BINARY:
            self.err(f"a threshold target needs a binary classifier; this model's task is {task.name.lower()}",
                     st.span, "for a multiclass model write `target class 2`" if task == Task.MULTICLASS else
                     "for a regression model write `target between 0.2 and 0.5`" if task == Task.REGRESSION else
                     "anomaly models have no target")
            return
        if st.score == "margin" and self.schema is not None and self.schema.n_outputs != 1:
            self.err("a margin threshold needs a model with one margin; this one has one score per class", st.span,
                     "state it on the probability: `target probability of class 1 <= 0.3`")
            return
        label = self.class_label(st.label)
        if label is None:
            return
        if self.schema is not None:
            labels = tuple(self.schema.classes) if self.schema.classes is not None else (0, 1)
            if not (str(labels[1]) == str(label) or labels[1] == label):
                self.err(f"a threshold is stated on the positive class {labels[1]!s}, not {label!s}", st.label.span,
                         f"`probability of class {label} <= p` is `probability of class {labels[1]} >= 1 - p`")
                return
        value = st.value.number
        if not math.isfinite(value) or (st.score == "probability" and not 0.0 < value < 1.0):
            what = "strictly between 0 and 1" if st.score == "probability" else "finite"
            self.err(f"a probability threshold must be {what}, not {st.value.text}" if st.score == "probability"
                     else f"number {st.value.text} is out of range", st.value.span)
            return
        inclusive = st.op in (">=", "<")
        self.setting("target", Target(label=label, cutoff=Cutoff(value, st.score, inclusive),
                                      below=st.op in ("<=", "<")), st.span)

    def class_label(self, label: A.Label) -> Any:
        classes = self.schema.classes if self.schema is not None else None
        raw = param_value(label) if label.kind == "number" else label.text
        if label.kind == "number" and not math.isfinite(float(raw)):
            self.err(f"number {label.text} is out of range", label.span)
            return None
        if self.schema is None:
            return raw
        if classes is None:
            n = 2 if self.schema.task == Task.BINARY else self.schema.n_outputs
            if label.kind == "number" and float(raw) == int(float(raw)) and 0 <= float(raw) < n:
                return int(float(raw))
            self.err(f"unknown class {shown(label)}", label.span, f"the model's classes are 0..{n - 1}")
            return None
        for c in classes:
            if label.kind != "number" and str(c) == label.text:
                return plain(c)
        if label.kind == "number":
            for c in classes:
                if is_number(c) and float(c) == float(raw):
                    return plain(c)
            for c in classes:
                if isinstance(c, str) and as_float(c) == float(raw):
                    return plain(c)
            if float(raw) == int(float(raw)) and 0 <= float(raw) < len(classes):
                return plain(classes[int(float(raw))])
        close = difflib.get_close_matches(label.text, [str(c) for c in classes], n=1, cutoff=0.6)
        self.err(f"unknown class {shown(label)}", label.span,
                 f"did you mean '{close[0]}'?" if close else f"the model's classes: {short_list(classes)}")
        return None

    # -- whole-rule checks ----------------------------------------------------------------

    def finish_rule(self, rs: _RuleState) -> FeatureRule:
        feat, kind = rs.feature, self.kind(rs.feature)
        imm, direction = rs.get("immutable"), rs.get("direction")
        lo, hi = rs.get("lower"), rs.get("upper")
        if imm and direction is not None:
            later = max(rs.where("immutable"), rs.where("direction"), key=_pos)  # type: ignore[arg-type]
            self.err(f"'{feat}' cannot be immutable and {direction.name.lower()}", later,
                     "an immutable feature never changes; remove one of the two")
        elif imm:
            extra = [n for n in ("lower", "upper", "allowed", "cost_up", "cost_down") if n in rs.fields]
            if extra:
                words = list(dict.fromkeys(_EXTRA_WORDS[n] for n in extra))
                what = " and ".join([", ".join(words[:-1]), words[-1]] if len(words) > 1 else words)
                self.warn(f"'{feat}' is immutable, so its {what} {'have' if len(words) > 1 else 'has'} no effect",
                          rs.where(extra[0]), f"declared immutable at {rs.where('immutable')}")
        if direction is not None and kind == FeatureKind.CATEGORICAL and rs.get("order") is None:
            self.err(f"'{feat}' is categorical: '{direction.name.lower()}' needs an order of its categories",
                     rs.where("direction"), f"declare one, e.g. `{_qn(feat)}: order a < b < c`")
        if lo is not None and hi is not None and lo.relative == hi.relative and lo.value > hi.value:
            o = self.resolver.spell(feat, ORIG)
            show = (lambda b: _bound_text(b, o))
            self.err(f"empty range for '{feat}': lower bound {show(lo)} is above upper bound {show(hi)}",
                     rs.where("upper") if _pos(rs.where("upper")) >= _pos(rs.where("lower")) else rs.where("lower"),
                     "the lower bound comes first: `between low and high`")
        if direction == Direction.INCREASE and hi is not None and hi.relative and hi.value < 0:
            self.err(f"'{feat}' may only increase, but its upper bound is below its original value", rs.where("upper"))
        if direction == Direction.DECREASE and lo is not None and lo.relative and lo.value > 0:
            self.err(f"'{feat}' may only decrease, but its lower bound is above its original value", rs.where("lower"))
        allowed = rs.get("allowed")
        if allowed is not None and (lo is not None and not lo.relative or hi is not None and not hi.relative):
            lov = lo.value if lo is not None and not lo.relative else -math.inf
            hiv = hi.value if hi is not None and not hi.relative else math.inf
            if not any(lov <= v <= hiv for v in allowed):
                self.err(f"no allowed value of '{feat}' lies within its bounds", rs.where("allowed"))
        if rs.get("domain") == "binary" and rs.get("step") is not None:
            self.err(f"'{feat}' is binary: a step does not apply", rs.where("step"), "binary values are 0 and 1")
        if rs.get("domain") == "integer" and rs.get("step") is not None and not float(rs.get("step")).is_integer():
            self.err(f"'{feat}' is integer: its step must be a whole number", rs.where("step"))
        up, down = rs.get("cost_up"), rs.get("cost_down")
        if kind == FeatureKind.CATEGORICAL and rs.get("order") is None and up is not None and up != down:
            self.warn(f"'{feat}' is categorical without an order: 'up' and 'down' costs are not defined for it",
                      rs.where("cost_up"), "give one cost for any change: `cost 2`")
        return FeatureRule(
            feat, immutable=bool(imm), direction=direction if direction is not None else Direction.ANY,
            lower=lo, upper=hi, allowed=allowed, order=rs.get("order"), cost_up=up, cost_down=down,
            domain=rs.get("domain"), step=rs.get("step"), span=rs.span)

    def check_events(self) -> None:
        for feat, ev, span in self._events:
            if ev in (Event.INCREASES, Event.DECREASES) and self.kind(feat) == FeatureKind.CATEGORICAL:
                rs = self.rules.get(feat)
                if rs is None or rs.get("order") is None:
                    self.err(f"'{feat}' is categorical: '{ev.name.lower()}' needs an order of its categories", span,
                             f"declare one, e.g. `{_qn(feat)}: order a < b < c`, or test `{_qn(feat)} changes`")

    # -- driver ---------------------------------------------------------------------------

    def run(self, program: A.Program) -> CheckResult:
        self._events: list[tuple[str, Event, SourceSpan]] = []
        root = Path(program.file).resolve() if program.file is not None and Path(program.file).is_file() else None
        stack = [root] if root is not None else []
        statements = self.expand(program, stack, set(stack))
        if self.schema is not None:
            self.resolver = Resolver(self.features, strict=True)
        else:
            self.resolver = Resolver(_declared(statements), strict=False)
        for st in statements:
            self.statements += 1
            self.statement(st)
        rules = tuple(self.finish_rule(rs) for rs in self.rules.values())
        self.check_events()
        order: dict[str | None, int] = {f: i for i, f in enumerate(self.files)}
        self.sink.items.sort(key=lambda d: (order.get(getattr(d.location, "file", None), -1),
                                            getattr(d.location, "line", 0), getattr(d.location, "column", 0)))
        self.sink.raise_if_errors(ConstraintError)

        def get(key: str) -> Any:
            v = self.settings.get(key)
            return v[0] if v is not None else None

        c = Constraints(
            rules=rules, norm=get("norm"), scale=get("scale"), max_changes=get("changes"),
            relations=tuple(self.relations), implications=tuple(self.implications),
            plausibility=get("plausible"), target=get("target"), onehot=tuple(self.onehot),
            class_names=tuple((self._class_labels[k], t) for k, (t, _) in self.class_names.items()),
            words=tuple((feat, v, t) for (feat, v), (t, _) in self.words.items()), source=program.file)
        return CheckResult(c, list(self.sink.items), self.statements, list(self.files))


def _declared(statements: Sequence[A.Statement]) -> set[str]:
    """Names in feature positions (statement heads, name lists, event subjects)."""
    out: set[str] = set()
    for st in statements:
        if isinstance(st, A.NameList):
            out.update(n.text for n in st.names)
        elif isinstance(st, A.FeatureStmt):
            out.add(st.name.text)
        elif isinstance(st, A.ImplicationStmt):
            for c in (st.condition, *st.then):
                if isinstance(c, A.EventCond):
                    out.add(c.name.text)
    return out


def _qn(feat: str) -> str:
    return quote_name(feat)


def _bound_text(b: Bound, orig: str) -> str:
    if not b.relative:
        return f"{b.value:g}"
    if b.value == 0:
        return orig
    return f"{orig} {'+' if b.value > 0 else '-'} {abs(b.value):g}"


def _pos(span: SourceSpan | None) -> tuple[int, int]:
    return (span.line, span.column) if span is not None else (0, 0)


def _show(p: Path) -> str:
    try:
        return os.path.relpath(p)
    except ValueError:
        return str(p)


def check_program(program: A.Program, schema: Schema | None = None, base_dir: str | Path | None = None) -> CheckResult:
    """Check a parsed program against ``schema`` (or only for consistency when None) and lower it."""
    base = Path(base_dir) if base_dir is not None else (
        Path(program.file).parent if program.file is not None else Path.cwd())
    return _Checker(schema, base).run(program)
