"""``lumber.counterfactual``: the cheapest change of a case that the model really accepts, proven optimal.

Loads any supported model, resolves constraints (an object, a mapping, or a
constraint file / text compiled against the model's schema; keywords give
defaults, the constraints' ``norm``/``scale``/``target`` override them),
fits the isolation forest a ``plausible`` constraint asks for, and solves one
MILP per case (:func:`lumber.passes.counterfactual.solve_counterfactual`).
Every returned point is verified with the source model's own ``predict``
when a model object is given (else with the lowered Forest); batches run in
parallel with joblib, one solver thread per worker.
"""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import Any, Callable, Sequence

import numpy as np
import numpy.typing as npt

from lumber.ir import Constraints, Feature, Forest, InputDataError, Task
from lumber.passes.counterfactual import CounterfactualResult, isolation_threshold, solve_counterfactual
from lumber.passes.counterfactual.targets import class_labels

FloatArray = npt.NDArray[np.float64]

ISOLATION_TREES = 25
ISOLATION_SAMPLES = 64
"""The isolation forest fitted when plausibility is asked for without one: small enough for HiGHS to
prove optimality in seconds (bench/counterfactual.py, section iso); pass ``isolation_forest=`` for another."""


def counterfactual(model: Any, x: Any, target: Any = None, constraints: Any = None, *, norm: str = "l1",
                   scale: Any = None, reference: Any = None, weights: Any = None,
                   features: Sequence[Feature] | None = None, isolation_forest: Any = None,
                   contamination: float | None = None, k: int = 1, time_limit: float = 60.0,
                   backend: str = "highs", presolve: bool | None = None, threads: int = 1, mip_gap: float = 1e-6,
                   clip_to_reference: bool = False, n_jobs: int = 1, seed: int = 0,
                   verify_with_model: bool = True) -> CounterfactualResult | list[CounterfactualResult]:
    """Optimal counterfactual explanation(s) of ``x`` under ``model``.

    Parameters
    ----------
    model
        A fitted model object (scikit-learn, LightGBM, XGBoost, ...), a model file, or a Forest.
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
    k
        Number of diverse counterfactuals (``result.alternatives`` holds the extra ones).
    time_limit, backend, presolve, threads, mip_gap
        Solver options (per case). ``backend`` is ``"highs"`` (highspy) or ``"scipy"``.

    Returns
    -------
    CounterfactualResult or list of them
        ``.x``, ``.cost``, ``.changes``, ``.status``, ``.verified``, ``.gap``, ``.to_dict()``.
    """
    from lumber.compiler.frontends import load

    forest = load(model)
    if features is not None:
        from lumber.compiler.dsl import refine_schema

        forest = forest.replace(schema=refine_schema(forest.schema, features))
    cons = _constraints(constraints, forest)
    X, single = _rows(x, forest)
    R = forest.prepare_input(reference) if reference is not None else None
    verifier = library_verifier(model, forest) if verify_with_model else None
    iso = _plausibility(forest, cons, isolation_forest, contamination, R, target, X, seed)
    kw = dict(norm=norm, scale=scale, weights=weights, reference=R, k=k, time_limit=time_limit, backend=backend,
              presolve=presolve, threads=threads, mip_gap=mip_gap, clip_to_reference=clip_to_reference)

    def one(i: int) -> CounterfactualResult:
        return solve_counterfactual(forest, X[i], target, cons, isolation=iso(X[i]), verifier=verifier, **kw)

    if single or n_jobs == 1 or len(X) < 2:
        results = [one(i) for i in range(len(X))]
    else:
        from joblib import Parallel, delayed

        kw["threads"] = 1
        chunks = np.array_split(np.arange(len(X)), min(len(X), max(1, abs(n_jobs)) * 4))
        parts = Parallel(n_jobs=n_jobs)(delayed(_batch)(forest, X[c], target, cons, iso, verifier, kw)
                                        for c in chunks if c.size)
        results = [r for p in parts for r in p]
    return results[0] if single else results


def _batch(forest: Forest, X: FloatArray, target: Any, cons: Constraints | None, iso: Callable[[FloatArray], Any],
           verifier: Any, kw: dict[str, Any]) -> list[CounterfactualResult]:
    return [solve_counterfactual(forest, x, target, cons, isolation=iso(x), verifier=verifier, **kw) for x in X]


def _constraints(constraints: Any, forest: Forest) -> Constraints | None:
    if constraints is None or isinstance(constraints, Constraints):
        return constraints
    if isinstance(constraints, (str, Path)):
        from lumber.compiler.dsl import parse_constraints

        return parse_constraints(constraints, schema=forest.schema)
    if isinstance(constraints, dict):
        try:
            return Constraints.from_mapping(constraints)
        except (KeyError, TypeError, ValueError) as exc:
            raise InputDataError(f"constraints mapping is malformed: {exc}",
                                 "keys: immutable, increase, decrease, bounds, cost, norm, scale, "
                                 "max_changes") from None
    raise InputDataError("constraints must be a lumber.Constraints, a mapping or a file, "
                         f"not {type(constraints).__name__}")


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
    if cons is not None and cons.plausibility is not None:
        if cons.plausibility.method.replace("_", "-") != "isolation-forest":
            raise InputDataError(f"unknown plausibility method {cons.plausibility.method!r}",
                                 "accepted: isolation-forest(contamination=...)")
        wanted = True
        contamination = cons.plausibility.param("contamination", contamination)
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
    pred = forest.schema.decide(forest.evaluate(R))
    cache: dict[Any, Any] = {}

    def for_class(label: Any) -> Any:
        if label not in cache:
            rows = R[np.asarray([p == label for p in pred])]
            if len(rows) < 2:
                raise InputDataError(f"too few reference rows of class {label!r} for an isolation forest")
            iso = isolation_forest
            if iso is None:
                from sklearn.ensemble import IsolationForest

                iso = IsolationForest(n_estimators=ISOLATION_TREES, max_samples=min(ISOLATION_SAMPLES, len(rows)),
                                      random_state=seed).fit(rows)
            from lumber.compiler.frontends import load

            with warnings.catch_warnings():
                warnings.simplefilter("ignore", UserWarning)
                iso_f = load(iso)
            if iso_f.n_features != forest.n_features:
                raise InputDataError("the isolation forest reads a different number of features than the model")
            cache[label] = (iso_f, isolation_threshold(iso_f, rows, cont))
        return cache[label]

    def per_case(x: FloatArray) -> Any:
        lab = target
        if lab is None:
            if len(labels) != 2:
                raise InputDataError("plausibility on a multiclass model needs an explicit target class")
            cur = forest.schema.decide(forest.evaluate(x[None, :]))[0]
            lab = labels[1] if cur == labels[0] else labels[0]
        return for_class(lab)

    return per_case


def library_verifier(model: Any, forest: Forest) -> Callable[[FloatArray], Any] | None:
    """``f(X) -> predictions`` of the source model itself, or None for a Forest or a file."""
    if isinstance(model, (Forest, str, Path)) or not hasattr(model, "predict"):
        return None
    return _LibraryPredict(model, forest)


class _LibraryPredict:
    """Calls the source model's ``predict`` on counterfactual rows (picklable for joblib workers)."""

    def __init__(self, model: Any, forest: Forest) -> None:
        self.model = model
        self.names = forest.schema.feature_names
        self.schema = forest.schema

    def __call__(self, X: FloatArray) -> Any:
        import pandas as pd

        m = self.model
        mod = type(m).__module__.split(".")[0]
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            if mod == "xgboost":  # numeric codes for categorical columns, as the model stores them
                import xgboost as xgb

                b = m.get_booster() if hasattr(m, "get_booster") else m
                dm = xgb.DMatrix(X, feature_names=b.feature_names, feature_types=b.feature_types,
                                 enable_categorical=True)
                if self.schema.task in (Task.BINARY, Task.MULTICLASS) or not hasattr(m, "predict"):
                    return self._from_scores(np.asarray(b.predict(dm)))
                return np.asarray(b.predict(dm))
            if mod == "lightgbm" and not hasattr(m, "classes_") and hasattr(m, "num_trees"):
                return self._from_scores(np.asarray(m.predict(X)))
            names = getattr(m, "feature_names_in_", None)
            data: Any = pd.DataFrame(X, columns=list(names)) if names is not None and mod != "lightgbm" else X
            return np.asarray(m.predict(data))

    def _from_scores(self, p: FloatArray) -> Any:
        """Booster outputs (probabilities or values) -> what ``predict`` of the sklearn wrapper returns."""
        s = self.schema
        if s.task not in (Task.BINARY, Task.MULTICLASS):
            return p.reshape(-1)
        idx = (p.reshape(-1) > 0.5).astype(np.int64) if p.ndim == 1 or p.shape[1] == 1 else np.argmax(p, axis=1)
        labels = list(s.classes) if s.classes is not None else list(range(max(2, s.n_outputs)))
        return np.asarray(labels, dtype=object)[idx]


__all__ = ["counterfactual", "library_verifier"]
