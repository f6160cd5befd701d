"""Invariant checks for the Forest IR (docs/ir.md lists them).

Frontends call this on everything they build, and tests call it after every
pass: a malformed array must be a clear error, never undefined behaviour.
"""

from __future__ import annotations

import numpy as np

from .arrays import ForestArrays
from .diagnostics import IRLocation, ValidationError


def _fail(forest: ForestArrays, msg: str, node: int | None = None, field: str | None = None) -> ValidationError:
    loc = None
    if node is not None:
        t = int(np.searchsorted(forest.tree_offset, node, side="right") - 1)
        loc = IRLocation(tree=t, node=int(node - forest.tree_offset[t]), field=field)
    elif field is not None:
        loc = IRLocation(field=field)
    return ValidationError(msg, location=loc)


def verify_forest(forest: ForestArrays) -> None:
    """Raise ``ValidationError`` at the first broken invariant."""
    schema = forest.schema
    schema.validate()
    n = forest.n_nodes
    off = forest.tree_offset
    if off.ndim != 1 or off.shape[0] < 1 or off[0] != 0 or off[-1] != n:
        raise _fail(forest, f"tree_offset must start at 0 and end at n_nodes={n}", field="tree_offset")
    if np.any(np.diff(off) <= 0):
        t = int(np.flatnonzero(np.diff(off) <= 0)[0])
        raise _fail(forest, f"tree {t} has no nodes", field="tree_offset")
    for name in ("right", "feature", "threshold", "missing_left", "missing_zero", "is_categorical",
                 "cat_in_set_left", "cat_invalid_left"):
        if getattr(forest, name).shape != (n,):
            raise _fail(forest, f"array '{name}' has shape {getattr(forest, name).shape}, expected ({n},)", field=name)
    if forest.value.shape != (n, schema.n_outputs):
        raise _fail(forest, f"value has shape {forest.value.shape}, expected ({n}, {schema.n_outputs})", field="value")
    if forest.tree_output.shape != (forest.n_trees,):
        raise _fail(forest, "tree_output must have one entry per tree", field="tree_output")
    if np.any((forest.tree_output < -1) | (forest.tree_output >= schema.n_outputs)):
        raise _fail(forest, "tree_output entries must be -1 or an output index", field="tree_output")
    if forest.count is not None and forest.count.shape != (n,):
        raise _fail(forest, "count must have one entry per node", field="count")
    if forest.cat_offset.shape != (n + 1,) or forest.cat_offset[0] != 0 or forest.cat_offset[-1] != forest.cat_values.shape[0]:
        raise _fail(forest, "cat_offset must have n_nodes + 1 entries from 0 to len(cat_values)", field="cat_offset")
    if np.any(np.diff(forest.cat_offset) < 0):
        raise _fail(forest, "cat_offset must be non-decreasing", field="cat_offset")

    leaf = forest.left < 0
    internal = np.flatnonzero(~leaf)
    tree_of = forest.node_tree
    if np.any(forest.right[leaf] != -1):
        raise _fail(forest, "a leaf has a right child", node=int(np.flatnonzero(leaf & (forest.right != -1))[0]))
    for side in ("left", "right"):
        child = getattr(forest, side)[internal]
        bad = (child <= internal) | (child >= n)
        if bad.any():
            i = int(internal[np.flatnonzero(bad)[0]])
            raise _fail(forest, f"{side} child {int(getattr(forest, side)[i])} is out of range or not after its parent", node=i)
        bad = tree_of[child] != tree_of[internal]
        if bad.any():
            raise _fail(forest, f"{side} child lies in another tree", node=int(internal[np.flatnonzero(bad)[0]]))
    # every non-root node has exactly one parent
    indeg = np.bincount(np.concatenate([forest.left[internal], forest.right[internal]]), minlength=n)
    roots = np.zeros(n, dtype=bool)
    roots[off[:-1]] = True
    if np.any(indeg[roots] != 0):
        raise _fail(forest, "a root has a parent", node=int(np.flatnonzero(roots & (indeg != 0))[0]))
    bad = (~roots) & (indeg != 1)
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        what = "is unreachable" if indeg[i] == 0 else f"has {int(indeg[i])} parents"
        raise _fail(forest, f"node {what}", node=i)

    feat = forest.feature[internal]
    if np.any((feat < 0) | (feat >= schema.n_features)):
        i = int(internal[np.flatnonzero((feat < 0) | (feat >= schema.n_features))[0]])
        raise _fail(forest, f"feature index {int(forest.feature[i])} is out of range (model has {schema.n_features} features)", node=i)
    if np.any(forest.feature[leaf] != -1):
        raise _fail(forest, "a leaf has a feature", node=int(np.flatnonzero(leaf & (forest.feature != -1))[0]))
    num = internal[~forest.is_categorical[internal]]
    if np.any(np.isnan(forest.threshold[num])):
        raise _fail(forest, "numerical split has a NaN threshold", node=int(num[np.isnan(forest.threshold[num])][0]))
    if np.any(forest.is_categorical[leaf]):
        raise _fail(forest, "a leaf is marked categorical", node=int(np.flatnonzero(leaf & forest.is_categorical)[0]))
    sizes = np.diff(forest.cat_offset)
    if np.any(sizes[~forest.is_categorical] != 0):
        raise _fail(forest, "a non-categorical node has a category set",
                    node=int(np.flatnonzero((sizes != 0) & ~forest.is_categorical)[0]))
    if forest.cat_values.size:
        if np.any(forest.cat_values < 0) or np.any(forest.cat_values >= 2**32):
            raise _fail(forest, "category codes must lie in [0, 2**32)", field="cat_values")
        node_of = np.repeat(np.arange(n), sizes)
        same = node_of[1:] == node_of[:-1]
        if np.any(same & (np.diff(forest.cat_values) <= 0)):
            raise _fail(forest, "category sets must be sorted and unique",
                        node=int(node_of[1:][same & (np.diff(forest.cat_values) <= 0)][0]))
    if not np.all(np.isfinite(forest.value[leaf])):
        bad_leaf = int(np.flatnonzero(leaf & ~np.all(np.isfinite(forest.value), axis=1))[0])
        raise _fail(forest, "leaf value is NaN or infinite", node=bad_leaf)
    # trees that target one output must hold zeros elsewhere
    tout = forest.tree_output
    if np.any(tout >= 0) and schema.n_outputs > 1:
        target = tout[tree_of]
        cols = np.arange(schema.n_outputs)[None, :]
        off_target = (target[:, None] >= 0) & (cols != target[:, None]) & (forest.value != 0)
        if off_target.any():
            raise _fail(forest, "a single-output tree has a non-zero value in another output column",
                        node=int(np.flatnonzero(off_target.any(axis=1))[0]))
