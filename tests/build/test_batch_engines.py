"""``lumber batch`` on Spark (same records as one by one, same resumable file) and a batch stopped by SIGTERM
(its joblib workers end with it; the rows written so far stay readable)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

import lumber
from lumber.compiler.api.batch import explain_batch, read_output

N = 4


def _strip(records: list[dict[str, Any]]) -> dict[int, Any]:
    return {r["row"]: {k: v for k, v in r["result"].items() if "seconds" not in k} for r in records}


def test_spark_session_matches_one_by_one(project_src: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("pyspark")  # the optional extra lumber[spark]
    monkeypatch.setenv("PYSPARK_PYTHON", sys.executable)  # Spark's Python workers run this interpreter
    from pyspark.sql import SparkSession

    X = pd.read_csv(project_src / "valid.csv").drop(columns="income").iloc[:N]
    R = pd.read_csv(project_src / "train.csv").drop(columns="income")
    model = project_src / "model.txt"
    want = explain_batch(model, X, "counterfactual", reference=R, n_jobs=1, progress=False)
    spark = SparkSession.builder.master("local[2]").appName("lumber-test").getOrCreate()
    try:
        out = tmp_path / "cf.jsonl"
        first = explain_batch(model, X.iloc[:2], "counterfactual", reference=R, scheduler=spark, output=out,
                              chunk_size=1, progress=False)
        assert first.computed == 2
        res = explain_batch(model, X, "counterfactual", reference=R, scheduler=spark, output=out, chunk_size=1,
                            progress=False)
    finally:
        spark.stop()
    assert res.computed == N - 2 and res.skipped == 2  # resumed: the first two rows were in the file
    assert _strip(res.records) == _strip(want.records)
    _, lines = read_output(out)
    assert sorted(r["row"] for r in lines) == list(range(N))


def _children(pid: int) -> list[Any]:
    import psutil

    try:
        return psutil.Process(pid).children(recursive=True)
    except psutil.NoSuchProcess:
        return []


def test_sigterm_stops_the_workers(project_src: Path, tmp_path: Path) -> None:
    psutil = pytest.importorskip("psutil")  # installed with dask[distributed] (the test extra)
    data = tmp_path / "many.csv"
    frame = pd.read_csv(project_src / "valid.csv")
    pd.concat([frame] * max(1, 400 // len(frame)), ignore_index=True).to_csv(data, index=False)
    out = tmp_path / "cf.jsonl"
    env = dict(os.environ, PYTHONPATH=str(Path(lumber.__file__).resolve().parents[1]))
    proc = subprocess.Popen([sys.executable, "-m", "lumber", "batch", str(project_src / "model.txt"), str(data),
                             "--counterfactual", "-o", str(out), "--train", str(project_src / "train.csv"),
                             "--jobs", "2", "--chunk-size", "1", "--no-progress"], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 240
        workers: list[Any] = []
        while time.monotonic() < deadline and proc.poll() is None:  # wait until rows are being written
            workers = [c for c in _children(proc.pid) if "python" in c.name().lower()]
            if workers and out.exists() and out.read_text().count("\n") >= 2:
                break
            time.sleep(0.2)
        assert proc.poll() is None and workers, "the batch ended before it could be interrupted"
        workers = _children(proc.pid)
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=120)
        _, alive = psutil.wait_procs(workers, timeout=60)
        assert not alive, f"workers still running after the batch ended: {[p.pid for p in alive]}"
        assert proc.returncode == 128 + signal.SIGTERM, err.decode()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    _, lines = read_output(out)  # what was written is whole records; the batch resumes from them
    assert lines and all(r["status"] in ("ok", "error") for r in lines)
