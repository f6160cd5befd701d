"""CLI basics on a saved IR file: inspect, predict, and clear errors with non-zero exits."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from builders import categorical, make_forest
from lumber.compiler.cli import main
from lumber.ir import PostTransform, Task


@pytest.fixture
def model_file(tmp_path: Path) -> Path:
    f = make_forest([("a", 0.5, -1.0, ("c", {1, 2}, 0.5, 2.0)), ("a", 1.5, 0.25, -0.25)],
                    ["a", categorical("c", ["x", "y", "z"])], task=Task.BINARY,
                    post_transform=PostTransform.SIGMOID, classes=[0, 1])
    p = tmp_path / "m.lumber"
    f.save(p)
    return p


def test_inspect(model_file: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["inspect", str(model_file)]) == 0
    out = capsys.readouterr().out
    assert "trees      2" in out and "categorical splits 1" in out


def test_inspect_describes_polynomial_ir_files(model_file: Path, tmp_path: Path,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    poly = tmp_path / "p.lumber"
    assert main(["compile", str(model_file), "--passes", "polynomial", "-o", str(poly)]) == 0
    capsys.readouterr()
    assert main(["inspect", str(poly)]) == 0
    out = capsys.readouterr().out
    assert "(Polynomial IR)" in out and "category conditions    2" in out and "monomials              4" in out
    assert main(["inspect", str(poly), "--json"]) == 0
    assert '"kind": "Polynomial"' in capsys.readouterr().out


def test_predict_matches_evaluate(model_file: Path, tmp_path: Path) -> None:
    data = tmp_path / "d.csv"
    pd.DataFrame({"c": ["y", "x", "z"], "a": [1.0, 0.2, np.nan]}).to_csv(data, index=False)
    out = tmp_path / "p.csv"
    assert main(["predict", str(model_file), str(data), "-o", str(out)]) == 0
    got = pd.read_csv(out)
    # row 0: a=1 > .5, c=y(1) in {1,2} -> .5 ; second tree a<=1.5 -> .25
    assert got["raw"].tolist() == [0.75, -0.75, 0.25]  # NaN goes right, z is in {y, z}
    assert got["prediction"].tolist() == [1, 0, 1]


@pytest.mark.parametrize("passes", ["polynomial", "polynomial,oblivious", "polynomial,oblivious,quantize"])
def test_every_ir_file_predicts_compiles_and_loads(model_file: Path, tmp_path: Path, passes: str,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    """A Polynomial or ObliviousEnsemble file (categories included) is a model like any other:
    ``lumber predict`` (its own evaluator), ``lumber compile`` to every target, ``lumber.load``
    (its exact Forest), ``lumber inspect``; all give the source model's margins."""
    import lumber
    from lumber.compiler.api.compile import load_compiled

    ir_file = tmp_path / "ir.lumber"
    assert main(["compile", str(model_file), "--passes", passes, "-o", str(ir_file)]) == 0
    data = tmp_path / "d.csv"
    pd.DataFrame({"c": ["y", "x", "z", "y"], "a": [1.0, 0.2, np.nan, 1.6]}).to_csv(data, index=False)
    out = tmp_path / "p.csv"
    assert main(["predict", str(ir_file), str(data), "-o", str(out)]) == 0
    got = pd.read_csv(out)
    assert np.allclose(got["raw"], [0.75, -0.75, 0.25, 0.25], rtol=0, atol=1e-12)
    assert got["prediction"].tolist() == [1, 0, 1, 1]
    X = lumber.load(model_file).prepare_input(pd.read_csv(data))
    ref = lumber.load(model_file).evaluate(X)
    np.testing.assert_allclose(lumber.load(ir_file).evaluate(X), ref, rtol=0, atol=1e-12)
    assert main(["inspect", str(ir_file)]) == 0
    for emit, suffix in (("c", ".so"), ("table", ".table"), ("table-c", ".so"), ("onnx", ".onnx")):
        art = tmp_path / f"m-{emit}{suffix}"
        assert main(["compile", str(ir_file), "--emit", emit, "-o", str(art)]) == 0, capsys.readouterr().err
        pred = load_compiled(art, ir_file)
        np.testing.assert_allclose(pred.predict_raw(X).reshape(-1), ref, rtol=0, atol=1e-12)
    capsys.readouterr()


@pytest.mark.parametrize("passes", ["polynomial", "polynomial,oblivious{strategy=grow}", "polynomial,oblivious,quantize"])
def test_explain_takes_ir_files(model_file: Path, tmp_path: Path, passes: str,
                                capsys: pytest.CaptureFixture[str]) -> None:
    """``lumber explain`` on a Polynomial or ObliviousEnsemble file explains the function it holds (the
    source's, exactly): the same optimal counterfactual costs, sensitive-test distances and attributions
    as on the source model, every one verified; a compiled artifact is refused with what to give instead."""
    ir_file = tmp_path / "ir.lumber"
    assert main(["compile", str(model_file), "--passes", passes, "-o", str(ir_file)]) == 0
    data = tmp_path / "d.csv"
    pd.DataFrame({"c": ["y", "x", "z"], "a": [1.0, 0.2, 1.6]}).to_csv(data, index=False)
    docs = {}
    for m in (model_file, ir_file):
        out = tmp_path / f"{m.stem}.json"
        assert main(["explain", str(m), str(data), "--counterfactual", "--sensitive", "--attribution", "-q",
                     "-o", str(out)]) == 0, capsys.readouterr().err
        docs[m.stem] = json.loads(out.read_text())["analyses"]
    src, ir = docs[model_file.stem], docs[ir_file.stem]
    for name, key in (("counterfactual", "cost"), ("sensitive", "distance")):
        assert len(ir[name]["cases"]) == 3
        np.testing.assert_allclose([c[key] for c in ir[name]["cases"]], [c[key] for c in src[name]["cases"]],
                                   rtol=1e-9)
    assert all(c["verified"] for c in ir["sensitive"]["cases"])
    nu = {f["feature"]: f["nu"] for o in src["attribution"]["outputs"] for f in o["features"]}
    assert {f["feature"]: pytest.approx(f["nu"], abs=1e-12) for o in ir["attribution"]["outputs"]
            for f in o["features"]} == nu
    art = tmp_path / "m.table"
    assert main(["compile", str(ir_file), "--emit", "table", "-o", str(art)]) == 0
    capsys.readouterr()
    assert main(["explain", str(art), str(data), "--counterfactual"]) == 2
    err = capsys.readouterr().err
    assert "a compiled artifact (oblivious decision tables), not a model" in err and "Traceback" not in err


@pytest.mark.parametrize("content,msg", [
    (b"", "file is empty"), (b"hello world", "unrecognised model file format"),
    (b"PK\x03\x04garbage", "not a lumber IR file"),
])
def test_bad_model_files(tmp_path: Path, capsys: pytest.CaptureFixture[str], content: bytes, msg: str) -> None:
    p = tmp_path / "bad.model"
    p.write_bytes(content)
    assert main(["inspect", str(p)]) == 2
    err = capsys.readouterr().err
    assert msg in err and "Traceback" not in err


def test_missing_file_and_bad_data(model_file: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["inspect", str(tmp_path / "nope.txt")]) == 2
    assert "no such file" in capsys.readouterr().err
    data = tmp_path / "d.csv"
    pd.DataFrame({"a": [1.0], "c": ["w"]}).to_csv(data, index=False)
    assert main(["predict", str(model_file), str(data)]) == 2
    assert "unknown category 'w'" in capsys.readouterr().err
    pd.DataFrame({"q": [1.0]}).to_csv(data, index=False)
    assert main(["predict", str(model_file), str(data)]) == 2
    err = capsys.readouterr().err
    assert "2 of the model's 2 features have no column: 'a', 'c'" in err and "d.csv:1:1" in err


def test_unwritable_output(model_file: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    data = tmp_path / "d.csv"
    pd.DataFrame({"a": [1.0], "c": ["y"]}).to_csv(data, index=False)
    assert main(["predict", str(model_file), str(data), "-o", str(tmp_path / "no" / "dir" / "p.csv")]) == 2
    err = capsys.readouterr().err  # one rule everywhere: the folder of an output file must exist
    assert f"the folder '{tmp_path / 'no' / 'dir'}' does not exist" in err and "mkdir -p" in err, err
    assert not (tmp_path / "no").exists()
    assert main(["predict", str(model_file), str(data), "-o", str(data / "p.csv")]) == 2
    assert "is a file, not a folder" in capsys.readouterr().err
    assert main(["predict", str(model_file), str(data), "-o", str(tmp_path)]) == 2
    assert "is a directory" in capsys.readouterr().err
