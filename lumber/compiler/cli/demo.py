"""``lumber demo``: the whole tool on bundled data, offline, in well under a minute.

Trains a LightGBM model on the bundled Adult data, lowers it to the IR,
verifies it against LightGBM itself, then runs each capability on it and checks
every claim against the original model. ``make demo`` runs this.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path
from typing import Any, Callable

import numpy as np

NAME = "demo"
HELP = "train a model on bundled data and run lumber end to end (offline)"


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--dataset", default="adult", choices=["adult", "compas", "credit"])
    p.add_argument("--trees", type=int, default=100)
    p.add_argument("--leaves", type=int, default=31)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--keep", metavar="DIR", help="keep the artifacts in DIR")


class Stage:
    def __init__(self, total: int) -> None:
        self.total = total
        self.i = 0

    def __call__(self, name: str, fn: Callable[[], str]) -> None:
        self.i += 1
        t0 = time.perf_counter()
        text = fn()
        dt = time.perf_counter() - t0
        lines = text.splitlines() or [""]
        print(f"[{self.i}/{self.total}] {name:<11}{lines[0]}  ({dt:.2f} s)")
        for line in lines[1:]:
            print(f"{'':17}{line}")


def run(args: argparse.Namespace) -> int:
    import lightgbm as lgb

    import lumber
    from lumber import datasets

    ds = datasets.load(args.dataset)
    Xtr, Xte, ytr, yte = ds.split(test_size=0.25, seed=args.seed)
    cats = [f.name for f in ds.features if f.kind.name == "CATEGORICAL"]
    workdir = Path(args.keep) if args.keep else Path(tempfile.mkdtemp(prefix="lumber-demo-"))
    workdir.mkdir(parents=True, exist_ok=True)
    state: dict[str, Any] = {}
    print(f"lumber demo: {ds.name} ({len(ds.X):,} rows, {len(ds.features)} features), "
          f"LightGBM {args.trees} trees x {args.leaves} leaves; artifacts in {workdir}")
    stages = _stages(args, lgb, lumber, ds, Xtr, Xte, ytr, yte, cats, workdir, state)
    stage = Stage(len(stages))
    for name, fn in stages:
        stage(name, fn)
    print("all checks passed")
    return 0


def _stages(args: argparse.Namespace, lgb: Any, lumber: Any, ds: Any, Xtr: Any, Xte: Any, ytr: Any, yte: Any,
            cats: list[str], workdir: Path, state: dict[str, Any]) -> list[tuple[str, Callable[[], str]]]:
    def train() -> str:
        model = lgb.LGBMClassifier(n_estimators=args.trees, num_leaves=args.leaves, learning_rate=0.1,
                                   random_state=args.seed, verbose=-1)
        model.fit(Xtr, ytr, categorical_feature=cats)
        path = workdir / "model.txt"
        model.booster_.save_model(str(path))
        state["model"] = model
        state["path"] = path
        from sklearn.metrics import roc_auc_score

        auc = roc_auc_score(yte, model.predict_proba(Xte)[:, 1])
        return f"LightGBM on {len(Xtr):,} rows, test AUC {auc:.4f}; saved {path.name}"

    def load() -> str:
        forest = lumber.load(state["path"])
        state["forest"] = forest
        s = forest.summary()
        return (f"{s['trees']} trees, {s['leaves']:,} leaves, max depth {s['max_depth']}, "
                f"{s['categorical_splits']} categorical splits, {s['memory_bytes'] / 1e6:.1f} MB")

    def verify() -> str:
        forest, model = state["forest"], state["model"]
        X = Xte.to_numpy()
        Xn = X.copy()
        Xn[::7, 0] = np.nan
        ours = forest.evaluate(Xn)
        theirs = model.booster_.predict(Xn, raw_score=True)
        leaves_equal = bool(np.array_equal(
            forest.apply(Xn) - (np.diff(forest.tree_offset) // 2)[None, :],
            model.booster_.predict(Xn, pred_leaf=True)))
        exact = bool(np.array_equal(ours, theirs))
        if not (exact and leaves_equal):
            rel = float(np.max(np.abs(ours - theirs) / np.maximum(np.abs(theirs), 1e-300)))
            raise SystemExit(f"verification failed: max relative difference {rel:.3g}, leaves equal: {leaves_equal}")
        return (f"{len(X):,} test rows (every 7th with a NaN): margins bit-identical to LightGBM, "
                f"same leaf in every tree")

    def report() -> str:
        from lumber.compiler.cli.report import demo_report

        return demo_report(workdir, state["path"], Xtr, ytr, Xte, seed=args.seed)

    return [("train", train), ("load", load), ("verify", verify), ("report", report)]
