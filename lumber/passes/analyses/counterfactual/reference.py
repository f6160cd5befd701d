"""Reference rows prepared once for every case of a batch (built once per worker, reused per query).

A batch of queries on one model shares the training rows: their form in the
model's feature space, the model's decision on each (rows that already get a
target are tried first by the warm start), and each isolation forest as the MILP
encodes it (:func:`plausibility.collapse_uniform`). Per query only the case's
costs, bounds and target change.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from typing import Any, Callable, Hashable, TypeVar

import numpy as np
import numpy.typing as npt

from lumber.ir import Forest

from .plausibility import collapse_uniform

FloatArray = npt.NDArray[np.float64]
T = TypeVar("T")

DECIDE_FROM = 32
"""Batches of at least this many cases evaluate the model on the reference rows once, when a warm start
first repairs reference rows (0.3 s of CPU for 24,000 rows of a 100-tree LightGBM model): each such warm
start then tries the rows already at the target first, in a short first block, instead of a block of 1,024
rows through the model (on credit LightGBM 100 x 31, 0.113 s of CPU per query instead of 0.128 s, the
same answers)."""


@dataclass
class Reference:
    """Reference rows of one model: ``rows`` (prepared, float64), and whether a batch shares them."""

    rows: FloatArray
    batch: bool = False
    """Evaluate the model on every row once, when a query first needs the rows' decisions (a single query
    does not pay for it)."""
    _encoded: dict[int, tuple[Forest, Forest]] = field(default_factory=dict, repr=False)
    _memo: dict[Hashable, tuple[Any, Any]] = field(default_factory=dict, repr=False)
    _keys: dict[int, tuple[Forest, str]] = field(default_factory=dict, repr=False)

    @classmethod
    def of(cls, forest: Forest, reference: Any, decide: bool = False) -> "Reference | None":
        """``reference`` prepared for ``forest`` (a :class:`Reference` is returned as it is; None stays None);
        ``decide``: the rows serve a batch (:attr:`batch`, worth it from :data:`DECIDE_FROM` cases)."""
        if reference is None or isinstance(reference, Reference):
            return reference
        return cls(forest.prepare_input(reference), decide)

    def decisions(self, forest: Forest) -> npt.NDArray[Any]:
        """``forest``'s decision on every row, evaluated once."""
        return self.memo(forest, "decisions", lambda: np.asarray(forest.schema.decide(forest.evaluate(self.rows)))
                         if len(self.rows) else np.zeros(0))

    def encoded(self, isolation: Forest) -> Forest:
        """``isolation`` as the MILP encodes it, collapsed once per forest."""
        hit = self._encoded.get(id(isolation))
        if hit is None or hit[0] is not isolation:
            hit = (isolation, collapse_uniform(isolation))
            self._encoded[id(isolation)] = hit
        return hit[1]

    def memo(self, forest: Forest, key: Hashable, make: Callable[[], T]) -> T:
        """What ``make()`` builds for ``forest`` (by content: each chunk of a batch unpickles its own copy of
        both) and ``key``, built once and reused by every later query on these rows (a target's mask over the
        rows, the feature scales)."""
        k = (self._model_key(forest), key)
        hit = self._memo.get(k)
        if hit is None:
            hit = self._memo[k] = (forest, make())
        return hit[1]  # type: ignore[no-any-return]

    def _model_key(self, forest: Forest) -> str:
        hit = self._keys.get(id(forest))
        if hit is None or hit[0] is not forest:
            h = hashlib.blake2b(digest_size=16)
            for a in (forest.tree_offset, forest.feature, forest.threshold, forest.left, forest.right, forest.value,
                      forest.is_categorical, forest.missing_zero, forest.missing_left):
                h.update(np.ascontiguousarray(a).tobytes())
            hit = self._keys[id(forest)] = (forest, h.hexdigest())
        return hit[1]
