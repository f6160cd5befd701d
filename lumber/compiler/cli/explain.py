"""``lumber explain MODEL DATA.csv --sensitive|--counterfactual|--rules|--contributions|--attribution``.

Each analysis is a module in ``lumber.compiler.cli.explainers`` exposing
``explain(ctx) -> (json_result, text)``; this command parses the shared
options, loads the model and the rows once, and writes one JSON document.
"""

from __future__ import annotations

import argparse
import importlib
import json
import re
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt
import pandas as pd

from lumber.compiler.cli.explainers import parse_target
from lumber.runtime.data import case_ids, read_frame
from lumber.compiler.explain import ExplanationRequest
from lumber.compiler.explain.request import with_decision_rule
from lumber.compiler.explain.source import source_predictor
from lumber.ir import Constraints, Cutoff, Forest, InputDataError, Target, Task

from . import _options

parse_rows = _options.parse_rows  # the one --rows grammar (kept importable from here)

NAME = "explain"
HELP = ("explain predictions: sensitive tests, optimal counterfactuals, counterfactual rules, per-row "
        "contributions, global attribution")
OUTPUTS = {"output": "file"}
"""Output options checked before any work (lumber.ir.atomic: the folder of a file must exist)."""

ANALYSES = ("sensitive", "counterfactual", "rules", "contributions", "attribution")
ANALYSIS_HELP = {
    "sensitive": "sensitive tests: the nearest change of the decision, verified on the model",
    "counterfactual": "optimal counterfactuals: the cheapest actionable change to the target (MILP, HiGHS)",
    "rules": "counterfactual rules: IF-THEN regions that reach the target (needs --train)",
    "contributions": "per-row contributions: each feature's exact share (Shapley value) of each row's margin, "
                     "against --background rows of --train, else from the model's node covers",
    "attribution": "global attribution (MonoForest nu(k)) over all selected rows together: no per-row reasons "
                   "(use --contributions for those)",
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
    _options.add_reasons(p)
    p.add_argument("--background", type=_options.positive_int, default=100,
                   help="contributions: --train rows sampled (by --seed) as the reference (default 100)")
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
    ids: list[str] | None = None
    """``--id``: each row's ID (all rows of DATA), or None."""

    @property
    def forest(self) -> Forest:
        return self.request.forest

    @property
    def constraints(self) -> Constraints | None:
        return self.request.constraints


def run(args: argparse.Namespace) -> int:
    from lumber.runtime.data import read_rows
    from lumber.compiler.explain import explanation_request
    from lumber.ir import atomic_write_text

    chosen = [a for a in ANALYSES if getattr(args, a)]
    if not chosen:
        raise InputDataError("no analysis chosen",
                             "add --sensitive, --counterfactual, --rules, --contributions or --attribution")
    args.scale = _options.scale_of(args)
    cutoff = _options.cutoff_of(args)
    _refuse_compiled(args.model)
    request = with_threshold(explanation_request(args.model, constraints=args.constraints or None), cutoff,
                             args.target)
    forest = request.forest
    ignore = [args.id] if args.id else []
    frame, X = read_rows(args.data, forest, header=not args.no_header, features_only=True, ignore=ignore)
    ids = case_ids(read_frame(args.data, header=not args.no_header), args.id, args.data) if args.id else None
    train_X = read_rows(args.train, forest, header=not args.no_header, ignore=ignore)[1] if args.train else None
    ctx = ExplainContext(args, request, frame, X, _options.parse_rows(args.rows, len(X)), train_X, ids)
    result: dict[str, Any] = {"model": str(args.model), "data": str(args.data),
                              "rows": ctx.rows.tolist(), "analyses": {}}
    if ids is not None:
        result["ids"] = [ids[int(r)] for r in ctx.rows]
    if forest.schema.cutoff is not None:
        result["decision_rule"] = forest.schema.cutoff.to_dict()
    texts = []
    for name in chosen:
        mod = importlib.import_module(f"lumber.compiler.cli.explainers.{name}")
        js, text = mod.explain(ctx)
        result["analyses"][name] = js
        texts.append(_with_ids(text, ids))
    if ids is not None:
        for js in result["analyses"].values():
            for entry in js.get("cases", []) + js.get("rows", []):
                if isinstance(entry, dict) and isinstance(entry.get("row"), int):
                    entry["id"] = ids[entry["row"]]
    if "contributions" in result["analyses"] and "counterfactual" in result["analyses"]:
        add_reversals(result["analyses"]["contributions"].get("reasons"), result["analyses"]["counterfactual"])
    doc = json.dumps(result, indent=2, sort_keys=True, default=_jsonable)
    if args.output:
        atomic_write_text(args.output, doc + "\n")
    if not args.quiet:
        print("\n\n".join(t for t in texts if t))
    elif not args.output:
        print(doc)
    return 0


def with_threshold(request: ExplanationRequest, cutoff: Cutoff | None, target: str | None) -> ExplanationRequest:
    """The request deciding by ``--threshold``: its forest and source predictor follow the cutoff, and
    ``--target`` (or the constraint file's class) is the class sought under it. A constraint file's own
    threshold target must agree."""
    if cutoff is None:
        return request
    stated = request.target
    if isinstance(stated, Target) and stated.cutoff is not None:
        if stated.cutoff != cutoff:
            raise InputDataError(f"--threshold {cutoff.value:g} contradicts the constraint file's target "
                                 f"({stated.describe()})", "give the threshold in one place")
        return request
    if isinstance(stated, Target):
        label = stated.interval if stated.interval is not None else stated.label
    else:
        label = stated if stated is not None else parse_target(target, request.forest.schema.task)
    if request.forest.schema.task != Task.BINARY:
        raise InputDataError(f"--threshold needs a binary classifier; this model's task is "
                             f"{request.forest.schema.task.name.lower()}", "leave --threshold out")
    wanted = Target(label=label, cutoff=cutoff)
    forest = with_decision_rule(request.forest, wanted)
    return request.with_(target=wanted, forest=forest,
                         predictor=None if request.predictor is None else source_predictor(request.model, forest))


def _with_ids(text: str, ids: list[str] | None) -> str:
    """``row N:`` lines of an explainer's text with the row's ID."""
    if ids is None or not text:
        return text
    return re.sub(r"^(\s*)row (\d+)( ?\(?[^:]*\)?)?:", lambda m: f"{m[1]}row {m[2]} [{ids[int(m[2])]}]:", text,
                  flags=re.M)


def add_reversals(reasons: dict[str, Any] | None, counterfactuals: dict[str, Any]) -> None:
    """Each case's reasons gain the change that reverses the decision, where its counterfactual is proven
    (optimal and verified on the source model)."""
    if not reasons:
        return
    by_row = {c["row"]: c for c in counterfactuals.get("cases", [])}
    for case in reasons["cases"]:
        cf = by_row.get(case["row"])
        if cf and cf.get("status") == "optimal" and cf.get("verified") and cf.get("changes"):
            case["reversal"] = [{k: c[k] for k in ("feature", "before_text", "after_text")} for c in cf["changes"]]


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
