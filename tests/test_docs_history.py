"""The manual stays a manual: README.md within 2,000 words, no history in README, docs/ and lumber/,
no citation of a file the repository does not hold, and bench/README.md as bench/_tables.py writes it.

History (what was tried, measured and dropped, and when) lives in git; a document says what the code
does now and why. A number in the README comes with the command that produces it, and the numbers of
the benchmarks live in bench/README.md, generated from bench/results/*.json.
"""

from __future__ import annotations

import importlib.util
import re
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
README_WORDS = 2000

HISTORY = re.compile(
    r"\bnot kept\b|\bnone kept\b|\bneither kept\b|\(was\b|, was \d"
    r"|\bload (?:average )?(?:of )?(?:about )?\d"
    r"|\bA/B\b"
    r"|\bsessions? \d|\b(?:this|earlier|previous|last|an earlier) session\b"
    r"|\b(?:previous|earlier|an earlier|last) (?:idle )?runs?\b|\bthe run before\b"
    r"|\bIssue \d+",
    re.IGNORECASE)
"""Markers of a lab notebook: dropped experiments, former values, load figures, run diaries."""

CITED = re.compile(r"(?<![\w/.-])((?:\.\./|/)?[\w.-]+(?:/[\w.-]+)*\.(?:md|txt|py|c|h|toml|json))\b")
"""A file name a text cites (``papers.md``, ``docs/passes.md``, ``../notes/FACTS.md``)."""

REPO_DIRS = ("lumber/", "tests/", "bench/", "docs/")
OUTPUTS = {"report.md"}
"""Markdown that lumber writes (``lumber report``), not a document it cites."""

EXCLUDED: tuple[str, ...] = ()


def _cites_missing(cited: str, path: Path, names: set[str]) -> bool:
    """A citation of a document, or of a repository path, that is not in the repository. User files
    (``model.txt``) and test fixtures' made-up paths pass."""
    in_tests = path.is_relative_to(ROOT / "tests")
    outside = cited.startswith("/") or not (path.parent / cited).resolve().is_relative_to(ROOT)
    if cited.startswith(("/", "../")) and outside:
        return not in_tests  # outside the repository (a test's made-up absolute path passes)
    if Path(cited).stem in ("NAME", "STEM"):
        return False  # a placeholder: bench/results/NAME.json
    if "/" in cited:
        if any((base / cited).exists() for base in (ROOT, path.parent)):
            return False
        return cited.startswith(("../", *REPO_DIRS)) and not in_tests
    return cited.endswith(".md") and cited not in names and cited not in OUTPUTS


def _texts() -> list[Path]:
    files = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
    for ext in ("py", "c", "h", "lark"):
        files += sorted((ROOT / "lumber").rglob(f"*.{ext}"))
    return [f for f in files if not any(f.relative_to(ROOT).as_posix().startswith(x) for x in EXCLUDED)]


def _where(path: Path, text: str, pos: int) -> str:
    return f"{path.relative_to(ROOT)}:{text.count(chr(10), 0, pos) + 1}"


def test_readme_is_short() -> None:
    words = len((ROOT / "README.md").read_text(encoding="utf-8").split())
    assert words <= README_WORDS, f"README.md has {words} words; at most {README_WORDS} (move detail into docs/)"


def test_no_history_markers() -> None:
    found = []
    for path in _texts():
        text = path.read_text(encoding="utf-8")
        found += [f"{_where(path, text, m.start())}: {m.group(0)!r}" for m in HISTORY.finditer(text)]
    assert not found, "history belongs in git, not in the manual or the code:\n" + "\n".join(found)


def _known_names() -> set[str]:
    return {p.name for p in ROOT.rglob("*") if p.is_file() and ".git" not in p.parts}


def test_cited_files_exist() -> None:
    """Every document a text names, and every repository path it names (``lumber/...``, ``tests/...``,
    ``bench/...``, ``docs/...``), is in the repository; nothing outside it (``../notes/...``) is cited."""
    names = _known_names()
    missing = []
    for path in [*_texts(), *sorted((ROOT / "bench").glob("*.py")), *sorted((ROOT / "tests").rglob("*.py"))]:
        if path == Path(__file__).resolve():
            continue
        text = path.read_text(encoding="utf-8")
        for m in CITED.finditer(text):
            if _cites_missing(m.group(1), path, names):
                missing.append(f"{_where(path, text, m.start())}: {m.group(1)}")
    assert not missing, "cited files that are not in the repository:\n" + "\n".join(missing)


def test_the_checks_see_what_they_look_for() -> None:
    """The patterns match what they are meant to (else the tests above would pass vacuously)."""
    for text in ("measured in session 9, not kept", "A/B over the 20 queries, load 1-2", "1,540 (was 2,140)",
                 "see Issue 8", "the previous idle run"):
        assert HISTORY.search(text), text
    for text in ("the load of a model", "lumber.load(path)", "before the first cut"):
        assert not HISTORY.search(text), text
    assert [m.group(1) for m in CITED.finditer("see papers.md and ../notes/FACTS.md, docs/ir.md")] == [
        "papers.md", "../notes/FACTS.md", "docs/ir.md"]
    names = _known_names()
    assert [c for c in ("papers.md", "DESIGN.md", "../notes/FACTS.md", "docs/nothing.md", "lumber/nothing.py",
                        "docs/ir.md", "lumber/ir/forest.py", "model.txt", "report.md") if _cites_missing(c, ROOT, names)
            ] == ["papers.md", "DESIGN.md", "../notes/FACTS.md", "docs/nothing.md", "lumber/nothing.py"]
    assert len(_texts()) > 100


def test_bench_readme_is_generated_from_the_results(monkeypatch: pytest.MonkeyPatch) -> None:
    spec = importlib.util.spec_from_file_location("bench_tables", ROOT / "bench" / "_tables.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, spec.name, mod)  # dataclasses look their module up there
    spec.loader.exec_module(mod)
    want = mod.render()
    assert "not measured" not in want, [line[:200] for line in want.splitlines() if "not measured" in line]
    assert (ROOT / "bench" / "README.md").read_text(encoding="utf-8") == want, \
        "bench/README.md is out of date: run python bench/_tables.py"
