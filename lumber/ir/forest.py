"""The Forest IR: every node of every tree in one set of flat numpy arrays."""

from __future__ import annotations

from dataclasses import dataclass, fields, replace
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt

from .arrays import ForestArrays
from .decision import with_cutoff
from .graph import forest_to_networkx, node_depths
from .interp import ZERO_THRESHOLD, forest_apply, forest_evaluate, prepare_input
from .schema import Cutoff
from .serialize import ir_kind, load_ir, save_ir
from .verify import verify_forest

if TYPE_CHECKING:  # pragma: no cover
    import networkx as nx


@ir_kind("forest")
@dataclass(frozen=True, eq=False)
class Forest(ForestArrays):
    """A tree ensemble: the node arrays of :class:`~lumber.ir.arrays.ForestArrays` (their contract is
    documented there) with evaluation, validation, serialization and views."""

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

    def predict(self, X: Any, threshold: float | Cutoff | None = None) -> npt.NDArray[Any]:
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
