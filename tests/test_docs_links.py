"""No dead links in README.md, bench/README.md and docs/: every relative link names a file or folder of the
repository, and a ``#section`` of a Markdown file names one of its headings."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")


def _docs() -> list[Path]:
    return [ROOT / "README.md", ROOT / "bench" / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]


def _anchors(md: Path) -> set[str]:
    """GitHub's anchors of a Markdown file's headings: lower case, punctuation dropped, spaces as hyphens."""
    text = re.sub(r"```.*?```", "", md.read_text(encoding="utf-8"), flags=re.S)
    return {re.sub(r"[^\w\- ]", "", h.strip().lower()).replace(" ", "-")
            for h in re.findall(r"^#{1,6} (.+)$", text, flags=re.M)}


def test_relative_links_resolve() -> None:
    dead = []
    for doc in _docs():
        text = re.sub(r"```.*?```", "", doc.read_text(encoding="utf-8"), flags=re.S)  # code blocks are not links
        for target in LINK.findall(text):
            if re.match(r"[a-z]+:", target) or target.startswith("#"):
                continue
            path, _, section = target.partition("#")
            if path and not (doc.parent / path).exists():
                dead.append(f"{doc.relative_to(ROOT)}: {target}")
            elif section and (doc.parent / path).suffix == ".md" and section not in _anchors(doc.parent / path):
                dead.append(f"{doc.relative_to(ROOT)}: {target} (no such heading)")
    assert not dead, "dead links:\n" + "\n".join(dead)


def test_the_checker_sees_links() -> None:
    """Guard against a regex that matches nothing (the test above would then pass vacuously)."""
    assert "from-lumbercompile-to-the-emitter" in _anchors(ROOT / "docs" / "ir.md")
    n = sum(len(LINK.findall(d.read_text(encoding="utf-8"))) for d in _docs())
    assert n > 10
