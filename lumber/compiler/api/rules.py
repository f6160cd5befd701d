"""``lumber.counterfactual_rules``: local and regional counterfactual rules (Amoukou and Brunel).

Where the MILP gives one optimal point, rules give ranges over a few features
that change the decision with high probability, robust to an imprecise
implementation, and shared recourse for groups of cases.

This module does the model-facing work: it loads the explained model, fits
the surrogate random forest on the model's own decisions (or uses the model
when it is a random forest), fits the isolation forest that scores samples,
and checks samples on the source model object. The algorithm lives in
``lumber.passes.analyses.rules``.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

import numpy as np
import numpy.typing as npt
from joblib import Parallel, delayed

from lumber.compiler.explain import (
    ConstraintsLike, ExplanationRequest, explainer_options, explanation_request, source_predictor, warn_positional,
)
from lumber.ir.domains import domains_for
from lumber.ir import (
    ArrayLike, CasesLike, CompileError, Feature, Forest, InputDataError, ModelLike, TargetLike, UnsupportedModelError,
)
from lumber.passes.analyses.rules import (
    CounterfactualRule, CounterfactualSample, Region, RuleContext, RuleOptions, RuleSet,
    apply_regional, build_context, coverage, decisions, local_rules, regional_rules,
)
from lumber.passes.analyses.rules.cells import CellIndex
from lumber.passes.analyses.rules.targets import is_classifier
from lumber.backends.c.bitsets import BitsetCounts
from lumber.compiler.frontends import load
from .compile import compile as compile_forest

FloatArray = npt.NDArray[np.float64]

RANDOM_FORESTS = ("RandomForestClassifier", "RandomForestRegressor", "ExtraTreesClassifier", "ExtraTreesRegressor")

COMPILE_AFTER = 20_000
"""Rows a forest is evaluated on by the interpreter before it is compiled to C (see :class:`Margins`)."""

LARGE_TRAINING = 10_000
"""Training rows from which queries are sure to be large (rules score points built from the training
values): the compiles then start 4x earlier (:func:`native_after`)."""

COUNT_AFTER = 1 << 24
"""Bitset words the estimators AND with numpy before the C kernel is built (see :class:`CellCounts`;
~0.3 s of numpy work, about the build's time)."""


def native_after(after: int, training_rows: int) -> int:
    """The work after which a native stand-in is built: ``after``, a quarter of it for a large
    training set (on Adult the interpreter's first 20k rows cost ~0.9 s, the C library 0.02 s)."""
    return after // 4 if training_rows >= LARGE_TRAINING else after


class NativeLater:
    """A native (compiled) stand-in for a slower exact path, built once ``after`` units of work were
    done without it, so small jobs never pay the compiler.

    With ``background`` the build runs in a thread: the compiler is a separate process, so on
    a machine with a spare core the caller keeps working on the slow path meanwhile and
    switches on its first call after the build finished. A build that fails for want of a
    working compiler (``CompileError``, ``OSError``) leaves the slow path for good.
    """

    def __init__(self, build: Callable[[], Any], after: int, background: bool = True) -> None:
        self.build = build
        self.after = after
        self.background = background
        self.work = 0
        self.native: Any = None
        self.failed = False
        self._thread: threading.Thread | None = None
        self._outcome: list[Any] = []

    def get(self, work: int) -> Any:
        """Record ``work`` more units; the native object when it is ready, else None."""
        self.work += work
        if self.native is None and not self.failed and self._thread is None and self.work > self.after:
            if self.background:
                self._thread = threading.Thread(target=self._run, name="lumber-native-build", daemon=True)
                self._thread.start()
            else:
                self._run()
                self._settle()
        if self._thread is not None and not self._thread.is_alive():
            self._settle()
        return self.native

    def wait(self) -> Any:
        """Wait for a started build; the native object (None: none started, or it failed)."""
        if self._thread is not None:
            self._thread.join()
            self._settle()
        return self.native

    def _run(self) -> None:
        try:
            self._outcome.append(("ok", self.build()))
        except (CompileError, OSError):
            self._outcome.append(("failed", None))
        except BaseException as exc:  # a bug: raised on the caller's side by _settle
            self._outcome.append(("error", exc))

    def _settle(self) -> None:
        self._thread = None
        if not self._outcome:
            return
        kind, value = self._outcome.pop()
        if kind == "error":
            self.failed = True
            raise value
        self.native = value
        self.failed = kind == "failed"


class _BuiltLater:
    """What :class:`Margins` and :class:`CellCounts` share: a :class:`NativeLater` and its state."""

    _native: NativeLater

    @property
    def native(self) -> Any:
        return self._native.native

    @property
    def failed(self) -> bool:
        return self._native.failed

    def wait(self) -> Any:
        """Wait for a build under way (tests); the native object or None."""
        return self._native.wait()


class Margins(_BuiltLater):
    """Raw margins of prepared rows: the interpreter first; once ``after`` rows were asked for, a
    compiled C library of the same forest (``lumber.compile``, the same numbers bit for bit).

    Rule construction scores hundreds of thousands of (case, value) points with the isolation
    forest and the explained model (regional queries most); the interpreter costs ~60 us a row
    for a 100-tree isolation forest, the library ~2 us, and compiling ~1-3 s, which small
    queries never pay. The compiler runs in the background (:class:`NativeLater`) while the
    interpreter goes on. Without a working C compiler the interpreter stays.
    """

    def __init__(self, forest: Forest, after: int = COMPILE_AFTER, background: bool = True) -> None:
        self.forest = forest
        self._native = NativeLater(self._compile, after, background)

    def _compile(self) -> Any:
        return compile_forest(self.forest, "c")

    def __call__(self, X: FloatArray) -> FloatArray:
        native = self._native.get(X.shape[0])
        if native is None or X.shape[0] == 0:
            return self.forest.evaluate(X)
        out = np.asarray(native.predict_raw(np.ascontiguousarray(X, dtype=np.float64)), dtype=np.float64)
        return out.reshape(-1) if self.forest.schema.n_outputs == 1 else out.reshape(X.shape[0], -1)


class CellCounts(_BuiltLater):
    """The rule estimators' cell counts (``cells.CellCounter``): numpy first; once ``after`` bitset
    words were AND-ed, the C kernel (``lumber.backends.c.bitsets``, the same integers), built in
    the background (:class:`NativeLater`).

    The Projected Forest counts every query's cell in every tree over all training rows; on
    Adult (34k rows) regional rules AND ~10 GB of bitsets, which numpy gathers into temporaries
    and counts in separate passes (~40M words/s), after walking every node of every tree for
    each query; the kernel walks only the reached nodes and streams the bitsets (~800M words/s).
    It builds in ~0.5 s, which small queries never pay. Without a working C compiler numpy stays.
    """

    def __init__(self, after: int = COUNT_AFTER, background: bool = True) -> None:
        self._native = NativeLater(_bitset_counts, after, background)

    def and_counts(self, bits: Any, keys: Any, start: Any, hit: Any) -> tuple[Any, Any] | None:
        native = self._native.get(int(keys.shape[0]) * int(bits.shape[1]))
        return None if native is None else native.and_counts(bits, keys, start, hit)  # type: ignore[no-any-return]

    def route_counts(self, cells: CellIndex, routes: Any, hit: Any) -> tuple[Any, Any, Any] | None:
        native = self._native.get(int(routes.shape[0]) * cells.n_trees * int(cells.bits.shape[1]))
        if native is None or cells.node_inner is None or cells.inner_seg is None:
            return None
        f = cells.forest
        return native.route_counts(routes, cells.node_inner, f.left, f.right, f.roots,  # type: ignore[no-any-return]
                                   cells.inner_seg, cells.rank, cells.seg_key, cells.n_keys, cells.bits, hit)


def _bitset_counts() -> Any:
    return BitsetCounts()


def counterfactual_rules(model: ModelLike | ExplanationRequest, X_train: ArrayLike,
                         x: CasesLike | Region | Sequence[Region | Mapping[str, Any]] | None = None,
                         target: TargetLike = None, constraints: ConstraintsLike = None, *,
                         features: Sequence[Feature] | None = None, options: RuleOptions | None = None,
                         n_jobs: int = 1, progress: Callable[[int], None] | None = None
                         ) -> CounterfactualRule | RuleSet:
    """Counterfactual rules for a case, a batch of cases, or a region of cases.

    Parameters
    ----------
    model
        The explained model: a fitted object, a model file, a :class:`~lumber.ir.Forest`, or an
        :class:`~lumber.compiler.explain.ExplanationRequest` (its constraints and target win).
    X_train
        Training rows (array or DataFrame with the model's feature columns). The
        estimators weigh these rows; samples take their values from them.
    x
        One case (1-D array, Series or ``{feature: value}``) -> a
        :class:`CounterfactualRule`; several cases (2-D array or DataFrame) -> a
        :class:`RuleSet`; a region (:class:`Region`, ``{feature: (a, b)}`` with
        ``None`` for an open end, or a list of them) -> regional rules.
    target
        A class label (or several), ``(a, b)`` for a regressor, or None (any
        other class than the case's, or than the region's majority). A target in
        the constraints overrides it.
    constraints
        A :class:`~lumber.ir.Constraints`, a constraint file or text, or a mapping
        (``{"immutable": [...], "increase": [...], "bounds": {...}}``): immutable
        features never enter a rule, directions and bounds clip the boxes,
        ``changes <= k`` caps the size of S.
    features
        Feature kinds and category labels for models that record none (scikit-learn).
    options
        A :class:`RuleOptions`: the estimators (surrogate forest, isolation forest and its contamination),
        the search (``pi``, ``pi_c``, ``k``, ``k_max``, ranking, fallback, widening, robust search) and the
        samples; ``RuleOptions.paper()`` is the paper's protocol.
    n_jobs
        Worker processes for several cases (each fits the same estimators: the results do not depend on it).
    progress
        Called with 1 as each case's search ends (local rules).
    """
    if x is None:
        raise InputDataError("no case or region to explain", "pass x= one case, several cases or a region")
    explainer = RuleExplainer(model, X_train, constraints, features=features, options=options)
    regions = _as_regions(explainer.forest, x)
    if regions is not None:
        rs = explainer.regional(regions[0], target)
        return rs[0] if not regions[1] else rs
    warn_positional(model, explainer.forest, x, "x")
    single, X = _as_cases(explainer.forest, x)
    n = len(X)
    if n_jobs == 1 or n < 2:
        rs = explainer.local(X, target, progress=progress)
        return rs[0] if single else rs
    rows = X.iloc if hasattr(X, "iloc") else np.asarray(X)
    chunks = [c for c in np.array_split(np.arange(n), min(n, max(1, abs(n_jobs)) * 4)) if c.size]
    job = _RulesJob(explainer.request, X_train, constraints, features, explainer.options, target)
    parts = []
    for part in Parallel(n_jobs=n_jobs, return_as="generator")(delayed(job)(rows[c], c) for c in chunks):
        parts.append(part)
        if progress is not None:
            progress(len(part))
    return RuleSet([r for p in parts for r in p], info=parts[0].info)


@dataclass(frozen=True)
class _RulesJob:
    """Local rules of a chunk of cases in a worker process, with the estimators fitted there (same seed,
    same estimators); ``rows`` key each case's random stream, so results do not depend on the chunking."""

    request: Any
    X_train: Any
    constraints: Any
    features: Any
    options: RuleOptions
    target: Any

    def __call__(self, X: Any, rows: Any) -> RuleSet:
        ex = RuleExplainer(self.request, self.X_train, self.constraints, features=self.features, options=self.options)
        return ex.local(X, self.target, rows=rows)


class RuleExplainer:
    """Everything fitted once per model and training set; explain many cases and regions with it."""

    def __init__(self, model: ModelLike | ExplanationRequest, X_train: ArrayLike, constraints: ConstraintsLike = None,
                 *, features: Sequence[Feature] | None = None, options: RuleOptions | None = None) -> None:
        opts = explainer_options(options, RuleOptions, "lumber.counterfactual_rules")
        self.options = opts.check()
        self.request = explanation_request(model, constraints=constraints, features=features,
                                           verify=opts.verify_with_model)
        self.forest: Forest = self.request.forest
        if self.forest.schema.task.name == "ANOMALY":
            raise UnsupportedModelError("counterfactual rules explain classifiers and regressors, not anomaly scores")
        self.constraints = self.request.constraints
        warn_positional(model, self.forest, X_train, "X_train")
        X_raw = self.forest.prepare_input(X_train)
        if X_raw.shape[0] < 2:
            raise InputDataError("X_train needs at least 2 rows", "counterfactual rules estimate from training rows")
        train_dec = decisions(self.forest, X_raw)
        self.rule_forest, self.surrogate_kind = self._rule_forest(opts.surrogate, X_raw, train_dec, opts.n_estimators,
                                                                  opts.max_depth, opts.seed)
        self.isolation = _isolation(opts.isolation, self.forest, X_raw, opts.seed, opts.contamination)
        n = int(X_raw.shape[0])
        self._iso_margins = Margins(self.isolation[0], native_after(COMPILE_AFTER, n))
        self.context: RuleContext = build_context(self.forest, self.rule_forest, X_raw, constraints=self.constraints,
                                                  score=self.inlier_score, options=self.options,
                                                  margins=Margins(self.forest, native_after(COMPILE_AFTER, n)),
                                                  domains=domains_for(self.forest, self.constraints, X_raw),
                                                  cell_counts=CellCounts(native_after(COUNT_AFTER, n)))
        self.fidelity = _fidelity(self.forest, self.rule_forest, X_raw, train_dec)
        self.verify = opts.verify_with_model

    @property
    def model(self) -> Any:
        """The explained model as given; setting it re-targets the source-model check."""
        return self.request.model

    @model.setter
    def model(self, model: Any) -> None:
        self.request = self.request.with_(model=model, predictor=source_predictor(model, self.forest)
                                          if self.request.predictor is not None else None)

    # -- set-up ----------------------------------------------------------------------------

    def _rule_forest(self, surrogate: Any, X: FloatArray, dec: FloatArray, n_estimators: int,
                     max_depth: int | None, seed: int) -> tuple[Forest, str]:
        f = self.forest
        is_rf = f.schema.average and f.schema.source.get("model_type", "") in RANDOM_FORESTS
        if surrogate is None or (isinstance(surrogate, str) and surrogate == "auto"):
            surrogate = "model" if is_rf and not f.is_categorical.any() else "fit"
        if isinstance(surrogate, str) and surrogate == "model":
            return f, "model"
        if isinstance(surrogate, str) and surrogate == "fit":
            return fit_surrogate(f, X, dec, n_estimators=n_estimators, max_depth=max_depth, seed=seed), "fitted"
        if isinstance(surrogate, str) and not Path(surrogate).exists():
            raise InputDataError(f"surrogate={surrogate!r} is not understood",
                                 "use None/'auto', 'fit', 'model', a random forest object, or a model file")
        rf = load(surrogate)
        if rf.schema.feature_names != f.schema.feature_names:
            if rf.n_features != f.n_features:
                raise InputDataError(f"the surrogate reads {rf.n_features} features, the model {f.n_features}")
            rf = rf.replace(schema=rf.schema.with_(features=f.schema.features))
        return rf, "given"

    def inlier_score(self, X: FloatArray) -> FloatArray:
        """Isolation-forest ``decision_function`` (>= 0: inlier), NaN replaced by training medians."""
        iso, medians = self.isolation
        Xc = np.where(np.isnan(X), medians[None, :], X)
        s = iso.schema
        return np.asarray(s.transform(self._iso_margins(Xc)) - s.isolation_offset, dtype=np.float64).reshape(-1)

    # -- queries ---------------------------------------------------------------------------

    def local(self, X: CasesLike, target: TargetLike = None, *, rows: Sequence[int] | None = None,
              progress: Callable[[int], None] | None = None) -> RuleSet:
        """Local rules (and samples) for every row of ``X``; ``progress(1)`` as each case's search ends."""
        rs = local_rules(self.context, X, self._target(target), rows=rows, progress=progress)
        if self.verify:
            checked = self._verify_many([(r, r.samples) for r in rs])
            for r, s in zip(rs, checked):
                r.samples = s
        rs.info.update(self.describe())
        return rs

    def regional(self, regions: Sequence[Region] | Region, target: TargetLike = None) -> RuleSet:
        """Regional rules for each region."""
        regs = [regions] if isinstance(regions, Region) else list(regions)
        bad = [i for i, r in enumerate(regs) if not isinstance(r, Region)]
        if bad:
            raise InputDataError(f"region {bad[0]} is a {type(regs[bad[0]]).__name__}, not a Region",
                                 "build regions with explainer.region({'feature': (lo, hi), ...}) or Region.from_bounds")
        rs = regional_rules(self.context, regs, self._target(target))
        rs.info.update(self.describe())
        return rs

    def apply(self, result: CounterfactualRule, X: Any, *, n_samples: int = 1,
              key: int = 0) -> list[tuple[CounterfactualSample, ...]]:
        """Samples for cases of ``X`` from a regional result's rules, checked like local samples."""
        out = apply_regional(self.context, result, X, n_samples=n_samples, key=key)
        return self._verify_many([(result, s) for s in out]) if self.verify else out

    def coverage(self, results: RuleSet | Sequence[CounterfactualRule], X: Any) -> float:
        """Share of rows of ``X`` lying in a region whose regional rule was found."""
        Xr = self.rule_forest.prepare_input(X)
        return coverage(list(results), Xr, self.forest.schema)

    def region(self, bounds: Mapping[str, tuple[float | None, float | None]], name: str = "") -> Region:
        return Region.from_bounds(self.forest.schema, bounds, name)

    def _target(self, target: Any) -> Any:
        """The constraints' target when they state one, else the call's."""
        return self.request.target if self.request.target is not None else target

    def describe(self) -> dict[str, Any]:
        rf = self.rule_forest
        return {"surrogate": self.surrogate_kind, "surrogate_fidelity": self.fidelity,
                "rule_forest_trees": rf.n_trees, "rule_forest_max_depth": rf.max_depth}

    def _verify_many(self, groups: Sequence[tuple[CounterfactualRule, Sequence[CounterfactualSample]]]
                     ) -> list[tuple[CounterfactualSample, ...]]:
        """AND each sample's check with the source model's own ``predict`` (one call for all)."""
        predictor = self.request.predictor
        flat = [(g, s) for g, (_, ss) in enumerate(groups) for s in ss]
        if not flat or predictor is None:
            return [tuple(ss) for _, ss in groups]
        pred = np.asarray(predictor(np.stack([s.x for _, s in flat]))).reshape(-1)
        out: list[list[CounterfactualSample]] = [[] for _ in groups]
        for (g, s), p in zip(flat, pred):
            ok = bool(groups[g][0].target.satisfied(np.asarray([p]))[0])
            out[g].append(replace(s, verified=bool(s.verified and ok)))
        return [tuple(o) for o in out]


# -- helpers -----------------------------------------------------------------------------------

def fit_surrogate(forest: Forest, X: FloatArray, dec: FloatArray, *, n_estimators: int = 20,
                  max_depth: int | None = 10, seed: int = 0) -> Forest:
    """A scikit-learn random forest fitted to the explained model's decisions, lowered to a Forest."""
    from sklearn.ensemble import RandomForestClassifier, RandomForestRegressor

    if is_classifier(forest):
        rf: Any = RandomForestClassifier(n_estimators=n_estimators, max_depth=max_depth, random_state=seed, n_jobs=1)
        rf.fit(X, dec.astype(np.int64))
    else:
        rf = RandomForestRegressor(n_estimators=n_estimators, max_depth=max_depth, random_state=seed, n_jobs=1)
        rf.fit(X, dec)
    lowered = load(rf, feature_names=forest.schema.feature_names)
    return lowered.replace(schema=lowered.schema.with_(features=forest.schema.features))


def _fidelity(model: Forest, rule_forest: Forest, X: FloatArray, dec: FloatArray) -> float:
    """How well the rule forest reproduces the model on the training rows (accuracy or R^2)."""
    if rule_forest is model:
        return 1.0
    if is_classifier(model):
        p = rule_forest.predict_proba(X)
        return float((np.argmax(p, axis=1) == dec).mean())
    pred = np.asarray(rule_forest.predict(X), dtype=np.float64).reshape(-1)
    var = float(np.var(dec))
    return float(1.0 - np.mean((pred - dec) ** 2) / var) if var > 0 else 1.0


def _isolation(isolation: Any, forest: Forest, X: FloatArray, seed: int,
               contamination: float | str = 0.1) -> tuple[Forest, FloatArray]:
    medians = np.nanmedian(np.where(np.isfinite(X), X, np.nan), axis=0)
    medians = np.where(np.isnan(medians), 0.0, medians)
    if isolation is None:
        from sklearn.ensemble import IsolationForest

        isolation = IsolationForest(contamination=contamination, random_state=seed).fit(
            np.where(np.isnan(X), medians[None, :], X))
    iso = load(isolation, feature_names=forest.schema.feature_names) if not isinstance(isolation, Forest) else isolation
    if iso.schema.task.name != "ANOMALY" or iso.n_features != forest.n_features:
        raise InputDataError("isolation must be an IsolationForest over the model's features")
    return iso, medians


def _as_regions(forest: Forest, x: Any) -> tuple[list[Region], bool] | None:
    """Regions from ``x`` when it describes some: (regions, given as a list)."""
    if isinstance(x, Region):
        return [x], False
    if isinstance(x, Mapping) and x and all(isinstance(v, (tuple, list)) for v in x.values()):
        return [Region.from_bounds(forest.schema, x)], False
    if isinstance(x, (list, tuple)) and x and all(isinstance(r, (Region, Mapping)) for r in x):
        regs = [r if isinstance(r, Region) else Region.from_bounds(forest.schema, r) for r in x]
        return regs, True
    return None


def _as_cases(forest: Forest, x: Any) -> tuple[bool, Any]:
    """(single case?, 2-D cases) from a row, a mapping, a Series, an array or a DataFrame."""
    if isinstance(x, Mapping):
        import pandas as pd

        missing = [n for n in forest.schema.feature_names if n not in x]
        if missing:
            raise InputDataError(f"the case lacks feature(s): {', '.join(missing[:6])}")
        return True, pd.DataFrame([{n: x[n] for n in forest.schema.feature_names}])
    if hasattr(x, "to_frame") and hasattr(x, "index") and not hasattr(x, "columns"):
        return True, x.to_frame().T
    if hasattr(x, "columns"):
        return False, x
    arr = np.asarray(x)
    if arr.ndim == 1:
        return True, arr.reshape(1, -1)
    return False, arr


__all__ = ["RuleExplainer", "RuleOptions", "counterfactual_rules", "fit_surrogate"]
