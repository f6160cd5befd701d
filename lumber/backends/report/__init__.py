"""The report backend: a report document (plain JSON) -> HTML, Markdown and JSON files.

Rendering is a pure function of the document: the same document gives the
same bytes in every format. :mod:`blocks` is the content model, :mod:`layout`
decides what each section says, :mod:`html` and :mod:`markdown` draw it,
:mod:`svg` draws the charts. The document itself is assembled by
``lumber.compiler.build.document`` from the analyses' results.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Sequence

from lumber.ir import CompileError, atomic_write_bytes

from .html import render_html
from .markdown import render_markdown

FORMATS = {"html": "report.html", "md": "report.md", "json": "report.json"}


def render_json(doc: dict[str, Any]) -> str:
    """Canonical JSON: sorted keys, two-space indent, a final newline."""
    return json.dumps(doc, indent=2, sort_keys=True, ensure_ascii=False, allow_nan=False) + "\n"


def render(doc: dict[str, Any], fmt: str) -> str:
    """The report in ``fmt`` (``html``, ``md`` or ``json``)."""
    if fmt == "html":
        return render_html(doc)
    if fmt == "md":
        return render_markdown(doc)
    if fmt == "json":
        return render_json(doc)
    raise CompileError(f"unknown report format {fmt!r}", f"formats: {', '.join(FORMATS)}")


def write_report(doc: dict[str, Any], folder: str | Path, formats: Sequence[str] = tuple(FORMATS)) -> list[Path]:
    """Write ``report.<ext>`` for each format into ``folder`` (each file atomically); returns the paths."""
    out = []
    for fmt in formats:
        p = Path(folder) / FORMATS[fmt]
        atomic_write_bytes(p, render(doc, fmt).encode("utf-8"))
        out.append(p)
    return out


__all__ = ["FORMATS", "render", "render_html", "render_json", "render_markdown", "write_report"]
