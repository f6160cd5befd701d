"""A tolerance cascade: approximate oblivious tables first, the exact forest for rows near the decision.

The tables (a formula-5 fit of the source's margins) decide every row whose table margin ``a`` lies
outside the *band* ``[lo, hi]`` (``lo <= 0 <= hi``); rows with ``lo <= a <= hi`` are recomputed by the
exact forest. The ``cascade`` pass (:mod:`lumber.passes.transforms.cascade`) sets the band on validation
rows so that the cascade decides as the source does there; regressors (no decision) carry the tables
alone (``band`` None). The C backend (:mod:`lumber.backends.cascade`) links both parts into one library.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt

from .diagnostics import ValidationError
from .forest import Forest
from .oblivious import ObliviousEnsemble
from .schema import Schema

Band = tuple[float, float]
"""``(lo, hi)`` with ``lo <= 0 <= hi``: rows whose approximate margin lies in ``[lo, hi]`` take the exact forest."""


def inside_band(approx: npt.NDArray[np.float64], band: Band) -> npt.NDArray[np.bool_]:
    """Rows whose approximate margin lies in the band (they take the exact forest)."""
    a = np.asarray(approx, dtype=np.float64).reshape(-1)
    return (a >= band[0]) & (a <= band[1])


@dataclass(frozen=True, eq=False)
class Cascade:
    """Oblivious ``tables`` for every row, the exact ``forest`` for rows whose table margin is in ``band``."""

    forest: Forest
    tables: ObliviousEnsemble
    band: Band | None
    """None: tables only (regressors)."""
    quality: dict[str, Any] = field(default_factory=dict)
    """What the band was set on (rows, agreement, exact-path share); recorded in the compiled library."""

    @property
    def schema(self) -> Schema:
        return self.forest.schema

    @property
    def n_trees(self) -> int:
        """Trees on the fast path (the tables)."""
        return self.tables.n_trees

    def validate(self) -> "Cascade":
        """Check the parts and that they fit together; raises ``ValidationError``. Returns self."""
        self.forest.validate()
        self.tables.validate()
        if self.schema.n_outputs != 1:
            raise ValidationError("a cascade needs a one-output model")
        if self.tables.schema.n_features != self.schema.n_features:
            raise ValidationError(f"the cascade's tables read {self.tables.schema.n_features} features, "
                                  f"its forest {self.schema.n_features}")
        if self.band is not None and not (self.band[0] <= 0.0 <= self.band[1]):
            raise ValidationError(f"a cascade's band must contain 0, got {self.band}")
        return self

    def prepare_input(self, X: Any) -> npt.NDArray[np.float64]:
        return self.forest.prepare_input(X)

    def evaluate(self, X: Any) -> npt.NDArray[np.float64]:
        """Raw margins ``(n,)``: the tables', and the forest's for rows inside the band."""
        Xp = self.prepare_input(X)
        a = np.asarray(self.tables.evaluate(Xp), dtype=np.float64).reshape(-1).copy()
        if self.band is not None:
            inside = inside_band(a, self.band)
            if inside.any():
                a[inside] = np.asarray(self.forest.evaluate(Xp[inside])).reshape(-1)
        return a


__all__ = ["Band", "Cascade", "inside_band"]
