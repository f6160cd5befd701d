"""Oblivious forms for ``lumber.compile``: ``target="table"`` and ``optimize="speed"``.

* :func:`to_tables`: any model as a quantized ObliviousEnsemble: CatBoost's
  symmetric trees directly, anything else through the ``polynomial,oblivious``
  passes (MonoForest re-composition; exact).
* ``target="table"``: a :class:`TablePredictor` on the table file format,
  evaluated by the C table runtime (built once per process for this CPU), or
  by the numpy table evaluator when no C compiler is present.
* ``optimize="speed"`` (target ``"c"``): builds the forest library and the
  oblivious-table library, times both on a sample, keeps the faster and
  reports both (``predictor.report``). Both libraries export the same C
  functions, so the choice is invisible to callers and to ``load_compiled``.
"""

from __future__ import annotations

import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from lumber.backends.base import fingerprint
from lumber.ir import CompileError, Forest, LumberError, ObliviousEnsemble, atomic_write_bytes

from .compile import CPredictor, Predictor, as_rows

DEFAULT_PIPELINE = "polynomial{max-monomials=20000000},oblivious{max-depth=%s},quantize"
"""Re-composition: the expansion is bounded (20M terms, about a gigabyte while merging) so a
model too deep for tables fails fast with the polynomial pass's message."""
SAMPLE_ROWS = 20_000
REPEATS = 3


def to_tables(model: Any, *, max_depth: int | str = "auto", strategy: str = "pack", time_passes: bool = False,
              stats: dict[str, Any] | None = None, exact: bool = True) -> ObliviousEnsemble:
    """A quantized ObliviousEnsemble computing exactly what ``model`` computes.

    ``stats`` (a dict) receives how the tables were made: ``method`` (``direct`` for a
    forest of oblivious trees, else ``re-composition``), seconds, tree counts and table bytes.
    Tables sum in float64: a model whose library sums leaves in float32 (XGBoost) is refused
    unless ``exact=False``, which accepts the float64 sum of the same leaves.
    """
    from lumber.compiler.pipeline import run as run_pipeline
    from lumber.ir.oblivious import forest_to_oblivious
    from lumber.passes.base import PassContext
    from lumber.passes.transforms.quantize import quantize_ensemble

    t0 = time.perf_counter()
    info: dict[str, Any] = stats if stats is not None else {}
    if isinstance(model, ObliviousEnsemble):
        ens = model if model.quantized else quantize_ensemble(model)
        info.update(method="given", seconds=time.perf_counter() - t0, trees_in=ens.n_trees)
        info.update(_table_stats(ens))
        return ens
    forest = model if isinstance(model, Forest) else _load(model)
    info["trees_in"] = forest.n_trees
    if forest.schema.accumulate_dtype != "float64":
        lib = forest.schema.source.get("library", "the source library")
        if exact:
            raise CompileError(
                f"{lib} sums leaf values in {forest.schema.accumulate_dtype}; oblivious tables sum in float64, "
                f"so margins would differ from {lib}'s in the last {forest.schema.accumulate_dtype} bits",
                "pass exact=False (lumber compile --inexact) to accept the float64 sum of the same leaves, "
                "or keep the forest form (target 'c')")
        forest = forest.replace(schema=forest.schema.with_(accumulate_dtype="float64"))
        info["note"] = f"float64 sums of a model that {lib} sums in float32"
    try:
        ens = quantize_ensemble(forest_to_oblivious(forest))
        info.update(method="direct")
    except LumberError:
        ctx = PassContext()
        pipeline = DEFAULT_PIPELINE % max_depth
        if strategy != "pack":
            pipeline = pipeline.replace("}", f",strategy={strategy}}}", 1)
        ens = run_pipeline(forest, pipeline, time_passes=time_passes, context=ctx)
        info.update(method="re-composition", pipeline=pipeline,
                    passes={t.pass_text: t.seconds for t in ctx.timings},
                    recompose={k: v for r in ctx.reports if r.pass_name == "oblivious" for k, v in r.metrics.items()})
    info["seconds"] = time.perf_counter() - t0
    info.update(_table_stats(ens))
    return ens


def _table_stats(ens: ObliviousEnsemble) -> dict[str, Any]:
    st = ens.statistics()
    return {"trees_out": st["trees"], "max_depth": st["max_depth"], "table_bytes": st["table_bytes"],
            "trees_by_depth": st["trees_by_depth"]}


def _load(model: Any) -> Forest:
    from lumber.compiler.frontends import load

    return load(model)


class TablePredictor(Predictor):
    """Oblivious decision tables: the C table runtime, or the numpy table evaluator without a compiler."""

    target = "table"

    def __init__(self, ens: ObliviousEnsemble, fp: str, *, threads: int = 1, engine: str = "auto") -> None:
        super().__init__(ens.schema, fp)
        self.ensemble = ens
        self.threads = threads
        self._runtime: Any = None
        self._numpy: Any = None
        if engine not in ("auto", "c", "numpy"):
            raise CompileError(f"unknown table engine {engine!r}", "engines: auto, c, numpy")
        if engine in ("auto", "c"):
            try:
                from lumber.backends.table_c import TableRuntime

                self._runtime = TableRuntime(ens)
            except CompileError:
                if engine == "c":
                    raise
        if self._runtime is None:
            from lumber.backends.table import TableEvaluator

            self._numpy = TableEvaluator(ens)
        self.engine = "c" if self._runtime is not None else "numpy"
        self.report: dict[str, Any] = {}

    def _margins(self, X: Any, threads: int | None = None) -> npt.NDArray[np.float64]:
        if self._runtime is not None:
            rows = as_rows(self.schema, X, self._runtime.dtype)
            return self._runtime.predict_raw(rows, threads or self.threads)  # type: ignore[no-any-return]
        return np.asarray(self._numpy.predict_raw(X)).reshape(-1, self.schema.n_outputs)

    def predict_raw(self, X: Any, threads: int | None = None) -> npt.NDArray[np.float64]:
        m = self._margins(X, threads)
        return m[:, 0] if self.schema.n_outputs == 1 else m

    def apply(self, X: Any) -> npt.NDArray[np.int64]:
        """Table row reached in every tree, ``(n, n_trees)``."""
        if self._runtime is not None:
            return self._runtime.apply(as_rows(self.schema, X, self._runtime.dtype)).astype(np.int64)
        return self._numpy.apply(X)  # type: ignore[no-any-return]

    def save(self, path: str | Path) -> Path:
        from lumber.backends.table import write_table

        self.path = write_table(self.ensemble, path, source_fingerprint=self.fingerprint)
        return self.path


def load_table(path: str | Path, *, threads: int = 1) -> TablePredictor:
    """A predictor for a saved ``.table`` file."""
    from lumber.backends.table import read_table

    tf = read_table(path)
    pred = TablePredictor(tf.ensemble, tf.fingerprint, threads=threads)
    pred.path = Path(path)
    return pred


def _source(model: Any) -> tuple[Any, str]:
    """The IR to convert and the fingerprint artifacts record (the source Forest's)."""
    if isinstance(model, ObliviousEnsemble):
        return model, fingerprint(model)
    forest = model if isinstance(model, Forest) else _load(model)
    return forest, fingerprint(forest)


def compile_table(model: Any, *, path: str | Path | None = None, threads: int = 1, max_depth: int | str = "auto",
                  strategy: str = "pack", time_passes: bool = False, exact: bool = True) -> TablePredictor:
    """``lumber.compile(model, target="table")``."""
    src, fp = _source(model)
    stats: dict[str, Any] = {}
    ens = to_tables(src, max_depth=max_depth, strategy=strategy, time_passes=time_passes, stats=stats, exact=exact)
    pred = TablePredictor(ens, fp, threads=threads)
    pred.report = {"tables": stats}
    if path is not None:
        pred.save(path)
    return pred


def compile_oblivious_c(model: Any, *, path: str | Path | None = None, threads: int = 1, prefix: str = "lumber",
                        march_native: bool = False, openmp: bool | None = None, cc: str | None = None,
                        name: str = "model", max_depth: int | str = "auto", strategy: str = "pack",
                        stats: dict[str, Any] | None = None, exact: bool = True) -> CPredictor:
    """The oblivious-table form as a C shared library with the forest library's entry points."""
    from lumber.backends.c import BuildOptions, CLibrary, build_shared
    from lumber.backends.table_c import TableCOptions, emit_table_source

    src, fp = _source(model)
    ens = to_tables(src, max_depth=max_depth, strategy=strategy, stats=stats, exact=exact)
    art = emit_table_source(ens, TableCOptions(name=name, prefix=prefix, source_fingerprint=fp))
    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="lumber-build-") as tmp:
        so = Path(tmp, "model.so")
        build_shared(art.text(), so, BuildOptions(cc=cc, march_native=march_native, openmp=openmp))
        data = so.read_bytes()
        lib = CLibrary(so, prefix=prefix)
    if stats is not None:
        stats["build_seconds"] = time.perf_counter() - t0
    if path is not None:
        atomic_write_bytes(path, data)
    pred = CPredictor(lib, data, threads=threads, source=art)
    if path is not None:
        pred.path = Path(path)
    return pred


def sample_rows(forest: Forest, n: int = SAMPLE_ROWS, seed: int = 0) -> npt.NDArray[np.float64]:
    """Rows that spread over the model's split cells (each feature uniform over its thresholds' cells)."""
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


def _cpu_seconds(pred: Predictor, X: npt.NDArray[np.float64]) -> float:
    t0 = time.process_time()
    pred.predict_raw(X)
    return time.process_time() - t0


def compile_fastest(forest_c: Any, model: Any, *, path: str | Path | None, threads: int, prefix: str,
                    march_native: bool, openmp: bool | None, cc: str | None, name: str, max_depth: int | str = "auto",
                    sample: Any = None, exact: bool = True) -> Predictor:
    """``optimize="speed"``: the faster of the forest library (``forest_c()`` builds it) and the
    oblivious-table library on ``sample`` (default: rows spread over the model's split cells).

    ``predictor.report`` holds both forms' CPU seconds on the sample and the choice.
    """
    src, fp = _source(model)
    report: dict[str, Any] = {"sample_rows": 0, "forms": {}}
    candidates: dict[str, Predictor] = {}
    t0 = time.perf_counter()
    candidates["forest"] = forest_c()
    report["forms"]["forest"] = {"compile_seconds": time.perf_counter() - t0}
    stats: dict[str, Any] = {}
    try:
        t0 = time.perf_counter()
        candidates["oblivious"] = compile_oblivious_c(src, threads=threads, prefix=prefix, march_native=march_native,
                                                      openmp=openmp, cc=cc, name=name, max_depth=max_depth,
                                                      stats=stats, exact=exact)
        report["forms"]["oblivious"] = {"compile_seconds": time.perf_counter() - t0, "tables": stats}
    except LumberError as exc:
        report["forms"]["oblivious"] = {"status": f"not available: {exc.diagnostics[0].message}"}
    if sample is None:
        forest = src if isinstance(src, Forest) else src.to_forest()
        X = sample_rows(forest)
    else:
        from lumber.ir.interp import prepare_input

        X = prepare_input(src.schema, sample)
    report["sample_rows"] = int(X.shape[0])
    times: dict[str, list[float]] = {k: [] for k in candidates}
    outs = {k: p.predict_raw(X) for k, p in candidates.items()}
    if "oblivious" in outs:
        a, b = np.asarray(outs["forest"]), np.asarray(outs["oblivious"])
        scale = 1.0 + float(np.abs(a).max(initial=0.0))
        agree = bool(np.all(np.abs(a - b) <= (1e-12 if exact else 1e-6) * scale))
        report["forms"]["oblivious"]["agrees_with_forest"] = agree
        if not agree:  # never ship a form that disagrees (a bug): keep the forest
            candidates.pop("oblivious")
            times.pop("oblivious")
    for _ in range(REPEATS):  # interleaved
        for k, p in candidates.items():
            times[k].append(_cpu_seconds(p, X))
    for k, ts in times.items():
        report["forms"][k]["cpu_seconds"] = float(np.median(ts))
        report["forms"][k]["ns_per_row"] = float(np.median(ts)) / max(X.shape[0], 1) * 1e9
    chosen = min(times, key=lambda k: float(np.median(times[k])))
    report["chosen"] = chosen
    pred = candidates[chosen]
    if path is not None:
        pred.save(path)
        pred.path = Path(path)
    pred.report = report  # type: ignore[attr-defined]
    return pred


def describe_choice(report: dict[str, Any]) -> str:
    """One line per form, as ``lumber compile --optimize speed`` prints them."""
    lines = []
    for k, r in report.get("forms", {}).items():
        if "cpu_seconds" in r:
            extra = ""
            tab = r.get("tables")
            if tab:
                extra = (f" ({tab.get('method')}: {tab.get('trees_in')} -> {tab.get('trees_out')} trees, "
                         f"{tab.get('table_bytes', 0) / 1024:,.0f} KiB tables)")
            mark = "  <- chosen" if report.get("chosen") == k else ""
            lines.append(f"  {k:<9} {r['ns_per_row']:10,.0f} ns/row on {report['sample_rows']:,} sample rows{extra}{mark}")
        else:
            lines.append(f"  {k:<9} {r.get('status', 'not measured')}")
    return "\n".join(lines)


def compile_oblivious_forms(model: Any, target: str, *, optimize: str | None, forest_c: Any,
                            path: str | Path | None, threads: int, prefix: str, march_native: bool,
                            openmp: bool | None, cc: str | None, name: str, max_depth: int | str = "auto",
                            sample: Any = None, exact: bool = True) -> Predictor:
    """What ``lumber.compile`` does for ``target="table"``, ``optimize="speed"`` or an ObliviousEnsemble.

    ``forest_c(forest)`` compiles a Forest with the forest C backend (``lumber.compile``'s own path).
    """
    if optimize not in (None, "speed"):
        raise CompileError(f"unknown optimize goal {optimize!r}", "accepted: 'speed'")
    if target == "table":
        return compile_table(model, path=path, threads=threads, max_depth=max_depth, exact=exact)
    if target != "c":
        raise CompileError(f"target {target!r} cannot hold oblivious tables" if optimize is None else
                           f"optimize='speed' applies to target 'c', not {target!r}",
                           "use target 'c' (a shared library) or 'table'")
    if optimize is None:  # an ObliviousEnsemble for target c
        return compile_oblivious_c(model, path=path, threads=threads, prefix=prefix, march_native=march_native,
                                   openmp=openmp, cc=cc, name=name, max_depth=max_depth, exact=exact)
    src, _ = _source(model)
    if isinstance(src, ObliviousEnsemble):
        raise CompileError("optimize='speed' compares the forest and oblivious forms of a forest model",
                           "pass the model (or its Forest), not an ObliviousEnsemble")
    return compile_fastest(lambda: forest_c(src), src, path=path, threads=threads, prefix=prefix,
                           march_native=march_native, openmp=openmp, cc=cc, name=name, max_depth=max_depth,
                           sample=sample, exact=exact)


__all__ = ["TablePredictor", "compile_fastest", "compile_oblivious_c", "compile_oblivious_forms", "compile_table",
           "describe_choice",
           "load_table", "sample_rows", "to_tables"]
