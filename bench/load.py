"""Benchmark: load a big LightGBM model text (1000 trees x 255 leaves) into a lumber Forest.

Compares ``lumber.compiler.frontends.lightgbm.load_lightgbm_text`` (parse,
check, lower to a validated Forest) with LightGBM's own loader
(``lightgbm.Booster(model_file=...)``) and treelite's
(``treelite.frontend.load_lightgbm_model``) on the same trusted file. Runs are
interleaved in one process; the median of ``--runs`` is reported. Peak memory
is measured in a fresh subprocess per loader (growth of the peak RSS over the
imports) and, for lumber, also with tracemalloc.

Targets: lumber under 2 s and peak memory under 10x the file size.

    .venv/bin/python bench/load.py [--runs 5] [--trees 1000] [--leaves 255] [--quick] [--dry-run]

Writes ``bench/results/load.json`` and ``bench/results/load.md`` (``load-quick.*`` with --quick:
200 trees x 63 leaves, 2 runs).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
import tracemalloc
from pathlib import Path
from typing import Any, Callable

import numpy as np

import _outputs

HERE = Path(__file__).resolve().parent
RESULTS = HERE / "results"
TARGET_SECONDS = 2.0
TARGET_MEMORY_RATIO = 10.0


def make_model(path: Path, trees: int, leaves: int, features: int = 20, rows: int = 8000) -> None:
    """Train (once, cached) a regression model whose trees all reach ``leaves`` leaves."""
    import lightgbm as lgb

    rng = np.random.default_rng(0)
    X = rng.normal(size=(rows, features))
    X[rng.random(X.shape) < 0.05] = np.nan
    X[:, -1] = rng.integers(0, 30, rows)
    y = np.nansum(np.sin(X[:, :10] * 3), axis=1) + rng.normal(size=rows) + (X[:, -1] % 7) + rng.normal(scale=0.5, size=rows)
    params = {"objective": "regression", "num_leaves": leaves, "min_data_in_leaf": 5, "learning_rate": 0.05,
              "feature_fraction": 0.8, "bagging_fraction": 0.7, "bagging_freq": 1, "verbose": -1, "seed": 0,
              "max_bin": 63, "min_data_per_group": 5, "cat_smooth": 1, "num_threads": 1}
    booster = lgb.train(params, lgb.Dataset(X, y, categorical_feature=[features - 1]), num_boost_round=trees)
    tmp = path.with_suffix(".tmp")
    booster.save_model(str(tmp))
    tmp.replace(path)


def load_lumber(path: Path) -> Any:
    from lumber.compiler.frontends.lightgbm import load_lightgbm_text

    return load_lightgbm_text(path)


def load_lightgbm(path: Path) -> Any:
    import lightgbm as lgb

    return lgb.Booster(model_file=str(path))


def load_treelite(path: Path) -> Any:
    import treelite

    return treelite.frontend.load_lightgbm_model(str(path))


LOADERS: dict[str, Callable[[Path], Any]] = {"lumber": load_lumber, "lightgbm": load_lightgbm, "treelite": load_treelite}

_RSS_CHILD = """
import sys, gc
sys.path.insert(0, {here!r})
import load as bench
from pathlib import Path
import lightgbm, treelite, lumber.compiler.frontends.lightgbm  # imports are not part of the load
gc.collect()
before = bench.peak_rss()
obj = bench.LOADERS[{name!r}](Path({path!r}))
print(bench.peak_rss() - before)
"""


def peak_rss() -> int:
    """Peak resident set size of this process in bytes.

    ``VmHWM`` (Linux) starts afresh at exec, unlike ``ru_maxrss``, which a
    child inherits from its parent's peak.
    """
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    except OSError:
        pass
    import resource

    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def peak_rss_growth(name: str, path: Path) -> int:
    """Bytes the peak RSS grows by while ``name`` loads the file (fresh process)."""
    code = _RSS_CHILD.format(here=str(HERE), name=name, path=str(path))
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return int(out.stdout.strip().splitlines()[-1])


def tracemalloc_peak(path: Path) -> int:
    tracemalloc.start()
    forest = load_lumber(path)
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    del forest
    return peak


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=None, help="interleaved runs (default 5; quick 2)")
    ap.add_argument("--trees", type=int, default=None, help="trees of the model (default 1000; quick 200)")
    ap.add_argument("--leaves", type=int, default=None, help="leaves per tree (default 255; quick 63)")
    ap.add_argument("--quick", action="store_true", help="a 200 x 63 model, 2 runs, into load-quick.*")
    _outputs.add_dry_run(ap)
    ap.add_argument("--cache-dir", type=Path, default=Path(tempfile.gettempdir()) / "lumber-bench")
    args = ap.parse_args(argv)
    args.runs = args.runs or (2 if args.quick else 5)
    args.trees = args.trees or (200 if args.quick else 1000)
    args.leaves = args.leaves or (63 if args.quick else 255)
    name = _outputs.stem("load", args.quick)
    js, mdp = RESULTS / f"{name}.json", RESULTS / f"{name}.md"
    if _outputs.dry_run(args, js, mdp):
        return 0

    args.cache_dir.mkdir(parents=True, exist_ok=True)
    path = args.cache_dir / f"lightgbm_{args.trees}x{args.leaves}.txt"
    if not path.exists():
        print(f"training the benchmark model -> {path} (once)", flush=True)
        make_model(path, args.trees, args.leaves)
    size = path.stat().st_size

    forest = load_lumber(path)  # warm-up (imports) and a sanity check against LightGBM
    booster = load_lightgbm(path)
    X = np.random.default_rng(1).normal(size=(200, forest.n_features))
    X[::7, 3] = np.nan
    X[:, -1] = np.random.default_rng(2).integers(-1, 35, size=200)  # the categorical column
    exact = bool(np.array_equal(forest.evaluate(X), booster.predict(X, raw_score=True)))
    load_treelite(path)
    summary = forest.summary()
    del booster

    times: dict[str, list[float]] = {k: [] for k in LOADERS}
    for _ in range(args.runs):
        for name, fn in LOADERS.items():
            t0 = time.perf_counter()
            obj = fn(path)
            times[name].append(time.perf_counter() - t0)
            del obj
    med = {k: statistics.median(v) for k, v in times.items()}
    rss = {k: peak_rss_growth(k, path) for k in LOADERS}
    tm_peak = tracemalloc_peak(path)

    result = {
        "benchmark": "load",
        "model": {"file": path.name, "bytes": size, "trees": summary["trees"], "nodes": summary["nodes"],
                  "leaves": summary["leaves"], "categorical_splits": summary["categorical_splits"]},
        "runs": args.runs,
        "seconds_median": med,
        "seconds_all": times,
        "ratio_to_lumber": {k: med[k] / med["lumber"] for k in LOADERS},
        "peak_rss_growth_bytes": rss,
        "lumber_tracemalloc_peak_bytes": tm_peak,
        "lumber_memory_ratio_to_file": max(tm_peak, rss["lumber"]) / size,
        "lumber_exact_vs_lightgbm_raw_score": exact,
        "targets": {"seconds": TARGET_SECONDS, "memory_ratio": TARGET_MEMORY_RATIO},
        "meets_targets": med["lumber"] < TARGET_SECONDS and max(tm_peak, rss["lumber"]) / size < TARGET_MEMORY_RATIO,
        "environment": {"python": platform.python_version(), "machine": platform.machine(),
                        "cpus": os.cpu_count(), "load_average_1min": os.getloadavg()[0],
                        "numpy": np.__version__, **_versions()},
    }
    RESULTS.mkdir(exist_ok=True)
    from lumber.ir import atomic_write_text

    atomic_write_text(js, json.dumps(result, indent=2) + "\n")
    atomic_write_text(mdp, _markdown(result))
    print(_markdown(result))
    return 0


def _versions() -> dict[str, str]:
    import lightgbm
    import treelite

    return {"lightgbm": lightgbm.__version__, "treelite": treelite.__version__}


def _markdown(r: dict[str, Any]) -> str:
    m = r["model"]
    mb = 1024 * 1024
    lines = [
        "# Load benchmark: LightGBM model text -> in-memory model",
        "",
        f"Model: {m['trees']} trees, {m['nodes']} nodes ({m['leaves']} leaves, {m['categorical_splits']} categorical "
        f"splits), file {m['bytes'] / mb:.1f} MB. Median of {r['runs']} interleaved runs; peak memory is the growth "
        "of peak RSS in a fresh process (imports excluded).",
        "",
        "| loader | seconds (median) | ratio to lumber | peak RSS growth (MB) | x file size |",
        "|---|---|---|---|---|",
    ]
    for k, s in r["seconds_median"].items():
        rss = r["peak_rss_growth_bytes"][k]
        lines.append(f"| {k} | {s:.3f} | {r['ratio_to_lumber'][k]:.2f} | {rss / mb:.1f} | {rss / m['bytes']:.1f} |")
    lines += [
        "",
        f"lumber tracemalloc peak: {r['lumber_tracemalloc_peak_bytes'] / mb:.1f} MB "
        f"({r['lumber_tracemalloc_peak_bytes'] / m['bytes']:.1f}x the file).",
        f"lumber margins equal LightGBM's raw_score bit for bit: {r['lumber_exact_vs_lightgbm_raw_score']}.",
        f"Targets (< {r['targets']['seconds']} s, < {r['targets']['memory_ratio']:.0f}x file size): "
        f"{'met' if r['meets_targets'] else 'NOT met'}.",
        "",
        f"Environment: Python {r['environment']['python']} ({r['environment']['machine']}, "
        f"{r['environment']['cpus']} CPUs, load average {r['environment']['load_average_1min']:.1f} at the end), numpy "
        f"{r['environment']['numpy']}, lightgbm {r['environment']['lightgbm']}, treelite {r['environment']['treelite']}.",
        "",
    ]
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
