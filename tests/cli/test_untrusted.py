"""No command unpickles a model file unless told to: a pickle whose ``__reduce__`` writes a file stays inert."""

from __future__ import annotations

import pickle
from pathlib import Path

import joblib
import numpy as np
import pytest
import skops.io as sio
from sklearn.ensemble import HistGradientBoostingClassifier, RandomForestClassifier

import lumber
from lumber.compiler.cli import main


class Evil:
    """Unpickling this writes ``marker``: proof that code ran."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self):  # type: ignore[no-untyped-def]
        return (exec, (f"open({str(self.marker)!r}, 'w').write('pwned')",))


class Opaque:
    """A type no one told skops to trust."""

    def __init__(self) -> None:
        self.value = 3


@pytest.fixture()
def evil(tmp_path: Path) -> tuple[Path, Path, Path]:
    marker = tmp_path / "PWNED"
    plain = tmp_path / "evil.pkl"
    plain.write_bytes(pickle.dumps(Evil(marker), protocol=4))
    packed = tmp_path / "evil.joblib"
    joblib.dump(Evil(marker), packed, compress=3)
    (tmp_path / "cases.csv").write_text("a,b\n1,2\n")
    (tmp_path / "c.lum").write_text("a: increase\n")
    (tmp_path / "lumber.toml").write_text('[model]\npath = "evil.pkl"\n[data]\ncases = "cases.csv"\n[explain]\nanalyses = ["sensitive"]\nscale = "none"\n')
    return marker, plain, packed


def _commands(tmp: Path, model: Path) -> list[list[str]]:
    m, cases = str(model), str(tmp / "cases.csv")
    return [
        ["inspect", m], ["inspect", m, "--json"], ["predict", m, cases],
        ["explain", m, cases, "--sensitive"], ["compile", m, "-o", str(tmp / "out.so")],
        ["compile", m, "--emit", "onnx", "-o", str(tmp / "out.onnx")],
        ["check", str(tmp / "c.lum"), "--model", m], ["init-constraints", m],
        ["batch", m, cases, "--sensitive", "-o", str(tmp / "out.jsonl")],
        ["report", m, cases, "-o", str(tmp / "rep")], ["build", str(tmp / "lumber.toml")],
    ]


def test_no_command_unpickles_by_default(evil, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    marker, plain, packed = evil
    for model in (plain, packed):
        for argv in _commands(tmp_path, model):
            assert main(argv) != 0, argv
            err = capsys.readouterr().err
            assert not marker.exists(), f"{argv} ran the pickle's code"
            assert "--trust-pickle" in err and ".skops" in err, (argv, err)
            assert "Traceback" not in err
    for model in (plain, packed):
        with pytest.raises(lumber.LumberError, match="trust_pickle=True"):
            lumber.load(model)
        with pytest.raises(lumber.LumberError, match="trust_pickle=True"):
            lumber.load(str(model))
    assert not marker.exists()


def test_trust_pickle_does_unpickle(evil, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The marker is a real witness: with the flag the same file does run (and is then refused as no model)."""
    marker, plain, _ = evil
    assert main(["inspect", str(plain), "--trust-pickle"]) != 0
    assert marker.exists()
    err = capsys.readouterr().err
    assert str(plain) in err and "Traceback" not in err  # the error names the file


def test_trusted_pickle_and_python_flag_load_models(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    X = np.random.default_rng(0).normal(size=(200, 3))
    y = (X[:, 0] > 0).astype(int)
    rf = RandomForestClassifier(n_estimators=3, max_depth=3, random_state=0).fit(X, y)
    path = tmp_path / "rf.joblib"
    joblib.dump(rf, path)
    forest = lumber.load(path, trust_pickle=True)
    np.testing.assert_allclose(forest.evaluate(X)[:, 1] if forest.evaluate(X).ndim == 2 else forest.evaluate(X),
                               rf.predict_proba(X)[:, 1], rtol=1e-12)
    assert main(["inspect", str(path), "--trust-pickle"]) == 0
    assert "trees      3" in capsys.readouterr().out


@pytest.mark.parametrize("make", [
    lambda X, y: RandomForestClassifier(n_estimators=3, max_depth=3, random_state=0).fit(X, y),
    lambda X, y: HistGradientBoostingClassifier(max_iter=3, categorical_features=[2]).fit(X, y),
])
def test_skops_loads_tree_models_safely(tmp_path: Path, make, capsys: pytest.CaptureFixture[str]) -> None:
    rng = np.random.default_rng(1)
    X = np.c_[rng.normal(size=(300, 2)), rng.integers(0, 4, 300)]
    y = (X[:, 0] + X[:, 2] > 1).astype(int)
    model = make(X, y)
    path = tmp_path / "model.skops"
    sio.dump(model, path)
    forest = lumber.load(path)
    m = forest.evaluate(X)
    np.testing.assert_allclose(forest.schema.proba(m)[:, 1], model.predict_proba(X)[:, 1], rtol=1e-12, atol=1e-15)
    assert main(["inspect", str(path)]) == 0


def test_skops_refuses_untrusted_types(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "odd.skops"
    sio.dump({"model": Opaque()}, path)
    assert main(["inspect", str(path)]) != 0
    err = capsys.readouterr().err
    assert "does not trust" in err and "Opaque" in err and str(path) in err
