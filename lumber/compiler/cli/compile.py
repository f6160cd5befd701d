"""``lumber compile MODEL --emit c|c-source|onnx|table|table-c|lumber -o OUT [--passes PIPELINE] [--optimize speed]``.

Targets and their file suffixes come from :mod:`lumber.compiler.targets`; ``--emit lumber``
saves the IR a pass pipeline produced instead of compiling it.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any

from . import _options

NAME = "compile"
HELP = "compile a model to a C library, C source, ONNX, oblivious tables, or (after --passes) a .lumber IR file"
OUTPUTS = {"output": "file"}
"""Output options checked before any work (lumber.ir.atomic: the folder of a file must exist)."""
DESCRIPTION = (
    "Compile a trained model into an artifact that reproduces it exactly: a C shared library "
    "(--emit c), C source and header (--emit c-source), an ONNX model (--emit onnx), or the IR "
    "after a pass pipeline (--emit lumber), or oblivious decision tables (--emit table). "
    "--optimize speed builds the forest and oblivious-table forms of a C library and keeps the faster. "
    "Artifacts are written atomically and record the model's fingerprint.")
IR_FILE = "lumber"
"""``--emit lumber``: the IR itself (a ``.lumber`` file), not a compile target."""
CLI_TARGETS = ("c", "c-source", "onnx", "table", "table-c")
"""Registry targets ``--emit`` offers (``numpy``'s artifact is the IR file ``--emit lumber`` writes)."""
TABLE_TARGETS = ("table", "table-c")


def suffixes() -> dict[str, str]:
    """``--emit`` choice -> output file suffix, from the target registry."""
    from lumber.compiler.targets import get_target

    return {**{t: get_target(t).suffix for t in CLI_TARGETS}, IR_FILE: ".lumber"}


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("model", help=_options.MODEL_HELP)
    p.add_argument("--emit", choices=sorted((*CLI_TARGETS, IR_FILE)), default=None,
                   help="artifact kind (default: c, or lumber when --passes is given)")
    p.add_argument("-o", "--output", help="output path (default: the model's name with the artifact's suffix)")
    p.add_argument("--passes", metavar="PIPELINE", help='pass pipeline to run first, e.g. "polynomial,prune{alpha=auto}"')
    p.add_argument("--time-passes", action="store_true", help="print per-pass timings (with --passes)")
    p.add_argument("--train", metavar="CSV", help="training rows for passes that need data")
    p.add_argument("--valid", metavar="CSV", help="validation rows for passes that need data")
    p.add_argument("--label", metavar="COLUMN", help="label column of the --train/--valid CSV files")
    c = p.add_argument_group("C backend")
    c.add_argument("--prefix", help="prefix of the exported C symbols (default: lumber)")
    c.add_argument("--unroll", action="store_true", help="trees as if/else code instead of tables (small models)")
    c.add_argument("--march-native", action="store_true", help="tune for this CPU")
    c.add_argument("--no-openmp", action="store_true", help="build without OpenMP threads")
    c.add_argument("--cc", help="C compiler (default: $CC, cc, gcc, clang)")
    o = p.add_argument_group("ONNX backend")
    o.add_argument("--opset", type=int, choices=[3, 5], help="ai.onnx.ml opset (default: 5)")
    o.add_argument("--input-dtype", choices=["float32", "float64"], help="ONNX input tensor type")
    o.add_argument("--inexact", action="store_true",
                   help="allow encodings that round results (opset 3, float32 sums of float64 models)")
    from lumber.passes.transforms.recompose_oblivious import STRATEGIES

    g = p.add_argument_group("oblivious tables")
    g.add_argument("--optimize", choices=["speed"],
                   help="with --emit c: build the forest and the oblivious-table forms, time both on a sample, "
                        "keep the faster and print both")
    g.add_argument("--max-depth", metavar="N",
                   help="deepest table when re-composing a forest into oblivious trees "
                        "(default: auto: with grow, the depth whose cover costs least by the measured table costs)")
    g.add_argument("--strategy", choices=STRATEGIES,
                   help="how re-composition covers the polynomial with trees (default: grow)")
    g.add_argument("--sample", metavar="CSV",
                   help="your rows to time on: with --optimize speed the forms (default: the --train rows), "
                        "with --emit c the C walk (binned or code)")
    g.add_argument("--tolerance", type=float, metavar="LOSS",
                   help="with --optimize speed: also try lossy forms fitted on --train and keep the fastest whose "
                        "loss on --valid (AUC drop, relative RMSE rise) is at most LOSS; needs --label")
    g.add_argument("--agreement", type=float, metavar="SHARE",
                   help="with --tolerance (binary classifiers): the share of --valid rows whose decision must stay "
                        "the model's (default 1: every one; e.g. 0.999)")


def _data(args: argparse.Namespace, forest: Any) -> dict[str, Any] | None:
    from lumber.runtime.data import read_rows

    out: dict[str, Any] = {}
    for key, path in (("train", args.train), ("valid", args.valid)):
        if path is None:
            continue
        frame, X = read_rows(path, forest, label=args.label)
        y = frame[args.label].to_numpy() if args.label is not None else None
        out[key] = (X, y)
    return out or None


def _max_depth(text: str | None) -> int | str | None:
    from lumber.ir import CompileError

    if text is None or text == "auto":
        return text
    try:
        return int(text)
    except ValueError:
        raise CompileError(f"--max-depth must be a number or 'auto', got {text!r}") from None


FLAGS: dict[str, str] = {
    "prefix": "--prefix", "unroll": "--unroll", "march_native": "--march-native", "openmp": "--no-openmp",
    "cc": "--cc", "opset": "--opset", "input_dtype": "--input-dtype", "exact": "--inexact",
    "max_depth": "--max-depth", "strategy": "--strategy", "time_passes": "--time-passes", "name": "-o"}
"""Options field -> the flag that sets it (the one place ``lumber compile`` maps flags onto options)."""


def target_options(args: argparse.Namespace, emit: str, name: str) -> Any:
    """The options dataclass of ``emit`` (``"fastest"``: ``lumber.FastestOptions``) from the flags given.

    A flag the target has no option for is an error naming both (``--emit onnx --march-native``).
    """
    from lumber.compiler.targets import get_target
    from lumber.compiler.targets.base import field_names
    from lumber.compiler.targets.c import FastestOptions
    from lumber.ir import CompileError

    given: dict[str, Any] = {"prefix": args.prefix, "unroll": args.unroll or None,
                             "march_native": args.march_native or None, "openmp": False if args.no_openmp else None,
                             "cc": args.cc, "opset": args.opset, "input_dtype": args.input_dtype,
                             "exact": False if args.inexact else None, "max_depth": _max_depth(args.max_depth),
                             "strategy": args.strategy}
    given = {k: v for k, v in given.items() if v is not None}
    cls = FastestOptions if emit == "fastest" else get_target(emit).Options
    names = set(field_names(cls).split(", "))
    if "name" in names:
        given["name"] = name
    if args.time_passes and "time_passes" in names:  # otherwise it times the --passes pipeline only
        given["time_passes"] = True
    foreign = [FLAGS[k] for k in given if k not in names]
    if foreign:
        what = "--optimize speed" if emit == "fastest" else f"--emit {emit}"
        raise CompileError(f"{', '.join(sorted(foreign))} do{'es' if len(foreign) == 1 else ''} not apply to {what}",
                           "drop it, or pick the artifact it configures (--emit c, onnx, table, table-c)")
    return cls(**given)


def run(args: argparse.Namespace) -> int:
    from lumber.compiler.api.compile import compile as compile_model
    from lumber.compiler.api.compile import compile_fastest, compile_within
    from lumber.passes.deploy import deployable
    from lumber.compiler.frontends import load_any
    from lumber.compiler.speed import describe_choice
    from lumber.compiler.targets import get_target
    from lumber.ir import CompileError, ObliviousEnsemble
    from lumber.ir.cascade import Cascade

    emit = args.emit or (IR_FILE if args.passes else "c")
    output = Path(args.output) if args.output else Path(Path(args.model).stem + suffixes()[emit])
    t0 = time.perf_counter()
    ir: Any = load_any(args.model)  # a .lumber file keeps its IR: a pruned Polynomial compiles as itself
    if args.passes:
        from lumber.compiler.api.pipeline import run as run_pipeline

        ir = run_pipeline(ir, args.passes, data=_data(args, ir), time_passes=args.time_passes)
    elif args.time_passes and emit not in TABLE_TARGETS:
        raise CompileError("--time-passes needs --passes (or --emit table)")
    if isinstance(ir, Cascade):  # tables and forest link into one C library; a cascade has no .lumber form
        if emit != "c" or args.optimize is not None or args.tolerance is not None:
            raise CompileError("a pipeline ending in 'cascade' compiles to a C library", "use --emit c")
        pred = compile_model(ir, target="c", path=output, options=target_options(args, "c", output.stem))
        print(f"wrote {output} (C shared library, cascade: {ir.tables.n_trees - 1} fitted tables before "
              f"{ir.forest.n_trees} trees, fingerprint {pred.fingerprint[:16]}) in {time.perf_counter() - t0:.2f} s")
        return 0
    if emit == IR_FILE:
        ir.save(output)
        print(f"wrote {output} ({type(ir).__name__} IR)")
        return 0
    ir = deployable(ir)  # a Polynomial becomes its exact oblivious tables
    tables = emit in TABLE_TARGETS or args.optimize is not None or (isinstance(ir, ObliviousEnsemble) and emit == "c")
    if args.optimize is not None and emit != "c":
        raise CompileError(f"--optimize speed chooses among C shared libraries, not --emit {emit}",
                           "use --emit c")
    # ONNX, numpy and C source take oblivious tables as their exact Forest (lumber.compile lowers them)
    if not isinstance(get_target(emit).lower(ir), get_target(emit).accepts):
        if tables:
            raise CompileError(f"--emit {emit} needs a Forest or an ObliviousEnsemble; the pipeline produced a "
                               f"{type(ir).__name__}", "end the pipeline with 'oblivious' (and 'quantize')")
        raise CompileError(f"--emit {emit} needs a Forest; the pipeline produced a {type(ir).__name__}",
                           "use --emit lumber to save it, or a pipeline that ends in a Forest")
    sample = None
    # --optimize speed times the forms on the user's rows: --sample, else the --train rows
    timing_rows = args.sample or (args.train if args.optimize is not None and args.tolerance is None else None)
    if timing_rows:
        from lumber.runtime.data import read_rows

        _, sample = read_rows(timing_rows, ir)
    options = target_options(args, "fastest" if args.optimize is not None else emit, output.stem)
    if args.tolerance is not None:
        if args.passes:
            raise CompileError("--tolerance compiles from the model; it cannot follow --passes")
        if args.train is None or args.valid is None:
            raise CompileError("--tolerance needs --train (rows the lossy form is fitted on) and --valid (rows its "
                               "loss is checked on)", "pass --train CSV --valid CSV --label COLUMN")
        if args.label is None:
            from lumber.runtime.data import read_frame
            from lumber.ir.binding import label_notes

            raise CompileError("--tolerance needs --label: the loss is measured against the label column",
                               *label_notes(None, read_frame(args.train).columns, ir.schema.feature_names))
        if args.optimize is None:
            raise CompileError("--tolerance applies with --optimize speed (the fastest form within the tolerance)",
                               "add --optimize speed")
        if args.sample:
            raise CompileError("--tolerance times the forms on --valid; --sample does not apply")
        data = _data(args, ir)
        assert data is not None  # --train and --valid are given
        pred = compile_within(ir, args.tolerance, data, path=output, options=options,
                              **({} if args.agreement is None else {"agreement": args.agreement}))
    elif args.agreement is not None:
        raise CompileError("--agreement applies with --tolerance (the lossy forms' decision agreement)")
    elif args.optimize is not None:
        pred = compile_fastest(ir, sample=sample, path=output, options=options)
        if "timed_on" in pred.report:  # the report names the file the rows came from
            pred.report["timed_on"]["source"] = f"{timing_rows} ({'--sample' if args.sample else '--train'})"
    else:
        pred = compile_model(ir, target=emit, path=output, sample=sample, options=options)
    took = f"in {time.perf_counter() - t0:.2f} s"
    if emit == "table":
        st = pred.report["tables"]
        print(f"wrote {output} (oblivious tables: {st['method']}, {st['trees_in']} -> {st['trees_out']} trees, "
              f"max depth {st['max_depth']}, {st['table_bytes'] / 1024:,.1f} KiB of tables, fingerprint "
              f"{pred.fingerprint[:16]}) {took}")
    elif tables:
        form = pred.report.get("chosen", "oblivious")
        print(f"wrote {output} (C shared library, {form} form, fingerprint {pred.fingerprint[:16]}) {took}")
        if "tolerance" in pred.report:
            from lumber.compiler.tolerance import describe_tolerance

            print(describe_tolerance(pred.report))
        elif "forms" in pred.report:
            print(describe_choice(pred.report))
    else:
        extra = f", header {output.with_suffix('.h')}" if emit == "c-source" else ""
        print(f"wrote {output} ({get_target(emit).what}, {ir.n_trees} trees, fingerprint {pred.fingerprint[:16]}"
              f"{extra}) {took}", file=sys.stdout)
    return 0
