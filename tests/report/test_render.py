"""The report renderers: deterministic, self-contained, escaped, structurally complete; golden Markdown."""

from __future__ import annotations

import json
import re
import sys
from html.parser import HTMLParser
from pathlib import Path

import pytest

from lumber.backends.report import FORMATS, render, render_html, render_json, render_markdown, write_report
from lumber.backends.report.svg import bar_chart
from lumber.ir import CompileError

sys.path.insert(0, str(Path(__file__).resolve().parent))
from reportdocs import document  # noqa: E402

GOLDEN = Path(__file__).resolve().parent / "golden"


class Outline(HTMLParser):
    """Headings, section ids, table and chart counts of an HTML page; checks tags balance."""

    VOID = {"meta", "br", "img", "input", "link", "hr", "rect", "line"}

    def __init__(self) -> None:
        super().__init__()
        self.stack: list[str] = []
        self.sections: list[str] = []
        self.headings: list[str] = []
        self.counts: dict[str, int] = {}
        self._in_heading = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.counts[tag] = self.counts.get(tag, 0) + 1
        if tag == "section":
            self.sections.append(dict(attrs).get("id") or "")
        if tag in ("h1", "h2", "h3", "h4"):
            self._in_heading = True
            self.headings.append(f"{tag}:")
        if tag not in self.VOID:
            self.stack.append(tag)

    def handle_endtag(self, tag: str) -> None:
        if tag in self.VOID:
            return
        assert self.stack and self.stack[-1] == tag, f"</{tag}> closes <{self.stack[-1] if self.stack else None}>"
        self.stack.pop()
        if tag in ("h1", "h2", "h3", "h4"):
            self._in_heading = False

    def handle_data(self, data: str) -> None:
        if self._in_heading:
            self.headings[-1] += data


def outline(html: str) -> Outline:
    o = Outline()
    o.feed(html)
    o.close()
    assert o.stack == [], f"unclosed tags: {o.stack}"
    return o


def test_html_structure() -> None:
    o = outline(render_html(document()))
    assert o.sections == ["model", "attribution", "cases", "case-0", "case-1", "regional", "constraints", "checks"]
    assert o.headings[:3] == ["h1:Synthetic <report> & co", "h2:The model", "h3:Features (3)"]
    assert "h3:Case 0: decided class 0 (probability 91.0%)" in o.headings
    assert "h4:How near another decision is (sensitive tests)" in o.headings
    assert "h4:Smallest change that changes the decision (counterfactual)" in o.headings
    assert "h4:A rule for changes that reach the decision sought" in o.headings
    assert "h4:Do the proposed points look like real data?" in o.headings
    assert o.counts["svg"] == 2 and o.counts["rect"] == 3 + 1  # attribution bars, one distance bar (case 1: ∞)


def test_section_order_and_subset_follow_the_document() -> None:
    doc = document()
    doc["sections"] = ["checks", "model"]
    o = outline(render_html(doc))
    assert o.sections == ["checks", "model"]
    md = render_markdown(doc)
    assert md.index("## Checks") < md.index("## The model") and "## Decisions, case by case" not in md


def test_html_is_self_contained_and_escaped() -> None:
    html = render_html(document())
    for needle in ("http://", "https://", "<script", "<link", "src=", "@import", "url(", "<iframe"):
        assert needle not in html, needle
    assert "<title>Synthetic &lt;report&gt; &amp; co</title>" in html
    assert "something &lt;odd&gt; &amp; wrong" in html and "<odd>" not in html


def test_statuses_are_stated() -> None:
    md = render_markdown(document())
    assert "Decision class 0 → class 1; cost 3.5 (l1 norm); proven optimal; verified on the model." in md
    assert "| Job | clerk | manager | — |  |" in md
    assert "infeasible: no point reaches class 0 under the constraints" in md
    assert "no class change reachable under these constraints" in md
    assert "Counterfactual rules failed: InputDataError" in md
    assert "> **IF** Age > 35 AND Hours in (40, 60] **THEN** class 1 with probability 0.95" in md
    assert "| Job not in {2, 3} | 1 | 2 | 3 |" in md
    assert "Distance 3.5 to class 1 (milp)." in md and "Trace: 35 tests on the decision path; 2 of them are sensitive" in md
    assert "| optimal counterfactual | -0.02 | outlier |" in md
    assert "Coverage (share of rows in a region whose rule was found): cases 50.0%, validation 40.0%." in md
    assert "no rule found: no rule reaches π_c 0.9" in md
    assert "| onnx | model.onnx | 4,051 | 1,204 | FAIL | 0.0000002 |" in md
    assert "```\nimmutable Sex\nAge: increase\n```" in md


def test_markdown_tables_are_rectangular() -> None:
    lines = render_markdown(document()).splitlines()
    for i, line in enumerate(lines):
        if line.startswith("|---"):
            width = lines[i - 1].count(" | ")
            j = i + 1
            while j < len(lines) and lines[j].startswith("| "):
                assert len(re.findall(r"(?<!\\) \| ", lines[j])) == width, lines[j]
                j += 1


def test_rendering_is_deterministic_and_survives_a_json_round_trip() -> None:
    doc = document()
    again = json.loads(render_json(doc))
    for fmt in FORMATS:
        assert render(doc, fmt) == render(again, fmt) == render(document(), fmt)
    assert render_json(doc).endswith("}\n") and json.loads(render_json(doc)) == doc


def test_timings_only_when_asked() -> None:
    doc = document()
    assert "speed-up" not in render_markdown(doc)
    assert "timings = true" in render_markdown(doc)
    doc["compile"]["timings"] = True
    doc["compile"]["targets"][0].update(speedup=12.5, speed={"rows": 1000, "threads": 1, "us_per_row": 0.4,
                                                             "reference_us_per_row": 5.0})
    md = render_markdown(doc)
    assert "| speed-up | µs/row |" in md and "| 12.5× | 0.4 |" in md


def test_unknown_format_and_write_report(tmp_path: Path) -> None:
    with pytest.raises(CompileError, match="unknown report format 'pdf'"):
        render(document(), "pdf")
    paths = write_report(document(), tmp_path)
    assert [p.name for p in paths] == ["report.html", "report.md", "report.json"]
    assert paths[0].read_bytes() == render_html(document()).encode()


def test_bar_chart_geometry() -> None:
    svg = bar_chart(["a", "b", "c"], [2.0, -1.0, 0.0], title="t", width=400)
    widths = [float(w) for w in re.findall(r'<rect class="bar" x="[^"]+" y="[^"]+" width="([^"]+)"', svg)]
    assert len(widths) == 3 and widths[0] == pytest.approx(2 * widths[1], rel=0.01) and widths[2] == 0
    assert svg.count("<title>") == 3 and 'role="img"' in svg and "a: +2</title>" in svg
    assert "-0" not in re.sub(r"[a-z]: -1|-1</text>", "", svg)  # no negative zero coordinates


def test_golden_markdown(update_goldens: bool) -> None:
    md = render_markdown(document())
    path = GOLDEN / "synthetic.md"
    if update_goldens:
        path.parent.mkdir(exist_ok=True)
        path.write_text(md)
    assert path.exists(), f"missing golden {path}; run pytest --update-goldens"
    assert md == path.read_text(), "report Markdown changed; review and run pytest --update-goldens"


def test_isolation_scores_print_to_three_decimals_with_their_sign() -> None:
    """A rule sample barely inside the isolation forest scored 2.25e-06: the report printed that raw
    float; it prints +0.000 (inlier), like the rules' text, and a barely-outlier −0.000."""
    doc = document()
    case = doc["cases"]["items"][0]
    case["rule"]["sample"]["inlier_score"] = 2.25e-06
    case["plausibility"]["counterfactual"] = -3e-7
    md = render_markdown(doc)
    assert "2.25e-06" not in md and "3e-07" not in md
    assert "(verified, isolation score +0.000)." in md
    assert "| optimal counterfactual | −0.000 | outlier |" in md
    assert "| rule sample | 0.05 | inlier |" in md


SAMPLE = re.compile(r"^Sample from the rule: (?P<changes>.+); prediction (?P<pred>[^;()]+) \((?P<flags>[^()]*)\)\.$")


def sample_sentence(line: str) -> tuple[list[tuple[str, str, str]], list[str]]:
    """A rule sample's sentence split into ``(feature, before, after)`` changes and the prediction's values."""
    m = SAMPLE.match(line)
    assert m, line
    changes = []
    for part in m["changes"].split("; "):
        feature, _, arrow = part.partition(": ")
        values = arrow.split(" → ")
        assert len(values) == 2, f"a change is 'feature: before → after': {part!r} in {line!r}"
        changes.append((feature, values[0], values[1]))
    return changes, m["pred"].split(" → ")


def test_a_rule_sample_keeps_the_prediction_apart_from_the_changes() -> None:
    """The sample read "Age 29 → 36 → 1": the last arrow was the prediction and read as a third value
    of the last feature. Each change is "feature: before → after" (labels for categories) and the
    prediction is its own clause, "prediction 0 → 1"."""
    md = render_markdown(document())
    line = next(x for x in md.splitlines() if x.startswith("Sample from the rule"))
    changes, pred = sample_sentence(line)
    assert changes == [("Age", "29", "36"), ("Job", "clerk", "manager")] and pred == ["0", "1"]
    doc = document()
    del doc["cases"]["items"][0]["rule"]["sample"]["original_prediction"]  # a report written before the field
    line = next(x for x in render_markdown(doc).splitlines() if x.startswith("Sample from the rule"))
    assert sample_sentence(line)[1] == ["1"]
