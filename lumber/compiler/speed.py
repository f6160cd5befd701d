"""``lumber.compile_fastest``: build the forest and the oblivious-table libraries, time both, keep the faster.

Both are C shared libraries with the same entry points and the source model's
fingerprint (targets ``c`` and ``table-c``), so the choice is invisible to
callers and to ``load_compiled``. The forms are timed on the caller's own rows
(``sample``: the rows the model will see, e.g. the CLI's ``--sample rows.csv``
or its ``--train`` rows), never on made-up ones: which form wins depends on the
rows (how deep they go in the trees, how many NaN and categories they hold).
Short samples are tiled to :data:`TIMED_ROWS` so each timing spans many blocks.
The forms are compared on the sample before timing; a table form that disagrees
with the forest is never shipped.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any, cast

import numpy as np
import numpy.typing as npt

from lumber.ir import Forest, LumberError
from lumber.runtime.predictors import CPredictor, Predictor

from .targets import get_target
from .targets.c import CLibraryTarget, FastestOptions

SAMPLE_ROWS = 20_000
TIMED_ROWS = 20_000
"""A sample shorter than this is tiled to it for timing (its rows repeated in order)."""
REPEATS = 3


def sample_rows(forest: Forest, n: int = SAMPLE_ROWS, seed: int = 0) -> npt.NDArray[np.float64]:
    """Rows that spread over the model's split cells (each feature uniform over its thresholds' cells): test
    rows for agreement checks, never the rows :func:`compile_fastest` times."""
    rng = np.random.default_rng(seed)
    X = np.zeros((n, forest.n_features))
    internal = np.flatnonzero(~forest.is_leaf & ~forest.is_categorical)
    for f in range(forest.n_features):
        t = np.unique(forest.threshold[internal[forest.feature[internal] == f]])
        t = t[np.isfinite(t)]
        if t.size:
            edges = np.concatenate([[t[0] - 1.0], t, [t[-1] + 1.0]])
            cell = rng.integers(0, edges.shape[0] - 1, n)
            X[:, f] = edges[cell] + (edges[cell + 1] - edges[cell]) * rng.uniform(0.05, 0.95, n)
    cats = np.flatnonzero(~forest.is_leaf & forest.is_categorical)
    for f in np.unique(forest.feature[cats]).tolist():
        vals = np.unique(np.concatenate([forest.categories_of(int(c)) for c in cats[forest.feature[cats] == f]]))
        X[:, f] = rng.choice(np.concatenate([vals, [vals.max() + 1]]), n).astype(np.float64)
    return X


def cpu_seconds(pred: Predictor, X: npt.NDArray[np.float64]) -> float:
    """Process CPU seconds of one ``pred.predict_raw(X)``: the clock :func:`compile_fastest` times the forms by."""
    t0 = time.process_time()
    pred.predict_raw(X)
    return time.process_time() - t0


def compile_fastest(forest: Forest, options: FastestOptions, *, path: str | Path | None = None,
                    threads: int = 1, sample: Any = None, sample_source: str = "the sample passed",
                    built: dict[str, Predictor] | None = None, skip_tables: str | None = None,
                    timer: Callable[[Predictor, npt.NDArray[np.float64]], float] = cpu_seconds) -> Predictor:
    """The faster of ``forest``'s ``c`` and ``table-c`` libraries on ``sample``, the caller's own rows
    (required: a CompileError says so without them); ``options`` hold both libraries' options.

    ``predictor.report`` holds both forms' CPU seconds on the sample, the choice and ``timed_on``: the
    sample's rows, where they came from (``sample_source``), how many rows each timing ran (the sample
    tiled to :data:`TIMED_ROWS`), the clock and the threads. ``built`` (when given) receives every form
    built, by name (the tolerance search reuses the forest library); ``skip_tables`` (a reason) leaves
    the oblivious form out, reported as not tried; ``timer`` times one form on the rows (:func:`cpu_seconds`).
    """
    from lumber.backends.base import fingerprint
    from lumber.ir import CompileError
    from lumber.ir.interp import prepare_input

    if sample is None:
        raise CompileError("optimize='speed' times the forms on your own rows, and none were given",
                           "pass sample=rows (a few thousand rows like those the model will see); "
                           "CLI: --sample rows.csv, or --train CSV")
    X = prepare_input(forest.schema, sample)
    if X.shape[0] == 0:
        raise CompileError("optimize='speed': the sample has no rows", "pass rows like those the model will see")
    fp = fingerprint(forest)
    report: dict[str, Any] = {"sample_rows": 0, "forms": {}}
    candidates: dict[str, Predictor] = {}
    forms = {"forest": get_target("c"), "oblivious": get_target("table-c")}
    t0 = time.perf_counter()
    c_options = options.forest_options()
    forest_target = cast(CLibraryTarget, forms["forest"])
    candidates["forest"] = forest_target.compile(forest, c_options, threads=threads, fingerprint=fp,
                                                 sample=X)  # its walk chosen on the same rows
    report["forms"]["forest"] = {"compile_seconds": time.perf_counter() - t0,
                                 "walk": cast(CPredictor, candidates["forest"]).library.metadata.get("walk", "values"),
                                 "walk_choice": candidates["forest"].report.get("walk")}
    if options.walk == "auto" and report["forms"]["forest"]["walk"] != "values":
        # the binned walk pays a coding step per row: on few, shallow trees the value walk can be faster
        t0 = time.perf_counter()
        candidates["forest-values"] = forms["forest"].compile(
            forest, replace(c_options, walk="values"), threads=threads, fingerprint=fp)
        report["forms"]["forest-values"] = {"compile_seconds": time.perf_counter() - t0, "walk": "values"}
    try:
        if skip_tables is not None:
            raise LumberError(skip_tables)
        t0 = time.perf_counter()
        tables = forms["oblivious"]
        candidates["oblivious"] = tables.compile(forest, options.table_options(), threads=threads, fingerprint=fp)
        report["forms"]["oblivious"] = {"compile_seconds": time.perf_counter() - t0,
                                        "tables": candidates["oblivious"].report["tables"]}
    except LumberError as exc:
        what = "not tried" if skip_tables is not None else "not available"
        report["forms"]["oblivious"] = {"status": f"{what}: {exc.diagnostics[0].message}"}
    exact = options.exact
    report["sample_rows"] = int(X.shape[0])
    times: dict[str, list[float]] = {k: [] for k in candidates}
    outs = {k: p.predict_raw(X) for k, p in candidates.items()}
    if "forest-values" in outs and not np.array_equal(outs["forest"], outs["forest-values"]):
        report["forms"]["forest-values"]["agrees_with_forest"] = False  # a bug: keep the default walk
        candidates.pop("forest-values")
        times.pop("forest-values")
    if "oblivious" in outs:
        a, b = np.asarray(outs["forest"]), np.asarray(outs["oblivious"])
        scale = 1.0 + float(np.abs(a).max(initial=0.0))
        agree = bool(np.all(np.abs(a - b) <= (1e-12 if exact else 1e-6) * scale))
        report["forms"]["oblivious"]["agrees_with_forest"] = agree
        if not agree:  # never ship a form that disagrees (a bug): keep the forest
            candidates.pop("oblivious")
            times.pop("oblivious")
    Xt = np.ascontiguousarray(np.tile(X, (-(-TIMED_ROWS // X.shape[0]), 1))) if X.shape[0] < TIMED_ROWS else X
    report["timed_on"] = {"rows": int(X.shape[0]), "source": sample_source, "timed_rows": int(Xt.shape[0]),
                          "tiled": bool(Xt is not X), "clock": "process CPU time", "repeats": REPEATS,
                          "statistic": "median of interleaved runs", "threads": threads}
    for _ in range(REPEATS):  # interleaved
        for k, p in candidates.items():
            times[k].append(timer(p, Xt))
    for k, ts in times.items():
        report["forms"][k]["cpu_seconds"] = float(np.median(ts))
        report["forms"][k]["ns_per_row"] = float(np.median(ts)) / max(Xt.shape[0], 1) * 1e9
    if built is not None:
        built.update(candidates)
    chosen = min(times, key=lambda k: float(np.median(times[k])))
    report["chosen"] = chosen
    pred = candidates[chosen]
    if path is not None:
        pred.save(path)
        pred.path = Path(path)
    pred.report = report
    return pred


def describe_choice(report: dict[str, Any]) -> str:
    """What was timed on what, then one line per form, as ``lumber compile --optimize speed`` prints them."""
    lines = []
    on = report.get("timed_on")
    if on:
        tiled = f", tiled to {on['timed_rows']:,}" if on.get("tiled") else ""
        lines.append(f"  timed on {on['rows']:,} rows of {on['source']}{tiled} ({on['clock']}, "
                     f"{on['statistic']} of {on['repeats']}, {on['threads']} thread(s))")
    for k, r in report.get("forms", {}).items():
        if "cpu_seconds" in r:
            extra = ""
            tab = r.get("tables")
            if tab:
                extra = (f" ({tab.get('method')}: {tab.get('trees_in')} -> {tab.get('trees_out')} trees, "
                         f"{tab.get('table_bytes', 0) / 1024:,.0f} KiB tables)")
            mark = "  <- chosen" if report.get("chosen") == k else ""
            lines.append(f"  {k:<13} {r['ns_per_row']:10,.0f} ns/row{extra}{mark}")
        else:
            lines.append(f"  {k:<13} {r.get('status', 'not measured')}")
    return "\n".join(lines)


__all__ = ["REPEATS", "SAMPLE_ROWS", "TIMED_ROWS", "compile_fastest", "cpu_seconds", "describe_choice", "sample_rows"]
