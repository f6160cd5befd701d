"""Batch explanation: local workers, a Dask LocalCluster, resumable output, per-row failures, progress."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest

from lumber.compiler.api.batch import BatchError, Task, explain_batch, make_task, read_output, run_task

N = 6


@pytest.fixture(scope="module")
def data(project_src: Path) -> dict[str, Any]:
    X = pd.read_csv(project_src / "valid.csv").drop(columns="income").iloc[:N]
    R = pd.read_csv(project_src / "train.csv").drop(columns="income")
    return {"model": project_src / "model.txt", "X": X, "R": R}


@pytest.fixture(scope="module")
def reference(data: dict[str, Any]) -> dict[int, Any]:
    """Counterfactuals of every row, one by one in this process."""
    res = explain_batch(data["model"], data["X"], "counterfactual", reference=data["R"], n_jobs=1, progress=False)
    assert res.computed == N and not res.failed
    return {r["row"]: strip(r["result"]) for r in res.records}


def strip(result: dict[str, Any]) -> dict[str, Any]:
    """A result without its timings (the only part that varies run to run)."""
    return {k: v for k, v in result.items() if "seconds" not in k}


def results(records: list[dict[str, Any]]) -> dict[int, Any]:
    return {r["row"]: strip(r["result"]) for r in records}


def test_local_workers_match_one_by_one(data: dict[str, Any], reference: dict[int, Any]) -> None:
    res = explain_batch(data["model"], data["X"], "counterfactual", reference=data["R"], n_jobs=2, chunk_size=2,
                        progress=False)
    assert [r["row"] for r in res.records] == list(range(N))
    assert results(res.records) == reference
    assert all(r["result"]["verified"] for r in res.records)


def test_dask_local_cluster(data: dict[str, Any], reference: dict[int, Any]) -> None:
    distributed = pytest.importorskip("distributed")
    with distributed.LocalCluster(processes=False, n_workers=1, threads_per_worker=2,
                                  dashboard_address=None) as cluster, distributed.Client(cluster) as client:
        res = explain_batch(data["model"], data["X"], "counterfactual", reference=data["R"], scheduler=client,
                            chunk_size=1, progress=False)
        assert results(res.records) == reference
        # by address, as `--scheduler tcp://host:port` does
        again = explain_batch(data["model"], data["X"].iloc[:2], "counterfactual", reference=data["R"],
                              scheduler=cluster.scheduler_address, progress=False)
        assert results(again.records) == {k: reference[k] for k in (0, 1)}


class _SpyClient:
    """A dask.distributed.Client that records the keys of the data each batch scatters."""

    def __init__(self, client: Any) -> None:
        self.client = client
        self.scattered: list[str] = []

    def scatter(self, *args: Any, **kwargs: Any) -> Any:
        fut = self.client.scatter(*args, **kwargs)
        self.scattered.append(fut.key)
        return fut

    def __getattr__(self, name: str) -> Any:
        return getattr(self.client, name)


def test_dask_back_to_back_batches_of_one_task(data: dict[str, Any]) -> None:
    """Each batch scatters its task under a key of its own: a key shared by content with the batch before
    could be forgotten by the scheduler on that batch's release and cancel this one ("lost dependencies")."""
    distributed = pytest.importorskip("distributed")
    task, X = flaky(data, ())
    want = {r: {"sum": float(np.nansum(X[r]))} for r in range(N)}
    with distributed.LocalCluster(processes=False, n_workers=1, threads_per_worker=2,
                                  dashboard_address=None) as cluster, distributed.Client(cluster) as client:
        spy = _SpyClient(client)
        for i in range(20):  # the user's client and a client by address in turn, as a test or a user may
            res = run_task(task, X, scheduler=spy if i % 2 == 0 else cluster.scheduler_address, chunk_size=1,
                           progress=False)
            assert not res.failed and results(res.records) == want
        assert len(spy.scattered) == 10 and len(set(spy.scattered)) == 10


def test_unreachable_scheduler(data: dict[str, Any], monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("distributed")
    monkeypatch.setattr("lumber.compiler.api.batch.CONNECT_TIMEOUT", 0.5)
    with pytest.raises(BatchError, match="cannot reach the Dask scheduler at tcp://127.0.0.1:9"):
        explain_batch(data["model"], data["X"], "counterfactual", scheduler="tcp://127.0.0.1:9", progress=False)


class Interrupt(Exception):
    pass


def test_interrupted_batch_resumes_without_loss_or_duplication(data: dict[str, Any], reference: dict[int, Any],
                                                               tmp_path: Path) -> None:
    out = tmp_path / "cf.jsonl"
    seen: list[int] = []

    def stop_after_three(rec: dict[str, Any]) -> None:
        seen.append(rec["row"])
        if len(seen) == 3:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        explain_batch(data["model"], data["X"], "counterfactual", reference=data["R"], output=out, n_jobs=1,
                      chunk_size=1, progress=False, callback=stop_after_three)
    header, done = read_output(out)
    assert header is not None and [r["row"] for r in done] == [0, 1, 2]
    # a crash in the middle of a line: the torn line is dropped and its row redone
    with out.open("a") as fh:
        fh.write('{"row": 3, "key": "abc", "status": "ok", "res')
    res = explain_batch(data["model"], data["X"], "counterfactual", reference=data["R"], output=out, n_jobs=1,
                        progress=False)
    assert res.skipped == 3 and res.computed == N - 3
    _, lines = read_output(out)
    rows = [r["row"] for r in lines]
    assert sorted(rows) == list(range(N)) and len(rows) == len(set(rows))
    assert results(lines) == reference
    # done: a third run computes nothing and leaves the file alone
    before = out.read_bytes()
    again = explain_batch(data["model"], data["X"], "counterfactual", reference=data["R"], output=out,
                          progress=False)
    assert again.computed == 0 and again.skipped == N and out.read_bytes() == before


class Flaky(Task):
    """Fails on the rows in ``bad`` (a picklable Task, as workers need)."""

    bad: tuple[int, ...] = ()

    def __call__(self, X: Any, rows: Any) -> list[dict[str, Any]]:
        hit = [r for r in rows if r in self.bad]
        if hit:
            raise ValueError(f"row {hit[0]} is bad")
        return [{"sum": float(np.nansum(x))} for x in X]


def flaky(data: dict[str, Any], bad: tuple[int, ...]) -> tuple[Flaky, np.ndarray]:
    base = make_task(data["model"], "sensitive")
    t = Flaky(base.analysis, base.forest)
    t.bad = bad
    return t, base.forest.prepare_input(data["X"])


def test_failures_are_recorded_per_row(data: dict[str, Any], tmp_path: Path) -> None:
    out = tmp_path / "x.jsonl"
    task, X = flaky(data, (2, 4))
    res = run_task(task, X, output=out, n_jobs=1, chunk_size=3, progress=False)
    assert [r["status"] for r in res.records] == ["ok", "ok", "error", "ok", "error", "ok"]
    assert res.failed[0]["error"] == {"type": "ValueError", "message": "row 2 is bad"}
    assert res.records[0]["result"] == {"sum": float(np.nansum(X[0]))}
    # failed rows count as done, unless retried
    assert run_task(task, X, output=out, progress=False).computed == 0
    task.bad = ()
    res = run_task(task, X, output=out, retry_failed=True, progress=False)
    assert res.computed == 2 and not res.failed
    _, lines = read_output(out)
    assert sorted(r["row"] for r in lines) == list(range(N))  # no duplicates left in the file


def test_resume_refuses_other_options_or_data(data: dict[str, Any], tmp_path: Path) -> None:
    out = tmp_path / "x.jsonl"
    task, X = flaky(data, ())
    run_task(task, X[:3], output=out, progress=False)
    other = make_task(data["model"], "sensitive", norm="l1")
    with pytest.raises(BatchError, match="written by a batch with a different model, options or reference rows"):
        run_task(other, X, output=out, progress=False)
    with pytest.raises(BatchError, match="different analysis"):
        run_task(make_task(data["model"], "counterfactual"), X, output=out, progress=False)
    changed = X.copy()
    changed[1, 0] += 1
    with pytest.raises(BatchError, match="row 1 was explained for different data"):
        run_task(task, changed, output=out, progress=False)
    (tmp_path / "junk.jsonl").write_text("hello\n")
    with pytest.raises(BatchError, match="not a JSON line"):
        run_task(task, X, output=tmp_path / "junk.jsonl", progress=False)


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_progress_bar(data: dict[str, Any]) -> None:
    task, X = flaky(data, (1,))
    stream = _Terminal()  # (off a terminal, progress is a log line every 30 s: tests/cli/test_progress.py)
    run_task(task, X, n_jobs=1, chunk_size=2, progress=True, stream=stream)
    text = stream.getvalue()
    assert "6/6" in text and ("failed=1" in text or "1 failed" in text)
    quiet = io.StringIO()  # not a terminal: no bar by default
    run_task(task, X, n_jobs=1, progress=None, stream=quiet)
    assert quiet.getvalue() == ""


def test_rows_selection_and_bad_rows(data: dict[str, Any]) -> None:
    task, X = flaky(data, ())
    res = run_task(task, X, rows=[4, 1], progress=False)
    assert [r["row"] for r in res.records] == [1, 4]
    with pytest.raises(Exception, match="row 9 is outside the data"):
        run_task(task, X, rows=[9], progress=False)


def test_records_are_plain_json(data: dict[str, Any], tmp_path: Path) -> None:
    out = tmp_path / "s.jsonl"
    res = explain_batch(data["model"], data["X"].iloc[:2], "sensitive", reference=data["R"], output=out,
                        progress=False)
    for line in out.read_text().splitlines()[1:]:
        rec = json.loads(line)
        assert rec["status"] == "ok" and rec["result"]["distance"] > 0 and rec["result"]["tests"]
    assert res.records[0]["result"]["metric"]["norm"] == "l2"


def test_batch_command_resumes(project_src: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from lumber.compiler.cli import main

    out = tmp_path / "s.jsonl"
    args = ["batch", str(project_src / "model.txt"), str(project_src / "valid.csv"), "--sensitive", "-o", str(out),
            "--train", str(project_src / "train.csv"), "--scale", "std", "--jobs", "1", "--no-progress"]
    assert main([*args, "--rows", "0:2"]) == 0
    assert "2 rows: 2 explained, 0 failed; 2 computed now" in capsys.readouterr().out
    assert main([*args, "--rows", "0:3"]) == 0
    assert "3 rows: 3 explained, 0 failed; 1 computed now" in capsys.readouterr().out
    _, lines = read_output(out)
    assert sorted(r["row"] for r in lines) == [0, 1, 2]
    assert lines[0]["result"]["metric"]["scale"] == "std"
    assert main([*args, "--norm", "l1", "--rows", "0:3"]) == 2  # other options: refused, not mixed
    assert "written by a batch with a different model, options or reference rows" in capsys.readouterr().err


def test_rule_chunks_stay_small_enough_for_progress() -> None:
    """Local rules build their explainer once per chunk: few chunks, but never more than RULE_CHUNK rows each
    (a report over 1,000 cases moves its progress every RULE_CHUNK rows); counterfactuals: 4 per worker."""
    from lumber.compiler.api.batch import RULE_CHUNK, Task

    rules = Task("rules", None)  # type: ignore[arg-type]
    assert rules.chunk_size(1000, 2) == RULE_CHUNK
    assert rules.chunk_size(50, 2) == 25
    assert Task("counterfactual", None).chunk_size(1000, 2) == 125  # type: ignore[arg-type]
