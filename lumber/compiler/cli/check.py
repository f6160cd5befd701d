"""``lumber check FILE --model MODEL``: compile a constraint file against a model's schema.

``--data TRAIN.csv`` supplies feature kinds and category labels that the
model does not record (scikit-learn models see only numbers). Exit codes: 0 when the file is valid (warnings may be printed), 1 when it has
errors (all of them are printed, compiler-style), 2 when the model or the file
cannot be read at all.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

NAME = "check"
HELP = "check a constraint file (.lum) against a model's features"


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("file", help="constraint file")
    p.add_argument("--model", "-m", required=True, help="model file whose features the constraints refer to")
    p.add_argument("--data", metavar="TRAIN.csv",
                   help="CSV (optionally with a row of type codes) giving feature kinds and category labels "
                        "the model does not record, e.g. for scikit-learn models")
    p.add_argument("--json", action="store_true", help="print the compiled constraints as JSON on stdout")
    p.add_argument("--quiet", "-q", action="store_true", help="print nothing when the file is valid")


def run(args: argparse.Namespace) -> int:
    from lumber.compiler.dsl import check_constraints
    from lumber.compiler.frontends import load
    from lumber.ir import InputDataError

    path = Path(args.file)
    if not path.is_file():
        raise InputDataError(f"{args.file}: no such file" if not path.exists() else f"{args.file}: not a file")
    forest = load(args.model)
    schema = forest.schema
    if args.data:
        from lumber.compiler.dsl import refine_schema
        from lumber.datasets import read_typed_csv

        schema = refine_schema(schema, read_typed_csv(args.data).features)
    result = check_constraints(path, schema)
    for w in result.warnings:
        print(w.render(), file=sys.stderr)
    if args.json:
        print(json.dumps(result.constraints.to_dict(), indent=2, sort_keys=True, default=str))
    elif not args.quiet:
        n = result.statements
        extra = []
        if len(result.files) > 1:
            extra.append(f"{len(result.files)} files")
        if result.warnings:
            extra.append(f"{len(result.warnings)} warning{'s' if len(result.warnings) != 1 else ''}")
        tail = f" ({', '.join(extra)})" if extra else ""
        print(f"ok: {n} statement{'s' if n != 1 else ''}{tail}")
    return 0
