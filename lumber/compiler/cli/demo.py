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

READS_MODELS = False
NAME = "demo"
HELP = "train a model on bundled data and run lumber end to end (offline)"
OUTPUTS = {"keep": "folder"}
"""Output options checked before any work (lumber.ir.atomic: the folder of a file must exist)."""


def add_arguments(p: argparse.ArgumentParser) -> None:
    from ._options import positive_int

    p.add_argument("--trees", type=positive_int, default=100, help="boosting rounds of the demo model (default: 100)")
    p.add_argument("--leaves", type=positive_int, default=31, help="leaves per tree (default: 31)")
    p.add_argument("--seed", type=int, default=0, help="seed of the train/test split and the model (default: 0)")
    p.add_argument("--keep", metavar="DIR",
                   help="write the demo's files into DIR and keep them: model.txt, train.csv, cases.csv, "
                        "recourse.lum, lumber.toml, model.so/.onnx and the report (the README's tour uses them)")


DEMO_CONSTRAINTS = (
    "immutable Sex, NativeCountry, MaritalStatus, Relationship, Occupation, WorkClass\n"
    "Age: increase\nEducationNumber: increase, <= 16\nHoursPerWeek: between 20 and 60\n"
    "CapitalGain: increase, >= CapitalGain0 + 1000\nCapitalLoss: decrease\nnorm l1\nscale std\n")
"""What the explain stage lets change (the constraint language, inline)."""


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

    ds = datasets.load("adult").labelled()  # categories by label: the model records them, explanations name them
    Xtr, Xte, ytr, yte = ds.split(test_size=0.25, seed=args.seed)
    cats = [f.name for f in ds.features if f.kind.name == "CATEGORICAL"]
    from lumber.ir.atomic import prepare_output_dir

    workdir = prepare_output_dir(Path(args.keep)) if args.keep else Path(tempfile.mkdtemp(prefix="lumber-demo-"))
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
        model.fit(Xtr, ytr)  # pandas categories: LightGBM splits by category sets and saves the labels
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
        X = _codes(Xte)
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

    def compile_c() -> str:
        forest, model = state["forest"], state["model"]
        X = np.ascontiguousarray(_codes(Xte))
        theirs = model.booster_.predict(X, raw_score=True)
        onnx = lumber.compile(forest, target="onnx", path=workdir / "model.onnx")
        onnx_line = (f"model.onnx (ai.onnx.ml opset 5 on onnxruntime): margins bit-identical: "
                     f"{np.array_equal(onnx.predict_raw(X), theirs)}")
        try:
            pred = lumber.compile(forest, target="c", path=workdir / "model.so")
        except lumber.LumberError as exc:  # no C compiler: say so, the reference evaluator still works
            return f"C skipped: {str(exc).splitlines()[0]}\n{onnx_line}"
        if not np.array_equal(pred.predict_raw(X), theirs):
            raise SystemExit("the C library disagrees with LightGBM")
        big = np.repeat(X, 9, axis=0)
        t_ours = _best_of(lambda: pred.predict_raw(big))
        t_lgb = _best_of(lambda: model.booster_.predict(big, raw_score=True, num_threads=1))
        return (f"model.so: margins bit-identical to LightGBM; {len(big):,} rows in {t_ours * 1e3:.0f} ms "
                f"(LightGBM 1 thread: {t_lgb * 1e3:.0f} ms, {t_lgb / t_ours:.1f}x)\n{onnx_line}")

    def explain() -> str:
        model, forest = state["model"], state["forest"]
        i = int(np.flatnonzero(model.predict(Xte) == 0)[3])
        case = Xte.iloc[[i]]
        text = DEMO_CONSTRAINTS
        cons = lumber.parse_constraints(text, schema=forest.schema)
        st = lumber.sensitive_tests(model, case, reference=Xtr, options=lumber.SensitiveOptions(scale="std"))[0]
        cf = lumber.counterfactual(model, case, target=1, constraints=cons, reference=Xtr,
                                   features=ds.features, options=lumber.CounterfactualOptions(time_limit=60))
        if not st.verified or (cf.x is not None and not cf.verified):
            raise SystemExit(f"explanation not verified: {cf.status}")
        lines = [f"test row {i}, predicted {st.prediction}: trace of {st.trace} tests over {forest.n_trees} trees; "
                 f"nearest class change at scaled L2 distance {st.distance:.3g} ({st.method}, verified)"]
        if cf.x is None:
            lines.append(f"no counterfactual under {len(text.splitlines())} constraint lines: {cf.status} "
                         f"({cf.message or 'no allowed change flips the decision'})")
        else:
            changes = "; ".join(f"{c.feature}: {c.before_text} -> {c.after_text}" for c in cf.changes)
            lines.append(f"optimal counterfactual under {len(text.splitlines())} constraint lines: {changes}; "
                         f"prediction {cf.original_prediction} -> {cf.prediction}")
            lines.append(f"  ({cf.status}, cost {cf.cost:.3g}; the model's own predict now gives the target: "
                         f"{cf.verified})")
        return "\n".join(lines)

    def polynomial() -> str:
        model = state["model"]
        poly = lumber.run(model, "polynomial")
        X = _codes(Xte)
        diff = float(np.max(np.abs(poly.evaluate(X) - model.booster_.predict(X, raw_score=True))))
        eq = lumber.equivalent(model, poly)
        att = lumber.attribution(model, Xtr.iloc[:2000])
        top = ", ".join(f"{n} {v:+.2f}" for n, v in att.ranking()[:3])
        stats = poly.statistics()
        return (f"{stats['monomials']:,} monomials over {stats['conditions']:,} conditions; max |margin - LightGBM| "
                f"{diff:.1e}; lumber.equivalent(model, polynomial): {eq.equal}\n"
                f"attribution nu(k), top 3: {top}")

    def report() -> str:
        from lumber.compiler.cli.report import demo_report

        return demo_report(workdir, state["path"], Xtr, ytr, Xte, seed=args.seed)

    return [("train", train), ("load", load), ("verify", verify), ("compile", compile_c), ("explain", explain),
            ("polynomial", polynomial), ("report", report)]


def _codes(frame: Any) -> Any:
    """A frame as the float array the model reads: categorical columns by their codes."""
    import pandas as pd

    return np.column_stack([frame[c].cat.codes.to_numpy(np.float64) if isinstance(frame[c].dtype, pd.CategoricalDtype)
                            else frame[c].to_numpy(np.float64) for c in frame.columns])


def _best_of(fn: Callable[[], Any], repeat: int = 3) -> float:
    best = float("inf")
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
    return best

