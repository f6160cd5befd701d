"""Plausibility through an isolation forest (OCEAN, Parmentier & Vidal 2021, equation 33).

An isolation forest trained on rows of the target class, lowered to a Forest
(scikit-learn's frontend stores ``depth + c(n)`` in each leaf, averaged, with
``PostTransform.ISOLATION``), scores a point by its mean path length: short
paths mean outliers. The MILP encodes it with the same branch variables as the
model (``problem.py``) and requires a mean path length of at least ``delta``;
``delta`` is the ``contamination`` quantile of the training rows' lengths, so
that share of the target class would count as implausible.

Before encoding, :func:`collapse_uniform` turns every subtree whose leaves all
hold the same path length into one leaf (on credit about a fifth of an
isolation forest's splits: sibling leaves at the depth limit that isolate
equally many rows); the score is the same for every input, with fewer MILP
variables. Verification still evaluates the forest as given.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt

from lumber.ir import Forest, InputDataError, PostTransform, Task

FloatArray = npt.NDArray[np.float64]


def path_lengths(isolation: Forest, X: Any) -> FloatArray:
    """Mean path length (with the ``c(n)`` leaf correction) of each row."""
    _check(isolation)
    return np.asarray(isolation.evaluate(X), dtype=np.float64).reshape(-1)


def isolation_threshold(isolation: Forest, X_target: Any, contamination: float = 0.1) -> float:
    """``delta`` such that a ``contamination`` share of ``X_target`` has a shorter mean path."""
    if not 0.0 <= contamination < 1.0:
        raise InputDataError(f"contamination must be in [0, 1), got {contamination!r}")
    lengths = path_lengths(isolation, X_target)
    if lengths.size == 0:
        raise InputDataError("no rows of the target class to calibrate the isolation forest on")
    return float(np.quantile(lengths, contamination))


def collapse_uniform(forest: Forest) -> Forest:
    """``forest`` with every subtree whose leaves all hold equal values replaced by one such leaf.

    Exact: each tree gives every input the same value as before (no routing changes the value
    reached), so ``evaluate`` is bit-identical. Node ids are renumbered in their order, which keeps
    children after their parent within the same tree."""
    left, right = forest.left.astype(np.int64), forest.right.astype(np.int64)
    n = forest.n_nodes
    uniform = left < 0
    val = np.array(forest.value)
    depth = forest.depth
    inner = np.flatnonzero(left >= 0)
    for d in range(int(depth.max()) - 1 if n else -1, -1, -1):  # bottom-up; a uniform node takes its leaves' value
        v = inner[depth[inner] == d]
        li, ri = left[v], right[v]
        same = uniform[li] & uniform[ri] & np.all(val[li] == val[ri], axis=1)
        uniform[v] = same
        val[v[same]] = val[li[same]]
    internal_uniform = uniform & (left >= 0)
    if not internal_uniform.any():
        return forest
    keep = np.ones(n, dtype=bool)
    for d in range(int(depth.max()) if n else 0):  # top-down: children of a collapsed or dropped node go
        v = inner[(depth[inner] == d)]
        gone = ~keep[v] | internal_uniform[v]
        keep[left[v[gone]]] = False
        keep[right[v[gone]]] = False
    new_id = np.cumsum(keep) - 1
    leaf = internal_uniform | (left < 0)
    k = np.flatnonzero(keep)
    kl = np.where(leaf[k], -1, new_id[np.maximum(left[k], 0)])
    kr = np.where(leaf[k], -1, new_id[np.maximum(right[k], 0)])
    offs = np.searchsorted(k, forest.tree_offset)
    cat = forest.is_categorical[k] & ~leaf[k]
    sizes = np.where(cat, np.diff(forest.cat_offset)[k], 0)
    cat_offset = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)
    cat_values = (np.concatenate([forest.cat_values[forest.cat_offset[j]:forest.cat_offset[j + 1]]
                                  for j in k[cat]]) if cat.any() else np.zeros(0, dtype=np.int64))
    value = np.where(leaf[k][:, None], val[k], 0.0)
    return forest.replace(
        tree_offset=offs, left=kl, right=kr, feature=np.where(leaf[k], -1, forest.feature[k]),
        threshold=np.where(leaf[k], np.nan, forest.threshold[k]),
        missing_left=forest.missing_left[k] & ~leaf[k], missing_zero=forest.missing_zero[k] & ~leaf[k],
        is_categorical=cat, cat_offset=cat_offset, cat_values=cat_values,
        cat_in_set_left=forest.cat_in_set_left[k] & cat, cat_invalid_left=forest.cat_invalid_left[k] & cat,
        value=value, count=None if forest.count is None else forest.count[k])


def _check(isolation: Forest) -> None:
    s = isolation.schema
    if s.task != Task.ANOMALY or s.post_transform != PostTransform.ISOLATION or s.n_outputs != 1:
        raise InputDataError("the plausibility model must be a lowered isolation forest",
                             "pass lumber.load(sklearn.ensemble.IsolationForest(...).fit(X_target))")
