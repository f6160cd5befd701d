"""``lumber explain MODEL DATA.csv --sensitive|--counterfactual|--rules|--attribution``.

Each analysis is a module in ``lumber.compiler.cli.explainers`` exposing
``explain(ctx) -> (json_result, text)``; this command parses the shared
options, loads the model and the rows once, and writes one JSON document.
"""

from __future__ import annotations

import argparse
import importlib
import json
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt
import pandas as pd

from lumber.compiler.explain import ExplanationRequest
from lumber.ir import Constraints, Forest

from . import _options

parse_rows = _options.parse_rows  # the one --rows grammar (kept importable from here)

NAME = "explain"
HELP = "explain predictions: sensitive tests, optimal counterfactuals, counterfactual rules, attribution"
OUTPUTS = {"output": "file"}
"""Output options checked before any work (lumber.ir.atomic: the folder of a file must exist)."""

ANALYSES = ("sensitive", "counterfactual", "rules", "attribution")
ANALYSIS_HELP = {
    "sensitive": "sensitive tests: the nearest change of the decision, verified on the model",
    "counterfactual": "optimal counterfactuals: the cheapest actionable change to the target (MILP, HiGHS)",
    "rules": "counterfactual rules: IF-THEN regions that reach the target (needs --train)",
    "attribution": "MonoForest attribution: each feature's share of the margin",
}


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("model", help=_options.MODEL_HELP)
    p.add_argument("data", help="CSV of cases to explain (a header row names the features)")
    for a in ANALYSES:
        p.add_argument(f"--{a}", action="store_true", help=ANALYSIS_HELP[a])
    _options.add_explainer_options(p)
    _options.add_rows(p)
    _options.add_no_header(p)
    _options.add_rule_options(p)
    p.add_argument("-o", "--output", help="write the JSON result here")
    _options.add_quiet(p)


@dataclass
class ExplainContext:
    """What every explainer receives."""

    args: argparse.Namespace
    request: ExplanationRequest
    """The model and the constraint file, resolved once for every analysis."""
    frame: pd.DataFrame
    X: npt.NDArray[np.float64]
    rows: npt.NDArray[np.int64]
    train_X: npt.NDArray[np.float64] | None

    @property
    def forest(self) -> Forest:
        return self.request.forest

    @property
    def constraints(self) -> Constraints | None:
        return self.request.constraints


def run(args: argparse.Namespace) -> int:
    from lumber.compiler.data import read_rows
    from lumber.compiler.explain import explanation_request
    from lumber.ir import InputDataError, atomic_write_text

    chosen = [a for a in ANALYSES if getattr(args, a)]
    if not chosen:
        raise InputDataError("no analysis chosen", "add --sensitive, --counterfactual, --rules or --attribution")
    args.scale = _options.scale_of(args)
    _refuse_compiled(args.model)
    request = explanation_request(args.model, constraints=args.constraints or None)
    forest = request.forest
    frame, X = read_rows(args.data, forest, header=not args.no_header, features_only=True)
    train_X = read_rows(args.train, forest, header=not args.no_header)[1] if args.train else None
    ctx = ExplainContext(args, request, frame, X, _options.parse_rows(args.rows, len(X)), train_X)
    result: dict[str, Any] = {"model": str(args.model), "data": str(args.data),
                              "rows": ctx.rows.tolist(), "analyses": {}}
    texts = []
    for name in chosen:
        mod = importlib.import_module(f"lumber.compiler.cli.explainers.{name}")
        js, text = mod.explain(ctx)
        result["analyses"][name] = js
        texts.append(text)
    doc = json.dumps(result, indent=2, sort_keys=True, default=_jsonable)
    if args.output:
        atomic_write_text(args.output, doc + "\n")
    if not args.quiet:
        print("\n\n".join(t for t in texts if t))
    elif not args.output:
        print(doc)
    return 0


def _refuse_compiled(model: str) -> None:
    """A C library or table file evaluates the model but is not one (every analysis reads the trees and
    their thresholds): name what the file is and what to give instead, not "unrecognised format".
    ``.lumber`` IR files (Forest, Polynomial, ObliviousEnsemble) are models: they load as their exact Forest."""
    from pathlib import Path

    from lumber.compiler.frontends import read_model_bytes
    from lumber.compiler.targets.c import is_shared_library
    from lumber.ir import InputDataError

    p = Path(model)
    if not p.is_file():
        return
    head = read_model_bytes(p)[:8]
    kind = "a C shared library" if is_shared_library(head) else "oblivious decision tables" if head[:4] == b"LUMB" else None
    if kind is not None:
        raise InputDataError(f"{model}: a compiled artifact ({kind}), not a model: explanations read the model's trees",
                             "explain the model file it was compiled from (`lumber inspect` names its fingerprint) "
                             "or an IR file (`lumber compile MODEL --passes ... -o m.lumber`)")


def _jsonable(v: Any) -> Any:
    if isinstance(v, np.generic):
        return v.item()
    if isinstance(v, np.ndarray):
        return v.tolist()
    return str(v)
