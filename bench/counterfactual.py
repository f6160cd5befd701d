"""Benchmark: optimal counterfactual explanations on the OCEAN protocol, solved with HiGHS.

Protocol (Parmentier & Vidal, ICML 2021, section 4): a
scikit-learn random forest of 100 trees of depth 5 per data set (adult,
credit, compas; 80/20 split), origins = test rows the forest predicts as the
negative class, target = the positive class, per-feature asymmetric weights
drawn from U(0.5, 2), features scaled by their training range, values kept in
the training range, sex immutable and age non-decreasing. Every explanation is
verified with the forest's own ``predict``.

Sections (``--sections``, default all):

- ``main``: seconds per explanation (median, p90; wall and CPU) for l0, l1, l2,
  share verified / proven optimal, model size (variables, nonzeros) as built
  and as solved after the warm-start bound, beside OCEAN's Gurobi figures;
- ``backends``: HiGHS presolve on / off on the same queries;
- ``sweeps``: adult, l1, trees in {10, 20, 50, 100, 200, 500} and depth 3..8;
- ``table4``: OCEAN's Table 4 protocol (isolation forest of 100 trees x 32 samples on the
  training rows labelled with the target class, contamination 0.1, l0 / l1 / l2, time limit
  30 s), lumber's P / C / T beside OCEAN's published columns;
- ``dice``: dice-ml (random) on the same forests and origins: validity and the
  cost ratio R = cost(dice) / cost(ours) summed over the origins both explain;
- ``actionability``: l0, l1, l2 with and without the constraints, on the float grid
  (every value the model's input type holds, values clipped to the training
  range) and on the feature domains inferred from the training rows (whole
  numbers stay whole, 0/1 columns binary, observed range): the share of
  counterfactuals with a value outside its domain or a change below its
  resolution (goal 0), mean changed features, seconds per query;
- ``population`` (``--population``, not in the default run): every rejected test row of adult and credit
  under RandomForest 100 x 5, XGBoost 120 x 4 and LightGBM 100 x 31, without and with constraints (sex
  and marital status immutable, age only up, at most 3 changes), 10 s per query on ``--jobs`` workers:
  rows/s (the one-time build included), the share proven optimal or infeasible, bounded and unanswered,
  the mean gap, batch answers against the single-query call on a sample, and treecf (exact and default
  back ends, on the same domains) beside it when it is installed; the share proven without a MILP (the fast
  path: the warm start proven optimal by the per-tree bound). ``--population ROWS``: rows per model (400 by
  default); ``--quick``: 20.

The machine is shared (2 cores, other jobs running): CPU seconds of this
process are reported beside wall seconds; HiGHS runs in-process on one thread.

    .venv/bin/python bench/counterfactual.py [--quick] [--origins 20] [--time-limit 60] [--sections main,dice]
    .venv/bin/python bench/counterfactual.py --quick --sections actionability
    .venv/bin/python bench/counterfactual.py --sections table4 [--norms l1] [--origins 20] [--threads 2] [--whole]
    .venv/bin/python bench/counterfactual.py --population [ROWS] [--quick] [--jobs 2]

Writes ``bench/results/counterfactual.json`` and ``bench/results/counterfactual.md`` (``counterfactual-quick.*``
with --quick; ``--dry-run`` prints the files and stops).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import platform
import shlex
import sys
import time
import warnings
from pathlib import Path
from typing import Any

import numpy as np

import _outputs

HERE = Path(__file__).resolve().parent
RESULTS = HERE / "results"
CACHE = Path(os.environ.get("LUMBER_BENCH_CACHE", "/tmp/lumber-bench-cache"))
PUBLISHED = {"adult": 1.22, "credit": 1.34, "compas": 0.52}
"""OCEAN, Gurobi 9.1 on 4 threads, RF 100 x depth 5, l1: seconds per optimal explanation (Table 3)."""
PUBLISHED_NNZ = {"adult": 18330}
PUBLISHED_IF = {"adult": ((0.55, 0.21, 0.75), (1.00, 0.40, 1.82)), "credit": ((0.00, 0.03, 0.99), (1.00, 0.56, 1.54)),
                "compas": ((0.25, 0.12, 0.44), (1.00, 0.57, 0.85))}
"""OCEAN Table 4, (no IF, IF) x (plausible share P, mean cost C, seconds T): Gurobi 9.1 on 4 threads, RF 100 x
depth 5, isolation forest 100 trees x 32 samples, contamination 0.1 (its src/runPaperExperiments.py, which
runs l0, l1 and l2 for this table; the table does not say which norm or how T is averaged)."""
OCEAN_IF = {"trees": 100, "max_samples": 32, "contamination": 0.1}
CASES = {"adult": ("adult", 0, 1), "compas": ("compas", 0, 1), "credit": ("credit", 1, 0),
         "credit-to-default": ("credit", 0, 1)}
"""Case -> (data set, class of the origins, target class). OCEAN's origins are negative samples made
positive. Its credit data (MACE's 14-feature preprocessing) labels *no default* positive, so its
queries move defaulters to no default; the bundled credit data labels *default* 1, so the same
question is 1 -> 0 here. ``credit-to-default`` keeps the reverse question (non-defaulters pushed
into the 9% minority class) as a stress case."""

sys.path.insert(0, str(HERE.parent))
warnings.filterwarnings("ignore")


def forest_for(case_name: str, trees: int, depth: int, seed: int = 0) -> dict[str, Any]:
    """Train (cached) the random forest of the protocol and lower it."""
    import joblib
    from sklearn.ensemble import RandomForestClassifier

    import lumber

    name, origin_class, target_class = CASES[case_name]
    data = lumber.datasets.load(name)
    Xtr, Xte, ytr, yte = data.split(test_size=0.2, seed=seed)
    CACHE.mkdir(parents=True, exist_ok=True)
    path = CACHE / f"rf-{name}-{trees}-{depth}-{seed}.joblib"
    if path.exists():
        rf = joblib.load(path)
    else:
        rf = RandomForestClassifier(n_estimators=trees, max_depth=depth, random_state=seed, n_jobs=1).fit(
            Xtr.to_numpy(), ytr)
        joblib.dump(rf, path)
    f = lumber.load(rf, feature_names=data.feature_names)
    f = f.replace(schema=f.schema.with_(features=data.features))
    names = f.schema.feature_names
    from lumber.ir import Constraints

    age = [c for c in names if c.lower().startswith("age")]
    sex = [c for c in names if c.lower() == "sex"]
    cons = Constraints.from_mapping({"immutable": sex, "increase": age})
    return {"name": case_name, "origin_class": origin_class, "target": target_class, "rf": rf, "forest": f, "Xtr": Xtr.to_numpy(), "ytr": ytr, "Xte": Xte.to_numpy(),
            "names": names, "constraints": cons, "frame": data.X}


def origins(case: dict[str, Any], n: int) -> list[int]:
    neg = np.flatnonzero(case["rf"].predict(case["Xte"]) == case["origin_class"])
    return [int(i) for i in neg[:n]]


def weights(n_features: int, n: int, seed: int = 1) -> list[tuple[np.ndarray, np.ndarray]]:
    rng = np.random.default_rng(seed)
    return [(rng.uniform(0.5, 2.0, n_features), rng.uniform(0.5, 2.0, n_features)) for _ in range(n)]


def explain(case: dict[str, Any], x: np.ndarray, w: Any, norm: str, time_limit: float,
            constraints: Any = "protocol", isolation: Any = None, **options: Any) -> dict[str, Any]:
    """One query of the protocol; ``options`` are further :class:`CounterfactualOptions` fields."""
    from lumber.passes.analyses.counterfactual import CounterfactualOptions, solve_counterfactual

    rf = case["rf"]
    options.setdefault("clip_to_reference", True)
    opts = CounterfactualOptions(norm=norm, scale="minmax", weights=w, time_limit=time_limit, **options)
    cons = case["constraints"] if constraints == "protocol" else constraints
    c0, t0 = time.process_time(), time.perf_counter()
    r = solve_counterfactual(case["forest"], x, case["target"], cons, options=opts, reference=case["Xtr"],
                             isolation=isolation, verifier=lambda Z: rf.predict(Z))
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    return {"status": r.status, "verified": bool(r.verified), "cost": float(r.cost), "wall": wall, "cpu": cpu,
            "solve": r.solve_seconds, "variables": r.n_variables, "nonzeros": r.nnz, "binaries": r.n_binaries,
            "gap": None if not np.isfinite(r.gap) else float(r.gap), "x": None if r.x is None else r.x.tolist(),
            "changes": len(r.changes)}


def full_size(case: dict[str, Any], x: np.ndarray, w: Any, norm: str) -> tuple[int, int]:
    """Variables and nonzeros of the MILP as the paper builds it (no warm-start bound)."""
    from lumber.passes.analyses.counterfactual import CounterfactualOptions
    from lumber.passes.analyses.counterfactual.problem import build
    from lumber.passes.analyses.counterfactual.solve import make_query

    opts = CounterfactualOptions(norm=norm, scale="minmax", weights=w, clip_to_reference=True)
    q = make_query(case["forest"], x, case["target"], case["constraints"], options=opts, reference=case["Xtr"])[0]
    p = build(q, leaf_cuts=False)
    return p.model.n_cols, p.model.nnz


def stats(rows: list[dict[str, Any]]) -> dict[str, Any]:
    if not rows:
        return {}
    wall = np.array([r["wall"] for r in rows])
    cpu = np.array([r["cpu"] for r in rows])
    return {
        "n": len(rows), "median_s": float(np.median(wall)), "p90_s": float(np.percentile(wall, 90)),
        "median_cpu_s": float(np.median(cpu)), "p90_cpu_s": float(np.percentile(cpu, 90)),
        "verified": float(np.mean([r["verified"] for r in rows])),
        "optimal": float(np.mean([r["status"] == "optimal" for r in rows])),
        "median_variables": float(np.median([r["variables"] for r in rows])),
        "median_nonzeros": float(np.median([r["nonzeros"] for r in rows])),
        "mean_cost": float(np.mean([r["cost"] for r in rows if np.isfinite(r["cost"])] or [np.nan])),
    }


def section_main(args: argparse.Namespace, out: dict[str, Any]) -> None:
    res: dict[str, Any] = {}
    cases = [(nm, args.origins) for nm in args.datasets] + [(nm, args.stress_origins) for nm in args.stress
                                                            if args.stress_origins > 0]
    for name, n_origins in cases:
        case = forest_for(name, 100, 5)
        idx = origins(case, n_origins)
        ws = weights(len(case["names"]), len(idx))
        res[name] = {"origins": idx, "origin_class": case["origin_class"], "target": case["target"]}
        for norm in ("l0", "l1", "l2"):
            rows = [explain(case, case["Xte"][i], w, norm, args.time_limit) for i, w in zip(idx, ws)]
            s = stats(rows)
            v, nz = full_size(case, case["Xte"][idx[0]], ws[0], norm)
            s["full_variables"], s["full_nonzeros"] = v, nz
            res[name][norm] = {"summary": s, "runs": rows}
            print(f"main {name} {norm}: median {s['median_s']:.2f}s (cpu {s['median_cpu_s']:.2f}s) "
                  f"p90 {s['p90_s']:.2f}s optimal {s['optimal']:.0%} verified {s['verified']:.0%}", flush=True)
    out["main"] = res


def section_backends(args: argparse.Namespace, out: dict[str, Any]) -> None:
    variants = {"highs presolve on": {"presolve": True}, "highs presolve off": {"presolve": False}}
    res: dict[str, Any] = {}
    n = max(3, args.origins // 4)
    for name in args.datasets:
        case = forest_for(name, 100, 5)
        idx = origins(case, n)
        ws = weights(len(case["names"]), len(idx))
        for norm in ("l0", "l1"):
            runs: dict[str, list[dict[str, Any]]] = {k: [] for k in variants}
            for i, w in zip(idx, ws):  # interleaved
                for k, kw in variants.items():
                    runs[k].append(explain(case, case["Xte"][i], w, norm, args.time_limit, **kw))
            res[f"{name}/{norm}"] = {k: stats(v) for k, v in runs.items()}
            print(f"backends {name} {norm}: " + ", ".join(
                f"{k} {s['median_cpu_s']:.2f}s cpu" for k, s in res[f'{name}/{norm}'].items()), flush=True)
    out["backends"] = res


def section_sweeps(args: argparse.Namespace, out: dict[str, Any]) -> None:
    n = max(3, args.origins // 2)
    trees = [10, 20, 50, 100, 200] if args.quick else [10, 20, 50, 100, 200, 500]
    depths = [3, 5, 7] if args.quick else [3, 4, 5, 6, 7, 8]
    res: dict[str, Any] = {"trees": {}, "depth": {}}
    for key, grid in (("trees", [(t, 5) for t in trees]), ("depth", [(100, d) for d in depths])):
        for t, d in grid:
            case = forest_for("adult", t, d)
            idx = origins(case, n)
            ws = weights(len(case["names"]), len(idx))
            rows = [explain(case, case["Xte"][i], w, "l1", args.time_limit) for i, w in zip(idx, ws)]
            s = stats(rows)
            s["full_variables"], s["full_nonzeros"] = full_size(case, case["Xte"][idx[0]], ws[0], "l1")
            res[key][t if key == "trees" else d] = s
            print(f"sweep adult trees={t} depth={d}: median {s['median_s']:.2f}s cpu {s['median_cpu_s']:.2f}s "
                  f"optimal {s['optimal']:.0%}", flush=True)
    out["sweeps"] = res


def section_table4(args: argparse.Namespace, out: dict[str, Any]) -> None:
    """OCEAN Table 4: plausible share, mean cost and seconds, without and with the isolation forest."""
    from sklearn.ensemble import IsolationForest

    import lumber
    from lumber.passes.analyses.counterfactual import isolation_threshold, path_lengths

    res: dict[str, Any] = dict(out.get("table4", {}))  # rows of earlier runs (other data sets or norms) stay
    res["protocol"] = dict(OCEAN_IF)
    for name in args.datasets:
        case = forest_for(name, 100, 5)
        idx = origins(case, args.origins)
        ws = weights(len(case["names"]), len(idx))
        # OCEAN fits on every row labelled with the desired class; here the training rows only (no test rows)
        target_rows = case["Xtr"][np.asarray(case["ytr"]) == case["target"]]
        iso = IsolationForest(n_estimators=OCEAN_IF["trees"], max_samples=OCEAN_IF["max_samples"],
                              random_state=0).fit(target_rows)
        fi = lumber.load(iso, feature_names=case["names"])
        delta = isolation_threshold(fi, target_rows, OCEAN_IF["contamination"])
        entry: dict[str, Any] = dict(res.get(name, {}))
        entry.update({"origins": idx, "delta": delta, "target_rows": int(len(target_rows))})
        for norm in args.norms:
            variants: list[tuple[str, dict[str, Any]]] = [("no IF", {}), ("IF", {"isolation": (fi, delta)})]
            if args.threads > 1:  # the same query with HiGHS's parallel MIP (1.16: its default when threads > 1)
                variants.append(("IF threads", {"isolation": (fi, delta), "threads": args.threads}))
            if args.whole:  # the same query solved as one MILP (strategy "whole") instead of case by case
                variants.append(("IF whole", {"isolation": (fi, delta), "strategy": "whole"}))
            runs: dict[str, list[dict[str, Any]]] = {v[0]: [] for v in variants}
            for i, w in zip(idx, ws):  # interleaved: the same origin without and with the isolation forest
                for label, kw in variants:
                    r = explain(case, case["Xte"][i], w, norm, args.if_time_limit, **kw)
                    r["plausible"] = bool(r["x"] is not None and path_lengths(fi, np.array([r["x"]]))[0] >= delta)
                    runs[label].append(r)
            for label, rows in runs.items():
                s = stats(rows)
                s["plausible"] = float(np.mean([r["plausible"] for r in rows]))
                s["mean_s"] = float(np.mean([r["wall"] for r in rows]))
                entry[f"{norm}/{label}"] = {"summary": s, "runs": rows, "time_limit": args.if_time_limit,
                                            "run": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
                                            "load_end": " ".join(f"{v:.1f}" for v in os.getloadavg())}
            for key, field, value, what in (("threads", "threads", args.threads, f"HiGHS on {args.threads} threads"),
                                            ("whole", "strategy", "whole", "one MILP (strategy whole)")):
                if f"IF {key}" not in runs:  # not run now: an earlier run's row keeps its own settings
                    continue
                entry[f"{norm}/IF {key}"][field] = value
                c = entry[f"{norm}/IF {key}"]["summary"]
                print(f"table4 {name} {norm}: IF with {what} P {c['plausible']:.0%} "
                      f"C {c['mean_cost']:.3f} T {c['median_s']:.2f}s (p90 {c['p90_s']:.2f}) optimal {c['optimal']:.0%}",
                      flush=True)
            a, b = entry[f"{norm}/no IF"]["summary"], entry[f"{norm}/IF"]["summary"]
            print(f"table4 {name} {norm}: no IF P {a['plausible']:.0%} C {a['mean_cost']:.3f} T {a['median_s']:.2f}s | "
                  f"IF P {b['plausible']:.0%} C {b['mean_cost']:.3f} T {b['median_s']:.2f}s (p90 {b['p90_s']:.2f}) "
                  f"optimal {b['optimal']:.0%}", flush=True)
        res[name] = entry
    out["table4"] = res


def section_actionability(args: argparse.Namespace, out: dict[str, Any]) -> None:
    """Counterfactuals on the float grid vs on the domains inferred from the training rows."""
    from lumber.ir.domains import Domains, FeatureDomain, domains_for

    res: dict[str, Any] = {}
    for name in args.datasets:
        case = forest_for(name, 100, 5)
        idx = origins(case, args.origins)
        ws = weights(len(case["names"]), len(idx))
        inferred = domains_for(case["forest"], None, case["Xtr"])
        plain = Domains(tuple(FeatureDomain(nm) for nm in case["names"]))
        entry: dict[str, Any] = {"origins": idx, "kinds": {d.name: d.kind.value for d in inferred.features}}
        for cons_label, cons in (("constraints", case["constraints"]), ("none", None)):
            for norm in ("l0", "l1", "l2"):
                for grid, doms in (("float grid", plain), ("domains", inferred)):
                    rows = []
                    for i, w in zip(idx, ws):
                        x0 = case["Xte"][i]
                        r = explain(case, x0, w, norm, args.time_limit, domains=doms, constraints=cons,
                                    clip_to_reference=grid == "float grid")
                        r["problems"] = [] if r["x"] is None else inferred.problems(x0, np.array(r["x"]))
                        rows.append(r)
                    found = [r for r in rows if r["x"] is not None]
                    s = stats(rows)
                    s["found"] = len(found)
                    s["not_actionable"] = float(np.mean([bool(r["problems"]) for r in found])) if found else None
                    s["mean_changed"] = float(np.mean([r["changes"] for r in found])) if found else None
                    s["examples"] = sorted({p for r in found for p in r["problems"]})[:3]
                    entry[f"{cons_label}/{norm}/{grid}"] = {"summary": s, "runs": rows}
                    bad = "-" if s["not_actionable"] is None else f"{s['not_actionable']:.0%}"
                    print(f"actionability {name} {cons_label} {norm} {grid}: not actionable {bad}, "
                          f"changed {s['mean_changed']}, median {s['median_s']:.2f}s", flush=True)
        res[name] = entry
    out["actionability"] = res


POPULATION_MODELS = ("rf", "xgboost", "lightgbm")
POPULATION_CONSTRAINTS = {"adult": {"immutable": ["Sex", "MaritalStatus"], "increase": ["Age"], "max_changes": 3},
                          "credit": {"immutable": ["MARRIAGE"], "increase": ["AGE"], "max_changes": 3}}
"""The constrained population runs: sex (credit's bundled rows have none) and marital status immutable, age only
up, at most 3 changes."""


def population_model(name: str, kind: str, seed: int = 0) -> dict[str, Any]:
    """RandomForest 100 x depth 5, XGBoost 120 x depth 4 or LightGBM 100 x 31 leaves on ``name`` (cached)."""
    import joblib

    import lumber

    data = lumber.datasets.load(name)
    Xtr, Xte, ytr, yte = data.split(test_size=0.2, seed=seed)
    CACHE.mkdir(parents=True, exist_ok=True)
    columns = hashlib.sha256("\0".join(map(str, Xtr.columns)).encode()).hexdigest()[:8]  # the data set's columns
    path = CACHE / f"pop-{kind}-{name}-{seed}-{columns}.joblib"
    if path.exists():
        model = joblib.load(path)
    else:
        X = Xtr.astype(np.float64)  # (a frame: the model records the feature names the constraints use)
        if kind == "rf":
            from sklearn.ensemble import RandomForestClassifier

            model = RandomForestClassifier(n_estimators=100, max_depth=5, random_state=seed, n_jobs=1).fit(X, ytr)
        elif kind == "xgboost":
            import xgboost

            model = xgboost.XGBClassifier(n_estimators=120, max_depth=4, random_state=seed, n_jobs=1).fit(X, ytr)
        else:
            import lightgbm

            model = lightgbm.LGBMClassifier(n_estimators=100, num_leaves=31, random_state=seed, n_jobs=1,
                                            verbose=-1).fit(X, ytr)
        joblib.dump(model, path)
    origin, target = {"adult": (0, 1), "credit": (1, 0)}[name]
    Xte = Xte.astype(np.float64)
    rejected = Xte[np.asarray(model.predict(Xte)) == origin]
    return {"model": model, "names": list(data.feature_names), "features": data.features,
            "Xtr": Xtr.astype(np.float64), "rejected": rejected, "target": target}


def _answers(results: list[Any]) -> dict[str, Any]:
    """Shares of the answers: proven optimal, proven infeasible, bounded (a verified point with a proven
    bound at the limit), unanswered (anything else); the mean gap of the bounded ones."""
    n = max(len(results), 1)
    optimal = [r for r in results if r.status == "optimal" and r.found and r.verified]
    infeasible = [r for r in results if r.status == "infeasible"]
    bounded = [r for r in results if r.status == "time_limit" and r.found and r.verified]
    gaps = [r.gap for r in bounded if np.isfinite(r.gap)]
    return {"n": len(results), "optimal": len(optimal) / n, "infeasible": len(infeasible) / n,
            "bounded": len(bounded) / n, "unanswered": (len(results) - len(optimal) - len(infeasible) - len(bounded)) / n,
            "proven": (len(optimal) + len(infeasible)) / n, "mean_gap": float(np.mean(gaps)) if gaps else None,
            "statuses": [r.status for r in results]}


def _treecf(pm: dict[str, Any], rows: np.ndarray, lo: np.ndarray, hi: np.ndarray, time_limit: float,
            cost: Any) -> dict[str, Any]:
    """treecf 0.3.2 on the same rows (no constraints), on the same domains as lumber's (whole numbers where
    the training rows are whole, values within their observed range): its exact back end one row at a
    time and its default (genetic) batch mode, each point's cost under lumber's l1 on the min-max scale,
    and its claims."""
    import pandas as pd

    try:
        import treecf
    except ImportError:
        return {"skipped": "treecf not installed (pip install treecf)"}
    span = np.where(hi > lo, hi - lo, 1.0)
    Xtr = pm["Xtr"].to_numpy(np.float64)
    whole = {n: "integer" for j, n in enumerate(pm["names"]) if np.all(Xtr[:, j] == np.round(Xtr[:, j]))}
    ranges = [treecf.Range(n, float(lo[j]), float(hi[j])) for j, n in enumerate(pm["names"])]
    ex = treecf.Explainer(pm["model"], normalizers=span, constraints=ranges, value_policy=whole)
    op = ">=" if pm["target"] == 1 else "<="
    if hasattr(pm["model"], "estimators_"):  # a random forest's output is the averaged probability itself
        target = treecf.Target.raw(op=op, value=0.5 + (1e-9 if pm["target"] == 1 else 0.0))
    else:
        target = treecf.Target.probability(op=op, value=0.5)
    out: dict[str, Any] = {}
    for backend in ("exact", "genetic"):
        t0 = time.perf_counter()
        try:
            if backend == "genetic":
                res = ex.explain_batch(rows, target, time_budget_s=time_limit)
                got = [res.for_id(i) for i in range(len(rows))]
            else:
                got = [ex.explain(x, target, backend="exact", time_budget_s=time_limit, seed=0) for x in rows]
        except Exception as exc:  # a peer's failure is reported, not fatal
            out[backend] = {"error": f"{type(exc).__name__}: {exc}"}
            continue
        wall = time.perf_counter() - t0
        costs, claims = [], []
        for x0, g in zip(rows, got):
            g = g[0] if isinstance(g, list) and g else g
            xc = getattr(g, "x_cf", None)
            ok = xc is not None and int(np.asarray(pm["model"].predict(
                pd.DataFrame(np.asarray(xc, dtype=np.float64)[None, :], columns=pm["names"])))[0]) == pm["target"]
            costs.append(cost(x0, np.asarray(xc, dtype=np.float64)) if ok else None)
            claims.append(getattr(g, "proof", None))
        out[backend] = {"rows_per_s": len(rows) / wall, "costs": costs, "claims": claims,
                        "found": float(np.mean([c is not None for c in costs]))}
    return out


def _worker_imports() -> int:
    """What a worker process imports once in its life (the libraries, not any model)."""
    import lightgbm  # noqa: F401
    import sklearn.ensemble  # noqa: F401
    import xgboost  # noqa: F401

    import lumber.compiler.api.counterfactual  # noqa: F401

    return os.getpid()


def start_workers(jobs: int) -> float:
    """Start the worker processes (joblib keeps them between calls) and their imports, as a service that
    explains populations keeps its workers: seconds taken, reported beside the rows/s, which then count
    every per-model cost (lowering, reference rows, leaf boxes) but not the interpreter start."""
    from joblib import Parallel, delayed

    t0 = time.perf_counter()
    Parallel(n_jobs=jobs)(delayed(_worker_imports)() for _ in range(4 * jobs))
    return time.perf_counter() - t0


def section_population(args: argparse.Namespace, out: dict[str, Any]) -> None:
    """Every rejected row of a population: rows/s on ``--jobs`` workers (one-time build included), the share
    proven (optimal or infeasible), bounded and unanswered, the mean gap, each batch answer against the
    single-query solve on a sample, and treecf beside it where it installs."""
    import lumber
    from lumber.ir import Constraints

    res: dict[str, Any] = dict(out.get("population", {}))
    n_rows = args.population
    out.setdefault("section_meta", {}).setdefault("population", {})["workers_start_s"] = (
        start_workers(args.jobs) if args.jobs != 1 else 0.0)
    limit = args.population_time_limit
    for name in [d for d in args.datasets if d in POPULATION_CONSTRAINTS]:
        for kind in POPULATION_MODELS:
            pm = population_model(name, kind)
            frame = pm["rejected"].iloc[:n_rows]
            rows = frame.to_numpy(np.float64)
            lo, hi = pm["Xtr"].min(axis=0).to_numpy(), pm["Xtr"].max(axis=0).to_numpy()
            span = np.where(hi > lo, hi - lo, 1.0)
            l1 = lambda x0, x: float(np.sum(np.abs(x - x0) / span))  # noqa: E731
            entry: dict[str, Any] = {"rows": int(len(rows)), "time_limit": limit, "jobs": args.jobs}
            for label, mapping in (("none", None), ("constrained", POPULATION_CONSTRAINTS[name])):
                cons = Constraints.from_mapping(mapping) if mapping else None
                opts = lumber.CounterfactualOptions(norm="l1", scale="minmax", time_limit=limit)
                t0 = time.perf_counter()
                # (the frames hold category codes, as the models were trained: whole-number domains, no labels)
                got = lumber.counterfactual(pm["model"], frame, target=pm["target"], constraints=cons,
                                            reference=pm["Xtr"], options=opts, n_jobs=args.jobs)
                wall = time.perf_counter() - t0
                a = _answers(got)
                a["rows_per_s"] = len(rows) / wall
                a["no_milp"] = float(np.mean([r.optimal and r.attempts == 0 for r in got])) if got else 0.0
                a["costs"] = [float(r.cost) if r.found else None for r in got]
                sample = list(range(0, len(rows), max(1, len(rows) // (5 if args.quick else 20))))
                same, checked = 0, 0
                for i in sample:  # the batch answer is the single-query answer
                    one = lumber.counterfactual(pm["model"], frame.iloc[[i]], target=pm["target"], constraints=cons,
                                                reference=pm["Xtr"], options=opts)
                    if one.status == "optimal" and got[i].status == "optimal":
                        checked += 1
                        same += abs(one.cost - got[i].cost) <= 1e-6 * (1 + one.cost)
                a["single_query_checked"], a["single_query_equal"] = checked, same
                if label == "none":  # (treecf on the first --peer-rows rows: its exact back end runs one at a time)
                    a["treecf"] = _treecf(pm, rows[:args.peer_rows], lo, hi, limit, l1)
                    for backend, t in a["treecf"].items():
                        if not isinstance(t, dict) or "costs" not in t:
                            continue
                        t["rows"] = len(t["costs"])
                        ratios, wrong = [], 0
                        for r, c, claim in zip(got, t["costs"], t["claims"]):
                            if c is None or not (r.status == "optimal" and r.cost > 0):
                                continue
                            ratios.append(c / r.cost)
                            wrong += claim == "optimal" and c > r.cost * (1 + 1e-6) + 1e-9
                        t["median_cost_ratio"] = float(np.median(ratios)) if ratios else None
                        t["claimed_optimal"] = float(np.mean([c == "optimal" for c in t["claims"]]))
                        t["wrong_optimal_claims"] = int(wrong)
                entry[label] = a
                tc = a.get("treecf", {})
                peer = "; ".join(f"treecf {b} {t['rows_per_s']:.1f} rows/s" for b, t in tc.items()
                                 if isinstance(t, dict) and "rows_per_s" in t)
                print(f"population {name} {kind} {label}: {a['rows_per_s']:.2f} rows/s, proven {a['proven']:.0%}, "
                      f"bounded {a['bounded']:.0%}, unanswered {a['unanswered']:.0%}, single-query equal "
                      f"{same}/{checked}{'; ' + peer if peer else ''}", flush=True)
            res[f"{name}/{kind}"] = entry
    out["population"] = res


def section_dice(args: argparse.Namespace, out: dict[str, Any]) -> None:
    try:
        import dice_ml
    except ImportError:
        out["dice"] = {"skipped": "dice-ml not installed (.venv/bin/pip install dice-ml)"}
        return
    import pandas as pd

    from lumber.passes.analyses.change_cost import ChangeCost
    from lumber.ir import Norm

    res: dict[str, Any] = {}
    main = out.get("main", {})
    for name in args.datasets:
        case = forest_for(name, 100, 5)
        names = case["names"]
        idx = origins(case, args.origins)
        ws = weights(len(names), len(idx))
        ours = main.get(name, {}).get("l1", {}).get("runs")
        if ours is None:
            ours = [explain(case, case["Xte"][i], w, "l1", args.time_limit) for i, w in zip(idx, ws)]
        df = pd.DataFrame(case["Xtr"], columns=names)
        df["y"] = case["ytr"]
        d = dice_ml.Data(dataframe=df, continuous_features=names, outcome_name="y")
        m = dice_ml.Model(model=case["rf"], backend="sklearn")
        exp = dice_ml.Dice(d, m, method="random")
        sex = [c for c in names if c.lower() == "sex"]
        rng_lo, rng_hi = case["Xtr"].min(axis=0), case["Xtr"].max(axis=0)
        valid, ratios_num, ratios_den, times = [], 0.0, 0.0, []
        for i, w, our in zip(idx, ws, ours):
            x = case["Xte"][i]
            q = pd.DataFrame([x], columns=names)
            pr = {c: [float(x[k]), float(rng_hi[k])] for k, c in enumerate(names) if c.lower().startswith("age")}
            t0 = time.perf_counter()
            try:
                cf = exp.generate_counterfactuals(q, total_CFs=1, desired_class="opposite",
                                                  features_to_vary=[c for c in names if c not in sex],
                                                  permitted_range=pr or None, random_seed=0, verbose=False)
                z = cf.cf_examples_list[0].final_cfs_df
                zx = None if z is None or len(z) == 0 else z[names].to_numpy(dtype=np.float64)[0]
            except Exception:  # dice gives up with an exception when it finds nothing
                zx = None
            times.append(time.perf_counter() - t0)
            ok = zx is not None and int(case["rf"].predict(zx[None, :])[0]) == case["target"]
            valid.append(ok)
            if ok and our["x"] is not None:
                cat = np.array([f.kind.name == "CATEGORICAL" for f in case["forest"].schema.features])
                cm = ChangeCost(Norm.L1, w[0], w[1], np.where(rng_hi > rng_lo, rng_hi - rng_lo, 1.0), cat)
                ratios_num += float(cm.distance(x[None, :], zx[None, :])[0])
                ratios_den += float(our["cost"])
        res[name] = {"validity": float(np.mean(valid)), "R": ratios_num / ratios_den if ratios_den else None,
                     "median_s": float(np.median(times)), "n": len(idx)}
        print(f"dice {name}: validity {res[name]['validity']:.0%} R {res[name]['R']} "
              f"median {res[name]['median_s']:.2f}s", flush=True)
    out["dice"] = res


def markdown(out: dict[str, Any]) -> str:
    # one header for the whole file: a run of some sections keeps the others' results, so the load average
    # and the settings belong to each section's own run line (meta), never to the file
    versions = ", ".join(f"{k} {v}" for k, v in out.get("versions", {}).items())
    L = ["# Optimal counterfactuals (OCEAN protocol, HiGHS)", "",
         f"Machine: {out['machine']}{'; ' + versions if versions else ''}. Each section gives its own run: "
         "when, the load average at its start (and end), and its settings.", ""]
    def meta(sec: str) -> list[str]:
        m = out.get("section_meta", {}).get(sec)
        if not m:
            return []
        end = f" -> {m['load_end']} at the end" if m.get("load_end") else ""
        cmds = m.get("commands") or []
        made = ("Made by " + "; ".join(f"`{c}`" for c in cmds) + ("" if len(cmds) < 2 else " (rows merged)") + "."
                if cmds else "")
        return [f"Run {m.get('run', '?')}, load average {m.get('load', '?')}{end}. {m.get('note', '')} {made}".rstrip(),
                ""]

    if "main" in out:
        L += ["## Seconds per optimal explanation (RF 100 trees, depth 5)", ""] + meta("main") + [
              "Origins are test rows the forest gives the origin class; the target is the other class "
              "(credit: default -> no default, as OCEAN's credit queries; credit-to-default is the reverse "
              "stress case).", "",
              "| data | norm | median s | p90 s | median CPU s | optimal | verified | variables (built / solved) "
              "| nonzeros (built / solved) | OCEAN Gurobi l1 s |", "|---|---|---|---|---|---|---|---|---|---|"]
        for name, d in out["main"].items():
            for norm in ("l0", "l1", "l2"):
                s = d[norm]["summary"]
                pub = PUBLISHED.get(name) if norm == "l1" else None
                lab = f"{name} ({d.get('origin_class', 0)} -> {d.get('target', 1)})"
                L.append(f"| {lab} | {norm} | {s['median_s']:.2f} | {s['p90_s']:.2f} | {s['median_cpu_s']:.2f} | "
                         f"{s['optimal']:.0%} | {s['verified']:.0%} | {s['full_variables']} / {s['median_variables']:.0f} "
                         f"| {s['full_nonzeros']} / {s['median_nonzeros']:.0f} | {'' if pub is None else pub} |")
        L += ["", "OCEAN reports 18,330 nonzeros for adult (its model, Gurobi)."]
    if "backends" in out:
        L += ["", "## Backends (median CPU s, interleaved on the same queries)", "", *meta("backends"),
              "| query | " + " | ".join(next(iter(out["backends"].values())).keys()) + " |",
              "|---|" + "---|" * len(next(iter(out["backends"].values())))]
        for k, v in out["backends"].items():
            L.append(f"| {k} | " + " | ".join(f"{s['median_cpu_s']:.2f} ({s['optimal']:.0%} opt)" for s in v.values()) + " |")
    if "sweeps" in out:
        L += ["", "## Sweeps on adult (l1)", "", *meta("sweeps"), "| trees | depth | median s | p90 s | median CPU s | optimal | "
              "nonzeros built |", "|---|---|---|---|---|---|---|"]
        for t, s in out["sweeps"]["trees"].items():
            L.append(f"| {t} | 5 | {s['median_s']:.2f} | {s['p90_s']:.2f} | {s['median_cpu_s']:.2f} | {s['optimal']:.0%} | "
                     f"{s['full_nonzeros']} |")
        for dd, s in out["sweeps"]["depth"].items():
            L.append(f"| 100 | {dd} | {s['median_s']:.2f} | {s['p90_s']:.2f} | {s['median_cpu_s']:.2f} | {s['optimal']:.0%} | "
                     f"{s['full_nonzeros']} |")
    if "table4" in out:
        t4 = out["table4"]
        pr = t4.get("protocol", {})
        L += ["", "## OCEAN Table 4: isolation-forest plausibility", "", *meta("table4"),
              f"RF 100 trees x depth 5; isolation forest {pr.get('trees')} trees x {pr.get('max_samples')} samples "
              f"fitted on the training rows labelled with the target class, delta at contamination "
              f"{pr.get('contamination')}; time limit per query in the table. P: share of plausible "
              "counterfactuals, C: mean cost, T: median seconds per query (heuristic, model building, solving "
              "and verification; p90 and proven-optimal share beside). OCEAN: Gurobi 9.1 on 4 threads, its own "
              "preprocessing of the data sets and an isolation forest fitted on every row (train and test) of "
              "the desired class; its table does not say which norm (its script runs l0, l1, l2).", "",
              "| data | norm | origins | P no IF / IF | C no IF / IF | T no IF s | T IF s (median) | T IF p90 s "
              "| optimal IF (limit s) | OCEAN P no IF / IF | OCEAN C no IF / IF | OCEAN T no IF / IF s "
              "| run, load at its end |",
              "|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
        for name, e in t4.items():
            if name == "protocol":
                continue
            pub = PUBLISHED_IF.get(name)
            for norm in ("l0", "l1", "l2", "linf"):
                if f"{norm}/IF" not in e:
                    continue
                a, b = e[f"{norm}/no IF"]["summary"], e[f"{norm}/IF"]["summary"]
                run = e[f"{norm}/IF"]
                po = ("", "", "") if pub is None else (f"{pub[0][0]:.0%} / {pub[1][0]:.0%}",
                                                      f"{pub[0][1]:.2f} / {pub[1][1]:.2f}",
                                                      f"{pub[0][2]:.2f} / {pub[1][2]:.2f}")
                L.append(f"| {name} | {norm} | {b['n']} | {a['plausible']:.0%} / {b['plausible']:.0%} | "
                         f"{a['mean_cost']:.2f} / {b['mean_cost']:.2f} | {a['median_s']:.2f} | {b['median_s']:.2f} | "
                         f"{b['p90_s']:.2f} | {b['optimal']:.0%} ({run.get('time_limit', '?')}) | {po[0]} | {po[1]} | "
                         f"{po[2]} | {run.get('run', '?')}, {run.get('load_end', '?')} |")
                for key, label in (("threads", lambda r: f"HiGHS on {r.get('threads')} threads"),
                                   ("whole", lambda r: "one MILP (strategy whole)")):
                    if f"{norm}/IF {key}" not in e:
                        continue
                    c, cr = e[f"{norm}/IF {key}"]["summary"], e[f"{norm}/IF {key}"]
                    L.append(f"| {name} | {norm}, {label(cr)} | {c['n']} | "
                             f"- / {c['plausible']:.0%} | - / {c['mean_cost']:.2f} | | {c['median_s']:.2f} | "
                             f"{c['p90_s']:.2f} | {c['optimal']:.0%} ({cr.get('time_limit', '?')}) | | | | "
                             f"{cr.get('run', '?')}, {cr.get('load_end', '?')} |")
    if "dice" in out and "skipped" not in out["dice"]:
        L += ["", "## dice-ml (random) on the same forests and origins (l1 cost of ours)", "", *meta("dice"),
              "| data | dice validity | R = cost(dice) / cost(optimal) | dice median s |", "|---|---|---|---|"]
        for name, e in out["dice"].items():
            ratio = "" if e["R"] is None else f"{e['R']:.2f}"
            L.append(f"| {name} | {e['validity']:.0%} | {ratio} | {e['median_s']:.2f} |")
    if "population" in out:
        L += ["", "## Populations: every rejected row", "", *meta("population"),
              "l1 on the min-max scale, target the other class; constrained: sex and marital status immutable, "
              "age only up, at most 3 changes. Rows/s on the workers given (the one-time build included); "
              "proven: optimal or infeasible (in brackets: without a MILP, by the fast path); bounded: a verified "
              "point with a proven bound at the limit (mean gap beside); single-query: batch answers equal to one-case calls on a sample. treecf without "
              "constraints (it has no change limit), on the first --peer-rows rows: rows/s, median cost over "
              "lumber's optimum, wrong claims of optimality.", "",
              "| data, model | constraints | rows | rows/s | proven | bounded (gap) | unanswered | single-query equal "
              "| treecf exact | treecf default |", "|---|---|---|---|---|---|---|---|---|---|"]
        started = meta_of(out.get("section_meta", {}), "population").get("workers_start_s")
        if started is not None:
            L[-2:-2] = [f"Worker processes started (and their libraries imported) once before the first model, in "
                        f"{started:.1f} s: not in the rows/s.", ""]
        for key, e in out["population"].items():
            for label in ("none", "constrained"):
                a = e.get(label)
                if not a:
                    continue
                gap = f" ({a['mean_gap']:.1%})" if a.get("mean_gap") is not None else ""
                peers = []
                for b in ("exact", "genetic"):
                    t = a.get("treecf", {}).get(b) if isinstance(a.get("treecf"), dict) else None
                    if not isinstance(t, dict) or "rows_per_s" not in t:
                        peers.append("-" if label != "none" else str((t or {}).get("error", a.get("treecf", {}).get("skipped", "-")))[:40])
                        continue
                    ratio = "" if t.get("median_cost_ratio") is None else f", cost x{t['median_cost_ratio']:.2f}"
                    peers.append(f"{t['rows_per_s']:.1f} rows/s{ratio}, {t.get('wrong_optimal_claims', 0)} wrong claims")
                fast = f" ({a['no_milp']:.0%})" if a.get("no_milp") is not None else ""
                L.append(f"| {key.replace('/', ', ')} | {label} | {a['n']} | {a['rows_per_s']:.2f} | {a['proven']:.0%}{fast} | "
                         f"{a['bounded']:.0%}{gap} | {a['unanswered']:.0%} | {a['single_query_equal']}/"
                         f"{a['single_query_checked']} | {peers[0]} | {peers[1]} |")
    if "actionability" in out:
        L += ["", "## Actionability: float grid vs feature domains", "", *meta("actionability"),
              "Float grid: any value of the model's input type, clipped to the training range (the earlier "
              "default). Domains: inferred from the training rows (whole-number columns integer, 0/1 columns "
              "binary, observed range). *Not actionable*: the share of counterfactuals with a value outside its "
              "inferred domain or a change below its resolution (goal 0). Constraints: sex immutable, age "
              "non-decreasing.", "",
              "| data | constraints | norm | not actionable (float grid / domains) | mean changed features | "
              "median s | optimal |", "|---|---|---|---|---|---|---|"]
        for name, e in out["actionability"].items():
            for cons_label in ("constraints", "none"):
                for norm in ("l0", "l1", "l2"):
                    a = e[f"{cons_label}/{norm}/float grid"]["summary"]
                    b = e[f"{cons_label}/{norm}/domains"]["summary"]

                    def pc(v: Any) -> str:
                        return "-" if v is None else f"{v:.0%}"

                    def fl(v: Any) -> str:
                        return "-" if v is None else f"{v:.2f}"

                    L.append(f"| {name} | {cons_label} | {norm} | {pc(a['not_actionable'])} / {pc(b['not_actionable'])} "
                             f"| {fl(a['mean_changed'])} / {fl(b['mean_changed'])} | {a['median_s']:.2f} / "
                             f"{b['median_s']:.2f} | {a['optimal']:.0%} / {b['optimal']:.0%} |")
        ex = sorted({p for e in out["actionability"].values() for k, v in e.items() if k.endswith("float grid")
                     for p in v["summary"].get("examples", [])})[:4]
        if ex:
            L += ["", "Examples of float-grid values no person could have: " + "; ".join(f"`{p}`" for p in ex) + "."]
    return "\n".join(L) + "\n"


SECTIONS = ("main", "backends", "sweeps", "table4", "dice", "actionability", "population")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true", help="5 origins, smaller sweeps")
    ap.add_argument("--origins", type=int, default=None)
    ap.add_argument("--time-limit", type=float, default=None)
    ap.add_argument("--datasets", default="adult,credit,compas")
    ap.add_argument("--stress", default="credit-to-default", help="extra cases for the main section")
    ap.add_argument("--stress-origins", type=int, default=5)
    ap.add_argument("--no-merge", action="store_true",
                    help="start a fresh results file (default: replace only the sections run)")
    ap.add_argument("--sections", default=",".join(s for s in SECTIONS if s != "population"))
    ap.add_argument("--norms", default="l0,l1,l2", help="norms of the table4 section")
    ap.add_argument("--if-time-limit", type=float, default=30.0, help="seconds per query in the table4 section")
    ap.add_argument("--threads", type=int, default=1,
                    help="table4: also run each isolation-forest query with HiGHS on this many threads")
    ap.add_argument("--population", nargs="?", type=int, const=0, default=None, metavar="ROWS",
                    help="only the population section: ROWS rejected rows per model (default 400; --quick: 20)")
    ap.add_argument("--population-time-limit", type=float, default=10.0, help="seconds per query, population")
    ap.add_argument("--jobs", type=int, default=2, help="worker processes of the population section")
    ap.add_argument("--peer-rows", type=int, default=50,
                    help="population: rows per model given to treecf (its exact back end solves one at a time)")
    ap.add_argument("--whole", action="store_true",
                    help="table4: also run each isolation-forest query as one MILP (strategy whole)")
    ap.add_argument("--output", default=None,
                    help="results path without suffix (default: bench/results/counterfactual, quick: counterfactual-quick)")
    _outputs.add_dry_run(ap)
    args = ap.parse_args()
    if args.population is not None:
        args.sections = "population"
        args.population = args.population or (20 if args.quick else 400)
        if args.datasets == "adult,credit,compas":
            args.datasets = "adult,credit"
    unknown = set(args.sections.split(",")) - set(SECTIONS)
    if unknown:
        ap.error(f"unknown section(s) {', '.join(sorted(unknown))}; known: {', '.join(SECTIONS)}")
    args.output = args.output or str(RESULTS / _outputs.stem("counterfactual", args.quick))
    if _outputs.dry_run(args, args.output + ".json", args.output + ".md"):
        return
    args.origins = args.origins or (5 if args.quick else 20)
    args.time_limit = args.time_limit or (20.0 if args.quick else 60.0)
    args.datasets = args.datasets.split(",")
    args.norms = args.norms.split(",")
    args.stress = [c for c in args.stress.split(",") if c]
    out: dict[str, Any] = {
        "machine": f"{platform.processor() or platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}",
        "load": " ".join(f"{v:.1f}" for v in os.getloadavg()),
        "note": (f"{args.origins} origins per data set, time limit {args.time_limit:g} s per explanation; "
                 "seconds include the warm-start heuristic, model building, solving and verification."),
        "args": {k: v for k, v in vars(args).items() if k != "output"},
    }
    import highspy  # noqa: F401  (version below)
    import scipy

    out["versions"] = {"highspy": _version("highspy"), "scipy": scipy.__version__}
    prev = Path(args.output + ".json")
    old_meta: dict[str, Any] = {}
    if not args.no_merge and prev.exists():
        try:
            old = json.loads(prev.read_text())
        except ValueError:
            old = {}
        meta = old_meta = old.get("section_meta", {})
        if "table4" in old and "table4" in args.sections.split(","):
            out["table4"] = old["table4"]  # section_table4 replaces only the data sets and norms it runs
        for sec in SECTIONS:
            if sec in old and sec not in args.sections.split(","):
                out[sec] = old[sec]
                out.setdefault("section_meta", {})[sec] = meta.get(sec, {"run": "earlier run", "note": old.get("note", "")})
    command = ".venv/bin/python bench/counterfactual.py " + " ".join(shlex.quote(a) for a in sys.argv[1:])
    for sec in args.sections.split(","):
        # table4 keeps the rows of earlier runs (other data sets or norms): it names each run's command
        commands = [command] if sec != "table4" or args.no_merge else [
            c for c in meta_of(old_meta, sec).get("commands", []) if c != command] + [command]
        note = out["note"] if sec not in ("table4", "population") else (
            f"{args.origins} origins per data set, time limit {args.if_time_limit:g} s per query; seconds include "
            "the warm-start heuristic, model building, solving and verification." if sec == "table4" else
            f"{args.population} rejected rows per model, time limit "
            f"{args.population_time_limit:g} s per query, {args.jobs} worker processes.")
        out.setdefault("section_meta", {})[sec] = {
            "run": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
            "load": " ".join(f"{v:.1f}" for v in os.getloadavg()), "note": note, "commands": commands}
        globals()[f"section_{sec}"](args, out)
        out["section_meta"][sec]["load_end"] = " ".join(f"{v:.1f}" for v in os.getloadavg())
        RESULTS.mkdir(parents=True, exist_ok=True)
        Path(args.output + ".json").write_text(json.dumps(out, indent=1, default=float) + "\n")
        Path(args.output + ".md").write_text(markdown(out))
    print(markdown(out))


def meta_of(meta: dict[str, Any], sec: str) -> dict[str, Any]:
    m = meta.get(sec)
    return m if isinstance(m, dict) else {}


def _version(mod: str) -> str:
    from importlib.metadata import version

    try:
        return version(mod)
    except Exception:
        return "?"


if __name__ == "__main__":
    main()
