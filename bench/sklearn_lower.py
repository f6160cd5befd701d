"""Benchmark: lower fitted scikit-learn ensembles to a lumber Forest.

Compares ``lumber.compiler.frontends.sklearn.from_sklearn`` (lower + validate)
with treelite's importer (``treelite.sklearn.import_model``) on the same fitted
models (adult, all 45k rows). Runs are interleaved in one process; the median
of ``--runs`` is reported, with the ratio lumber / treelite. It also checks that
the lowered forest reproduces the model's raw output on 2,000 rows.

    .venv/bin/python bench/sklearn_lower.py [--runs 5] [--quick] [--dry-run]

Writes ``bench/results/sklearn_lower.json`` and ``bench/results/sklearn_lower.md``
(``sklearn_lower-quick.*`` with --quick: 2 runs).
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import time
from pathlib import Path
from typing import Any, Callable

import numpy as np

import _outputs

HERE = Path(__file__).resolve().parent
RESULTS = HERE / "results"


def models() -> dict[str, tuple[Any, np.ndarray]]:
    from sklearn import ensemble as E

    import lumber.datasets
    from lumber.ir import FeatureKind

    ds = lumber.datasets.load("adult")
    X, y = ds.X.to_numpy(), ds.y
    cats = [i for i, f in enumerate(ds.features) if f.kind == FeatureKind.CATEGORICAL]
    return {
        "RandomForestClassifier(200, full depth)": (E.RandomForestClassifier(200, n_jobs=1, random_state=0), X),
        "GradientBoostingClassifier(300, depth 3)": (E.GradientBoostingClassifier(n_estimators=300, random_state=0), X),
        "HistGradientBoostingClassifier(300, categorical)": (
            E.HistGradientBoostingClassifier(max_iter=300, categorical_features=cats, early_stopping=False,
                                             random_state=0), X),
        "IsolationForest(200)": (E.IsolationForest(n_estimators=200, random_state=0), X),
    }, y


def lower_lumber(model: Any) -> Any:
    from lumber.compiler.frontends.sklearn import from_sklearn

    return from_sklearn(model)


def lower_treelite(model: Any) -> Any:
    import treelite.sklearn

    return treelite.sklearn.import_model(model)


def timed(fn: Callable[[Any], Any], model: Any) -> float:
    t0 = time.perf_counter()
    fn(model)
    return time.perf_counter() - t0


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=None, help="interleaved runs (default 5; quick 2)")
    ap.add_argument("--quick", action="store_true", help="2 runs, into sklearn_lower-quick.*")
    _outputs.add_dry_run(ap)
    args = ap.parse_args()
    args.runs = args.runs or (2 if args.quick else 5)
    name = _outputs.stem("sklearn_lower", args.quick)
    js, mdp = RESULTS / f"{name}.json", RESULTS / f"{name}.md"
    if _outputs.dry_run(args, js, mdp):
        return
    table, y = models()
    rows = []
    for name, (model, X) in table.items():
        model.fit(X, y) if "Isolation" not in name else model.fit(X)
        forest = lower_lumber(model)
        sample = X[:2000]
        if "Isolation" in name:
            ok = bool(np.allclose(forest.schema.transform(forest.evaluate(sample)), model.score_samples(sample),
                                  rtol=1e-12, atol=0))
        elif "Hist" in name:
            ok = bool(np.array_equal(forest.evaluate(sample), model._raw_predict(sample)[:, 0]))
        elif "Gradient" in name:
            ok = bool(np.array_equal(forest.evaluate(sample), model.decision_function(sample)))
        else:
            ok = bool(np.array_equal(forest.evaluate(sample), model.predict_proba(sample)))
        times: dict[str, list[float]] = {"lumber": [], "treelite": []}
        for _ in range(args.runs):  # interleaved
            times["lumber"].append(timed(lower_lumber, model))
            times["treelite"].append(timed(lower_treelite, model))
        med = {k: statistics.median(v) for k, v in times.items()}
        rows.append({"model": name, "trees": forest.n_trees, "nodes": forest.n_nodes, "exact": ok,
                     "lumber_s": med["lumber"], "treelite_s": med["treelite"],
                     "ratio": med["lumber"] / med["treelite"]})
        print(rows[-1], flush=True)
    RESULTS.mkdir(exist_ok=True)
    meta = {"python": platform.python_version(), "machine": platform.machine(), "runs": args.runs}
    js.write_text(json.dumps({"meta": meta, "rows": rows}, indent=2))
    md = ["| model | trees | nodes | output matches | lumber (s) | treelite (s) | lumber / treelite |",
          "|---|---|---|---|---|---|---|"]
    md += [f"| {r['model']} | {r['trees']} | {r['nodes']} | {r['exact']} | {r['lumber_s']:.3f} | "
           f"{r['treelite_s']:.3f} | {r['ratio']:.2f} |" for r in rows]
    mdp.write_text("\n".join(md) + "\n")
    print("\n".join(md))


if __name__ == "__main__":
    main()
