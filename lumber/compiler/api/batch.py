"""Batch explanation of many rows: local workers (joblib), a Dask cluster or Spark, resumable JSONL output.

Each row's explanation is independent (one MILP per counterfactual), so rows
are cut into chunks and explained in parallel. Results stream into a JSON
Lines file as chunks finish, one line per row::

    {"lumber_batch": 1, "analysis": "counterfactual", "model": "<fingerprint>", "options": "<hash>", ...}
    {"row": 17, "key": "3f9c...", "status": "ok", "result": {...}, "seconds": 0.08}
    {"row": 4, "key": "a1b2...", "status": "error", "error": {"type": "InputDataError", "message": "..."}}

Running again with the same file skips every row already in it (a truncated
last line from a crash is dropped and redone), so an interrupted batch
resumes without losing or duplicating rows. A row that raises is recorded
as ``"status": "error"`` and the batch goes on; ``retry_failed`` redoes them.
The header pins the model, analysis and options: resuming into a file written
for something else is refused, as is a row whose data changed.

```python
res = lumber.compiler.api.batch.explain_batch(model, X, "counterfactual", output="cf.jsonl",
                                          reference=X_train, target=1)           # joblib, all cores
res = explain_batch(model, X, "counterfactual", scheduler="tcp://10.0.0.5:8786")  # a Dask cluster
res = explain_batch(model, X, "counterfactual", scheduler=client)                 # a dask.distributed.Client
res = explain_batch(model, X, "counterfactual", scheduler=spark)                  # a SparkSession
```

Every scheduler writes the same file. An interrupted batch (an exception, Ctrl-C, or
SIGTERM under ``lumber batch``) stops its workers before returning: joblib's are
terminated, Dask's and Spark's tasks cancelled.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any, Callable, Iterable, Iterator, Sequence

import numpy as np
import numpy.typing as npt

from lumber.compiler.api.rules import RuleExplainer
from lumber.compiler.explain import ExplanationRequest, explanation_request
from lumber.runtime.progress import Progress
from lumber.ir import Constraints, Forest, InputDataError, LumberError

FORMAT_VERSION = 1
CONNECT_TIMEOUT = 10.0
"""Seconds to wait for a Dask scheduler given by address."""
ANALYSES = ("counterfactual", "sensitive", "rules")
RULE_CHUNK = 100
"""Most rows per chunk of local rules: building the rule explainer (about 5 s on adult's training rows) costs
a few percent of 100 cases' searches (about 1 s each), and the progress moves every 100 rows."""
FloatArray = npt.NDArray[np.float64]
Record = dict[str, Any]


class BatchError(LumberError):
    """A batch cannot start or resume (incompatible output file, bad scheduler)."""


# -- tasks: what one chunk of rows runs ---------------------------------------------------------------

@dataclass
class Task:
    """A picklable explainer of a chunk of rows through lumber's public API; returns one JSON dict per row."""

    analysis: str
    forest: Forest
    target: Any = None
    constraints: Constraints | None = None
    reference: FloatArray | None = None
    options: dict[str, Any] = field(default_factory=dict)
    model: Any = None
    """The source model object when one was given: every explanation is re-checked on it."""

    def request(self) -> ExplanationRequest:
        """What every chunk explains (:mod:`lumber.compiler.explain`), from the Forest already lowered."""
        return explanation_request(self.model if self.model is not None else self.forest, forest=self.forest,
                                   constraints=self.constraints, target=self.target, reference=self.reference)

    def __call__(self, X: FloatArray, rows: Sequence[int]) -> list[dict[str, Any]]:
        import lumber

        req = self.request()
        if self.analysis == "counterfactual":
            res = lumber.counterfactual(req, X, n_jobs=1, options=lumber.CounterfactualOptions(**self.options))
            return [r.to_dict() for r in res]
        if self.analysis == "sensitive":
            out = lumber.sensitive_tests(req, X, options=lumber.SensitiveOptions(**self.options))
            out.rows = np.asarray(rows, dtype=np.int64)
            names = self.forest.schema.feature_names
            meta = {"method": out.method, "exact": out.exact, "metric": out.metric.describe(),
                    "not_applied": [n.to_dict() for n in out.not_applied]}
            return [dict(c.to_dict(names), **meta) for c in out]
        if self.analysis == "rules":
            if self.reference is None:
                raise InputDataError("counterfactual rules need training rows", "pass reference=X_train")
            opts = lumber.RuleOptions(**self.options)
            rs = RuleExplainer(req, self.reference, options=opts).local(X, rows=list(rows))
            return [dict(r.to_dict(), text=r.to_text()) for r in rs]
        raise InputDataError(f"unknown analysis {self.analysis!r}", f"batch analyses: {', '.join(ANALYSES)}")

    def chunk_size(self, n: int, workers: int) -> int:
        """Rows per chunk: rules build their explainer per call (few big chunks, at most :data:`RULE_CHUNK` rows
        so that progress moves), MILPs balance better in small ones."""
        if self.analysis == "rules":
            return max(1, min(math.ceil(n / max(1, workers)), RULE_CHUNK))
        return max(1, math.ceil(n / max(1, workers * 4)))

    def fingerprint(self) -> str:
        """Identifies model, analysis and options: a resumed file must have been written for the same."""
        from lumber.backends.base import fingerprint

        h = hashlib.sha256()
        h.update(fingerprint(self.forest).encode())
        h.update(json.dumps({"analysis": self.analysis, "target": _plain(self.target), "options": self.options,
                             "constraints": self.constraints.to_dict() if self.constraints is not None else None},
                            sort_keys=True, default=str).encode())
        if self.reference is not None:
            h.update(np.ascontiguousarray(self.reference).tobytes())
        return h.hexdigest()


def make_task(model: Any, analysis: str = "counterfactual", *, target: Any = None, constraints: Any = None,
              reference: Any = None, **options: Any) -> Task:
    """A Task for ``analysis`` on ``model`` (anything :func:`lumber.load` accepts; a model object is
    kept so that every explanation is re-checked on it)."""
    if analysis not in ANALYSES:
        raise InputDataError(f"unknown analysis {analysis!r}", f"batch analyses: {', '.join(ANALYSES)}")
    req = explanation_request(model, constraints=constraints, reference=reference)
    source = model if req.predictor is not None else None
    return Task(analysis, req.forest, target, req.constraints, req.reference, dict(options), source)


# -- running one chunk ---------------------------------------------------------------------------------

def row_key(x: FloatArray) -> str:
    """Identity of a row's values (NaN-safe): a resumed row must be the same data."""
    return hashlib.sha256(np.ascontiguousarray(x, dtype=np.float64).tobytes()).hexdigest()[:16]


def _error(exc: BaseException) -> dict[str, str]:
    msg = exc.diagnostics[0].message if isinstance(exc, LumberError) else str(exc)
    return {"type": type(exc).__name__, "message": msg or repr(exc)}


def run_chunk(task: Task, X: FloatArray, rows: Sequence[int]) -> list[Record]:
    """Explain a chunk; if it raises, explain its rows one by one so one bad row fails alone."""
    t0 = time.perf_counter()
    try:
        results = task(X, rows)
        if len(results) != len(rows):
            raise RuntimeError(f"{task.analysis} returned {len(results)} results for {len(rows)} rows")
        dt = (time.perf_counter() - t0) / max(1, len(rows))
        return [{"row": int(r), "key": row_key(x), "status": "ok", "result": res, "seconds": dt}
                for r, x, res in zip(rows, X, results)]
    except KeyboardInterrupt:
        raise
    except Exception as exc:
        if len(rows) == 1:
            return [{"row": int(rows[0]), "key": row_key(X[0]), "status": "error", "error": _error(exc),
                     "seconds": time.perf_counter() - t0}]
    out: list[Record] = []
    for i, r in enumerate(rows):
        out.extend(run_chunk(task, X[i:i + 1], [r]))
    return out


# -- the output file -------------------------------------------------------------------------------------

def read_output(path: Path) -> tuple[Record | None, list[Record]]:
    """Header and row records of a JSONL output; a torn last line (crash mid-write) is cut off the file."""
    if not path.exists() or path.stat().st_size == 0:
        return None, []
    data = path.read_bytes()
    end = data.rfind(b"\n") + 1
    if end < len(data):  # the last line never got its newline: drop it
        with path.open("r+b") as fh:
            fh.truncate(end)
        data = data[:end]
    header: Record | None = None
    records: list[Record] = []
    for n, line in enumerate(data.splitlines(), 1):
        if not line.strip():
            continue
        try:
            rec = json.loads(line)
        except json.JSONDecodeError:
            raise BatchError(f"{path}:{n}: not a JSON line", "the file is not a lumber batch output; use another -o")
        if n == 1 and isinstance(rec, dict) and "lumber_batch" in rec:
            header = rec
        elif isinstance(rec, dict) and "row" in rec and "status" in rec:
            records.append(rec)
        else:
            raise BatchError(f"{path}:{n}: not a lumber batch record")
    if records and header is None:
        raise BatchError(f"{path}: no lumber batch header line")
    return header, records


def _rewrite(path: Path, header: Record, records: Iterable[Record]) -> None:
    from lumber.ir import atomic_write_text

    atomic_write_text(path, "".join(_line(r) for r in [header, *records]))


def _line(rec: Record) -> str:
    return json.dumps(rec, sort_keys=True, allow_nan=False, default=_plain) + "\n"


def _plain(v: Any) -> Any:
    if isinstance(v, np.generic):
        v = v.item()
    if isinstance(v, float) and not math.isfinite(v):
        return None if math.isnan(v) else ("inf" if v > 0 else "-inf")
    if isinstance(v, np.ndarray):
        return [_plain(x) for x in v.tolist()]
    if isinstance(v, tuple):
        return [_plain(x) for x in v]
    if isinstance(v, (str, int, float, bool)) or v is None:
        return v
    return str(v)


# -- schedulers ------------------------------------------------------------------------------------------

def _local(task: Task, chunks: list[tuple[FloatArray, list[int]]], n_jobs: int) -> Iterator[list[Record]]:
    if n_jobs == 1 or len(chunks) <= 1:
        for X, rows in chunks:
            yield run_chunk(task, X, rows)
        return
    from joblib import Parallel, delayed

    yield from Parallel(n_jobs=n_jobs, return_as="generator_unordered")(
        delayed(run_chunk)(task, X, rows) for X, rows in chunks)


def _dask(task: Task, chunks: list[tuple[FloatArray, list[int]]], scheduler: Any) -> Iterator[list[Record]]:
    try:
        from distributed import Client, as_completed
    except ImportError:
        raise BatchError("a Dask scheduler needs dask.distributed",
                         "pip install 'lumber[scale]' (or 'dask[distributed]')") from None
    own = isinstance(scheduler, str)
    if own:
        try:
            client = Client(scheduler, timeout=CONNECT_TIMEOUT, set_as_default=False)
        except (OSError, TimeoutError) as exc:
            raise BatchError(f"cannot reach the Dask scheduler at {scheduler} ({exc})",
                             "start one with `dask scheduler` and workers with `dask worker ADDRESS`") from None
    else:
        client = scheduler
        if not (hasattr(client, "submit") and hasattr(client, "scatter")):
            raise BatchError(f"scheduler must be an address 'tcp://host:port' or a dask.distributed.Client, "
                             f"not {type(scheduler).__name__}")
    try:
        # hash=False: the task gets a key of this batch's own. A content-hashed key is shared with any
        # other batch of the same task on the cluster, and the scheduler can process that batch's
        # release of the key after this scatter: the key is forgotten and every chunk is cancelled
        # for "lost dependencies".
        shared = client.scatter(task, broadcast=True, hash=False)
        futures = [client.submit(run_chunk, shared, X, rows, pure=False) for X, rows in chunks]
        try:
            for fut in as_completed(futures):
                yield fut.result()
        finally:
            client.cancel([*futures, shared])
    finally:
        if own:
            client.close()


def _spark_context(scheduler: Any) -> Any | None:
    """The SparkContext of a SparkSession or SparkContext; None for anything else."""
    sc = getattr(scheduler, "sparkContext", scheduler)
    return sc if hasattr(sc, "runJob") and hasattr(sc, "parallelize") else None


def _spark_chunk(task: Task, it: Iterable[tuple[FloatArray, list[int]]]) -> list[Record]:
    return [rec for X, rows in it for rec in run_chunk(task, X, rows)]


def _spark(task: Task, chunks: list[tuple[FloatArray, list[int]]], sc: Any) -> Iterator[list[Record]]:
    """One Spark job per chunk, several at once from threads (Spark schedules concurrent jobs), yielded as
    they finish; all of this batch's jobs share a job group, cancelled if the batch stops early."""
    from concurrent.futures import ThreadPoolExecutor, as_completed
    from functools import partial

    group = f"lumber-batch-{os.getpid()}-{time.monotonic_ns()}"
    rdd = sc.parallelize(chunks, len(chunks))
    fn = partial(_spark_chunk, task)

    def job(i: int) -> list[Record]:
        sc.setJobGroup(group, "lumber batch", interruptOnCancel=True)
        return sc.runJob(rdd, fn, [i])  # type: ignore[no-any-return]

    pool = ThreadPoolExecutor(max(1, int(sc.defaultParallelism)), thread_name_prefix="lumber-spark")
    futures = [pool.submit(job, i) for i in range(len(chunks))]
    finished = False
    try:
        for fut in as_completed(futures):
            yield fut.result()
        finished = True
    finally:
        if not finished:
            for fut in futures:
                fut.cancel()
            sc.cancelJobGroup(group)
        pool.shutdown(wait=True, cancel_futures=True)


def _source(task: Task, chunks: list[tuple[FloatArray, list[int]]], scheduler: Any,
            n_jobs: int) -> Iterator[list[Record]]:
    if scheduler is None:
        return _local(task, chunks, n_jobs)
    sc = _spark_context(scheduler)
    if sc is not None:
        return _spark(task, chunks, sc) if chunks else iter(())
    return _dask(task, chunks, scheduler)


def workers_of(scheduler: Any, n_jobs: int) -> int:
    """How many rows can run at once (sizes the chunks)."""
    if scheduler is None:
        return (os.cpu_count() or 1) if n_jobs < 0 else max(1, n_jobs)
    sc = _spark_context(scheduler)
    if sc is not None:
        return max(1, int(sc.defaultParallelism))
    info = getattr(scheduler, "nthreads", None)
    if callable(info):
        try:
            return max(1, sum(info().values()))
        except Exception:  # a client that cannot answer right now: chunk for a small cluster
            return 4
    return 4


# -- the batch -------------------------------------------------------------------------------------------

@dataclass
class BatchResult:
    """Every row's record (from this run and earlier ones), sorted by row."""

    records: list[Record]
    computed: int
    """Rows explained by this run (the rest were in the output already)."""
    skipped: int
    seconds: float
    output: Path | None = None

    @property
    def failed(self) -> list[Record]:
        return [r for r in self.records if r["status"] != "ok"]

    @property
    def rows_per_second(self) -> float:
        return self.computed / self.seconds if self.seconds > 0 else 0.0

    def results(self) -> dict[int, Any]:
        """Row -> result dict of the rows that succeeded."""
        return {r["row"]: r["result"] for r in self.records if r["status"] == "ok"}

    def summary(self) -> str:
        n, bad = len(self.records), len(self.failed)
        return (f"{n} rows: {n - bad} explained, {bad} failed; "
                f"{self.computed} computed now ({self.rows_per_second:.2f} rows/s), {self.skipped} already done")


def explain_batch(model: Any, X: Any, analysis: str = "counterfactual", *, output: str | Path | None = None,
                  rows: Sequence[int] | None = None, scheduler: Any = None, n_jobs: int = -1,
                  chunk_size: int | None = None, progress: bool | None = None, retry_failed: bool = False,
                  target: Any = None, constraints: Any = None, reference: Any = None,
                  callback: Callable[[Record], None] | None = None, **options: Any) -> BatchResult:
    """Explain every row of ``X`` (or ``rows`` of it) with ``analysis``; see the module docstring.

    Parameters
    ----------
    model, X : a model (object, file or Forest) and the cases (array or DataFrame).
    analysis : ``"counterfactual"``, ``"sensitive"`` or ``"rules"``.
    output : JSONL file written as rows finish; rows already in it are skipped.
    scheduler : None (joblib on this machine, ``n_jobs`` workers, -1 = all cores), a Dask address
        ``"tcp://host:port"``, a ``dask.distributed.Client``, or a ``pyspark.sql.SparkSession``
        (or SparkContext): one Spark job per chunk.
    progress : None (a bar on stderr when it is a terminal), True or False.
    retry_failed : explain again the rows recorded as errors.
    target, constraints, reference, **options : passed to the analysis' public API
        (``lumber.counterfactual``, ``lumber.sensitive_tests``, ``lumber.counterfactual_rules``).
    callback : called with each record after it is written (progress hooks, tests).
    """
    task = make_task(model, analysis, target=target, constraints=constraints, reference=reference, **options)
    Xp = task.forest.prepare_input(X)
    return run_task(task, Xp, rows=rows, output=output, scheduler=scheduler, n_jobs=n_jobs, chunk_size=chunk_size,
                    progress=progress, retry_failed=retry_failed, callback=callback)


def run_task(task: Task, X: FloatArray, *, rows: Sequence[int] | npt.NDArray[np.int64] | None = None,
             output: str | Path | None = None,
             scheduler: Any = None, n_jobs: int = -1, chunk_size: int | None = None, progress: bool | None = None,
             retry_failed: bool = False, callback: Callable[[Record], None] | None = None,
             stream: IO[str] | None = None, ids: Sequence[str] | None = None) -> BatchResult:
    """Run ``task`` over the rows of prepared data ``X``; see :func:`explain_batch`. ``ids`` (one per row
    of ``X``, from ``--id``) are written into each record as ``"id"``."""
    todo_rows = list(range(X.shape[0])) if rows is None else [int(r) for r in rows]
    bad = [r for r in todo_rows if not 0 <= r < X.shape[0]]
    if bad:
        raise InputDataError(f"row {bad[0]} is outside the data (0..{X.shape[0] - 1})")
    if len(set(todo_rows)) != len(todo_rows):
        raise InputDataError("rows lists a row twice")
    header = {"lumber_batch": FORMAT_VERSION, "analysis": task.analysis, "task": task.fingerprint(),
              "features": task.forest.schema.feature_names}
    done: dict[int, Record] = {}
    path = Path(output) if output is not None else None
    if path is not None:
        done = _resume(path, header, X, retry_failed)
    pending = [r for r in todo_rows if r not in done]
    workers = workers_of(scheduler, n_jobs)
    size = chunk_size or task.chunk_size(len(pending), workers)
    chunks = [(X[pending[i:i + size]], pending[i:i + size]) for i in range(0, len(pending), size)]
    bar = Progress(len(todo_rows), len(todo_rows) - len(pending), progress, f"{task.analysis}", stream)
    fh = path.open("a", encoding="utf-8") if path is not None else None
    t0 = time.perf_counter()
    computed = 0
    source = _source(task, chunks, scheduler, n_jobs)
    try:
        for recs in source:
            for rec in recs:
                if ids is not None:
                    rec["id"] = ids[rec["row"]]
                line = _line(rec)
                if fh is not None:
                    fh.write(line)
                    fh.flush()
                rec = json.loads(line)
                done[rec["row"]] = rec
                computed += 1
                if callback is not None:
                    callback(rec)
            bar.update(len(recs), sum(r["status"] != "ok" for r in recs))
    finally:
        close = getattr(source, "close", None)
        if close is not None:  # stops the workers (joblib terminates them; Dask, Spark cancel) on an early exit
            close()
        if fh is not None:
            fh.flush()
            os.fsync(fh.fileno())
            fh.close()
        bar.close()
    seconds = time.perf_counter() - t0
    wanted = set(todo_rows)
    records = [done[r] for r in sorted(done) if r in wanted]
    return BatchResult(records, computed, len(todo_rows) - len(pending), seconds, path)


def _resume(path: Path, header: Record, X: FloatArray, retry_failed: bool) -> dict[int, Record]:
    """Rows already in ``path`` (checked against the header and the data); writes the header if new."""
    from lumber.ir.atomic import prepare_output

    prepare_output(path)  # the one output rule (lumber.ir.atomic): its folder exists, a directory refused
    old, records = read_output(path)
    if old is None:
        _rewrite(path, header, [])
        return {}
    if old.get("lumber_batch") != FORMAT_VERSION or old.get("analysis") != header["analysis"] \
            or old.get("task") != header["task"]:
        what = "analysis" if old.get("analysis") != header["analysis"] else "model, options or reference rows"
        raise BatchError(f"{path}: written by a batch with a different {what}",
                         "resume only with the same model and options; use a new output file to start over")
    done: dict[int, Record] = {}
    for rec in records:
        r = int(rec["row"])
        if not 0 <= r < X.shape[0] or rec.get("key") != row_key(X[r]):
            raise BatchError(f"{path}: row {r} was explained for different data",
                             "resume with the same data file, or use a new output file")
        done[r] = rec  # a later record of the same row wins
    if retry_failed:
        done = {r: rec for r, rec in done.items() if rec["status"] == "ok"}
    if len(done) != len(records):
        _rewrite(path, old, [done[r] for r in sorted(done)])
    return done


__all__ = ["ANALYSES", "BatchError", "BatchResult", "Progress", "Task", "explain_batch", "make_task", "read_output",
           "row_key", "run_chunk", "run_task"]
