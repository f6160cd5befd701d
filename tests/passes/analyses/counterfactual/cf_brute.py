"""Exhaustive counterfactual search over the cells of a small forest: the oracle for the MILP.

Written independently of the MILP code: every split ``x <= t`` cuts a
feature's axis at the largest input-dtype value ``<= t`` and the next one
above it; the cheapest point of any cell for a cost that grows with the
distance to ``x0`` is one of those values, ``x0`` itself, or a bound. The
product of those candidate values over the features holds an optimal
counterfactual, so the minimum over the candidates that reach the target
is the optimum.
"""

from __future__ import annotations

import itertools
from typing import Callable

import numpy as np

from lumber.ir import FeatureKind, Forest, Task
from lumber.ir.forest import ZERO_THRESHOLD


def dtype_down(t: float, dtype: str) -> float:
    if dtype == "float64":
        return float(t)
    f = np.float32(t)
    if float(f) > t:
        f = np.nextafter(f, np.float32(-np.inf))
    return float(f)


def dtype_up(t: float, dtype: str) -> float:
    d = dtype_down(t, dtype)
    if dtype == "float64":
        return float(np.nextafter(d, np.inf))
    return float(np.nextafter(np.float32(d), np.float32(np.inf)))


def step_values(forest: Forest, i: int, x0: float, lo: float, hi: float, step: float) -> list[float]:
    """Candidates on the grid ``o + k * step`` (``o``: 0, or the case's offset when it is off the grid):
    for every split ``x <= t`` the last grid value at or below ``t`` and the first above it."""
    r = x0 - step * np.floor(x0 / step)
    o = 0.0 if min(r, step - r) <= 1e-9 * max(step, abs(x0)) else r
    nodes = np.flatnonzero((forest.feature == i) & (forest.left >= 0) & ~forest.is_categorical)
    vals = {x0}
    for t in forest.threshold[nodes]:
        k = np.floor((t - o) / step)
        vals.update((o + k * step, o + (k + 1) * step))
    if np.isfinite(lo):
        vals.add(o + np.ceil((lo - o) / step) * step)
    if np.isfinite(hi):
        vals.add(o + np.floor((hi - o) / step) * step)
    return sorted(v for v in vals if lo <= v <= hi)


def candidate_values(forest: Forest, i: int, x0: float, lo: float, hi: float,
                     codes: list[float] | None, step: float = 0.0) -> list[float]:
    """The values worth trying for feature ``i``; ``step > 0``: only multiples of it (integer domains: 1)."""
    if not np.isfinite(x0):
        return [x0]
    if codes is not None:
        return [c for c in codes if lo <= c <= hi]
    if step > 0:
        return step_values(forest, i, x0, lo, hi, step)
    dt = forest.schema.input_dtype
    kind = forest.schema.features[i].kind
    vals = {x0}
    nodes = np.flatnonzero((forest.feature == i) & (forest.left >= 0) & ~forest.is_categorical)
    if kind == FeatureKind.BINARY:
        return [v for v in (0.0, 1.0) if lo <= v <= hi]
    if kind == FeatureKind.ORDINAL and float(x0).is_integer():  # whole levels only
        for t in forest.threshold[nodes]:
            vals.update((float(np.floor(t)), float(np.floor(t)) + 1.0))
        vals.update(float(b) for b in (np.ceil(lo), np.floor(hi)) if np.isfinite(b))
        return sorted(v for v in vals if lo <= v <= hi)
    for t in forest.threshold[nodes]:
        vals.update((dtype_down(t, dt), dtype_up(t, dt)))
    if forest.missing_zero[nodes].any():
        z = ZERO_THRESHOLD
        vals.update((dtype_down(z, dt), dtype_up(z, dt), dtype_down(-z, dt), dtype_up(-z, dt), 0.0,
                     float(np.nextafter(np.float32(-z) if dt == "float32" else -z, -np.inf))))
    for b in (lo, hi):
        if np.isfinite(b):
            vals.add(b)
    return sorted(v for v in vals if lo <= v <= hi)


def feature_cost(norm: str, x0: np.ndarray, X: np.ndarray, w_down: np.ndarray, w_up: np.ndarray,
                 categorical: np.ndarray) -> np.ndarray:
    """Per-feature costs d_i, the definition in the package docstring, re-written."""
    diff = X - x0[None, :]
    same = (X == x0[None, :]) | (np.isnan(X) & np.isnan(x0[None, :]))
    up = (diff > 0) & ~same
    down = (diff < 0) & ~same
    if norm == "l0":
        d = up * w_up + down * w_down
    else:
        d = np.where(up, w_up * np.abs(diff), 0.0) + np.where(down, w_down * np.abs(diff), 0.0)
    return np.where(categorical[None, :], np.where(same, 0.0, w_up[None, :]), d)


def norm_of(norm: str, d: np.ndarray) -> np.ndarray:
    if norm == "l2":
        return np.sqrt((d * d).sum(axis=1))
    if norm == "linf":
        return d.max(axis=1)
    return d.sum(axis=1)


def target_margin(forest: Forest, X: np.ndarray, target: int) -> np.ndarray:
    """Signed distance of each row's decision to the target class (>= 0 means the argmax picks it)."""
    m = forest.evaluate(X)
    s = forest.schema
    if s.n_outputs == 1:
        p = s.transform(m)
        return (p - 0.5) if target == 1 else (0.5 - p)
    m = m.reshape(len(X), -1)
    out = np.full(len(X), np.inf)
    for o in range(m.shape[1]):
        if o != target:
            out = np.minimum(out, m[:, target] - m[:, o])
    return out


def brute_force(forest: Forest, x0: np.ndarray, meets: Callable[[np.ndarray], np.ndarray], norm: str,
                w_down: np.ndarray, w_up: np.ndarray, lo: np.ndarray | None = None, hi: np.ndarray | None = None,
                extra_ok: Callable[[np.ndarray], np.ndarray] | None = None,
                codes: dict[int, list[float]] | None = None,
                also: tuple[Forest, ...] = (), steps: dict[int, float] | None = None
                ) -> tuple[float, np.ndarray | None]:
    """Minimum cost over all candidate points meeting ``meets`` (and ``extra_ok``), with its point.

    ``also`` lists further forests whose splits cut the cells (the plausibility model); ``steps``
    puts features on grids of whole steps (their domains: integer features have step 1).
    """
    steps = steps or {}
    n = forest.n_features
    lo = np.full(n, -np.inf) if lo is None else lo
    hi = np.full(n, np.inf) if hi is None else hi
    cat = np.array([f.kind == FeatureKind.CATEGORICAL for f in forest.schema.features])
    codes = codes or {}
    per = []
    for i in range(n):
        cs = codes.get(i)
        if cat[i] and cs is None:
            cs = [float(c) for c in range(len(forest.schema.features[i].categories or range(6)))]
        st = steps.get(i, 0.0)
        vals = set(candidate_values(forest, i, float(x0[i]), lo[i], hi[i], cs if cat[i] else None, st))
        for other in also:  # e.g. an isolation forest: its splits cut cells too
            vals |= set(candidate_values(other, i, float(x0[i]), lo[i], hi[i], cs if cat[i] else None, st))
        per.append(sorted(vals))
    if any(len(p) == 0 for p in per):
        return np.inf, None
    X = np.array(list(itertools.product(*per)), dtype=np.float64)
    ok = meets(X)
    if extra_ok is not None:
        ok &= extra_ok(X)
    if not ok.any():
        return np.inf, None
    c = norm_of(norm, feature_cost(norm, x0, X, w_down, w_up, cat))
    c = np.where(ok, c, np.inf)
    j = int(np.argmin(c))
    return float(c[j]), X[j]


def task_is_class(forest: Forest) -> bool:
    return forest.schema.task in (Task.BINARY, Task.MULTICLASS)
