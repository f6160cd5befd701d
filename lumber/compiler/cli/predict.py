"""``lumber predict MODEL DATA.csv``: predictions from the IR's reference evaluator."""

from __future__ import annotations

import argparse
import io
import sys

import numpy as np
import pandas as pd

from . import _options

NAME = "predict"
HELP = "predict a CSV with a model (raw margins, probabilities and decisions)"


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("model", help="model file (LightGBM text, XGBoost JSON/UBJSON, CatBoost, .skops, .lumber)")
    p.add_argument("data", help="CSV with a header row naming the model's features (extra columns are ignored)")
    _options.add_no_header(p)
    p.add_argument("-o", "--output", help="write CSV here (default: stdout)")
    p.add_argument("--raw", action="store_true", help="only raw margins")


def run(args: argparse.Namespace) -> int:
    from lumber.compiler.data import read_rows
    from lumber.compiler.frontends import load
    from lumber.ir import Task, atomic_write_text

    forest = load(args.model)
    _, X = read_rows(args.data, forest, header=not args.no_header)
    margin = forest.evaluate(X)
    schema = forest.schema
    out: dict[str, np.ndarray] = {}
    m2 = margin.reshape(len(X), -1)
    for k in range(m2.shape[1]):
        out["raw" if m2.shape[1] == 1 else f"raw_{k}"] = m2[:, k]
    if not args.raw:
        if schema.task in (Task.BINARY, Task.MULTICLASS):
            proba = schema.proba(margin)
            labels = schema.classes if schema.classes is not None else range(proba.shape[1])
            for k, lab in enumerate(labels):
                out[f"proba_{lab}"] = proba[:, k]
        out["prediction"] = schema.decide(margin)
    frame = pd.DataFrame(out)
    buf = io.StringIO()
    frame.to_csv(buf, index=False, float_format="%.17g")
    if args.output:
        atomic_write_text(args.output, buf.getvalue())
    else:
        sys.stdout.write(buf.getvalue())
    return 0
