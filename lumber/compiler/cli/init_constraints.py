"""``lumber init-constraints MODEL [--data TRAIN.csv] [-o FILE]``: a starter constraint file.

Every feature is listed in comments with its kind, categories, observed values
and split thresholds; no statement is active, so the file passes ``lumber check``
as written and the user decides what may change.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any


NAME = "init-constraints"
HELP = "write a starter constraint file describing every feature of a model"
OUTPUTS = {"output": "file"}
"""Output options checked before any work (lumber.ir.atomic: the folder of a file must exist)."""


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("model", nargs="?", help="model file whose features the starter file lists")
    p.add_argument("--example", metavar="NAME",
                   help="instead, write the example file shipped for a bundled data set: adult, compas or credit")
    p.add_argument("--data", help="training CSV: observed ranges and categories go into the comments")
    p.add_argument("-o", "--output", help="write here (default: standard output)")
    p.add_argument("--force", action="store_true", help="overwrite an existing output file")


def _follow_model(forest: Any, data: str) -> Any:
    """``forest`` with kinds and labels from the typed CSV where the model records none, except where the
    model splits a feature at numeric thresholds: the model's reading wins there, and a note on stderr says so."""
    import numpy as np

    from lumber.compiler.dsl import refine_schema
    from lumber.datasets import read_typed_csv
    from lumber.ir import FeatureKind

    numeric = {int(j) for j in forest.feature[~forest.is_leaf & ~forest.is_categorical]}
    names = forest.schema.feature_names
    model_kind = {f.name: f.kind for f in forest.schema.features}
    taken = []
    for d in read_typed_csv(data).features:
        j = names.index(d.name) if d.name in model_kind else -1
        if (j in numeric and d.kind in (FeatureKind.CATEGORICAL, FeatureKind.ORDINAL)
                and model_kind[d.name] not in (FeatureKind.CATEGORICAL, FeatureKind.ORDINAL)):
            how = "text labels" if d.categories and not isinstance(d.categories[0], (int, np.integer)) else \
                "a categorical type code"
            print(f"note: {data}: '{d.name}' has {how} but the model splits it at numeric thresholds; "
                  "it is described as the model reads it (numerical)", file=sys.stderr)
            continue
        taken.append(d)
    return forest.replace(schema=refine_schema(forest.schema, taken))


def run(args: argparse.Namespace) -> int:
    from lumber.runtime.data import read_frame
    from lumber.compiler.dsl.starter import starter_text
    from lumber.compiler.frontends import load
    from lumber.ir import InputDataError, OutputError, atomic_write_text

    if args.output and Path(args.output).exists() and not args.force:
        raise OutputError(f"{args.output}: already exists", "pass --force to overwrite it")
    if args.example:
        from lumber.datasets import example_constraints

        if args.model or args.data:
            raise InputDataError("--example writes a shipped file: it takes no MODEL or --data")
        text = example_constraints(args.example)
        if args.output:
            atomic_write_text(args.output, text)
        else:
            print(text, end="")
        return 0
    if not args.model:
        raise InputDataError("init-constraints needs MODEL (or --example NAME)",
                             "e.g. lumber init-constraints model.txt --data train.csv -o recourse.lum")
    forest = load(args.model)
    frame = read_frame(args.data) if args.data else None
    if args.data:
        forest = _follow_model(forest, args.data)
    domains = None
    if frame is not None:
        from lumber.runtime.data import read_rows
        from lumber.ir.domains import domains_for

        _, rows = read_rows(args.data, forest)  # columns bound by name and values checked, as every command does
        domains = domains_for(forest, None, rows)
    text = starter_text(forest, Path(args.model).name, frame, Path(args.data).name if args.data else None, domains)
    if args.output:
        atomic_write_text(args.output, text)
    else:
        print(text, end="")
    return 0
