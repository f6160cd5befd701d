"""On every bundled data set, with training rows and no constraint file, nothing
lumber prints, writes or reports holds a value outside its feature's domain or a change below resolution.

Each data set is exported as the README tour does (``lumber datasets export``, a small model), then
``explain`` (counterfactual, sensitive, rules, attribution; text and JSON), ``report`` (Markdown, HTML,
JSON) and ``batch`` run on a few rows, and every value they show is checked against the domains lumber
infers from the training rows: whole numbers stay whole, categories print as labels, a change is at
least one resolution step, thresholds are the short decimals between domain values, a continuous
feature's thresholds short decimals of their model cell (with or without training rows), and a
categorical condition a set of labels, never an order on codes.
"""

from __future__ import annotations

import html
import json
import math
import re
from pathlib import Path
from typing import Any, Iterator

import pytest

import lumber
from lumber.compiler.cli import main
from lumber.datasets import NAMES
from lumber.ir.binding import read_csv
from lumber.ir.domains import DomainKind, Domains, domains_for

NUMBER = r"-?(?:\d+(?:\.\d*)?|\.\d+)(?:e[-+]?\d+)?|-?inf|nan"


@pytest.fixture(scope="module", params=NAMES)
def exported(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> tuple[str, Path]:
    name = request.param
    out = tmp_path_factory.mktemp(name)
    assert main(["datasets", "export", name, str(out), "--trees", "12", "--leaves", "8", "--train-rows", "300",
                 "--cases", "4", "--force"]) == 0
    return name, out


def _domains(out: Path) -> tuple[Domains, Any]:
    forest = lumber.load(out / "model.txt")
    train = read_csv(out / "train.csv")
    names = forest.schema.feature_names
    return domains_for(forest, None, train[names]), forest


class Checker:
    def __init__(self, doms: Domains, forest: Any, values: bool = True) -> None:
        self.values = values
        """False: check thresholds and categorical conditions only."""
        self.doms = doms
        self.names = doms.names
        self.labels = {i: f.categories for i, f in enumerate(forest.schema.features) if f.categories is not None}
        self.problems: list[str] = []

    def index(self, feature: str) -> int | None:
        return self.names.index(feature) if feature in self.names else None

    def value(self, feature: str, text: Any, where: str) -> float | None:
        """A shown value as a number (labels to codes); records a problem if it is no domain value."""
        i = self.index(feature)
        if i is None:
            return None
        d = self.doms[i]
        s = str(text).strip()
        if d.kind == DomainKind.CATEGORICAL:
            labels = self.labels.get(i)
            if labels is not None and all(isinstance(c, str) for c in labels):
                if s not in {str(c) for c in labels}:
                    self.problems.append(f"{where}: {feature} shows {s!r}, not one of its labels")
                    return None
                return float([str(c) for c in labels].index(s))
            return float(s) if re.fullmatch(NUMBER, s) else None
        if not re.fullmatch(NUMBER, s):
            self.problems.append(f"{where}: {feature} shows {s!r}, not a number")
            return None
        v = float(s)
        if not d.contains(v) and math.isfinite(v):
            self.problems.append(f"{where}: {feature} = {s} is outside its domain ({d.kind.value})")
        return v

    def change(self, feature: str, a: Any, b: Any, where: str) -> None:
        if not self.values:
            return
        va, vb = self.value(feature, a, where), self.value(feature, b, where)
        i = self.index(feature)
        if i is None or va is None or vb is None:
            return
        res = self.doms[i].resolution
        if va == vb:
            self.problems.append(f"{where}: {feature} {a} -> {b} is no change")
        elif res > 0 and abs(vb - va) < res * (1 - 1e-9):
            self.problems.append(f"{where}: {feature} {a} -> {b} changes below its resolution {res:g}")

    def threshold(self, feature: str, text: str, where: str) -> None:
        i = self.index(feature)
        if i is None:
            return
        d = self.doms[i]
        if d.kind == DomainKind.CATEGORICAL:
            self.problems.append(f"{where}: categorical {feature} compared by order with {text!r}")
            return
        if not re.fullmatch(NUMBER, text):
            return
        t = float(text)
        if d.kind in (DomainKind.INTEGER, DomainKind.BINARY) and d.resolution == 1.0 and math.isfinite(t):
            if not re.fullmatch(r"-?\d+(\.5)?", text):
                self.problems.append(f"{where}: {feature} threshold {text} is not a whole or half number")
        elif d.resolution == 0 and _digits(text) > SHORT:
            self.problems.append(f"{where}: {feature} threshold {text} is no short decimal ({_digits(text)} digits)")

    # -- scanners ---------------------------------------------------------------------------------

    def text(self, text: str, where: str) -> None:
        feats = "|".join(re.escape(n) for n in sorted(self.names, key=len, reverse=True))
        for m in re.finditer(rf"(?<![\w-])({feats}):? ({NUMBER}|[\w.\-]+) (?:->|→) ({NUMBER}|[\w.\-]+)", text):
            self.change(m.group(1), m.group(2), m.group(3), where)
        for m in re.finditer(rf"(?<![\w-])({feats}) (?:<=|>=|<|>|≤|≥) ({NUMBER}|[\w.\-]+)", text):
            self.threshold(m.group(1), m.group(2), where)
        for m in re.finditer(rf"({NUMBER}) (?:<=|<|≤) ({feats})(?![\w-])", text):
            self.threshold(m.group(2), m.group(1), where)
        for m in re.finditer(rf"(?<![\w-])({feats}) in ([\w.\-]+)\.\.", text):
            i = self.index(m.group(1))
            if i is not None and self.doms[i].kind == DomainKind.CATEGORICAL:
                self.problems.append(f"{where}: categorical {m.group(1)} shown as a range from {m.group(2)}")
        if not self.values:
            return
        for m in re.finditer(rf"(?<![\w-])({feats}) = ([\w.\-]+)", text):
            self.value(m.group(1), m.group(2), where)
        for m in re.finditer(r"\d(?:\.\d+)?e-(?:3\d|[4-9]\d|\d{3})", text):
            self.problems.append(f"{where}: shows a denormal-scale number {m.group(0)}")

    def json(self, doc: Any, where: str) -> None:
        for d in _dicts(doc):
            if isinstance(d.get("condition"), str):
                self.text(d["condition"], where + " (attribution)")
            f = d.get("feature")
            if not isinstance(f, str) or self.index(f) is None:
                continue
            if "after_text" in d:
                self.change(f, d["before_text"], d["after_text"], where + " (text)")
            if "after" in d and d.get("delta") is not None:
                self.change(f, d["before"], d["after"], where + " (exact)")
            if "new_value_text" in d:
                self.change(f, d["value_text"], d["new_value_text"], where + " (test)")
                if d.get("threshold_text") and d.get("categories") is None:
                    self.threshold(f, d["threshold_text"], where + " (test)")
                if self.values and isinstance(d.get("margin"), float) and d["margin"] < 1e-12:
                    self.problems.append(f"{where}: {f} test margin {d['margin']!r} below any resolution")
            if isinstance(d.get("text"), str):
                self.text(d["text"], where + " (rule)")


SHORT = 8
"""Significant digits a continuous threshold may show (float noise like 0.4982340186834336 has 16)."""


def _digits(text: str) -> int:
    mant = text.lower().lstrip("-").split("e")[0].replace(".", "").lstrip("0").rstrip("0")
    return max(1, len(mant))


def _dicts(doc: Any) -> Iterator[dict[str, Any]]:
    if isinstance(doc, dict):
        yield doc
        for v in doc.values():
            yield from _dicts(v)
    elif isinstance(doc, list):
        for v in doc:
            yield from _dicts(v)


def test_every_shown_value_is_in_its_domain(exported: tuple[str, Path], capsys: pytest.CaptureFixture[str]) -> None:
    name, out = exported
    doms, forest = _domains(out)
    check = Checker(doms, forest)
    model, cases, train = str(out / "model.txt"), str(out / "cases.csv"), str(out / "train.csv")
    rows = "0:2"
    capsys.readouterr()
    assert main(["explain", model, cases, "--rows", rows, "--counterfactual", "--sensitive", "--rules",
                 "--attribution", "--train", train, "--time-limit", "10", "-o", str(out / "explain.json")]) == 0
    check.text(capsys.readouterr().out, f"{name}: explain")
    check.json(json.loads((out / "explain.json").read_text()), f"{name}: explain.json")
    assert main(["report", model, cases, "--train", train, "--analyses", "sensitive,counterfactual,rules",
                 "--max-cases", "2", "--time-limit", "5", "-q", "-o", str(out / "report")]) == 0
    capsys.readouterr()
    rep = out / "report"
    md = (rep / "report.md").read_text()
    check.text(md, f"{name}: report.md")
    for i, f in enumerate(forest.schema.features):  # a 0/1 flag without labels says so in the model card
        if f.categories is None and doms[i].kind == DomainKind.BINARY:
            assert re.search(rf"\| {re.escape(f.name)} \| \w+ \| 0/1 \(binary, no labels\) \|", md), f.name
    check.text(html.unescape(re.sub(r"<[^>]+>", " ", (rep / "report.html").read_text())), f"{name}: report.html")
    check.json(json.loads((rep / "report.json").read_text()), f"{name}: report.json")
    for analysis in ("--counterfactual", "--sensitive"):
        path = out / f"batch{analysis[1:]}.jsonl"
        assert main(["batch", model, cases, analysis, "--rows", rows, "--train", train, "--time-limit", "10",
                     "-o", str(path), "--no-progress"]) == 0
        capsys.readouterr()
        for line in path.read_text().splitlines():
            check.json(json.loads(line), f"{name}: batch {analysis}")
    assert not check.problems, "\n".join(check.problems[:30])


def test_without_training_rows_the_cases_give_the_domains(exported: tuple[str, Path],
                                                         capsys: pytest.CaptureFixture[str]) -> None:
    """No training rows, no constraint file. ``explain --sensitive``, ``report`` and ``batch`` then knew only
    the model's schema and showed ``CapitalGain 0 -> 1.0001e-35`` at distance 1e-35 (LightGBM's zero band)
    where ``explain --counterfactual`` took every row of DATA as its reference; now all of them do, so what
    they show lies in the domains those rows give, and every threshold is still a short decimal of its
    model cell, never the float noise of the model file (``12.500000000000002``)."""
    name, out = exported
    forest = lumber.load(out / "model.txt")
    cases_frame = read_csv(out / "cases.csv")
    check = Checker(domains_for(forest, None, cases_frame[forest.schema.feature_names]), forest)
    model, cases = str(out / "model.txt"), str(out / "cases.csv")
    capsys.readouterr()
    assert main(["explain", model, cases, "--rows", "0:2", "--sensitive", "--counterfactual", "--time-limit", "10",
                 "-o", str(out / "bare.json")]) == 0
    check.text(capsys.readouterr().out, f"{name}: explain (no training rows)")
    check.json(json.loads((out / "bare.json").read_text()), f"{name}: explain.json (no training rows)")
    assert main(["report", model, cases, "--analyses", "sensitive,counterfactual", "--max-cases", "2", "-q",
                 "--time-limit", "5", "-o", str(out / "bare")]) == 0
    capsys.readouterr()
    rep = out / "bare"
    check.text((rep / "report.md").read_text(), f"{name}: report.md (no training rows)")
    check.text(html.unescape(re.sub(r"<[^>]+>", " ", (rep / "report.html").read_text())),
               f"{name}: report.html (no training rows)")
    check.json(json.loads((rep / "report.json").read_text()), f"{name}: report.json (no training rows)")
    for analysis in ("--counterfactual", "--sensitive"):
        path = out / f"bare-batch{analysis[1:]}.jsonl"
        assert main(["batch", model, cases, analysis, "--rows", "0:2", "--time-limit", "10", "-o", str(path),
                     "--no-progress"]) == 0
        capsys.readouterr()
        for line in path.read_text().splitlines():
            check.json(json.loads(line), f"{name}: batch {analysis} (no training rows)")
    assert not check.problems, "\n".join(check.problems[:30])
