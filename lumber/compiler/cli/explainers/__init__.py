"""One module per analysis for `lumber explain`: each exposes explain(ctx) -> (json, text)."""

from __future__ import annotations

from typing import Any

from lumber.ir import InputDataError, Task


def parse_target(spec: str | None, task: Task) -> Any:
    """``--target``: a class label as given, or ``LO:HI`` (either side may be empty) for a regressor."""
    if spec is None or task != Task.REGRESSION:
        return spec
    try:
        lo, hi = spec.split(":", 1)
        return (float(lo) if lo.strip() else float("-inf"), float(hi) if hi.strip() else float("inf"))
    except ValueError:
        raise InputDataError(f"--target {spec!r} is not an interval", "for a regressor use --target LO:HI") from None
