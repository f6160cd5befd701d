"""``lumber compile MODEL --emit c --optimize speed --tolerance LOSS --train --valid --label``: the lossy search
from the command line, and its bad inputs (a clear error and a non-zero exit, never a traceback)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from lumber.compiler import tolerance as tolerance_mod
from lumber.compiler.cli import main
from lumber.passes.transforms.oblivious_fit import FitOptions
from tests.tolerance_helpers import forest_only


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> Path:
    import lightgbm as lgb

    d = tmp_path_factory.mktemp("tol")
    rng = np.random.default_rng(0)
    X = pd.DataFrame(rng.normal(size=(1600, 4)), columns=["a", "b", "c", "d"])
    y = (X.a + X.b * X.c + 0.3 * rng.normal(size=1600) > 0).astype(int)
    lgb.LGBMClassifier(n_estimators=20, num_leaves=6, verbose=-1, n_jobs=1).fit(X[:800], y[:800]) \
        .booster_.save_model(str(d / "model.txt"))
    X.iloc[:800].assign(label=y[:800]).to_csv(d / "train.csv", index=False)
    # another column order: bound by name
    X.iloc[800:][["d", "c", "b", "a"]].assign(label=y[800:].to_numpy()).to_csv(d / "valid.csv", index=False)
    return d


def test_compile_with_tolerance_writes_a_library_and_prints_every_form(
        files: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    import lumber

    monkeypatch.setattr(tolerance_mod, "DEFAULT_FIT", FitOptions(depth=5, max_trees=30, patience=10))
    monkeypatch.setattr(tolerance_mod, "compile_fastest", forest_only)
    out = tmp_path / "m.so"
    argv = ["compile", str(files / "model.txt"), "--emit", "c", "--optimize", "speed", "--tolerance", "0.002",
            "--train", str(files / "train.csv"), "--valid", str(files / "valid.csv"), "--label", "label",
            "--agreement", "1", "-o", str(out)]
    assert main(argv) == 0
    printed = capsys.readouterr().out
    assert "tolerance 0.002 on auc" in printed and "<- chosen" in printed and "cascade" in printed
    assert "exact path" in printed and "|margin change|" in printed
    pred = lumber.load_compiled(out, str(files / "model.txt"))
    valid = pd.read_csv(files / "valid.csv")
    model = lumber.load(str(files / "model.txt"))
    Xv = valid[["a", "b", "c", "d"]].to_numpy()
    assert np.array_equal(pred.predict(Xv), model.predict(Xv))  # exact form or cascade: same decisions here


@pytest.mark.parametrize("drop, message", [
    ("--label", "the one column that is not a feature is 'label'"), ("--valid", "--valid"), ("--train", "--train"),
    ("--optimize", "--tolerance applies with --optimize speed")])
def test_tolerance_bad_inputs(files: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], drop: str,
                              message: str) -> None:
    args = {"--optimize": "speed", "--tolerance": "0.001", "--train": str(files / "train.csv"),
            "--valid": str(files / "valid.csv"), "--label": "label"}
    args.pop(drop)
    argv = ["compile", str(files / "model.txt"), "--emit", "c", "-o", str(tmp_path / "x.so")]
    for k, v in args.items():
        argv += [k, v]
    assert main(argv) != 0
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err
    assert not (tmp_path / "x.so").exists()


def test_agreement_needs_a_tolerance(files: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["compile", str(files / "model.txt"), "--emit", "c", "--optimize", "speed", "--agreement", "0.99",
            "-o", str(tmp_path / "x.so")]
    assert main(argv) != 0
    err = capsys.readouterr().err
    assert "--agreement applies with --tolerance" in err and "Traceback" not in err
    assert not (tmp_path / "x.so").exists()


def test_a_label_column_that_is_missing_is_named(files: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["compile", str(files / "model.txt"), "--emit", "c", "--optimize", "speed", "--tolerance", "0.001",
            "--train", str(files / "train.csv"), "--valid", str(files / "valid.csv"), "--label", "income",
            "-o", str(tmp_path / "x.so")]
    assert main(argv) != 0
    err = capsys.readouterr().err
    assert "income" in err and "Traceback" not in err
