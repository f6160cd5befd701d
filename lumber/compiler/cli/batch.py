"""``lumber batch MODEL DATA.csv --counterfactual -o out.jsonl [--scheduler tcp://host:port]``.

Explains every row of DATA (or ``--rows``) and streams one JSON line per row
into the output as rows finish; running the same command again resumes,
skipping rows already there. Rows run on local workers (joblib, ``--jobs``)
on a Dask cluster (``--scheduler``) or on Spark (``--spark MASTER``). A failing
row is recorded and the batch goes on. SIGTERM stops the workers and keeps
the rows written so far.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import threading
from contextlib import contextmanager
from typing import Iterator

from . import _options

NAME = "batch"
HELP = "explain many rows in parallel (joblib, Dask or Spark) into resumable JSON Lines"
OUTPUTS = {"output": "file"}
"""Output options checked before any work (lumber.ir.atomic: the folder of a file must exist)."""
DESCRIPTION = __doc__.split("\n\n", 1)[1].strip() if __doc__ else HELP


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("model", help=_options.MODEL_HELP)
    p.add_argument("data", help="CSV of cases (a header row names the features)")
    what = p.add_mutually_exclusive_group(required=True)
    for a in ("counterfactual", "sensitive", "rules"):
        what.add_argument(f"--{a}", dest="analysis", action="store_const", const=a, help=f"{a} per row")
    p.add_argument("-o", "--output", required=True, help="JSON Lines output (resumed when it exists)")
    _options.add_explainer_options(p)
    p.set_defaults(jobs=-1)  # a batch is for many rows: every local core
    _options.add_rows(p)
    _options.add_no_header(p)
    p.add_argument("--scheduler", help="Dask scheduler address, e.g. tcp://10.0.0.5:8786")
    p.add_argument("--spark", metavar="MASTER", help="run on Spark with this master, e.g. local[4] or "
                                                     "spark://host:7077 (needs pyspark: lumber[spark])")
    p.add_argument("--chunk-size", type=_options.positive_int, help="rows per task (default: sized to the workers)")
    p.add_argument("--retry-failed", action="store_true", help="explain again the rows recorded as errors")
    p.add_argument("--progress", dest="progress", action="store_true", default=None, help="always show progress")
    p.add_argument("--no-progress", dest="progress", action="store_false", help="never show progress")
    _options.add_quiet(p, "no progress and no summary line (failures are still listed on stderr)")


def run(args: argparse.Namespace) -> int:
    from lumber.compiler.api.batch import make_task, run_task
    from lumber.runtime.data import case_ids, read_rows
    from lumber.compiler.frontends import load
    from lumber.ir.decision import with_cutoff

    args.scale = _options.scale_of(args)
    cutoff = _options.cutoff_of(args)
    forest = load(args.model)
    forest = forest.replace(schema=with_cutoff(forest.schema, cutoff))  # --threshold: every row decided by it
    ignore = [args.id] if args.id else []
    frame, X = read_rows(args.data, forest, header=not args.no_header, ignore=ignore)
    ids = case_ids(frame, args.id, args.data) if args.id else None
    R = None
    if args.train:
        R = read_rows(args.train, forest, header=not args.no_header, ignore=ignore)[1]
    elif args.analysis != "rules":  # every row of DATA gives the domains and statistics, as in `lumber explain`
        R = X
    options: dict[str, object] = {}
    if args.analysis in ("counterfactual", "sensitive"):
        options.update(time_limit=args.time_limit)
    if args.analysis in ("counterfactual", "rules"):
        options.update(seed=args.seed)
    if args.norm and args.analysis != "rules":
        options["norm"] = args.norm
    if args.scale and args.analysis != "rules":
        options["scale"] = args.scale
    target = _target(args.target, forest)
    task = make_task(forest, args.analysis, target=target, constraints=args.constraints, reference=R, **options)
    rows = _options.parse_rows(args.rows, len(X)) if args.rows else None
    with _stopped_by_sigterm(), _scheduler(args) as scheduler:
        res = run_task(task, X, rows=rows, output=args.output, scheduler=scheduler, n_jobs=args.jobs,
                       chunk_size=args.chunk_size, progress=False if args.quiet else args.progress is not False,
                       retry_failed=args.retry_failed, ids=ids)
    if not args.quiet:
        print(f"{args.output}: {res.summary()}", file=sys.stdout)
    for r in res.failed[:5]:
        print(f"  row {r['row']}: {r['error']['type']}: {r['error']['message']}", file=sys.stderr)
    return 0


@contextmanager
def _stopped_by_sigterm() -> Iterator[None]:
    """SIGTERM ends the batch as Ctrl-C does: the workers are stopped (run_task closes its scheduler) and
    the records written so far stay, so the batch resumes; the exit status is 128 + 15."""
    def stop(signum: int, frame: object) -> None:
        raise SystemExit(128 + signum)

    if threading.current_thread() is not threading.main_thread():
        yield
        return
    before = signal.signal(signal.SIGTERM, stop)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, before)


@contextmanager
def _scheduler(args: argparse.Namespace) -> Iterator[object]:
    """The Dask address, or a Spark session on ``--spark MASTER`` (stopped afterwards), or None (joblib)."""
    if args.spark and args.scheduler:
        from lumber.ir import InputDataError

        raise InputDataError("give --scheduler (Dask) or --spark, not both")
    if not args.spark:
        yield args.scheduler
        return
    try:
        from pyspark.sql import SparkSession
    except ImportError:
        from lumber.compiler.api.batch import BatchError

        raise BatchError("--spark needs pyspark", "pip install 'lumber[spark]'") from None
    if args.spark.startswith("local"):  # local workers run this Python, which has lumber
        os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    session = SparkSession.builder.master(args.spark).appName("lumber batch").getOrCreate()
    try:
        yield session
    finally:
        session.stop()


def _target(spec: str | None, forest: object) -> object:
    """A class label as the model knows it (``"1"`` -> 1 for integer classes)."""
    if spec is None:
        return None
    classes = getattr(getattr(forest, "schema", None), "classes", None)
    for c in classes or ():
        if str(c) == spec:
            return c
    try:
        return int(spec)
    except ValueError:
        return spec
