"""The Forest's storage of record: parallel node arrays and the shape they imply (docs/ir.md).

:class:`ForestArrays` is what the reference semantics (:mod:`.interp`), the derived structure
(:mod:`.graph`) and the invariant checks (:mod:`.verify`) read; :class:`~lumber.ir.forest.Forest`
adds the methods built on them. Both directions are real imports, no circle: arrays <- interp,
graph, verify <- forest.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

import numpy as np
import numpy.typing as npt

from .schema import Schema


@dataclass(frozen=True, eq=False)
class ForestArrays:
    """Tree ensemble as parallel node arrays; tree ``t``'s nodes are
    ``tree_offset[t]:tree_offset[t + 1]`` and its root is the first of them.

    All node ids are global (indices into the node arrays). Children have larger
    ids than their parent and belong to the same tree.

    tree_offset : int64[n_trees + 1]
        Start of each tree's nodes; ``tree_offset[-1] == n_nodes``.
    tree_output : int32[n_trees]
        Output column tree ``t`` adds to, or -1 when its leaves are vectors over
        all outputs (random-forest classifiers). Columns a tree does not target
        hold 0 in ``value``.
    left, right : int32[n_nodes]
        Global child ids; -1 for leaves (a node is a leaf iff ``left == -1``).
    feature : int32[n_nodes]
        Feature tested at the node; -1 for leaves.
    threshold : float64[n_nodes]
        Numerical test: go left iff ``x <= threshold`` where ``x`` is the input
        rounded to ``schema.input_dtype``. NaN on leaves and categorical nodes.
    missing_left : bool[n_nodes]
        Branch taken when the input is NaN (and, with ``missing_zero``, zero).
    missing_zero : bool[n_nodes]
        LightGBM ``missing_type=Zero``: ``|x| <= ZERO_THRESHOLD`` (~1e-35) also counts as missing.
    is_categorical : bool[n_nodes]
        The node tests category membership instead of a threshold.
    cat_offset : int64[n_nodes + 1], cat_values : int64[n_cat_values]
        CSR category sets: node i's set is ``cat_values[cat_offset[i]:cat_offset[i+1]]``,
        sorted, unique, non-negative. Empty for non-categorical nodes.
    cat_in_set_left : bool[n_nodes]
        Members of the set go left (else members go right and non-members left).
    cat_invalid_left : bool[n_nodes]
        Branch of a value that is not a valid category code under
        ``schema.category_rule`` (negative, too large, infinite).
    value : float64[n_nodes, n_outputs]
        Leaf outputs; rows of internal nodes are 0.
    count : float64[n_nodes] or None
        Training rows (or cover) reaching each node, when the source records it.
    """

    schema: Schema
    tree_offset: npt.NDArray[np.int64]
    tree_output: npt.NDArray[np.int32]
    left: npt.NDArray[np.int32]
    right: npt.NDArray[np.int32]
    feature: npt.NDArray[np.int32]
    threshold: npt.NDArray[np.float64]
    missing_left: npt.NDArray[np.bool_]
    missing_zero: npt.NDArray[np.bool_]
    is_categorical: npt.NDArray[np.bool_]
    cat_offset: npt.NDArray[np.int64]
    cat_values: npt.NDArray[np.int64]
    cat_in_set_left: npt.NDArray[np.bool_]
    cat_invalid_left: npt.NDArray[np.bool_]
    value: npt.NDArray[np.float64]
    count: npt.NDArray[np.float64] | None = None

    ARRAY_FIELDS = (
        ("tree_offset", np.int64), ("tree_output", np.int32), ("left", np.int32), ("right", np.int32),
        ("feature", np.int32), ("threshold", np.float64), ("missing_left", np.bool_),
        ("missing_zero", np.bool_), ("is_categorical", np.bool_), ("cat_offset", np.int64),
        ("cat_values", np.int64), ("cat_in_set_left", np.bool_), ("cat_invalid_left", np.bool_),
        ("value", np.float64), ("count", np.float64),
    )

    def __post_init__(self) -> None:
        for name, dtype in self.ARRAY_FIELDS:
            arr = getattr(self, name)
            if arr is None:
                continue
            a = np.ascontiguousarray(arr, dtype=dtype).view()
            a.flags.writeable = False
            object.__setattr__(self, name, a)

    # -- shape ------------------------------------------------------------------------------

    @property
    def n_trees(self) -> int:
        return int(self.tree_offset.shape[0] - 1)

    @property
    def n_nodes(self) -> int:
        return int(self.left.shape[0])

    @property
    def n_features(self) -> int:
        return self.schema.n_features

    @property
    def n_outputs(self) -> int:
        return self.schema.n_outputs

    @cached_property
    def is_leaf(self) -> npt.NDArray[np.bool_]:
        a = self.left < 0
        a.flags.writeable = False
        return a

    @cached_property
    def roots(self) -> npt.NDArray[np.int64]:
        r = self.tree_offset[:-1].copy()
        r.flags.writeable = False
        return r

    @cached_property
    def node_tree(self) -> npt.NDArray[np.int32]:
        """Tree id of every node."""
        sizes = np.diff(self.tree_offset)
        t = np.repeat(np.arange(self.n_trees, dtype=np.int32), sizes)
        t.flags.writeable = False
        return t

    def tree_slice(self, t: int) -> slice:
        return slice(int(self.tree_offset[t]), int(self.tree_offset[t + 1]))

    def categories_of(self, node: int) -> npt.NDArray[np.int64]:
        return self.cat_values[self.cat_offset[node]:self.cat_offset[node + 1]]


__all__ = ["ForestArrays"]
