"""Leaf-cost cuts: valid inequalities that make the LP relaxation pay for every tree's path.

Each leaf is a box. Reaching leaf ``l`` of tree ``t`` forces feature ``i`` into
the box's side, which costs at least ``c_i(l)``: the cost of the box point
nearest the original value. One leaf per tree carries the path, so for every
tree ``t`` and feature ``i``::

    z_i >= sum over leaves l of t of c_i(l) * y_l

where ``z_i`` is the feature's cost column (``objective.py``). Integer points
satisfy it by construction; fractional flows split over leaves now pay the
flow-weighted leaf costs instead of only the largest single threshold, which
tightens the bound the solver proves (the order-simplex alone bounds ``z_i``
by the farthest cut a fractional path crosses). A tree whose path is already
decided turns its leaf's costs into lower bounds of the ``z_i`` columns.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from lumber.ir import Forest, Norm

from .deadline import Deadline
from .domain import CategoricalDomain, Domain, NumericDomain
from .model import LinExpr, MilpModel
from .objective import CaseCost
from .trees import ForestEncoding, NodeChoices

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]


def leaf_costs(forest: Forest, ch: NodeChoices, reach: npt.NDArray[np.bool_], domains: list[Domain],
               cost: CaseCost, features: list[int]) -> tuple[IntArray, FloatArray]:
    """Reachable leaves and their per-feature minimum costs ``(n_leaves, len(features))``."""
    nodes = np.flatnonzero(reach)
    pos = np.full(forest.n_nodes, -1, dtype=np.int64)
    pos[nodes] = np.arange(nodes.shape[0])
    F = len(features)
    col_of = {f: k for k, f in enumerate(features)}
    LO = np.full((nodes.shape[0], F), -np.inf)
    HI = np.full((nodes.shape[0], F), np.inf)
    cat_masks: dict[int, npt.NDArray[np.bool_]] = {}
    for k, f in enumerate(features):
        d = domains[f]
        if isinstance(d, NumericDomain):
            LO[:, k], HI[:, k] = d.lo, d.hi
        elif isinstance(d, CategoricalDomain):
            cat_masks[f] = np.ones((nodes.shape[0], d.codes.shape[0]), dtype=bool)
    # per-node bounds of the split, on the feature's grid
    down = np.full(forest.n_nodes, np.nan)
    up = np.full(forest.n_nodes, np.nan)
    inner = np.flatnonzero(reach & (forest.left >= 0))
    for f in features:
        d = domains[f]
        if isinstance(d, NumericDomain):
            sel = inner[(forest.feature[inner] == f) & (ch.special[inner] == 0)]
            down[sel] = d.grid.down(ch.t_eff[sel])
            up[sel] = d.grid.up(down[sel])
    depth = forest.depth
    left, right, feat = forest.left, forest.right, forest.feature
    for dd in range(int(depth[nodes].max()) + 1 if nodes.size else 0):
        v = inner[depth[inner] == dd]
        if v.size == 0:
            continue
        for child, is_left in ((left[v], True), (right[v], False)):
            ok = reach[child]
            pv, pc = pos[v[ok]], pos[child[ok]]
            LO[pc], HI[pc] = LO[pv], HI[pv]
            for m in cat_masks.values():
                m[pc] = m[pv]
        for f in features:
            k = col_of[f]
            d = domains[f]
            on = v[feat[v] == f]
            if on.size == 0:
                continue
            if isinstance(d, NumericDomain):
                on = on[np.isfinite(down[on])]
                lc, rc = left[on], right[on]
                okl, okr = reach[lc], reach[rc]
                HI[pos[lc[okl]], k] = np.minimum(HI[pos[lc[okl]], k], down[on[okl]])
                LO[pos[rc[okr]], k] = np.maximum(LO[pos[rc[okr]], k], up[on[okr]])
            elif isinstance(d, CategoricalDomain):
                rows = np.searchsorted(ch.cat_nodes[f], on)
                goes_left = ch.cat_left[f][rows]
                m = cat_masks[f]
                lc, rc = left[on], right[on]
                okl, okr = reach[lc], reach[rc]
                m[pos[lc[okl]]] &= goes_left[okl]
                m[pos[rc[okr]]] &= ~goes_left[okr]
    leaves = nodes[forest.left[nodes] < 0]
    C = np.zeros((leaves.shape[0], F))
    lp = pos[leaves]
    for f in features:
        k = col_of[f]
        d = domains[f]
        if isinstance(d, NumericDomain):
            lo, hi = LO[lp, k], HI[lp, k]
            x0 = d.x0
            near = np.where(x0 < lo, lo, np.where(x0 > hi, hi, x0))
            C[:, k] = cost.axis_costs(f, near)
        elif isinstance(d, CategoricalDomain):
            hit = np.flatnonzero(d.codes == d.x0_code)
            keeps = cat_masks[f][lp][:, hit[0]] if hit.size else np.zeros(lp.shape[0], dtype=bool)
            C[:, k] = np.where(keeps, 0.0, cost.change_cost(f))
    return leaves, C


def add_leaf_cuts(forest: Forest, ch: NodeChoices, enc: ForestEncoding, domains: list[Domain], cost: CaseCost,
                  zcols: dict[int, tuple[int, LinExpr]], model: MilpModel, deadline: Deadline | None = None) -> int:
    """Rows ``z_i >= sum_l c_i(l) y_l`` per tree and feature; returns how many were added.

    Past ``deadline`` it stops adding (checked before the leaf costs and before each feature's rows): the
    cuts only tighten the relaxation, so the rows already added leave a valid model."""
    features = sorted(zcols)
    if not features or (deadline is not None and deadline.expired()):
        return 0
    leaves, C = leaf_costs(forest, ch, enc.reach, domains, cost, features)
    tree = forest.node_tree[leaves].astype(np.int64)
    ycol = enc.y[leaves]
    fixed = ycol < 0
    added = 0
    for k, f in enumerate(features):
        if deadline is not None and deadline.expired():
            break
        z = zcols[f][0]
        c = C[:, k]
        if fixed.any():  # decided trees: the leaf's cost is a plain lower bound
            lb = float(c[fixed].max()) if c[fixed].size else 0.0
            if lb > 0:
                model.fix(np.array([z]), lb, np.inf)
        sel = np.flatnonzero(~fixed & (c > 0))
        if sel.size == 0:
            continue
        trees, r = np.unique(tree[sel], return_inverse=True)
        m = trees.shape[0]
        model.add_rows(np.concatenate([r, np.arange(m)]), np.concatenate([ycol[sel], np.full(m, z)]),
                       np.concatenate([-c[sel], np.ones(m)]), np.zeros(m), np.full(m, np.inf))
        added += m
    return added


def prune_reach(forest: Forest, ch: NodeChoices, reach: npt.NDArray[np.bool_], domains: list[Domain],
                cost: CaseCost, bound: float) -> npt.NDArray[np.bool_]:
    """``reach`` without the leaves whose cheapest point costs more than ``bound`` (a known solution's
    cost), and without the nodes left with no reachable leaf.

    The per-feature box of :meth:`CaseCost.box` bounds each feature alone; a leaf often needs
    several features moved, each affordable but not all together. No point cheaper than the
    bound lies in such a leaf, so the optimum never routes there.
    """
    features = [d.index for d in domains if isinstance(d, (NumericDomain, CategoricalDomain))]
    if not features:
        return reach
    leaves, C = leaf_costs(forest, ch, reach, domains, cost, features)
    if cost.norm == Norm.LINF:
        total = C.max(axis=1) if C.shape[1] else np.zeros(C.shape[0])
    else:
        total = C.sum(axis=1)
    limit = cost.to_objective(bound)
    limit = limit * (1 + 1e-9) + 1e-12
    out = reach.copy()
    out[leaves[total > limit]] = False
    left, right, depth = forest.left, forest.right, forest.depth
    inner = np.flatnonzero(reach & (left >= 0))
    for dd in range(int(depth.max()) if forest.n_nodes else 0, -1, -1):  # bottom-up: keep nodes with a live child
        v = inner[depth[inner] == dd]
        out[v] = out[left[v]] | out[right[v]]
    return out
