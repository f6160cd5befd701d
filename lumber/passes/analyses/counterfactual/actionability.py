"""Actionability constraints from :class:`lumber.ir.Constraints` as MILP rows, and their check on a point.

Bounds, immutability, directions and allowed values shape the feature domains
(see ``problem.py``); this module adds what couples features: linear relations
(``LinearRelation.over_x``), implications (an indicator binary ``b`` with
``condition => b = 1`` and ``b = 1 => every consequence``), and a limit on the
number of changed features. Every returned counterfactual is re-checked
against the same constraints in plain numpy (:func:`violations`).
"""

from __future__ import annotations

from typing import Sequence

import numpy as np
import numpy.typing as npt

from lumber.ir import (
    CompileError, Constraints, Event, FeatureEvent, Implication, LinearRelation, Membership,
)

from .domain import CategoricalDomain, Domain, FixedDomain, NumericDomain
from .model import LinExpr, MilpModel

FloatArray = npt.NDArray[np.float64]
Condition = FeatureEvent | Membership | LinearRelation

STRICT = 1e-7
"""Relative slack that turns ``not (a x <= r)`` into ``a x >= r + slack`` (conservative)."""


def x_expr(dom: Domain) -> LinExpr:
    return dom.x_expr()


def change_exprs(dom: Domain, x0: float) -> tuple[LinExpr, LinExpr]:
    """``([x > x0], [x < x0])`` as expressions (categorical: code order)."""
    if isinstance(dom, FixedDomain):
        v = dom.value
        same = v == x0 or (np.isnan(v) and np.isnan(x0))
        return LinExpr.constant(float(not same and v > x0)), LinExpr.constant(float(not same and v < x0))
    if isinstance(dom, CategoricalDomain):
        return (dom.member_expr(dom.codes[dom.codes > dom.x0_code].astype(np.float64)),
                dom.member_expr(dom.codes[dom.codes < dom.x0_code].astype(np.float64)))
    return dom.increase_expr(), dom.decrease_expr()


def relation_expr(rel: LinearRelation, names: Sequence[str], x0: FloatArray,
                  domains: list[Domain]) -> tuple[LinExpr, str, float]:
    a, op, rhs = rel.over_x(names, x0)
    e = LinExpr()
    for i in np.flatnonzero(a):
        e = e + float(a[i]) * x_expr(domains[int(i)])
    return e, op, rhs


def _event_expr(ev: FeatureEvent, names: Sequence[str], x0: FloatArray, domains: list[Domain]) -> LinExpr:
    i = list(names).index(ev.feature)
    inc, dec = change_exprs(domains[i], float(x0[i]))
    if ev.event == Event.INCREASES:
        return inc
    if ev.event == Event.DECREASES:
        return dec
    if ev.event == Event.CHANGES:
        return inc + dec
    return 1.0 - (inc + dec)


def _member_expr(m: Membership, names: Sequence[str], x0: FloatArray, domains: list[Domain]) -> LinExpr:
    i = list(names).index(m.feature)
    vals = np.asarray(m.values, dtype=np.float64)
    if m.original:
        return LinExpr.constant(float(np.isin(x0[i], vals)))
    dom = domains[i]
    if isinstance(dom, FixedDomain):
        return LinExpr.constant(float(np.isin(dom.value, vals)))
    if isinstance(dom, CategoricalDomain):
        return dom.member_expr(vals)
    e = LinExpr()
    for v in vals:
        if dom.grid.representable(float(v)):
            a, b = dom.equals_cuts(float(v))
            e = e + dom.gt(a) - dom.gt(b)
    return e


def needed_cuts(cons: Constraints, names: Sequence[str], x0: FloatArray, domains: list[Domain]) -> None:
    """Register the cut indicators (as binaries) that events and memberships read."""
    conds: list[Condition] = []
    for imp in cons.implications:
        conds.append(imp.condition)
        conds.extend(imp.then)
    for c in conds:
        if isinstance(c, FeatureEvent):
            dom = domains[list(names).index(c.feature)]
            if isinstance(dom, NumericDomain):
                a, b = dom.change_cuts()
                dom.add_cut(a)
                dom.add_cut(b)
                dom.binary_cuts.update((a, b))
        elif isinstance(c, Membership) and not c.original:
            dom = domains[list(names).index(c.feature)]
            if isinstance(dom, NumericDomain):
                for v in c.values:
                    if dom.grid.representable(float(v)):
                        a, b = dom.equals_cuts(float(v))
                        dom.add_cut(a)
                        dom.add_cut(b)
                        dom.binary_cuts.update((a, b))


def add_rows(cons: Constraints, names: Sequence[str], x0: FloatArray, domains: list[Domain],
             model: MilpModel) -> None:
    """Relations, implications and the change limit."""
    for rel in cons.relations:
        e, op, rhs = relation_expr(rel, names, x0, domains)
        _relation_row(model, e, op, rhs)
    for imp in cons.implications:
        _implication(model, imp, names, x0, domains)
    if cons.max_changes is not None:
        total = LinExpr()
        for i, dom in enumerate(domains):
            inc, dec = change_exprs(dom, float(x0[i])) if not isinstance(dom, CategoricalDomain) else (
                dom.change_expr(), LinExpr())
            total = total + inc + dec
        model.add_expr_row(total, -np.inf, float(cons.max_changes))


def _relation_row(model: MilpModel, e: LinExpr, op: str, rhs: float) -> None:
    if op == "<=":
        model.add_expr_row(e, -np.inf, rhs)
    elif op == ">=":
        model.add_expr_row(e, rhs, np.inf)
    elif op == "==":
        model.add_expr_row(e, rhs, rhs)
    else:
        raise CompileError(f"linear relation with unknown operator {op!r}", "accepted: <=, >=, ==")


def _implication(model: MilpModel, imp: Implication, names: Sequence[str], x0: FloatArray,
                 domains: list[Domain]) -> None:
    b = int(model.add_cols(1, 0.0, 1.0, integer=True, name="implies")[0])
    bv = LinExpr.var(b)
    c = imp.condition
    if isinstance(c, LinearRelation):
        e, op, r = relation_expr(c, names, x0, domains)
        lo, hi = e.bounds(model.lb, model.ub)
        d = STRICT * (1.0 + abs(r))
        # b = 0 must imply "not condition"; when the condition cannot hold no row is needed
        if op == "<=" and r + d > lo:
            model.add_expr_row(e + (r + d - lo) * bv, r + d, np.inf)
        elif op == ">=" and r - d < hi:
            model.add_expr_row(e - (hi - (r - d)) * bv, -np.inf, r - d)
        elif op == "==":
            s = int(model.add_cols(1, 0.0, 1.0, integer=True, name="implies-side")[0])
            sv = LinExpr.var(s)
            M = max(hi - (r - d), (r + d) - lo, 0.0)
            model.add_expr_row(e - M * (bv + sv), -np.inf, r - d)
            model.add_expr_row(e + M * (bv + 1.0 - sv), r + d, np.inf)
    else:
        ce = _event_expr(c, names, x0, domains) if isinstance(c, FeatureEvent) else _member_expr(c, names, x0, domains)
        model.add_expr_row(bv - ce, 0.0, np.inf)  # condition => b
    for t in imp.then:
        if isinstance(t, LinearRelation):
            e, op, r = relation_expr(t, names, x0, domains)
            lo, hi = e.bounds(model.lb, model.ub)
            if op in ("<=", "=="):
                model.add_expr_row(e + max(hi - r, 0.0) * bv, -np.inf, r + max(hi - r, 0.0))
            if op in (">=", "=="):
                model.add_expr_row(e - max(r - lo, 0.0) * bv, r - max(r - lo, 0.0), np.inf)
        else:
            te = (_event_expr(t, names, x0, domains) if isinstance(t, FeatureEvent)
                  else _member_expr(t, names, x0, domains))
            model.add_expr_row(te - bv, 0.0, np.inf)  # b => consequence


# -- checking a point ---------------------------------------------------------------------

def _holds(c: Condition, names: Sequence[str], x0: FloatArray, x: FloatArray, tol: float) -> bool:
    if isinstance(c, LinearRelation):
        return c.holds(names, x0, x, tol=tol * (1 + abs(c.rhs)))
    i = list(names).index(c.feature)
    if isinstance(c, Membership):
        v = x0[i] if c.original else x[i]
        return bool(np.isin(v, np.asarray(c.values, dtype=np.float64)))
    a, b = float(x[i]), float(x0[i])
    same = a == b or (np.isnan(a) and np.isnan(b))
    if c.event == Event.INCREASES:
        return not same and a > b
    if c.event == Event.DECREASES:
        return not same and a < b
    if c.event == Event.CHANGES:
        return not same
    return same


def violations(cons: Constraints | None, names: Sequence[str], x0: FloatArray, x: FloatArray,
               tol: float = 1e-6) -> list[str]:
    """Every constraint ``x`` breaks, described for a user (empty when all hold)."""
    if cons is None:
        return []
    out: list[str] = []
    lo, hi = cons.bounds(names, x0)
    for i, n in enumerate(names):
        v = float(x[i])
        if np.isnan(v) and np.isnan(x0[i]):
            continue
        if v < lo[i] - tol * (1 + abs(lo[i])) or v > hi[i] + tol * (1 + abs(hi[i])):
            out.append(f"{n} = {v:g} is outside [{lo[i]:g}, {hi[i]:g}]")
        r = cons.rule(n)
        if r.allowed is not None and v not in set(float(a) for a in r.allowed):
            out.append(f"{n} = {v:g} is not an allowed value")
    for rel in cons.relations:
        if not rel.holds(names, x0, x, tol=tol * (1 + abs(rel.rhs))):
            out.append(f"relation {_show(rel)} does not hold")
    for imp in cons.implications:
        if _holds(imp.condition, names, x0, x, 0.0) and not all(_holds(t, names, x0, x, tol) for t in imp.then):
            out.append("an implication's consequence does not hold")
    if cons.max_changes is not None:
        changed = int(sum(1 for i in range(len(names)) if not (x[i] == x0[i] or (np.isnan(x[i]) and np.isnan(x0[i])))))
        if changed > cons.max_changes:
            out.append(f"{changed} features change, more than {cons.max_changes}")
    return out


class Checker:
    """:func:`violations` of many points of one case at once: ``ok(X)[r]`` is ``not violations(..., X[r])``.

    Everything that depends only on the constraints and the case (bounds, allowed values, the relations as
    one coefficient matrix, each condition's feature index) is resolved once, so the warm start's walk can
    check thousands of candidate points in a few numpy operations."""

    def __init__(self, cons: Constraints, names: Sequence[str], x0: FloatArray, tol: float = 1e-6) -> None:
        self.names, self.x0, self.tol = list(names), np.asarray(x0, dtype=np.float64), tol
        self.lo, self.hi = cons.bounds(names, x0)
        self.allowed = [(i, np.asarray(cons.rule(n).allowed, dtype=np.float64)) for i, n in enumerate(names)
                        if cons.rule(n).allowed is not None]
        rels = [r.over_x(names, x0) + (r.rhs,) for r in cons.relations]
        self.A = np.array([a for a, _, _, _ in rels]).reshape(len(rels), len(names))
        self.ops = [op for _, op, _, _ in rels]
        self.rhs = np.array([r for _, _, r, _ in rels])
        self.rtol = np.array([tol * (1 + abs(r0)) for _, _, _, r0 in rels])
        self.implications = list(cons.implications)
        self.max_changes = cons.max_changes

    def ok(self, X: FloatArray) -> npt.NDArray[np.bool_]:
        X = np.asarray(X, dtype=np.float64)
        x0, tol = self.x0, self.tol
        both_nan = np.isnan(X) & np.isnan(x0)[None, :]
        with np.errstate(invalid="ignore"):
            out_lo = X < (self.lo - tol * (1 + np.abs(self.lo)))[None, :]
            out_hi = X > (self.hi + tol * (1 + np.abs(self.hi)))[None, :]
        good = ~np.any((out_lo | out_hi) & ~both_nan, axis=1)
        for i, vals in self.allowed:
            good &= np.isin(X[:, i], vals) | both_nan[:, i]
        if self.A.shape[0]:
            lhs = X @ self.A.T
            for k, op in enumerate(self.ops):
                good &= _compare(lhs[:, k], op, self.rhs[k], self.rtol[k])
        for imp in self.implications:
            cond = self._holds(imp.condition, X, 0.0)
            then = np.ones(X.shape[0], dtype=bool)
            for t in imp.then:
                then &= self._holds(t, X, tol)
            good &= ~cond | then
        if self.max_changes is not None:
            changed = ~((X == x0[None, :]) | both_nan)
            good &= changed.sum(axis=1) <= self.max_changes
        return good

    def _holds(self, c: Condition, X: FloatArray, tol: float) -> npt.NDArray[np.bool_]:
        if isinstance(c, LinearRelation):
            a, op, rhs = c.over_x(self.names, self.x0)
            return _compare(X @ a, op, rhs, tol * (1 + abs(c.rhs)))
        i = self.names.index(c.feature)
        if isinstance(c, Membership):
            vals = np.asarray(c.values, dtype=np.float64)
            if c.original:
                return np.full(X.shape[0], bool(np.isin(self.x0[i], vals)))
            return np.isin(X[:, i], vals)
        a, b = X[:, i], float(self.x0[i])
        same = (a == b) | (np.isnan(a) & np.isnan(b))
        if c.event == Event.INCREASES:
            return ~same & (a > b)
        if c.event == Event.DECREASES:
            return ~same & (a < b)
        if c.event == Event.CHANGES:
            return ~same
        return same


def _compare(lhs: FloatArray, op: str, rhs: float, tol: float) -> npt.NDArray[np.bool_]:
    """``lhs op rhs`` within ``tol``, as :meth:`LinearRelation.holds` decides it."""
    if op == "<=":
        return lhs <= rhs + tol
    if op == ">=":
        return lhs >= rhs - tol
    return np.abs(lhs - rhs) <= tol


def _show(rel: LinearRelation) -> str:
    terms = " + ".join(f"{c:g}*{f}" for f, c in rel.x_terms)
    terms0 = " + ".join(f"{c:g}*{f}0" for f, c in rel.x0_terms)
    return f"{terms}{' + ' + terms0 if terms0 else ''} {rel.op} {rel.rhs:g}"
