"""Sensitive tests of every row of a data set: the method picked for the model.

A single tree gets the exact projection (:mod:`.sensitive_tests`); an ensemble
the counterfactual MILP when available, else the labelled upper-bound search
(:mod:`.sensitive_ensemble`). Both build on the goals, decisions and checks in
:mod:`.sensitive_tests`; this module only chooses, so neither imports it.
"""

from __future__ import annotations

import numbers
from dataclasses import asdict, dataclass, field, replace
from typing import Any

import numpy as np
import numpy.typing as npt

from lumber.ir import Forest, InputDataError, Norm, Target, UnsupportedModelError
from lumber.ir.domains import Domains
from lumber.ir.interp import prepare_input

from .metrics import Metric, build_metric
from .sensitive_ensemble import SearchOptions, milp_sensitive, upper_bound_sensitive
from .sensitive_results import SensitiveResult
from .sensitive_tests import check_goal, exact_ensemble_solver, project_tree, verify

METHODS = ("auto", "projection", "milp", "upper-bound")


@dataclass(frozen=True, kw_only=True)
class SensitiveOptions:
    """Options of ``lumber.sensitive_tests`` (restrictions on the features are the constraints' job:
    ``immutable``, ``increase``, ``decrease``, bounds, costs, ``max_changes``)."""

    norm: str = "l2"
    """``"l1"``, ``"l2"`` or ``"linf"`` of the weighted, scaled change (a constraint file's ``norm`` wins)."""
    scale: Any = None
    """None, ``"std"``, ``"minmax"`` (statistics of the reference rows) or one number per feature / a mapping."""
    weights: Any = None
    """None, a scalar, one number per feature, ``(down, up)`` arrays, or ``{feature: w or (down, up)}``;
    finite and at least 0 (:func:`~lumber.passes.analyses.change_cost.parse_weights`). Constraint costs win."""
    method: str = "auto"
    """``"auto"`` (exact projection for a single tree, the MILP for an ensemble when available, else the
    labelled upper bound), ``"projection"``, ``"milp"`` or ``"upper-bound"``."""
    time_limit: float = 30.0
    """Seconds per case and target decision for the MILP and for the upper-bound search."""
    search: SearchOptions = field(default_factory=SearchOptions)
    """Effort of the upper-bound search (``lumber.passes.analyses.sensitive.SearchOptions``; its ``time_limit``
    is this object's)."""
    domains: Domains | None = None
    """The values each feature may take; None: from the schema, the constraints and the reference rows."""
    verify_with_model: bool = True
    """Check every witness with the source model's own ``predict`` (when a model object is explained)."""

    def __post_init__(self) -> None:
        Norm.parse(self.norm)  # raises on an unknown norm
        if self.method not in METHODS:
            raise InputDataError(f"unknown method {self.method!r}", f"accepted: {', '.join(METHODS)}")
        if not isinstance(self.time_limit, numbers.Real) or not self.time_limit > 0:
            raise InputDataError(f"time_limit must be a number of seconds above 0, got {self.time_limit!r}")
        if not isinstance(self.search, SearchOptions):
            raise InputDataError(f"search must be a SearchOptions, not {type(self.search).__name__}")


def sensitive_tests(forest: Forest, X: Any, metric: Metric | None = None, goal: Target = Target(), *,
                    method: str = "auto", time_limit: float = 30.0, search: SearchOptions | None = None,
                    domains: Domains | None = None) -> SensitiveResult:
    """Sensitive tests of every row of ``X`` (any input ``Forest.prepare_input`` accepts).

    ``method``: ``"auto"`` (exact projection for a single tree; the MILP for an
    ensemble when available, else the upper-bound search), ``"projection"``,
    ``"milp"`` or ``"upper-bound"``. ``time_limit``: seconds per case and target for the MILP and the
    upper-bound search; ``search``: the upper-bound search's effort; ``domains`` (the MILP's;
    :class:`lumber.ir.domains.Domains`: integer levels, resolutions, bounds).
    """
    search = replace(search or SearchOptions(), time_limit=time_limit)
    if method not in METHODS:
        raise InputDataError(f"unknown method {method!r}", f"accepted: {', '.join(METHODS)}")
    check_goal(forest, goal)
    Xp = forest.prepare_input(X)
    metric = metric if metric is not None else build_metric(forest)
    single = forest.n_trees == 1
    if method == "projection" and not single:
        raise UnsupportedModelError(
            f"projection is exact for single trees; this model has {forest.n_trees} trees",
            "use method='auto' (MILP when available, else the labelled upper bound) or 'upper-bound'")
    float32 = forest.schema.input_dtype != "float64"
    if single and method in ("auto", "projection"):
        result = project_tree(forest, Xp, metric, goal, check=not float32)
    else:
        solver = exact_ensemble_solver() if method in ("auto", "milp") else None
        if solver is not None:
            result = milp_sensitive(forest, Xp, metric, goal, solver, strict=method == "milp", time_limit=time_limit,
                                    fallback=search, **({} if domains is None else {"domains": domains}))
        elif method == "milp":
            raise UnsupportedModelError("the counterfactual MILP (lumber.passes.analyses.counterfactual) is not available",
                                        "use method='upper-bound'")
        else:
            # the search moves by the metric's kinds (integer, categorical), not by domains
            result = upper_bound_sensitive(forest, Xp, metric, goal, **asdict(search))
    if float32:
        _show_original_values(result, forest.schema.with_(input_dtype="float64"), X)
        verify(result, goal)
    return result


def _show_original_values(result: SensitiveResult, schema64: Any, X: Any) -> None:
    """Report the user's own values (not their float32 roundings) for features left unchanged.

    The model rounds them back identically, so the witnesses stay valid (re-verified next).
    """
    raw = prepare_input(schema64, X)
    Xp = result.X

    def merge(P: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
        same = (P == Xp) | (np.isnan(P) & np.isnan(Xp))
        return np.where(same, raw, P)

    result.point = np.where(result.reachable[:, None], merge(result.point), np.nan)
    if result.group_point is not None:
        result.group_point = np.stack([merge(result.group_point[:, g]) for g in range(result.group_point.shape[1])],
                                      axis=1)
    result.X = raw


__all__ = ["METHODS", "SearchOptions", "SensitiveOptions", "sensitive_tests"]
