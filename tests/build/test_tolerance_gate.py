"""``[compile] tolerance``: target c becomes the fastest form within the tolerance, and a gate fails the build
when the artifact's validation loss (recomputed from its own margins) exceeds it."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from buildproject import set_key
from lumber.compiler import tolerance as tolerance_mod
from lumber.compiler.build import build
from lumber.compiler.build.validate import BuildFileError
from lumber.compiler.cli import main
from lumber.passes.transforms.oblivious_fit import FitOptions
from tests.tolerance_helpers import forest_only


@pytest.fixture
def tolerant(project: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    toml = project / "lumber.toml"
    set_key(toml, "compile", 'passes = ""')
    set_key(toml, "compile", 'targets = ["c"]')
    set_key(toml, "compile", "tolerance = 0.002")
    set_key(toml, "explain", "analyses = []")
    set_key(toml, "explain", 'regions = "none"')
    monkeypatch.setattr(tolerance_mod, "DEFAULT_FIT", FitOptions(depth=5, max_trees=30, patience=10))
    monkeypatch.setattr(tolerance_mod, "compile_fastest", forest_only)
    return toml


def test_tolerance_build_passes_its_gate(tolerant: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["build", str(tolerant), "-q", "--check"])
    err = capsys.readouterr().err
    assert code == 0 and err == ""
    m = json.loads((tolerant.parent / "build" / "manifest.json").read_text())
    checks = {c["name"]: c for c in m["checks"]}
    c = checks["tolerance[c]"]
    assert c["passed"] is True and c["gate"] is True
    assert "within tolerance 0.002" in c["message"] and "validation auc" in c["message"]
    assert c["details"]["loss"] <= 0.002
    assert "exact[c]" not in checks  # a lossy form by request: bounded by the tolerance gate instead


def test_the_gate_fails_when_the_artifact_exceeds_the_tolerance(
        tolerant: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    """A search that returned a form worse than it claimed (simulated: margins negated) is caught by the gate,
    which recomputes the loss from the artifact."""
    real = tolerance_mod.compile_within

    def wrong(*args: Any, **kwargs: Any) -> Any:
        pred = real(*args, **kwargs)
        honest = pred.predict_raw
        pred.predict_raw = lambda X, *a, **k: -honest(X, *a, **k)
        return pred

    monkeypatch.setattr(tolerance_mod, "compile_within", wrong)
    code = main(["build", str(tolerant), "-q", "--check"])
    err = capsys.readouterr().err
    assert code == 1
    assert "build check failed: tolerance[c]" in err and "EXCEEDS tolerance 0.002" in err


def test_the_gate_fails_when_decisions_agree_on_fewer_rows_than_required(
        tolerant: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    """``[compile] agreement``: an artifact whose decisions differ on more validation rows than allowed
    (simulated: the margins of rows nearest the decision flipped) fails the build, named by the gate."""
    set_key(tolerant, "compile", "agreement = 0.999")
    real = tolerance_mod.compile_within
    seen: dict[str, Any] = {}

    def flipping(*args: Any, **kwargs: Any) -> Any:
        seen.update(kwargs)
        pred = real(*args, **kwargs)
        honest = pred.predict_raw

        def raw(X: Any, *a: Any, **k: Any) -> Any:
            m = np.array(honest(X, *a, **k), dtype=np.float64)
            near = np.argsort(np.abs(m.reshape(-1)))[: max(2, len(m) // 50)]
            m.reshape(-1)[near] *= -1.0
            return m
        pred.predict_raw = raw
        return pred

    monkeypatch.setattr(tolerance_mod, "compile_within", flipping)
    code = main(["build", str(tolerant), "-q", "--check"])
    err = capsys.readouterr().err
    assert seen["agreement"] == 0.999
    assert code == 1 and "build check failed: tolerance[c]" in err and "BELOW the required 99.90%" in err


@pytest.mark.parametrize("key, line, message", [
    ("compile", "agreement = 1.5", "agreement must be a share of rows"),
    ("data", 'validation = ""', "needs [data] validation"),
    ("compile", 'targets = ["onnx"]', "applies to the c target"),
    ("compile", 'passes = "polynomial"', "cannot follow a pass pipeline"),
])
def test_tolerance_settings_are_checked_before_building(tolerant: Path, key: str, line: str, message: str) -> None:
    text = tolerant.read_text()
    if line == 'validation = ""':
        tolerant.write_text("\n".join(ln for ln in text.splitlines() if not ln.startswith("validation")) + "\n")
    else:
        set_key(tolerant, key, line)
    with pytest.raises(BuildFileError, match=message.replace("[", r"\[").replace("]", r"\]")):
        build(tolerant)


def test_agreement_without_a_tolerance_is_an_error(project: Path) -> None:
    toml = project / "lumber.toml"
    set_key(toml, "compile", "agreement = 0.99")
    with pytest.raises(BuildFileError, match=r"agreement applies with \[compile\] tolerance"):
        build(toml)
