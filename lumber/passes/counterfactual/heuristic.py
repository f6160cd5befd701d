"""A quick feasible counterfactual to warm-start the MILP and bound its domains.

Two sources of candidates, both checked with the IR's own evaluation:

- reference rows (training data) that reach the target once repaired to the
  constraints (immutable features reset, bounds clipped, values put on the
  feature's grid);
- a greedy walk from the case across one split at a time, taking the move
  with the best gain in target score per unit of cost (feature tweaking).

The best candidate is then pulled back toward the case feature by feature,
to the split level nearest the original value that keeps the target. The
result is only a heuristic: it bounds the optimum from above.
"""

from __future__ import annotations

from typing import Callable

import numpy as np
import numpy.typing as npt

from lumber.ir import Task

from . import actionability
from .problem import Query
from .domain import grid_for
from .problem import _numeric_kind
from .targets import _inverse

FloatArray = npt.NDArray[np.float64]
BoolArray = npt.NDArray[np.bool_]


def target_score(q: Query, X: FloatArray) -> FloatArray:
    """How far inside the target each row is (positive inside, for class targets with a margin of 0 allowed)."""
    f, spec = q.forest, q.spec
    m = f.evaluate(X)
    s = f.schema
    if spec.kind == "interval":
        assert spec.interval is not None
        p = s.transform(m).reshape(-1)
        return np.minimum(p - spec.interval[0], spec.interval[1] - p)
    if s.n_outputs == 1:
        theta = _inverse(s.post_transform, 0.5, s.sigmoid_alpha)
        return (m - theta) if spec.index == 1 else (theta - m)
    c = spec.index
    others = np.delete(m, c, axis=1)
    return m[:, c] - others.max(axis=1)


class Candidates:
    """Feasibility checks shared by the heuristics."""

    def __init__(self, q: Query, meets: Callable[[FloatArray], BoolArray]) -> None:
        self.q = q
        self.meets = meets
        s = q.forest.schema
        self.grids = [None if q.categorical[i] else grid_for(_numeric_kind(q, i), s.input_dtype, float(q.x0[i]),
                                                            q.allowed.get(i))
                      for i in range(s.n_features)]

    def repair(self, X: FloatArray) -> tuple[FloatArray, BoolArray]:
        """Clip to bounds, reset what cannot change, put values on grids; rows that cannot be repaired are False."""
        q = self.q
        X = np.array(X, dtype=np.float64, copy=True)
        ok = np.ones(X.shape[0], dtype=bool)
        for i in range(X.shape[1]):
            x0 = float(q.x0[i])
            if not np.isfinite(x0):
                X[:, i] = x0
                continue
            col = np.nan_to_num(X[:, i], nan=x0)
            col = np.clip(col, q.lo[i], q.hi[i])
            if q.categorical[i]:
                codes = q.cat_codes[i]
                if i in q.allowed:
                    codes = codes[np.isin(codes, q.allowed[i])]
                codes = codes[(codes >= q.lo[i]) & (codes <= q.hi[i])]
                c = np.trunc(col)
                good = np.isin(c, codes)
                x0c = np.trunc(x0)
                col = np.where(c == x0c, x0, c)
                if x0c in set(codes.tolist()):
                    col = np.where(good, col, x0)
                else:
                    ok &= good
            else:
                g = self.grids[i]
                assert g is not None
                lo = max(float(g.ceil(np.array([q.lo[i]]))[0]) if np.isfinite(q.lo[i]) else -np.inf, g.lowest)
                hi = min(float(g.down(np.array([q.hi[i]]))[0]) if np.isfinite(q.hi[i]) else np.inf, g.highest)
                if not lo <= hi:
                    ok[:] = False
                    continue
                d = g.down(col)
                col = np.where(np.abs(d - col) <= np.abs(g.ceil(col) - col), d, g.ceil(col))
                col = np.clip(col, lo, hi)
            X[:, i] = col
        return X, ok

    def feasible(self, X: FloatArray) -> BoolArray:
        """Target met, plausible, and every constraint holds."""
        q = self.q
        ok = self.meets(X)
        if q.isolation is not None and ok.any():
            iso, delta = q.isolation
            ok &= iso.evaluate(X) >= delta
        if q.constraints is not None and (q.constraints.relations or q.constraints.implications
                                          or q.constraints.max_changes is not None):
            for r in np.flatnonzero(ok):
                if actionability.violations(q.constraints, q.names, q.x0, X[r]):
                    ok[r] = False
        return ok


def cut_values(q: Query, i: int, grid) -> FloatArray:  # type: ignore[no-untyped-def]
    """Values just on each side of every split of feature ``i`` (both forests)."""
    vals = []
    for f in [q.forest] + ([q.isolation[0]] if q.isolation is not None else []):
        t = f.threshold[(f.feature == i) & ~f.is_categorical & (f.left >= 0)]
        if t.size:
            vals += [grid.down(t), grid.up(t)]
    v = np.unique(np.concatenate(vals)) if vals else np.zeros(0)
    return v[np.isfinite(v) & (v >= q.lo[i]) & (v <= q.hi[i])]


def improve(cands: Candidates, x: FloatArray, passes: int = 3) -> FloatArray:
    """Pull each changed feature back toward the case while the point stays feasible."""
    q = cands.q
    cost = q.cost
    for _ in range(passes):
        changed = False
        d = cost.feature_costs(x[None, :])[0]
        for i in np.argsort(-d):
            if d[i] <= 0:
                break
            v, v0 = float(x[i]), float(q.x0[i])
            if q.categorical[i] or cands.grids[i] is None:
                trial = np.array([v0])
            else:
                cv = cut_values(q, i, cands.grids[i])
                between = cv[(cv > min(v, v0)) & (cv < max(v, v0))]
                trial = np.concatenate([[v0], between[np.argsort(np.abs(between - v0))]])
            X = np.tile(x, (trial.shape[0], 1))
            X[:, i] = trial
            X, rep = cands.repair(X)
            ok = rep & cands.feasible(X)
            better = ok & (cost.total(X) < cost.total(x[None, :])[0] - 1e-15)
            if better.any():
                x = X[int(np.argmax(better))]
                changed = True
                d = cost.feature_costs(x[None, :])[0]
        if not changed:
            break
    return x


def greedy(cands: Candidates, max_steps: int = 60) -> FloatArray | None:
    """Cross one split at a time, best target gain per unit cost, until the target is met."""
    q = cands.q
    x = q.x0.copy()
    moves: list[tuple[int, FloatArray]] = []
    for i in range(q.x0.shape[0]):
        if not np.isfinite(q.x0[i]) or q.lo[i] == q.hi[i]:
            continue
        if q.categorical[i]:
            codes = q.cat_codes[i]
            if i in q.allowed:
                codes = codes[np.isin(codes, q.allowed[i])]
            moves.append((i, codes.astype(np.float64)))
        else:
            g = cands.grids[i]
            moves.append((i, cut_values(q, i, g)))
    moves = [(i, v) for i, v in moves if v.size]
    if not moves:
        return None
    for _ in range(max_steps):
        rows, feat = [], []
        for i, vals in moves:
            X = np.tile(x, (vals.shape[0], 1))
            X[:, i] = vals
            rows.append(X)
            feat.append(np.full(vals.shape[0], i))
        X = np.concatenate(rows)
        X, rep = cands.repair(X)
        if not rep.any():
            return None
        ok = rep & cands.meets(X)
        if ok.any():
            feas = cands.feasible(X) & rep
            if feas.any():
                c = np.where(feas, q.cost.total(X), np.inf)
                return X[int(np.argmin(c))]
        s_now = target_score(q, x[None, :])[0]
        gain = target_score(q, X) - s_now
        dc = q.cost.total(X) - q.cost.total(x[None, :])[0]
        ratio = np.where(rep & (gain > 0), gain / np.maximum(dc, 1e-12), -np.inf)
        if not np.isfinite(ratio).any():
            return None
        x = X[int(np.argmax(ratio))]
    return None


def warm_start(q: Query, meets: Callable[[FloatArray], BoolArray], reference: FloatArray | None,
               n_refine: int = 3) -> FloatArray | None:
    """The cheapest feasible point the heuristics find, or None."""
    if q.forest.schema.task not in (Task.BINARY, Task.MULTICLASS, Task.REGRESSION):
        return None
    cands = Candidates(q, meets)
    pool: list[FloatArray] = []
    if reference is not None and len(reference):
        R, rep = cands.repair(np.asarray(reference, dtype=np.float64))
        R = R[rep]
        if R.shape[0]:
            cost = q.cost.total(R)
            order = np.argsort(cost, kind="stable")
            R = R[order]
            good = np.zeros(0, dtype=np.int64)
            for start in range(0, R.shape[0], 512):  # cheapest first, stop once enough are found
                blk = R[start:start + 512]
                hit = np.flatnonzero(cands.feasible(blk))
                good = np.concatenate([good, hit + start])
                if good.shape[0] >= n_refine:
                    break
            pool += [R[j] for j in good[:n_refine]]
    g = greedy(cands)
    if g is not None:
        pool.append(g)
    best, best_cost = None, np.inf
    for x in pool:
        x = improve(cands, x)
        c = float(q.cost.total(x[None, :])[0])
        if c < best_cost:
            best, best_cost = x, c
    return best
