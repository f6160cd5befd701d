"""Benchmark: sensitive tests (Alvarez) on real data and their throughput.

1. Table 1 of the paper, rebuilt: on wine, compas and adult, C4.5-like trees
   (scikit-learn ``DecisionTreeClassifier(criterion="entropy", min_samples_leaf=2)``,
   depth 4-10, trained on 2/3 of the rows as the paper did with Weka j48) and
   their test third: number of leaves, depth, attributes used, mean/median trace
   size (root-to-leaf tests) and mean/median number of sensitive tests (nearest
   change of class under L2 with min/max scaling from the training rows). The
   paper's own rows are printed beside ours (it has wine; Pima and Ionosphere are
   not bundled, their rows are shown for reference).
2. Throughput: 100k cases on 255-leaf trees (adult, best-first entropy tree; a
   balanced depth-8 tree on synthetic data), one process, one core, median of
   interleaved runs (wall clock and CPU time: on a shared machine the CPU-time
   rate is the one-core figure), against a direct per-case implementation of the
   paper's Algorithm 1 (loop over cases, numpy over the leaves) as the reference
   point. Target: at least 1e5 cases/s for a 255-leaf tree.
3. Ensembles: random forests through the exact counterfactual MILP (the default
   for ensembles) beside the labelled upper-bound search: time per case, how
   often the bound is tight, its mean ratio to the exact distance (every point
   verified by scikit-learn).

    .venv/bin/python bench/sensitive.py [--runs 5] [--cases 100000] [--quick] [--dry-run]

Writes ``bench/results/sensitive.json`` and ``bench/results/sensitive.md`` (``sensitive-quick.*`` with --quick).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import time
from pathlib import Path
from typing import Any, Callable

import numpy as np

import _outputs

HERE = Path(__file__).resolve().parent
RESULTS = HERE / "results"
TARGET = 1e5

PAPER_TABLE1 = {  # Alvarez, Table 1 (Weka j48 trees; test data)
    "P1 (Pima)": dict(leaves=28, depth=10, attributes=8, trace_mean=4.9, trace_median=5, tests_mean=1.5,
                      tests_median=1),
    "P2 (Pima)": dict(leaves=25, depth=9, attributes=8, trace_mean=4.3, trace_median=5, tests_mean=1.8, tests_median=2),
    "P3 (Pima)": dict(leaves=19, depth=8, attributes=8, trace_mean=4.4, trace_median=5, tests_mean=1.7, tests_median=1),
    "P4 (Pima)": dict(leaves=11, depth=7, attributes=5, trace_mean=3.1, trace_median=5, tests_mean=1.7, tests_median=1),
    "Ionosphere": dict(leaves=11, depth=8, attributes=9, trace_mean=5.5, trace_median=6, tests_mean=1.6,
                       tests_median=1),
    "Wine": dict(leaves=5, depth=4, attributes=4, trace_mean=2.3, trace_median=2, tests_mean=1.2, tests_median=1),
}


def datasets() -> dict[str, tuple[np.ndarray, np.ndarray]]:
    from sklearn.datasets import load_wine

    import lumber

    out = {"wine": load_wine(return_X_y=True)}
    for name in ("compas", "adult"):
        ds = lumber.datasets.load(name)
        out[name] = (ds.X.to_numpy(dtype=np.float64), ds.y)
    return out


def split(X: np.ndarray, y: np.ndarray, seed: int = 0) -> tuple[np.ndarray, ...]:
    from sklearn.model_selection import train_test_split

    return tuple(train_test_split(X, y, test_size=1 / 3, random_state=seed, stratify=y))


def table1(data: dict[str, tuple[np.ndarray, np.ndarray]]) -> list[dict[str, Any]]:
    from sklearn.tree import DecisionTreeClassifier

    import lumber

    rows = []
    configs: list[tuple[str, dict[str, Any]]] = [("wine", {"max_leaf_nodes": 5})]
    configs += [(name, {"max_depth": d}) for name in data for d in (4, 6, 8, 10)]
    for name, params in configs:
        X, y = data[name]
        Xtr, Xte, ytr, _ = split(X, y)
        model = DecisionTreeClassifier(criterion="entropy", min_samples_leaf=2, random_state=0, **params).fit(Xtr, ytr)
        r = lumber.sensitive_tests(model, Xte, reference=Xtr, options=lumber.SensitiveOptions(scale="minmax"))
        assert r.verified[r.reachable].all()
        ntests = np.array([len(c.tests) for c in r if c.reachable])
        tree = model.tree_
        rows.append({
            "data": name, "params": params, "cases": len(Xte), "leaves": int(tree.n_leaves),
            "depth": int(tree.max_depth), "attributes": int(np.unique(tree.feature[tree.feature >= 0]).size),
            "trace_mean": float(r.trace.mean()), "trace_median": float(np.median(r.trace)),
            "tests_mean": float(ntests.mean()), "tests_median": float(np.median(ntests)),
            "reachable": float(r.reachable.mean()), "verified": bool(r.verified[r.reachable].all()),
        })
    return rows


def naive_algorithm1(forest: Any, X: np.ndarray, metric: Any) -> np.ndarray:
    """The paper's Algorithm 1 as written: for each case, clip into every other-class leaf box."""
    from lumber.passes.analyses.leaf_boxes import tree_boxes
    from lumber.passes.analyses.realizable import above, below
    from lumber.ir import Target
    from lumber.passes.analyses.sensitive_tests import goal_decisions
    from lumber.ir.interp import accumulate

    b = tree_boxes(forest, 0)
    A = above(b.lo, b.lo_open, metric.input_dtype)
    B = below(b.hi, b.hi_open, metric.input_dtype)
    cls = goal_decisions(forest, accumulate(forest, b.leaf[:, None]), Target())
    own = cls[np.searchsorted(b.leaf, forest.apply_global(X)[:, 0])]
    out = np.empty(len(X))
    for i, x in enumerate(X):
        sel = cls != own[i]
        P = np.clip(x, A[sel], B[sel])
        d = P - x
        cost = np.where(d > 0, d * metric.up, -d * metric.down)
        out[i] = np.sqrt((cost * cost).sum(axis=1)).min()
    return out


def throughput(data: dict[str, tuple[np.ndarray, np.ndarray]], n_cases: int, runs: int) -> list[dict[str, Any]]:
    from sklearn.datasets import make_classification
    from sklearn.tree import DecisionTreeClassifier

    import lumber
    from lumber.passes.analyses.metrics import build_metric
    from lumber.passes.analyses.sensitive import sensitive_tests

    Xa, ya = data["adult"]
    Xs, ys = make_classification(n_samples=200_000, n_features=20, n_informative=12, random_state=0)
    models = {
        "adult, best-first (255 leaves)": (DecisionTreeClassifier(criterion="entropy", max_leaf_nodes=255,
                                                                  random_state=0).fit(Xa, ya), Xa),
        "synthetic, depth 8 (balanced)": (DecisionTreeClassifier(criterion="entropy", max_depth=8,
                                                                 random_state=0).fit(Xs, ys), Xs),
    }
    rng = np.random.default_rng(0)
    out = []
    for label, (model, Xref) in models.items():
        forest = lumber.load(model)
        cases = Xref[rng.integers(0, len(Xref), n_cases)]
        naive_cases = cases[:2000]
        metrics = {norm: build_metric(forest, norm=norm, scale="std", reference=Xref) for norm in ("l2", "l1", "linf")}
        runs_by: dict[str, list[float]] = {}
        fns: dict[str, Callable[[], Any]] = {
            f"lumber {norm}": (lambda m=m: sensitive_tests(forest, cases, m)) for norm, m in metrics.items()}
        naive_X = forest.prepare_input(naive_cases)
        fns["Algorithm 1, per-case loop (2k cases)"] = lambda: naive_algorithm1(forest, naive_X, metrics["l2"])
        check = sensitive_tests(forest, naive_cases, metrics["l2"]).distance
        ref = naive_algorithm1(forest, forest.prepare_input(naive_cases), metrics["l2"])
        assert np.allclose(check, ref, rtol=1e-9), "the naive Algorithm 1 disagrees"
        cpu_by: dict[str, list[float]] = {}
        api_cases = cases[:20000]
        fns["lumber.sensitive_tests(model) l2, 20k cases, incl. sklearn verification"] = \
            lambda: lumber.sensitive_tests(model, api_cases, reference=Xref,
                                           options=lumber.SensitiveOptions(scale="std"))
        for _ in range(runs):  # interleaved
            for name, fn in fns.items():
                w, c = time.perf_counter(), time.process_time()
                fn()
                wall, cpu = time.perf_counter() - w, time.process_time() - c
                n = len(naive_cases) if name.startswith("Algorithm") else len(api_cases) if "model" in name else n_cases
                runs_by.setdefault(name, []).append(n / wall)
                cpu_by.setdefault(name, []).append(n / cpu)
        naive = statistics.median(cpu_by["Algorithm 1, per-case loop (2k cases)"])
        for name, rates in runs_by.items():
            cpu_rate = statistics.median(cpu_by[name])
            out.append({"model": label, "leaves": int(model.tree_.n_leaves), "depth": int(model.tree_.max_depth),
                        "method": name, "cases_per_s_wall": statistics.median(rates), "wall_runs": rates,
                        "cases_per_s_cpu": cpu_rate, "cpu_runs": cpu_by[name],
                        "ratio_to_algorithm1": cpu_rate / naive})
    return out


def ensembles(data: dict[str, tuple[np.ndarray, np.ndarray]], n_cases: int = 10) -> list[dict[str, Any]]:
    """Random forests: the exact MILP (default for ensembles) beside the labelled upper-bound search."""
    import warnings

    from sklearn.ensemble import RandomForestClassifier

    import lumber

    out = []
    for name in ("compas", "adult"):
        X, y = data[name]
        Xtr, Xte, ytr, _ = split(X, y)
        for trees, depth in ((10, 4), (30, 5)):
            model = RandomForestClassifier(n_estimators=trees, max_depth=depth, random_state=0).fit(Xtr, ytr)
            cases = Xte[:n_cases]
            row: dict[str, Any] = {"data": name, "trees": trees, "depth": depth, "cases": len(cases)}
            for method in ("upper-bound", "milp"):
                t = time.perf_counter()
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    r = lumber.sensitive_tests(model, cases, reference=Xtr,
                                               options=lumber.SensitiveOptions(scale="std", method=method,
                                                                               time_limit=60))
                dt = time.perf_counter() - t
                ok = r.reachable
                assert r.verified[ok].all() and np.all(model.predict(r.point[ok]) != model.predict(cases[ok]))
                row[method] = {"ms_per_case": 1000 * dt / len(cases), "reachable": float(ok.mean()),
                               "exact_cases": int(sum(c.exact for c in r)), "distance": r.distance.tolist(),
                               "mean_distance": float(r.distance[ok].mean()),
                               "mean_tests": float(np.mean([len(c.tests) for c in r if c.reachable]))}
            ub, ex = np.array(row["upper-bound"]["distance"]), np.array(row["milp"]["distance"])
            fin = np.isfinite(ub) & np.isfinite(ex) & (ex > 0)
            row["upper_bound_equal_to_exact"] = int(np.isclose(ub[fin], ex[fin], rtol=1e-6).sum())
            row["upper_bound_over_exact_mean"] = float((ub[fin] / ex[fin]).mean()) if fin.any() else None
            out.append(row)
    return out


def markdown(doc: dict[str, Any]) -> str:
    lines = ["# Sensitive tests", "", f"`{doc['command']}` on {doc['machine']}.", "",
             "## Table 1 (Alvarez), rebuilt on bundled data", "",
             "C4.5-like trees (entropy, min 2 rows per leaf) on 2/3 of the rows; the test third; "
             "L2 distance with min/max scaling from the training rows.", "",
             "| data | tree | leaves | depth | attributes | trace mean | trace median | sensitive tests mean "
             "| median |",
             "|---|---|---|---|---|---|---|---|---|"]
    for r in doc["table1"]:
        p = ", ".join(f"{k}={v}" for k, v in r["params"].items())
        lines.append(f"| {r['data']} | {p} | {r['leaves']} | {r['depth']} | {r['attributes']} | "
                     f"{r['trace_mean']:.2f} | {r['trace_median']:g} | {r['tests_mean']:.2f} | {r['tests_median']:g} |")
    lines += ["", "The paper's Table 1 (Weka j48):", "",
              "| tree | leaves | depth | attributes | trace mean | trace median | sensitive tests mean | median |",
              "|---|---|---|---|---|---|---|---|"]
    for k, r in PAPER_TABLE1.items():
        lines.append(f"| {k} | {r['leaves']} | {r['depth']} | {r['attributes']} | {r['trace_mean']} | "
                     f"{r['trace_median']} | {r['tests_mean']} | {r['tests_median']} |")
    lines += ["", f"## Throughput ({doc['cases']:,} cases, one core; target {TARGET:.0e} cases/s)", "",
              f"Medians of {doc['runs']} interleaved runs. The machine is shared (load average "
              f"{doc['load']}), so wall-clock rates understate one core: the CPU-time rate (cases per "
              "second of CPU the process used; numpy runs these kernels on one thread) is the one-core figure.", "",
              "| model | leaves | depth | method | cases/s (CPU time) | cases/s (wall) | x Algorithm 1 loop |",
              "|---|---|---|---|---|---|---|"]
    for r in doc["throughput"]:
        lines.append(f"| {r['model']} | {r['leaves']} | {r['depth']} | {r['method']} | {r['cases_per_s_cpu']:,.0f} | "
                     f"{r['cases_per_s_wall']:,.0f} | {r['ratio_to_algorithm1']:.1f} |")
    lines += ["", "## Ensembles (random forests): exact MILP vs the labelled upper-bound search", "",
              "Every point of both methods is verified by scikit-learn. `milp` is the default for ensembles "
              "(the counterfactual MILP, same metric); `upper-bound` is the search used when it is not wanted or fails.", "",
              "| data | trees | depth | cases | MILP ms/case | MILP exact cases | upper-bound ms/case | "
              "upper bound = exact | upper bound / exact (mean) | mean distance (exact) | mean tests (exact) |",
              "|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in doc["ensembles"]:
        ub, ex = r["upper-bound"], r["milp"]
        ratio = "n/a" if r["upper_bound_over_exact_mean"] is None else f"{r['upper_bound_over_exact_mean']:.3f}"
        lines.append(f"| {r['data']} | {r['trees']} | {r['depth']} | {r['cases']} | {ex['ms_per_case']:.0f} | "
                     f"{ex['exact_cases']}/{r['cases']} | {ub['ms_per_case']:.0f} | "
                     f"{r['upper_bound_equal_to_exact']}/{r['cases']} | {ratio} | {ex['mean_distance']:.3f} | "
                     f"{ex['mean_tests']:.2f} |")
    return "\n".join(lines) + "\n"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=None, help="interleaved runs (default 5; quick 2)")
    ap.add_argument("--cases", type=int, default=None, help="cases of the throughput test (default 100000; "
                                                            "quick 10000)")
    ap.add_argument("--quick", action="store_true", help="2 runs of 10000 cases, into sensitive-quick.*")
    _outputs.add_dry_run(ap)
    args = ap.parse_args()
    args.runs = args.runs or (2 if args.quick else 5)
    args.cases = args.cases or (10_000 if args.quick else 100_000)
    name = _outputs.stem("sensitive", args.quick)
    js, mdp = RESULTS / f"{name}.json", RESULTS / f"{name}.md"
    if _outputs.dry_run(args, js, mdp):
        return
    data = datasets()
    doc = {
        "command": f"python bench/sensitive.py --runs {args.runs} --cases {args.cases}"
                   + (" --quick" if args.quick else ""),
        "machine": f"{platform.processor() or platform.machine()}, {os.cpu_count()} cpus, "
                   f"Python {platform.python_version()}",
        "cases": args.cases,
        "runs": args.runs,
        "load": " ".join(f"{v:.1f}" for v in os.getloadavg()),
        "table1": table1(data),
        "paper_table1": PAPER_TABLE1,
        "throughput": throughput(data, args.cases, args.runs),
        "ensembles": ensembles(data),
    }
    from lumber.ir import atomic_write_text

    RESULTS.mkdir(exist_ok=True)
    atomic_write_text(js, json.dumps(doc, indent=2) + "\n")
    atomic_write_text(mdp, markdown(doc))
    print(markdown(doc))


if __name__ == "__main__":
    main()
