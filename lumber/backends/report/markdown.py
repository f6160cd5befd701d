"""Blocks -> GitHub-flavoured Markdown (tables, fenced code; charts shown as their data tables)."""

from __future__ import annotations

import re
from typing import Any

from .blocks import Block, Cell, Close, Figure, Glossary, Grid, Heading, Open, Para, Pre, Rule, Table, Toc
from .layout import layout


def _text(text: str) -> str:
    """Prose and cells: a ``<`` that could open an HTML tag becomes ``&lt;`` (``<=`` stays readable)."""
    return re.sub(r"<(?=[A-Za-z/!?])", "&lt;", text)


def _cell(text: str) -> str:
    return _text(text).replace("\\", "\\\\").replace("|", "\\|").replace("\n", " ")


def _table(t: Table) -> str:
    lines = ["| " + " | ".join(_cell(h) for h in t.headers) + " |",
             "|" + "|".join("---" for _ in t.headers) + "|"]
    lines += ["| " + " | ".join(_cell(c.text) for c in row) + " |" for row in t.rows]
    if t.caption:
        lines.append("")
        lines.append(f"_{t.caption}_")
    return "\n".join(lines)


def _block(b: Block) -> str | None:
    if isinstance(b, Heading):
        return f"{'#' * b.level} {_text(b.text)}"
    if isinstance(b, Para):
        return _text(b.text)
    if isinstance(b, Table):
        return _table(b)
    if isinstance(b, Grid):
        return _table(Table(b.headers, tuple((Cell(k), Cell(v)) for k, v in b.items)))
    if isinstance(b, Pre):
        fence = "````" if "```" in b.text else "```"
        return f"{fence}\n{b.text}\n{fence}"
    if isinstance(b, Figure):
        body = f"**{_text(b.caption)}**"
        return body + ("\n\n" + _table(b.fallback) if b.fallback is not None else "")
    if isinstance(b, Rule):
        text = f"> **IF** {_text(b.condition)} **THEN** {_text(b.conclusion)}"
        return text + (f"  \n> _{_text(b.note)}_" if b.note else "")
    if isinstance(b, Glossary):
        return f"**{_text(b.title)}**\n\n" + "\n".join(f"- **{_text(t)}**: {_text(d)}" for t, d in b.items)
    if isinstance(b, Toc):
        return " · ".join(f"[{t}](#{t.lower().replace(' ', '-')})" for _, t in b.entries)
    if isinstance(b, (Open, Close)):
        return None
    raise TypeError(f"unknown block {type(b).__name__}")  # pragma: no cover


def render_markdown(doc: dict[str, Any]) -> str:
    """The report as Markdown text."""
    parts = [p for p in (_block(b) for b in layout(doc)) if p is not None]
    return "\n\n".join(parts) + "\n"


__all__ = ["render_markdown"]
