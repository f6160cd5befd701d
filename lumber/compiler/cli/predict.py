"""``lumber predict MODEL DATA.csv [--format csv|jsonl|parquet]``: margins, probabilities and decisions.

A model file is evaluated by the IR's reference evaluator (a ``.lumber`` file by the
evaluator of the IR it holds: Forest, pruned Polynomial or ObliviousEnsemble); a compiled
artifact (``.so``, ``.table``, lumber's ``.onnx``) by itself, with the schema it records.
"""

from __future__ import annotations

import argparse
import io
import json
import sys
from pathlib import Path

import numpy as np
import pandas as pd

from . import _options

NAME = "predict"
HELP = "predict a CSV with a model (raw margins, probabilities and decisions)"
OUTPUTS = {"output": "file"}
"""Output options checked before any work (lumber.ir.atomic: the folder of a file must exist)."""


FORMATS = ("csv", "jsonl", "parquet")


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("model", help=_options.MODEL_HELP + " or an "
                                 "artifact from lumber compile (.so, .table, .onnx)")
    p.add_argument("data", help="CSV with a header row naming the model's features (extra columns are ignored)")
    _options.add_no_header(p)
    p.add_argument("-o", "--output", help="write the predictions here (default: standard output; parquet needs -o)")
    p.add_argument("--format", choices=FORMATS, default=None,
                   help="csv, jsonl (one JSON object per row) or parquet (needs pyarrow) "
                        "(default: from the -o suffix, else csv)")
    p.add_argument("--raw", action="store_true", help="only raw margins")
    _options.add_threshold(p)
    _options.add_id(p)


def _format(args: argparse.Namespace) -> str:
    from lumber.ir import InputDataError

    fmt = args.format
    if fmt is None:
        suffix = Path(args.output).suffix.lower() if args.output else ""
        fmt = {".jsonl": "jsonl", ".parquet": "parquet", ".pq": "parquet"}.get(suffix, "csv")
    if fmt == "parquet":
        if not args.output:
            raise InputDataError("--format parquet writes a binary file: give -o PATH.parquet")
        try:
            import pyarrow  # noqa: F401
        except ImportError:
            raise InputDataError("--format parquet needs pyarrow, which is not installed",
                                 "pip install pyarrow, or use --format csv or jsonl") from None
    return fmt


def run(args: argparse.Namespace) -> int:
    from lumber.compiler.cli._artifacts import model_or_artifact
    from lumber.compiler.data import read_rows
    from lumber.compiler.data import case_ids
    from lumber.ir import Task, atomic_open, atomic_write_text
    from lumber.ir.decision import with_cutoff

    fmt = _format(args)
    cutoff = _options.cutoff_of(args)
    model = model_or_artifact(args.model)
    frame_in, X = read_rows(args.data, model, header=not args.no_header, ignore=[args.id] if args.id else ())
    margin = model.evaluate(X) if hasattr(model, "evaluate") else model.predict_raw(X)
    schema = with_cutoff(model.schema, cutoff)
    out: dict[str, np.ndarray] = {}
    if args.id:
        out[args.id] = np.asarray(case_ids(frame_in, args.id, args.data), dtype=object)
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
    if fmt == "parquet":
        with atomic_open(args.output, "wb") as fh:
            frame.to_parquet(fh, index=False)
        return 0
    buf = io.StringIO()
    if fmt == "jsonl":
        text = "\n".join(json.dumps(r) for r in frame.to_dict(orient="records")) + "\n" if len(frame) else ""
    else:
        frame.to_csv(buf, index=False, float_format="%.17g")
        text = buf.getvalue()
    if args.output:
        atomic_write_text(args.output, text)
    else:
        sys.stdout.write(text)
    return 0
