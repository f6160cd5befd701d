"""``lumber explain MODEL DATA --contributions``: each feature's exact share of each selected row's margin.

Against a sample of ``--background`` rows of ``--train`` (interventional Shapley values: the base is
their mean margin), else path-dependent from the model's node covers (TreeSHAP). Per row the text
lists the largest contributions with the row's value; the JSON holds every exact value.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from lumber.ir import Task
from lumber.ir.decision import margin_decisions
from lumber.ir.display import Display, number_text
from lumber.ir.domains import domains_for
from lumber.passes.analyses.contributions import Contributions, contributions
from lumber.passes.analyses.reasons import principal_reasons, reasons_document

SHOWN = 8
"""Contributions listed per row in the text (the JSON has all)."""


def background(train_X: np.ndarray | None, n: int, seed: int) -> np.ndarray | None:
    """At most ``n`` rows of ``train_X``, sampled without replacement (all of them when fewer)."""
    if train_X is None:
        return None
    if train_X.shape[0] <= n:
        return train_X
    pick = np.sort(np.random.default_rng(seed).choice(train_X.shape[0], size=n, replace=False))
    return train_X[pick]


def explain(ctx: Any) -> tuple[dict[str, Any], str]:
    """Every exact value per row (JSON), the principal reasons of each row's decision (``--reasons``)
    and the largest contributions (text)."""
    args = ctx.args
    ref = background(ctx.train_X, args.background, args.seed)
    X = ctx.X[ctx.rows]
    result = contributions(ctx.forest, X, ref)
    js = result.to_dict()
    for r, row in zip(js["rows"], ctx.rows.tolist()):
        r["row"] = row
    js["reference"] = "train sample" if ref is not None else "node covers"
    shown = Display(ctx.forest, domains_for(ctx.forest, ctx.constraints,
                                            ctx.train_X if ctx.train_X is not None else ctx.X))
    text = format_text(result, X, ctx.rows, shown)
    schema = ctx.forest.schema
    if schema.task in (Task.BINARY, Task.MULTICLASS, Task.REGRESSION):
        decided = margin_decisions(schema, ctx.forest.evaluate(X))
        cases = principal_reasons(result, X, decided, schema, shown, args.reasons, ctx.rows.tolist(),
                                  None if ctx.ids is None else [ctx.ids[int(r)] for r in ctx.rows])
        js["reasons"] = reasons_document(cases, args.reasons)
        text = "\n".join([text, f"principal reasons (at most {args.reasons} per row: the features that pushed "
                                 "hardest toward the decision received)"] + [ln for c in cases for ln in c.lines()])
    return js, text


def format_text(result: Contributions, X: np.ndarray, rows: np.ndarray, shown: Display) -> str:
    how = (f"against {result.n_reference} reference rows" if result.method == "interventional"
           else "path-dependent, from the model's node covers")
    lines = [f"per-row contributions: exact Shapley values of the margin ({how}); "
             "base value + contributions = the row's margin"]
    for k, out in enumerate(result.output_names):
        prefix = f"output {out}: " if len(result.output_names) > 1 else ""
        base = result.output_base(k)
        for i, row in enumerate(rows.tolist()):
            m = result.margin[i] if result.margin.ndim == 1 else result.margin[i, k]
            lines.append(f"row {row}: {prefix}margin {m:.6g} = base {base:.6g} + contributions {m - base:+.6g}")
            ranked = [(f, v) for f, v in result.ranking(i, k) if v != 0.0][:SHOWN]
            width = max([len(f) for f, _ in ranked] + [7])
            for f, v in ranked:
                j = result.feature_names.index(f)
                lines.append(f"    {f:<{width}}  {v:<+12.6g}({f} = {shown.value(j, float(X[i, j]))})")
            rest = sum(1 for _, v in result.ranking(i, k) if v != 0.0) - len(ranked)
            if rest > 0:
                lines.append(f"    ... {rest} more in the JSON")
    return "\n".join(lines)


__all__ = ["background", "explain", "format_text", "number_text"]
