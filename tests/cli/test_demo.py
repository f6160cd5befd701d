"""`lumber demo` (what `make demo` runs) completes offline and checks every claim it prints."""

from __future__ import annotations

from pathlib import Path

import pytest

from lumber.compiler.cli import main


def test_demo_small_model_end_to_end(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["demo", "--trees", "8", "--leaves", "6", "--keep", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "all checks passed" in out
    assert "margins bit-identical to LightGBM" in out
    assert (tmp_path / "model.txt").exists() and (tmp_path / "model.onnx").exists()
    _scan_what_the_demo_wrote(tmp_path, out)


def _scan_what_the_demo_wrote(kept: Path, printed: str) -> None:
    """Everything the demo prints and writes (report.md/html/json) shows values a person could have, in
    the domains its training rows give: no denormal-scale or float-noise numbers, categories by label, no
    "nan"/"None"; and every rule sample reads "F: a → b; ...; prediction p → q"."""
    import html
    import json
    import re

    import lumber
    from lumber.ir.binding import read_csv
    from lumber.ir.domains import domains_for
    from test_outputs_in_domain import Checker

    forest = lumber.load(kept / "model.txt")
    train = read_csv(kept / "train.csv")
    check = Checker(domains_for(forest, None, train[forest.schema.feature_names]), forest)
    check.text(printed, "demo output")
    rep = kept / "build"
    md = (rep / "report.md").read_text()
    page = html.unescape(re.sub(r"<[^>]+>", " ", (rep / "report.html").read_text()))
    check.text(md, "demo report.md")
    check.text(page, "demo report.html")
    check.json(json.loads((rep / "report.json").read_text()), "demo report.json")
    assert not check.problems, "\n".join(check.problems[:30])
    for text, where in ((md, "report.md"), (page, "report.html"), (printed, "demo output")):
        for bad in (r"\bnan\b", r"\bNone\b", r"\d\.\d{12,}"):
            assert not re.search(bad, text), f"{where} shows {re.search(bad, text).group(0)!r}"  # type: ignore[union-attr]
    _check_rule_conditions(json.loads((rep / "report.json").read_text()), md)
    for line in md.splitlines():
        if line.startswith("Sample from the rule"):
            assert re.fullmatch(r"Sample from the rule: (.+: .+ → [^;]+; )+prediction \S+ → \S+ \(.*\)\.", line), line


def _check_rule_conditions(doc: dict, md: str) -> None:  # type: ignore[type-arg]
    """No rule prints a condition that spans its feature's whole domain ("Occupation is any value"): the free
    features of S are named beside the conditions ("Occupation: any value; every other feature unchanged"),
    and each feature of S is either a condition or free, never both. The demo's rules leave some free."""
    assert "is any value" not in md
    rules = [(c["rule"], x) for c in doc["cases"]["items"] if c.get("rule") for x in c["rule"].get("rules", [])]
    rules += [(g, x) for g in (doc.get("regional") or {}).get("regions", []) for x in g.get("rules", [])]
    assert rules
    for owner, x in rules:
        free = x.get("unconstrained") or []
        assert set(free) <= set(owner["features"]), (free, owner["features"])
        for name in free:
            assert name not in x["text"], (name, x["text"])
            assert f"{', '.join(free)}: any value; " in md
    assert any(x.get("unconstrained") for _, x in rules), "the demo's rules should leave some feature of S free"
