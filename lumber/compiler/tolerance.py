"""``lumber.compile_within``: the fastest form whose validation loss stays within the tolerance.

Without a tolerance nothing lossy ever happens (:mod:`lumber.compiler.speed`
picks among exact forms). With one, the exact forms are measured beside
*tolerance forms*: prefixes of a formula-5 fit
(:mod:`lumber.passes.transforms.oblivious_fit`, fitted on the training rows
only), each behind the exact forest for rows near the decision
(:mod:`lumber.passes.transforms.cascade`). Every form is scored on the validation rows,
which the fit never read:

* loss: AUC drop for binary classifiers (``metric="accuracy"``: accuracy drop),
  relative RMSE rise for regressors (``lumber.passes.quality``);
* decision agreement with the source, share of rows on the exact path,
  max / mean |margin change|; ``agreement`` (default 1) is the share of validation
  rows whose decision must stay the source's: the cascade band is the narrowest
  that keeps it (below 1 the few disagreements farthest from the decision stay
  outside the band, which shrinks the exact path several-fold);
* CPU time on the validation rows, all forms interleaved.

A form is *within* the tolerance when its validation loss **and** the upper
:data:`LOSS_CONFIDENCE` bound of that loss over :data:`BOOTSTRAP_DRAWS` paired
bootstrap resamples of the validation rows (classes resampled apart) are at most
``tolerance`` (and its agreement at least ``agreement``). The point loss alone
is noise-bound: on credit's 6,000 validation rows the AUC drop of a cascade
that approximates half the rows has a bootstrap spread of 0.0025, five times a
0.0005 tolerance (a form at -0.0005 on validation lost +0.0019 on test rows).
A form accepted with the bound keeps its loss on new rows with about that
confidence; fewer validation rows widen the bound and fewer lossy forms pass.

The chosen form is the fastest one within the tolerance; ``predictor.report``
lists every form tried. The cascade's decisions equal the source's on at least
``agreement`` of the validation rows by construction of its band.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping

import numpy as np
import numpy.typing as npt

from lumber.ir import CompileError, Forest, InputDataError, ObliviousEnsemble, Task
from lumber.ir.interp import prepare_input

from lumber.passes.transforms.oblivious_fit import FitOptions, fit_oblivious

from lumber.ir.cascade import Band, Cascade, inside_band
from lumber.passes.transforms.cascade import cascade_margins, check_agreement, decision_band
from lumber.runtime.predictors import Predictor
from lumber.backends.base import fingerprint
from lumber.backends.table_c import TableRuntime
from lumber.passes.quality import make_metric
from lumber.passes.transforms.quantize import quantize_ensemble
from .speed import REPEATS, compile_fastest
from .targets import get_target
from .targets.c import FastestOptions
from .targets.cascade import build_cascade

EXACT_TABLES_MAX_LEAVES = 8_000
"""The exact oblivious form is tried only up to this many source leaves: beyond, re-composition takes
minutes and yields more tables than the forest has trees (``lumber compile --optimize speed`` without a
tolerance still tries it)."""
LOSS_CONFIDENCE = 0.95
"""A form's validation loss counts as its upper bound at this one-sided confidence (paired bootstrap)."""
BOOTSTRAP_DRAWS = 200
TREE_FRACTIONS = (0.25, 0.5, 1.0)
"""Prefixes of the fitted sequence offered as tolerance forms (fractions of its formula-5 optimum)..."""
TREE_COUNTS = (64, 128)
"""...and these short prefixes when the optimum is longer: a cascade's cost is its tables plus the exact-path
share times the forest, and the share falls slowly with trees (credit 500 x 63: 30% of rows at 100 trees, 27%
at 300), so the fastest form within the tolerance is often a short one."""


def tree_sizes(best_trees: int) -> list[int]:
    """The prefix lengths offered as tolerance forms for a fit whose formula-5 optimum is ``best_trees``."""
    if best_trees <= 0:
        return []
    return sorted({max(1, int(round(f * best_trees))) for f in TREE_FRACTIONS}
                  | {c for c in TREE_COUNTS if c < best_trees})


DEFAULT_FIT = FitOptions()


@dataclass(frozen=True)
class Split:
    X: npt.NDArray[np.float64]
    y: npt.NDArray[Any]


def _split(forest: Forest, data: Mapping[str, Any], key: str) -> Split:
    if key not in data or data[key] is None:
        raise CompileError(f"tolerance needs data[{key!r}]: (X, y) rows the translation "
                           f"{'is fitted on' if key == 'train' else 'is checked on (never fitted)'}",
                           'pass data={"train": (X, y), "valid": (Xv, yv)} (CLI: --train, --valid, --label)')
    item = data[key]
    if not isinstance(item, (tuple, list)) or len(item) != 2:
        raise CompileError(f"data[{key!r}] must be a pair (X, y)")
    X, y = item
    if y is None:
        raise CompileError(f"data[{key!r}] has no labels: the tolerance is a loss against labels",
                           "name the label column (CLI: --label COLUMN)")
    Xp = prepare_input(forest.schema, X)
    yv = np.asarray(y).reshape(-1)
    if yv.shape[0] != Xp.shape[0]:
        raise InputDataError(f"data[{key!r}]: {Xp.shape[0]} rows but {yv.shape[0]} labels")
    if Xp.shape[0] < 20:
        raise CompileError(f"data[{key!r}] has {Xp.shape[0]} rows; the tolerance check needs at least 20")
    return Split(Xp, yv)


def _cpu(fn: Any, X: npt.NDArray[Any]) -> float:
    t0 = time.process_time()
    fn(X)
    return time.process_time() - t0


def timed(runners: Mapping[str, Any], X: npt.NDArray[Any]) -> dict[str, float]:
    """Median process CPU seconds of each runner on ``X``, the runners interleaved."""
    times: dict[str, list[float]] = {k: [] for k in runners}
    for _ in range(REPEATS):
        for k, fn in runners.items():
            times[k].append(_cpu(fn, X))
    return {k: float(np.median(ts)) for k, ts in times.items()}


def _loss(metric: Any, ref: float, value: float) -> float:
    """Positive = worse: an absolute drop (AUC, accuracy) or a relative rise (RMSE)."""
    return ref - value if metric.higher_is_better else (value / ref - 1.0 if ref else value - ref)


def loss_bound(metric: Any, ref: npt.NDArray[np.float64], got: npt.NDArray[np.float64], *,
               draws: int = BOOTSTRAP_DRAWS, level: float = LOSS_CONFIDENCE, seed: int = 0) -> float:
    """Upper ``level`` quantile of the loss of margins ``got`` against ``ref`` over paired bootstrap resamples of
    the labelled rows (each class resampled to its own count, so AUC stays defined). The same seed draws the same
    resamples for every form, so forms are compared on the same rows."""
    ref, got = np.asarray(ref).reshape(-1), np.asarray(got).reshape(-1)
    if np.array_equal(ref, got):
        return 0.0
    rng = np.random.default_rng(seed)
    n = ref.shape[0]
    groups = [np.arange(n)] if metric.strata is None else [np.flatnonzero(metric.strata == c)
                                                            for c in np.unique(metric.strata)]
    losses = np.empty(draws)
    for b in range(draws):
        idx = np.concatenate([g[rng.integers(0, g.shape[0], g.shape[0])] for g in groups])
        m = metric.rows(idx)
        losses[b] = _loss(m, m(ref[idx]), m(got[idx]))
    return float(np.quantile(losses, level))


@dataclass
class PrefixForm:
    """A prefix of the fit scored as a tolerance form on the validation rows (the cascade for a classifier)."""

    ens: ObliviousEnsemble
    q: ObliviousEnsemble
    """Quantized tables (what the backends compile)."""
    rt: Any
    """Their runtime (:class:`lumber.backends.table_c.TableRuntime`)."""
    band: Band | None
    got: npt.NDArray[np.float64]
    """The form's margins on the validation rows."""
    share: float
    loss: float
    bound: float
    agree: float | None
    within: bool
    exact_raw: Any

    def tables(self, X: npt.NDArray[Any]) -> npt.NDArray[np.float64]:
        return self.rt.predict_raw(np.ascontiguousarray(X, dtype=self.rt.dtype))[:, 0]  # type: ignore[no-any-return]

    def run(self, X: npt.NDArray[Any]) -> None:
        """The form's work on ``X`` (tables, then the exact forest inside the band), for timing."""
        a = self.tables(X)
        if self.band is not None:
            inside = inside_band(a, self.band)
            if inside.any():
                self.exact_raw(X[inside])


def score_prefix(ens: ObliviousEnsemble, X: npt.NDArray[np.float64], ev: npt.NDArray[np.float64], qm: Any,
                 exact_raw: Any, *, classifier: bool, ge: bool, need: float, tol: float) -> PrefixForm:
    """Score ``ens`` on validation rows ``X`` (source margins ``ev``): its band (classifiers), the resulting
    margins, validation loss and its bootstrap bound, agreement and whether it is within the tolerance."""
    q = quantize_ensemble(ens)
    rt = TableRuntime(q)
    av = rt.predict_raw(np.ascontiguousarray(X, dtype=rt.dtype))[:, 0]
    band = decision_band(av, ev, ge=ge, agreement=need) if classifier else None
    got, share = cascade_margins(av, exact_raw, X, band) if band is not None else (av, 0.0)
    loss = _loss(qm, qm(ev), qm(got))
    bound = loss_bound(qm, ev, got)
    schema = ens.schema
    agree = float(np.mean(schema.class_index(got) == schema.class_index(ev))) if classifier else None
    within = bool(max(loss, bound) <= tol + 1e-15 and (agree is None or agree >= need))
    return PrefixForm(ens, q, rt, band, got, share, loss, bound, agree, within, exact_raw)


CHECKPOINT_FIRST = 64
"""The fit's prefixes of 64, 128, 256, ... trees are its checkpoints (:class:`PrefixStop`)."""
TIMING_ROWS = 50_000
"""Checkpoints time the forms on the validation rows repeated to at least this many rows."""
STALE_CHECKPOINTS = 2
"""The fit stops after this many checkpoints in a row whose prefix is not a faster form within the tolerance."""


class PrefixStop:
    """Stops the formula-5 fit once a longer prefix can no longer beat the fastest form found.

    Every tolerance form is a prefix of one fit, and the fit's time budget (90 s) was spent although the
    64- and 128-tree prefixes won on every bench model. At each checkpoint (64, 128, 256, ... trees) the
    prefix is scored as a form (:func:`score_prefix`) and timed, interleaved with the fastest form within
    the tolerance so far (at first the exact form) and with the tables alone of this and the previous
    checkpoint. The fit stops when

    * the tables alone of the next checkpoint, extrapolated by their per-tree cost between the last two
      checkpoints, are already no faster than the best form: a cascade costs its tables plus its exact
      path, and tables cost at least their trees; or
    * :data:`STALE_CHECKPOINTS` checkpoints in a row gave no faster form within the tolerance and no
      prefix over it whose loss (the larger of loss and bound) still fell: longer prefixes narrow the exact
      path ever more slowly (credit 500 x 63, 24.7% of rows at 64 trees, 22.0% at 128, 19.5% at 625) while
      the tables grow linearly, and a prefix over the tolerance counts only while it closes in on it.

    The trees grown are those of the unstopped fit (the same seed), so every prefix offered is the same
    form; only longer ones are no longer grown. ``log`` records each checkpoint (``fit.report["checkpoints"]``).
    """

    def __init__(self, X: npt.NDArray[np.float64], ev: npt.NDArray[np.float64], qm: Any, exact_raw: Any, *,
                 exact: Any, classifier: bool, ge: bool, need: float, tol: float) -> None:
        self.X, self.ev, self.qm, self.exact_raw = X, ev, qm, exact_raw
        n = max(X.shape[0], TIMING_ROWS)  # a few ms of work per run is noise on a shared machine
        self.timing_rows = np.ascontiguousarray(X[np.arange(n) % X.shape[0]]) if X.shape[0] else X
        self.kw = {"classifier": classifier, "ge": ge, "need": need, "tol": tol}
        self.best: tuple[str, Any] = ("exact", exact)
        self.prev: tuple[int, PrefixForm] | None = None
        self.stale = 0
        self.log: list[dict[str, Any]] = []

    def __call__(self, T: int, fit: Any) -> str | None:
        if T < CHECKPOINT_FIRST or T % CHECKPOINT_FIRST or (T // CHECKPOINT_FIRST) & (T // CHECKPOINT_FIRST - 1):
            return None
        pf = score_prefix(fit.ensemble(T), self.X, self.ev, self.qm, self.exact_raw, **self.kw)  # type: ignore[arg-type]
        runners = {"best": self.best[1], "form": pf.run, "tables": pf.tables}
        if self.prev is not None:
            runners["tables before"] = self.prev[1].tables
        sec = timed(runners, self.timing_rows)
        faster = pf.within and sec["form"] < sec["best"]
        over = max(pf.loss, pf.bound)
        # a prefix over the tolerance whose loss still falls may be within at the next checkpoint
        closing = not pf.within and (self.prev is None or over < max(self.prev[1].loss, self.prev[1].bound))
        best_s = sec["form"] if faster else sec["best"]
        slope = 0.0 if self.prev is None else max(0.0, (sec["tables"] - sec["tables before"]) / (T - self.prev[0]))
        next_tables = sec["tables"] + slope * T  # the next checkpoint has 2T trees
        entry: dict[str, Any] = {"trees": T, "within": pf.within, "cpu_seconds": sec["form"], "best": self.best[0],
                 "best_cpu_seconds": sec["best"], "tables_cpu_seconds": sec["tables"],
                 "next_tables_cpu_seconds": next_tables, "faster": bool(faster), "loss_bound": over,
                 "closing": bool(closing)}
        self.log.append(entry)
        if faster:
            self.best, self.stale = (f"{T} trees", pf.run), 0
        elif closing:
            self.stale = 0
        else:
            self.stale += 1
        self.prev = (T, pf)
        if len(self.log) > 1 and next_tables >= best_s:
            entry["stop"] = f"the tables of {2 * T} trees alone would be no faster than the best form ({self.best[0]})"
        elif self.stale >= STALE_CHECKPOINTS:
            entry["stop"] = f"{STALE_CHECKPOINTS} checkpoints without a faster form (best: {self.best[0]})"
        return entry.get("stop")


def compile_within(forest: Forest, options: FastestOptions, *, tolerance: float, data: Mapping[str, Any],
                   path: str | Path | None = None, threads: int = 1, metric: str = "auto",
                   fit: Any = None, agreement: float = 1.0) -> Predictor:
    """The fastest of the exact forms and the tolerance forms whose validation loss is at most ``tolerance``."""
    try:
        tol = float(tolerance)
    except (TypeError, ValueError):
        raise CompileError(f"tolerance must be a number, got {tolerance!r}") from None
    if not np.isfinite(tol) or tol < 0:
        raise CompileError(f"tolerance must be a finite number >= 0, got {tolerance!r}")
    need = check_agreement(agreement)
    schema = forest.schema
    if schema.n_outputs != 1 or schema.task not in (Task.BINARY, Task.REGRESSION):
        raise CompileError(f"tolerance forms cover binary classifiers and regressors; this model is "
                           f"{schema.task.name.lower()} with {schema.n_outputs} outputs",
                           "compile without tolerance (exact forms only)")
    if not isinstance(data, Mapping):
        raise CompileError("tolerance needs data={'train': (X, y), 'valid': (Xv, yv)}: the lossy form is fitted "
                           "on data['train'] and its loss checked on data['valid']",
                           "CLI: --train CSV --valid CSV --label COLUMN")
    if fit is not None and not isinstance(fit, FitOptions):
        raise CompileError(f"fit must be a FitOptions, not {type(fit).__name__}")
    train, valid = _split(forest, data, "train"), _split(forest, data, "valid")
    qm = make_metric(metric, schema, valid.y)
    classifier = schema.task == Task.BINARY
    ge = schema.decision == "margin_ge"
    fp = fingerprint(forest)
    t0 = time.perf_counter()
    forms: dict[str, Predictor] = {}
    leaves = int((forest.left < 0).sum())
    skip = (f"{leaves:,} source leaves (more than {EXACT_TABLES_MAX_LEAVES:,}): exact re-composition is not "
            "tried in a tolerance search") if leaves > EXACT_TABLES_MAX_LEAVES else None
    exact = compile_fastest(forest, options, threads=threads, sample=valid.X, sample_source="the validation rows",
                            built=forms, skip_tables=skip)
    exact_seconds = time.perf_counter() - t0
    fc = get_target("c")
    forest_lib = forms.get("forest") or fc.compile(forest, options.forest_options(), threads=1, fingerprint=fp)
    ev = np.asarray(forest_lib.predict_raw(valid.X)).reshape(-1)
    ref = qm(ev)
    exact_raw = lambda R: forest_lib.predict_raw(R)  # noqa: E731
    stopper = PrefixStop(valid.X, ev, qm, exact_raw, exact=lambda X: exact.predict_raw(X), classifier=classifier,
                         ge=ge, need=need, tol=tol)
    t0 = time.perf_counter()
    fr = fit_oblivious(forest, train.X, fit or DEFAULT_FIT, margins=exact_raw, checkpoint=stopper)
    fit_seconds = time.perf_counter() - t0
    fr.report["checkpoints"] = stopper.log
    report: dict[str, Any] = {"tolerance": tol, "agreement_target": need, "metric": qm.name, "validation_rows": int(valid.X.shape[0]),
                              "training_rows": int(train.X.shape[0]), "source_quality": ref, "fit": fr.report,
                              "exact": exact.report, "forms": {}}
    runners: dict[str, Any] = {f"exact {exact.report.get('chosen', 'forest')}": lambda X: exact.predict_raw(X)}
    report["loss_rule"] = (f"validation loss and its {100 * LOSS_CONFIDENCE:g}% paired-bootstrap upper bound "
                           f"({BOOTSTRAP_DRAWS} resamples) at most the tolerance")
    report["forms"][next(iter(runners))] = {"kind": "exact", "loss": 0.0, "loss_bound": 0.0, "agreement": 1.0,
                                            "exact_share": 1.0,
                                            "max_abs_margin_change": 0.0, "mean_abs_margin_change": 0.0,
                                            "within": True, "build_seconds": exact_seconds}
    built: dict[str, Cascade] = {}
    sizes = sorted(set(tree_sizes(fr.best_trees)) | {c["trees"] for c in stopper.log})
    for T in sizes:
        pf = score_prefix(fr.ensemble(T), valid.X, ev, qm, exact_raw, classifier=classifier, ge=ge, need=need,
                          tol=tol)
        ens, band = pf.ens, pf.band
        diff = np.abs(pf.got - ev)
        name = f"{'cascade' if classifier else 'tables'} {T} trees"
        report["forms"][name] = {
            "kind": "tolerance", "trees": ens.n_trees, "depth": fr.report["depth"],
            "band": None if band is None else list(band),
            "exact_share": pf.share, "loss": pf.loss, "loss_bound": pf.bound, "agreement": pf.agree,
            "within": pf.within,
            "max_abs_margin_change": float(diff.max(initial=0.0)), "mean_abs_margin_change": float(diff.mean()),
            "table_bytes": int(ens.value.shape[0] * 8)}
        quality = {k: report["forms"][name][k] for k in ("loss", "loss_bound", "agreement", "exact_share", "max_abs_margin_change",
                                                           "mean_abs_margin_change")}
        quality.update(metric=qm.name, tolerance=tol, validation_rows=int(valid.X.shape[0]))
        built[name] = Cascade(forest, pf.q, band, quality)
        runners[name] = pf.run
    for k, sec in timed(runners, valid.X).items():
        report["forms"][k]["cpu_seconds"] = sec
        report["forms"][k]["ns_per_row"] = sec / valid.X.shape[0] * 1e9
    eligible = [k for k, f in report["forms"].items() if f["within"]]
    chosen = min(eligible, key=lambda k: report["forms"][k]["cpu_seconds"])
    report["chosen"] = chosen
    if report["forms"][chosen]["kind"] == "exact":
        pred = exact
        if path is not None:
            pred.save(path)
            pred.path = Path(path)
        exact_report = pred.report
        pred.report = {**exact_report, "tolerance": report}
        return pred
    t0 = time.perf_counter()
    pred = build_cascade(built[chosen], options.forest_options(), fp=fp, path=path, threads=threads)
    report["forms"][chosen]["build_seconds"] = fit_seconds + time.perf_counter() - t0
    got = np.asarray(pred.predict_raw(valid.X)).reshape(-1)
    if classifier and float(np.mean(schema.class_index(got) == schema.class_index(ev))) < need:
        raise CompileError("the compiled cascade decides differently from the source on more validation rows than "
                           "its band allows (a bug)")
    pred.report = {"tolerance": report, "chosen": chosen}
    return pred


def describe_tolerance(report: Mapping[str, Any]) -> str:
    """One line per form tried, as ``lumber compile --tolerance`` prints them."""
    t = report.get("tolerance", report)
    need = t.get("agreement_target", 1.0)
    lines = [f"  tolerance {t['tolerance']:g} on {t['metric']}{'' if need == 1.0 else f', agreement >= {need:g}'} over {t['validation_rows']:,} validation rows "
             f"(source {t['metric']} {t['source_quality']:.5f}); fit: {t['fit']['trees_grown']} trees grown "
             f"in {t['fit']['seconds']:.1f} s, stop: {t['fit']['stop']}"]
    for k, f in t["forms"].items():
        agree = f"{100 * f['agreement']:.2f}% agree" if f.get("agreement") is not None else "no decisions"
        mark = "  <- chosen" if t.get("chosen") == k else ("" if f["within"] else "  (over tolerance)")
        lines.append(f"  {k:<22} {f['ns_per_row']:9,.0f} ns/row  loss {f['loss']:+.5f} "
                     f"(bound {f.get('loss_bound', f['loss']):+.5f})  {agree}  "
                     f"exact path {100 * f['exact_share']:5.1f}%  |margin change| max {f['max_abs_margin_change']:.3g} "
                     f"mean {f['mean_abs_margin_change']:.3g}{mark}")
    return "\n".join(lines)


__all__ = ["BOOTSTRAP_DRAWS", "CHECKPOINT_FIRST", "DEFAULT_FIT", "EXACT_TABLES_MAX_LEAVES", "LOSS_CONFIDENCE",
           "PrefixForm", "PrefixStop", "STALE_CHECKPOINTS", "TREE_COUNTS", "TREE_FRACTIONS", "check_agreement",
           "compile_within", "describe_tolerance", "loss_bound", "score_prefix", "timed", "tree_sizes"]
