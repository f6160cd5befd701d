"""``lumber explain MODEL DATA --attribution``: MonoForest nu(k) over the selected rows of DATA."""

from __future__ import annotations

from typing import Any

from lumber.passes.analyses.attribution import attribution
from lumber.passes.transforms.polynomial import forest_to_polynomial


def explain(ctx: Any) -> tuple[dict[str, Any], str]:
    """JSON (every feature's nu per output, top conditions) and a text ranking."""
    poly = forest_to_polynomial(ctx.forest)
    result = attribution(poly, ctx.X[ctx.rows])
    js = result.to_dict()
    js["polynomial"] = {k: v for k, v in poly.statistics().items() if k != "conditions_per_feature"}
    return js, result.format_text()


__all__ = ["explain"]
