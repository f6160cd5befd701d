"""Predictors that travel: every target's predictor pickles, reopens once per process, and predicts the
same margins in a fresh process and in joblib's loky workers; C entry points are safe from many threads."""

from __future__ import annotations

import os
import pickle
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
from c_tools import needs_cc

import lumber
from lumber.runtime import predictors

TARGETS = ["c", "table-c", "table", "onnx", "numpy", "c-source"]


@pytest.fixture(scope="module")
def model_and_rows() -> tuple[Any, pd.DataFrame]:
    import lightgbm as lgb

    rng = np.random.default_rng(11)
    X = pd.DataFrame(rng.normal(size=(600, 5)), columns=["a", "b", "c", "d", "e"])
    X.iloc[::7, 2] = np.nan
    y = (X.a + X.b * X.d > 0).astype(int)
    return lgb.LGBMClassifier(n_estimators=12, num_leaves=7, verbose=-1).fit(X, y), X


@pytest.fixture(scope="module")
def compiled(model_and_rows: tuple[Any, pd.DataFrame]) -> dict[str, Any]:
    model, _ = model_and_rows
    return {t: lumber.compile(model, target=t) for t in TARGETS}


def _env() -> dict[str, str]:
    return dict(os.environ, PYTHONPATH=str(Path(lumber.__file__).resolve().parents[1]))


@needs_cc
@pytest.mark.parametrize("target", TARGETS)
def test_pickle_round_trip(compiled: dict[str, Any], model_and_rows: tuple[Any, pd.DataFrame], target: str) -> None:
    pred, (_, X) = compiled[target], model_and_rows
    back = pickle.loads(pickle.dumps(pred))
    assert type(back) is type(pred) and back.fingerprint == pred.fingerprint and back is not pred
    assert np.array_equal(back.predict_raw(X), pred.predict_raw(X))
    assert np.array_equal(back.predict_proba(X), pred.predict_proba(X))
    again = pickle.loads(pickle.dumps(pred))  # opened once per process: the copies share the artifact
    if target in ("c", "table-c"):
        assert again.library is back.library
    if target == "onnx":
        assert again.session is back.session


@needs_cc
def test_fresh_process_predicts_identically(compiled: dict[str, Any], model_and_rows: tuple[Any, pd.DataFrame],
                                            tmp_path: Path) -> None:
    _, X = model_and_rows
    X.to_csv(tmp_path / "X.csv", index=False)
    code = ("import pickle, sys, numpy as np, pandas as pd\n"
            "X = pd.read_csv(sys.argv[1])\n"
            "for name in sys.argv[2:]:\n"
            "    pred = pickle.load(open(name + '.pkl', 'rb'))\n"
            "    np.save(name + '.npy', pred.predict_raw(X))\n")
    names = []
    for t, pred in compiled.items():
        (tmp_path / f"{t}.pkl").write_bytes(pickle.dumps(pred))
        names.append(str(tmp_path / t))
    r = subprocess.run([sys.executable, "-c", code, str(tmp_path / "X.csv"), *names], capture_output=True,
                       text=True, env=_env(), timeout=600)
    assert r.returncode == 0, r.stderr
    Xr = pd.read_csv(tmp_path / "X.csv")
    for t, pred in compiled.items():
        assert np.array_equal(np.load(tmp_path / f"{t}.npy"), pred.predict_raw(Xr)), t


@needs_cc
def test_joblib_loky_workers(compiled: dict[str, Any], model_and_rows: tuple[Any, pd.DataFrame]) -> None:
    from joblib import Parallel, delayed

    _, X = model_and_rows
    chunks = np.array_split(X, 4)
    for t in ("c", "table", "onnx"):
        pred = compiled[t]
        parts = Parallel(n_jobs=2, backend="loky")(delayed(pred.predict_raw)(c) for c in chunks)
        assert np.array_equal(np.concatenate(parts), pred.predict_raw(X)), t


@needs_cc
@pytest.mark.parametrize("target", ["c", "table-c"])
def test_c_entry_points_from_many_threads(compiled: dict[str, Any], model_and_rows: tuple[Any, pd.DataFrame],
                                         target: str) -> None:
    """Eight threads call predict_raw, predict_rows (through predict_raw) and predict_row on their own rows
    at once, on one library; every answer equals the serial one."""
    pred, (_, X) = compiled[target], model_and_rows
    rows = np.ascontiguousarray(X.to_numpy(dtype=np.float64))
    want = pred.predict_raw(rows)
    lib = pred.library
    prepared = np.ascontiguousarray(rows, dtype=lib.dtype)

    def work(k: int) -> bool:
        order = np.random.default_rng(k).permutation(len(rows))
        ok = True
        for _ in range(20):
            ok &= np.array_equal(pred.predict_raw(rows[order]), want[order])
            ok &= np.array_equal(lib.predict_raw(prepared[order])[:, 0], want[order])
        for i in order[:200]:
            ok &= np.array_equal(pred.predict_row(rows[i])[0], want[i])
        return bool(ok)

    with ThreadPoolExecutor(8) as pool:
        assert all(pool.map(work, range(8)))


@needs_cc
def test_dask_tokens_tell_artifacts_apart(compiled: dict[str, Any], model_and_rows: tuple[Any, pd.DataFrame]) -> None:
    """The forest's library and the same model's tables are one target ('c' libraries) with one fingerprint:
    Dask must still hash them apart, or a graph returns one's answers for the other."""
    from dask.base import tokenize

    model, _ = model_and_rows
    tokens = {t: tokenize(compiled[t]) for t in TARGETS}
    assert len(set(tokens.values())) == len(TARGETS)
    assert tokenize(lumber.compile(model, target="c")) == tokens["c"]  # the same artifact, the same token
    assert tokenize(pickle.loads(pickle.dumps(compiled["table-c"]))) == tokens["table-c"]


def test_unknown_pickled_target_is_a_clear_error() -> None:
    from lumber.ir import ModelFormatError

    with pytest.raises(ModelFormatError, match="unknown target 'gpu'"):
        predictors.reopen("gpu", "0" * 64, "", (), 1, {})


@needs_cc
def test_every_target_on_dask_distributed_over_parquet(compiled: dict[str, Any],
                                                        model_and_rows: tuple[Any, pd.DataFrame],
                                                        tmp_path: Path) -> None:
    """Each target's predictor goes to Dask's worker processes with the task and predicts there as here."""
    import dask.dataframe as dd
    from dask.distributed import Client, LocalCluster

    _, X = model_and_rows
    for i in range(3):
        X.iloc[i * 200:(i + 1) * 200].to_parquet(tmp_path / f"part-{i}.parquet")

    def raw(part: pd.DataFrame, pred: Any) -> pd.DataFrame:
        return pd.DataFrame({"raw": pred.predict_raw(part)}, index=part.index)

    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None) as cluster, \
            Client(cluster):
        frame = dd.read_parquet(tmp_path)
        for target in TARGETS:
            got = frame.map_partitions(raw, compiled[target], meta={"raw": "f8"}).compute()
            assert np.array_equal(got["raw"].to_numpy(), compiled[target].predict_raw(X)), target


@needs_cc
def test_every_target_on_spark_map_in_pandas(compiled: dict[str, Any], model_and_rows: tuple[Any, pd.DataFrame],
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    """Each target's predictor is shipped to Spark's Python workers inside ``mapInPandas`` and predicts there
    as here (a local session, two worker threads)."""
    from pyspark.sql import SparkSession

    monkeypatch.setenv("PYSPARK_PYTHON", sys.executable)
    _, X = model_and_rows
    spark = SparkSession.builder.master("local[2]").config("spark.ui.enabled", "false").getOrCreate()
    try:
        frame = spark.createDataFrame(X.assign(id=np.arange(len(X))))
        features = list(X.columns)
        for target in TARGETS:
            pred = compiled[target]

            def score(batches: Any, pred: Any = pred) -> Any:
                for part in batches:
                    yield pd.DataFrame({"id": part["id"], "raw": pred.predict_raw(part[features])})

            got = frame.mapInPandas(score, schema="id long, raw double").toPandas().sort_values("id")
            assert np.array_equal(got["raw"].to_numpy(), pred.predict_raw(X)), target
    finally:
        spark.stop()
