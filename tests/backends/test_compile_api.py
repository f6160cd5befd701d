"""``lumber.compile``, ``load_compiled`` and ``lumber compile``: predictors, artifacts, staleness, errors."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from cases import CASES, corpus
from c_tools import needs_cc

import lumber
from lumber.compiler.api.compile import TARGETS, load_compiled
from lumber.compiler.cli import main
from lumber.ir import CompileError, Forest, InputDataError, ModelFormatError


@pytest.fixture(scope="module")
def multiclass() -> Forest:
    return CASES["multiclass"]()


@pytest.fixture(scope="module")
def c_pred(multiclass: Forest, tmp_path_factory: pytest.TempPathFactory,
           c_compiler: str) -> lumber.runtime.predictors.CPredictor:
    return lumber.compile(multiclass, target="c", path=tmp_path_factory.mktemp("api") / "mc.so")


@pytest.mark.parametrize("target", ["numpy", "c-source", "onnx", "c"])
def test_predictor_answers_like_the_forest(target: str, multiclass: Forest, c_pred: object) -> None:
    pred = c_pred if target == "c" else lumber.compile(multiclass, target=target)
    X = corpus(multiclass)
    np.testing.assert_array_equal(pred.predict_raw(X), multiclass.evaluate(X))
    np.testing.assert_array_equal(pred.predict_proba(X), multiclass.predict_proba(X))
    np.testing.assert_array_equal(pred.predict(X), multiclass.predict(X))
    assert pred.target == target and len(pred.fingerprint) == 64


def test_c_predictor_extras(c_pred: lumber.runtime.predictors.CPredictor, multiclass: Forest) -> None:
    X = corpus(multiclass)
    np.testing.assert_array_equal(c_pred.predict_row(X[3]), multiclass.evaluate(X[3:4])[0])
    # the direct path (float64 arrays) and the converting one (views, lists, float32) agree
    ref = multiclass.evaluate(X)
    F = multiclass.n_features
    wide = np.repeat(X, 2, axis=1)
    for i in (0, 5, len(X) - 1):
        np.testing.assert_array_equal(c_pred.predict_row(wide[i, ::2]), ref[i])
        np.testing.assert_array_equal(c_pred.predict_row(X[i].tolist()), ref[i])
        got = c_pred.predict_row(X[i])
        assert got.shape == (multiclass.n_outputs,) and got.dtype == np.float64 and got.flags.writeable
    np.testing.assert_array_equal(c_pred.predict_row(X[2].astype(np.float32)),
                                  multiclass.evaluate(X[2:3].astype(np.float32))[0])
    with pytest.raises(ValueError, match=f"vector of {F} values"):
        c_pred.library.predict_row(X[:2])
    np.testing.assert_array_equal(c_pred.apply(X), multiclass.apply(X))
    np.testing.assert_array_equal(c_pred.predict_raw(X, threads=2), multiclass.evaluate(X))
    assert "lumber_predict_raw" in c_pred.source
    import pandas as pd

    frame = pd.DataFrame(X[:, ::-1], columns=["x1", "x0"])  # columns matched by name
    np.testing.assert_array_equal(c_pred.predict_raw(frame), multiclass.evaluate(X))


def test_bad_rows_are_input_errors(c_pred: lumber.runtime.predictors.CPredictor) -> None:
    with pytest.raises(InputDataError, match="data has 3 columns but the model reads 2 features"):
        c_pred.predict_raw(np.zeros((4, 3)))
    with pytest.raises(InputDataError, match="non-numeric"):
        c_pred.predict_raw([["a", "b"]])


def test_unknown_target() -> None:
    with pytest.raises(CompileError, match="unknown target 'wasm'"):
        lumber.compile(CASES["numeric_nan"](), target="wasm")
    assert {"c", "c-source", "onnx", "numpy"} <= set(TARGETS)


@needs_cc
def test_saved_library_reloads_and_detects_staleness(c_pred: lumber.runtime.predictors.CPredictor,
                                                     multiclass: Forest, tmp_path: Path) -> None:
    path = c_pred.save(tmp_path / "copy.so")
    again = load_compiled(path, multiclass)
    X = corpus(multiclass)
    np.testing.assert_array_equal(again.predict_raw(X), multiclass.evaluate(X))
    other = CASES["numeric_nan"]()
    with pytest.raises(CompileError, match="stale artifact"):
        load_compiled(path, other)


def test_onnx_artifact_reloads_and_detects_staleness(multiclass: Forest, tmp_path: Path) -> None:
    lumber.compile(multiclass, target="onnx", path=tmp_path / "m.onnx")
    pred = load_compiled(tmp_path / "m.onnx", multiclass)
    X = corpus(multiclass)
    np.testing.assert_array_equal(pred.predict_raw(X), multiclass.evaluate(X))
    with pytest.raises(CompileError, match="stale artifact"):
        load_compiled(tmp_path / "m.onnx", CASES["numeric_nan"]())
    (tmp_path / "junk.onnx").write_bytes(b"\x08\x01garbage")
    with pytest.raises(ModelFormatError, match="junk.onnx"):
        load_compiled(tmp_path / "junk.onnx")
    with pytest.raises(ModelFormatError, match="no such file"):
        load_compiled(tmp_path / "absent.onnx")


@needs_cc
def test_library_at_path_is_reused_only_when_fresh(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import lumber.compiler.targets.library as cbackend  # where the c target calls the compiler

    f = CASES["numeric_nan"]()
    path = tmp_path / "m.so"
    lumber.compile(f, target="c", path=path)
    calls: list[int] = []
    real = cbackend.build_shared
    monkeypatch.setattr(cbackend, "build_shared", lambda *a, **k: (calls.append(1), real(*a, **k))[1])
    lumber.compile(f, target="c", path=path)
    assert calls == []  # same fingerprint: no rebuild
    g = CASES["single_leaves"]()
    pred = lumber.compile(g, target="c", path=path)
    assert calls == [1]  # different model: rebuilt in place
    assert load_compiled(path, g).fingerprint == pred.fingerprint


def test_c_source_writes_source_and_header(tmp_path: Path) -> None:
    pred = lumber.compile(CASES["numeric_nan"](), target="c-source", path=tmp_path / "m.c",
                          options=lumber.CSourceOptions(prefix="nan_model"))
    assert (tmp_path / "m.c").read_text() == pred.source
    assert "nan_model_predict_row" in (tmp_path / "m.h").read_text()


def test_options_of_another_target_are_an_error_naming_the_right_class() -> None:
    """Each target takes its own options dataclass; anything else is refused, never dropped unseen."""
    f = CASES["numeric_nan"]()
    for target, wrong, right in [("onnx", lumber.TableOptions(), "OnnxOptions"),
                                 ("onnx", lumber.COptions(march_native=True), "OnnxOptions"),
                                 ("c", lumber.CSourceOptions(), "COptions"),
                                 ("c-source", lumber.COptions(), "CSourceOptions"),
                                 ("table", lumber.TableCOptions(), "TableOptions"),
                                 ("table-c", lumber.TableOptions(), "TableCOptions"),
                                 ("numpy", {"exact": False}, "NumpyOptions"),
                                 ("c", lumber.FastestOptions(), "COptions")]:
        with pytest.raises(CompileError, match=f"target '{target}' takes lumber.{right}, not {type(wrong).__name__}"):
            lumber.compile(f, target=target, options=wrong)
    assert lumber.compile(f, target="onnx", options=lumber.OnnxOptions(opset=5)).fingerprint


def test_c_options_for_tables_carry_over_or_say_why_not() -> None:
    """Target ``c`` builds oblivious tables as ``table-c``: the shared options carry over; a forest-walk option
    (``unroll``, ``block``, ``walk``) set away from its default is an error, never dropped."""
    from lumber.compiler.targets.base import project

    opts = project(lumber.COptions(prefix="obl", cc="gcc"), lumber.TableCOptions)
    assert (opts.prefix, opts.cc) == ("obl", "gcc")
    with pytest.raises(CompileError, match="walk of COptions does not apply to TableCOptions"):
        project(lumber.COptions(walk="values"), lumber.TableCOptions)
    fast = lumber.FastestOptions(prefix="p", walk="values", strategy="grow", march_native=True)
    assert fast.forest_options() == lumber.COptions(prefix="p", walk="values", march_native=True)
    assert fast.table_options() == lumber.TableCOptions(prefix="p", strategy="grow", march_native=True)


# -- CLI ----------------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def lgb_file(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, np.ndarray]:
    import lightgbm as lgb
    from sklearn.datasets import load_diabetes

    X, y = load_diabetes(return_X_y=True)
    X = X.copy()
    X[::11, 2] = np.nan
    bst = lgb.train({"objective": "regression", "num_leaves": 7, "verbose": -1, "num_threads": 1},
                    lgb.Dataset(X, y), 10)
    path = tmp_path_factory.mktemp("cli") / "diabetes.txt"
    bst.save_model(str(path))
    return path, X


def test_cli_compile_onnx_and_c_source(lgb_file: tuple[Path, np.ndarray], tmp_path: Path,
                                       capsys: pytest.CaptureFixture[str]) -> None:
    path, X = lgb_file
    forest = lumber.load(path)
    assert main(["compile", str(path), "--emit", "onnx", "-o", str(tmp_path / "d.onnx")]) == 0
    assert "wrote" in capsys.readouterr().out
    np.testing.assert_array_equal(load_compiled(tmp_path / "d.onnx", path).predict_raw(X), forest.evaluate(X))
    assert main(["compile", str(path), "--emit", "c-source", "-o", str(tmp_path / "d.c"), "--prefix", "diab"]) == 0
    assert "diab_predict_raw" in (tmp_path / "d.h").read_text()


@needs_cc
def test_cli_compile_c(lgb_file: tuple[Path, np.ndarray], tmp_path: Path) -> None:
    path, X = lgb_file
    assert main(["compile", str(path), "-o", str(tmp_path / "d.so")]) == 0
    np.testing.assert_array_equal(load_compiled(tmp_path / "d.so", path).predict_raw(X), lumber.load(path).evaluate(X))


def test_cli_passes_emit_lumber_then_compile_it(lgb_file: tuple[Path, np.ndarray], tmp_path: Path,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    path, X = lgb_file
    assert main(["compile", str(path), "--passes", "polynomial", "--time-passes", "-o", str(tmp_path / "p.lumber")]) == 0
    out = capsys.readouterr()
    assert "wrote" in out.out and "polynomial" in out.err
    poly = lumber.ir.load_ir(tmp_path / "p.lumber")
    np.testing.assert_allclose(poly.evaluate(X), lumber.load(path).evaluate(X), rtol=1e-12)
    # a Polynomial (here from the pipeline, or a .lumber file) compiles as its exact oblivious tables
    assert main(["compile", str(path), "--passes", "polynomial", "--emit", "c", "-o", str(tmp_path / "p.so")]) == 0
    assert "oblivious form" in capsys.readouterr().out
    assert main(["compile", str(tmp_path / "p.lumber"), "--emit", "onnx", "-o", str(tmp_path / "p.onnx")]) == 0
    capsys.readouterr()
    for name in ("p.so", "p.onnx"):
        pred = load_compiled(tmp_path / name, poly)
        np.testing.assert_allclose(pred.predict_raw(X).reshape(-1), poly.evaluate(X), rtol=1e-12)


def test_cli_errors(tmp_path: Path, capsys: pytest.CaptureFixture[str], lgb_file: tuple[Path, np.ndarray]) -> None:
    assert main(["compile", str(tmp_path / "absent.txt")]) == 2
    assert "no such file" in capsys.readouterr().err
    path, _ = lgb_file
    assert main(["compile", str(path), "--emit", "onnx", "-o", str(tmp_path)]) == 2
    assert "is a directory" in capsys.readouterr().err
    assert main(["compile", str(path), "--emit", "onnx", "--opset", "3", "-o", str(tmp_path / "x.onnx")]) == 2
    assert "always returns float32" in capsys.readouterr().err
    assert main(["compile", str(path), "--time-passes", "--emit", "onnx", "-o", str(tmp_path / "x.onnx")]) == 2
    assert "--time-passes needs --passes" in capsys.readouterr().err
    # a flag for another artifact is refused, never ignored
    for flags, emit in ([["--march-native"], "onnx"], [["--opset", "3"], "c"], [["--inexact"], "c"],
                        [["--strategy", "grow"], "onnx"], [["--no-openmp", "--cc", "gcc"], "table"]):
        assert main(["compile", str(path), "--emit", emit, *flags, "-o", str(tmp_path / "x.out")]) == 2
        assert f"not apply to --emit {emit}" in capsys.readouterr().err
    assert not (tmp_path / "x.out").exists()


@needs_cc
def test_target_c_hashes_the_ir_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The fingerprint (a hash of the whole serialized IR) is computed once per ``lumber.compile``."""
    import lumber.backends.base as base

    f = CASES["numeric_nan"]()
    calls: list[int] = []
    real = base.to_bytes
    monkeypatch.setattr(base, "to_bytes", lambda ir: (calls.append(1), real(ir))[1])
    pred = lumber.compile(f, target="c", path=tmp_path / "m.so")
    assert calls == [1] and pred.fingerprint == base.fingerprint(f)


@pytest.mark.parametrize("target", [t for t in TARGETS if t != "c-source"])
def test_every_ir_object_compiles_to_every_target(lgb_file: tuple[Path, np.ndarray], target: str) -> None:
    """In memory: a Polynomial (unpruned and pruned) and an ObliviousEnsemble go through lumber.compile
    for every target and give that IR's own margins; artifacts record the IR they stand for."""
    path, X = lgb_file
    poly = lumber.run(path, "polynomial")
    pruned = poly.select(np.arange(poly.n_monomials // 2))
    ens = lumber.run(poly, "oblivious")
    for ir in (poly, pruned, ens):
        pred = lumber.compile(ir, target=target)
        np.testing.assert_allclose(pred.predict_raw(X).reshape(-1), ir.evaluate(X), rtol=1e-12, atol=1e-9)


def test_c_predict_row_of_a_float32_model_rounds_as_batches_do() -> None:
    from cases import float32_average

    f = float32_average()
    pred = lumber.compile(f, target="c")
    X = corpus(f)
    ref = f.evaluate(X)
    for i in range(0, len(X), 3):
        np.testing.assert_array_equal(pred.predict_row(X[i]), ref[i])
        np.testing.assert_array_equal(pred.predict_row(X[i].astype(np.float32)), ref[i])


def test_rows_check_and_threaded_conversion_match_elementwise() -> None:
    """as_rows: the max/min check refuses exactly what isnan/isinf refuse, and converting on threads
    gives the serial conversion bit for bit (float32 rounding and overflow to inf included)."""
    import itertools
    from dataclasses import replace

    from cases import numeric_nan

    from lumber.runtime.predictors import PARALLEL_CONVERT_ROWS, _values_accepted, as_rows

    schema = numeric_nan().schema
    rng = np.random.default_rng(0)
    for trial in range(300):
        r = rng.normal(size=(int(rng.integers(1, 6)), 3)).astype(np.float32 if trial % 2 else np.float64)
        for v in rng.choice([np.nan, np.inf, -np.inf, 0.0], size=int(rng.integers(0, 3))):
            r.flat[int(rng.integers(0, r.size))] = v
        for nan, inf in itertools.product([False, True], repeat=2):
            want = not ((not nan and np.isnan(r).any()) or (not inf and np.isinf(r).any()))
            assert _values_accepted(replace(schema, allow_nan=nan, allow_inf=inf), r) == want
    X = rng.normal(size=(PARALLEL_CONVERT_ROWS + 777, schema.n_features)) * 10.0 ** rng.integers(-50, 50, (1, 1))
    X[::97, 0] = 1e39  # overflows float32
    X[::89, -1] = np.nan
    for dtype in (np.float32, np.float64):
        serial = as_rows(schema, X, np.dtype(dtype))
        for src in (X, np.asfortranarray(X)):
            par = as_rows(schema, src, np.dtype(dtype), threads=3)
            assert par.flags.c_contiguous and par.dtype == dtype
            np.testing.assert_array_equal(par, serial)
