"""``lumber explain MODEL DATA.csv --counterfactual``: per case the cheapest change that reaches the target.

``--constraints FILE`` sets actionability (immutable features, directions, bounds,
allowed values, relations, implications, change limits), costs, norm, scale,
plausibility and target; ``--norm`` / ``--scale`` / ``--target`` are the defaults a
constraint file overrides. Scaling statistics, the warm start and plausibility
use ``--train`` rows (or, when it is absent, every row of DATA, as the output
records). ``--time-limit`` bounds each MILP; ``--jobs`` solves cases in parallel.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from lumber.compiler.api.counterfactual import counterfactual
from lumber.compiler.cli.explainers import parse_target
from lumber.runtime.progress import Progress, enabled
from lumber.ir import InputDataError
from lumber.passes.analyses.counterfactual import CounterfactualOptions, CounterfactualResult


def explain(ctx: Any) -> tuple[dict[str, Any], str]:
    args = ctx.args
    forest = _typed(ctx.forest, args.data)
    scale = args.scale  # None for --scale none (_options.scale_of)
    reference, ref_name = (ctx.train_X, "train") if ctx.train_X is not None else (ctx.X, "data")
    target = parse_target(args.target, forest.schema.task)
    X = ctx.X[np.asarray(ctx.rows, dtype=np.int64)]
    with Progress(len(X), 0, enabled(args.quiet) and len(X) > 1, "counterfactual") as bar:
        opts = CounterfactualOptions(norm=args.norm or "l1", scale=scale, time_limit=args.time_limit,
                                     seed=args.seed)
        results = counterfactual(ctx.request.with_(forest=forest), X, target=target, reference=reference,
                                 options=opts, n_jobs=args.jobs, progress=bar.update)
    results = results if isinstance(results, list) else [results]
    cases = []
    for row, r in zip(ctx.rows, results):
        d = r.to_dict()
        d["row"] = int(row)
        d["verified_by"] = "lumber IR (exact to the source library)"
        cases.append(d)
    counts: dict[str, int] = {}
    for r in results:
        counts[r.status] = counts.get(r.status, 0) + 1
    js = {"norm": results[0].norm if results else (args.norm or "l1"), "scale": scale or "none",
          "reference": ref_name, "time_limit": args.time_limit, "status_counts": counts, "cases": cases}
    return js, format_text(ctx.rows, results, ref_name, ctx.forest.schema)


def _typed(forest: Any, data: str) -> Any:
    """Feature kinds from a typed CSV (second header row of type codes) where the model records none."""
    from lumber.datasets import read_typed_csv

    try:
        table = read_typed_csv(data)
    except InputDataError:
        return forest
    if not any(f.kind.name != "NUMERICAL" for f in table.features):
        return forest
    from lumber.compiler.dsl import refine_schema

    return forest.replace(schema=refine_schema(forest.schema, table.features))


def format_text(rows: Any, results: list[CounterfactualResult], reference: str, schema: Any = None) -> str:
    if not results:
        return "counterfactuals: no rows selected"
    r0 = results[0]
    head = f"counterfactuals (norm {r0.norm}, target {r0.target}; statistics from {reference} rows)"
    lines = [head]
    for row, r in zip(rows, results):
        lines.append(f"row {int(row)}: " + r.summary(schema).replace("\n", "\n    "))
    return "\n".join(lines)


__all__ = ["explain", "format_text"]
