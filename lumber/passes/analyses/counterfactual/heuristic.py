"""A quick feasible counterfactual to warm-start the MILP and bound its domains.

Two sources of candidates:

- reference rows (training data) that reach the target once repaired to the
  constraints (immutable features reset, bounds clipped, values put on the
  feature's grid), cheapest first;
- a greedy walk from the case across one split at a time, taking the move
  with the best gain in target score per unit of cost (feature tweaking).

The best candidate is then pulled back toward the case feature by feature, to
the split level nearest the original value that keeps it feasible. Searching
uses a fast leaf-sum margin; the point returned is re-checked with the IR's
reference evaluation. The result only bounds the optimum from above. Every
loop asks the query's :class:`Deadline` and stops with its best point so far.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import replace
from typing import Any, Callable, Sequence

import numpy as np
import numpy.typing as npt

from lumber.ir import Forest
from lumber.ir.interp import forest_apply, trees_per_output

from . import actionability
from .deadline import Deadline
from .domain import Grid
from .problem import Query, change_pattern
from .reference import Reference
from .targets import decision_threshold

FloatArray = npt.NDArray[np.float64]
BoolArray = npt.NDArray[np.bool_]


def _plain_apply(forest: Forest, X: FloatArray) -> npt.NDArray[np.int64]:
    """Leaf ids when every split is a plain ``x <= t`` (no categories, no zero-as-missing, no NaN in X)."""
    n, T = X.shape[0], forest.n_trees
    node = np.broadcast_to(forest.tree_offset[:-1].astype(np.int64), (n, T)).copy()
    left, right = forest.left.astype(np.int64), forest.right.astype(np.int64)
    thr, feat = forest.threshold, forest.feature.astype(np.int64)
    rows = np.arange(n)[:, None]
    for _ in range(int(forest.depth.max()) + 1 if forest.n_nodes else 0):
        inner = left[node] >= 0
        if not inner.any():
            break
        go = X[rows, feat[node]] <= thr[node]
        node = np.where(inner, np.where(go, left[node], right[node]), node)
    return node


def fast_margins(forest: Forest, X: FloatArray) -> FloatArray:
    """Raw margins of on-grid rows by one vectorised leaf sum (search only; not bit-exact)."""
    plain = not forest.is_categorical.any() and not forest.missing_zero.any() and not np.isnan(X).any()
    leaves = _plain_apply(forest, X) if plain else forest_apply(forest, X)
    s = forest.schema
    m = forest.value[leaves].sum(axis=1) + np.asarray(s.base_score)[None, :]
    if s.average:
        m = m / np.maximum(trees_per_output(forest), 1.0)[None, :]
    return m[:, 0] if s.n_outputs == 1 else m


def _plain(forest: Forest) -> bool:
    return not forest.is_categorical.any() and not forest.missing_zero.any()


def _path_features(forest: Forest, x: FloatArray) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.bool_]]:
    """``x``'s leaf in every tree and which features its path tests (``[n_trees, n_features]``)."""
    T = forest.n_trees
    node = forest.tree_offset[:-1].astype(np.int64).copy()
    tested = np.zeros((T, forest.n_features), dtype=bool)
    trees = np.arange(T)
    for _ in range(int(forest.depth.max()) + 1 if forest.n_nodes else 0):
        inner = forest.left[node] >= 0
        if not inner.any():
            break
        f = forest.feature[node[inner]].astype(np.int64)
        tested[trees[inner], f] = True
        go = x[f] <= forest.threshold[node[inner]]
        node[inner] = np.where(go, forest.left[node[inner]], forest.right[node[inner]])
    return node, tested


def _line_leaves(forest: Forest, x: FloatArray, cols: npt.NDArray[np.int64], trees: npt.NDArray[np.int64]
                 ) -> tuple[npt.NDArray[np.int64], ...]:
    """Every leaf tree ``trees[k]`` can reach from ``x`` as feature ``cols[k]`` alone varies, as
    ``(k, leaf, lo, hi)``: the leaf taken for values ``lo < v <= hi`` (each pair's intervals partition the
    line). A node on the pair's feature sends both sides on, narrowed at its threshold; any other node
    follows ``x``. All pairs walk together, one numpy step per depth."""
    k = np.arange(trees.size)
    node = forest.tree_offset[trees].astype(np.int64)
    col = cols.astype(np.int64)
    lo, hi = np.full(k.size, -np.inf), np.full(k.size, np.inf)
    done: list[tuple[npt.NDArray[Any], ...]] = []
    while node.size:
        leaf = forest.left[node] < 0
        if leaf.any():
            done.append((k[leaf], node[leaf], lo[leaf], hi[leaf]))
            keep = ~leaf
            k, node, col, lo, hi = k[keep], node[keep], col[keep], lo[keep], hi[keep]
        f = forest.feature[node].astype(np.int64)
        thr = forest.threshold[node]
        on = f == col
        go = x[f] <= thr
        left = np.where(on, lo < thr, go)     # on the line: the side v <= thr, (lo, min(hi, thr)]
        right = np.where(on, thr < hi, ~go)   # on the line: the side v > thr, (max(lo, thr), hi]
        k, col = np.concatenate([k[left], k[right]]), np.concatenate([col[left], col[right]])
        node = np.concatenate([forest.left[node[left]], forest.right[node[right]]]).astype(np.int64)
        lo = np.concatenate([lo[left], np.where(on, np.maximum(lo, thr), lo)[right]])
        hi = np.concatenate([np.where(on, np.minimum(hi, thr), hi)[left], hi[right]])
    if not done:
        return tuple(np.zeros(0, dtype=t) for t in (np.int64, np.int64, np.float64, np.float64))
    return tuple(np.concatenate([d[j] for d in done]) for j in range(4))


def _moved_margins(forest: Forest, x: FloatArray, cols: npt.NDArray[np.int64], X: FloatArray,
                   deadline: Deadline) -> FloatArray | None:
    """:func:`fast_margins` of rows that differ from ``x`` in one column each (``cols``), the greedy walk's
    moves. Only trees whose path for ``x`` tests a column can change leaf; each (column, tree) pair is
    walked once, as a line (:func:`_line_leaves`: the leaves that column's values reach, with their
    intervals), and every move reads its margin change off those intervals by a sorted search, so the
    cost no longer grows with the number of moves (credit, RF 200 x 8: a step of ~16,000 moves took
    0.15 s walked row by row). None once ``deadline`` has passed."""
    if not _plain(forest) or np.isnan(X).any() or np.isnan(x).any():
        return _margins_by(forest, X, deadline)
    if deadline.expired():
        return None
    leaf0, tested = _path_features(forest, x)
    base = forest.value[leaf0].sum(axis=0)
    raw = np.broadcast_to(base, (X.shape[0],) + base.shape).copy()
    feats = np.unique(cols)
    tt, ff = np.nonzero(tested[:, feats].T)  # (feature, tree) pairs: feats[tt] is tested by tree ff
    k, leaf, lo, hi = _line_leaves(forest, x, feats[tt], ff)
    d = forest.value[leaf] - forest.value[leaf0[ff[k]]]
    moved = d.any(axis=1)
    k, d, lo, hi = k[moved], d[moved], lo[moved], hi[moved]
    which = tt[k]  # index into feats of each reachable leaf's line
    for j, i in enumerate(feats):
        sel = which == j
        if not sel.any():
            continue
        rows = np.flatnonzero(cols == i)
        v = X[rows, i]
        order = np.argsort(v, kind="stable")
        vs = v[order]
        a = np.searchsorted(vs, lo[sel], side="right")  # moves with lo < v <= hi take this leaf: [a, b)
        b = np.searchsorted(vs, hi[sel], side="right")
        step = np.zeros((vs.size + 1, d.shape[1]))
        np.add.at(step, a, d[sel])
        np.add.at(step, b, -d[sel])
        raw[rows[order]] += np.cumsum(step[:-1], axis=0)
    s = forest.schema
    m = raw + np.asarray(s.base_score)[None, :]
    if s.average:
        m = m / np.maximum(trees_per_output(forest), 1.0)[None, :]
    return m[:, 0] if s.n_outputs == 1 else m


def _margins_by(forest: Forest, X: FloatArray, deadline: Deadline, block: int = 512) -> FloatArray | None:
    """:func:`fast_margins` in blocks of rows; None once ``deadline`` has passed."""
    parts = []
    for s in range(0, X.shape[0], block):
        if deadline.expired():
            return None
        parts.append(fast_margins(forest, X[s:s + block]))
    return np.concatenate(parts) if parts else fast_margins(forest, X)


def target_score(q: Query, m: FloatArray) -> FloatArray:
    """How far inside the target each row's margins are (positive inside)."""
    s, spec = q.forest.schema, q.spec
    if spec.kind == "interval":
        assert spec.interval is not None
        p = s.transform(m).reshape(-1)
        return np.minimum(p - spec.interval[0], spec.interval[1] - p)
    if s.n_outputs == 1:
        theta = decision_threshold(s)
        return (m - theta) if spec.index == 1 else (theta - m)
    c = spec.index
    assert c is not None, "one class per MILP target (Target.each)"
    return m[:, c] - np.delete(m, c, axis=1).max(axis=1)


class Candidates:
    """Grids, split levels and feasibility checks shared by the heuristics."""

    def __init__(self, q: Query, meets: Callable[[FloatArray], BoolArray], nogoods: Sequence[FloatArray] = ()) -> None:
        self.q = q
        self.nogoods = [np.asarray(p) for p in nogoods]
        """Change patterns already reported (diverse counterfactuals): points with one of them are excluded."""
        self.exact_meets = meets
        s = q.forest.schema
        n = s.n_features
        self.grids: list[Grid | None] = [
            None if q.categorical[i] else q.grid(i)
            for i in range(n)]
        self.codes = {i: self._codes(i) for i in range(n) if q.categorical[i]}
        self._cuts: dict[int, FloatArray] = {}
        self._levels: dict[int, FloatArray] = {}
        c = q.constraints
        self.coupled = c is not None and bool(c.relations or c.implications or c.max_changes is not None)
        self.checker = actionability.Checker(c, q.names, q.x0) if c is not None and self.coupled else None
        self.limit_reached = False
        """Did a walk (:func:`greedy`) reach the change limit (``changes <= k``) and keep to the changed features?"""

    def _codes(self, i: int) -> FloatArray:
        q = self.q
        codes = q.cat_codes[i]
        if i in q.allowed:
            codes = codes[np.isin(codes, q.allowed[i])]
        return codes[(codes >= q.lo[i]) & (codes <= q.hi[i])]

    def cuts(self, i: int) -> FloatArray:
        """On-grid values just on each side of every split of numeric feature ``i``, within bounds."""
        if i not in self._cuts:
            g = self.grids[i]
            assert g is not None
            q = self.q
            vals = []
            for f in [q.forest] + ([q.isolation[0]] if q.isolation is not None else []):
                t = f.threshold[(f.feature == i) & ~f.is_categorical & (f.left >= 0)]
                if t.size:
                    vals += [g.down(t), g.up(t)]
            v = np.unique(np.concatenate(vals)) if vals else np.zeros(0)
            self._cuts[i] = v[np.isfinite(v) & (v >= q.lo[i]) & (v <= q.hi[i])]
        return self._cuts[i]

    def levels(self, i: int) -> FloatArray:
        """One value per cell of numeric feature ``i``: the end nearer the case (and the case's value)."""
        if i not in self._levels:
            g = self.grids[i]
            assert g is not None
            q = self.q
            x0 = float(q.x0[i])
            vals = [np.array([x0])]
            for f in [q.forest] + ([q.isolation[0]] if q.isolation is not None else []):
                t = f.threshold[(f.feature == i) & ~f.is_categorical & (f.left >= 0)]
                if t.size:
                    d = g.down(t)
                    vals.append(np.where(d >= x0, g.up(t), d))
            v = np.unique(np.concatenate(vals))
            self._levels[i] = v[np.isfinite(v) & (v >= q.lo[i]) & (v <= q.hi[i])]
        return self._levels[i]

    def meets_margins(self, X: FloatArray, m: FloatArray) -> BoolArray:
        """:meth:`meets` for rows whose fast margins ``m`` are known."""
        q = self.q
        ok = q.spec.satisfied(q.forest.schema.decide(m))
        return self._plausible(X, ok)

    def _plausible(self, X: FloatArray, ok: BoolArray) -> BoolArray:
        """``ok`` and plausible: the isolation forest is walked only for the rows still ``ok``."""
        q = self.q
        if q.isolation is not None and ok.any():
            iso, delta = q.isolation
            ok = ok.copy()
            ok[ok] = fast_margins(iso, X[ok]).reshape(-1) >= delta
        return ok

    def repair(self, X: FloatArray) -> tuple[FloatArray, BoolArray]:
        """Clip to bounds, reset what cannot change, put values on grids; rows that cannot be repaired are False."""
        q = self.q
        X = np.array(X, dtype=np.float64, copy=True)
        ok = np.ones(X.shape[0], dtype=bool)
        for i in range(X.shape[1]):
            x0 = float(q.x0[i])
            if not np.isfinite(x0) or q.lo[i] == q.hi[i]:
                X[:, i] = x0 if np.isfinite(x0) or not np.isfinite(q.lo[i]) else q.lo[i]
                continue
            col = np.clip(np.nan_to_num(X[:, i], nan=x0), q.lo[i], q.hi[i])
            if q.categorical[i]:
                codes = self.codes[i]
                c = np.trunc(col)
                x0c = np.trunc(x0)
                col = np.where(c == x0c, x0, c)
                good = np.isin(c, codes)
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
                d, u = g.down(col), g.ceil(col)
                col = np.clip(np.where(np.abs(d - col) <= np.abs(u - col), d, u), lo, hi)
            X[:, i] = col
        return X, ok

    def meets(self, X: FloatArray) -> BoolArray:
        """Target reached and plausible, by the fast margins."""
        q = self.q
        f = q.forest
        ok = q.spec.satisfied(f.schema.decide(fast_margins(f, X)))
        return self._plausible(X, ok)

    def feasible(self, X: FloatArray, met: BoolArray | None = None) -> BoolArray:
        """Target met (``met``, when known), plausible, every coupling constraint holds, and the change
        pattern is new. The constraints are checked first (a few numpy operations for all rows), the
        model only on the rows that pass them."""
        checker = self.checker
        if met is None and checker is None:
            ok = self.meets(X)
        elif met is None and checker is not None:
            ok = checker.ok(X)
            if ok.any():
                ok[ok] = self.meets(X[ok])
        else:
            assert met is not None
            ok = met.copy()
            if checker is not None and ok.any():
                ok[ok] = checker.ok(X[ok])
        if self.nogoods and ok.any():
            pats = change_pattern(self.q, X)  # row-wise
            for pat in self.nogoods:
                ok &= ~np.all(pats == pat[None, :], axis=1)
        return ok

    def exact(self, x: FloatArray) -> bool:
        """The IR's reference evaluation agrees (plus plausibility and constraints)."""
        q = self.q
        if not bool(self.exact_meets(x[None, :])[0]):
            return False
        if any(np.array_equal(change_pattern(q, x), pat) for pat in self.nogoods):
            return False
        if q.isolation is not None and float(q.isolation[0].evaluate(x[None, :])[0]) < q.isolation[1]:
            return False
        return not actionability.violations(q.constraints, q.names, q.x0, x)


def improve(cands: Candidates, x: FloatArray, passes: int = 2, deadline: Deadline | None = None) -> FloatArray:
    """Pull each changed feature back toward the case while the point stays feasible."""
    q = cands.q
    cost = q.cost
    deadline = deadline or Deadline.never()
    for _ in range(passes):
        changed = False
        d = cost.feature_costs(x[None, :])[0]
        for i in np.argsort(-d):
            if d[i] <= 0 or deadline.expired():
                break
            v, v0 = float(x[i]), float(q.x0[i])
            home = [v0] if q.lo[i] <= v0 <= q.hi[i] else []
            if q.categorical[i]:
                trial = np.array([c for c in home if np.trunc(c) in set(cands.codes[i].tolist())])
            else:
                cv = cands.cuts(i)
                between = cv[(cv > min(v, v0)) & (cv < max(v, v0))]
                trial = np.concatenate([home, between[np.argsort(np.abs(between - v0))]])
            if trial.size == 0:
                continue
            X = np.tile(x, (trial.shape[0], 1))
            X[:, i] = trial
            m = _moved_margins(q.forest, x, np.full(trial.shape[0], i), X, deadline)
            if m is None:
                break
            ok = cands.feasible(X, cands.meets_margins(X, m))
            if ok.any():
                j = int(np.argmax(ok))
                if cost.feature_costs(X[j:j + 1])[0, i] < d[i]:
                    x = X[j]
                    changed = True
                    d = cost.feature_costs(x[None, :])[0]
        if not changed:
            break
    return x


def greedy(cands: Candidates, max_steps: int = 40, deadline: Deadline | None = None,
           start: FloatArray | None = None, by_gain: bool = False) -> FloatArray | None:
    """Cross one split at a time, best target gain per unit cost; keep the cheapest feasible point seen.

    The walk does not stop at the first move that reaches the target (often one expensive
    jump): it goes on along the best gain-per-cost moves while they stay cheaper than the
    best point found, so chains of cheap moves can win. Each step scores every move by
    :func:`_moved_margins` (only the trees whose path tests the moved feature).

    From a ``start`` (a plausible point, under an isolation forest) it only steps to points
    that stay plausible: the walk then looks for the target inside the plausible region. Under a
    change limit (``changes <= k``), once ``k`` features have changed only those move on.
    ``by_gain``: the best target gain, whatever it costs (the fewest steps to the target).
    """
    q = cands.q
    window = q.options.window
    limit = q.constraints.max_changes if q.constraints is not None else None
    x = q.x0.copy() if start is None else np.array(start, dtype=np.float64)
    inside = start is not None and q.isolation is not None
    moves: list[tuple[int, FloatArray]] = []
    for i in range(q.x0.shape[0]):
        if not np.isfinite(q.x0[i]) or q.lo[i] == q.hi[i]:
            continue
        vals = cands.codes[i].astype(np.float64) if q.categorical[i] else cands.levels(i)
        if vals.size:
            moves.append((i, vals))
    if not moves:
        return None
    best, best_cost = None, np.inf
    col = np.concatenate([np.full(v.shape[0], i) for i, v in moves])
    val = np.concatenate([v for _, v in moves])
    fpos = np.concatenate([np.arange(v.shape[0]) for _, v in moves])
    numeric = np.concatenate([np.full(v.shape[0], not q.categorical[i]) for i, v in moves])
    score_x = float(target_score(q, fast_margins(q.forest, x[None, :]))[0])
    deadline = deadline or Deadline.never()
    for _ in range(max_steps):
        if deadline.expired():
            break
        # per numeric feature: the ``window`` cells nearest the current value on each side, then every 2^k-th
        p = np.concatenate([np.full(v.shape[0], np.searchsorted(v, x[i])) for i, v in moves])
        dist = np.where(fpos >= p, fpos - p, p - 1 - fpos)
        near = ~numeric | (dist < window) | ((dist & (dist + 1)) == 0) if window else np.ones(dist.shape[0], bool)
        cc, vv = col[near], val[near]
        X = np.tile(x, (vv.shape[0], 1))
        X[np.arange(vv.shape[0]), cc] = vv
        c = q.cost.total(X)
        keep = (c < best_cost) & (vv != x[cc])
        if limit is not None:  # at the change limit only the features changed already may move
            changed = (x != q.x0) & ~(np.isnan(x) & np.isnan(q.x0))
            if int(changed.sum()) >= limit:
                keep &= changed[cc]
                cands.limit_reached = True
        if not keep.any():
            break
        X, c, moved = X[keep], c[keep], cc[keep]
        if inside:  # the isolation forest's mean path length, again only over the trees a move can change
            assert q.isolation is not None
            lengths = _moved_margins(q.isolation[0], x, moved, X, deadline)
            if lengths is None:
                break
            plausible = lengths.reshape(-1) >= q.isolation[1]
            X, c, moved = X[plausible], c[plausible], moved[plausible]
            if not c.size:
                break
        m = _moved_margins(q.forest, x, moved, X, deadline)
        if m is None:
            break
        hit = cands.meets_margins(X, m)
        if hit.any():
            feas = cands.feasible(X[hit]) if cands.coupled else np.ones(int(hit.sum()), dtype=bool)
            if feas.any():
                h = np.flatnonzero(hit)[feas]
                j = int(h[np.argmin(c[h])])
                best, best_cost = X[j], float(c[j])
        score = target_score(q, m)
        gain = score - score_x
        dc = c - q.cost.total(x[None, :])[0]
        per = gain if by_gain else gain / np.maximum(dc, 1e-12)
        ratio = np.where((gain > 0) & (c < best_cost), per, -np.inf)
        if not np.isfinite(ratio).any():
            break
        j = int(np.argmax(ratio))
        x, score_x = X[j], float(score[j])
    return best


PLAUSIBLE_REFINE = 8
"""Reference rows pulled toward the case when an isolation forest constrains the query. The greedy walk
ignores plausibility until it reaches the target and its moves multiply by the forest's random
thresholds: on credit (RF 100 x 5, IF 100 x 32, 10 origins) it took 10-20x the time of the rows and beat
them in 2 of 10 queries, while 8 rows instead of 2 gave bounds up to 30% lower (the MILP's pruning).
With a walk from a plausible start (``starts``) 2 rows are enough: on 9 credit queries the walk's point
was the best of the pool every time, and 8 rows only cost their refinement (0.3-0.7 s -> 0.2-0.5 s)."""


def target_rows(q: Query, reference: Reference) -> BoolArray:
    """Which reference rows the model puts in ``q``'s target (once per batch and target)."""
    return reference.memo(q.forest, ("target", q.spec.key),
                          lambda: np.asarray(q.spec.satisfied(reference.decisions(q.forest)), dtype=bool))


def warm_start(q: Query, meets: Callable[[FloatArray], BoolArray], reference: Reference | FloatArray | None,
               n_refine: int = 2, nogoods: Sequence[FloatArray] = (), deadline: Deadline | None = None,
               starts: Sequence[FloatArray] = ()) -> FloatArray | None:
    """The cheapest feasible point the heuristics find (checked exactly) by ``deadline``, or None.

    Without an isolation forest the greedy walk from the case goes first; the reference rows are repaired
    only when it finds no point. The walk's point, pulled back toward the case, is rarely beaten by a
    reference row (on 140 population queries of adult and credit, six models, never), and repairing every
    reference row costs ten times the walk.

    ``starts``: plausible points (the optimum without the explained model, see
    ``solve._plausible_relaxation``) from which a walk inside the plausible region looks for the target;
    with an isolation forest the reference rows the model already gives the target are tried first
    (cheapest first), then the others, and the walk from the case only when none is plausible."""
    cands = Candidates(q, meets, nogoods)
    deadline = deadline or Deadline.never()
    pool: list[FloatArray] = []
    for s in starts:
        if deadline.expired():
            break
        if cands.feasible(s[None, :])[0]:
            pool.append(s)
        g = greedy(cands, max_steps=60, deadline=deadline, start=s)
        if g is not None:
            pool.append(g)
    if q.isolation is None:
        _walk(cands, pool, deadline)
        if not pool:
            pool += _reference_rows(cands, reference, n_refine, deadline)
    else:
        pool += _reference_rows(cands, reference, n_refine if pool else max(n_refine, PLAUSIBLE_REFINE), deadline)
        if not pool:  # (with a plausible row the walk's moves multiply: see PLAUSIBLE_REFINE)
            _walk(cands, pool, deadline)
    best, best_cost = None, np.inf
    for x in pool:
        x = improve(cands, x, deadline=deadline)
        c = float(q.cost.total(x[None, :])[0])
        if c < best_cost and cands.exact(x):
            best, best_cost = x, c
    return best


def _walk(cands: Candidates, pool: list[FloatArray], deadline: Deadline) -> None:
    """The greedy walk from the case into ``pool`` (its point bounds the MILP's domains); under a change
    limit, when the cheap moves find nothing, the walk by target gain (cheap moves first can spend the
    limit on features that do not reach the target)."""
    q = cands.q
    g = greedy(cands, max_steps=40, deadline=deadline)
    limit = q.constraints.max_changes if q.constraints is not None else None
    if g is None and limit is not None:
        g = greedy(cands, max_steps=40, deadline=deadline, by_gain=True)
    if g is not None:
        pool.append(g)
    if limit is not None and limit > 0 and cands.limit_reached:  # (else the walk without the limit is this one)
        pool += _projected_walks(cands, limit, deadline)


PROJECTED_WALKS = 3
"""Walks from the best-scoring ``k``-subsets of the walk without the change limit (:func:`_projected_walks`)."""


def _projected_walks(cands: Candidates, limit: int, deadline: Deadline) -> list[FloatArray]:
    """Under ``changes <= k``: the walk without the limit, kept on ``k`` of the features it changes.

    The walk under the limit spends it on the first cheap moves, which need not reach the target cheaply.
    The walk without it changes ``m`` features; the ``k``-subsets of them that keep most of its target
    score (one evaluation of every subset) start walks that move only those features (the walk at its
    limit), up to :data:`PROJECTED_WALKS` of them."""
    q = cands.q
    assert q.constraints is not None
    free = Candidates(replace(q, constraints=replace(q.constraints, max_changes=None), _memo={}),
                      cands.exact_meets, cands.nogoods)
    u = greedy(free, max_steps=40, deadline=deadline)
    if u is None or deadline.expired():
        return []
    changed = np.flatnonzero(~((u == q.x0) | (np.isnan(u) & np.isnan(q.x0))))
    if changed.shape[0] <= limit or math.comb(int(changed.shape[0]), limit) > 256:
        return []  # (within the limit the walk under it finds the same moves)
    subsets = [list(c) for c in itertools.combinations(changed.tolist(), limit)]
    S = np.tile(q.x0, (len(subsets), 1))
    for r, c in enumerate(subsets):
        S[r, c] = u[c]
    score = target_score(q, fast_margins(q.forest, S))
    out: list[FloatArray] = []
    for r in np.argsort(-score)[:PROJECTED_WALKS]:
        if deadline.expired():
            break
        if cands.feasible(S[r:r + 1], cands.meets(S[r:r + 1]))[0]:
            out.append(S[r])
        g = greedy(cands, max_steps=40, deadline=deadline, start=S[r])
        if g is not None:
            out.append(g)
    return out


def _reference_rows(cands: Candidates, reference: Reference | FloatArray | None, n_refine: int,
                    deadline: Deadline) -> list[FloatArray]:
    """Up to ``n_refine`` reference rows repaired to the query (constraints, grids) that reach the target,
    cheapest first; the rows the model already puts in the target first when they were evaluated."""
    q = cands.q
    rows: list[FloatArray] = []
    given = reference.rows if isinstance(reference, Reference) else reference
    if given is None or not len(given) or n_refine <= 0:
        return rows
    R, rep = cands.repair(np.asarray(given, dtype=np.float64))
    known = isinstance(reference, Reference) and reference.batch
    first = (target_rows(q, reference) if known else np.zeros(R.shape[0], dtype=bool))[rep]  # type: ignore[arg-type]
    R = R[rep]
    if R.shape[0]:
        R = R[np.lexsort((q.cost.total(R), ~first))]
        size = 128 if known else 1024  # (rows at the target first: a short block mostly holds enough)
        for start in range(0, R.shape[0], size):  # cheapest first, stop once enough are found
            if deadline.expired():
                break
            blk = R[start:start + size]
            rows += [blk[j] for j in np.flatnonzero(cands.feasible(blk))[:n_refine - len(rows)]]
            if len(rows) >= n_refine:
                break
    return rows
