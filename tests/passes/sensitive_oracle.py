"""Brute-force oracle for sensitive tests: search every cell of the model's partition.

The thresholds of each feature cut its axis into elementary intervals (plus the
zero band of zero-as-missing tests); every product of intervals is a cell on
which the model is constant. The nearest point of a cell to a case is the
per-coordinate clip, so scanning all cells' nearest points and keeping the
nearest one whose decision (from ``Forest.evaluate``) differs gives the exact
answer without leaf boxes. Exponential in the number of features: small models only.
"""

from __future__ import annotations

import itertools

import numpy as np

from lumber.ir import Forest
from lumber.ir.forest import ZERO_THRESHOLD
from lumber.passes.analyses.metrics import Metric
from lumber.passes.analyses.realizable import above, below
from lumber.ir import Target
from lumber.passes.analyses.sensitive_tests import goal_decisions


def _candidates(forest: Forest, metric: Metric, x: np.ndarray, f: int,
                blo: float, bhi: float) -> list[float]:
    """Nearest admissible value of feature ``f`` in every elementary cell (and the case's own)."""
    xv = float(x[f])
    if np.isnan(xv):
        return [xv]
    in_bounds = blo <= xv <= bhi
    out = [xv] if in_bounds else []
    if metric.immutable[f]:
        return out
    if metric.categorical[f]:
        codes = [float(c) for c in range(int(metric.n_codes[f]))]
        if f in metric.allowed:
            codes = [c for c in codes if int(c) in set(metric.allowed[f].tolist())]
        return sorted(set(out + codes))
    nodes = np.flatnonzero((forest.feature == f) & (forest.left >= 0) & ~forest.is_categorical)
    cuts = set(forest.threshold[nodes].tolist())
    if forest.missing_zero[forest.feature == f].any():
        cuts |= {float(np.nextafter(-ZERO_THRESHOLD, -np.inf)), ZERO_THRESHOLD}
    edges = [-np.inf] + sorted(cuts) + [np.inf]
    dtype, integer = metric.input_dtype, bool(metric.integer[f])
    for a, b in zip(edges[:-1], edges[1:]):
        lo = float(above(a, True, dtype, integer))
        hi = float(below(b, False, dtype, integer))
        lo, hi = max(lo, metric.domain_lo[f], blo), min(hi, metric.domain_hi[f], bhi)
        if lo <= hi and np.isfinite(np.clip(xv, lo, hi)):
            out.append(float(np.clip(xv, lo, hi)))
    return sorted(set(out))


def oracle(forest: Forest, x: np.ndarray, metric: Metric, goal: Target = Target()) -> dict[int, tuple[float, np.ndarray]]:
    """Per decision: the smallest distance from ``x`` to a point with that decision, and the point."""
    x = forest.prepare_input(x.reshape(1, -1))[0]
    blo, bhi = metric.case_bounds(x.reshape(1, -1))
    cands = [_candidates(forest, metric, x, f, float(blo[0, f]), float(bhi[0, f])) for f in range(x.shape[0])]
    P = np.array(list(itertools.product(*cands)), dtype=np.float64).reshape(-1, x.shape[0])
    if metric.max_changes is not None:
        changed = (~((P == x) | (np.isnan(P) & np.isnan(x)))).sum(axis=1)
        P = P[changed <= metric.max_changes]
    if P.shape[0] == 0:
        return {}
    dec = goal_decisions(forest, forest.evaluate(P), goal)
    dist = metric.distance(np.broadcast_to(x, P.shape), P)
    out: dict[int, tuple[float, np.ndarray]] = {}
    for g in np.unique(dec):
        sel = np.flatnonzero((dec == g) & np.isfinite(dist))
        if sel.size:
            j = sel[np.argmin(dist[sel])]
            out[int(g)] = (float(dist[j]), P[j])
    return out
