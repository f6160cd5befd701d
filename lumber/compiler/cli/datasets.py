"""``lumber datasets list`` and ``lumber datasets export NAME DIR``: the bundled data sets as files.

``export`` writes what the README's command line tour uses: ``model.txt`` (a
LightGBM model trained on the data set's training split), ``train.csv`` and
``valid.csv`` (features and the label column), ``cases.csv`` (test rows to
explain, no label) and the data set's example constraint file.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from . import _options

READS_MODELS = False
NAME = "datasets"
HELP = "list the bundled data sets, or export one with a trained model (the README tour's files)"
OUTPUTS = {"dir": "folder"}
"""Output options checked before any work (lumber.ir.atomic: the folder of a file must exist)."""
DESCRIPTION = __doc__.split("\n\n", 1)[1].strip() if __doc__ else HELP


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("action", choices=["list", "export"], help="list the data sets, or export one into DIR")
    p.add_argument("name", nargs="?", help="data set to export: adult, compas or credit")
    p.add_argument("dir", nargs="?", help="folder to write into (created when missing)")
    p.add_argument("--trees", type=_options.positive_int, default=100, help="boosting rounds of model.txt (default: 100)")
    p.add_argument("--leaves", type=_options.positive_int, default=31, help="leaves per tree (default: 31)")
    p.add_argument("--train-rows", type=_options.positive_int, default=2000,
                   help="rows written to train.csv (a sample of the training split; default: 2000)")
    p.add_argument("--cases", type=_options.positive_int, default=200, help="test rows written to cases.csv (default: 200)")
    p.add_argument("--seed", type=int, default=0, help="seed of the split, the sample and the model (default: 0)")
    p.add_argument("--force", action="store_true", help="overwrite files already in DIR")


def run(args: argparse.Namespace) -> int:
    from lumber import datasets
    from lumber.ir import InputDataError

    if args.action == "list":
        for name in datasets.NAMES:
            ds = datasets.load(name)
            print(f"{name:<8} {len(ds.X):>6,} rows, {len(ds.features)} features, label '{ds.target}'")
        return 0
    if not args.name or not args.dir:
        raise InputDataError("lumber datasets export needs NAME and DIR", "e.g. lumber datasets export adult tour")
    if args.name not in datasets.NAMES:
        import difflib

        close = difflib.get_close_matches(args.name, datasets.NAMES, n=1)
        raise InputDataError(f"no bundled data set {args.name!r}", *([f"did you mean '{close[0]}'?"] if close else []),
                             f"data sets: {', '.join(datasets.NAMES)}")
    for line in export(args.name, Path(args.dir), trees=args.trees, leaves=args.leaves, train_rows=args.train_rows,
                       cases=args.cases, seed=args.seed, force=args.force):
        print(line)
    return 0


def export(name: str, out: Path, *, trees: int = 100, leaves: int = 31, train_rows: int = 2000, cases: int = 200,
           seed: int = 0, force: bool = False) -> list[str]:
    """Write the tour's files for data set ``name`` into ``out``; returns one line per file written."""
    import lightgbm as lgb
    import numpy as np

    from lumber import datasets
    from lumber.runtime.data import csv_text
    from lumber.ir import OutputError, atomic_write_text
    from lumber.ir.atomic import prepare_output_dir

    prepare_output_dir(out)
    names = ["model.txt", "train.csv", "valid.csv", "cases.csv", f"{name}.lum"]
    existing = [n for n in names if (out / n).exists()]
    if existing and not force:
        raise OutputError(f"{out}: already holds {', '.join(existing)}", "pass --force to overwrite them")
    ds = datasets.load(name).labelled()  # the model records category labels; the CSVs hold them as text
    Xtr, Xte, ytr, yte = ds.split(test_size=0.25, seed=seed)
    model = lgb.LGBMClassifier(n_estimators=trees, num_leaves=leaves, learning_rate=0.1, random_state=seed,
                               verbose=-1).fit(Xtr, ytr)
    tmp = out / ".model.txt.tmp"
    model.booster_.save_model(str(tmp))
    tmp.replace(out / "model.txt")
    rng = np.random.default_rng(seed)
    pick = np.sort(rng.choice(len(Xtr), size=min(train_rows, len(Xtr)), replace=False))
    half = len(Xte) // 2
    files = {
        "train.csv": Xtr.iloc[pick].assign(**{ds.target: np.asarray(ytr)[pick]}),
        "valid.csv": Xte.iloc[half:].assign(**{ds.target: np.asarray(yte)[half:]}),
        "cases.csv": Xte.iloc[:min(cases, half)],
    }
    lines = [f"{out / 'model.txt'}: LightGBM, {trees} trees x {leaves} leaves on {len(Xtr):,} training rows"]
    for fname, frame in files.items():
        atomic_write_text(out / fname, csv_text(frame))
        label = f", label '{ds.target}'" if ds.target in frame.columns else ""
        lines.append(f"{out / fname}: {len(frame):,} rows{label}")
    atomic_write_text(out / f"{name}.lum", datasets.example_constraints(name))
    lines.append(f"{out / f'{name}.lum'}: the example constraint file")
    return lines
