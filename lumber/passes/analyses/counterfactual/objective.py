"""Costs of a change around one case, and their exact MILP form.

What a move costs (weighted, asymmetric, scaled l0 / l1 / l2 / linf) is the one cost model
of every explanation, :class:`~lumber.passes.analyses.change_cost.ChangeCost`; :class:`CaseCost`
binds it to the original case ``x0`` and writes it into the MILP.

In the MILP the cost of a numeric feature is linear in its ``mu`` between
levels and equal to the true cost at every level (OCEAN, equation 31).
Splits only see cells, and the cheapest point of a cell is one of its
levels, so one MILP solver serves every separable increasing cost: l2 is
minimised as ``sum d_i^2`` in this piecewise-linear form and reported as its
square root.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np
import numpy.typing as npt

from lumber.ir import InputDataError, Norm, Scale

from lumber.ir.constraints import parse_spreads

from ..change_cost import ChangeCost, reference_spread
from .domain import CategoricalDomain, Domain, FixedDomain, NumericDomain
from .model import LinExpr, MilpModel

FloatArray = npt.NDArray[np.float64]


@dataclass(frozen=True)
class CaseCost:
    """The cost model (:class:`~lumber.passes.analyses.change_cost.ChangeCost`) around the original case ``x0``,
    with its exact MILP form."""

    cost: ChangeCost
    x0: FloatArray

    @property
    def norm(self) -> Norm:
        return self.cost.norm

    def feature_costs(self, X: FloatArray) -> FloatArray:
        """``d_i`` for every row of ``X`` (shape ``(n, n_features)``)."""
        return self.cost.feature_costs(self.x0[None, :], np.atleast_2d(np.asarray(X, dtype=np.float64)))

    def total(self, X: FloatArray) -> FloatArray:
        """The norm of the change of each row."""
        return self.cost.combine(self.feature_costs(X))

    def to_objective(self, cost: float) -> float:
        """MILP objective value of a change of norm ``cost``."""
        return self.cost.to_objective(cost)

    def from_objective(self, obj: float) -> float:
        return self.cost.from_objective(obj)

    def box(self, cost: float) -> tuple[FloatArray, FloatArray]:
        """Per-feature value range a change of norm at most ``cost`` can reach (each ``d_i <= cost``)."""
        return self.cost.box(self.x0, cost)

    # -- MILP ------------------------------------------------------------------------------

    def level_costs(self, dom: NumericDomain) -> FloatArray:
        X = np.tile(self.x0, (dom.levels.shape[0], 1))
        X[:, dom.index] = dom.levels
        d = self.feature_costs(X)[:, dom.index]
        return d * d if self.norm == Norm.L2 else d

    def feature_expr(self, dom: Domain) -> LinExpr:
        """This feature's contribution to the objective, exact at every level."""
        i = dom.index
        if isinstance(dom, FixedDomain):
            X = self.x0.copy()
            X[i] = dom.value
            d = float(self.feature_costs(X[None, :])[0, i])
            return LinExpr.constant(d * d if self.norm == Norm.L2 else d)
        if isinstance(dom, CategoricalDomain):
            cost = np.where(dom.codes == dom.x0_code, 0.0, self.cost.change_cost(i))
            return LinExpr(0.0, [int(c) for c in dom.nu], [float(v) for v in cost])
        if self.norm == Norm.L0:
            return float(self.cost.w_up[i]) * dom.increase_expr() + float(self.cost.w_down[i]) * dom.decrease_expr()
        phi = self.level_costs(dom)
        return LinExpr(float(phi[0]), [int(c) for c in dom.mu], [float(v) for v in np.diff(phi)])

    def add_objective(self, domains: list[Domain], model: MilpModel) -> tuple[int, dict[int, tuple[int, LinExpr]]]:
        """Objective terms: one column ``z_i`` per feature that can still change, equal to its cost.

        Returns the linf epigraph column (or -1) and ``{feature: (z column, cost expression)}``;
        the leaf-cost cuts (``leafcuts.py``) bound the ``z_i`` from below.
        """
        exprs = [self.feature_expr(d) for d in domains]
        linf = self.norm == Norm.LINF
        fixed = [e.const for e in exprs if e.is_constant]
        t = -1
        if linf:
            t = int(model.add_cols(1, max(fixed + [0.0]), np.inf, cost=1.0, name="linf")[0])
        else:
            model.offset += float(sum(fixed))
        z: dict[int, tuple[int, LinExpr]] = {}
        for d, e in zip(domains, exprs):
            if e.is_constant:
                continue
            col = int(model.add_cols(1, 0.0, np.inf, cost=0.0 if linf else 1.0, name="cost")[0])
            model.add_expr_row(e - LinExpr.var(col), 0.0, 0.0)
            if linf:
                model.add_expr_row(LinExpr.var(col) - LinExpr.var(t), -np.inf, 0.0)
            z[d.index] = (col, e)
        return t, z

    def axis_costs(self, i: int, values: FloatArray) -> FloatArray:
        """Objective-unit cost of giving numeric feature ``i`` each of ``values`` (others unchanged)."""
        return self.cost.axis_costs(i, float(self.x0[i]), values)

    def change_cost(self, i: int) -> float:
        """Objective-unit cost of changing categorical feature ``i``."""
        return self.cost.change_cost(i)


def feature_scales(scale: Scale | str | None | FloatArray, reference: FloatArray | None, names: Sequence[str],
                   categorical: npt.NDArray[np.bool_], used: npt.NDArray[np.bool_]) -> FloatArray:
    """Per-feature divisors: ``None`` (1), ``"std"``, ``"minmax"`` from reference rows (by the one rule of
    :func:`..change_cost.reference_spread`), or given numbers."""
    n = len(names)
    kind = Scale.parse(scale) if isinstance(scale, (str, Scale)) else None
    if scale is None or kind == Scale.NONE:
        s = np.ones(n)
    elif kind is not None:
        if reference is None or len(reference) == 0:
            raise InputDataError(f"scale={kind.word!r} needs reference data (the training rows) to compute it",
                                 "pass reference=X_train, or scale=None, or explicit per-feature scales")
        s = reference_spread(kind, np.asarray(reference, dtype=np.float64), names, used, categorical)
    else:
        s = parse_spreads(scale, names)
    return np.where(categorical, 1.0, s)
