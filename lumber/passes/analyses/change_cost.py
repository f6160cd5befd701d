"""What a change of a case costs: the one cost model of every explanation.

Counterfactuals (``counterfactual/objective.py``), sensitive tests (``metrics.py``) and
the constraint language (``cost up 2 per 1000``, a weight per direction) all price a
move with this :class:`ChangeCost`, so a distance means the same thing everywhere.

Per feature, moving ``x0`` to ``x`` costs ``w_up * (|x - x0| / s)`` upward and
``w_down * (|x - x0| / s)`` downward (``s`` the feature's scale); under l0 any change
costs its direction's weight. A categorical feature is nominal: it changes when the
category the model reads changes, and any change costs ``w_up``. A move to or from a
missing value costs ``inf``: missing values never move. The norm combines the costs
as ``sum d_i`` (l0, l1), ``sqrt(sum d_i^2)`` (l2) or ``max d_i`` (linf).

Sensitive tests project onto leaf boxes in cost per unit of each feature, so they
fold the scale into the weights (``w = weight / spread``, ``s = 1``); the exact
(MILP) sensitive path hands those same weights to the counterfactual solver.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass
from typing import Sequence

import numpy as np
import numpy.typing as npt

from lumber.ir import CategoryRule, InputDataError, Norm, Scale
from lumber.ir.interp import category_codes

FloatArray = npt.NDArray[np.float64]
BoolArray = npt.NDArray[np.bool_]


@dataclass(frozen=True, eq=False)
class ChangeCost:
    """Per-feature weights and scales, and the norm that combines them (see module docstring).

    ``category_rule`` is how the model reads a category code; None compares truncated
    codes, as the counterfactual MILP's category cells do.
    """

    norm: Norm
    w_down: FloatArray
    w_up: FloatArray
    scale: FloatArray
    categorical: BoolArray
    category_rule: CategoryRule | None = None

    @property
    def n_features(self) -> int:
        return int(self.w_up.shape[0])

    def feature_costs(self, X0: FloatArray, X: FloatArray) -> FloatArray:
        """``d_i`` of moving each row of ``X0`` to the row of ``X`` (broadcast; NaN to NaN costs 0)."""
        X, X0 = np.broadcast_arrays(np.asarray(X, dtype=np.float64), np.asarray(X0, dtype=np.float64))
        same = (X == X0) | (np.isnan(X) & np.isnan(X0))
        with np.errstate(invalid="ignore"):
            up = ~same & (X > X0)
            down = ~same & ~up
            if self.norm == Norm.L0:
                d = np.where(up, self.w_up, 0.0) + np.where(down, self.w_down, 0.0)
            else:
                delta = np.abs(X - X0) / self.scale
                d = np.where(up, self.w_up * delta, 0.0) + np.where(down, self.w_down * delta, 0.0)
        cat = np.flatnonzero(self.categorical)
        if cat.size:  # a category changes when the code the model reads (or its missingness) does
            a, b = X[..., cat], X0[..., cat]
            if self.category_rule is None:
                codes_differ = np.trunc(a) != np.trunc(b)
            else:
                codes_differ = category_codes(a, self.category_rule) != category_codes(b, self.category_rule)
            changed = ~same[..., cat] & (codes_differ | (np.isnan(a) != np.isnan(b)))
            d[..., cat] = np.where(changed, self.w_up[cat], 0.0)
        missing_moved = ~same & (np.isnan(X) | np.isnan(X0))
        return np.where(missing_moved | np.isnan(d), np.inf, d)

    def combine(self, d: FloatArray, axis: int = -1) -> FloatArray:
        """The norm of per-feature costs ``d``."""
        if self.norm == Norm.L2:
            return np.sqrt(np.square(d).sum(axis=axis))
        if self.norm == Norm.LINF:
            return d.max(axis=axis, initial=0.0)
        return d.sum(axis=axis)

    def distance(self, X0: FloatArray, X: FloatArray) -> FloatArray:
        """The cost of moving each row of ``X0`` to the row of ``X``: shape ``(n,)``."""
        return self.combine(self.feature_costs(X0, X))

    # -- objective units: the MILP minimises sum d_i^2 under l2 -------------------------------

    def to_objective(self, cost: float) -> float:
        """Objective value of a change of norm ``cost`` (its square under l2)."""
        return cost * cost if self.norm == Norm.L2 else cost

    def from_objective(self, obj: float) -> float:
        return float(np.sqrt(max(obj, 0.0))) if self.norm == Norm.L2 else obj

    def axis_costs(self, i: int, x0: float, values: FloatArray) -> FloatArray:
        """Objective-unit cost of moving numeric feature ``i`` from ``x0`` to each of ``values``."""
        v = np.asarray(values, dtype=np.float64)
        up, down = v > x0, v < x0
        if self.norm == Norm.L0:
            return np.where(up, self.w_up[i], 0.0) + np.where(down, self.w_down[i], 0.0)
        delta = np.abs(v - x0) / self.scale[i]
        d = np.where(up, self.w_up[i] * delta, 0.0) + np.where(down, self.w_down[i] * delta, 0.0)
        return d * d if self.norm == Norm.L2 else d

    def change_cost(self, i: int) -> float:
        """Objective-unit cost of changing categorical feature ``i``."""
        w = float(self.w_up[i])
        return w * w if self.norm == Norm.L2 else w

    def box(self, x0: FloatArray, cost: float) -> tuple[FloatArray, FloatArray]:
        """Per-feature value range a change of ``x0`` of norm at most ``cost`` can reach (each ``d_i <= cost``)."""
        c = cost * (1 + 1e-9) + 1e-12
        with np.errstate(divide="ignore", invalid="ignore"):
            if self.norm == Norm.L0:
                up = np.where(self.w_up <= c, np.inf, 0.0)
                down = np.where(self.w_down <= c, np.inf, 0.0)
            else:
                up = np.where(self.w_up > 0, c / self.w_up * self.scale, np.inf)
                down = np.where(self.w_down > 0, c / self.w_down * self.scale, np.inf)
        lo = x0 - down
        hi = x0 + up
        cat_fixed = self.categorical & (self.w_up > c)
        lo = np.where(cat_fixed, x0, np.where(self.categorical, -np.inf, lo))
        hi = np.where(cat_fixed, x0, np.where(self.categorical, np.inf, hi))
        return np.nan_to_num(lo, nan=-np.inf), np.nan_to_num(hi, nan=np.inf)


def reference_spread(scale: Scale, reference: npt.NDArray[np.float64], names: Sequence[str],
                     used: npt.NDArray[np.bool_], categorical: npt.NDArray[np.bool_]) -> npt.NDArray[np.float64]:
    """Per-feature spreads (standard deviation or range) of the reference rows, the one rule every explainer
    scales by: categorical features and constant ones no model reads get 1; a feature a model splits on whose
    spread is zero (or NaN) cannot be scaled, an error naming it (never a silent raw unit)."""
    with np.errstate(invalid="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        lo, hi = np.nanmin(reference, axis=0), np.nanmax(reference, axis=0)
        spread = np.nanstd(reference, axis=0) if scale == Scale.STD else hi - lo
    # one value (or none) is constant even where the standard deviation rounds to 5e-17
    flat = ~(hi > lo) | ~(spread > 0)
    bad = np.flatnonzero(used & ~categorical & flat)
    if bad.size:
        shown = ", ".join(f"'{names[i]}'" for i in bad[:5])
        what = "standard deviation" if scale == Scale.STD else "range"
        raise InputDataError(
            f"feature {shown} has zero {what} in the reference data, so it cannot be scaled",
            "pass more reference rows, explicit scale={name: spread}, or freeze the feature")
    return np.where(categorical | flat, 1.0, spread)


__all__ = ["reference_spread", "ChangeCost"]
