"""`lumber build --check` fails exactly when a gated check fails, with a clear message."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from buildproject import set_key
from lumber.compiler.build import build
from lumber.compiler.build.gates import Check, equivalence
from lumber.compiler.cli import main


def light(toml: Path, analyses: str = "[]", targets: str = '["numpy"]') -> None:
    """A quick build: reference target, few analyses."""
    set_key(toml, "compile", f"targets = {targets}")
    set_key(toml, "explain", f"analyses = {analyses}")
    set_key(toml, "explain", 'regions = "none"')


def run_cli(project: Path, capsys: pytest.CaptureFixture[str], *extra: str) -> tuple[int, str, str]:
    code = main(["build", str(project / "lumber.toml"), "-q", *extra])
    cap = capsys.readouterr()
    return code, cap.out, cap.err


def test_passing_build_exits_zero(project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    light(project / "lumber.toml")
    code, _, err = run_cli(project, capsys, "--check")
    assert code == 0 and err == ""


def test_infeasible_required_explanation(project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    toml = project / "lumber.toml"
    light(toml, '["counterfactual"]')
    set_key(toml, "check", 'require = ["counterfactual"]')
    names = "Age, CapitalGain, CapitalLoss, EducationNumber, HoursPerWeek, MaritalStatus, NativeCountry, " \
            "Occupation, Relationship, Sex, WorkClass"
    (project / "recourse.lum").write_text(f"immutable {names}\n")
    code, _, err = run_cli(project, capsys, "--check")
    assert code == 1
    assert "build check failed: explanations[counterfactual]: counterfactual: 4 of 4 cases have no explanation" in err
    assert "case 0: infeasible: no point reaches class 1 under the constraints" in err
    assert "1 gated check(s) failed; see" in err
    m = json.loads((project / "build" / "manifest.json").read_text())
    assert m["status"] == "failed"  # the output is still published, for inspection
    # without --check the same build warns and succeeds; the cached result is reused
    code, _, err = run_cli(project, capsys)
    assert code == 0 and "warning: gated check failed: explanations[counterfactual]" in err
    # not required: recorded, but no gate
    set_key(toml, "check", "require = []")
    code, _, err = run_cli(project, capsys, "--check")
    assert code == 0 and err == ""
    checks = {c["name"]: c for c in json.loads((project / "build" / "manifest.json").read_text())["checks"]}
    cf = checks["explanations[counterfactual]"]
    assert cf["passed"] is False and not cf["gate"]


def test_pruning_beyond_tolerance(project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    toml = project / "lumber.toml"
    light(toml)
    set_key(toml, "compile", 'passes = "polynomial,prune{alpha=0.05}"')
    code, _, err = run_cli(project, capsys, "--check")
    assert code == 1
    assert "build check failed: prune: validation auc" in err and "EXCEEDS tolerance 0.002" in err
    set_key(toml, "check", "prune_tolerance = 0.5")  # a looser gate passes the same pruning
    code, _, err = run_cli(project, capsys, "--check")
    assert code == 0


def test_inexact_artifact(project: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    from lumber.runtime import predictors as api

    light(project / "lumber.toml")
    real = api.NumpyPredictor.predict_raw

    def off_by_a_little(self: Any, X: Any) -> Any:
        out = np.array(real(self, X), dtype=np.float64)
        out[::3] += 1e-7
        return out

    monkeypatch.setattr(api.NumpyPredictor, "predict_raw", off_by_a_little)
    code, _, err = run_cli(project, capsys, "--check")
    assert code == 1
    # the project's pipeline prunes: the artifact is compiled from, and checked against, the pipeline's IR
    assert "build check failed: exact[numpy]: numpy: 402 of 1,204 rows differ from the pipeline's IR" in err
    assert "the artifact is not exact" in err


def test_exactness_gate_can_be_switched_off(project: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from lumber.runtime import predictors as api

    light(project / "lumber.toml")
    set_key(project / "lumber.toml", "check", "exact = false")
    monkeypatch.setattr(api.NumpyPredictor, "predict_raw", lambda self, X: np.zeros(len(X)))
    res = build(project / "lumber.toml")
    (c,) = [c for c in res.checks if c.name == "exact[numpy]"]
    assert c.passed is False and not c.gate and not res.failed


class _State:
    """Just enough of a build state for the equivalence gate."""

    def __init__(self, equal: Any, lossy: bool, require: bool = True) -> None:
        from types import SimpleNamespace

        self.inp = SimpleNamespace(config=SimpleNamespace(check=SimpleNamespace(equivalence=require)))
        self.results = {"equivalence": {"equal": equal, "method": "polynomial",
                                        "reason": "2 monomial weight(s) differ"}}
        self.compiled_from = "passes"
        dropped = 5 if lossy else 0
        self.passes = {"reports": [{"pass": "prune", "metrics": {"dropped": dropped}}]}


@pytest.mark.parametrize("equal,lossy,passed,gate,text", [
    (False, False, False, True, "NOT equivalent to the model: 2 monomial weight(s) differ"),
    (True, False, True, True, "equals the model"),
    (False, True, None, False, "not applicable: the pipeline prunes"),
    (None, False, None, False, "exactness on data is checked instead"),
])
def test_equivalence_gate(equal: Any, lossy: bool, passed: Any, gate: bool, text: str) -> None:
    (c,) = equivalence(_State(equal, lossy))  # type: ignore[arg-type]
    assert isinstance(c, Check) and c.passed is passed and c.gate is gate and text in c.message
    assert c.failed is (passed is False and gate)


def test_an_analysis_that_failed_fails_the_gates_and_the_header_says_so(
        project: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    import lumber

    def broken(*a: Any, **k: Any) -> Any:
        raise RuntimeError("solver crashed")

    monkeypatch.setattr(lumber, "sensitive_tests", broken)
    toml = project / "lumber.toml"
    light(toml, '["sensitive"]')
    set_key(toml, "report", 'formats = ["md", "json"]')
    code, _, err = run_cli(project, capsys, "--check")
    assert code == 1, err
    assert "build check failed: analysis[sensitive]: sensitive tests failed on 4 of 4 cases: case 0: RuntimeError" in err
    md = (project / "build" / "report.md").read_text()
    header = next(ln for ln in md.splitlines() if "check(s) FAILED" in ln)
    assert "analysis[sensitive] (gates --check): sensitive tests failed on 4 of 4 cases" in header
    assert "checks passed" not in md
    # not required by [check] require, yet gated: a failed analysis is never silently a pass
    checks = {c["name"]: c for c in json.loads((project / "build" / "manifest.json").read_text())["checks"]}
    assert checks["analysis[sensitive]"]["gate"] and checks["analysis[sensitive]"]["passed"] is False
