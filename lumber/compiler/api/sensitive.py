"""``lumber.sensitive_tests``: where each case sits relative to the model's decision surface.

Loads any supported model, resolves the metric from a constraint file or
object and keyword options (keywords give defaults, constraints override),
runs the analysis (exact projection for a single tree; for an ensemble the
counterfactual MILP when available, else a verified upper bound labelled as
such), and verifies every witness point on the source model itself when a
model object with a scikit-learn style ``predict`` is given.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Sequence

import numpy as np

from lumber.ir import Constraints, Forest, InputDataError, Task
from lumber.passes.analyses.metrics import as_constraints, build_metric
from lumber.passes.analyses.sensitive_results import SensitiveResult
from lumber.passes.analyses.sensitive_tests import Goal, decision_labels, resolve_target
from lumber.passes.analyses.sensitive_tests import sensitive_tests as _analyse


def sensitive_tests(model: Any, X: Any, constraints: Any = None, norm: str = "l2", scale: Any = None,
                    reference: Any = None, *, weights: Any = None, frozen: Sequence[str] = (),
                    increase_only: Sequence[str] = (), decrease_only: Sequence[str] = (),
                    max_changes: int | None = None, target: Any = None, method: str = "auto",
                    verify: bool = True, **search: Any) -> SensitiveResult:
    """Sensitive tests of every row of ``X``.

    Parameters
    ----------
    model
        A fitted model object, a model file, or a :class:`~lumber.ir.Forest`.
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
    from lumber.compiler.frontends import load

    forest = load(model)
    cons = _constraints(constraints, forest)
    metric = build_metric(forest, cons, norm=norm, scale=scale, reference=reference, weights=weights,
                          frozen=frozen, increase_only=increase_only, decrease_only=decrease_only,
                          max_changes=max_changes)
    goal = _goal(forest, cons, target)
    result = _analyse(forest, X, metric, goal, method=method, **search)
    result.rows = np.arange(len(result))
    if forest.schema.task == Task.REGRESSION:
        result.predictions = forest.predict(result.X)
    if verify and not isinstance(model, (Forest, str, Path)):
        _verify_on_source(model, result, goal)
    return result


def _constraints(constraints: Any, forest: Forest) -> Constraints:
    if isinstance(constraints, (str, Path)):
        from lumber.compiler.dsl import parse_constraints

        return parse_constraints(constraints, schema=forest.schema)
    return as_constraints(constraints)


def _goal(forest: Forest, cons: Constraints, target: Any) -> Goal:
    """Target from the constraints (which override keywords) or the keyword."""
    if cons.target is not None:
        target = cons.target.interval if cons.target.interval is not None else cons.target.label
    if forest.schema.task == Task.REGRESSION:
        if target is None:
            return Goal()
        try:
            lo, hi = (float(v) for v in target)
        except (TypeError, ValueError):
            raise InputDataError(f"target {target!r} is not an interval",
                                 "a regression model needs target=(lo, hi)") from None
        return Goal(interval=(lo, hi))
    if target is None:
        return Goal()
    return Goal(target=resolve_target(decision_labels(forest, Goal()), target))


def _verify_on_source(model: Any, result: SensitiveResult, goal: Goal) -> None:
    """Check every witness with the source model's own ``predict`` (scikit-learn style APIs)."""
    if not (hasattr(model, "predict") and hasattr(model, "fit")):
        return
    ok = np.flatnonzero(result.reachable)
    if ok.size == 0:
        return
    P: Any = result.point[ok]
    names = getattr(model, "feature_names_in_", None)
    if names is not None:
        import pandas as pd

        P = pd.DataFrame(P, columns=list(names))
    pred = np.asarray(model.predict(P))
    labels = result.group_labels
    if goal.interval is not None:
        lo, hi = goal.interval
        got = ((pred.reshape(-1) >= lo) & (pred.reshape(-1) <= hi)).astype(np.int64)
        match = got == result.target_group[ok]
    else:
        expected = np.asarray(labels, dtype=object)[result.target_group[ok]]
        match = np.array([p == e or str(p) == str(e) for p, e in zip(pred.tolist(), expected.tolist())])
    result.verified[ok] &= match
    for i in ok[~match]:
        result.messages[int(i)] = "witness point NOT confirmed by the source model's predict"


__all__ = ["sensitive_tests"]
