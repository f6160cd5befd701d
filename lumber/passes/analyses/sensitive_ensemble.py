"""Sensitive tests of an ensemble: a verified upper bound on the nearest decision change.

An ensemble's class regions are not unions of one tree's leaves, so projecting
onto leaves is no longer exact; the exact answer is the counterfactual MILP
(:func:`milp_sensitive`, used when ``lumber.passes.analyses.counterfactual`` exists).
:func:`upper_bound_sensitive` is the bounded method: it searches candidate
points built from the trees' leaf boxes and keeps the nearest one whose
decision, evaluated on the whole model, has changed. Every reported point is
such a verified point, so the reported distance is an upper bound on the true
one; results carry ``exact=False`` and ``method="upper-bound"``.

The search, per case (and per target class for multiclass models):

1. project the case onto every leaf of every tree and evaluate the nearest
   projections on the full model (a single crossing often suffices);
2. a beam search: from the current points, project onto the nearest leaves of
   each tree that move that tree's output toward the goal and move single
   features across their nearest thresholds, evaluate them all, keep the best
   gains per unit of cost, until the decision changes;
3. shrink the best point found: reset features to the case's value or pull them
   back to the nearest threshold crossing while the decision stays changed.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, fields
from typing import Any, Callable

import numpy as np
import numpy.typing as npt

from lumber.ir import Bound, Constraints, Direction, FeatureRule, Forest, InputDataError, LumberError, Target, Task
from lumber.ir.forest import ZERO_THRESHOLD
from lumber.ir.interp import forest_apply, forest_evaluate

from .leaf_boxes import forest_boxes
from .metrics import Metric
from .realizable import above, below
from .sensitive_results import SensitiveResult
from .sensitive_tests import (TestExtractor, choose_target, decision_labels, decision_messages, goal_decisions,
                              verify)
from .tree_projection import Bounds, TreePlan

FloatArray = npt.NDArray[np.float64]


@dataclass(frozen=True, kw_only=True)
class SearchOptions:
    """Effort of the upper-bound search."""

    first_candidates: int = 512
    """Single-leaf projections of the case evaluated on the full model (phase 1)."""
    per_tree: int = 2
    """Leaves per tree tried from each state at each step of the walk (phase 2)."""
    beam: int = 4
    """States kept at each step of the walk."""
    max_steps: int = 64
    shrink_rounds: int = 8
    time_limit: float | None = None
    """Seconds per case and target after which the walk stops (the best verified point is kept)."""
    sweep: int = 8
    """Single-feature moves tried per feature and direction at each step (nearest threshold
    crossings; every admissible category of a categorical feature)."""


class _Search:
    """State shared by the searches of one batch: per-tree plans and the model."""

    def __init__(self, forest: Forest, metric: Metric, goal: Target, opts: SearchOptions) -> None:
        self.forest = forest
        self.metric = metric
        self.goal = goal
        self.opts = opts
        self.boxes = forest_boxes(forest)
        self.plans = [TreePlan(forest, b, metric) for b in self.boxes]
        self.values = [forest.value[b.leaf] for b in self.boxes]  # (L_t, K)
        self.cfeat = np.flatnonzero(metric.constrained)
        thr: dict[int, FloatArray] = {}
        for f in range(forest.n_features):
            nodes = (forest.feature == f) & (forest.left >= 0) & ~forest.is_categorical
            cuts = forest.threshold[nodes]
            if forest.missing_zero[forest.feature == f].any():  # the zero band's edges are cuts too
                cuts = np.concatenate([cuts, [np.nextafter(-ZERO_THRESHOLD, -np.inf), ZERO_THRESHOLD]])
            thr[f] = np.unique(cuts)
        self.thresholds = thr

    # -- model access -----------------------------------------------------------------------

    def evaluate(self, P: FloatArray) -> tuple[FloatArray, npt.NDArray[np.int64]]:
        margins = forest_evaluate(self.forest, P)
        return margins, goal_decisions(self.forest, margins, self.goal)

    def reached(self, dec: npt.NDArray[np.int64], g0: int, target: int | None) -> npt.NDArray[np.bool_]:
        return dec != g0 if target is None else dec == target

    def direction(self, margin: FloatArray, g0: int, target: int | None) -> FloatArray:
        """``u`` with ``u . margin`` to be decreased to move toward the goal (a linearization)."""
        s = self.forest.schema
        K = s.n_outputs
        m = np.atleast_1d(margin)
        if s.task == Task.REGRESSION:
            assert self.goal.interval is not None
            lo, hi = self.goal.interval
            pred = float(s.transform(m)[0])
            if g0 == 1:  # inside: leave by the nearer edge
                return np.array([1.0 if pred - lo < hi - pred else -1.0])
            return np.array([-1.0 if pred < lo else 1.0])
        if K == 1:
            return np.array([1.0 if g0 == 1 else -1.0])
        u = np.zeros(K)
        order = np.argsort(-m, kind="stable")
        if target is None:
            u[g0] += 1.0
            u[next(int(k) for k in order if k != g0)] -= 1.0
        else:
            u[next(int(k) for k in order if k != target)] += 1.0
            u[target] -= 1.0
        return u

    def bounds_for(self, blo: FloatArray, bhi: FloatArray, n: int) -> Bounds:
        return {int(f): (np.repeat(blo[j:j + 1], n), np.repeat(bhi[j:j + 1], n)) for j, f in enumerate(self.cfeat)}

    # -- phases -----------------------------------------------------------------------------

    def single_leaf(self, x: FloatArray, blo: FloatArray, bhi: FloatArray, g0: int, target: int | None
                    ) -> FloatArray | None:
        """Phase 1: nearest single-leaf projections that change the decision."""
        costs, owners = [], []
        one = self.bounds_for(blo, bhi, 1)
        for t, plan in enumerate(self.plans):
            c = plan.costs(x[None, :], one)[:, 0]
            costs.append(c)
            owners.append(np.stack([np.full(c.shape[0], t), np.arange(c.shape[0])], axis=1))
        cost = np.concatenate(costs)
        own = np.concatenate(owners)
        keep = np.flatnonzero(np.isfinite(cost) & (cost > 0))
        keep = keep[np.argsort(cost[keep], kind="stable")[: self.opts.first_candidates]]
        P = np.concatenate([self._witnesses(x, own[keep], blo, bhi), self.sweeps(x, blo, bhi)])
        if P.shape[0] == 0:
            return None
        _, dec = self.evaluate(P)
        hit = np.flatnonzero(self.reached(dec, g0, target))
        if hit.size == 0:
            return None
        d = self.metric.distance(np.broadcast_to(x, P[hit].shape), P[hit])
        return P[hit[int(np.argmin(d))]]

    def sweeps(self, z: FloatArray, blo: FloatArray, bhi: FloatArray) -> FloatArray:
        """Points that move one feature of ``z`` across its nearest thresholds (or to another category)."""
        m = self.metric
        bl, bh = np.full(z.shape[0], -np.inf), np.full(z.shape[0], np.inf)
        bl[self.cfeat], bh[self.cfeat] = blo, bhi
        rows: list[FloatArray] = []
        k = self.opts.sweep
        for f in range(z.shape[0]):
            if m.immutable[f] or np.isnan(z[f]):
                continue
            if m.categorical[f]:
                vals = np.arange(int(m.n_codes[f]), dtype=np.float64)
                if f in m.allowed:
                    vals = vals[np.isin(vals, m.allowed[f])]
                vals = vals[vals != z[f]]
            else:
                thr = self.thresholds[f]
                if thr.size == 0:
                    continue
                integer = bool(m.integer[f])
                upv = above(thr[thr >= z[f]][:k], True, m.input_dtype, integer)
                dnv = below(thr[thr < z[f]][::-1][:k], False, m.input_dtype, integer)
                vals = np.concatenate([upv, dnv])
                lo, hi = max(bl[f], m.domain_lo[f]), min(bh[f], m.domain_hi[f])
                vals = vals[(vals >= lo) & (vals <= hi) & np.isfinite(vals) & (vals != z[f])]
            if vals.size:
                P = np.repeat(z[None, :], vals.size, axis=0)
                P[:, f] = vals
                rows.append(P)
        return np.concatenate(rows) if rows else np.empty((0, z.shape[0]))

    def _witnesses(self, z: FloatArray, owner: npt.NDArray[np.int64], blo: FloatArray, bhi: FloatArray) -> FloatArray:
        """Projection of ``z`` onto each (tree, leaf row) in ``owner``."""
        P = np.empty((owner.shape[0], z.shape[0]))
        for t in np.unique(owner[:, 0]):
            sel = np.flatnonzero(owner[:, 0] == t)
            Z = np.repeat(z[None, :], sel.size, axis=0)
            P[sel] = self.plans[int(t)].witness(Z, owner[sel, 1], self.bounds_for(blo, bhi, sel.size))
        return P

    def walk(self, x: FloatArray, blo: FloatArray, bhi: FloatArray, g0: int, target: int | None,
             budget: float) -> FloatArray | None:
        """Phase 2: a beam search across leaves toward the goal, best gain per unit of cost first.

        Moves that leave the score unchanged are allowed (at rate 0), so plateaus where two
        features must change together are crossed; ``max_steps`` bounds the walk.
        """
        Z = x[None, :].copy()
        dZ = np.zeros(1)
        seen = {x.tobytes()}
        deadline = None if self.opts.time_limit is None else time.perf_counter() + self.opts.time_limit
        for _ in range(self.opts.max_steps):
            if deadline is not None and time.perf_counter() > deadline:
                return None
            margins = forest_evaluate(self.forest, Z).reshape(Z.shape[0], self.forest.n_outputs)
            leaves = forest_apply(self.forest, Z)
            costs = [plan.costs(Z, self.bounds_for(blo, bhi, Z.shape[0])) for plan in self.plans]
            U = np.stack([self.direction(margins[b], g0, target) for b in range(Z.shape[0])])
            cands, parent = [], []
            for b in range(Z.shape[0]):
                owners = []
                for t in range(len(self.plans)):
                    gain = -(self.values[t] - self.forest.value[leaves[b, t]]) @ U[b]
                    c = costs[t][:, b]
                    ok = np.flatnonzero((gain > 0) & np.isfinite(c))
                    if ok.size:
                        pick = ok[np.argsort(c[ok], kind="stable")[: self.opts.per_tree]]
                        owners.append(np.stack([np.full(pick.size, t), pick], axis=1))
                P = self.sweeps(Z[b], blo, bhi)
                if owners:
                    P = np.concatenate([self._witnesses(Z[b], np.concatenate(owners), blo, bhi), P])
                cands.append(P)
                parent.append(np.full(P.shape[0], b))
            P = np.concatenate(cands)
            par = np.concatenate(parent)
            if P.shape[0] == 0:
                return None
            m_p, dec_p = self.evaluate(P)
            d_p = self.metric.distance(np.broadcast_to(x, P.shape), P)
            hit = np.flatnonzero(self.reached(dec_p, g0, target))
            if hit.size:
                return P[hit[int(np.argmin(d_p[hit]))]]
            s_z = (margins * U).sum(axis=1)
            s_p = (m_p.reshape(P.shape[0], self.forest.n_outputs) * U[par]).sum(axis=1)
            fresh = np.array([p.tobytes() not in seen for p in P])
            ok = np.flatnonzero((s_p <= s_z[par]) & (d_p < budget) & (d_p > dZ[par]) & fresh)
            if ok.size == 0:
                return None
            rate = (s_z[par[ok]] - s_p[ok]) / np.maximum(d_p[ok] - dZ[par[ok]], 1e-12)
            order = ok[np.lexsort((d_p[ok], -rate))]
            chosen: list[int] = []
            keys: set[bytes] = set()
            for j in order:
                key = P[j].tobytes()
                if key not in keys:
                    keys.add(key)
                    chosen.append(int(j))
                if len(chosen) == self.opts.beam:
                    break
            seen |= keys
            Z, dZ = P[chosen], d_p[chosen]
        return None

    def shrink(self, x: FloatArray, q: FloatArray, blo: FloatArray, bhi: FloatArray, g0: int,
               target: int | None) -> FloatArray:
        """Phase 3: move features of a verified point back toward the case while the goal holds."""
        m = self.metric
        best_d = float(m.distance(x[None, :], q[None, :])[0])
        in_bounds = np.ones(x.shape[0], dtype=bool)
        bl, bh = np.full(x.shape[0], -np.inf), np.full(x.shape[0], np.inf)
        bl[self.cfeat], bh[self.cfeat] = blo, bhi
        with np.errstate(invalid="ignore"):
            in_bounds = ~((x < bl) | (x > bh))
        for _ in range(self.opts.shrink_rounds):
            cands = []
            changed = np.flatnonzero(~((q == x) | (np.isnan(q) & np.isnan(x))))
            for f in changed:
                vals = [x[f]] if in_bounds[f] else []
                if not m.categorical[f] and not np.isnan(x[f]):
                    vals += list(self._pullbacks(int(f), float(x[f]), float(q[f]), bl[f], bh[f]))
                for v in vals:
                    y = q.copy()
                    y[f] = v
                    cands.append(y)
            if not cands:
                break
            Y = np.array(cands)
            _, dec = self.evaluate(Y)
            d = m.distance(np.broadcast_to(x, Y.shape), Y)
            ok = np.flatnonzero(self.reached(dec, g0, target) & (d < best_d))
            if ok.size == 0:
                break
            j = ok[int(np.argmin(d[ok]))]
            q, best_d = Y[j], float(d[j])
        return q

    def _pullbacks(self, f: int, xv: float, qv: float, lo: float, hi: float) -> FloatArray:
        """Values between ``xv`` and ``qv`` just past each threshold (where routing can change)."""
        thr = self.thresholds[f]
        m = self.metric
        integer = bool(m.integer[f])
        if qv > xv:
            t = thr[(thr >= xv) & (thr < qv)]
            v = above(t, True, m.input_dtype, integer)
            v = v[(v < qv) & (v > xv)]
        else:
            t = thr[(thr < xv) & (thr >= qv)]
            v = below(t, False, m.input_dtype, integer)
            v = v[(v > qv) & (v < xv)]
        v = np.clip(v, max(lo, m.domain_lo[f]), min(hi, m.domain_hi[f]))
        return np.unique(v)

    def search(self, x: FloatArray, blo: FloatArray, bhi: FloatArray, g0: int, target: int | None) -> FloatArray | None:
        best = self.single_leaf(x, blo, bhi, g0, target)
        budget = np.inf if best is None else float(self.metric.distance(x[None, :], best[None, :])[0])
        walk = self.walk(x, blo, bhi, g0, target, budget)
        pts = [p for p in (best, walk) if p is not None]
        if not pts:
            return None
        shrunk = [self.shrink(x, p, blo, bhi, g0, target) for p in pts]
        d = [float(self.metric.distance(x[None, :], p[None, :])[0]) for p in shrunk]
        return shrunk[int(np.argmin(d))]


def upper_bound_sensitive(forest: Forest, X: FloatArray, metric: Metric, goal: Target = Target(),
                          **options: Any) -> SensitiveResult:
    """Verified upper bound on the nearest decision change of each case (``X`` prepared)."""
    known = {f.name for f in fields(SearchOptions)}
    unknown = sorted(set(options) - known)
    if unknown:
        raise InputDataError(f"unknown option(s) for the upper-bound search: {', '.join(unknown)}",
                             f"accepted: {', '.join(sorted(known))}")
    opts = SearchOptions(**options)
    s = _Search(forest, metric, goal, opts)
    labels = decision_labels(forest, goal)
    G = len(labels)
    n, d = X.shape
    margins = forest_evaluate(forest, X)
    g = goal_decisions(forest, margins, goal)
    blo, bhi = metric.case_bounds(X, s.cfeat)
    gdist = np.full((n, G), np.inf)
    gpoint = np.full((n, G, d), np.nan)
    gdist[np.arange(n), g] = 0.0
    gpoint[np.arange(n), g] = X
    multiclass = G > 2 and goal.index is None
    for i in range(n):
        targets: list[int | None]
        if goal.index is not None:
            targets = [goal.index] if goal.index != g[i] else []
        elif multiclass:
            targets = [k for k in range(G) if k != g[i]]
        else:
            targets = [None]
        for tk in targets:
            p = None if metric.all_frozen else s.search(X[i], blo[i], bhi[i], int(g[i]), tk)
            if p is None:
                continue
            k = int(goal_decisions(forest, forest_evaluate(forest, p[None, :]), goal)[0])
            dist = float(metric.distance(X[i:i + 1], p[None, :])[0])
            if dist < gdist[i, k]:
                gdist[i, k], gpoint[i, k] = dist, p
    return _assemble(forest, X, metric, goal, labels, g, gdist, gpoint, method="upper-bound", exact=False)


def _assemble(forest: Forest, X: FloatArray, metric: Metric, goal: Target, labels: tuple[Any, ...],
              g: npt.NDArray[np.int64], gdist: FloatArray, gpoint: FloatArray, *, method: str,
              exact: bool) -> SensitiveResult:
    """A verified result from the nearest point found for each decision."""
    n, d = X.shape
    G = len(labels)
    idx = np.arange(n)
    target, dist = choose_target(gdist, g, goal)
    ok = target >= 0
    point = np.full((n, d), np.nan)
    point[ok] = gpoint[idx[ok], target[ok]]
    leaves = forest_apply(forest, X)
    result = SensitiveResult(
        forest=forest, metric=metric, X=X, distance=dist, point=point, group=g, target_group=target,
        leaf=np.full(n, -1, dtype=np.int64), trace=forest.depth[leaves].sum(axis=1).astype(np.int32),
        verified=np.zeros(n, dtype=bool), exact=exact, method=method, group_labels=labels,
        group_distance=gdist, group_point=gpoint if G > 2 else None,
        messages=decision_messages(g, target, labels, goal),
    )
    result.tests_of = TestExtractor(forest, metric).tests
    verify(result, goal)
    return result


def metric_constraints(metric: Metric) -> Constraints:
    """The per-feature restrictions of a metric as a Constraints object (costs go as weights)."""
    rules = []
    for i, name in enumerate(metric.names):
        lower = Bound(float(metric.lower[i]), bool(metric.lower_relative[i])) if np.isfinite(metric.lower[i]) else None
        upper = Bound(float(metric.upper[i]), bool(metric.upper_relative[i])) if np.isfinite(metric.upper[i]) else None
        direction = (Direction.INCREASE if metric.increase_only[i] else
                     Direction.DECREASE if metric.decrease_only[i] else Direction.ANY)
        allowed = tuple(float(c) for c in metric.allowed[i]) if i in metric.allowed else None
        rule = FeatureRule(name, immutable=bool(metric.immutable[i]), direction=direction, lower=lower,
                           upper=upper, allowed=allowed)
        if rule != FeatureRule(name):
            rules.append(rule)
    return Constraints(rules=tuple(rules), max_changes=metric.max_changes)


def _milp_targets(labels: tuple[Any, ...], g0: int, goal: Target) -> list[tuple[int, Any]]:
    """(decision index, solver target) pairs the MILP is asked for."""
    if goal.interval is not None:
        lo, hi = goal.interval
        if g0 == 0:
            return [(1, (lo, hi))]
        below_, above_ = float(np.nextafter(lo, -np.inf)), float(np.nextafter(hi, np.inf))
        return [(0, t) for t in ((-np.inf, below_), (above_, np.inf)) if t[0] <= t[1] and np.isfinite(t).any()]
    if goal.index is not None:
        return [] if goal.index == g0 else [(goal.index, labels[goal.index])]
    return [(k, labels[k]) for k in range(len(labels)) if k != g0]


def milp_sensitive(forest: Forest, X: FloatArray, metric: Metric, goal: Target, solver: Callable[..., Any],
                   *, time_limit: float = 30.0, strict: bool = False, fallback: SearchOptions | None = None,
                   **options: Any) -> SensitiveResult:
    """Exact ensemble sensitive tests: the counterfactual MILP with the same metric, per case and
    per target decision (``lumber.passes.analyses.counterfactual.solve_counterfactual``).

    A case whose MILP stops at the time limit keeps the verified point found (not proven minimal);
    when it found none, the upper-bound search fills in. Either way the case is marked inexact.
    Unless ``strict``, a solver failure other than a user error (``LumberError``) is reported in
    the case's message and the upper-bound search answers instead (with ``fallback``'s effort).
    """
    labels = decision_labels(forest, goal)
    G = len(labels)
    n, d = X.shape
    g = goal_decisions(forest, forest_evaluate(forest, X), goal)
    cons = metric_constraints(metric)
    weights = (metric.down, metric.up)
    gdist = np.full((n, G), np.inf)
    gpoint = np.full((n, G, d), np.nan)
    gdist[np.arange(n), g] = 0.0
    gpoint[np.arange(n), g] = X
    exact = np.ones(n, dtype=bool)
    notes: dict[int, str] = {}
    backup: _Search | None = None
    blo, bhi = metric.case_bounds(X, np.flatnonzero(metric.constrained))
    for i in range(n):
        if metric.all_frozen:
            continue
        for k, tgt in _milp_targets(labels, int(g[i]), goal):
            try:
                res = solver(forest, X[i], target=tgt, constraints=cons, norm=metric.norm, scale=None,
                             weights=weights, time_limit=time_limit, **options)
                status = str(res.status)
                p = res.x if (res.x is not None and res.verified) else None
            except LumberError:
                raise
            except Exception as exc:  # a solver defect must not lose the case: fall back, say so
                if strict:
                    raise
                status, p = "failed", None
                notes[i] = f"MILP failed ({type(exc).__name__}: {exc}); upper-bound search used"
            if status not in ("optimal", "infeasible"):
                exact[i] = False
                notes.setdefault(i, f"MILP {status.replace('_', ' ')}: distance not proven minimal")
            if p is None and status != "infeasible":
                if backup is None:
                    backup = _Search(forest, metric, goal, fallback or SearchOptions())
                tk = k if goal.interval is None else None
                p = backup.search(X[i], blo[i], bhi[i], int(g[i]), tk)
            if p is None:
                continue
            kk = int(goal_decisions(forest, forest_evaluate(forest, p[None, :]), goal)[0])
            dist = float(metric.distance(X[i:i + 1], p[None, :])[0])
            if kk != g[i] and dist < gdist[i, kk]:
                gdist[i, kk], gpoint[i, kk] = dist, p
    result = _assemble(forest, X, metric, goal, labels, g, gdist, gpoint, method="milp", exact=bool(exact.all()))
    result.case_exact = exact
    result.messages.update(notes)
    return result


__all__ = ["SearchOptions", "upper_bound_sensitive", "milp_sensitive", "metric_constraints"]
