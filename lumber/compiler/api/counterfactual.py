"""``lumber.counterfactual``: the cheapest change of a case that the model really accepts, proven optimal.

Resolves the request once (:func:`lumber.compiler.explain.explanation_request`:
the model, constraints from any accepted form -- keywords give defaults, the
constraints' ``norm``/``scale``/``target`` override them -- and reference rows),
fits the isolation forest a ``plausible`` constraint asks for, and solves one
MILP per case (:func:`lumber.passes.analyses.counterfactual.solve_counterfactual`).
Every returned point is verified with the source model's own ``predict``
(:class:`~lumber.compiler.explain.SourcePredictor`, boosters included) when a
model object is given, else with the lowered Forest; batches run in parallel
with joblib, one solver thread per worker.
"""

from __future__ import annotations

import numbers
import warnings
from typing import Any, Callable, Sequence

import numpy as np
import numpy.typing as npt

from lumber.compiler.explain import (
    ConstraintsLike, ExplanationRequest, explanation_request, source_predictor, warn_positional,
)
from lumber.compiler.explain.request import ScaleLike
from lumber.ir import (
    ArrayLike, CasesLike, Constraints, Feature, Forest, InputDataError, ModelLike, Norm, TargetLike, Task, WeightsLike,
)
from lumber.ir.domains import Domains
from lumber.passes.analyses.counterfactual import CounterfactualResult, isolation_threshold, solve_counterfactual
from lumber.ir.decision import class_labels, resolve_target

FloatArray = npt.NDArray[np.float64]

ISOLATION_TREES = 25
ISOLATION_SAMPLES = 64
"""The isolation forest fitted when plausibility is asked for without one: small enough for HiGHS to
prove optimality in seconds (bench/counterfactual.py, section iso); pass ``isolation_forest=`` for another."""


def counterfactual(model: ModelLike | ExplanationRequest, x: CasesLike, target: TargetLike = None,
                   constraints: ConstraintsLike = None,
                   *, norm: str | Norm = "l1", scale: ScaleLike = None, reference: ArrayLike | None = None,
                   weights: WeightsLike = None,
                   features: Sequence[Feature] | None = None, isolation_forest: ModelLike | None = None,
                   contamination: float | None = None, k: int = 1, time_limit: float = 60.0,
                   backend: str = "highs", presolve: bool | None = None, threads: int = 1, mip_gap: float = 1e-6,
                   clip_to_reference: bool = False, n_jobs: int = 1, seed: int = 0,
                   verify_with_model: bool = True, domains: Domains | None = None,
                   progress: Callable[[int], None] | None = None
                   ) -> CounterfactualResult | list[CounterfactualResult]:
    """Optimal counterfactual explanation(s) of ``x`` under ``model``.

    Parameters
    ----------
    model
        A fitted model object (scikit-learn, LightGBM, XGBoost, ...), a model file, a Forest, or an
        :class:`~lumber.compiler.explain.ExplanationRequest` (its fields win over the keywords).
    x
        One case (1-D array, dict, Series, one-row DataFrame) -> one result; several rows
        (2-D array or DataFrame) -> a list of results, computed ``n_jobs`` at a time.
    target
        Class label to reach (default: any other class), or ``(lo, hi)`` for a regressor.
    constraints
        A :class:`~lumber.ir.Constraints`, a mapping for ``Constraints.from_mapping``, or a
        constraint file / text (``lumber.parse_constraints``). Its norm, scale and target win.
    norm, scale, weights
        ``"l0" | "l1" | "l2" | "linf"``; ``None | "std" | "minmax"`` (from ``reference``) or
        per-feature numbers; per-feature weights (scalar, array or ``(down, up)``).
    reference
        Training rows: scaling statistics, the warm start, plausibility and ``clip_to_reference``.
    features
        Feature kinds and category labels for models that record none (scikit-learn), e.g.
        ``lumber.datasets.load("adult").features``.
    isolation_forest, contamination
        Plausibility: a fitted ``IsolationForest`` (or its Forest) trained on the target class,
        or None to fit one on the reference rows the model assigns to the target when the
        constraints ask for ``plausible isolation-forest`` or ``contamination`` is given.
    domains
        The values a person could give each feature (:class:`lumber.ir.domains.Domains`); by default
        inferred from the constraint file, the schema and ``reference`` (whole-number columns stay
        whole, 0/1 columns binary, values within the observed range unless the file widens it).
    k
        Number of diverse counterfactuals (``result.alternatives`` holds the extra ones).
    time_limit, backend, presolve, threads, mip_gap
        Solver options (per case). ``backend`` is ``"highs"`` (highspy) or ``"scipy"``.

    progress
        Called with the number of cases just finished, as they finish (a progress bar's ``update``).

    Returns
    -------
    CounterfactualResult or list of them
        ``.x``, ``.cost``, ``.changes``, ``.status``, ``.verified``, ``.gap``, ``.to_dict()``.
    """
    if not isinstance(time_limit, numbers.Real) or not time_limit > 0:  # NaN fails the comparison too
        raise InputDataError(f"time_limit must be a number of seconds above 0, got {time_limit!r}",
                             "it bounds each case's whole query; math.inf: no limit")
    req = explanation_request(model, constraints=constraints, target=target, norm=norm, scale=scale,
                              reference=reference, features=features, verify=verify_with_model)
    forest, cons, R, verifier, target = req.forest, req.constraints, req.reference, req.predictor, req.target
    warn_positional(model, forest, x, "x")
    X, single = _rows(x, forest)
    iso = _plausibility(forest, cons, isolation_forest, contamination, R, target, X, seed)
    kw: dict[str, Any] = dict(
        norm=req.norm_or(Norm.L1), scale=req.scale, weights=weights, reference=R, k=k,
        time_limit=time_limit, backend=backend, presolve=presolve, threads=threads, mip_gap=mip_gap,
        clip_to_reference=clip_to_reference, domains=domains if domains is not None else req.domains)

    done = progress or (lambda n: None)

    def one(i: int) -> CounterfactualResult:
        r = solve_counterfactual(forest, X[i], target, cons, isolation=iso(X[i]), verifier=verifier, **kw)
        done(1)
        return r

    if single or n_jobs == 1 or len(X) < 2:
        results = [one(i) for i in range(len(X))]
    else:
        from joblib import Parallel, delayed

        kw["threads"] = 1
        chunks = np.array_split(np.arange(len(X)), min(len(X), max(1, abs(n_jobs)) * 4))
        results = []
        for part in Parallel(n_jobs=n_jobs, return_as="generator")(  # in order, each chunk as it finishes
                delayed(_batch)(forest, X[c], target, cons, iso, verifier, kw) for c in chunks if c.size):
            results += part
            done(len(part))
    return results[0] if single else results


def _batch(forest: Forest, X: FloatArray, target: Any, cons: Constraints | None, iso: Callable[[FloatArray], Any],
           verifier: Any, kw: dict[str, Any]) -> list[CounterfactualResult]:
    return [solve_counterfactual(forest, x, target, cons, isolation=iso(x), verifier=verifier, **kw) for x in X]


def _rows(x: Any, forest: Forest) -> tuple[FloatArray, bool]:
    """Cases as prepared rows, and whether a single case was given."""
    import pandas as pd

    if isinstance(x, dict):
        x = pd.DataFrame([x])
        return forest.prepare_input(x), True
    if isinstance(x, pd.Series):
        return forest.prepare_input(x.to_frame().T), True
    if isinstance(x, pd.DataFrame):
        return forest.prepare_input(x), len(x) == 1
    a = np.asarray(x)
    if a.ndim == 1:
        return forest.prepare_input(a.reshape(1, -1)), True
    return forest.prepare_input(a), False


def _plausibility(forest: Forest, cons: Constraints | None, isolation_forest: Any, contamination: float | None,
                  R: FloatArray | None, target: Any, X: FloatArray, seed: int) -> Callable[[FloatArray], Any]:
    """Per case: ``(isolation_forest_ir, delta)`` or None (plausibility depends on the case's target class)."""
    wanted = isolation_forest is not None or contamination is not None
    trees, samples = ISOLATION_TREES, ISOLATION_SAMPLES
    if cons is not None and cons.plausibility is not None:
        if cons.plausibility.method.replace("_", "-") != "isolation-forest":
            raise InputDataError(f"unknown plausibility method {cons.plausibility.method!r}",
                                 "accepted: isolation-forest(contamination=...)")
        wanted = True
        contamination = cons.plausibility.param("contamination", contamination)
        trees = int(cons.plausibility.param("n_estimators", trees))
        samples = cons.plausibility.param("max_samples", samples)
        seed = int(cons.plausibility.param("random_state", seed))
        if cons.target is not None:
            target = cons.target.label if cons.target.interval is None else cons.target.interval
    if not wanted:
        return lambda x: None
    if forest.schema.task not in (Task.BINARY, Task.MULTICLASS):
        raise InputDataError("isolation-forest plausibility needs a classifier (it is trained on the target class)")
    if R is None:
        raise InputDataError("plausibility needs reference rows (the training data) to calibrate on",
                             "pass reference=X_train")
    cont = 0.1 if contamination is None else float(contamination)
    labels = class_labels(forest)
    pred = forest.schema.class_index(forest.evaluate(R))
    cache: dict[int, Any] = {}

    def for_class(c: int) -> Any:
        """The isolation forest of class index ``c`` (labels as the user writes them -- "1" on a command
        line, 1 in Python -- are resolved to the index first)."""
        if c not in cache:
            rows = R[pred == c]
            if len(rows) < 2:
                raise InputDataError(f"too few reference rows of class {labels[c]!r} for an isolation forest",
                                     f"{len(rows)} of {len(R)} reference rows are predicted {labels[c]!r}")
            iso = isolation_forest
            if iso is None:
                from sklearn.ensemble import IsolationForest

                n = min(samples, len(rows)) if isinstance(samples, int) else float(samples)  # a fraction
                iso = IsolationForest(n_estimators=trees, max_samples=n, random_state=seed).fit(rows)
            from lumber.compiler.frontends import load

            with warnings.catch_warnings():
                warnings.simplefilter("ignore", UserWarning)
                iso_f = load(iso)
            if iso_f.n_features != forest.n_features:
                raise InputDataError("the isolation forest reads a different number of features than the model")
            cache[c] = (iso_f, isolation_threshold(iso_f, rows, cont))
        return cache[c]

    wanted_class = None
    if target is not None:
        ts = resolve_target(forest, target, explainer="plausibility")
        if ts.classes is None or len(ts.classes) != 1:
            raise InputDataError("plausibility is trained on one target class", "pass one target class label")
        wanted_class = int(ts.classes[0])

    def per_case(x: FloatArray) -> Any:
        if wanted_class is not None:
            return for_class(wanted_class)
        if len(labels) != 2:
            raise InputDataError("plausibility on a multiclass model needs an explicit target class")
        cur = int(forest.schema.class_index(forest.evaluate(x[None, :]))[0])
        return for_class(1 - cur)

    return per_case


library_verifier = source_predictor
"""``f(X) -> predictions`` of the source model itself, or None for a Forest or a file (kept name)."""


__all__ = ["ExplanationRequest", "counterfactual", "library_verifier"]
