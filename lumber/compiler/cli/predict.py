"""``lumber predict MODEL DATA [-o OUT]``: margins, probabilities and decisions, streamed chunk by chunk.

A model file is evaluated by the IR's reference evaluator (a ``.lumber`` file by the
evaluator of the IR it holds: Forest, pruned Polynomial or ObliviousEnsemble); a compiled
artifact (``.so``, ``.table``, lumber's ``.onnx``) by itself, with the schema it records.
DATA is CSV (optionally gzipped) or Parquet, or ``-`` for standard input; it is read,
predicted and written ``--chunk-rows`` rows at a time (:func:`lumber.runtime.stream.predict_file`),
so memory does not grow with the row count.
"""

from __future__ import annotations

import argparse

from . import _options

NAME = "predict"
HELP = "predict a CSV or Parquet file with a model (raw margins, probabilities and decisions)"
OUTPUTS = {"output": "file"}
"""Output options checked before any work (lumber.ir.atomic: the folder of a file must exist)."""

FORMATS = ("csv", "jsonl", "parquet")


def add_arguments(p: argparse.ArgumentParser) -> None:
    from lumber.runtime.stream import StreamOptions

    p.add_argument("model", help=_options.MODEL_HELP + " or an "
                                 "artifact from lumber compile (.so, .table, .onnx)")
    p.add_argument("data", help="CSV with a header row naming the model's features (extra columns are ignored), "
                                "a Parquet file, or - for standard input")
    _options.add_no_header(p)
    p.add_argument("-o", "--output", help="write the predictions here (default: standard output; parquet needs -o)")
    p.add_argument("--format", choices=FORMATS, default=None,
                   help="csv, jsonl (one JSON object per row) or parquet (needs pyarrow) "
                        "(default: from the -o suffix, else csv)")
    p.add_argument("--raw", action="store_true", help="only raw margins")
    p.add_argument("--threads", type=int, default=1, help="threads for each chunk's prediction (default 1)")
    p.add_argument("--chunk-rows", type=int, default=StreamOptions.chunk_rows, metavar="N",
                   help=f"rows read, predicted and written at a time (default {StreamOptions.chunk_rows:,})")
    p.add_argument("--quiet", action="store_true", help="no progress on stderr")
    _options.add_threshold(p)
    _options.add_id(p)
    p.add_argument("--class-names", metavar="NAMES", default=None,
                   help="what the classes mean, in output order (e.g. paid,default): a 'decision' column names "
                        "each row's class")


def run(args: argparse.Namespace) -> int:
    from lumber.compiler.cli._artifacts import model_or_artifact
    from lumber.runtime.stream import StreamOptions, output_format, predict_file

    options = StreamOptions(chunk_rows=args.chunk_rows, threads=args.threads, header=not args.no_header,
                            raw=args.raw, output_format=args.format, progress=False if args.quiet else None,
                            cutoff=_options.cutoff_of(args), id_column=args.id,
                            class_names=_class_names(args.class_names))
    output_format(args.output, options)  # a parquet output without -o fails before the model loads
    predict_file(model_or_artifact(args.model), args.data, args.output, options=options)
    return 0


def _class_names(text: str | None) -> tuple[str, ...] | None:
    return None if text is None else tuple(s.strip() for s in text.split(","))
