"""Inference benchmark: lumber's C and ONNX artifacts against the libraries and the tree compilers.

One process, interleaved runs. For each model (LightGBM 500 trees x 63 leaves, max
depth 8, on the bundled credit data and on a synthetic 200k x 50 set; an XGBoost
model; a scikit-learn random forest) and each peer (the library's own predict,
treelite + tl2cgen, lleaves, onnxruntime on onnxmltools / skl2onnx output, oneDAL through
daal4py's model builders, YDF through ``ydf.from_sklearn`` (QuickScorer), timber-compiler,
lumber C, lumber ONNX) it measures:

* compile time (wall, and CPU including compiler subprocesses),
* batch seconds for 100k rows at 1 and 2 threads (median of interleaved repetitions),
  and ns per row per tree at 1 thread; thread scaling from alternating 1/2-thread pairs
  (the fastest of each repetition's pairs, ``batch_pairs``),
* single-row latency through the peer's Python API, and as a raw C call where the
  peer exposes a C function (measured by a small C harness calling it in a loop),
* max |diff| against the library on the batch, and mismatches on a boundary corpus
  (for every split: rows on the threshold and one float above and below, in the
  model's input dtype; NaN; category probes). A mismatch is a difference above
  1e-9 relative (a routing difference); ``not bit-exact`` counts any difference.

Peers that are missing, fail to convert, or crash are reported with the error.

The load average is recorded before and after. CPU-time ratios taken while the load is above
the core count are not evidence: the run first waits for the load to fall (``--wait-idle``),
and if it is still above ``--max-load`` (default: the core count) at either end, the tables
withhold every ratio and say why. Batch times are the median of interleaved repetitions with
their spread (min-max across repetitions, in % of the median).

    .venv/bin/python bench/inference.py --quick --wait-idle 600   # what the results files come from

    .venv/bin/python bench/inference.py            # full (tens of minutes: tl2cgen is slow)
    .venv/bin/python bench/inference.py --quick    # small models, a minute or two

lleaves 1.3.0 needs llvmlite < 0.45. If the venv's llvmlite is newer (shap/numba pull
0.50), install 0.44 aside: ``pip install --no-deps --target .venv/bench-llvmlite044
llvmlite==0.44.0``; this script puts that directory first on sys.path.
"""

from __future__ import annotations

import argparse
import ctypes
import hashlib
import json
import os
import platform
import resource
import subprocess
import sys
import tempfile
import time
import traceback
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
LLVMLITE_ASIDE = Path(os.environ.get("LUMBER_BENCH_LLVMLITE", ROOT / ".venv" / "bench-llvmlite044"))
if LLVMLITE_ASIDE.is_dir():
    sys.path.insert(0, str(LLVMLITE_ASIDE))

import _outputs  # noqa: E402
import lumber  # noqa: E402

RESULTS = ROOT / "bench" / "results"
CACHE = Path(tempfile.gettempdir()) / "lumber-bench-models"
MISMATCH_RTOL = 1e-9


# -- timing helpers -------------------------------------------------------------------------------

def cpu_now() -> float:
    """CPU seconds of this process and its finished children (compilers)."""
    s = resource.getrusage(resource.RUSAGE_SELF)
    c = resource.getrusage(resource.RUSAGE_CHILDREN)
    return s.ru_utime + s.ru_stime + c.ru_utime + c.ru_stime


def timed(fn: Callable[[], Any]) -> tuple[Any, float, float]:
    w0, c0 = time.perf_counter(), cpu_now()
    out = fn()
    return out, time.perf_counter() - w0, cpu_now() - c0


HARNESS = r"""
#define _POSIX_C_SOURCE 199309L
#include <stdint.h>
#include <time.h>
union EntryD { int missing; double fvalue; int qvalue; };
union EntryF { int missing; float fvalue; int qvalue; };
/* CPU time of this thread: the cores are shared, so wall time would count other processes' turns */
static double now(void) { struct timespec t; clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t); return t.tv_sec * 1e9 + t.tv_nsec; }
volatile double lb_sink;
double lb_lumber_d(void *fn, const double *X, int64_t n, int64_t F, int64_t calls) {
    void (*f)(const double *, double *) = (void (*)(const double *, double *))fn; double out[256], s = 0;
    double t0 = now(); for (int64_t i = 0; i < calls; ++i) { f(X + (i % n) * F, out); s += out[0]; }
    double t1 = now(); lb_sink = s; return (t1 - t0) / calls; }
double lb_lumber_f(void *fn, const float *X, int64_t n, int64_t F, int64_t calls) {
    void (*f)(const float *, double *) = (void (*)(const float *, double *))fn; double out[256], s = 0;
    double t0 = now(); for (int64_t i = 0; i < calls; ++i) { f(X + (i % n) * F, out); s += out[0]; }
    double t1 = now(); lb_sink = s; return (t1 - t0) / calls; }
double lb_lleaves(void *fn, const double *X, int64_t n, int64_t F, int64_t calls) {
    void (*f)(const double *, double *, int32_t, int32_t) = (void (*)(const double *, double *, int32_t, int32_t))fn;
    double out[256], s = 0;
    double t0 = now(); for (int64_t i = 0; i < calls; ++i) { f(X + (i % n) * F, out, 0, 1); s += out[0]; }
    double t1 = now(); lb_sink = s; return (t1 - t0) / calls; }
double lb_tl2cgen_d(void *fn, const double *X, int64_t n, int64_t F, int64_t calls, union EntryD *buf) {
    void (*f)(union EntryD *, int, double *) = (void (*)(union EntryD *, int, double *))fn; double out[256], s = 0;
    for (int64_t i = 0; i < n * F; ++i) { if (X[i] != X[i]) buf[i].missing = -1; else buf[i].fvalue = X[i]; }
    double t0 = now(); for (int64_t i = 0; i < calls; ++i) { f(buf + (i % n) * F, 1, out); s += out[0]; }
    double t1 = now(); lb_sink = s; return (t1 - t0) / calls; }
double lb_tl2cgen_f(void *fn, const double *X, int64_t n, int64_t F, int64_t calls, union EntryF *buf) {
    void (*f)(union EntryF *, int, float *) = (void (*)(union EntryF *, int, float *))fn; float out[256]; double s = 0;
    for (int64_t i = 0; i < n * F; ++i) { if (X[i] != X[i]) buf[i].missing = -1; else buf[i].fvalue = (float)X[i]; }
    double t0 = now(); for (int64_t i = 0; i < calls; ++i) { f(buf + (i % n) * F, 1, out); s += out[0]; }
    double t1 = now(); lb_sink = s; return (t1 - t0) / calls; }
"""


class Harness:
    """The C loop that times one-row calls of a peer's C entry point."""

    def __init__(self, workdir: Path) -> None:
        src = workdir / "harness.c"
        src.write_text(HARNESS)
        lib = workdir / "harness.so"
        subprocess.run(["cc", "-O2", "-fPIC", "-shared", "-std=c99", str(src), "-o", str(lib)], check=True)
        self.lib = ctypes.CDLL(str(lib))
        for name in ("lb_lumber_d", "lb_lumber_f", "lb_lleaves", "lb_tl2cgen_d", "lb_tl2cgen_f"):
            getattr(self.lib, name).restype = ctypes.c_double

    def ns_per_call(self, kind: str, fn: int, X: np.ndarray, calls: int) -> float:
        n, F = X.shape
        args: list[Any] = [ctypes.c_void_p(fn)]
        if kind == "lumber_f":
            Xc = np.ascontiguousarray(X, dtype=np.float32)
        else:
            Xc = np.ascontiguousarray(X, dtype=np.float64)
        args += [ctypes.c_void_p(Xc.ctypes.data), ctypes.c_int64(n), ctypes.c_int64(F), ctypes.c_int64(calls)]
        if kind.startswith("tl2cgen"):
            buf = np.zeros(n * F * 8 + 8, dtype=np.uint8)
            args.append(ctypes.c_void_p(buf.ctypes.data))
        return float(getattr(self.lib, f"lb_{kind}")(*args))


# -- models -----------------------------------------------------------------------------------------

@dataclass
class ModelCase:
    name: str
    library: str
    model: Any
    path: Path | None                      # LightGBM text file (lleaves reads it)
    X: np.ndarray                          # batch rows
    raw: Callable[[np.ndarray, int], np.ndarray]
    proba: Callable[[np.ndarray], np.ndarray] | None = None
    forest: Any = None
    corpus: np.ndarray | None = None
    notes: str = ""
    nan: bool = True                       # the library accepts NaN (else the corpus has none)


def synthetic(n: int, F: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, F))
    y = X[:, : F // 5].sum(1) + np.sin(X[:, F // 5: 2 * F // 5]).sum(1) + 0.3 * rng.normal(size=n)
    return X, y


def _cache_key(*parts: Any) -> str:
    return hashlib.sha256(json.dumps(parts, sort_keys=True, default=str).encode()).hexdigest()[:16]


def build_models(quick: bool, n_batch: int) -> list[ModelCase]:
    import joblib
    import lightgbm as lgb
    import xgboost as xgb
    from sklearn.ensemble import RandomForestRegressor

    CACHE.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(1)
    trees, leaves, depth = (50, 15, 4) if quick else (500, 63, 8)
    cases: list[ModelCase] = []

    credit = lumber.datasets.load("credit")
    Xc = credit.X.to_numpy(dtype=np.float64)
    yc = np.asarray(credit.y)
    cats = [i for i, f in enumerate(credit.features) if f.kind.name == "CATEGORICAL"]
    params = {"objective": "binary", "num_leaves": leaves, "max_depth": depth, "learning_rate": 0.05,
              "verbose": -1, "num_threads": 2, "max_cat_to_onehot": 1, "seed": 0}
    path = CACHE / f"lgb-credit-{_cache_key(params, trees, cats)}.txt"
    if not path.exists():
        bst = lgb.train(params, lgb.Dataset(Xc, yc, categorical_feature=cats), trees)
        bst.save_model(str(path))
    bst = lgb.Booster(model_file=str(path))
    Xb = Xc[rng.integers(0, len(Xc), n_batch)]
    cases.append(ModelCase(
        "lightgbm-credit", "lightgbm", bst, path, Xb,
        raw=lambda X, k, b=bst: b.predict(X, raw_score=True, num_threads=k),
        proba=lambda X, b=bst: b.predict(X, num_threads=1),
        notes=f"binary, {trees} trees x {leaves} leaves (max depth {depth}), categorical EDUCATION/MARRIAGE/SEX"))

    n_syn, F = (20_000, 20) if quick else (200_000, 50)
    Xs, ys = synthetic(n_syn, F)
    params = {"objective": "regression", "num_leaves": leaves, "max_depth": depth, "learning_rate": 0.05,
              "verbose": -1, "num_threads": 2, "seed": 0}
    path = CACHE / f"lgb-syn-{_cache_key(params, trees, n_syn, F)}.txt"
    if not path.exists():
        bst = lgb.train(params, lgb.Dataset(Xs, ys), trees)
        bst.save_model(str(path))
    bst2 = lgb.Booster(model_file=str(path))
    Xsb = Xs[rng.integers(0, len(Xs), n_batch)]
    Xsb[rng.random(Xsb.shape) < 0.01] = np.nan
    cases.append(ModelCase(
        "lightgbm-synthetic", "lightgbm", bst2, path, Xsb,
        raw=lambda X, k, b=bst2: b.predict(X, raw_score=True, num_threads=k),
        notes=f"regression, {n_syn} x {F} synthetic, {trees} trees x {leaves} leaves (max depth {depth}), 1% NaN"))

    xparams = {"objective": "reg:squarederror", "max_depth": 4 if quick else 6, "eta": 0.05, "seed": 0,
               "nthread": 2, "tree_method": "hist"}
    path = CACHE / f"xgb-syn-{_cache_key(xparams, trees, n_syn, F)}.json"
    if not path.exists():
        xb = xgb.train(xparams, xgb.DMatrix(Xs, ys), trees)
        xb.save_model(str(path))
    xbst = xgb.Booster(model_file=str(path))

    def xgb_raw(X: np.ndarray, k: int, b: Any = xbst) -> np.ndarray:
        b.set_param({"nthread": k})
        return b.inplace_predict(X, predict_type="margin")

    cases.append(ModelCase("xgboost-synthetic", "xgboost", xbst, path, Xsb, raw=xgb_raw,
                           notes=f"regression, {trees} trees, max depth {xparams['max_depth']}, float32 compares"))

    rf_trees, rf_depth, rf_rows = (20, 6, 5000) if quick else (100, 10, 50_000)
    path = CACHE / f"rf-syn-{_cache_key(rf_trees, rf_depth, rf_rows, n_syn, F)}.joblib"
    if not path.exists():
        rf = RandomForestRegressor(rf_trees, max_depth=rf_depth, n_jobs=2, random_state=0).fit(Xs[:rf_rows], ys[:rf_rows])
        joblib.dump(rf, path)
    rf = joblib.load(path)

    def rf_raw(X: np.ndarray, k: int, m: Any = rf) -> np.ndarray:
        m.set_params(n_jobs=k)
        return m.predict(X)

    cases.append(ModelCase("sklearn-rf-synthetic", "sklearn", rf, path, Xsb, raw=rf_raw,
                           notes=f"RandomForestRegressor, {rf_trees} trees, max depth {rf_depth}, float32 compares"))

    from sklearn.ensemble import GradientBoostingRegressor

    gb_trees, gb_depth, gb_rows = (30, 4, 5000) if quick else (300, 6, 20_000)
    path = CACHE / f"gbr-syn-{_cache_key(gb_trees, gb_depth, gb_rows, n_syn, F)}.joblib"
    if not path.exists():
        gb = GradientBoostingRegressor(n_estimators=gb_trees, max_depth=gb_depth, random_state=0)
        joblib.dump(gb.fit(Xs[:gb_rows], ys[:gb_rows]), path)
    gb = joblib.load(path)
    Xg = Xs[rng.integers(0, len(Xs), n_batch)]  # scikit-learn's GradientBoosting refuses NaN

    cases.append(ModelCase("sklearn-gbr-synthetic", "sklearn", gb, path, Xg, raw=lambda X, k, m=gb: m.predict(X), nan=False,
                           notes=f"GradientBoostingRegressor, {gb_trees} trees, max depth {gb_depth}, float32 "
                                 "compares, no NaN"))
    cases += oblivious_cases(quick, n_batch, Xs, ys, rng)
    for c in cases:
        c.forest = lumber.load(c.model)
    return cases


def boundary_corpus(forest: Any, X: np.ndarray, max_nodes: int, seed: int = 0) -> np.ndarray:
    """For sampled splits: rows on the threshold and one float above/below (input dtype); NaN and category probes."""
    rng = np.random.default_rng(seed)
    f32 = forest.schema.input_dtype == "float32"
    dt = np.float32 if f32 else np.float64
    internal = np.flatnonzero(~forest.is_leaf)
    if internal.size > max_nodes:
        internal = np.sort(rng.choice(internal, max_nodes, replace=False))
    rows = []
    for node in internal:
        f = int(forest.feature[node])
        if forest.is_categorical[node]:
            cs = forest.categories_of(int(node))
            probes = [float(cs[0]), float(cs[-1]) + 0.5, -0.5, float(cs[0]) + 1.0]
        else:
            t = forest.threshold[node]
            td = dt(t)
            probes = [float(t), float(td), float(np.nextafter(td, dt(np.inf))), float(np.nextafter(td, dt(-np.inf)))]
        base = X[rng.integers(0, len(X), len(probes))].copy()
        base[np.arange(len(probes)), f] = probes
        rows.append(base)
    for f in range(forest.n_features):
        base = X[rng.integers(0, len(X), 2)].copy()
        base[0, f] = np.nan
        base[1, f] = 0.0
        rows.append(base)
    R = np.concatenate(rows)
    with np.errstate(over="ignore"):
        finite = np.isfinite(R.astype(dt)) | np.isnan(R)
    return R[finite.all(axis=1)]


# -- peers --------------------------------------------------------------------------------------------

@dataclass
class Peer:
    name: str
    space: str = "raw"                                   # "raw" margins or "proba" (class 1)
    status: str = "ok"
    compile_wall: float | None = None
    compile_cpu: float | None = None
    predict: Callable[[np.ndarray, int], np.ndarray] | None = None
    row: Callable[[np.ndarray], Any] | None = None       # single-row Python call
    c_entry: tuple[str, int] | None = None               # (harness kind, function address)
    keep: list[Any] = field(default_factory=list)         # objects that must stay alive
    results: dict[str, Any] = field(default_factory=dict)


def peer_library(case: ModelCase) -> Peer:
    p = Peer(f"{case.library} predict", compile_wall=0.0, compile_cpu=0.0)
    p.predict = case.raw
    p.row = lambda x: case.raw(x[None, :], 1)
    return p


def peer_tl2cgen(case: ModelCase, workdir: Path) -> Peer:
    import tl2cgen
    import treelite

    p = Peer("treelite+tl2cgen")

    def build() -> tuple[Any, Path]:
        if case.library == "lightgbm":
            tm = treelite.frontend.from_lightgbm(case.model)
        elif case.library == "xgboost":
            tm = treelite.frontend.from_xgboost(case.model)
        else:
            tm = treelite.sklearn.import_model(case.model)
        d = workdir / f"tl2cgen-{case.name}"
        tl2cgen.generate_c_code(tm, d, params={"parallel_comp": 8})
        lib = tl2cgen.create_shared("gcc", d, nthread=2, long_build_time_warning=False)
        return tm, Path(lib)

    (tm, lib), p.compile_wall, p.compile_cpu = timed(build)
    header = (workdir / f"tl2cgen-{case.name}" / "header.h").read_text()
    single = "float fvalue" in header
    dtype = "float32" if single else "float64"
    preds = {k: tl2cgen.Predictor(lib, nthread=k) for k in (1, 2)}

    def predict(X: np.ndarray, k: int) -> np.ndarray:
        out = preds[k].predict(tl2cgen.DMatrix(X.astype(dtype), dtype=dtype), pred_margin=True)
        return np.asarray(out, dtype=np.float64).reshape(len(X), -1)[:, 0]

    p.predict = predict
    p.row = lambda x: preds[1].predict(tl2cgen.DMatrix(x[None, :].astype(dtype), dtype=dtype), pred_margin=True)
    raw = ctypes.CDLL(str(lib))
    p.keep += [raw, preds, tm]
    p.c_entry = ("tl2cgen_f" if single else "tl2cgen_d", ctypes.cast(raw.predict, ctypes.c_void_p).value or 0)
    return p


def peer_lleaves(case: ModelCase) -> Peer:
    import lleaves

    p = Peer("lleaves")
    m = lleaves.Model(model_file=str(case.path))
    _, p.compile_wall, p.compile_cpu = timed(lambda: m.compile(raw_score=True, finline=False))
    p.predict = lambda X, k: m.predict(X, n_jobs=k)
    p.row = lambda x: m.predict(x[None, :], n_jobs=1)
    p.c_entry = ("lleaves", int(m._execution_engine.get_function_address("forest_root")))
    p.keep.append(m)
    return p


def peer_ort_converter(case: ModelCase) -> Peer:
    import onnxruntime as ort

    F = case.X.shape[1]
    if case.library == "sklearn":
        from skl2onnx import to_onnx

        name = "onnxruntime (skl2onnx)"
        conv = lambda: to_onnx(case.model, case.X[:1].astype(np.float32))  # noqa: E731
    else:
        import onnxmltools
        from onnxmltools.convert.common.data_types import FloatTensorType

        name = "onnxruntime (onnxmltools)"
        fn = onnxmltools.convert_lightgbm if case.library == "lightgbm" else onnxmltools.convert_xgboost
        conv = lambda: fn(case.model, initial_types=[("X", FloatTensorType([None, F]))],  # noqa: E731
                          target_opset=15, zipmap=False) if case.library == "lightgbm" else \
            fn(case.model, initial_types=[("X", FloatTensorType([None, F]))], target_opset=15)
    p = Peer(name)
    model, p.compile_wall, p.compile_cpu = timed(conv)
    data = model.SerializeToString()
    sessions = {}
    for k in (1, 2):
        so = ort.SessionOptions()
        so.intra_op_num_threads = k
        sessions[k] = ort.InferenceSession(data, so, providers=["CPUExecutionProvider"])
    outs = [o.name for o in sessions[1].get_outputs()]
    prob = next((o for o in outs if "prob" in o.lower()), None)
    p.space = "proba" if prob else "raw"
    target = prob or outs[0]
    inp = sessions[1].get_inputs()[0].name

    def predict(X: np.ndarray, k: int) -> np.ndarray:
        y = sessions[k].run([target], {inp: X.astype(np.float32)})[0]
        y = np.asarray(y, dtype=np.float64).reshape(len(X), -1)
        return y[:, -1] if p.space == "proba" else y[:, 0]

    p.predict = predict
    p.row = lambda x: sessions[1].run([target], {inp: x[None, :].astype(np.float32)})
    return p


def peer_onedal(case: ModelCase) -> Peer:
    """oneDAL's gradient-boosting inference, through daal4py's model builders (threads: daalinit)."""
    import daal4py as d4p

    p = Peer("oneDAL (daal4py)")
    m, p.compile_wall, p.compile_cpu = timed(lambda: d4p.mb.convert_model(case.model))
    classify = bool(getattr(m, "is_classifier_", False))
    p.space = "proba" if classify else "raw"

    def predict(X: np.ndarray, k: int) -> np.ndarray:
        d4p.daalinit(k)
        y = m.predict_proba(X)[:, -1] if classify else m.predict(X)
        return np.asarray(y, dtype=np.float64).reshape(len(X), -1)[:, 0]

    p.predict = predict
    p.row = lambda x: m.predict_proba(x[None, :]) if classify else m.predict(x[None, :])
    p.keep.append(m)
    return p


def peer_ydf(case: ModelCase) -> Peer:
    """YDF (its fastest engine: QuickScorer for GBTs) on the scikit-learn model, via ``ydf.from_sklearn``."""
    import ydf

    p = Peer("YDF")
    m, p.compile_wall, p.compile_cpu = timed(lambda: ydf.from_sklearn(case.model))
    try:
        p.results["engine"] = str(m.list_compatible_engines()[0])
    except Exception:  # noqa: BLE001 - the engine name is information only
        pass
    p.predict = lambda X, k: np.asarray(m.predict({"features": X.astype(np.float32)}, num_threads=k),
                                        dtype=np.float64).reshape(len(X), -1)[:, -1]
    p.row = lambda x: m.predict({"features": x[None, :].astype(np.float32)}, num_threads=1)
    p.keep.append(m)
    return p


def peer_timber(case: ModelCase, workdir: Path) -> Peer:
    """timber-compiler's C99 output (float32 in and out, one thread); it may refuse a model: recorded."""
    from timber.runtime.predictor import TimberPredictor

    p = Peer("timber-compiler")
    if case.path is None:
        raise ValueError("no model file for timber")
    src = case.path
    if case.library == "sklearn":  # timber reads scikit-learn models as plain pickles, not joblib files
        import pickle

        src = workdir / f"{case.name}.pkl"
        src.write_bytes(pickle.dumps(case.model))
    m, p.compile_wall, p.compile_cpu = timed(lambda: TimberPredictor.from_model(str(src)))

    def predict(X: np.ndarray, k: int) -> np.ndarray:
        return np.asarray(m.predict(X), dtype=np.float64).reshape(len(X), -1)[:, -1]

    p.predict = predict
    p.row = lambda x: m.predict_single(x)
    p.results["threads"] = "1 (no thread option)"
    p.keep.append(m)
    return p


def _runs_library(p: Peer, pred: Any, case: ModelCase) -> Any:
    """``p`` predicts with a lumber C library (either form: same ABI); returns the library."""
    K = case.forest.n_outputs
    p.predict = lambda X, k: pred.predict_raw(X, threads=k) if K == 1 else pred.predict_raw(X, threads=k)[:, -1]
    p.row = pred.predict_row
    lib = pred.library
    kind = "lumber_f" if lib.dtype == np.float32 else "lumber_d"
    p.c_entry = (kind, ctypes.cast(lib.raw_function, ctypes.c_void_p).value or 0)
    p.keep.append(pred)
    return lib


def peer_lumber_c(case: ModelCase) -> Peer:
    p = Peer("lumber C")
    pred, p.compile_wall, p.compile_cpu = timed(lambda: lumber.compile(case.forest, target="c"))
    lib = _runs_library(p, pred, case)
    p.results["openmp"] = lib.has_openmp
    p.results["walk"] = lib.metadata.get("walk", "values")
    return p


def peer_lumber_onnx(case: ModelCase) -> Peer:
    p = Peer("lumber ONNX")
    first, p.compile_wall, p.compile_cpu = timed(lambda: lumber.compile(case.forest, target="onnx", threads=1))
    preds = {1: first, 2: lumber.compile(case.forest, target="onnx", threads=2)}
    preds[1].session, preds[2].session  # noqa: B018  (sessions are created before timing)
    p.predict = lambda X, k: preds[k].predict_raw(X)
    p.row = lambda x: preds[1].predict_raw(x[None, :])
    p.results["input_dtype"] = str(first.dtype)
    p.keep.append(preds)
    return p


def peer_lumber_oblivious(case: ModelCase, workdir: Path) -> Peer:
    """The oblivious-table C library (re-composed unless the model is already oblivious)."""
    p = Peer("lumber oblivious C")
    pred, p.compile_wall, p.compile_cpu = timed(lambda: lumber.compile(
        case.forest, target="table-c", options=lumber.TableCOptions(prefix="obl")))
    _runs_library(p, pred, case)
    stats = pred.report["tables"]
    p.results["tables"] = {k: v for k, v in stats.items() if k != "recompose"}
    if "recompose" in stats:
        rc = stats["recompose"]
        p.results["tables"]["recompose"] = {k: rc[k] for k in ("monomials", "searched", "extensions", "merged",
                                                                 "seconds", "max_depth_cap") if k in rc}
    return p


def oblivious_cases(quick: bool, n_batch: int, Xs: np.ndarray, ys: np.ndarray, rng: np.random.Generator
                    ) -> list[ModelCase]:
    """The oblivious-table cases (bench/oblivious.py): CatBoost depth 6 and 8 (500 trees) and a shallow LightGBM model."""
    import catboost
    import lightgbm as lgb

    cases = []
    trees = 50 if quick else 500
    Xb = Xs[rng.integers(0, len(Xs), n_batch)]
    Xb[rng.random(Xb.shape) < 0.01] = np.nan
    n_fit = min(len(Xs), 5_000 if quick else 20_000)
    for depth in ((4, 6) if quick else (6, 8)):
        params = {"iterations": trees, "depth": depth, "learning_rate": 0.1, "random_seed": 0, "thread_count": 2,
                  "verbose": 0, "allow_writing_files": False}
        path = CACHE / f"cb-syn-{_cache_key(params, n_fit, Xs.shape)}.cbm"
        if not path.exists():
            Xf = Xs[:n_fit].copy()
            Xf[np.random.default_rng(2).random(Xf.shape) < 0.01] = np.nan
            catboost.CatBoostRegressor(**params).fit(Xf, ys[:n_fit]).save_model(str(path))
        m = catboost.CatBoostRegressor()
        m.load_model(str(path))
        cases.append(ModelCase(
            f"catboost-d{depth}", "catboost", m, None, Xb,
            raw=lambda X, k, m=m: m.predict(X, prediction_type="RawFormulaVal", thread_count=k),
            notes=f"CatBoostRegressor, {trees} symmetric trees of depth {depth}, fit on {n_fit} synthetic rows "
                  f"(1% NaN), float32 compares"))
    params = {"objective": "regression", "num_leaves": 8, "max_depth": 3, "learning_rate": 0.1, "verbose": -1,
              "num_threads": 2, "seed": 0}
    path = CACHE / f"lgb-shallow-{_cache_key(params, trees, Xs.shape)}.txt"
    if not path.exists():
        lgb.train(params, lgb.Dataset(Xs, ys), trees).save_model(str(path))
    bst = lgb.Booster(model_file=str(path))
    cases.append(ModelCase(
        "lightgbm-shallow", "lightgbm", bst, path, Xb,
        raw=lambda X, k, b=bst: b.predict(X, raw_score=True, num_threads=k),
        notes=f"regression, synthetic, {trees} trees x 8 leaves (max depth 3), 1% NaN"))
    return cases


PEERS: list[tuple[str, Callable[..., Peer], Callable[[ModelCase], bool]]] = [
    ("library", lambda c, w: peer_library(c), lambda c: True),
    ("tl2cgen", peer_tl2cgen, lambda c: c.library != "catboost"),
    ("lleaves", lambda c, w: peer_lleaves(c), lambda c: c.library == "lightgbm"),
    ("ort", lambda c, w: peer_ort_converter(c), lambda c: c.library != "catboost"),
    ("onedal", lambda c, w: peer_onedal(c), lambda c: c.library in ("lightgbm", "xgboost", "catboost")),
    ("ydf", lambda c, w: peer_ydf(c), lambda c: c.library == "sklearn"),
    ("timber", peer_timber, lambda c: c.library in ("lightgbm", "xgboost", "sklearn")),
    ("lumber-c", lambda c, w: peer_lumber_c(c), lambda c: True),
    ("lumber-onnx", lambda c, w: peer_lumber_onnx(c), lambda c: True),
    # issue 5 (bench/oblivious.py): oblivious decision tables
    ("lumber-oblivious", peer_lumber_oblivious, lambda c: True),
]
"""(key, factory(case, workdir), applies-to). A later issue appends its peers here."""


def failed(name: str, exc: BaseException) -> Peer:
    msg = f"{type(exc).__name__}: {str(exc).strip().splitlines()[0] if str(exc).strip() else ''}"[:300]
    return Peer(name, status=f"failed: {msg}")


# -- measurements -------------------------------------------------------------------------------------

def reference(case: ModelCase, X: np.ndarray, space: str) -> np.ndarray:
    if space == "proba" and case.proba is not None:
        return np.asarray(case.proba(X), dtype=np.float64).reshape(len(X), -1)[:, -1]
    return np.asarray(case.raw(X, 1), dtype=np.float64).reshape(len(X), -1)[:, -1]


def accuracy(case: ModelCase, p: Peer) -> None:
    assert p.predict is not None and case.corpus is not None
    for label, X in (("batch", case.X), ("corpus", case.corpus)):
        try:
            got = np.asarray(p.predict(X, 1), dtype=np.float64).reshape(len(X), -1)[:, -1]
        except Exception as exc:  # a peer may refuse NaN or odd values: report it
            p.results[f"{label}_error"] = f"{type(exc).__name__}: {str(exc)[:200]}"
            continue
        ref = reference(case, X, p.space)
        diff = np.abs(got - ref)
        diff[np.isnan(got) & np.isnan(ref)] = 0.0
        diff[np.isnan(got) ^ np.isnan(ref)] = np.inf
        if label == "batch":
            p.results["max_abs_diff"] = float(diff.max())
        else:
            p.results["corpus_rows"] = int(len(X))
            p.results["corpus_mismatch"] = int((diff > MISMATCH_RTOL * (1 + np.abs(ref))).sum())
            p.results["corpus_not_bitexact"] = int((diff > 0).sum())
    p.results["compared_in"] = p.space


def single_row(harness: Harness, case: ModelCase, p: Peer, calls: int) -> None:
    rows = case.X[:256]
    if p.row is not None:
        times = []
        for g in range(5):
            t0 = time.perf_counter()
            for i in range(calls // 5):
                p.row(rows[(g * 7 + i) % len(rows)])
            times.append((time.perf_counter() - t0) / (calls // 5))
        p.results["row_python_us"] = float(np.median(times) * 1e6)
    if p.c_entry is not None and p.c_entry[1]:
        kind, addr = p.c_entry
        reps = [harness.ns_per_call(kind, addr, rows, calls * 4) for _ in range(3)]
        p.results["row_c_ns"] = float(np.median(reps))


MAX_PAIRS = 5


def batch_pairs(p: Peer, X: np.ndarray, pair_seconds: float) -> None:
    """One repetition of a peer's batch: alternating 1-thread / 2-thread calls, back to back.

    The first pair gives the repetition's 1-thread wall and CPU time and 2-thread wall time (one call
    each, the same for every peer). A fast peer makes more pairs, as many as last about
    ``pair_seconds`` (decided in the first repetition, at most MAX_PAIRS): the fastest 1-thread and
    2-thread wall times among them give the repetition's thread scaling, so that a transient on
    either core (another process, the hypervisor) during one 2-thread call does not count as the
    peer's scaling. A 2-thread call of a short batch is hit by anything on either core, a 1-thread
    call only by what lands on its own core.
    """
    n = p.results.get("batch_pairs", 1)
    calls: dict[int, list[float]] = {1: [], 2: []}
    for j in range(n):
        for k in (1, 2):
            t0, c0 = time.perf_counter(), time.process_time()
            p.predict(X, k)
            wall, cpu = time.perf_counter() - t0, time.process_time() - c0
            calls[k].append(wall)
            if j == 0:
                p.results.setdefault(f"batch_{k}t", []).append(wall)
                if k == 1:
                    p.results.setdefault("batch_1t_cpu", []).append(cpu)
    if "batch_pairs" not in p.results:
        p.results["batch_pairs"] = int(min(MAX_PAIRS, max(1, pair_seconds // max(1e-9, calls[1][0] + calls[2][0]))))
    p.results.setdefault("fastest_1t", []).append(min(calls[1]))
    p.results.setdefault("fastest_2t", []).append(min(calls[2]))


def wait_idle(max_load: float, seconds: float) -> float:
    """Wait (up to ``seconds``) for the 1-minute load average to fall to ``max_load``; the seconds waited."""
    t0 = time.perf_counter()
    while os.getloadavg()[0] > max_load and time.perf_counter() - t0 < seconds:
        print(f"[load] {os.getloadavg()[0]:.2f} > {max_load:.2f}: waiting", flush=True)
        time.sleep(min(15.0, max(1.0, seconds - (time.perf_counter() - t0))))
    return time.perf_counter() - t0


def run(args: argparse.Namespace) -> dict[str, Any]:
    # bench/oblivious.py calls run() with its own namespace: the options it does not set take main()'s defaults
    args = argparse.Namespace(**{"max_load": float(os.cpu_count() or 1), "wait_idle": 0.0, "pair_seconds": 1.0,
                                 **vars(args)})
    n_batch = 10_000 if args.quick else 100_000
    reps = args.reps or (3 if args.quick else 5)
    waited = wait_idle(args.max_load, args.wait_idle) if args.wait_idle else 0.0
    load0 = os.getloadavg()
    t_start = time.perf_counter()
    workdir = Path(tempfile.mkdtemp(prefix="lumber-bench-"))
    harness = Harness(workdir)
    cases = build_models(args.quick, n_batch)
    if args.models:
        cases = [c for c in cases if c.name in args.models]
    peers: dict[str, list[Peer]] = {}
    for case in cases:
        case.corpus = boundary_corpus(case.forest, case.X, 1000 if args.quick else 8000)
        if not case.nan:
            case.corpus = case.corpus[~np.isnan(case.corpus).any(axis=1)]
        peers[case.name] = []
        for key, make, applies in PEERS:
            if not applies(case) or (args.peers and key not in args.peers):
                continue
            print(f"[setup] {case.name}: {key}", flush=True)
            try:
                p = make(case, workdir)
            except BaseException as exc:  # noqa: BLE001 - any peer failure is a result, not a crash
                if isinstance(exc, KeyboardInterrupt):
                    raise
                p = failed(key, exc)
                traceback.print_exc(limit=2)
            peers[case.name].append(p)
            if p.status == "ok":
                accuracy(case, p)
    for rep in range(reps):  # interleaved: every (model, peer) once per repetition
        print(f"[batch] repetition {rep + 1}/{reps}", flush=True)
        for case in cases:
            for p in peers[case.name]:
                if p.status != "ok" or p.predict is None:
                    continue
                try:
                    batch_pairs(p, case.X, args.pair_seconds)
                except Exception as exc:  # noqa: BLE001
                    p.status = f"failed in predict: {type(exc).__name__}: {exc}"[:300]
    for case in cases:
        for p in peers[case.name]:
            if p.status != "ok":
                continue
            print(f"[row] {case.name}: {p.name}", flush=True)
            single_row(harness, case, p, 500 if args.quick else 2000)
    load1 = os.getloadavg()
    res = report(cases, peers, n_batch, reps, load0, load1, time.perf_counter() - t_start, args.quick)
    res["pair_seconds"] = args.pair_seconds
    res["machine"]["waited_for_idle_s"] = waited
    res["machine"]["max_load"] = args.max_load
    res["ratios_valid"] = max(load0[0], load1[0]) <= args.max_load
    if not res["ratios_valid"]:
        for entry in res["models"].values():
            for r in entry["peers"].values():
                r.pop("ratio_to_lumber_c", None)
    return res


def _versions() -> dict[str, str]:
    import importlib.metadata as md

    out = {}
    for pkg in ("lumber", "numpy", "lightgbm", "xgboost-cpu", "scikit-learn", "treelite", "tl2cgen", "lleaves",
                "llvmlite", "onnx", "onnxruntime", "onnxmltools", "skl2onnx", "scikit-learn-intelex", "daal", "ydf",
                "timber-compiler"):
        try:
            out[pkg] = md.version(pkg)
        except md.PackageNotFoundError:
            out[pkg] = "not installed"
    try:
        import llvmlite

        out["llvmlite (imported)"] = llvmlite.__version__
    except Exception:  # noqa: BLE001
        pass
    try:
        out["cc"] = subprocess.run(["cc", "--version"], capture_output=True, text=True).stdout.splitlines()[0]
    except (OSError, IndexError):
        out["cc"] = "missing"
    return out


def report(cases: list[ModelCase], peers: dict[str, list[Peer]], n_batch: int, reps: int,
           load0: tuple[float, ...], load1: tuple[float, ...], seconds: float, quick: bool) -> dict[str, Any]:
    out: dict[str, Any] = {
        "benchmark": "inference",
        "mode": "quick" if quick else "full",
        "rows": n_batch,
        "repetitions": reps,
        "machine": {"cpus": os.cpu_count(), "platform": platform.platform(), "python": platform.python_version(),
                    "loadavg_start": load0, "loadavg_end": load1},
        "versions": _versions(),
        "seconds": seconds,
        "models": {},
    }
    for case in cases:
        T = case.forest.n_trees
        entry: dict[str, Any] = {"notes": case.notes, "trees": T, "nodes": case.forest.n_nodes,
                                 "features": case.forest.n_features, "corpus_rows": int(len(case.corpus)),
                                 "peers": {}}
        for p in peers[case.name]:
            r = dict(p.results)
            for key in ("batch_1t", "batch_2t", "batch_1t_cpu"):
                if key in r:
                    runs = r[key]
                    r[f"{key}_runs"] = runs
                    r[key] = float(np.median(runs))
                    r[f"{key}_spread_pct"] = float((max(runs) - min(runs)) / r[key] * 100) if r[key] else None
            if r.get("batch_1t") and r.get("batch_2t"):
                # paired: each repetition times 1 and 2 threads back to back, so a change of load between
                # repetitions moves both; the median of the pairs' ratios, not a ratio of two medians.
                # speedup_2t: the fastest of each repetition's pairs (batch_pairs); the first pair's alone too
                first = [one / two for one, two in zip(r["batch_1t_runs"], r["batch_2t_runs"]) if two > 0]
                r["speedup_2t_first_pair_runs"] = first
                r["speedup_2t_first_pair"] = float(np.median(first)) if first else None
                fast = [one / two for one, two in zip(r.get("fastest_1t", r["batch_1t_runs"]),
                                                      r.get("fastest_2t", r["batch_2t_runs"])) if two > 0]
                r["speedup_2t_runs"] = fast
                r["speedup_2t"] = float(np.median(fast)) if fast else None
            if "batch_1t" in r:
                r["ns_per_row_tree_1t"] = r["batch_1t"] / n_batch / T * 1e9
            if "batch_1t_cpu" in r:
                r["cpu_ns_per_row_tree_1t"] = r["batch_1t_cpu"] / n_batch / T * 1e9
            r.update(status=p.status, compile_wall_s=p.compile_wall, compile_cpu_s=p.compile_cpu)
            entry["peers"][p.name] = r
        base = entry["peers"].get("lumber C", {}).get("batch_1t_cpu")
        for r in entry["peers"].values():
            if base and r.get("batch_1t_cpu"):
                r["ratio_to_lumber_c"] = r["batch_1t_cpu"] / base
        out["models"][case.name] = entry
    return out


def _fmt(v: Any, spec: str) -> str:
    if v is None:
        return "–"
    if isinstance(v, float) and v == float("inf"):
        return "inf"
    return format(v, spec)


def markdown(res: dict[str, Any]) -> str:
    m = res["machine"]
    valid = res.get("ratios_valid", True)
    load = (f"load average {m['loadavg_start'][0]:.2f} at start and {m['loadavg_end'][0]:.2f} at end "
            f"({m['cpus']} CPUs")
    load += f", after waiting {m['waited_for_idle_s']:.0f} s for the load to fall)" if m.get("waited_for_idle_s") else ")"
    lines = [f"# Inference benchmark ({res['mode']})", "",
             f"{res['rows']} rows per batch, median of {res['repetitions']} interleaved repetitions; {load}. "
             "The 1-thread columns give process CPU time (cpu s, cpu ns/row/tree) with its spread over the "
             "repetitions (max - min, % of the median); ratio = peer / lumber C on 1-thread CPU time (>1: lumber "
             "C is faster); 2 thr x = median over the repetitions of 1-thread wall / 2-thread wall, timed back to "
             "back in alternating pairs: a repetition makes as many pairs as last about "
             f"{res.get('pair_seconds', 1.0):g} s (at most {MAX_PAIRS}; batch pairs in the JSON) and takes the "
             "fastest 1-thread and 2-thread call of them, so a transient on either core does not count as "
             "scaling (the first pair alone: speedup_2t_first_pair in the JSON); the other batch columns are "
             "the first pair's calls. Row Python µs is one call of the peer's "
             "Python API; row C ns is thread CPU time per call of the peer's C entry point in a C loop. Mismatch: "
             "boundary-corpus rows differing by more than 1e-9 relative from the library; not bit-exact: rows "
             "differing at all.", ""]
    if not valid:
        lines += [f"**Ratios withheld: the load average was above {m.get('max_load', m['cpus'])} (the core count) "
                  "during the run; times are shown but are not evidence.**", ""]
    for name, e in res["models"].items():
        lines += [f"## {name}", "", f"{e['notes']}; {e['trees']} trees, {e['nodes']} nodes, {e['features']} "
                  f"features; boundary corpus {e['corpus_rows']} rows.", "",
                  "| peer | compile s (wall / cpu) | batch 1 thr s (wall / cpu) | spread % | batch 2 thr s | 2 thr x | "
                  "cpu ns/row/tree | ratio | row Python µs | row C ns | max abs diff | corpus mismatch | "
                  "not bit-exact |",
                  "|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
        for pname, r in e["peers"].items():
            if r["status"] != "ok":
                lines.append(f"| {pname} | {r['status']} |  |  |  |  |  |  |  |  |  |  |  |")
                continue
            ratio = r.get("ratio_to_lumber_c") if valid else None
            comp = "–" if r.get("compile_wall_s") in (None, 0.0) else \
                f"{r['compile_wall_s']:.2f} / {r['compile_cpu_s']:.2f}"
            space = " (proba)" if r.get("compared_in") == "proba" else ""
            lines.append(
                f"| {pname} | {comp} | {_fmt(r.get('batch_1t'), '.3f')} / {_fmt(r.get('batch_1t_cpu'), '.3f')} | "
                f"{_fmt(r.get('batch_1t_cpu_spread_pct'), '.0f')} | {_fmt(r.get('batch_2t'), '.3f')} | "
                f"{_fmt(r.get('speedup_2t'), '.2f')} | {_fmt(r.get('cpu_ns_per_row_tree_1t'), '.2f')} | "
                f"{_fmt(ratio, '.2f')} | "
                f"{_fmt(r.get('row_python_us'), '.1f')} | {_fmt(r.get('row_c_ns'), '.0f')} | "
                f"{_fmt(r.get('max_abs_diff'), '.3g')}{space} | "
                f"{r.get('corpus_mismatch', r.get('corpus_error', '–'))} | {r.get('corpus_not_bitexact', '–')} |")
        lines.append("")
    v = res["versions"]
    args = res.get("command", "bench/inference.py" + (" --quick" if res["mode"] == "quick" else ""))
    lines += ["Versions: " + ", ".join(f"{k} {val}" for k, val in v.items()), "",
              f"Total run time {res['seconds']:.0f} s. Produced by `{args}`.", ""]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="small models and batches (a minute or two)")
    ap.add_argument("--reps", type=int, default=None, help="interleaved repetitions (default 5, quick 3)")
    ap.add_argument("--models", nargs="*", help="only these models")
    ap.add_argument("--peers", nargs="*",
                    help="only these peers (library tl2cgen lleaves ort onedal ydf timber lumber-c lumber-onnx "
                         "lumber-oblivious)")
    ap.add_argument("--out", type=Path, default=RESULTS, help="results folder")
    ap.add_argument("--max-load", type=float, default=float(os.cpu_count() or 1),
                    help="1-minute load average above which ratios are withheld (default: the core count)")
    ap.add_argument("--wait-idle", type=float, default=0.0, metavar="SECONDS",
                    help="first wait up to this long for the load to fall to --max-load")
    ap.add_argument("--stem", default=None, help="results file name (default inference / inference-quick)")
    ap.add_argument("--pair-seconds", type=float, default=1.0, metavar="SECONDS",
                    help="a repetition times alternating 1/2-thread pairs of a peer for about this long (at "
                         f"most {MAX_PAIRS} pairs); 2 thr x takes the fastest of each")
    _outputs.add_dry_run(ap)
    args = ap.parse_args(argv)
    stem = args.stem or _outputs.stem("inference", args.quick)
    if _outputs.dry_run(args, args.out / f"{stem}.json", args.out / f"{stem}.md"):
        return 0
    res = run(args)
    res["command"] = "bench/inference.py " + " ".join(argv if argv is not None else sys.argv[1:])
    md = markdown(res)
    write_results(args.out, stem, res, md)
    print(md)
    return 0


def write_results(out: Path, stem: str, res: dict[str, Any], md: str) -> None:
    """``out/stem.json`` (every number) and ``out/stem.md`` (the tables), each written atomically."""
    from lumber.ir import atomic_write_text

    out.mkdir(parents=True, exist_ok=True)
    atomic_write_text(out / f"{stem}.json", json.dumps(res, indent=1, default=float))
    atomic_write_text(out / f"{stem}.md", md)


if __name__ == "__main__":
    sys.exit(main())
