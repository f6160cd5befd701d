"""The rule forest as a table of leaves: boxes, training-row membership and counts.

Counterfactual rules (Amoukou and Brunel) read a random forest as an adaptive
nearest-neighbour estimator: every estimate is a weighted share of training
rows, with weights from the leaves a query reaches. This module flattens all
leaves of all trees into one set of arrays (grouped by tree) so every estimator
is a numpy expression over ``(queries, leaves)``, never a walk over nodes.

A leaf's box comes from :mod:`lumber.passes.analyses.leaf_boxes` (lower bounds
open, upper bounds closed: ``lo < x <= hi``). Rules are intervals, so the rule
forest must split on thresholds only: categorical splits are refused.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from lumber.ir import Forest, InputDataError, Task, UnsupportedModelError

from ..leaf_boxes import tree_boxes

FloatArray = npt.NDArray[np.float64]
BoolArray = npt.NDArray[np.bool_]
IntArray = npt.NDArray[np.int64]


@dataclass(frozen=True, eq=False)
class LeafTable:
    """Every leaf of the rule forest, tree by tree, with the training rows in it.

    leaf : int64[L]
        Global node id of each leaf; tree ``t``'s leaves are ``tree_start[t]:tree_start[t + 1]``.
    tree_start : int64[T + 1]
        Offsets of each tree's leaves.
    lo, hi : float64[L, d]
        The leaf's box: ``lo < x <= hi`` per feature (infinite when the path does not bound it).
    nan_ok, zero_sensitive, zero_ok : bool[L, d]; zlo, zhi : float64[L, d]
        Exact routing of NaN and of LightGBM's zero band (see ``LeafBoxes``).
    tested : bool[L, d]
        The leaf's path tests the feature.
    X : float64[n, d]
        Training rows as the rule forest reads them (rounded to its input dtype).
    row_leaf : int64[n, T]
        Leaf index (into the arrays above) of each training row in each tree.
    n_rows : float64[L]
        Training rows per leaf.
    usage : int64[d]
        Splits per feature over the forest (how "used" a feature is).
    """

    forest: Forest
    leaf: IntArray
    tree_start: IntArray
    lo: FloatArray
    hi: FloatArray
    nan_ok: BoolArray
    zero_sensitive: BoolArray
    zero_ok: BoolArray
    zlo: FloatArray
    zhi: FloatArray
    tested: BoolArray
    X: FloatArray
    row_leaf: IntArray
    n_rows: FloatArray
    usage: IntArray

    @property
    def n_leaves(self) -> int:
        return int(self.leaf.shape[0])

    @property
    def n_trees(self) -> int:
        return int(self.tree_start.shape[0] - 1)

    @property
    def n_features(self) -> int:
        return int(self.lo.shape[1])

    @property
    def feature_names(self) -> list[str]:
        return self.forest.schema.feature_names


def build_leaf_table(forest: Forest, X_train: Any) -> LeafTable:
    """Flatten ``forest``'s leaves and drop the training rows through it (``Forest.apply``)."""
    if forest.schema.task == Task.ANOMALY:
        raise UnsupportedModelError("the rule forest is an isolation forest",
                                    "counterfactual rules need a classifier or regressor forest")
    if forest.is_categorical.any():
        raise UnsupportedModelError(
            "the rule forest has categorical splits; counterfactual rules are intervals over thresholds",
            "let lumber fit its surrogate random forest (surrogate=None) or pass a scikit-learn random forest")
    X = forest.prepare_input(X_train)
    if X.shape[0] == 0:
        raise InputDataError("the training data has no rows", "counterfactual rules estimate from training rows")
    boxes = [tree_boxes(forest, t) for t in range(forest.n_trees)]
    leaf = np.concatenate([b.leaf for b in boxes]).astype(np.int64)
    sizes = np.array([b.n_leaves for b in boxes], dtype=np.int64)
    tree_start = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)

    def cat(name: str) -> npt.NDArray[Any]:
        return np.concatenate([getattr(b, name) for b in boxes], axis=0)

    pos = np.full(forest.n_nodes, -1, dtype=np.int64)
    pos[leaf] = np.arange(leaf.shape[0])
    row_leaf = pos[forest.apply_global(X)]
    n_rows = np.bincount(row_leaf.reshape(-1), minlength=leaf.shape[0]).astype(np.float64)
    used = forest.feature[forest.feature >= 0]
    return LeafTable(
        forest=forest, leaf=leaf, tree_start=tree_start, lo=cat("lo"), hi=cat("hi"), nan_ok=cat("nan_ok"),
        zero_sensitive=cat("zero_sensitive"), zero_ok=cat("zero_ok"), zlo=cat("zlo"), zhi=cat("zhi"),
        tested=cat("tested"), X=X, row_leaf=row_leaf, n_rows=n_rows,
        usage=np.bincount(used, minlength=forest.n_features).astype(np.int64),
    )


def impurity_importance(tab: LeafTable, y: FloatArray, classifier: bool) -> FloatArray:
    """Mean decrease in impurity per feature (scikit-learn's ``feature_importances_`` formula: per tree
    the weighted impurity decrease of each split, normalised to sum 1, averaged over trees, normalised),
    computed from every training row ``tab.X`` with labels ``y`` (the explained model's decisions;
    Gini for a classifier, variance for a regressor). Not the bootstrap samples the trees were fitted
    on, so it differs slightly from the source forest's own numbers; 0 for a forest without splits."""
    f = tab.forest
    y = np.asarray(y, dtype=np.float64).reshape(-1)
    if classifier:
        codes = np.unique(y, return_inverse=True)[1].reshape(-1)
        Y = np.eye(int(codes.max()) + 1 if codes.size else 1)[codes]
    else:
        Y = np.column_stack([np.ones_like(y), y, y * y])
    stats = np.zeros((f.n_nodes, Y.shape[1]))
    for t in range(tab.n_trees):
        np.add.at(stats, tab.leaf[tab.row_leaf[:, t]], Y)
    internal = np.flatnonzero(f.left >= 0)
    for i in internal[::-1].tolist():  # children have larger ids than their parent
        stats[i] = stats[f.left[i]] + stats[f.right[i]]
    if classifier:
        n = stats.sum(axis=1)
        with np.errstate(invalid="ignore", divide="ignore"):
            imp = np.where(n > 0, n - (stats * stats).sum(axis=1) / np.where(n > 0, n, 1.0), 0.0)  # n * Gini
    else:
        n = stats[:, 0]
        with np.errstate(invalid="ignore", divide="ignore"):
            imp = np.where(n > 0, stats[:, 2] - stats[:, 1] ** 2 / np.where(n > 0, n, 1.0), 0.0)  # n * variance
    dec = np.zeros(f.n_nodes)
    dec[internal] = imp[internal] - imp[f.left[internal]] - imp[f.right[internal]]
    out = np.zeros(f.n_features)
    for t in range(f.n_trees):
        a, b = int(f.tree_offset[t]), int(f.tree_offset[t + 1])
        nodes = internal[(internal >= a) & (internal < b)]
        per = np.bincount(f.feature[nodes], weights=np.maximum(dec[nodes], 0.0), minlength=f.n_features)
        if per.sum() > 0:
            out += per / per.sum()
    return out / out.sum() if out.sum() > 0 else out  # type: ignore[no-any-return]


__all__ = ["LeafTable", "build_leaf_table", "impurity_importance"]
