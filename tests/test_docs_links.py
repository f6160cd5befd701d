"""No dead links in README.md and docs/: every relative link names a file or folder of the repository."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")


def _docs() -> list[Path]:
    return [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]


def test_relative_links_resolve() -> None:
    dead = []
    for doc in _docs():
        text = re.sub(r"```.*?```", "", doc.read_text(encoding="utf-8"), flags=re.S)  # code blocks are not links
        for target in LINK.findall(text):
            if re.match(r"[a-z]+:", target) or target.startswith("#"):
                continue
            path = target.split("#", 1)[0]
            if path and not (doc.parent / path).exists():
                dead.append(f"{doc.relative_to(ROOT)}: {target}")
    assert not dead, "dead links:\n" + "\n".join(dead)


def test_the_checker_sees_links() -> None:
    """Guard against a regex that matches nothing (the test above would then pass vacuously)."""
    n = sum(len(LINK.findall(d.read_text(encoding="utf-8"))) for d in _docs())
    assert n > 10
