"""``lumber explain MODEL DATA.csv --sensitive``: per case the prediction, the trace length,
the sensitive tests (most sensitive first) and the distance to the decision surface.

``--scale std|minmax`` scales features with statistics from ``--train`` (or, when
it is absent, from every row of DATA, as the output records); those rows also give
each feature's domain (whole numbers stay whole, observed bounds); ``--norm`` picks
l1/l2/linf; ``--time-limit`` bounds each case's search; ``--jobs`` runs cases in worker processes;
``--constraints FILE`` freezes features and directions and sets costs;
``--target`` asks for a given class (or ``lo:hi`` for a regressor).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from lumber.compiler.api.sensitive import SensitiveOptions, sensitive_tests
from lumber.compiler.cli.explainers import parse_target
from lumber.ir import InputDataError, Schema
from lumber.ir.decision import class_index, class_labels
from lumber.ir.display import readable
from lumber.passes.analyses.sensitive_results import CaseSensitivity, SensitiveResult


def explain(ctx: Any) -> tuple[dict[str, Any], str]:
    args = ctx.args
    scale = args.scale  # None for --scale none (_options.scale_of)
    # rows give the domains (whole numbers, bounds) even unscaled: --train, else every row of DATA, as for
    # --counterfactual (without any, a whole-dollar CapitalGain printed "0 -> 1.0001e-35")
    reference, ref_name = (ctx.train_X, "train") if ctx.train_X is not None else (ctx.X, "data")
    if args.norm == "l0":
        raise InputDataError("--norm l0 is not supported by sensitive tests", "use l1, l2 or linf")
    target = parse_target(args.target, ctx.forest.schema.task)
    options = SensitiveOptions(norm=args.norm or "l2", scale=scale, time_limit=args.time_limit)
    result = sensitive_tests(ctx.request, ctx.frame.iloc[ctx.rows], target=target, reference=reference,
                             options=options, n_jobs=args.jobs)
    result.rows = np.asarray(ctx.rows)
    js = result.to_json()
    js["reference"] = ref_name
    return js, format_text(result, ref_name, ctx.forest.schema)


def format_text(result: SensitiveResult, reference: str | None, schema: Schema | None = None) -> str:
    m = result.metric
    head = (f"sensitive tests ({result.method}{'' if result.exact else ', upper bound'}; norm "
            f"{m.norm.name.lower()}, scale {'none' if m.scale is None else m.scale.name.lower()}"
            + (f" from {reference} rows" if reference and m.scale is not None else "") + ")")
    return "\n".join([head] + [_case_text(c, schema) for c in result])


def _decision(label: Any, schema: Schema | None) -> str:
    """A class label as people read it: its name when the schema names the classes."""
    if schema is not None and schema.class_names is not None:
        try:
            return schema.class_text(class_index(class_labels(schema), label))
        except InputDataError:
            pass
    return str(label)


def _case_text(c: CaseSensitivity, schema: Schema | None = None) -> str:
    lines = [f"row {c.row}: predicted {_decision(c.prediction, schema)}, trace {c.trace} tests"]
    if not c.reachable or c.point is None:
        lines[0] += f"; {c.message}"
        return "\n".join(lines)
    if c.distance == 0:
        lines[0] += f"; {c.message or 'already at the target'}"
        return "\n".join(lines)
    lines[0] += (f", distance {readable(c.distance)} to {_decision(c.target, schema)}"
                 f"{'' if c.exact else ' (upper bound)'}")
    if not c.verified:
        lines[0] += " [NOT VERIFIED]"
    for t in c.tests:
        lines.append(f"    {t}")
    for label, ch in c.per_class.items():
        if ch.label == c.target:
            continue
        lines.append(f"  to {_decision(label, schema)}: " + (f"distance {readable(ch.distance)}, " + "; ".join(
            f"{t.feature} {t.op} {'' if t.threshold is None else t.texts()[0]}".strip() for t in ch.tests)
            if ch.reachable else "unreachable"))
    return "\n".join(lines)


__all__ = ["explain", "format_text"]
