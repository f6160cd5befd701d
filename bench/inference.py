"""Inference benchmark: lumber's C library against the libraries and the tree compilers, on one core.

The protocol, the same for every peer:

* One process, one thread each. Every peer runs as its documentation prescribes for one core and
  otherwise with its defaults: the source library with one thread (LightGBM ``num_threads=1``,
  XGBoost ``nthread=1``); pylignum ``n_jobs=1`` in both engines (its interpreter, and its compiled
  mode after ``compile()`` with default options); lleaves compiled with its default options
  (``raw_score=True`` so it returns margins) and ``n_jobs=1``; treelite + tl2cgen with default code
  generation and ``Predictor(nthread=1)``; onnxruntime (onnxmltools / skl2onnx output) with one
  intra-op and one inter-op thread; oneDAL through daal4py's model builders after ``daalinit(1)``;
  YDF (``ydf.from_sklearn``) with ``num_threads=1``; timber-compiler (one thread, no option);
  lumber C and lumber ONNX with ``threads=1``. lumber C is compiled with ``sample=`` the model's
  training rows, so its walk is chosen on them (``predictor.report``).
* Real rows: the bundled credit, adult and compas data sets, each tiled in file order to the batch
  size (100k rows; ``--quick`` 20k), with a LightGBM 500 x 63 (max depth 8) model on each and an
  XGBoost 500 x depth 8 model on credit; plus LightGBM 500 x 63 on 50 synthetic normal features
  with 1% NaN, and (full runs) scikit-learn GradientBoosting 300 x depth 6.
* Batch: wall and process CPU time of one call on all rows, median of interleaved repetitions (every
  model's peers once per repetition); ns per row per tree from the CPU time.
* Single rows: ``--row-calls`` calls (default 2,000), each on a different row passed as a 1-row 2-D
  array ``X[i:i + 1]`` (the scikit-learn convention serving code uses) through the peer's Python
  API; each call timed (wall), p50 and p99, and the CPU time per call. Peers take turns in rounds,
  so a change of load hits all of them.
* Exactness: max |difference| from the source library on the batch and on the single rows (margins;
  class-1 probabilities for peers that only return those), and mismatches on a boundary corpus (for
  sampled splits rows on the threshold and one float above and below in the model's input dtype;
  NaN and category probes). A mismatch is a difference above 1e-9 relative; ``not bit-exact``
  counts any difference.
* The load average is recorded at the start and end and around every model. Ratios taken while it
  is above ``--max-load`` (default: the core count) are withheld; ``--wait-idle`` first waits for it
  to fall.

    .venv/bin/python bench/inference.py --quick --wait-idle 600   # a few minutes: results/inference-quick.*
    .venv/bin/python bench/inference.py --wait-idle 600           # full: results/inference.* (tens of minutes)

Peers that are missing, fail to convert, or crash are reported with the error. lleaves 1.3.0 needs
llvmlite < 0.45 (the ``bench`` extra pins it); a newer llvmlite pulled in by numba can sit beside it:
``pip install --no-deps --target .venv/bench-llvmlite044 llvmlite==0.44.0`` puts 0.44 first on sys.path.
"""

from __future__ import annotations

import argparse
import functools
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
ROUNDS = 4
"""Single-row calls are made in this many rounds; in each, every peer makes its share in turn."""
SAMPLE_ROWS = 4096
"""Training rows handed to ``lumber.compile(..., sample=)``."""


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


# -- models -----------------------------------------------------------------------------------------

@dataclass
class ModelCase:
    name: str
    library: str
    model: Any
    path: Path | None                      # the model file (LightGBM text, XGBoost JSON, joblib)
    X: np.ndarray                          # batch rows
    raw: Callable[[np.ndarray], np.ndarray]  # the source library's margins, one thread
    proba: Callable[[np.ndarray], np.ndarray] | None = None
    train: np.ndarray | None = None        # training rows (lumber's sample)
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


def tiled(X: np.ndarray, n: int) -> np.ndarray:
    """``X``'s rows repeated in file order to ``n`` rows."""
    return np.ascontiguousarray(np.resize(X, (n, X.shape[1])))


LGB_TREES, LGB_LEAVES, LGB_DEPTH = 500, 63, 8


def _lightgbm(name: str, X: np.ndarray, y: np.ndarray, cats: list[int], objective: str, rows: np.ndarray,
              notes: str) -> ModelCase:
    import lightgbm as lgb

    params = {"objective": objective, "num_leaves": LGB_LEAVES, "max_depth": LGB_DEPTH, "learning_rate": 0.05,
              "verbose": -1, "num_threads": 2, "max_cat_to_onehot": 1, "seed": 0}
    path = CACHE / f"lgb-{name}-{_cache_key(params, LGB_TREES, cats, X.shape)}.txt"
    if not path.exists():
        bst = lgb.train(params, lgb.Dataset(X, y, categorical_feature=cats or "auto"), LGB_TREES)
        bst.save_model(str(path))
    bst = lgb.Booster(model_file=str(path))
    proba = (lambda R, b=bst: b.predict(R, num_threads=1)) if objective == "binary" else None
    return ModelCase(f"lightgbm-{name}", "lightgbm", bst, path, rows,
                     raw=lambda R, b=bst: b.predict(R, raw_score=True, num_threads=1), proba=proba, train=X,
                     notes=f"{objective}, {LGB_TREES} trees x {LGB_LEAVES} leaves (max depth {LGB_DEPTH}); {notes}")


def real_case(data: str, n_batch: int) -> ModelCase:
    """LightGBM 500 x 63 on a bundled data set, its categorical features as categorical splits."""
    d = lumber.datasets.load(data)
    X = d.X.to_numpy(dtype=np.float64)
    cats = [i for i, f in enumerate(d.features) if f.kind.name == "CATEGORICAL"]
    names = ", ".join(d.features[i].name for i in cats) or "none"
    return _lightgbm(data, X, np.asarray(d.y), cats, "binary", tiled(X, n_batch),
                     f"{data} ({len(X)} rows, {X.shape[1]} features, categorical: {names}), its rows tiled")


def synthetic_case(n_batch: int) -> ModelCase:
    Xs, ys = synthetic(200_000, 50)
    rng = np.random.default_rng(1)
    rows = Xs[rng.integers(0, len(Xs), n_batch)]
    rows[rng.random(rows.shape) < 0.01] = np.nan
    return _lightgbm("synthetic", Xs, ys, [], "regression", rows, "200k x 50 synthetic normal rows, 1% NaN")


def xgboost_credit(n_batch: int) -> ModelCase:
    import xgboost as xgb

    d = lumber.datasets.load("credit")
    X = d.X.to_numpy(dtype=np.float64)
    params = {"objective": "binary:logistic", "max_depth": 8, "eta": 0.05, "seed": 0, "nthread": 2,
              "tree_method": "hist"}
    path = CACHE / f"xgb-credit-{_cache_key(params, 500, X.shape)}.json"
    if not path.exists():
        xgb.train(params, xgb.DMatrix(X, np.asarray(d.y)), 500).save_model(str(path))
    bst = xgb.Booster(model_file=str(path))
    bst.set_param({"nthread": 1})
    return ModelCase("xgboost-credit", "xgboost", bst, path, tiled(X, n_batch),
                     raw=lambda R, b=bst: b.inplace_predict(R, predict_type="margin"),
                     proba=lambda R, b=bst: b.inplace_predict(R), train=X,
                     notes="binary, 500 trees, max depth 8, float32 compares; credit, its rows tiled")


def gbr_case(n_batch: int) -> ModelCase:
    import joblib
    from sklearn.ensemble import GradientBoostingRegressor

    Xs, ys = synthetic(20_000, 50)
    path = CACHE / f"gbr-syn-{_cache_key(300, 6, Xs.shape)}.joblib"
    if not path.exists():
        joblib.dump(GradientBoostingRegressor(n_estimators=300, max_depth=6, random_state=0).fit(Xs, ys), path)
    gb = joblib.load(path)
    rows = Xs[np.random.default_rng(1).integers(0, len(Xs), n_batch)]  # GradientBoosting refuses NaN
    return ModelCase("sklearn-gbr-synthetic", "sklearn", gb, path, rows, raw=lambda R, m=gb: m.predict(R),
                     train=Xs, nan=False,
                     notes="GradientBoostingRegressor, 300 trees, max depth 6, float32 compares, no NaN")


@functools.lru_cache(maxsize=2)
def oblivious_cases(n_batch: int) -> list[ModelCase]:
    """The oblivious-table cases (bench/oblivious.py): CatBoost depth 4, 6 and 8 (500 trees) and a shallow LightGBM
    model."""
    import catboost
    import lightgbm as lgb

    Xs, ys = synthetic(200_000, 50)
    rng = np.random.default_rng(1)
    Xb = Xs[rng.integers(0, len(Xs), n_batch)]
    Xb[rng.random(Xb.shape) < 0.01] = np.nan
    n_fit = 20_000
    cases = []
    for depth in (4, 6, 8):
        params = {"iterations": 500, "depth": depth, "learning_rate": 0.1, "random_seed": 0, "thread_count": 2,
                  "verbose": 0, "allow_writing_files": False}
        path = CACHE / f"cb-syn-{_cache_key(params, n_fit, Xs.shape)}.cbm"
        if not path.exists():
            Xf = Xs[:n_fit].copy()
            Xf[np.random.default_rng(2).random(Xf.shape) < 0.01] = np.nan
            catboost.CatBoostRegressor(**params).fit(Xf, ys[:n_fit]).save_model(str(path))
        m = catboost.CatBoostRegressor()
        m.load_model(str(path))
        cases.append(ModelCase(
            f"catboost-d{depth}", "catboost", m, path, Xb,
            raw=lambda X, m=m: m.predict(X, prediction_type="RawFormulaVal", thread_count=1), train=Xs[:n_fit],
            notes=f"CatBoostRegressor, 500 symmetric trees of depth {depth}, fit on {n_fit} synthetic rows "
                  f"(1% NaN), float32 compares"))
    params = {"objective": "regression", "num_leaves": 8, "max_depth": 3, "learning_rate": 0.1, "verbose": -1,
              "num_threads": 2, "seed": 0}
    path = CACHE / f"lgb-shallow-{_cache_key(params, 500, Xs.shape)}.txt"
    if not path.exists():
        lgb.train(params, lgb.Dataset(Xs, ys), 500).save_model(str(path))
    bst = lgb.Booster(model_file=str(path))
    cases.append(ModelCase("lightgbm-shallow", "lightgbm", bst, path, Xb,
                           raw=lambda X, b=bst: b.predict(X, raw_score=True, num_threads=1), train=Xs,
                           notes="regression, synthetic, 500 trees x 8 leaves (max depth 3), 1% NaN"))
    return cases


MODELS: dict[str, Callable[[int], list[ModelCase]]] = {
    "lightgbm-credit": lambda n: [real_case("credit", n)],
    "lightgbm-adult": lambda n: [real_case("adult", n)],
    "lightgbm-compas": lambda n: [real_case("compas", n)],
    "lightgbm-synthetic": lambda n: [synthetic_case(n)],
    "xgboost-credit": lambda n: [xgboost_credit(n)],
    "sklearn-gbr-synthetic": lambda n: [gbr_case(n)],
    **{name: (lambda n, name=name: [c for c in oblivious_cases(n) if c.name == name])
       for name in ("catboost-d4", "catboost-d6", "catboost-d8", "lightgbm-shallow")},
}
"""Model name -> builder(batch rows). The default run takes DEFAULT_MODELS; bench/oblivious.py the others."""
DEFAULT_MODELS = ("lightgbm-credit", "lightgbm-adult", "lightgbm-compas", "lightgbm-synthetic", "xgboost-credit",
                  "sklearn-gbr-synthetic")
QUICK_MODELS = DEFAULT_MODELS[:5]


def build_models(names: list[str], n_batch: int) -> list[ModelCase]:
    CACHE.mkdir(parents=True, exist_ok=True)
    unknown = [n for n in names if n not in MODELS]
    if unknown:
        raise SystemExit(f"error: unknown model(s) {', '.join(unknown)}; models: {', '.join(MODELS)}")
    cases = [c for n in names for c in MODELS[n](n_batch)]
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
    predict: Callable[[np.ndarray], np.ndarray] | None = None   # batch, one thread -> (n,) margins
    row: Callable[[np.ndarray], Any] | None = None       # one row as a (1, n_features) array
    keep: list[Any] = field(default_factory=list)         # objects that must stay alive
    results: dict[str, Any] = field(default_factory=dict)


def _last(y: Any, n: int) -> np.ndarray:
    """A peer's output as ``(n,)``: the last column (class 1 / the only output)."""
    return np.asarray(y, dtype=np.float64).reshape(n, -1)[:, -1]


def peer_library(case: ModelCase) -> Peer:
    p = Peer(f"{case.library} predict", compile_wall=0.0, compile_cpu=0.0)
    p.predict = lambda X: _last(case.raw(X), len(X))
    p.row = case.raw
    p.results["threads"] = "1"
    return p


def _pylignum(case: ModelCase, compiled: bool) -> Peer:
    import lignum

    p = Peer("pylignum compiled" if compiled else "pylignum")
    if case.library not in ("lightgbm", "xgboost") or case.path is None:
        raise ValueError("pylignum reads LightGBM and XGBoost model files")

    def make() -> Any:
        m = lignum.load(str(case.path))
        if compiled:
            m.compile()
        return m

    m, p.compile_wall, p.compile_cpu = timed(make)
    p.predict = lambda X: _last(m.predict(X, raw_score=True, n_jobs=1), len(X))
    p.row = lambda x: m.predict(x, raw_score=True, n_jobs=1)
    p.results["threads"] = "n_jobs=1"
    p.keep.append(m)
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
        tl2cgen.generate_c_code(tm, d, params={})
        lib = tl2cgen.create_shared("gcc", d, long_build_time_warning=False)
        return tm, Path(lib)

    (tm, lib), p.compile_wall, p.compile_cpu = timed(build)
    header = (workdir / f"tl2cgen-{case.name}" / "header.h").read_text()
    dtype = "float32" if "float fvalue" in header else "float64"
    pred = tl2cgen.Predictor(lib, nthread=1)

    def predict(X: np.ndarray) -> Any:
        return pred.predict(tl2cgen.DMatrix(X.astype(dtype), dtype=dtype), pred_margin=True)

    p.predict = lambda X: _last(predict(X), len(X))
    p.row = predict
    p.results["threads"] = "Predictor(nthread=1)"
    p.keep += [pred, tm]
    return p


def peer_lleaves(case: ModelCase) -> Peer:
    import lleaves

    p = Peer("lleaves")
    m = lleaves.Model(model_file=str(case.path))
    _, p.compile_wall, p.compile_cpu = timed(lambda: m.compile(raw_score=True))
    p.predict = lambda X: _last(m.predict(X, n_jobs=1), len(X))
    p.row = lambda x: m.predict(x, n_jobs=1)
    p.results["threads"] = "n_jobs=1"
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
        kw = {"zipmap": False} if case.library == "lightgbm" else {}
        conv = lambda: fn(case.model, initial_types=[("X", FloatTensorType([None, F]))],  # noqa: E731
                          target_opset=15, **kw)
    p = Peer(name)
    model, p.compile_wall, p.compile_cpu = timed(conv)
    so = ort.SessionOptions()
    so.intra_op_num_threads = 1
    so.inter_op_num_threads = 1
    sess = ort.InferenceSession(model.SerializeToString(), so, providers=["CPUExecutionProvider"])
    outs = [o.name for o in sess.get_outputs()]
    prob = next((o for o in outs if "prob" in o.lower()), None)
    p.space = "proba" if prob else "raw"
    target = prob or outs[0]
    inp = sess.get_inputs()[0].name
    p.predict = lambda X: _last(sess.run([target], {inp: X.astype(np.float32)})[0], len(X))
    p.row = lambda x: sess.run([target], {inp: x.astype(np.float32)})
    p.results["threads"] = "intra_op_num_threads=1, inter_op_num_threads=1"
    return p


def peer_onedal(case: ModelCase) -> Peer:
    """oneDAL's gradient-boosting inference through daal4py's model builders, after ``daalinit(1)``."""
    import daal4py as d4p

    d4p.daalinit(1)
    p = Peer("oneDAL (daal4py)")
    m, p.compile_wall, p.compile_cpu = timed(lambda: d4p.mb.convert_model(case.model))
    classify = bool(getattr(m, "is_classifier_", False))
    p.space = "proba" if classify else "raw"
    call = m.predict_proba if classify else m.predict
    p.predict = lambda X: _last(call(X), len(X))
    p.row = call
    p.results["threads"] = "daalinit(1)"
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
    p.predict = lambda X: _last(m.predict({"features": X.astype(np.float32)}, num_threads=1), len(X))
    p.row = lambda x: m.predict({"features": x.astype(np.float32)}, num_threads=1)
    p.results["threads"] = "num_threads=1"
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
    p.predict = lambda X: _last(m.predict(X), len(X))
    p.row = m.predict
    p.results["threads"] = "1 (no thread option)"
    p.keep.append(m)
    return p


def _runs_library(p: Peer, pred: Any, case: ModelCase) -> Any:
    """``p`` predicts with a lumber C predictor (one thread) through ``predict_raw``."""
    n_out = case.forest.n_outputs
    p.predict = lambda X: _last(pred.predict_raw(X), len(X)) if n_out == 1 else pred.predict_raw(X)[:, -1]
    p.row = pred.predict_raw
    p.results["threads"] = "threads=1"
    p.keep.append(pred)
    return pred.library


def peer_lumber_c(case: ModelCase) -> Peer:
    p = Peer("lumber C")
    sample = None if case.train is None else case.train[:SAMPLE_ROWS]
    pred, p.compile_wall, p.compile_cpu = timed(lambda: lumber.compile(case.forest, target="c", sample=sample))
    lib = _runs_library(p, pred, case)
    p.results["walk"] = lib.metadata.get("walk", "values")
    if pred.report:
        p.results["report"] = pred.report
    return p


def peer_lumber_onnx(case: ModelCase) -> Peer:
    p = Peer("lumber ONNX")
    pred, p.compile_wall, p.compile_cpu = timed(lambda: lumber.compile(case.forest, target="onnx", threads=1))
    pred.session  # noqa: B018  (the session is created before timing)
    p.predict = lambda X: _last(pred.predict_raw(X), len(X))
    p.row = pred.predict_raw
    p.results["input_dtype"] = str(pred.dtype)
    p.results["threads"] = "threads=1"
    p.keep.append(pred)
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


PEERS: list[tuple[str, Callable[..., Peer], Callable[[ModelCase], bool]]] = [
    ("library", lambda c, w: peer_library(c), lambda c: True),
    ("pylignum", lambda c, w: _pylignum(c, False), lambda c: c.library in ("lightgbm", "xgboost")),
    ("pylignum-compiled", lambda c, w: _pylignum(c, True), lambda c: c.library in ("lightgbm", "xgboost")),
    ("lleaves", lambda c, w: peer_lleaves(c), lambda c: c.library == "lightgbm"),
    ("tl2cgen", peer_tl2cgen, lambda c: c.library != "catboost"),
    ("ort", lambda c, w: peer_ort_converter(c), lambda c: c.library != "catboost"),
    ("onedal", lambda c, w: peer_onedal(c), lambda c: c.library in ("lightgbm", "xgboost", "catboost")),
    ("ydf", lambda c, w: peer_ydf(c), lambda c: c.library == "sklearn"),
    ("timber", peer_timber, lambda c: c.library in ("lightgbm", "xgboost", "sklearn")),
    ("lumber-c", lambda c, w: peer_lumber_c(c), lambda c: True),
    ("lumber-onnx", lambda c, w: peer_lumber_onnx(c), lambda c: True),
    ("lumber-oblivious", peer_lumber_oblivious, lambda c: True),
]
"""(key, factory(case, workdir), applies-to)."""
DEFAULT_PEERS = tuple(k for k, _, _ in PEERS if k != "lumber-oblivious")
QUICK_PEERS = tuple(k for k in DEFAULT_PEERS if k not in ("tl2cgen", "ort", "lumber-onnx"))
"""--quick leaves out the peers that are slow to build and far behind (tl2cgen, the ONNX converters)."""


def failed(name: str, exc: BaseException) -> Peer:
    msg = f"{type(exc).__name__}: {str(exc).strip().splitlines()[0] if str(exc).strip() else ''}"[:300]
    return Peer(name, status=f"failed: {msg}")


# -- measurements -------------------------------------------------------------------------------------

def reference(case: ModelCase, X: np.ndarray, space: str) -> np.ndarray:
    if space == "proba" and case.proba is not None:
        return _last(case.proba(X), len(X))
    return _last(case.raw(X), len(X))


def _diff(got: np.ndarray, ref: np.ndarray) -> np.ndarray:
    diff = np.abs(got - ref)
    diff[np.isnan(got) & np.isnan(ref)] = 0.0
    diff[np.isnan(got) ^ np.isnan(ref)] = np.inf
    return diff


def accuracy(case: ModelCase, p: Peer) -> None:
    assert p.predict is not None and case.corpus is not None
    for label, X in (("batch", case.X), ("corpus", case.corpus)):
        try:
            got = p.predict(X)
        except Exception as exc:  # a peer may refuse NaN or odd values: report it
            p.results[f"{label}_error"] = f"{type(exc).__name__}: {str(exc)[:200]}"
            continue
        ref = reference(case, X, p.space)
        diff = _diff(got, ref)
        if label == "batch":
            p.results["max_abs_diff"] = float(diff.max())
        else:
            p.results["corpus_rows"] = int(len(X))
            p.results["corpus_mismatch"] = int((diff > MISMATCH_RTOL * (1 + np.abs(ref))).sum())
            p.results["corpus_not_bitexact"] = int((diff > 0).sum())
    p.results["compared_in"] = p.space


def batch(p: Peer, X: np.ndarray) -> None:
    """One repetition: one call on all rows, wall and process CPU time."""
    assert p.predict is not None
    t0, c0 = time.perf_counter(), time.process_time()
    p.predict(X)
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    p.results.setdefault("batch_wall_runs", []).append(wall)
    p.results.setdefault("batch_cpu_runs", []).append(cpu)


def single_rows(case: ModelCase, peers: list[Peer], calls: int) -> None:
    """``calls`` one-row calls per peer, each on a different row ``X[i:i + 1]``, in ROUNDS rounds."""
    live = [p for p in peers if p.status == "ok" and p.row is not None]
    X = case.X
    order = np.random.default_rng(7).permutation(len(X))[:calls]
    per_round = -(-len(order) // ROUNDS)
    times: dict[str, list[int]] = {p.name: [] for p in live}
    cpu: dict[str, float] = {p.name: 0.0 for p in live}
    check = order[:64]
    for p in live:  # warm-up, and the single-row answers against the library's
        assert p.row is not None
        try:
            got = np.array([_last(p.row(X[i:i + 1]), 1)[0] for i in check])
        except Exception as exc:  # noqa: BLE001
            p.results["row_error"] = f"{type(exc).__name__}: {str(exc)[:200]}"
            continue
        p.results["row_max_abs_diff"] = float(_diff(got, reference(case, X[check], p.space)).max())
    live = [p for p in live if "row_error" not in p.results]
    for r in range(ROUNDS):
        part = order[r * per_round:(r + 1) * per_round]
        for p in live:
            row, ts = p.row, times[p.name]
            assert row is not None
            c0 = time.process_time()
            for i in part:
                x = X[i:i + 1]
                t0 = time.perf_counter_ns()
                row(x)
                ts.append(time.perf_counter_ns() - t0)
            cpu[p.name] += time.process_time() - c0
    for p in live:
        ts_us = np.asarray(times[p.name]) / 1e3
        p.results.update(row_calls=int(ts_us.size), row_p50_us=float(np.percentile(ts_us, 50)),
                         row_p99_us=float(np.percentile(ts_us, 99)), row_cpu_us=cpu[p.name] / ts_us.size * 1e6)


def wait_idle(max_load: float, seconds: float) -> float:
    """Wait (up to ``seconds``) for the 1-minute load average to fall to ``max_load``; the seconds waited."""
    t0 = time.perf_counter()
    while os.getloadavg()[0] > max_load and time.perf_counter() - t0 < seconds:
        print(f"[load] {os.getloadavg()[0]:.2f} > {max_load:.2f}: waiting", flush=True)
        time.sleep(min(15.0, max(1.0, seconds - (time.perf_counter() - t0))))
    return time.perf_counter() - t0


def run(args: argparse.Namespace) -> dict[str, Any]:
    # bench/oblivious.py calls run() with its own namespace: the options it does not set take main()'s defaults
    args = argparse.Namespace(**{"max_load": float(os.cpu_count() or 1), "wait_idle": 0.0, "row_calls": None,
                                 "rows": None, **vars(args)})
    n_batch = args.rows or (20_000 if args.quick else 100_000)
    reps = args.reps or (3 if args.quick else 5)
    calls = args.row_calls or (1000 if args.quick else 2000)
    waited = wait_idle(args.max_load, args.wait_idle) if args.wait_idle else 0.0
    load0 = os.getloadavg()
    t_start = time.perf_counter()
    workdir = Path(tempfile.mkdtemp(prefix="lumber-bench-"))
    cases = build_models(list(args.models or (QUICK_MODELS if args.quick else DEFAULT_MODELS)), n_batch)
    wanted = args.peers or (QUICK_PEERS if args.quick else DEFAULT_PEERS)
    peers: dict[str, list[Peer]] = {}
    loads: dict[str, list[float]] = {}
    for case in cases:
        loads[case.name] = [os.getloadavg()[0]]
        case.corpus = boundary_corpus(case.forest, case.X, 1000 if args.quick else 4000)
        if not case.nan:
            case.corpus = case.corpus[~np.isnan(case.corpus).any(axis=1)]
        peers[case.name] = []
        for key, make, applies in PEERS:
            if not applies(case) or key not in wanted:
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
                    batch(p, case.X)
                except Exception as exc:  # noqa: BLE001
                    p.status = f"failed in predict: {type(exc).__name__}: {exc}"[:300]
    for case in cases:
        print(f"[rows] {case.name}", flush=True)
        single_rows(case, peers[case.name], calls)
        loads[case.name].append(os.getloadavg()[0])
    load1 = os.getloadavg()
    res = report(cases, peers, n_batch, reps, load0, load1, time.perf_counter() - t_start, args.quick)
    for name, pair in loads.items():
        res["models"][name]["loadavg"] = pair
    res["row_calls"] = calls
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
    for pkg in ("lumber", "numpy", "lightgbm", "xgboost-cpu", "scikit-learn", "pylignum", "treelite", "tl2cgen",
                "lleaves", "llvmlite", "onnx", "onnxruntime", "onnxmltools", "skl2onnx", "scikit-learn-intelex",
                "daal", "ydf", "timber-compiler"):
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
            for key, runs_key in (("batch_wall", "batch_wall_runs"), ("batch_1t_cpu", "batch_cpu_runs")):
                if runs_key in r:
                    runs = r[runs_key]
                    r[key] = float(np.median(runs))
                    r[f"{key}_spread_pct"] = float((max(runs) - min(runs)) / r[key] * 100) if r[key] else None
            if "batch_1t_cpu" in r:
                r["cpu_ns_per_row_tree"] = r["batch_1t_cpu"] / n_batch / T * 1e9
                r["wall_ns_per_row_tree"] = r["batch_wall"] / n_batch / T * 1e9
            r.update(status=p.status, compile_wall_s=p.compile_wall, compile_cpu_s=p.compile_cpu)
            entry["peers"][p.name] = r
        base = entry["peers"].get("lumber C", {})
        for r in entry["peers"].values():
            if base.get("batch_1t_cpu") and r.get("batch_1t_cpu"):
                r["ratio_to_lumber_c"] = r["batch_1t_cpu"] / base["batch_1t_cpu"]
            if base.get("row_p50_us") and r.get("row_p50_us"):
                r["row_ratio_to_lumber_c"] = r["row_p50_us"] / base["row_p50_us"]
        out["models"][case.name] = entry
    return out


def _fmt(v: Any, spec: str) -> str:
    if v is None:
        return "–"
    if isinstance(v, float) and v == float("inf"):
        return "inf"
    return format(v, spec)


def _exact(r: dict[str, Any]) -> bool:
    return r.get("max_abs_diff") == 0.0 and r.get("corpus_not_bitexact") == 0 and r.get("row_max_abs_diff") == 0.0


def summary(res: dict[str, Any]) -> list[dict[str, Any]]:
    """Per model: lumber C against the best other peer (fastest batch CPU, lowest one-row p50)."""
    rows = []
    for name, e in res["models"].items():
        ok = {k: v for k, v in e["peers"].items() if v.get("status") == "ok"}
        me = ok.get("lumber C")
        others = {k: v for k, v in ok.items() if not k.startswith("lumber")}
        if me is None or not others:
            continue
        fast = min((k for k in others if others[k].get("cpu_ns_per_row_tree")),
                   key=lambda k: others[k]["cpu_ns_per_row_tree"], default=None)
        quick = min((k for k in others if others[k].get("row_p50_us")),
                    key=lambda k: others[k]["row_p50_us"], default=None)
        rows.append({"model": name, "lumber_batch": me.get("cpu_ns_per_row_tree"), "best_batch_peer": fast,
                     "best_batch": others[fast]["cpu_ns_per_row_tree"] if fast else None,
                     "batch_x": (others[fast]["cpu_ns_per_row_tree"] / me["cpu_ns_per_row_tree"])
                     if fast and me.get("cpu_ns_per_row_tree") else None,
                     "lumber_row": (me.get("row_p50_us"), me.get("row_p99_us")), "best_row_peer": quick,
                     "best_row": (others[quick]["row_p50_us"], others[quick]["row_p99_us"]) if quick else None,
                     "row_x": (others[quick]["row_p50_us"] / me["row_p50_us"]) if quick and me.get("row_p50_us")
                     else None, "lumber_exact": _exact(me)})
    return rows


def markdown(res: dict[str, Any]) -> str:
    m = res["machine"]
    valid = res.get("ratios_valid", True)
    load = (f"load average {m['loadavg_start'][0]:.2f} at start and {m['loadavg_end'][0]:.2f} at end "
            f"({m['cpus']} CPUs")
    load += f", after waiting {m['waited_for_idle_s']:.0f} s for the load to fall)" if m.get("waited_for_idle_s") else ")"
    cmd = res.get("command", "bench/inference.py" + (" --quick" if res["mode"] == "quick" else ""))
    lines = [f"# Inference benchmark ({res['mode']})", "",
             f"Produced by `{cmd}`; {load}. Every peer runs on one thread, as its documentation prescribes for "
             "one core and otherwise with its defaults (threads column; the script's docstring lists each). "
             f"Batch: {res['rows']} rows per call, median of {res['repetitions']} interleaved repetitions, process "
             "CPU and wall time; cpu ns/row/tree from the CPU time, with its spread over the repetitions (max - min, "
             "% of the median); ratio = peer / lumber C CPU time (> 1: lumber C is faster). One row: "
             f"{res.get('row_calls', '–')} calls per peer, each on a different row passed as a 1-row 2-D array "
             "through the peer's Python API, wall time per call (p50, p99) and CPU time per call; row x = peer "
             "p50 / lumber C p50. Max abs diff: against the source library on the batch (rows: on the single-row "
             "answers); corpus: boundary rows differing by more than 1e-9 relative (mismatch) or at all (not "
             "bit-exact).", ""]
    if not valid:
        lines += [f"**Ratios withheld: the load average was above {m.get('max_load', m['cpus'])} during the run; "
                  "times are shown but are not evidence.**", ""]
    summ = summary(res)
    if summ:
        lines += ["## Summary", "",
                  "| model | lumber C batch cpu ns/row/tree | best peer batch | x | lumber C one row p50 / p99 µs | "
                  "best peer one row p50 / p99 µs | x | lumber C bit-exact |", "|---|---|---|---|---|---|---|---|"]
        for s in summ:
            lr, br = s["lumber_row"], s["best_row"]
            lines.append(
                f"| {s['model']} | {_fmt(s['lumber_batch'], '.2f')} | {s['best_batch_peer']} "
                f"{_fmt(s['best_batch'], '.2f')} | {_fmt(s['batch_x'] if valid else None, '.2f')} | "
                f"{_fmt(lr[0], '.1f')} / {_fmt(lr[1], '.1f')} | {s['best_row_peer']} "
                f"{_fmt(br[0] if br else None, '.1f')} / {_fmt(br[1] if br else None, '.1f')} | "
                f"{_fmt(s['row_x'] if valid else None, '.2f')} | {'yes' if s['lumber_exact'] else 'NO'} |")
        lines.append("")
    for name, e in res["models"].items():
        la = e.get("loadavg")
        lines += [f"## {name}", "", f"{e['notes']}; {e['trees']} trees, {e['nodes']} nodes, {e['features']} "
                  f"features; boundary corpus {e['corpus_rows']} rows"
                  + (f"; load average {la[0]:.2f} -> {la[1]:.2f}." if la else "."), "",
                  "| peer | threads | compile s (wall / cpu) | batch s (wall / cpu) | spread % | cpu ns/row/tree | "
                  "ratio | one row p50 / p99 µs | row cpu µs | row x | max abs diff (batch / rows) | "
                  "corpus mismatch | not bit-exact |",
                  "|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
        for pname, r in e["peers"].items():
            if r["status"] != "ok":
                lines.append(f"| {pname} | {r['status']} |  |  |  |  |  |  |  |  |  |  |  |")
                continue
            comp = "–" if r.get("compile_wall_s") in (None, 0.0) else \
                f"{r['compile_wall_s']:.2f} / {r['compile_cpu_s']:.2f}"
            space = " (proba)" if r.get("compared_in") == "proba" else ""
            lines.append(
                f"| {pname} | {r.get('threads', '–')} | {comp} | {_fmt(r.get('batch_wall'), '.3f')} / "
                f"{_fmt(r.get('batch_1t_cpu'), '.3f')} | {_fmt(r.get('batch_1t_cpu_spread_pct'), '.0f')} | "
                f"{_fmt(r.get('cpu_ns_per_row_tree'), '.2f')} | "
                f"{_fmt(r.get('ratio_to_lumber_c') if valid else None, '.2f')} | "
                f"{_fmt(r.get('row_p50_us'), '.1f')} / {_fmt(r.get('row_p99_us'), '.1f')} | "
                f"{_fmt(r.get('row_cpu_us'), '.1f')} | {_fmt(r.get('row_ratio_to_lumber_c') if valid else None, '.2f')}"
                f" | {_fmt(r.get('max_abs_diff'), '.3g')} / {_fmt(r.get('row_max_abs_diff'), '.3g')}{space} | "
                f"{r.get('corpus_mismatch', r.get('corpus_error', '–'))} | {r.get('corpus_not_bitexact', '–')} |")
        me = e["peers"].get("lumber C", {})
        if me.get("report"):
            lines += ["", f"lumber C: {json.dumps(me['report'], default=str)}"]
        lines.append("")
    v = res["versions"]
    lines += ["Versions: " + ", ".join(f"{k} {val}" for k, val in v.items()), "",
              f"Total run time {res['seconds']:.0f} s.", ""]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true",
                    help="the five 500-tree models on 20k rows, 1,000 row calls, without tl2cgen and the ONNX "
                         "peers (a few minutes)")
    ap.add_argument("--reps", type=int, default=None, help="interleaved batch repetitions (default 5, quick 3)")
    ap.add_argument("--rows", type=int, default=None, help="batch rows (default 100,000, quick 20,000)")
    ap.add_argument("--row-calls", type=int, default=None, help="one-row calls per peer (default 2,000, quick 1,000)")
    ap.add_argument("--models", nargs="*", help=f"only these models ({', '.join(MODELS)})")
    ap.add_argument("--peers", nargs="*", help=f"only these peers ({', '.join(k for k, _, _ in PEERS)})")
    ap.add_argument("--out", type=Path, default=RESULTS, help="results folder")
    ap.add_argument("--max-load", type=float, default=float(os.cpu_count() or 1),
                    help="1-minute load average above which ratios are withheld (default: the core count)")
    ap.add_argument("--wait-idle", type=float, default=0.0, metavar="SECONDS",
                    help="first wait up to this long for the load to fall to --max-load")
    ap.add_argument("--stem", default=None, help="results file name (default inference / inference-quick)")
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
