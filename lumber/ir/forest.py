"""The Forest IR: every node of every tree in one set of flat numpy arrays."""

from __future__ import annotations

from dataclasses import dataclass, fields, replace
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt

from .graph import forest_to_networkx, node_depths
from .interp import ZERO_THRESHOLD, forest_apply, forest_evaluate, prepare_input
from .decision import with_cutoff
from .schema import Cutoff, Schema
from .serialize import ir_kind, load_ir, save_ir
from .verify import verify_forest

if TYPE_CHECKING:  # pragma: no cover
    import networkx as nx


@ir_kind("forest")
@dataclass(frozen=True, eq=False)
class Forest:
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

    @cached_property
    def depth(self) -> npt.NDArray[np.int32]:
        """Depth of every node (root 0); vectorized over levels."""
        return node_depths(self)

    @property
    def max_depth(self) -> int:
        return int(self.depth.max()) if self.n_nodes else 0

    def replace(self, **changes: Any) -> "Forest":
        """A new Forest with some fields changed; untouched arrays are shared."""
        return replace(self, **changes)

    # -- semantics (ir/interp.py is the reference) ------------------------------------------

    def validate(self) -> "Forest":
        """Check every documented invariant; raises ``ValidationError``. Returns self."""
        verify_forest(self)
        return self

    def prepare_input(self, X: Any) -> npt.NDArray[np.float64]:
        """Check and convert user data: a float64 array rounded to the input dtype."""
        return prepare_input(self.schema, X)

    def apply(self, X: Any) -> npt.NDArray[np.int32]:
        """Leaf reached in every tree, ``(n, n_trees)``, as local node ids (``global - tree_offset``)."""
        leaves = forest_apply(self, self.prepare_input(X))
        return (leaves - self.tree_offset[:-1][None, :]).astype(np.int32)

    def apply_global(self, X: Any) -> npt.NDArray[np.int64]:
        """Like :meth:`apply` but global node ids."""
        return forest_apply(self, self.prepare_input(X))

    def predict_per_tree(self, X: Any) -> npt.NDArray[np.float64]:
        """Leaf values per tree, ``(n, n_trees, n_outputs)``."""
        return self.value[self.apply_global(X)]

    def evaluate(self, X: Any) -> npt.NDArray[np.float64]:
        """Raw margins: ``(n,)`` when ``n_outputs == 1``, else ``(n, n_outputs)``."""
        return forest_evaluate(self, self.prepare_input(X))

    def predict_proba(self, X: Any) -> npt.NDArray[np.float64]:
        """Class probabilities ``(n, n_classes)``, as the source model's ``predict_proba``."""
        return self.schema.proba(self.evaluate(X))

    def predict(self, X: Any, threshold: "float | Cutoff | None" = None) -> npt.NDArray[Any]:
        """Labels for classifiers, transformed values for regressors. ``threshold`` (binary classifiers):
        class 1 iff P(class 1) is above it (a :class:`~lumber.ir.Cutoff` may compare the margin)."""
        return with_cutoff(self.schema, threshold).decide(self.evaluate(X))

    # -- storage and views ------------------------------------------------------------------

    def save(self, path: str | Path) -> None:
        """Write the versioned ``.lumber`` format atomically (see docs/ir.md)."""
        save_ir(self, path)

    @staticmethod
    def load(path: str | Path) -> "Forest":
        return load_ir(path, Forest)  # type: ignore[no-any-return]

    def to_networkx(self) -> "nx.DiGraph":
        return forest_to_networkx(self)

    def tree_slice(self, t: int) -> slice:
        return slice(int(self.tree_offset[t]), int(self.tree_offset[t + 1]))

    def categories_of(self, node: int) -> npt.NDArray[np.int64]:
        return self.cat_values[self.cat_offset[node]:self.cat_offset[node + 1]]

    def summary(self) -> dict[str, Any]:
        """Shape statistics, as ``lumber inspect`` prints them."""
        leaves = int(self.is_leaf.sum())
        internal = self.n_nodes - leaves
        used = self.feature[self.feature >= 0]
        per_feature = np.bincount(used, minlength=self.n_features)
        leaf_depth = self.depth[self.is_leaf]
        nbytes = sum(getattr(self, f.name).nbytes for f in fields(self)
                     if isinstance(getattr(self, f.name), np.ndarray))
        return {
            "trees": self.n_trees,
            "nodes": self.n_nodes,
            "leaves": leaves,
            "internal_nodes": internal,
            "max_depth": int(leaf_depth.max()) if leaves else 0,
            "mean_leaf_depth": float(leaf_depth.mean()) if leaves else 0.0,
            "features": self.n_features,
            "features_used": int((per_feature > 0).sum()),
            "splits_per_feature": {self.schema.features[i].name: int(c) for i, c in enumerate(per_feature) if c},
            "categorical_splits": int(self.is_categorical.sum()),
            "outputs": self.n_outputs,
            "task": self.schema.task.name.lower(),
            "memory_bytes": int(nbytes),
        }


def empty_cat_arrays(n_nodes: int) -> dict[str, npt.NDArray[Any]]:
    """Category fields for a forest with no categorical split."""
    return {
        "is_categorical": np.zeros(n_nodes, dtype=bool),
        "cat_offset": np.zeros(n_nodes + 1, dtype=np.int64),
        "cat_values": np.zeros(0, dtype=np.int64),
        "cat_in_set_left": np.zeros(n_nodes, dtype=bool),
        "cat_invalid_left": np.zeros(n_nodes, dtype=bool),
    }


__all__ = ["Forest", "ZERO_THRESHOLD"]
