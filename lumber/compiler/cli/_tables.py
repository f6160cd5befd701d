"""``lumber compile`` for oblivious tables: ``--emit table``, ``--optimize speed``, ObliviousEnsemble IR.

Kept apart from ``compile.py`` (which calls it) so the forest paths stay as they are.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any


def add_arguments(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("oblivious tables")
    g.add_argument("--optimize", choices=["speed"],
                   help="with --emit c: build the forest and the oblivious-table forms, time both on a sample, "
                        "keep the faster and print both")
    g.add_argument("--max-depth", default="auto", metavar="N",
                   help="deepest table when re-composing a forest into oblivious trees "
                        "(default: auto, 8 or the polynomial's largest degree)")
    g.add_argument("--sample", metavar="CSV", help="rows to time the forms on (default: rows spread over the splits)")


def wants_tables(args: argparse.Namespace, emit: str, ir: Any) -> bool:
    from lumber.ir import ObliviousEnsemble

    return emit == "table" or getattr(args, "optimize", None) is not None or isinstance(ir, ObliviousEnsemble)


def run(args: argparse.Namespace, ir: Any, emit: str, output: Path, t0: float) -> int:
    from lumber.compiler.api.compile import compile as compile_model
    from lumber.compiler.api.oblivious import compile_table, describe_choice
    from lumber.ir import CompileError, Forest, ObliviousEnsemble

    if emit not in ("c", "table"):
        raise CompileError(f"--emit {emit} cannot hold oblivious tables",
                           "use --emit c (a shared library) or --emit table")
    if not isinstance(ir, (Forest, ObliviousEnsemble)):
        raise CompileError(f"--emit {emit} needs a Forest or an ObliviousEnsemble; the pipeline produced a "
                           f"{type(ir).__name__}", "end the pipeline with 'oblivious' (and 'quantize')")
    max_depth: int | str = args.max_depth
    if max_depth != "auto":
        try:
            max_depth = int(max_depth)
        except ValueError:
            raise CompileError(f"--max-depth must be a number or 'auto', got {max_depth!r}") from None
    sample = None
    if getattr(args, "sample", None):
        from lumber.compiler.data import read_rows

        _, sample = read_rows(args.sample, ir if isinstance(ir, Forest) else ir.to_forest())
    if emit == "table":
        pred: Any = compile_table(ir, path=output, max_depth=max_depth, time_passes=args.time_passes,
                                  exact=not args.inexact)
        st = pred.report["tables"]
        print(f"wrote {output} (oblivious tables: {st['method']}, {st['trees_in']} -> {st['trees_out']} trees, "
              f"max depth {st['max_depth']}, {st['table_bytes'] / 1024:,.1f} KiB of tables, fingerprint "
              f"{pred.fingerprint[:16]}) in {time.perf_counter() - t0:.2f} s")
        return 0
    pred = compile_model(ir, target="c", path=output, prefix=args.prefix, march_native=args.march_native,
                         openmp=False if args.no_openmp else None, cc=args.cc, name=output.stem,
                         optimize=args.optimize, max_depth=max_depth, sample=sample, exact=not args.inexact)
    report = getattr(pred, "report", None)
    form = report["chosen"] if report else "oblivious"
    print(f"wrote {output} (C shared library, {form} form, fingerprint {pred.fingerprint[:16]}) "
          f"in {time.perf_counter() - t0:.2f} s", file=sys.stdout)
    if report:
        print(describe_choice(report))
    return 0
