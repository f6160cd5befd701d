"""Blocks -> one self-contained HTML file: inline CSS and SVG, no scripts, no external resource.

Every piece of text goes through :func:`html.escape`. The page works offline
and prints cleanly; sections carry ids (``#model``, ``#case-3``) so a review
can link to them.
"""

from __future__ import annotations

from html import escape
from typing import Any

from .blocks import Block, Close, Figure, Glossary, Grid, Heading, Open, Para, Pre, Rule, Table, Toc
from .layout import layout

CSS = """
:root{--fg:#1d1d1f;--muted:#5f6368;--line:#d9dce1;--bg:#fff;--soft:#f5f7fa;
--pass:#1e7b34;--fail:#b3261e;--warn:#8a5a00}
*{box-sizing:border-box}
body{margin:0;color:var(--fg);background:var(--bg);
font:15px/1.5 system-ui,-apple-system,"Segoe UI",Roboto,Arial,sans-serif}
main{max-width:1000px;margin:0 auto;padding:24px 28px 64px}
h1{font-size:26px;margin:8px 0 4px}
h2{font-size:20px;margin:36px 0 8px;padding-bottom:4px;border-bottom:2px solid var(--line)}
h3{font-size:16px;margin:22px 0 6px}
h4{font-size:14px;margin:14px 0 4px;color:var(--muted);text-transform:uppercase;letter-spacing:.04em}
p{margin:6px 0}.meta{color:var(--muted);font-size:13px}.note{color:var(--muted);font-size:13px}
.warn{color:var(--warn)}
nav{margin:12px 0 8px;font-size:14px}nav a{margin-right:14px;color:#2f6db5;text-decoration:none}
table{border-collapse:collapse;margin:8px 0 12px;font-size:13.5px;max-width:100%}
caption{caption-side:bottom;text-align:left;color:var(--muted);font-size:12px;padding-top:4px}
th,td{border-bottom:1px solid var(--line);padding:4px 10px;text-align:left;vertical-align:top}
th{background:var(--soft);font-weight:600}
td.pass{color:var(--pass);font-weight:600}td.fail{color:var(--fail);font-weight:700}td.warn{color:var(--warn)}
dl.grid{display:grid;grid-template-columns:repeat(auto-fill,minmax(170px,1fr));gap:2px 16px;
margin:8px 0 12px;font-size:13.5px}
dl.grid div{display:flex;justify-content:space-between;gap:8px;border-bottom:1px solid var(--line);padding:3px 0}
dl.grid dt{color:var(--muted)}dl.grid dd{margin:0;font-weight:500;text-align:right;overflow-wrap:anywhere}
dl.facts{grid-template-columns:repeat(auto-fill,minmax(240px,1fr))}
.case{border:1px solid var(--line);border-radius:6px;padding:4px 16px 10px;margin:14px 0;break-inside:avoid}
.rule{background:var(--soft);border-left:4px solid #2f6db5;padding:8px 12px;margin:8px 0;
font-family:ui-monospace,SFMono-Regular,Menlo,Consolas,monospace;font-size:13px}
.rule .kw{font-weight:700;color:#2f6db5}
.rule .sub{display:block;color:var(--muted);font-family:inherit;font-size:12px;margin-top:2px}
pre{background:var(--soft);border:1px solid var(--line);padding:10px 12px;overflow-x:auto;
font-size:13px;line-height:1.4}
details.glossary{background:var(--soft);border:1px solid var(--line);border-radius:6px;padding:6px 14px;
margin:12px 0;font-size:13.5px}details.glossary summary{font-weight:600;cursor:pointer}
dl.glossary dt{font-weight:600;margin-top:6px}dl.glossary dd{margin:0 0 0 16px;color:var(--fg)}
ol.reasons{margin:4px 0 8px 20px;padding:0}
figure{margin:10px 0}figcaption{color:var(--muted);font-size:12px}svg.chart{max-width:100%;height:auto}
@media print{main{max-width:none;padding:0}.case{page-break-inside:avoid}nav{display:none}}
""".strip()


def _table(t: Table) -> str:
    cls = f' class="{escape(t.cls)}"' if t.cls else ""
    head = "".join(f"<th>{escape(h)}</th>" for h in t.headers)
    body = "".join("<tr>" + "".join(f'<td class="{escape(c.cls)}">{escape(c.text)}</td>' if c.cls else
                                    f"<td>{escape(c.text)}</td>" for c in row) + "</tr>" for row in t.rows)
    cap = f"<caption>{escape(t.caption)}</caption>" if t.caption else ""
    return f"<table{cls}>{cap}<thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def _block(b: Block) -> str:
    if isinstance(b, Heading):
        anchor = f' id="h-{escape(b.anchor)}"' if b.anchor else ""
        return f"<h{b.level}{anchor}>{escape(b.text)}</h{b.level}>"
    if isinstance(b, Para):
        cls = f' class="{escape(b.cls)}"' if b.cls else ""
        return f"<p{cls}>{escape(b.text)}</p>"
    if isinstance(b, Table):
        return _table(b)
    if isinstance(b, Pre):
        return f"<pre>{escape(b.text)}</pre>"
    if isinstance(b, Grid):
        cls = f"grid {b.cls}".strip()
        items = "".join(f"<div><dt>{escape(k)}</dt><dd>{escape(v)}</dd></div>" for k, v in b.items)
        return f'<dl class="{escape(cls)}">{items}</dl>'
    if isinstance(b, Figure):
        return f"<figure>{b.svg}<figcaption>{escape(b.caption)}</figcaption></figure>"
    if isinstance(b, Rule):
        sub = f'<span class="sub">{escape(b.note)}</span>' if b.note else ""
        return (f'<div class="rule"><span class="kw">IF</span> {escape(b.condition)} '
                f'<span class="kw">THEN</span> {escape(b.conclusion)}{sub}</div>')
    if isinstance(b, Open):
        return f'<section id="{escape(b.anchor)}" class="{escape(b.cls)}">'
    if isinstance(b, Close):
        return "</section>"
    if isinstance(b, Glossary):
        items = "".join(f"<dt>{escape(t)}</dt><dd>{escape(d)}</dd>" for t, d in b.items)
        return (f'<details class="glossary" open><summary>{escape(b.title)}</summary>'
                f'<dl class="glossary">{items}</dl></details>')
    if isinstance(b, Toc):
        return "<nav>" + "".join(f'<a href="#{escape(a)}">{escape(t)}</a>' for a, t in b.entries) + "</nav>"
    raise TypeError(f"unknown block {type(b).__name__}")  # pragma: no cover


def render_html(doc: dict[str, Any]) -> str:
    """The report as one HTML document (a string)."""
    blocks = layout(doc)
    title = escape(str(doc.get("title", "lumber report")))
    body = "\n".join(_block(b) for b in blocks)
    return (f'<!DOCTYPE html>\n<html lang="en">\n<head>\n<meta charset="utf-8">\n'
            f'<meta name="viewport" content="width=device-width, initial-scale=1">\n'
            f'<meta name="generator" content="{escape(str(doc.get("generator", "lumber")))}">\n'
            f"<title>{title}</title>\n<style>\n{CSS}\n</style>\n</head>\n<body>\n<main>\n{body}\n</main>\n"
            f"</body>\n</html>\n")


__all__ = ["CSS", "render_html"]
