"""``lumber.sensitive_tests``: where each case sits relative to the model's decision surface.

Loads any supported model, resolves the metric from a constraint file or
object and keyword options (keywords give defaults, constraints override),
runs the analysis (exact projection for a single tree; for an ensemble the
counterfactual MILP when available, else a verified upper bound labelled as
such), and verifies every witness point on the source model itself when a
model object is given (:class:`~lumber.compiler.explain.SourcePredictor`:
scikit-learn style estimators and raw LightGBM / XGBoost boosters alike).
"""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from lumber.compiler.explain import (
    ConstraintsLike, ExplanationRequest, SourcePredictor, explanation_request, warn_positional,
)
from lumber.compiler.explain.request import ScaleLike
from lumber.ir import ArrayLike, InputDataError, ModelLike, Norm, Target, TargetLike, Task, WeightsLike
from lumber.ir.display import Display
from lumber.passes.analyses.metrics import build_metric
from lumber.passes.analyses.sensitive_results import SensitiveResult
from lumber.passes.analyses.sensitive import sensitive_tests as _analyse


def sensitive_tests(model: ModelLike | ExplanationRequest, X: ArrayLike, constraints: ConstraintsLike = None,
                    norm: str | Norm = "l2", scale: ScaleLike = None, reference: ArrayLike | None = None, *,
                    weights: WeightsLike = None, frozen: Sequence[str] = (),
                    increase_only: Sequence[str] = (), decrease_only: Sequence[str] = (),
                    max_changes: int | None = None, target: TargetLike = None, method: str = "auto",
                    verify: bool = True, **search: Any) -> SensitiveResult:
    """Sensitive tests of every row of ``X``.

    Parameters
    ----------
    model
        A fitted model object, a model file, a :class:`~lumber.ir.Forest`, or an
        :class:`~lumber.compiler.explain.ExplanationRequest` (its fields win over the keywords).
    X
        Cases (array or DataFrame with the model's feature columns).
    constraints
        A :class:`~lumber.ir.Constraints`, a constraint file or text
        (``lumber.parse_constraints``), or a plain mapping
        (``{"immutable": [...], "increase": [...], "cost": {...}, "bounds": {...}}``).
    norm, scale, reference
        ``"l1"``, ``"l2"`` or ``"linf"``; ``None``/``"std"``/``"minmax"`` (statistics
        from ``reference`` rows) or explicit per-feature spreads.
    weights, frozen, increase_only, decrease_only, max_changes
        Per-feature weights (``{name: w}`` or ``{name: (w_down, w_up)}``) and restrictions.
    target
        A class label to reach (default: any other class); for a regressor the
        interval ``(lo, hi)`` whose membership is the decision explained.
    method
        ``"auto"``, ``"projection"`` (single trees), ``"milp"`` or ``"upper-bound"``.

    Returns
    -------
    SensitiveResult
        Per case (``result[i]``): ``.distance``, ``.tests`` (most sensitive first),
        ``.point`` (verified witness), ``.trace``, ``.per_class`` (multiclass),
        ``.exact`` and ``.method``.
    """
    req = explanation_request(model, constraints=constraints, target=target, norm=norm, scale=scale,
                              reference=reference, verify=verify)
    forest = req.forest
    warn_positional(model, forest, X, "X")
    domains = search.pop("domains", None) or req.domains
    metric = build_metric(forest, req.rules, norm=req.norm_or(Norm.L2), scale=req.scale, reference=req.reference,
                          weights=weights, frozen=frozen, increase_only=increase_only, decrease_only=decrease_only,
                          max_changes=max_changes, domains=domains)
    goal = _goal(req)
    if forest.n_trees > 1 and method in ("auto", "milp") and domains is not None:
        search["domains"] = domains
    result = _analyse(forest, X, metric, goal, method=method, **search)
    result.display = Display(forest, domains)
    result.rows = np.arange(len(result))
    if forest.schema.task == Task.REGRESSION:
        result.predictions = forest.predict(result.X)
    if req.predictor is not None:
        _verify_on_source(req.predictor, result, goal)
    return result


def _goal(req: ExplanationRequest) -> Target:
    """The request's target (the constraints' own, else the keyword) as a decision index or interval."""
    if req.target is None:
        return Target()  # any other class; check_goal says what a regression model needs instead
    targets = req.target_set(explainer="sensitive tests")
    if targets.interval is not None:
        return Target(interval=targets.interval)
    assert targets.classes is not None
    if len(targets.classes) != 1:
        raise InputDataError(f"sensitive tests seek one target class, got {len(targets.classes)}",
                             "pass target= a single class label")
    return targets


def _verify_on_source(predictor: SourcePredictor, result: SensitiveResult, goal: Target) -> None:
    """AND every witness's check with the source model's own ``predict``."""
    ok = np.flatnonzero(result.reachable)
    if ok.size == 0:
        return
    pred = np.asarray(predictor(result.point[ok])).reshape(-1)
    labels = result.group_labels
    if goal.interval is not None:
        lo, hi = goal.interval
        v = pred.astype(np.float64)
        got = ((v >= lo) & (v <= hi)).astype(np.int64)
        match = got == result.target_group[ok]
    else:
        expected = np.asarray(labels, dtype=object)[result.target_group[ok]]
        match = np.array([p == e or str(p) == str(e) for p, e in zip(pred.tolist(), expected.tolist())])
    result.verified[ok] &= match
    for i in ok[~match]:
        result.messages[int(i)] = "witness point NOT confirmed by the source model's predict"


__all__ = ["sensitive_tests"]
