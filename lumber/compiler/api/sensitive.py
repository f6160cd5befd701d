"""``lumber.sensitive_tests``: where each case sits relative to the model's decision surface.

Loads any supported model, resolves the request (constraints from a file or object, the reference rows,
the target) and a :class:`SensitiveOptions` (the options give defaults, the constraints' norm, scale and
costs override them), runs the ``sensitive-tests`` pass
(:class:`~lumber.passes.analyses.explainers.SensitiveTests`: exact projection for a single tree; for an
ensemble the counterfactual MILP when available, else a verified upper bound labelled as such) over the
rows, in ``n_jobs`` worker processes for many rows, and verifies every witness point on the source model
itself when a model object is given (:class:`~lumber.compiler.explain.SourcePredictor`: scikit-learn style
estimators and raw LightGBM / XGBoost boosters alike).
"""

from __future__ import annotations

from dataclasses import fields, replace
from typing import Sequence

import numpy as np
from joblib import Parallel, delayed

from lumber.compiler.explain import (
    ConstraintsLike, ExplanationRequest, SourcePredictor, explainer_options, explanation_request, warn_positional,
)
from lumber.ir import ArrayLike, Feature, InputDataError, ModelLike, Norm, Target, TargetLike, Task
from lumber.ir.display import Display
from lumber.passes.analyses.explainers import SensitiveTests
from lumber.passes.analyses.sensitive import SensitiveOptions
from lumber.passes.analyses.sensitive_results import SensitiveResult
from lumber.passes.base import PassData
from lumber.passes.manager import run_analysis


def sensitive_tests(model: ModelLike | ExplanationRequest, X: ArrayLike, constraints: ConstraintsLike = None, *,
                    target: TargetLike = None, reference: ArrayLike | None = None,
                    features: Sequence[Feature] | None = None, options: SensitiveOptions | None = None,
                    n_jobs: int = 1) -> SensitiveResult:
    """Sensitive tests of every row of ``X``.

    Parameters
    ----------
    model
        A fitted model object, a model file, a :class:`~lumber.ir.Forest`, or an
        :class:`~lumber.compiler.explain.ExplanationRequest` (its fields win over the keywords).
    X
        Cases (array or DataFrame with the model's feature columns).
    constraints
        A :class:`~lumber.ir.Constraints`, a constraint file or text (``lumber.parse_constraints``), or a
        plain mapping (``{"immutable": [...], "increase": [...], "cost": {...}, "bounds": {...},
        "max_changes": k}``). Its norm, scale, costs and target win over the options. Sensitive tests
        move each feature within its own rule: linear relations, implications and a plausibility
        requirement are not applied; they are listed in ``result.not_applied`` (with their lines), and
        distances and witnesses are those under the other constraints.
    target
        A class label to reach (default: any other class); for a regressor the
        interval ``(lo, hi)`` whose membership is the decision explained.
    reference
        Training rows: the statistics of ``scale="std"``/``"minmax"`` and the features' domains.
    features
        Feature kinds and category labels for models that record none (scikit-learn).
    options
        A :class:`SensitiveOptions` (norm -- l2 by default --, scale, weights, method, time limit per case
        -- 30 s --, the upper-bound search's effort, domains, checking on the source model).
    n_jobs
        Worker processes (joblib) for the rows of ``X``.

    Returns
    -------
    SensitiveResult
        Per case (``result[i]``): ``.distance``, ``.tests`` (most sensitive first),
        ``.point`` (verified witness), ``.trace``, ``.per_class`` (multiclass),
        ``.exact`` and ``.method``.
    """
    opts = explainer_options(options, SensitiveOptions, "lumber.sensitive_tests")
    req = explanation_request(model, constraints=constraints, target=target, norm=opts.norm, scale=opts.scale,
                              reference=reference, features=features, verify=opts.verify_with_model)
    forest = req.forest
    warn_positional(model, forest, X, "X")
    domains = opts.domains or req.domains
    resolved = replace(opts, norm=req.norm_or(Norm.L2).name.lower(), scale=req.scale, domains=domains)
    analysis = SensitiveTests(**{f.name: getattr(resolved, f.name) for f in fields(SensitiveOptions)})
    goal = _goal(req)
    data = {"constraints": req.constraints, "target": goal, "X_train": req.reference}
    n = len(X)  # type: ignore[arg-type]
    if n_jobs == 1 or n < 2:
        result = run_analysis(analysis, forest, PassData(cases=X, **data))
    else:  # the rows as given (a float32 model reports the user's own values), in chunks
        rows = X.iloc if hasattr(X, "iloc") else np.asarray(X)
        chunks = [c for c in np.array_split(np.arange(n), min(n, max(1, abs(n_jobs)) * 4)) if c.size]
        parts = Parallel(n_jobs=n_jobs)(delayed(run_analysis)(analysis, forest, PassData(cases=rows[c], **data))
                                        for c in chunks)
        result = SensitiveResult.concat(parts)
        result.not_applied = parts[0].not_applied
    result.display = Display(forest, domains)
    result.rows = np.arange(len(result))
    if forest.schema.task == Task.REGRESSION:
        result.predictions = forest.predict(result.X)
    if req.predictor is not None:
        _verify_on_source(req.predictor, result, goal)
    return result


def _goal(req: ExplanationRequest) -> Target:
    """The request's target (the constraints' own, else the keyword) as a decision index or interval."""
    t = req.target
    if t is None or (isinstance(t, Target) and t.label is None and t.interval is None and t.classes is None):
        return Target()  # any other class (by the forest's rule); check_goal says what a regressor needs instead
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


__all__ = ["SensitiveOptions", "sensitive_tests"]
