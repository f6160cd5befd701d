"""The fast path of a query: a heuristic point proven optimal by a per-tree bound, without a MILP.

The warm start (``heuristic.warm_start``: the greedy walk from the case, pulled back toward it) often
finds the optimum itself; :func:`leaf_bound_proves` then shows in about a millisecond that no point
costing less reaches the target, and the driver returns the point (verified as every answer is) without
building the MILP. When the bound does not close, the point starts and prunes the MILP as before.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from lumber.ir.interp import trees_per_output

from .leafcuts import prune_reach
from .problem import Query, build_domains
from .targets import decision_threshold
from .trees import classify, reachable

FloatArray = npt.NDArray[np.float64]


def leaf_bound_proves(q: Query, cost: float) -> bool:
    """Is every point of ``q``'s domains that costs at most ``cost`` off the target, by the per-tree bound?

    Such a point lies within the cost's box (:meth:`CaseCost.box`) and in one leaf per tree whose cheapest
    point costs at most ``cost`` (``leafcuts.prune_reach``). Letting each tree take its best such leaf on
    its own bounds the target's score from above; when even that misses the target, no point within
    ``cost`` reaches it, and a known point costing ``cost / (1 - gap)`` is optimal within ``gap``. Only
    single-output thresholds and argmax classes have this form; other targets return False (not proven).
    """
    f, spec, s = q.forest, q.spec, q.forest.schema
    if spec.kind != "class" or spec.index is None or (s.n_outputs > 1 and s.cutoff is not None):
        return False
    blo, bhi = q.cost.box(cost)
    doms, why = build_domains(q, np.maximum(q.lo, blo), np.minimum(q.hi, bhi))
    if why:
        return True  # some feature has no value within the cost: no point is that cheap
    ch = classify(f, doms)
    reach = prune_reach(f, ch, reachable(f, ch), doms, q.cost, cost)
    leaves = np.flatnonzero(reach & (f.left < 0))
    tree = f.node_tree[leaves].astype(np.int64)
    if np.unique(tree).shape[0] < f.n_trees:
        return True  # some tree has no leaf within the cost
    starts = np.flatnonzero(np.r_[True, tree[1:] != tree[:-1]])
    div = max(float(trees_per_output(f)[0]), 1.0) if s.average else 1.0
    base = np.asarray(s.base_score, dtype=np.float64).reshape(-1)
    rows: list[tuple[FloatArray, float, float, float]] = []  # (per-leaf coefficient, constant, lo, hi)
    if s.n_outputs == 1:
        theta = decision_threshold(s)
        v = f.value[leaves, 0].astype(np.float64)
        rows.append((v, float(base[0]), theta, np.inf) if spec.index == 1 else (v, float(base[0]), -np.inf, theta))
    else:
        c = spec.index
        for o in range(s.n_outputs):
            if o != c:
                rows.append((f.value[leaves, c].astype(np.float64) - f.value[leaves, o], float(base[c] - base[o]),
                             0.0, np.inf))
    for v, const, lo, hi in rows:
        top = (const + float(np.maximum.reduceat(v, starts).sum())) / div
        low = (const + float(np.minimum.reduceat(v, starts).sum())) / div
        tol = 1e-6 * (abs(const) + float(np.abs(v).max(initial=0.0)) * f.n_trees) / div + 1e-12
        if top < lo - tol or low > hi + tol:
            return True
    return False
