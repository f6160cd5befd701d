"""Small inline SVG charts: horizontal bar charts with signed values, no plotting library.

The output is deterministic text (coordinates rounded to 0.1 px) embedded in
the HTML report as an ``<svg>`` element, so the report needs no network, no
scripts and no image files. Every bar carries a ``<title>`` (the exact value
as a tooltip) and the chart a ``role="img"`` with an ``aria-label``.
"""

from __future__ import annotations

from html import escape
from typing import Sequence

from .blocks import readable

POS = "#2f6db5"
NEG = "#c8553d"
AXIS = "#555"
FONT = "font-family:system-ui,-apple-system,'Segoe UI',Roboto,Arial,sans-serif"


def _n(v: float) -> str:
    """A coordinate: at most one decimal, no trailing zeros, never ``-0``."""
    s = f"{v:.1f}".rstrip("0").rstrip(".")
    return "0" if s in ("-0", "") else s


def _value(v: float) -> str:
    """A bar's label: four significant digits in decimals (never scientific notation), signed."""
    return ("+" if v > 0 else "") + readable(v) if v else "0"


def bar_chart(labels: Sequence[str], values: Sequence[float], *, title: str, width: int = 640,
              bar_height: int = 18, gap: int = 6, label_width: int | None = None, unit: str = "",
              chart_id: str = "") -> str:
    """Horizontal bars for signed ``values`` (zero axis in the middle when both signs occur)."""
    n = len(values)
    label_w = label_width if label_width is not None else min(240, max(60, 7 * max((len(s) for s in labels),
                                                                                   default=4) + 12))
    value_w = 70
    top, bottom = 28, 10
    height = top + n * (bar_height + gap) + bottom
    plot_w = max(40, width - label_w - value_w - 10)
    lo = min([0.0] + [float(v) for v in values])
    hi = max([0.0] + [float(v) for v in values])
    span = (hi - lo) or 1.0

    def x(v: float) -> float:
        return label_w + (v - lo) / span * plot_w

    parts = [f'<svg class="chart" width="{width}" height="{height}" viewBox="0 0 {width} {height}" role="img" '
             f'aria-label="{escape(title)}"' + (f' id="{escape(chart_id)}"' if chart_id else "") + ">",
             f'<text x="0" y="16" style="{FONT};font-size:13px;font-weight:600" fill="#222">{escape(title)}</text>']
    x0 = x(0.0)
    for i, (lab, v) in enumerate(zip(labels, values)):
        v = float(v)
        y = top + i * (bar_height + gap)
        a, b = sorted((x0, x(v)))
        w = max(b - a, 0.5 if v else 0.0)
        fill = POS if v >= 0 else NEG
        parts.append(f'<text x="{_n(label_w - 6)}" y="{_n(y + bar_height * 0.72)}" text-anchor="end" '
                     f'style="{FONT};font-size:12px" fill="#222">{escape(lab)}</text>')
        parts.append(f'<rect class="bar" x="{_n(a)}" y="{_n(y)}" width="{_n(w)}" height="{bar_height}" '
                     f'fill="{fill}"><title>{escape(lab)}: {escape(_value(v))}{escape(unit)}</title></rect>')
        tx = (b + 4) if v >= 0 else (a - 4)
        anchor = "start" if v >= 0 else "end"
        if v < 0 and tx < label_w + 30:
            tx, anchor = b + 4, "start"
        parts.append(f'<text x="{_n(tx)}" y="{_n(y + bar_height * 0.72)}" text-anchor="{anchor}" '
                     f'style="{FONT};font-size:11px" fill="#444">{escape(_value(v))}</text>')
    parts.append(f'<line x1="{_n(x0)}" y1="{top - 4}" x2="{_n(x0)}" y2="{_n(height - bottom + 2)}" '
                 f'stroke="{AXIS}" stroke-width="1"/>')
    parts.append("</svg>")
    return "".join(parts)


__all__ = ["bar_chart"]
