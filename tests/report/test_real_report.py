"""A report made from a real model: golden structure (headings and tables, not numbers), re-rendering."""

from __future__ import annotations

import json
import re
from pathlib import Path

from lumber.backends.report import render_html, render_markdown
from lumber.compiler.cli import main

GOLDEN = Path(__file__).resolve().parent / "golden" / "real_structure.json"


def structure(md: str) -> list[str]:
    """Headings and table header rows, numbers masked: what must not change when only values do."""
    out = []
    lines = md.splitlines()
    fenced = False
    for i, line in enumerate(lines):
        if line.startswith("```"):
            fenced = not fenced
            out.append("code block" if fenced else "end code block")
        elif fenced:
            continue
        elif line.startswith("#"):
            out.append(re.sub(r"\d+(\.\d+)?", "N", line))
        elif line.startswith("|---"):
            out.append("table " + lines[i - 1])
        elif line.startswith("> **IF**"):
            out.append("rule")
    return out


def test_golden_structure(real_report: Path, update_goldens: bool) -> None:
    got = structure((real_report / "report.md").read_text())
    if update_goldens:
        GOLDEN.write_text(json.dumps(got, indent=1) + "\n")
    assert GOLDEN.exists(), "run pytest --update-goldens"
    assert got == json.loads(GOLDEN.read_text()), "report structure changed; review, then --update-goldens"


def test_report_files_agree(real_report: Path) -> None:
    doc = json.loads((real_report / "report.json").read_text())
    assert (real_report / "report.html").read_text() == render_html(doc)
    assert (real_report / "report.md").read_text() == render_markdown(doc)
    assert doc["title"] == "Income model" and doc["cases"]["count"] == 4
    assert "rules" in doc["cases"]["analyses"]  # --train given: rules on by default


def test_render_command(real_report: Path, tmp_path: Path) -> None:
    assert main(["report", "--render", str(real_report / "report.json"), "-o", str(tmp_path)]) == 0
    for name in ("report.html", "report.md"):
        assert (tmp_path / name).read_bytes() == (real_report / name).read_bytes()


def test_render_rejects_other_json(tmp_path: Path, capsys) -> None:  # type: ignore[no-untyped-def]
    (tmp_path / "x.json").write_text('{"a": 1}')
    assert main(["report", "--render", str(tmp_path / "x.json"), "-o", str(tmp_path)]) == 2
    assert "not a lumber report document" in capsys.readouterr().err
    assert main(["report", "model.txt"]) == 2
    assert "needs MODEL and CASES" in capsys.readouterr().err


def test_rule_samples_read_as_changes_then_the_prediction(real_report: Path) -> None:
    """Every sample sentence of a real report: "F: a → b; ...; prediction p → q" with the case's
    prediction first, never a prediction arrow glued to the last feature's values."""
    from test_render import sample_sentence

    doc = json.loads((real_report / "report.json").read_text())
    lines = [x for x in (real_report / "report.md").read_text().splitlines() if x.startswith("Sample from the rule")]
    cases = [c for c in doc["cases"]["items"] if (c.get("rule") or {}).get("sample")]
    assert lines and len(lines) == len(cases)
    for line, case in zip(lines, cases):
        changes, pred = sample_sentence(line)
        assert [c[0] for c in changes] == [c["feature"] for c in case["rule"]["sample"]["changes"]]
        assert pred == [str(case["prediction"]), str(case["rule"]["sample"]["prediction"])]
