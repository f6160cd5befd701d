"""The report's content as a flat list of blocks that both the HTML and the Markdown renderer draw.

Keeping content (what to say) apart from markup (how to draw it) means the
two formats can never disagree. Blocks are small frozen dataclasses; cells
are plain text, optionally with a CSS class (``pass``/``fail``/``warn``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Sequence, Union

from lumber.ir.display import readable


@dataclass(frozen=True)
class Heading:
    level: int
    text: str
    anchor: str = ""


@dataclass(frozen=True)
class Para:
    text: str
    cls: str = ""


@dataclass(frozen=True)
class Cell:
    text: str
    cls: str = ""


@dataclass(frozen=True)
class Table:
    headers: tuple[str, ...]
    rows: tuple[tuple[Cell, ...], ...]
    cls: str = ""
    caption: str = ""


@dataclass(frozen=True)
class Grid:
    """Short label/value pairs laid out in columns (a case's feature values, the model's facts)."""

    items: tuple[tuple[str, str], ...]
    cls: str = ""
    headers: tuple[str, str] = ("name", "value")
    """Column titles where the grid is drawn as a table (Markdown)."""


@dataclass(frozen=True)
class Pre:
    text: str


@dataclass(frozen=True)
class Figure:
    svg: str
    caption: str
    fallback: Table | None = None
    """What Markdown shows instead of the picture."""


@dataclass(frozen=True)
class Rule:
    """An IF-THEN statement, set apart."""

    condition: str
    conclusion: str
    note: str = ""


@dataclass(frozen=True)
class Open:
    """Start of a section (HTML ``<section id=...>``; nothing in Markdown)."""

    anchor: str
    cls: str = "section"


@dataclass(frozen=True)
class Close:
    pass


@dataclass(frozen=True)
class Toc:
    entries: tuple[tuple[str, str], ...] = field(default_factory=tuple)


@dataclass(frozen=True)
class Glossary:
    """Terms and what they mean (HTML: a ``<details>`` block; Markdown: a list)."""

    title: str
    items: tuple[tuple[str, str], ...]


Block = Union[Heading, Para, Table, Grid, Pre, Figure, Rule, Open, Close, Toc, Glossary]



def num(v: Any, digits: int = 4) -> str:
    """A number for people: integers plainly (grouped from 10,000 up), floats to ``digits`` significant
    digits in decimal notation (:func:`readable`), None as a dash."""
    if v is None:
        return "—"
    if isinstance(v, bool):
        return "yes" if v else "no"
    if isinstance(v, str):
        return {"inf": "∞", "-inf": "−∞"}.get(v, v)
    if isinstance(v, int):
        return f"{v:,}" if abs(v) >= 10000 else str(v)
    if isinstance(v, float):
        if math.isnan(v):
            return "missing"
        if math.isinf(v):
            return "∞" if v > 0 else "−∞"
        if v.is_integer() and abs(v) < 1e15:
            return num(int(v))
        return readable(v, digits)
    if isinstance(v, (list, tuple)):
        return "[" + ", ".join(num(x, digits) for x in v) + "]"
    return str(v)


def score(v: Any) -> str:
    """An isolation score for people: to 3 decimals as the rules' text prints it (a score of 2e-6 reads
    as 0 with its sign kept, since the sign is the verdict), None as a dash."""
    if not isinstance(v, (int, float)) or isinstance(v, bool) or not math.isfinite(v):
        return num(v)
    r = round(float(v), 3)
    if r == 0 and v != 0:
        return "+0.000" if v > 0 else "−0.000"
    return num(r, 3)


def count(v: Any) -> str:
    return f"{v:,}" if isinstance(v, int) and not isinstance(v, bool) else num(v)


def pct(v: Any) -> str:
    return "—" if v is None else f"{100 * float(v):.1f}%"


def cells(*values: Any) -> tuple[Cell, ...]:
    return tuple(v if isinstance(v, Cell) else Cell(v if isinstance(v, str) else num(v)) for v in values)


def table(headers: Sequence[str], rows: Sequence[Sequence[Any]], cls: str = "", caption: str = "") -> Table:
    return Table(tuple(headers), tuple(cells(*r) for r in rows), cls, caption)


def verdict(passed: Any) -> Cell:
    if passed is True:
        return Cell("pass", "pass")
    if passed is False:
        return Cell("FAIL", "fail")
    return Cell("n/a", "warn")


__all__ = ["Block", "Cell", "Close", "Figure", "Glossary", "Grid", "Heading", "readable", "Open", "Para", "Pre", "Rule", "Table", "Toc",
           "cells",
           "count", "num", "pct", "table", "verdict"]
