"""``lumber.counterfactual``: the cheapest change of a case that the model really accepts, proven optimal.

Resolves the request once (:func:`lumber.compiler.explain.explanation_request`:
the model, constraints from any accepted form -- keywords give defaults, the
constraints' ``norm``/``scale``/``target`` override them -- and reference rows),
fits the isolation forest a ``plausible`` constraint asks for, prepares the
reference rows once for the whole batch
(:class:`~lumber.passes.analyses.counterfactual.reference.Reference`), and
solves each case (:func:`lumber.passes.analyses.counterfactual.solve_counterfactual`)
with one :class:`CounterfactualOptions`. Every returned point is verified with
the source model's own ``predict`` (:class:`~lumber.compiler.explain.SourcePredictor`,
boosters included) when a model object is given, else with the lowered Forest
(in a batch: once per chunk for all its cases and points, :meth:`_Job.many`);
batches run in parallel with joblib, one solver thread per worker. Every case
gets an answer: a verified point (proven optimal, or at the time limit with a
proven bound and gap), or a proven ``infeasible`` that names the constraint
blocking it where one does alone (``result.blocking``).
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass, replace
from typing import Any, Callable, Sequence

import numpy as np
import numpy.typing as npt
from joblib import Parallel, delayed

from lumber.compiler.explain import (
    ConstraintsLike, ExplanationRequest, explainer_options, explanation_request, source_predictor, warn_positional,
)
from lumber.ir import ArrayLike, CasesLike, Constraints, Feature, Forest, InputDataError, ModelLike, Norm, TargetLike, Task
from lumber.passes.analyses.counterfactual import (
    CounterfactualOptions, CounterfactualResult, isolation_threshold, solve_counterfactual,
)
from lumber.passes.analyses.counterfactual.reference import DECIDE_FROM, Reference
from lumber.passes.analyses.counterfactual.solve import default_verifier
from lumber.ir.decision import class_labels, resolve_target

FloatArray = npt.NDArray[np.float64]

ISOLATION_TREES = 25
ISOLATION_SAMPLES = 64
"""The isolation forest fitted when plausibility is asked for without one: small enough for HiGHS to
prove optimality in seconds; pass ``CounterfactualOptions(isolation_forest=...)`` for another."""


def counterfactual(model: ModelLike | ExplanationRequest, x: CasesLike, target: TargetLike = None,
                   constraints: ConstraintsLike = None, *, reference: ArrayLike | None = None,
                   features: Sequence[Feature] | None = None, options: CounterfactualOptions | None = None,
                   n_jobs: int = 1, progress: Callable[[int], None] | None = None
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
        constraint file / text (``lumber.parse_constraints``). Its norm, scale, costs and target win
        over the options.
    reference
        Training rows: scaling statistics, the warm start, plausibility and ``clip_to_reference``.
    features
        Feature kinds and category labels for models that record none (scikit-learn), e.g.
        ``lumber.datasets.load("adult").features``.
    options
        A :class:`CounterfactualOptions` (norm, scale, weights, ``k`` diverse counterfactuals, domains,
        plausibility, time limit per case -- 30 s by default --, search strategy, HiGHS options).
        With ``isolation_forest`` or ``contamination`` set, or a ``plausible isolation-forest`` line in
        the constraints, every point must be plausible under an isolation forest trained on the target
        class (fitted on the reference rows the model assigns to it when none is given).
    n_jobs
        Worker processes for a batch (joblib; HiGHS runs on one thread in each).
    progress
        Called with the number of cases just finished, as they finish (a progress bar's ``update``).

    Returns
    -------
    CounterfactualResult or list of them
        ``.x``, ``.cost``, ``.changes``, ``.status``, ``.verified``, ``.gap``, ``.to_dict()``.
    """
    opts = explainer_options(options, CounterfactualOptions, "lumber.counterfactual")
    req = explanation_request(model, constraints=constraints, target=target, norm=opts.norm, scale=opts.scale,
                              reference=reference, features=features, verify=opts.verify_with_model)
    forest, cons, R, verifier, target = req.forest, req.constraints, req.reference, req.predictor, req.target
    warn_positional(model, forest, x, "x")
    X, single = _rows(x, forest)
    iso = _plausibility(forest, cons, opts.isolation_forest, opts.contamination, R, target, X, opts.seed)
    opts = replace(opts, norm=req.norm_or(Norm.L1).name.lower(), scale=req.scale,
                   domains=opts.domains if opts.domains is not None else req.domains,
                   isolation_forest=None, contamination=None)
    done = progress or (lambda n: None)
    job = _Job(forest, target, cons, Reference.of(forest, R, decide=len(X) >= DECIDE_FROM), verifier, opts)

    if single or len(X) < 2:
        results = [job.one(X[i], iso(X[i])) for i in range(len(X))]
        done(len(results))
    elif n_jobs == 1:
        isos = [iso(x) for x in X]
        results = []
        for c in np.array_split(np.arange(len(X)), -(-len(X) // CHUNK)):
            results += job.many(X[c], [isos[i] for i in c])
            done(len(c))
    else:
        job = replace(job, options=replace(opts, threads=1))
        isos = [iso(x) for x in X]
        chunks = np.array_split(np.arange(len(X)), min(len(X), max(1, abs(n_jobs)) * 4))
        results = []
        for part in Parallel(n_jobs=n_jobs, return_as="generator")(  # in order, each chunk as it finishes
                delayed(job.many)(X[c], [isos[i] for i in c]) for c in chunks if c.size):
            results += part
            done(len(part))
    return results[0] if single else results


CHUNK = 16
"""Cases per call of the source model's ``predict`` in a batch on one worker (:meth:`_Job.many`)."""


@dataclass(frozen=True)
class _Job:
    """What every case of a batch shares: the model, target, constraints, reference rows (prepared once,
    shipped to each worker) and options."""

    forest: Forest
    target: Any
    constraints: Constraints | None
    reference: Reference | None
    verifier: Any
    options: CounterfactualOptions

    def one(self, x: FloatArray, isolation: Any, verifier: Any = None) -> CounterfactualResult:
        return solve_counterfactual(self.forest, x, self.target, self.constraints, options=self.options,
                                    reference=self.reference, isolation=isolation,
                                    verifier=verifier or self.verifier)

    def many(self, X: FloatArray, isolations: Sequence[Any]) -> list[CounterfactualResult]:
        """Every case of a chunk. With a source model (a classifier), each query checks its points on the
        lowered Forest (the same decisions, bit for bit, at a fraction of a library call), then the source
        model's own ``predict`` confirms every case and every returned point in one call per chunk; a case
        where it decides otherwise anywhere is solved again with the source model checking each point."""
        if self.verifier is None or len(X) < 2 or self.forest.schema.task not in (Task.BINARY, Task.MULTICLASS):
            return [self.one(x, iso) for x, iso in zip(X, isolations)]
        fast = default_verifier(self.forest)
        results = [self.one(x, iso, fast) for x, iso in zip(X, isolations)]
        answers = [(i, a, a.x) for i, r in enumerate(results) for a in (r, *r.alternatives) if a.x is not None]
        before: npt.NDArray[Any] = np.asarray(self.verifier(X)).astype(object).reshape(-1)
        after: npt.NDArray[Any] = (np.asarray(self.verifier(np.stack([x for _, _, x in answers]))).astype(object)
                                   .reshape(-1) if answers else np.zeros(0, dtype=object))
        again = {i for i, r in enumerate(results)
                 if any(not _same(before[i], a.original_prediction) for a in (r, *r.alternatives))}
        again |= {i for (i, a, _), p in zip(answers, after) if not _same(p, a.prediction)}
        for i, r in enumerate(results):
            for a in (r, *r.alternatives):
                a.original_prediction = _plain_label(before[i])
        for (_, a, _), p in zip(answers, after):
            a.prediction = _plain_label(p)
        for i in sorted(again):
            results[i] = self.one(X[i], isolations[i])
        return results


def _same(a: Any, b: Any) -> bool:
    """Two predictions of one case agree (labels compared as values, or as text: ``1`` and ``"1"``)."""
    return bool(a == b) or str(a) == str(b)


def _plain_label(v: Any) -> Any:
    return v.item() if isinstance(v, np.generic) else v


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


__all__ = ["CounterfactualOptions", "ExplanationRequest", "counterfactual", "library_verifier"]
