"""Assembling a Forest from per-tree arrays (what every frontend does last).

A frontend lowers each source tree to a :class:`TreeArrays` with *local* node
ids, then :func:`concat_trees` shifts them to global ids, concatenates the
arrays and validates the result. :func:`renumber_bfs` fixes trees whose source
numbering puts a child before its parent.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Sequence

import numpy as np
import numpy.typing as npt

from .diagnostics import ModelFormatError
from .forest import Forest
from .schema import Schema


@dataclass
class TreeArrays:
    """One tree with local ids (root 0, leaves have ``left == right == -1``).

    ``categories[i]`` is the sorted set of node i (only for categorical nodes).
    ``value`` is ``(n_nodes, n_outputs)``, or ``(n_nodes,)`` together with
    ``output`` naming the single output column the tree adds to.
    """

    left: npt.NDArray[np.int64]
    right: npt.NDArray[np.int64]
    feature: npt.NDArray[np.int64]
    threshold: npt.NDArray[np.float64]
    missing_left: npt.NDArray[np.bool_]
    value: npt.NDArray[np.float64]
    output: int = -1
    missing_zero: npt.NDArray[np.bool_] | None = None
    is_categorical: npt.NDArray[np.bool_] | None = None
    categories: dict[int, npt.NDArray[np.int64]] = field(default_factory=dict)
    cat_in_set_left: npt.NDArray[np.bool_] | None = None
    cat_invalid_left: npt.NDArray[np.bool_] | None = None
    count: npt.NDArray[np.float64] | None = None

    @property
    def n_nodes(self) -> int:
        return int(self.left.shape[0])


def bfs_order(left: npt.NDArray[np.int64], right: npt.NDArray[np.int64],
              leaf: npt.NDArray[np.bool_]) -> npt.NDArray[np.int64]:
    """Nodes reachable from node 0, breadth first (the order :func:`renumber_bfs` assigns).

    A cycle raises ``ModelFormatError``; shared or unreachable nodes are the caller's to check.
    """
    order: list[npt.NDArray[np.int64]] = []
    frontier = np.array([0], dtype=np.int64)
    seen = 0
    while frontier.size:
        order.append(frontier)
        seen += frontier.size
        if seen > left.shape[0]:
            raise ModelFormatError("tree structure has a cycle")
        inner = frontier[~leaf[frontier]]
        frontier = np.stack([left[inner], right[inner]], axis=1).reshape(-1).astype(np.int64)
    return np.concatenate(order)


def renumber_bfs(tree: TreeArrays) -> TreeArrays:
    """Renumber nodes in breadth-first order so every child follows its parent."""
    n = tree.n_nodes
    perm = bfs_order(tree.left, tree.right, tree.left < 0)
    if perm.shape[0] != n or np.unique(perm).shape[0] != n:
        raise ModelFormatError("tree has unreachable or shared nodes")
    new_id = np.empty(n, dtype=np.int64)
    new_id[perm] = np.arange(n)

    def remap(child: npt.NDArray[np.int64]) -> npt.NDArray[np.int64]:
        c = child[perm]
        return np.where(c >= 0, new_id[np.maximum(c, 0)], -1)

    def take(a: npt.NDArray | None) -> npt.NDArray | None:
        return None if a is None else a[perm]

    return TreeArrays(
        left=remap(tree.left), right=remap(tree.right), feature=tree.feature[perm],
        threshold=tree.threshold[perm], missing_left=tree.missing_left[perm], value=tree.value[perm],
        output=tree.output, missing_zero=take(tree.missing_zero), is_categorical=take(tree.is_categorical),
        categories={int(new_id[k]): v for k, v in tree.categories.items()},
        cat_in_set_left=take(tree.cat_in_set_left), cat_invalid_left=take(tree.cat_invalid_left),
        count=take(tree.count),
    )


def concat_trees(schema: Schema, trees: Sequence[TreeArrays], validate: bool = True) -> Forest:
    """Global-id Forest from local trees; validates unless told not to."""
    K = schema.n_outputs
    sizes = np.array([t.n_nodes for t in trees], dtype=np.int64)
    offset = np.zeros(len(trees) + 1, dtype=np.int64)
    np.cumsum(sizes, out=offset[1:])
    n = int(offset[-1])

    def cat(get, dtype, default) -> npt.NDArray:  # type: ignore[no-untyped-def]
        parts = [np.asarray(get(t), dtype=dtype) if get(t) is not None else np.full(t.n_nodes, default, dtype=dtype)
                 for t in trees]
        return np.concatenate(parts) if parts else np.zeros(0, dtype=dtype)

    shift = np.repeat(offset[:-1], sizes)
    left = cat(lambda t: t.left, np.int64, -1)
    right = cat(lambda t: t.right, np.int64, -1)
    left = np.where(left >= 0, left + shift, -1)
    right = np.where(right >= 0, right + shift, -1)

    value = np.zeros((n, K), dtype=np.float64)
    tree_output = np.empty(len(trees), dtype=np.int32)
    for i, t in enumerate(trees):
        sl = slice(offset[i], offset[i + 1])
        v = np.asarray(t.value, dtype=np.float64)
        if t.output >= 0:
            value[sl, t.output] = v[:, t.output] if v.ndim == 2 and v.shape[1] == K and K > 1 else v.reshape(-1)
        else:
            value[sl] = v.reshape(t.n_nodes, K)
        tree_output[i] = t.output
    leaf = left < 0
    value[~leaf] = 0.0

    is_cat = cat(lambda t: t.is_categorical, np.bool_, False)
    cat_sizes = np.zeros(n, dtype=np.int64)
    cat_parts: list[npt.NDArray[np.int64]] = []
    for i, t in enumerate(trees):
        for local in sorted(t.categories):
            vals = np.unique(np.asarray(t.categories[local], dtype=np.int64))
            cat_sizes[offset[i] + local] = vals.shape[0]
    # values in global node order
    for i, t in enumerate(trees):
        for local in sorted(t.categories):
            cat_parts.append(np.unique(np.asarray(t.categories[local], dtype=np.int64)))
    cat_offset = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(cat_sizes, out=cat_offset[1:])
    counts = None
    if all(t.count is not None for t in trees) and trees:
        counts = cat(lambda t: t.count, np.float64, 0.0)
    forest = Forest(
        schema=schema,
        tree_offset=offset,
        tree_output=tree_output,
        left=left.astype(np.int32),
        right=right.astype(np.int32),
        feature=np.where(leaf, -1, cat(lambda t: t.feature, np.int64, -1)).astype(np.int32),
        threshold=np.where(leaf | is_cat, np.nan, cat(lambda t: t.threshold, np.float64, np.nan)),
        missing_left=cat(lambda t: t.missing_left, np.bool_, False) & ~leaf,
        missing_zero=cat(lambda t: t.missing_zero, np.bool_, False) & ~leaf,
        is_categorical=is_cat,
        cat_offset=cat_offset,
        cat_values=np.concatenate(cat_parts) if cat_parts else np.zeros(0, dtype=np.int64),
        cat_in_set_left=cat(lambda t: t.cat_in_set_left, np.bool_, True) & is_cat,
        cat_invalid_left=cat(lambda t: t.cat_invalid_left, np.bool_, False) & is_cat,
        value=value,
        count=counts,
    )
    if validate:
        forest.validate()
    return forest
