"""Table backend: file format round trip and corruption, numpy vs C table evaluators vs the IR, compile API, CLI."""

from __future__ import annotations

import struct
import zlib
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings

from c_tools import needs_cc
from oblivious_strategies import ensembles, rows

import lumber
from lumber.backends.table import HEADER, TableEvaluator, check, decode_table, encode_table, read_table
from lumber.compiler.api.compile import load_compiled
from lumber.compiler.cli import main
from lumber.ir import CompileError, ModelFormatError, ObliviousEnsemble, Schema, Task, default_features
from lumber.passes.transforms.quantize import quantize_ensemble


def quantized(e: ObliviousEnsemble) -> ObliviousEnsemble:
    return quantize_ensemble(e).validate()


@given(ensembles(float32_sums=False, bins=True))
def test_format_round_trip(e: ObliviousEnsemble) -> None:
    q = quantized(e)
    data = encode_table(q)
    tf = decode_table(data)
    for name, _ in ObliviousEnsemble.ARRAY_FIELDS:
        np.testing.assert_array_equal(getattr(tf.ensemble, name), getattr(q, name), err_msg=name)
    assert tf.ensemble.schema == q.schema and encode_table(tf.ensemble) == data
    X = rows(e.n_features)
    np.testing.assert_array_equal(TableEvaluator(tf.ensemble).predict_raw(X), e.evaluate(X))
    np.testing.assert_array_equal(TableEvaluator(q).apply(X), e.apply(X))


def small() -> ObliviousEnsemble:
    schema = Schema(features=default_features(2), task=Task.REGRESSION, n_outputs=1, base_score=(0.25,))
    return quantized(ObliviousEnsemble(
        schema=schema, depth=np.array([2, 1]), level_feature=np.array([0, 1, 1]),
        level_threshold=np.array([0.0, 1.0, 2.0]), level_nan_true=np.array([False, True, True]),
        tree_output=np.array([0, 0]), value=np.array([1.0, 2.0, 3.0, 4.0, 5.0, 6.0])))


def test_corrupt_files_are_refused(tmp_path: Path) -> None:
    data = encode_table(small())
    with pytest.raises(ModelFormatError, match="bad magic"):
        decode_table(b"NOTATABLE" + data[9:], "m.table")
    with pytest.raises(ModelFormatError, match="m.table: checksum mismatch"):
        decode_table(data[:-3], "m.table")
    flipped = bytearray(data)
    flipped[-1] ^= 0xFF
    with pytest.raises(ModelFormatError, match="checksum mismatch"):
        decode_table(bytes(flipped), "m.table")
    v2 = data[:8] + struct.pack("<I", 2) + data[12:]
    with pytest.raises(ModelFormatError, match="version 2 is not supported"):
        decode_table(v2, "m.table")
    # a consistent checksum over an inconsistent body: the level table points past the borders
    fields = list(HEADER.unpack_from(data))
    body = bytearray(data[HEADER.size:])
    level_bin_at = len(body) - 6 * 8 - 16  # the last sections: level_bin (3 x int32, padded to 16), value (6 x f8)
    body[level_bin_at:level_bin_at + 4] = struct.pack("<i", 7)
    fields[-1] = zlib.crc32(body)
    with pytest.raises(ModelFormatError, match="level bin out of range|invalid tables"):
        decode_table(HEADER.pack(*fields) + bytes(body), "m.table")
    with pytest.raises(ModelFormatError, match="no such file"):
        read_table(tmp_path / "missing.table")


def test_unquantized_or_float32_sums_are_refused() -> None:
    e = small()
    raw = e.replace(col_feature=None, col_nan_bin=None, border_offset=None, border=None, level_col=None, level_bin=None)
    assert "quantize" in " ".join(d.notes[0] for d in check(raw))
    with pytest.raises(CompileError, match="no bins"):
        encode_table(raw)
    with pytest.raises(CompileError, match="tables sum in float64"):
        TableEvaluator(e.replace(schema=e.schema.with_(accumulate_dtype="float32")))


# -- the C table evaluator ----------------------------------------------------------------------------


@needs_cc
@settings(max_examples=20)
@given(ensembles(max_depth=11, max_trees=4, float32_sums=False, bins=True))
def test_c_runtime_equals_numpy_bit_for_bit(e: ObliviousEnsemble) -> None:
    from lumber.backends.table_c import TableRuntime

    q = quantized(e)
    rt = TableRuntime(q)
    X = rows(e.n_features, 700)
    Xc = np.ascontiguousarray(q.prepare_input(X), dtype=rt.dtype)
    expected = q.evaluate(X).reshape(len(X), -1)
    np.testing.assert_array_equal(rt.predict_raw(Xc), expected)
    np.testing.assert_array_equal(rt.predict_raw(Xc, threads=2), expected)
    np.testing.assert_array_equal(rt.apply(Xc), q.apply(X))
    np.testing.assert_allclose(rt.predict_raw(Xc, transformed=True), q.schema.transform(expected), rtol=1e-12)
    for part in (slice(5, 6), slice(7, 10), slice(0, 290)):  # the single-row path, short and partial blocks
        np.testing.assert_array_equal(rt.predict_raw(np.ascontiguousarray(Xc[part])), expected[part])
        np.testing.assert_array_equal(rt.apply(np.ascontiguousarray(Xc[part])), q.apply(X[part]))


@needs_cc
@settings(max_examples=20)
@given(ensembles(max_depth=10, max_trees=6, float32_sums=False, bins=True, value_pool=5))
def test_c_runtime_dictionaries_equal_numpy_bit_for_bit(e: ObliviousEnsemble) -> None:
    """Few distinct cell values: trees read byte codes and their distinct values (the fused paths), next
    to trees without (vector trees, small ones); sums in the numpy evaluator's order, -0.0 kept."""
    from lumber.backends.table_c import TableRuntime

    q = quantized(e)
    rt = TableRuntime(q)
    X = rows(e.n_features, 700)
    Xc = np.ascontiguousarray(q.prepare_input(X), dtype=rt.dtype)
    expected = q.evaluate(X).reshape(len(X), -1)
    for part in (slice(0, 700), slice(3, 4), slice(0, 33), slice(1, 290)):
        got = rt.predict_raw(np.ascontiguousarray(Xc[part]))
        np.testing.assert_array_equal(got, expected[part])
        np.testing.assert_array_equal(np.signbit(got), np.signbit(expected[part]))
    np.testing.assert_array_equal(rt.predict_raw(Xc, threads=2), expected)
    np.testing.assert_array_equal(rt.apply(Xc), q.apply(X))


@needs_cc
def test_dictionaries_of_distinct_cell_values() -> None:
    """Which trees get a dictionary (<= 256 distinct values, one output, at most half the table's bytes)
    and that code -> value gives every cell back bit for bit; the runtime mixes both kinds in one group."""
    from lumber.backends.table_c import TableRuntime, dictionary_arrays

    rng = np.random.default_rng(5)
    schema = Schema(features=default_features(3), task=Task.REGRESSION, n_outputs=1, base_score=(0.5,))
    depth = np.array([10, 10, 2, 6, 10, 10])
    pools = [rng.normal(size=40), rng.normal(size=257), rng.normal(size=4), np.array([-0.0, 0.0, 1.5]),
             np.array([0.0, -0.0]), rng.normal(size=256)]
    # every pool value present: 257 distinct values are one too many, 256 fit a byte
    value = np.concatenate([rng.permutation(np.concatenate([p, rng.choice(p, size=(1 << d) - len(p))]))
                            for p, d in zip(pools, depth)])
    L = int(depth.sum())
    e = ObliviousEnsemble(schema=schema, depth=depth, level_feature=rng.integers(0, 3, L),
                          level_threshold=rng.normal(size=L), level_nan_true=rng.random(L) < 0.5,
                          tree_output=np.zeros(6, dtype=np.int32), value=value).validate()
    q = quantized(e)
    d = dictionary_arrays(q)
    assert d is not None
    has = np.diff(d["dict_offset"]) > 0
    np.testing.assert_array_equal(has, [True, False, False, True, True, True])
    for t in np.flatnonzero(has):
        lo, hi = q.value_offset[t], q.value_offset[t + 1]
        back = d["dict_value"][d["dict_offset"][t] + d["cell_code"][lo:hi].astype(np.int64)]
        np.testing.assert_array_equal(back.view(np.int64), q.value[lo:hi].view(np.int64))
    X = rng.normal(size=(5000, 3))
    X[rng.random(X.shape) < 0.05] = np.nan
    rt = TableRuntime(q)
    for n in (5000, 1, 31, 257):
        np.testing.assert_array_equal(rt.predict_raw(X[:n])[:, 0], e.evaluate(X[:n]))
    np.testing.assert_array_equal(rt.predict_raw(X, threads=2)[:, 0], e.evaluate(X))


@needs_cc
def test_c_runtime_wide_bins_and_deep_trees() -> None:
    """More than 255 borders on a column (16-bit bins) and a depth-17 tree (32-bit indices)."""
    from lumber.backends.table_c import TableRuntime, bin_type

    rng = np.random.default_rng(3)
    schema = Schema(features=default_features(3), task=Task.REGRESSION, n_outputs=1, base_score=(0.0,))
    thr = np.concatenate([np.linspace(-3, 3, 300), rng.normal(size=17)])
    feat = np.concatenate([np.zeros(300, dtype=np.int64), rng.integers(1, 3, 17)])
    depth = np.concatenate([np.full(100, 3), [17]])
    e = ObliviousEnsemble(schema=schema, depth=depth, level_feature=feat, level_threshold=thr,
                          level_nan_true=(rng.random(317) < 0.5) & (feat > 0), tree_output=np.zeros(101, dtype=np.int32),
                          value=rng.normal(size=100 * 8 + (1 << 17)))
    q = quantized(e.validate())
    assert bin_type(q) == "uint16_t"
    X = rng.normal(size=(2000, 3)) * 2
    X[rng.random(X.shape) < 0.05] = np.nan
    rt = TableRuntime(q)
    np.testing.assert_array_equal(rt.predict_raw(X)[:, 0], e.evaluate(X))
    np.testing.assert_array_equal(rt.apply(X), e.apply(X))


@pytest.fixture(scope="module")
def lgb_model(tmp_path_factory: pytest.TempPathFactory) -> tuple[Any, Path, np.ndarray]:
    import lightgbm as lgb
    from sklearn.datasets import load_breast_cancer

    X, y = load_breast_cancer(return_X_y=True)
    X = X.copy()
    X[np.random.default_rng(1).random(X.shape) < 0.05] = np.nan
    bst = lgb.train({"objective": "binary", "num_leaves": 7, "max_depth": 3, "verbose": -1, "num_threads": 1,
                     "seed": 0}, lgb.Dataset(X, y), 12)
    path = tmp_path_factory.mktemp("tables") / "model.txt"
    bst.save_model(str(path))
    return bst, path, X


@needs_cc
def test_emitted_library_speaks_the_c_backend_abi(lgb_model: tuple[Any, Path, np.ndarray], tmp_path: Path) -> None:
    from lumber.backends.c import BuildOptions, CLibrary, build_shared
    from lumber.backends.table_c import TableCEmitOptions, emit_table_source
    from lumber.compiler.tables import to_tables

    bst, _, X = lgb_model
    ens = to_tables(lumber.load(bst))
    art = emit_table_source(ens, TableCEmitOptions(prefix="obl", name="m"))
    assert emit_table_source(ens, TableCEmitOptions(prefix="obl", name="m")).files == art.files  # deterministic
    build_shared(art.text(), tmp_path / "m.so", BuildOptions(warnings_as_errors=True))
    lib = CLibrary(tmp_path / "m.so", prefix="obl")
    assert lib.metadata["form"] == "oblivious" and lib.n_trees == ens.n_trees
    expected = ens.evaluate(X)
    np.testing.assert_array_equal(lib.predict_raw(X, threads=2)[:, 0], expected)
    np.testing.assert_array_equal(lib.predict_row(X[3]), expected[3:4])
    np.testing.assert_array_equal(lib.apply(X), ens.apply(X))
    np.testing.assert_allclose(lib.predict_transformed(X)[:, 0], bst.predict(X), rtol=1e-12)
    np.testing.assert_allclose(expected, bst.predict(X, raw_score=True), rtol=1e-12, atol=1e-12)


# -- lumber.compile and lumber compile ------------------------------------------------------------------


def test_compile_table_target_and_load(lgb_model: tuple[Any, Path, np.ndarray], tmp_path: Path) -> None:
    bst, path, X = lgb_model
    pred = lumber.compile(bst, target="table", path=tmp_path / "m.table")
    assert pred.target == "table" and (tmp_path / "m.table").read_bytes()[:8] == b"LUMBTAB\0"
    raw = bst.predict(X, raw_score=True)
    np.testing.assert_allclose(pred.predict_raw(X), raw, rtol=1e-12, atol=1e-12)
    np.testing.assert_array_equal(pred.predict(X), (bst.predict(X) > 0.5).astype(int))
    back = load_compiled(tmp_path / "m.table", bst)
    np.testing.assert_array_equal(back.predict_raw(X), pred.predict_raw(X))
    other = lumber.load(bst).replace(schema=lumber.load(bst).schema.with_(base_score=(1.0,)))
    with pytest.raises(CompileError, match="stale artifact"):
        load_compiled(tmp_path / "m.table", other)
    assert pred.report["tables"]["method"] == "re-composition"


def test_without_a_compiler_tables_use_numpy(lgb_model: tuple[Any, Path, np.ndarray],
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    import lumber.backends.table_c as table_c

    def no_cc(*_: Any, **__: Any) -> Any:
        raise CompileError("no C compiler found")

    monkeypatch.setattr(table_c, "TableRuntime", no_cc)
    bst, _, X = lgb_model
    pred = lumber.compile(bst, target="table")
    assert pred.engine == "numpy"
    np.testing.assert_allclose(pred.predict_raw(X), bst.predict(X, raw_score=True), rtol=1e-12, atol=1e-12)


@needs_cc
def test_optimize_speed_times_both_forms(lgb_model: tuple[Any, Path, np.ndarray], tmp_path: Path) -> None:
    bst, _, X = lgb_model
    with pytest.raises(CompileError, match="times the forms on your own rows"):
        lumber.compile_fastest(bst)
    pred = lumber.compile_fastest(bst, path=tmp_path / "fast.so", sample=X[:100])
    rep = pred.report
    # timed on the caller's rows, tiled, and said so
    assert rep["timed_on"]["rows"] == 100 and rep["timed_on"]["tiled"] and rep["timed_on"]["timed_rows"] >= 20_000
    assert rep["timed_on"]["source"] == "the sample passed" and rep["timed_on"]["clock"] == "process CPU time"
    # the forest in its binned walk and its value walk, and the oblivious tables
    assert set(rep["forms"]) == {"forest", "forest-values", "oblivious"} and rep["chosen"] in rep["forms"]
    assert rep["forms"]["forest"]["walk"] in ("binned8", "code") and rep["forms"]["forest-values"]["walk"] == "values"
    # the forest's own walk chosen on the same rows
    assert rep["forms"]["forest"]["walk_choice"]["timed_on"] == "100 sample rows, tiled to 4096"
    assert rep["forms"]["oblivious"]["agrees_with_forest"] and rep["forms"]["forest"]["cpu_seconds"] >= 0
    assert rep["forms"]["forest-values"]["cpu_seconds"] >= 0
    np.testing.assert_allclose(pred.predict_raw(X), bst.predict(X, raw_score=True), rtol=1e-12, atol=1e-12)
    back = load_compiled(tmp_path / "fast.so", bst)  # either form: the same ABI and fingerprint
    np.testing.assert_array_equal(back.predict_raw(X), pred.predict_raw(X))
    values = lumber.compile(bst, target="c", options=lumber.COptions(walk="values"))
    assert values.library.metadata["walk"] == "values"
    np.testing.assert_array_equal(values.predict_raw(X), lumber.compile(bst, target="c").predict_raw(X))


def test_float32_sums_need_inexact() -> None:
    import xgboost as xgb
    from sklearn.datasets import load_diabetes

    X, y = load_diabetes(return_X_y=True)
    bst = xgb.train({"max_depth": 2, "nthread": 1, "seed": 0}, xgb.DMatrix(X, y), 5)
    with pytest.raises(CompileError, match="xgboost sums leaf values in float32"):
        lumber.compile(bst, target="table")
    pred = lumber.compile(bst, target="table", options=lumber.TableOptions(exact=False))
    assert "float64 sums" in pred.report["tables"]["note"]
    np.testing.assert_allclose(pred.predict_raw(X), bst.predict(xgb.DMatrix(X), output_margin=True), rtol=1e-6)


def test_bad_options_are_refused(lgb_model: tuple[Any, Path, np.ndarray]) -> None:
    bst, _, _ = lgb_model
    with pytest.raises(CompileError, match="take lumber.FastestOptions, not COptions"):
        lumber.compile_fastest(bst, options=lumber.COptions())
    with pytest.raises(CompileError, match="compares the forest and oblivious forms"):
        lumber.compile_fastest(lumber.compile(bst, target="table").ensemble)


def test_cli_emit_table(lgb_model: tuple[Any, Path, np.ndarray], tmp_path: Path,
                        capsys: pytest.CaptureFixture[str]) -> None:
    bst, path, X = lgb_model
    out = tmp_path / "m.table"
    assert main(["compile", str(path), "--emit", "table", "-o", str(out), "--time-passes"]) == 0
    text = capsys.readouterr()
    assert "oblivious tables: re-composition, 12 ->" in text.out and "===== pass timing =====" in text.err
    assert "oblivious: " in text.err and "oblivious trees" in text.err
    np.testing.assert_allclose(load_compiled(out).predict_raw(X), bst.predict(X, raw_score=True), rtol=1e-12,
                               atol=1e-12)
    assert main(["compile", str(path), "--emit", "onnx", "--optimize", "speed"]) == 2
    assert "--optimize speed chooses among C shared libraries, not --emit onnx" in capsys.readouterr().err
    assert main(["compile", str(path), "--emit", "table", "--max-depth", "deep"]) == 2
    assert "--max-depth must be a number or 'auto'" in capsys.readouterr().err


@pytest.mark.slow
@needs_cc
def test_cli_optimize_speed(lgb_model: tuple[Any, Path, np.ndarray], tmp_path: Path,
                            capsys: pytest.CaptureFixture[str]) -> None:
    bst, path, X = lgb_model
    so = tmp_path / "m.so"
    assert main(["compile", str(path), "--emit", "c", "--optimize", "speed", "-o", str(so)]) == 2
    assert "times the forms on your own rows" in capsys.readouterr().err
    rows = tmp_path / "rows.csv"
    np.savetxt(rows, X[:50], delimiter=",", header=",".join(f"Column_{i}" for i in range(X.shape[1])), comments="")
    assert main(["compile", str(path), "--emit", "c", "--optimize", "speed", "--sample", str(rows), "-o", str(so)]) == 0
    text = capsys.readouterr()
    assert "<- chosen" in text.out and "forest" in text.out and "oblivious" in text.out
    assert f"timed on 50 rows of {rows} (--sample)" in text.out
    np.testing.assert_allclose(load_compiled(so, bst).predict_raw(X), bst.predict(X, raw_score=True), rtol=1e-12,
                               atol=1e-12)
