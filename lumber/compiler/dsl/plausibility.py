"""Plausibility methods the language knows, with a validator for each parameter.

A validator returns None for an accepted value, else what would be accepted
(it goes into the error message). Analyses read the parameters from
``Constraints.plausibility.params``.
"""

from __future__ import annotations

from typing import Any, Callable


def _int_at_least(lo: int) -> Callable[[Any], str | None]:
    def check(v: Any) -> str | None:
        ok = isinstance(v, int) and not isinstance(v, bool) and v >= lo
        return None if ok else f"an integer >= {lo}"
    return check


def _in_range(lo: float, hi: float, lo_open: bool = True) -> Callable[[Any], str | None]:
    def check(v: Any) -> str | None:
        ok = isinstance(v, (int, float)) and not isinstance(v, bool) and (v > lo if lo_open else v >= lo) and v <= hi
        return None if ok else f"a number in {'(' if lo_open else '['}{lo:g}, {hi:g}]"
    return check


def _samples(v: Any) -> str | None:
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        return "an integer >= 1 or a fraction in (0, 1]"
    if isinstance(v, int):
        return None if v >= 1 else "an integer >= 1 or a fraction in (0, 1]"
    return None if 0 < v <= 1 else "an integer >= 1 or a fraction in (0, 1]"


PLAUSIBILITY: dict[str, dict[str, Callable[[Any], str | None]]] = {
    "isolation-forest": {
        "contamination": _in_range(0.0, 0.5),
        "n_estimators": _int_at_least(1),
        "max_samples": _samples,
        "random_state": _int_at_least(0),
    },
}
"""Known plausibility methods and their parameters (each with a validator returning what is expected)."""
