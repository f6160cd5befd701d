"""Best-first search over boxes of the feature space: proven optimal counterfactuals without a MILP.

A *box* gives every numeric feature an interval of cells (the cells between the model's cuts, as in
``domain.py``) and every categorical feature a set of codes; the search starts from the box of the
feature domains and splits boxes at the model's own splits. Each box carries

- its *alive* leaves: per tree, the leaves some point of the box reaches with at most ``k`` changes and
  (once a verified point is known) at a lower cost than it;
- its cheapest point ``x*`` (every feature at the value of its cells nearest the case);
- an admissible lower bound on the cost of every point of the box that meets the target.

The bound (the leaf-cost relaxation of Veritas-style search, Devos et al. 2021, turned to costs): a
point of cost ``C`` reaches, in each tree, a leaf whose cheapest point within the box costs at most
``C``; so the target row ``sum_t v_t >= theta`` can only hold at cost ``C`` when the per-tree maxima of
``v`` over such leaves reach ``theta``. The smallest such ``C`` bounds the box. With ``changes <= k``
a leaf that needs more than ``k`` changed features within the box is never reached, and the search
starts from one box per set of ``k`` features allowed to change (the per-case enumeration over changed
features): within such a box every leaf that needs another feature changed is dead, which makes the
bound far stronger than over the whole domain. A box whose bound
reaches the best verified cost, or whose target rows cannot be met, is closed; a box whose cheapest
point meets the target (checked with ``Forest.evaluate``) gives a verified point and is closed.

Boxes are expanded cheapest bound first; the search ends proven when the cheapest open bound reaches
the incumbent (optimal) or no box is left (infeasible, or the incumbent is optimal), and at any moment
the cheapest open bound is a proven lower bound. A box is split at the first node on ``x*``'s path
through the tree whose alive leaves promise the most above ``x*``'s own leaf, where the box holds
points going either way; once every tree has one alive leaf the whole box routes like ``x*``.

Supported: numeric features on their grids, categorical features (at most 64 allowed codes), features
fixed by the constraints or missing in the case, immutables, directions, bounds, allowed values,
``changes <= k``, the norms l0 / l1 / l2 / linf, every target ``targets.add_target_rows`` writes.
:func:`supported` says no for linear relations, implications, plausibility (an isolation forest),
no-good cuts and zero-as-missing splits that are not a single threshold: those go to the MILP.
"""

from __future__ import annotations

import heapq
import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from lumber.ir import Norm

from .deadline import Deadline
from .domain import CategoricalDomain, Domain, FixedDomain, NumericDomain
from .model import LinExpr
from .problem import Query, build_domains
from .targets import add_target_rows, forest_meets
from .trees import ForestEncoding, classify, reachable

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]
BoolArray = npt.NDArray[np.bool_]
Index = npt.NDArray[np.integer[Any]]
"""Leaf positions (int32 in the boxes) and per-leaf change and miss counts (int16: the open boxes stay small)."""

OPTIMAL = "optimal"
INFEASIBLE = "infeasible"
TIME_LIMIT = "time_limit"
NO_SOLUTION = "no_solution"

ROW_TOLERANCE = 1e-9
"""Slack of the target rows (normalised to a largest coefficient of 1) before a box is closed on them:
ties and float sums are settled by ``Forest.evaluate`` on the box's cheapest point."""

CHECK_EVERY = 64

MAX_SUBSETS = 5000
"""With ``changes <= k``: at most this many sets of ``k`` changing features start the search (more: one root)."""

MAX_OPEN = 50_000
"""Open boxes at most (about 4 kB each on a forest of 100 x depth 5): past it the search stops with its
bound, and the MILP gets the time left."""
"""Boxes expanded between two looks at the deadline."""


@dataclass
class SearchOutcome:
    """The search's answer, in objective units (``CaseCost.to_objective``)."""

    status: str
    x: FloatArray | None
    objective: float
    bound: float
    nodes: int


class _Rows:
    """Target rows ``coef @ y >= lo`` over the leaves (one coefficient per leaf, normalised)."""

    def __init__(self) -> None:
        self.coef: list[FloatArray] = []
        self.lo: list[float] = []
        self.infeasible_constant_rows = 0
        self.n = 0

    def add_expr_row(self, expr: LinExpr, lo: float, hi: float) -> None:
        c = np.zeros(self.n)
        np.add.at(c, np.asarray(expr.cols, dtype=np.int64), np.asarray(expr.coefs, dtype=np.float64))
        if np.isfinite(lo):
            self.coef.append(c)
            self.lo.append(float(lo) - expr.const)
        if np.isfinite(hi):
            self.coef.append(-c)
            self.lo.append(-(float(hi) - expr.const))


@dataclass
class _Box:
    """Cells ``blo..bhi`` per numeric feature and code bits ``bm`` per categorical one; the leaves some
    point of the box may still use (``idx``, sorted, so each tree's leaves are contiguous) and per such
    leaf the cheapest cost (objective units) and fewest changes of a point of the box in it (``lc``,
    ``chg``) and the number of features on which it misses the box's cheapest point (``miss``)."""

    blo: IntArray
    bhi: IntArray
    bm: npt.NDArray[np.uint64]
    idx: Index
    lc: FloatArray
    chg: Index
    miss: Index

    def keep(self, sel: BoolArray) -> None:
        self.idx, self.lc, self.chg, self.miss = self.idx[sel], self.lc[sel], self.chg[sel], self.miss[sel]


def first(q: Query, nogoods: Sequence[FloatArray] = ()) -> bool:
    """Does ``q`` go to the search before the MILP (``CounterfactualOptions.box_search``)?"""
    mode = q.options.box_search
    limited = q.constraints is not None and q.constraints.max_changes is not None
    return (mode == "first" or (mode == "auto" and limited)) and supported(q, nogoods)


def supported(q: Query, nogoods: Sequence[FloatArray] = ()) -> bool:
    """Can the search answer ``q`` (see the module docstring)?"""
    c = q.constraints
    return q.isolation is None and not nogoods and not (c is not None and (c.relations or c.implications))


class BoxSearch:
    """The search for one query over given feature domains (``problem.build_domains``)."""

    def __init__(self, q: Query, doms: list[Domain]) -> None:
        self.q = q
        f = q.forest
        self.forest = f
        self.ok = True
        ch = classify(f, doms)
        reach = reachable(f, ch)
        internal = reach & (f.left >= 0)
        if (ch.special[internal] != 0).any():
            self.ok = False
            return
        cost = q.cost
        self.norm = cost.norm
        mc = q.constraints.max_changes if q.constraints is not None else None
        self.max_changes = math.inf if mc is None else int(mc)
        # -- features
        num = [d for d in doms if isinstance(d, NumericDomain)]
        cat = [d for d in doms if isinstance(d, CategoricalDomain)]
        if any(d.codes.shape[0] > 64 for d in cat):
            self.ok = False
            return
        self.num, self.cat = num, cat
        self.num_index = np.array([d.index for d in num], dtype=np.int64)
        x = q.x0.copy()
        fixed_cost = []
        fixed_changes = 0
        for d in doms:
            if isinstance(d, FixedDomain):
                x[d.index] = d.value
        d_all = cost.feature_costs(x[None, :])[0]
        for d in doms:
            if isinstance(d, FixedDomain):
                v = float(d_all[d.index])
                fixed_cost.append(v * v if self.norm == Norm.L2 else v)
                same = x[d.index] == q.x0[d.index] or (np.isnan(x[d.index]) and np.isnan(q.x0[d.index]))
                fixed_changes += 0 if same else 1
        self.x_base = x
        self.fixed_obj = float(max(fixed_cost, default=0.0) if self.norm == Norm.LINF else sum(fixed_cost))
        self.fixed_changes = fixed_changes
        if not np.isfinite(self.fixed_obj):
            self.ok = False
            return
        # numeric cells: cuts of the reachable nodes inside the domain
        feat = f.feature
        n_nodes = f.n_nodes
        node_j = np.full(n_nodes, -1, dtype=np.int64)
        node_pos = np.full(n_nodes, -1, dtype=np.int64)
        node_bits = np.zeros(n_nodes, dtype=np.uint64)
        cells_cost, cells_val, cells_chg, offs, c0s, ncell = [], [], [], [], [], []
        off = 0
        for p, d in enumerate(num):
            nodes = np.flatnonzero(internal & (feat == d.index))
            u = d.grid.down(ch.t_eff[nodes])
            inside = (u >= d.lo) & (u < d.hi)
            U = np.unique(u[inside])
            node_j[nodes[inside]] = np.searchsorted(U, u[inside])
            node_pos[nodes[inside]] = p
            m = U.shape[0] + 1
            a = np.concatenate([[d.lo], d.grid.up(U)])
            b = np.concatenate([U, [d.hi]])
            x0 = d.x0
            val = np.where(x0 < a, a, np.where(x0 > b, b, x0))
            if not d.grid.representable(x0):
                mid = (a <= x0) & (x0 <= b)
                if mid.any():
                    k = int(np.flatnonzero(mid)[0])
                    lo_c = float(d.grid.down(np.array([x0]))[0])
                    hi_c = float(d.grid.ceil(np.array([x0]))[0])
                    opts = [v for v in (lo_c, hi_c) if a[k] <= v <= b[k]] or [float(a[k])]
                    cs = cost.axis_costs(d.index, np.array(opts))
                    val[k] = opts[int(np.argmin(cs))]
            cc = cost.axis_costs(d.index, val)
            cells_cost.append(cc)
            cells_val.append(val)
            cells_chg.append(val != x0)
            offs.append(off)
            off += m
            ncell.append(m)
            c0s.append(int(np.argmin(cc)) if not (val == x0).any() else int(np.flatnonzero(val == x0)[0]))
        self.CC = np.concatenate(cells_cost) if cells_cost else np.zeros(0)
        self.CV = np.concatenate(cells_val) if cells_val else np.zeros(0)
        self.CH = np.concatenate(cells_chg).astype(np.int16) if cells_chg else np.zeros(0, dtype=np.int16)
        self.off = np.array(offs, dtype=np.int64)
        self.c0 = np.array(c0s, dtype=np.int64)
        self.ncell = np.array(ncell, dtype=np.int64)
        # categorical codes
        self.cat_cost = np.array([cost.change_cost(d.index) for d in cat], dtype=np.float64)
        self.cat_x0bit = np.array([int(np.flatnonzero(d.codes == d.x0_code)[0]) if (d.codes == d.x0_code).any()
                                   else 64 for d in cat], dtype=np.uint64)
        for p, d in enumerate(cat):
            if d.index not in ch.cat_nodes:
                continue  # no split reads it
            nodes = ch.cat_nodes[d.index]
            goes_left = ch.cat_left[d.index]
            w = (np.uint64(1) << np.arange(d.codes.shape[0], dtype=np.uint64))
            bits = (goes_left.astype(np.uint64) * w[None, :]).sum(axis=1, dtype=np.uint64)
            node_bits[nodes] = bits
            node_pos[nodes] = p
        self.node_j, self.node_pos, self.node_bits = node_j, node_pos, node_bits
        self.node_cat = np.zeros(n_nodes, dtype=bool)
        for d in cat:
            self.node_cat[ch.cat_nodes.get(d.index, np.zeros(0, dtype=np.int64))] = True
        # leaves in depth-first order: each subtree's leaves are contiguous
        left, right = f.left.astype(np.int64), f.right.astype(np.int64)
        order: list[int] = []
        first = np.zeros(n_nodes, dtype=np.int64)
        last = np.zeros(n_nodes, dtype=np.int64)
        lpos = np.full(n_nodes, -1, dtype=np.int64)
        for r in f.roots.tolist():
            stack = [(int(r), False)]
            while stack:
                n, done = stack.pop()
                if done:
                    last[n] = len(order)
                    continue
                first[n] = len(order)
                if left[n] < 0:
                    lpos[n] = len(order)
                    order.append(n)
                    last[n] = len(order)
                else:
                    stack.append((n, True))
                    stack.append((int(right[n]), False))
                    stack.append((int(left[n]), False))
        leaves = np.array(order, dtype=np.int64)
        self.leaves, self.first, self.last, self.lpos = leaves, first, last, lpos
        self.ltree = f.node_tree[leaves].astype(np.int64)
        L, Fn, Fc = leaves.shape[0], len(num), len(cat)
        # leaf boxes, top-down
        NLO = np.zeros((n_nodes, Fn), dtype=np.int64)
        NHI = np.tile(self.ncell - 1, (n_nodes, 1)) if Fn else np.zeros((n_nodes, 0), dtype=np.int64)
        full = np.array([(np.uint64(1) << np.uint64(d.codes.shape[0])) - np.uint64(1) if d.codes.shape[0] < 64
                         else np.uint64(np.iinfo(np.uint64).max) for d in cat], dtype=np.uint64)
        NM = np.tile(full, (n_nodes, 1)) if Fc else np.zeros((n_nodes, 0), dtype=np.uint64)
        depth = f.depth
        inner_all = np.flatnonzero(f.left >= 0)
        for dd in range(int(depth.max()) + 1 if n_nodes else 0):
            v = inner_all[depth[inner_all] == dd]
            if v.size == 0:
                continue
            lc, rc = left[v], right[v]
            NLO[lc], NHI[lc], NM[lc] = NLO[v], NHI[v], NM[v]
            NLO[rc], NHI[rc], NM[rc] = NLO[v], NHI[v], NM[v]
            j, p = node_j[v], node_pos[v]
            isn = (j >= 0) & ~self.node_cat[v]
            NHI[lc[isn], p[isn]] = np.minimum(NHI[lc[isn], p[isn]], j[isn])
            NLO[rc[isn], p[isn]] = np.maximum(NLO[rc[isn], p[isn]], j[isn] + 1)
            isc = self.node_cat[v] & (p >= 0)
            NM[lc[isc], p[isc]] &= node_bits[v[isc]]
            NM[rc[isc], p[isc]] &= ~node_bits[v[isc]]
        self.LLO, self.LHI, self.LM = NLO[leaves], NHI[leaves], NM[leaves]
        self.full = full
        self.alive0 = reach[leaves]
        # target rows over the leaves
        y = np.full(n_nodes, -1, dtype=np.int64)
        y[leaves] = np.arange(L)
        y[~reach] = -1
        enc = ForestEncoding(f, reach, reach & (f.left >= 0), y, np.full(f.n_trees, -1, dtype=np.int64),
                             np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64))
        rows = _Rows()
        rows.n = L
        add_target_rows(enc, q.spec, rows, 0.0, 0.0)  # type: ignore[arg-type]
        self.infeasible = rows.infeasible_constant_rows > 0
        self.R = np.array(rows.coef) if rows.coef else np.zeros((0, L))
        self.Rlo = np.array(rows.lo)
        self.T = int(f.n_trees)

    # -- one box ---------------------------------------------------------------------------------

    def _num_part(self, p: int, idx: Index, lo: int, hi: int) -> tuple[FloatArray, Index]:
        """Cost and change of numeric feature ``p`` for leaves ``idx`` within cells ``lo..hi``."""
        a = np.maximum(self.LLO[idx, p], lo)
        b = np.minimum(self.LHI[idx, p], hi)
        k = self.off[p] + np.clip(self.c0[p], a, b)
        return self.CC[k], self.CH[k]

    def _cat_part(self, p: int, idx: Index, bm: np.uint64) -> tuple[FloatArray, Index]:
        bit = self.cat_x0bit[p]
        if bit >= 64:
            return np.full(idx.shape[0], self.cat_cost[p]), np.ones(idx.shape[0], dtype=np.int16)
        keep = ((self.LM[idx, p] & bm) >> bit) & np.uint64(1)
        change = (1 - keep.astype(np.int16))
        return change * self.cat_cost[p], change

    def _leaf_costs(self, blo: IntArray, bhi: IntArray, bm: npt.NDArray[np.uint64], idx: Index
                    ) -> tuple[FloatArray, Index]:
        """Every part of the leaves' costs and changes, from scratch."""
        parts, chg = [], np.full(idx.shape[0], self.fixed_changes, dtype=np.int16)
        for p in range(len(self.num)):
            c, h = self._num_part(p, idx, int(blo[p]), int(bhi[p]))
            parts.append(c)
            chg += h
        for p in range(len(self.cat)):
            c, h = self._cat_part(p, idx, bm[p])
            parts.append(c)
            chg += h
        P = np.stack(parts, axis=1) if parts else np.zeros((idx.shape[0], 0))
        return np.asarray(self._combine(P, self.fixed_obj, axis=1), dtype=np.float64), chg

    def _star(self, blo: IntArray, bhi: IntArray, bm: npt.NDArray[np.uint64]) -> tuple[IntArray, list[int]]:
        """The cheapest point's cells (numeric) and code bits (categorical) within a box."""
        bits = []
        for p in range(len(self.cat)):
            x0bit = int(self.cat_x0bit[p])
            m = int(bm[p])
            bits.append(x0bit if x0bit < 64 and (m >> x0bit) & 1 else (m & -m).bit_length() - 1)
        return np.clip(self.c0, blo, bhi), bits

    def _misses(self, p: int, is_cat: bool, idx: Index, star: int) -> Index:
        """1 where leaf ``idx`` misses the cheapest point's cell / code ``star`` on feature ``p``."""
        if is_cat:
            return 1 - ((self.LM[idx, p] >> np.uint64(star)) & np.uint64(1)).astype(np.int16)
        return ((self.LLO[idx, p] > star) | (self.LHI[idx, p] < star)).astype(np.int16)

    def _root(self) -> _Box:
        blo, bhi, bm = np.zeros(len(self.num), dtype=np.int64), self.ncell - 1, self.full.copy()
        idx = np.flatnonzero(self.alive0).astype(np.int32)
        lc, chg = self._leaf_costs(blo, bhi, bm, idx)
        c, bits = self._star(blo, bhi, bm)
        miss = np.zeros(idx.shape[0], dtype=np.int16)
        for p in range(len(self.num)):
            miss += self._misses(p, False, idx, int(c[p]))
        for p in range(len(self.cat)):
            miss += self._misses(p, True, idx, bits[p])
        box = _Box(blo, bhi, bm, idx, lc, chg, miss)
        box.keep(chg <= self.max_changes)
        return box

    def _roots(self) -> list[_Box]:
        """The root box, or with ``changes <= k`` one box per set ``S`` of ``k`` features that may change
        (the others keep the case's cell or code, and leaves that need a change outside ``S`` are dead),
        keeping only the sets whose per-tree maxima can still reach the target. Every point with at most
        ``k`` changes lies in some set's box, so the boxes cover the query (they overlap; the search is
        exact all the same). Needs the case's own value in every changeable feature's domain."""
        root = self._root()
        k = self.max_changes - self.fixed_changes
        Fn, Fc = len(self.num), len(self.cat)
        if not math.isfinite(k) or k < 0:
            return [root]
        mut = [("n", p) for p in range(Fn) if self.ncell[p] > 1] + [("c", p) for p in range(Fc)]
        if len(mut) <= k or len(mut) > 64:
            return [root]
        if any(kind == "n" and self.CH[self.off[p] + self.c0[p]] for kind, p in mut):
            return [root]
        if any(kind == "c" and self.cat_x0bit[p] >= 64 for kind, p in mut):
            return [root]
        if math.comb(len(mut), int(k)) > MAX_SUBSETS:
            return [root]
        combos = list(itertools.combinations(range(len(mut)), int(k)))
        if not combos:
            return [root]
        idx = root.idx
        lm = np.zeros(idx.shape[0], dtype=np.uint64)
        for b, (kind, p) in enumerate(mut):
            if kind == "n":
                out = (self.LLO[idx, p] > self.c0[p]) | (self.LHI[idx, p] < self.c0[p])
            else:
                out = ((self.LM[idx, p] >> self.cat_x0bit[p]) & np.uint64(1)) == 0
            lm |= out.astype(np.uint64) << np.uint64(b)
        sm = np.array([sum(1 << b for b in c) for c in combos], dtype=np.uint64)
        usable = (lm[None, :] & ~sm[:, None]) == 0
        tree = self.ltree[idx]
        new = np.empty(tree.shape[0], dtype=bool)
        new[0] = True
        np.not_equal(tree[1:], tree[:-1], out=new[1:])
        starts = np.flatnonzero(new)
        ok = np.ones(len(combos), dtype=bool)
        for r in range(self.R.shape[0]):
            v = np.where(usable, self.R[r, idx][None, :], -np.inf)
            top = np.maximum.reduceat(v, starts, axis=1).sum(axis=1)
            ok &= top >= self.Rlo[r] - ROW_TOLERANCE
        out_boxes = []
        for s_i in np.flatnonzero(ok):
            chosen = {mut[b] for b in combos[s_i]}
            blo, bhi, bm = root.blo.copy(), root.bhi.copy(), root.bm.copy()
            for kind, p in mut:
                if (kind, p) in chosen:
                    continue
                if kind == "n":
                    blo[p] = bhi[p] = self.c0[p]
                else:
                    bm[p] = np.uint64(1) << self.cat_x0bit[p]
            sel = usable[s_i]
            bidx = idx[sel]
            lc, chg = self._leaf_costs(blo, bhi, bm, bidx)
            c, bits = self._star(blo, bhi, bm)
            miss = np.zeros(bidx.shape[0], dtype=np.int16)
            for p in range(Fn):
                miss += self._misses(p, False, bidx, int(c[p]))
            for p in range(Fc):
                miss += self._misses(p, True, bidx, bits[p])
            box = _Box(blo, bhi, bm, bidx, lc, chg, miss)
            box.keep(chg <= self.max_changes)
            out_boxes.append(box)
        return out_boxes

    def _cheapest(self, box: _Box) -> tuple[FloatArray, float, int]:
        """The box's cheapest point ``x*``, its objective-unit cost and number of changes."""
        c = np.clip(self.c0, box.blo, box.bhi)
        k = self.off + c
        x = self.x_base.copy()
        parts = [self.CC[k]] if k.size else []
        changes = self.fixed_changes + int(self.CH[k].sum())
        if self.num:
            x[self.num_index] = self.CV[k]
        if self.cat:
            keep = ((box.bm >> np.minimum(self.cat_x0bit, np.uint64(63))) & np.uint64(1)).astype(bool) & (
                self.cat_x0bit < 64)
            parts.append(np.where(keep, 0.0, self.cat_cost))
            changes += int((~keep).sum())
            for p, d in enumerate(self.cat):
                if not keep[p]:
                    low = int(box.bm[p]) & -int(box.bm[p])
                    x[d.index] = float(d.codes[low.bit_length() - 1])
        cc = np.concatenate(parts) if parts else np.zeros(0)
        return x, float(self._combine(cc, self.fixed_obj)), changes

    def _combine(self, parts: FloatArray, const: float, axis: int = -1) -> float | FloatArray:
        if self.norm == Norm.LINF:
            return np.maximum(parts.max(axis=axis, initial=0.0), const)
        return parts.sum(axis=axis) + const

    def _bound(self, box: _Box) -> float:
        """The box's lower bound in objective units (inf: no point of it meets the target)."""
        idx = box.idx
        if idx.size == 0:
            return math.inf
        lc, tree = box.lc, self.ltree[idx]
        bound = float(lc.min())
        for r in range(self.R.shape[0]):
            bound = max(bound, self._row_bound(self.R[r, idx], self.Rlo[r], lc, tree))
            if bound == math.inf:
                break
        return bound

    def _row_bound(self, v: FloatArray, lo: float, lc: FloatArray, tree: IntArray) -> float:
        """Smallest ``C`` at which the per-tree maxima of ``v`` over leaves of cost ``<= C`` reach ``lo``
        (``tree`` is sorted: the leaves come tree by tree)."""
        new = np.empty(tree.shape[0], dtype=bool)
        new[0] = True
        np.not_equal(tree[1:], tree[:-1], out=new[1:])
        starts = np.flatnonzero(new)
        if float(np.maximum.reduceat(v, starts).sum()) < lo - ROW_TOLERANCE:
            return math.inf  # even the best alive leaf of every tree falls short
        o = np.lexsort((lc, tree))
        c, w = lc[o], v[o]
        gid = np.cumsum(new) - 1
        span = float(np.abs(w).max()) * 4.0 + 1.0
        run = np.maximum.accumulate(w + gid * span) - gid * span
        inc = run.copy()
        inc[1:] -= np.where(new[1:], 0.0, run[:-1])
        ready = float(c[starts].max())
        o2 = np.argsort(c, kind="stable")
        total = np.cumsum(inc[o2])
        cs = c[o2]
        hit = np.flatnonzero((total >= lo - ROW_TOLERANCE) & (cs >= ready))
        return float(cs[hit[0]]) if hit.size else math.inf

    # -- the search ------------------------------------------------------------------------------

    def run(self, deadline: Deadline, incumbent: FloatArray | None = None, inc_obj: float = math.inf,
            rel_gap: float = 1e-6, max_nodes: int | None = None) -> SearchOutcome:
        """Expand boxes cheapest bound first until proven, ``deadline`` or ``max_nodes`` expansions;
        ``incumbent`` is a verified point of objective ``inc_obj`` (the search then proves it or beats it)."""
        q = self.q
        best_x, best = (incumbent, inc_obj) if incumbent is not None else (None, math.inf)
        if self.infeasible:
            return SearchOutcome(INFEASIBLE if best_x is None else OPTIMAL, best_x, best,
                                 best if best_x is not None else math.inf, 0)

        def closed(bound: float) -> bool:
            return bound >= best - rel_gap * abs(best) - 1e-12

        heap: list[tuple[float, int, _Box]] = []
        counter = 0
        for root in self._roots():
            lb = self._bound(root)
            if lb < math.inf:
                counter += 1
                heap.append((lb, counter, root))
        heapq.heapify(heap)
        nodes = 0
        while heap:
            lb, _, box = heap[0]
            if closed(lb):
                break
            if ((nodes % CHECK_EVERY == 0 and deadline.expired()) or len(heap) > MAX_OPEN
                    or (max_nodes is not None and nodes >= max_nodes)):
                return SearchOutcome(TIME_LIMIT if best_x is not None else NO_SOLUTION, best_x, best,
                                     min(lb, best), nodes)
            heapq.heappop(heap)
            nodes += 1
            x, obj, changes = self._cheapest(box)
            if changes > self.max_changes or closed(obj):
                continue
            if np.isfinite(best):  # leaves no cheaper point can use are dead in this box and below it
                box.keep(box.lc < best - rel_gap * abs(best) - 1e-12)
            on = box.miss == 0
            mine = box.idx[on]
            scores = self.R[:, mine].sum(axis=1)
            if np.all(scores >= self.Rlo - ROW_TOLERANCE) and bool(forest_meets(q.forest, q.spec, x[None, :])[0]):
                cost_obj = float(q.cost.to_objective(float(q.cost.total(x[None, :])[0])))
                if cost_obj < best:
                    best, best_x = cost_obj, x
                continue
            if mine.shape[0] == box.idx.shape[0]:
                continue  # one alive leaf per tree: every point of the box routes like x*, which misses
            split = self._split(box, mine, scores)
            for child in self._children(box, split):
                clb = self._bound(child)
                if clb < math.inf and not closed(clb):
                    counter += 1
                    heapq.heappush(heap, (max(clb, lb), counter, child))
        if best_x is None:
            return SearchOutcome(INFEASIBLE, None, math.inf, math.inf, nodes)
        return SearchOutcome(OPTIMAL, best_x, best, best, nodes)

    def _split(self, box: _Box, mine: IntArray, scores: FloatArray) -> int:
        """The node to split ``box`` at: on the most violated target row, the tree whose alive leaves
        promise the most above ``x*``'s leaf; in it, the first node on ``x*``'s path with alive leaves on
        both sides."""
        r = int(np.argmin(scores - self.Rlo)) if scores.size else 0
        v = self.R[r] if self.R.size else np.zeros(self.leaves.shape[0])
        idx = box.idx
        tree = self.ltree[idx]
        new = np.empty(tree.shape[0], dtype=bool)
        new[0] = True
        np.not_equal(tree[1:], tree[:-1], out=new[1:])
        starts = np.flatnonzero(new)
        best = np.full(self.T, -np.inf)
        best[tree[starts]] = np.maximum.reduceat(v[idx], starts)
        count = np.zeros(self.T, dtype=np.int64)
        count[tree[starts]] = np.diff(np.append(starts, tree.shape[0]))
        mt = self.ltree[mine]
        slack = np.where(count[mt] > 1, best[mt] - v[mine], -np.inf)
        t = int(mt[int(np.argmax(slack))])
        f = self.forest
        n = int(f.roots[t])
        while True:
            lch, rch = int(f.left[n]), int(f.right[n])
            a, b, e = np.searchsorted(idx, (self.first[lch], self.first[rch], self.last[rch]))
            if b > a and e > b:
                return n
            n = lch if b > a else rch

    def _children(self, box: _Box, n: int) -> list[_Box]:
        """The two boxes of ``box`` on either side of node ``n``'s split, their leaf parts updated."""
        p = int(self.node_pos[n])
        idx = box.idx
        if self.node_cat[n]:
            bits = self.node_bits[n]
            out = []
            for m in (box.bm[p] & bits, box.bm[p] & ~bits):
                bm = box.bm.copy()
                bm[p] = m
                out.append(self._update(box, (self.LM[idx, p] & m) != 0, box.blo, box.bhi, bm, p, True))
            return out
        j = int(self.node_j[n])
        hi = box.bhi.copy()
        hi[p] = min(hi[p], j)
        lo = box.blo.copy()
        lo[p] = max(lo[p], j + 1)
        return [self._update(box, self.LLO[idx, p] <= hi[p], box.blo, hi, box.bm, p, False),
                self._update(box, self.LHI[idx, p] >= lo[p], lo, box.bhi, box.bm, p, False)]

    def _update(self, box: _Box, sel: BoolArray, blo: IntArray, bhi: IntArray, bm: npt.NDArray[np.uint64],
                p: int, is_cat: bool) -> _Box:
        """A child box: its leaves ``box.idx[sel]``, feature ``p``'s part of their costs, changes and
        misses recomputed."""
        idx = box.idx[sel]
        lc, chg, miss = box.lc[sel], box.chg[sel], box.miss[sel]
        if self.norm == Norm.LINF:
            lc, chg = self._leaf_costs(blo, bhi, bm, idx)
        elif is_cat:
            c_old, h_old = self._cat_part(p, idx, box.bm[p])
            c_new, h_new = self._cat_part(p, idx, bm[p])
            lc = lc + (c_new - c_old)
            chg = chg + (h_new - h_old)
        else:
            c_old, h_old = self._num_part(p, idx, int(box.blo[p]), int(box.bhi[p]))
            c_new, h_new = self._num_part(p, idx, int(blo[p]), int(bhi[p]))
            lc = lc + (c_new - c_old)
            chg = chg + (h_new - h_old)
        old = self._star_of(p, is_cat, box.blo, box.bhi, box.bm)
        new = self._star_of(p, is_cat, blo, bhi, bm)
        if new != old:
            miss = miss + (self._misses(p, is_cat, idx, new) - self._misses(p, is_cat, idx, old))
        child = _Box(blo, bhi, bm, idx, lc, chg, miss)
        child.keep(chg <= self.max_changes)
        return child

    def _star_of(self, p: int, is_cat: bool, blo: IntArray, bhi: IntArray, bm: npt.NDArray[np.uint64]) -> int:
        if is_cat:
            x0bit, m = int(self.cat_x0bit[p]), int(bm[p])
            return x0bit if x0bit < 64 and (m >> x0bit) & 1 else (m & -m).bit_length() - 1
        return int(min(max(self.c0[p], blo[p]), bhi[p]))


def answer(q: Query, incumbent: FloatArray | None, cost: float | None, deadline: Deadline,
           rel_gap: float = 1e-6) -> SearchOutcome | None:
    """Search ``q`` from the verified point ``incumbent`` of cost ``cost`` (norm units; both None without
    one) until proven or ``deadline``; None when the search does not apply (:func:`supported`, or a
    forest it does not take)."""
    if not supported(q):
        return None
    lo, hi = q.lo, q.hi
    inc_obj = math.inf
    if incumbent is not None and cost is not None and math.isfinite(cost):
        blo, bhi = q.cost.box(cost)
        lo, hi = np.maximum(lo, blo), np.minimum(hi, bhi)
        inc_obj = float(q.cost.to_objective(float(q.cost.total(incumbent[None, :])[0])))
    else:
        incumbent = None
    doms, why = build_domains(q, lo, hi)
    if why:  # (the cost box always holds the incumbent: only the constraints leave a feature no value)
        return SearchOutcome(INFEASIBLE, None, math.inf, math.inf, 0) if incumbent is None else None
    search = BoxSearch(q, doms)
    if not search.ok:
        return None
    return search.run(deadline, incumbent, inc_obj, rel_gap)
