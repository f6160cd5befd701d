"""Benchmark: batch counterfactual explanation, rows per second, locally versus on a local Dask cluster.

Protocol: a LightGBM model (``--trees`` x ``--leaves``) on the bundled Adult data (75/25 split,
seed 0); the first ``--rows`` test rows are explained with ``lumber.compiler.api.batch`` (one MILP
per row, HiGHS, one solver thread per row, standardized L1 cost, training rows as reference).
Three ways, interleaved ``--rounds`` times in one process, the median reported:

* ``sequential``: one row after another in this process (``n_jobs=1``), the baseline;
* ``joblib``: local workers, ``n_jobs=-1`` (all cores), lumber's default;
* ``dask``: a ``LocalCluster`` of ``--workers`` worker processes, one thread each, started
  once before the rounds (its start-up time is reported apart), rows sent through a
  ``dask.distributed.Client`` exactly as ``--scheduler tcp://host:port`` sends them.

Every way must give the same status and cost for every row as the sequential run (checked).
Rows/s include process start-up for joblib (its workers are reused across rounds when the
loky executor stays warm, as in a long job). The machine's core count bounds every speed-up.

    .venv/bin/python bench/batch.py [--rows 32] [--rounds 3] [--workers 2] [--quick]

Writes ``bench/results/batch.json`` and ``bench/results/batch.md`` (``batch-quick.*`` with --quick).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import time
from pathlib import Path
from typing import Any

import _outputs

RESULTS = Path(__file__).resolve().parent / "results"


def setup(trees: int, leaves: int, rows: int) -> tuple[Any, Any, Any]:
    import lightgbm as lgb

    from lumber import datasets, load

    ds = datasets.load("adult")
    Xtr, Xte, ytr, _ = ds.split(test_size=0.25, seed=0)
    model = lgb.LGBMClassifier(n_estimators=trees, num_leaves=leaves, learning_rate=0.1, random_state=0, n_jobs=1,
                               deterministic=True, verbose=-1).fit(Xtr, ytr)
    return load(model.booster_), Xte.iloc[:rows].to_numpy(), Xtr.to_numpy()


def outcome(records: list[dict[str, Any]]) -> list[tuple[str, Any]]:
    return [(r["result"]["status"], r["result"]["cost"]) if r["status"] == "ok" else ("error", r["error"]["message"])
            for r in records]


def same(a: tuple[str, Any], b: tuple[str, Any]) -> bool:
    """Same status, and costs equal within the MILP's relative gap (1e-6): optimal ties may differ below it.

    A row that hit the time limit in either run is not compared: where a solve stops depends on the
    machine's load, not on the way rows are scheduled."""
    if "time_limit" in (a[0], b[0]):
        return True
    if a[0] != b[0]:
        return False
    if isinstance(a[1], float) and isinstance(b[1], float):
        return abs(a[1] - b[1]) <= 1e-6 * max(1.0, abs(b[1]))
    return bool(a[1] == b[1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rows", type=int, default=32)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--trees", type=int, default=50)
    ap.add_argument("--leaves", type=int, default=16)
    ap.add_argument("--time-limit", type=float, default=30.0)
    ap.add_argument("--quick", action="store_true", help="12 rows, 2 rounds, 30 trees")
    _outputs.add_dry_run(ap)
    args = ap.parse_args()
    stem = _outputs.stem("batch", args.quick)
    if _outputs.dry_run(args, RESULTS / f"{stem}.json", RESULTS / f"{stem}.md"):
        return
    if args.quick:
        args.rows, args.rounds, args.trees = 12, 2, 30

    from distributed import Client, LocalCluster

    from lumber.compiler.api.batch import make_task, run_task

    forest, X, R = setup(args.trees, args.leaves, args.rows)
    task = make_task(forest, "counterfactual", reference=R, scale="std", time_limit=args.time_limit)
    t0 = time.perf_counter()
    cluster = LocalCluster(n_workers=args.workers, threads_per_worker=1, processes=True, dashboard_address=None)
    client = Client(cluster)
    cluster_start = time.perf_counter() - t0

    ways = {
        "sequential": lambda: run_task(task, X, n_jobs=1, progress=False),
        "joblib": lambda: run_task(task, X, n_jobs=-1, progress=False),
        "dask": lambda: run_task(task, X, scheduler=client, progress=False),
    }
    times: dict[str, list[float]] = {k: [] for k in ways}
    reference: list[tuple[str, Any]] | None = None
    mismatches: dict[str, int] = {k: 0 for k in ways}
    time_limited: dict[str, int] = {k: 0 for k in ways}
    for rnd in range(args.rounds):
        for name, fn in ways.items():
            t = time.perf_counter()
            res = fn()
            dt = time.perf_counter() - t
            times[name].append(dt)
            got = outcome(res.records)
            if reference is None:
                reference = got
            mismatches[name] += sum(not same(a, b) for a, b in zip(got, reference))
            time_limited[name] += sum(st == "time_limit" for st, _ in got)
            print(f"round {rnd + 1} {name:<10} {args.rows / dt:7.2f} rows/s ({dt:.2f} s)", flush=True)
    client.close()
    cluster.close()
    assert reference is not None
    statuses: dict[str, int] = {}
    for s, _ in reference:
        statuses[s] = statuses.get(s, 0) + 1
    med = {k: statistics.median(v) for k, v in times.items()}
    rows_per_s = {k: args.rows / v for k, v in med.items()}
    result = {
        "bench": "batch", "quick": args.quick, "rows": args.rows, "rounds": args.rounds, "workers": args.workers,
        "model": {"library": "lightgbm", "trees": args.trees, "leaves": args.leaves, "data": "adult"},
        "machine": {"cpus": os.cpu_count(), "python": platform.python_version(), "platform": platform.platform()},
        "statuses": statuses, "cluster_start_seconds": cluster_start,
        "seconds": times, "median_seconds": med, "rows_per_second": rows_per_s,
        "speedup_vs_sequential": {k: med["sequential"] / v for k, v in med.items()},
        "dask_vs_joblib": med["joblib"] / med["dask"], "mismatches": mismatches, "time_limited_rows": time_limited,
    }
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / f"{stem}.json").write_text(json.dumps(result, indent=2) + "\n")
    lines = [
        f"# Batch counterfactuals: {args.rows} Adult rows, LightGBM {args.trees} x {args.leaves}",
        "",
        f"Machine: {os.cpu_count()} CPUs, Python {platform.python_version()}. Median of {args.rounds} interleaved "
        f"rounds. Dask: LocalCluster, {args.workers} worker processes x 1 thread (start-up "
        f"{cluster_start:.1f} s, not counted). Outcomes (first run): {statuses}; rows whose status or cost differ "
        f"from the first run: {sum(mismatches.values())}; solves that hit the {args.time_limit:g} s time limit, "
        f"summed over runs: {time_limited} (not compared).",
        "",
        "| way | median seconds | rows/s | vs sequential |",
        "|---|---|---|---|",
    ]
    for k in ways:
        lines.append(f"| {k} | {med[k]:.2f} | {rows_per_s[k]:.2f} | {med['sequential'] / med[k]:.2f}x |")
    lines += ["", f"Dask 2-worker cluster vs local joblib: {result['dask_vs_joblib']:.2f}x.", "",
              "Command: `.venv/bin/python bench/batch.py" + (" --quick" if args.quick else "") + "`"]
    (RESULTS / f"{stem}.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    if any(mismatches.values()):
        raise SystemExit(f"outcomes differ from the sequential run: {mismatches}")


if __name__ == "__main__":
    main()
