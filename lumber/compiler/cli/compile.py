"""``lumber compile MODEL --emit c|c-source|onnx|lumber|table -o OUT [--passes PIPELINE] [--optimize speed]``."""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any

NAME = "compile"
HELP = "compile a model to a C library, C source, ONNX, or (after --passes) a .lumber IR file"
DESCRIPTION = (
    "Compile a trained model into an artifact that reproduces it exactly: a C shared library "
    "(--emit c), C source and header (--emit c-source), an ONNX model (--emit onnx), or the IR "
    "after a pass pipeline (--emit lumber), or oblivious decision tables (--emit table). "
    "--optimize speed builds the forest and oblivious-table forms of a C library and keeps the faster. "
    "Artifacts are written atomically and record the model's fingerprint.")
SUFFIX = {"c": ".so", "c-source": ".c", "onnx": ".onnx", "lumber": ".lumber", "table": ".table"}


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("model", help="model file (LightGBM text, XGBoost JSON/UBJSON, pickle, .lumber)")
    p.add_argument("--emit", choices=sorted(SUFFIX), default=None,
                   help="artifact kind (default: c, or lumber when --passes is given)")
    p.add_argument("-o", "--output", help="output path (default: the model's name with the artifact's suffix)")
    p.add_argument("--passes", metavar="PIPELINE", help='pass pipeline to run first, e.g. "polynomial,prune{alpha=auto}"')
    p.add_argument("--time-passes", action="store_true", help="print per-pass timings (with --passes)")
    p.add_argument("--train", metavar="CSV", help="training rows for passes that need data")
    p.add_argument("--valid", metavar="CSV", help="validation rows for passes that need data")
    p.add_argument("--label", metavar="COLUMN", help="label column of the --train/--valid CSV files")
    c = p.add_argument_group("C backend")
    c.add_argument("--prefix", default="lumber", help="prefix of the exported C symbols (default: lumber)")
    c.add_argument("--unroll", action="store_true", help="trees as if/else code instead of tables (small models)")
    c.add_argument("--march-native", action="store_true", help="tune for this CPU")
    c.add_argument("--no-openmp", action="store_true", help="build without OpenMP threads")
    c.add_argument("--cc", help="C compiler (default: $CC, cc, gcc, clang)")
    o = p.add_argument_group("ONNX backend")
    o.add_argument("--opset", type=int, default=5, choices=[3, 5], help="ai.onnx.ml opset (default: 5)")
    o.add_argument("--input-dtype", choices=["float32", "float64"], help="ONNX input tensor type")
    o.add_argument("--inexact", action="store_true",
                   help="allow encodings that round results (opset 3, float32 sums of float64 models)")
    from . import _tables

    _tables.add_arguments(p)


def _data(args: argparse.Namespace, forest: Any) -> dict[str, Any] | None:
    from lumber.compiler.data import read_rows
    from lumber.ir import InputDataError

    out: dict[str, Any] = {}
    for key, path in (("train", args.train), ("valid", args.valid)):
        if path is None:
            continue
        frame, X = read_rows(path, forest)
        y = None
        if args.label is not None:
            if args.label not in frame.columns:
                raise InputDataError(f"{path}: no label column '{args.label}'",
                                     f"columns: {', '.join(map(str, frame.columns[:12]))}")
            y = frame[args.label].to_numpy()
        out[key] = (X, y)
    return out or None


def run(args: argparse.Namespace) -> int:
    from lumber.compiler.frontends import load
    from lumber.ir import CompileError, Forest

    emit = args.emit or ("lumber" if args.passes else "c")
    output = Path(args.output) if args.output else Path(Path(args.model).stem + SUFFIX[emit])
    t0 = time.perf_counter()
    ir: Any = load(args.model)
    if args.passes:
        from lumber.compiler.pipeline import run as run_pipeline

        ir = run_pipeline(ir, args.passes, data=_data(args, ir), time_passes=args.time_passes)
    elif args.time_passes and emit != "table":
        raise CompileError("--time-passes needs --passes (or --emit table)")
    if emit == "lumber":
        ir.save(output)
        print(f"wrote {output} ({type(ir).__name__} IR)")
        return 0
    from . import _tables

    if _tables.wants_tables(args, emit, ir):
        return _tables.run(args, ir, emit, output, t0)
    if not isinstance(ir, Forest):
        raise CompileError(f"--emit {emit} needs a Forest; the pipeline produced a {type(ir).__name__}",
                           "use --emit lumber to save it, or a pipeline that ends in a Forest")
    from lumber.compiler.api.compile import compile as compile_model

    pred = compile_model(ir, target=emit, path=output, prefix=args.prefix, unroll=args.unroll,
                         march_native=args.march_native, openmp=False if args.no_openmp else None, cc=args.cc,
                         opset=args.opset, input_dtype=args.input_dtype, exact=not args.inexact,
                         name=output.stem)
    what = {"c": "C shared library", "c-source": "C source + header", "onnx": "ONNX model"}[emit]
    extra = f", header {output.with_suffix('.h')}" if emit == "c-source" else ""
    print(f"wrote {output} ({what}, {ir.n_trees} trees, fingerprint {pred.fingerprint[:16]}{extra}) "
          f"in {time.perf_counter() - t0:.2f} s", file=sys.stdout)
    return 0
