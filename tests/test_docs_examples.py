"""The Python examples of the guides in docs/ run, and print what the page shows (in shape).

Each page's ```python blocks run top to bottom in one namespace, in an empty folder. A block's
shown output (the ``` block right after it) is compared line by line with what it printed: the same
number of lines, each starting with the same word; a shown ``...`` line stands for any number of
lines. A ``# value`` line right after an expression is compared in type and length, as for the
README (tests/cli/test_readme_python.py). Pages whose examples need files a reader has (a model file,
a build folder) are not run here: constraints.md, build.md, table-format.md.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.cli.test_readme_python import _word, run_block

DOCS = Path(__file__).resolve().parent.parent / "docs"
PAGES = ["explanations.md", "sensitive-tests.md", "counterfactuals.md", "rules.md", "attributions.md",
         pytest.param("passes.md", marks=pytest.mark.slow), pytest.param("models.md", marks=pytest.mark.slow)]
"""The explainer guides run in the default suite; the reference pages' longer examples with ``make test-slow``."""


def page_blocks(path: Path) -> list[tuple[int, str, list[str] | None]]:
    """(line, code, the output block shown right after it or None) for each ```python block of ``path``."""
    lines = path.read_text(encoding="utf-8").splitlines()
    out: list[tuple[int, str, list[str] | None]] = []
    i = 0
    while i < len(lines):
        if lines[i].strip() != "```python":
            i += 1
            continue
        j = i + 1
        while lines[j].strip() != "```":
            j += 1
        code = "\n".join(lines[i + 1:j])
        k = j + 1
        while k < len(lines) and not lines[k].strip():
            k += 1
        shown = None
        if k < len(lines) and lines[k].strip() in ("```", "```text"):
            m = k + 1
            while lines[m].strip() != "```":
                m += 1
            shown = lines[k + 1:m]
            j = m
        out.append((i + 2, code, shown))
        i = j + 1
    return out


def matches(got: list[str], shown: list[str]) -> bool:
    """Line by line by first word; a shown ``...`` line matches any number of printed lines."""
    if not shown:
        return not got
    if shown[0].strip() == "...":
        return any(matches(got[n:], shown[1:]) for n in range(len(got) + 1))
    return bool(got) and _word(got[0]) == _word(shown[0]) and matches(got[1:], shown[1:])


def test_matches() -> None:
    assert matches(["a 1", "b 2", "c 3"], ["a x", "...", "c y"])
    assert matches(["a 1", "c 3"], ["a x", "...", "c y"])
    assert not matches(["a 1", "b 2"], ["a x", "c y"])
    assert not matches(["a 1"], ["a x", "b y"])


@pytest.mark.parametrize("page", PAGES)
def test_page_examples_run(page: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    found = page_blocks(DOCS / page)
    assert found, f"{page} has no ```python block"
    monkeypatch.chdir(tmp_path)
    ns: dict[str, Any] = {"__name__": "docs"}
    for line, code, shown in found:
        where = f"docs/{page}:{line}"
        out = run_block(code, ns, where).splitlines()
        if shown is not None:
            assert matches(out, shown), f"{where}: printed\n" + "\n".join(out) + "\nthe page shows\n" + "\n".join(shown)
