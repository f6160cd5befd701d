"""The HTML report as a reviewer reads it, in a real headless Chromium: every technical term the page
shows is explained in its glossary, no number is in scientific notation, and the header names every
failed check (never "all checks passed" beside a FAIL). The text read is the page's rendered text
(``innerText`` after layout), not the HTML source."""

from __future__ import annotations

import copy
import json
import re
from pathlib import Path

import pytest
from test_browser import chromium, run_browser

from lumber.backends.report import write_report
from lumber.backends.report.layout import GLOSSARY

pytestmark = pytest.mark.browser

READER = """
<script>
window.addEventListener("load", () => {
  const gloss = document.querySelector("details.glossary");
  const terms = gloss ? [...gloss.querySelectorAll("dt")].map((d) => d.innerText.trim()) : [];
  const header = [...document.querySelectorAll("main > p")].slice(0, 3).map((p) => p.innerText);
  if (gloss) gloss.remove();
  const facts = {terms, header, body: document.body.innerText,
                 checks: [...document.querySelectorAll("table.checks tbody tr")].map((r) => r.innerText)};
  const pre = document.createElement("pre");
  pre.id = "reader";
  pre.textContent = JSON.stringify(facts);
  document.body.appendChild(pre);
});
</script>
"""

SCIENTIFIC = re.compile(r"(?<![\w.])\d+(?:\.\d+)?[eE][+-]?\d+\b")
ALWAYS_EXPLAINED = ("formula (8)", "E[margin]", "MonoForest")
"""Paper and notation terms no page may print at all."""
RAW = ("pi_c=", "pi=", "no_rule", "no_solution", "already_target", "e[margin]")
"""Solver codes and ASCII notation the page prints in words (``no rule found``, ``π_c 0.9``)."""


def read(html: str, tmp: Path, name: str) -> dict:
    chromium()
    page = tmp / f"{name}.html"
    page.write_text(html.replace("</body>", READER + "</body>"))
    done = run_browser(["--virtual-time-budget=5000", "--dump-dom", page.as_uri()], tmp / f"profile-{name}")
    m = re.search(r'<pre id="reader">(.*?)</pre>', done.stdout, re.S)
    assert m, f"no reader output; chromium said: {done.stderr[-2000:]}"
    return json.loads(m.group(1).replace("&quot;", '"').replace("&amp;", "&").replace("&lt;", "<")
                      .replace("&gt;", ">"))


def rendered(doc: dict, tmp: Path, name: str) -> str:
    out = tmp / name
    out.mkdir()
    write_report(doc, out, ["html"])
    return (out / "report.html").read_text()


def check_page(facts: dict, doc: dict) -> None:
    body = facts["body"]
    assert not SCIENTIFIC.findall(body), SCIENTIFIC.findall(body)[:5]
    low = body.lower()
    for term in GLOSSARY:
        if re.search(rf"(?<!\w){re.escape(term.lower())}", low):
            assert term in facts["terms"], f"'{term}' is used but not explained"
    for term in ALWAYS_EXPLAINED:
        assert term not in body, term
    for raw in RAW:
        assert raw not in low, raw
    failed = [c for c in doc.get("checks", []) if c.get("passed") is False]
    head = " ".join(facts["header"])
    for c in failed:
        assert c["name"] in head, f"failed check {c['name']} is not in the header"
    if failed:
        assert "passed" not in head.lower().replace("failed", "")
        assert any("FAIL" in r for r in facts["checks"])


def test_real_report_reads_plainly(real_report: Path, tmp_path: Path) -> None:
    doc = json.loads((real_report / "report.json").read_text())
    facts = read((real_report / "report.html").read_text(), tmp_path, "real")
    check_page(facts, doc)
    assert facts["terms"], "the page uses technical terms: a glossary explains them"


def test_a_failed_check_is_never_hidden(real_report: Path, tmp_path: Path) -> None:
    """The issue's report: a non-gating check FAILs (157 of 200 cases had no local rule) while every gated one
    passes; the header must say so, by name."""
    doc = copy.deepcopy(json.loads((real_report / "report.json").read_text()))
    for c in doc["checks"]:
        c["passed"] = True
    doc["checks"].append({"name": "explanations[rules]", "passed": False, "gate": False,
                          "message": "rules: 157 of 200 cases have no local rule"})
    facts = read(rendered(doc, tmp_path, "failed"), tmp_path, "failed")
    check_page(facts, doc)
    assert "1 check(s) FAILED: explanations[rules] (not gating)" in " ".join(facts["header"])


def test_tiny_numbers_read_as_decimals(real_report: Path, tmp_path: Path) -> None:
    """A distance of 5.989e-08 (the issue's) reads as a decimal; the exact value stays in report.json."""
    doc = copy.deepcopy(json.loads((real_report / "report.json").read_text()))
    for it in doc["cases"]["items"]:
        if isinstance(it.get("sensitive"), dict):
            it["sensitive"].update(status="ok", distance=5.989e-08, reachable=True)
    facts = read(rendered(doc, tmp_path, "tiny"), tmp_path, "tiny")
    check_page(facts, doc)
    assert "0.00000006" in facts["body"]
