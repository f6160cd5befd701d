"""C backend: bit-exact against the reference evaluator on every node kind, boundary and NaN rows."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cases import CASES, corpus
from c_tools import build_many, needs_cc
from strategies import forests

import lumber
from lumber.backends.c import BuildOptions, CLibrary, CEmitOptions, build_shared, emit_source, find_compiler
from lumber.backends.c.layout import round_down_f32
from lumber.ir import CompileError, Forest, InputDataError, ModelFormatError, OutputError
from lumber.runtime.predictors import CPredictor, as_rows

GOLDEN = Path(__file__).resolve().parents[1] / "golden" / "c"


def rows_for(lib: CLibrary, forest: Forest, X: np.ndarray) -> np.ndarray:
    return as_rows(forest.schema, X, lib.dtype)


def assert_same(lib: CLibrary, forest: Forest, X: np.ndarray) -> None:
    """Margins, leaves and single-row margins equal the reference exactly."""
    R = rows_for(lib, forest, X)
    ref = forest.evaluate(X).reshape(len(X), -1)
    got = lib.predict_raw(R)
    bad = np.flatnonzero((got != ref).any(axis=1))
    assert bad.size == 0, f"rows {bad[:5]}: {X[bad[:3]]} got {got[bad[:3]]} expected {ref[bad[:3]]}"
    np.testing.assert_array_equal(lib.apply(R), forest.apply(X))
    single = np.array([lib.predict_row(r) for r in R])
    np.testing.assert_array_equal(single, ref)
    if lib.reads_one:
        np.testing.assert_array_equal(np.array([lib.predict_one(r, check=True) for r in R]), ref)
        # predict_raw's one-row door: rows of the library's dtype, and float64 rows a float32 model rounds in C
        pred = CPredictor(lib, lib.data)
        X64 = np.ascontiguousarray(X, dtype=np.float64)
        for rows in (R, X64):
            for i in range(len(rows)):
                try:
                    one = pred.predict_raw(rows[i:i + 1])
                except InputDataError:  # a value the model refuses: the batch conversion refuses it too
                    with pytest.raises(InputDataError):
                        as_rows(forest.schema, X[i:i + 1], lib.dtype)
                    continue
                np.testing.assert_array_equal(one.reshape(-1), ref[i], err_msg=f"row {i}: {rows[i]}")
    want = forest.schema.transform(forest.evaluate(X)).reshape(len(X), -1)
    np.testing.assert_allclose(lib.predict_transformed(R), want, rtol=1e-14, atol=1e-300)
    # float64 rows as they are (a float32 model rounds them in C) and rows of the library's dtype
    X64 = np.ascontiguousarray(X, dtype=np.float64)
    np.testing.assert_array_equal(lib.predict_rows(X64), ref)
    np.testing.assert_array_equal(lib.predict_rows(R), ref)
    np.testing.assert_array_equal(lib.predict_rows(X64, transformed=True), lib.predict_transformed(R))


@pytest.mark.parametrize("variant", ["t", "v", "u", "c"], ids=["tables", "values", "unrolled", "code"])
@pytest.mark.parametrize("case", sorted(CASES))
def test_case_matches_reference(case_libs: dict[str, CLibrary], case: str, variant: str) -> None:
    forest = CASES[case]()
    if f"{case}_{variant}" not in case_libs:  # the code walk needs thresholds that bin
        assert variant == "c" and not _binnable(forest)
        with pytest.raises(CompileError, match="walk='code' needs"):
            emit_source(forest, CEmitOptions(walk="code"))
        return
    assert_same(case_libs[f"{case}_{variant}"], forest, corpus(forest))


def _binnable(f: Forest) -> bool:
    from lumber.backends.c.layout import bin_tables, layout

    return bin_tables(f, layout(f)) is not None


def test_binned_walk_is_chosen_and_coded_exactly() -> None:
    """auto picks the binned walk; codes order like the values, two-byte codes past 255 thresholds."""
    from cases import many_thresholds, numeric_nan

    assert '"walk": "binned8"' in emit_source(numeric_nan()).text().replace('\\"', '"')
    assert '"walk": "binned16"' in emit_source(many_thresholds()).text().replace('\\"', '"')
    assert '"walk": "values"' in emit_source(numeric_nan(), CEmitOptions(walk="values")).text().replace('\\"', '"')
    with pytest.raises(CompileError, match="walk must be one of"):
        emit_source(numeric_nan(), CEmitOptions(walk="fast"))


@needs_cc
def test_portable_binned_step_matches_reference(tmp_path: Path) -> None:
    """The binned step in plain C (compilers without GNU x86-64 inline assembly) routes as the assembly
    step the other tests cover: every hand-built case that has a binned walk, on its boundary corpus."""
    cases = [(f"p_{name}", mk()) for name, mk in sorted(CASES.items())]
    cases = [(p, f) for p, f in cases if _binnable(f)]
    sources = [emit_source(f, CEmitOptions(prefix=p, walk="binned")).text() for p, f in cases]
    build_shared(sources, tmp_path / "p.so", BuildOptions(warnings_as_errors=True,
                                                          extra_flags=("-O1", "-DLUMBER_PORTABLE_STEP")))
    assert len(cases) >= 5
    for p, f in cases:
        assert_same(CLibrary(tmp_path / "p.so", prefix=p), f, corpus(f))


@needs_cc
def test_binned_blocks_of_any_size_match_reference(tmp_path: Path) -> None:
    """Blocks that are not whole groups of ten rows: the last group walks padding rows, and nothing it
    stores reaches a margin or a leaf (blocks of 8, 13 and 64 rows; corpora of any length)."""
    cases = [(name, mk()) for name, mk in sorted(CASES.items())]
    cases = [(name, f) for name, f in cases if _binnable(f)][:6]
    built = [(f"b{block}_{name}", f, block) for name, f in cases for block in (8, 13, 64)]
    sources = [emit_source(f, CEmitOptions(prefix=p, walk="binned", block=block)).text() for p, f, block in built]
    build_shared(sources, tmp_path / "b.so", BuildOptions(warnings_as_errors=True, extra_flags=("-O1",)))
    assert len(cases) >= 5
    for p, f, _ in built:
        X = corpus(f)
        for n in (len(X), len(X) - 1, 7):
            assert_same(CLibrary(tmp_path / "b.so", prefix=p), f, X[:n])


@needs_cc
def test_code_walk_blocks_of_any_size_match_reference(tmp_path: Path) -> None:
    """The code walk (if/else on threshold codes, sums kept in registers across a block of trees) with
    blocks of 8 and 13 rows and batches of any length; its metadata names the walk."""
    cases = [(name, mk()) for name, mk in sorted(CASES.items())]
    cases = [(name, f) for name, f in cases if _binnable(f)]
    built = [(f"k{block}_{name}", f, block) for name, f in cases for block in (8, 13)]
    sources = [emit_source(f, CEmitOptions(prefix=p, walk="code", block=block)).text() for p, f, block in built]
    assert '"walk": "code"' in sources[0].replace('\\"', '"')
    build_shared(sources, tmp_path / "k.so", BuildOptions(warnings_as_errors=True, extra_flags=("-O1",)))
    assert len(cases) >= 5
    for p, f, _ in built:
        X = corpus(f)
        for n in (len(X), 7, 1):
            assert_same(CLibrary(tmp_path / "k.so", prefix=p), f, X[:n])


def _random_forests(tmp_path_factory: pytest.TempPathFactory, fs: list[Forest], opt: str) -> None:
    variants: list[bool | str] = ["binned", "values", True, "code"]
    libs = build_many([(f"m{i}", f, variants[i % 4] if variants[i % 4] not in ("binned", "code") or _binnable(f)
                        else "auto") for i, f in enumerate(fs)],
                      tmp_path_factory.mktemp("hyp") / "m.so", opt=opt)
    for i, f in enumerate(fs):
        assert_same(libs[f"m{i}"], f, corpus(f, seed=i))


@needs_cc
@settings(max_examples=4)
@given(st.lists(forests(max_trees=11, max_depth=5), min_size=10, max_size=10))
def test_random_forests_match_reference(tmp_path_factory: pytest.TempPathFactory, fs: list[Forest]) -> None:
    """Hypothesis forests, ten per library (one compile per example): binned walks, value walks, unrolled,
    code walks; 40 forests, as many as the ONNX backend draws."""
    _random_forests(tmp_path_factory, fs, "-O1")


@needs_cc
@settings(max_examples=3)
@given(st.lists(forests(max_trees=40, max_depth=5, max_features=5), min_size=6, max_size=6))
def test_random_forests_of_many_trees_match_reference(tmp_path_factory: pytest.TempPathFactory,
                                                      fs: list[Forest]) -> None:
    """Up to 40 trees, so single rows walk whole groups of trees (16 at a time) as well as the rest."""
    _random_forests(tmp_path_factory, fs, "-O1")


@needs_cc
def test_special_nodes_without_shared_decisions_match_reference(tmp_path: Path,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """Models whose distinct special tests do not fit the shared decision columns decide tree by tree in a
    batch and walk single rows tree by tree (special trees node by node): the hand-built cases with
    categorical or zero-as-missing nodes."""
    from lumber.backends.c import emit

    monkeypatch.setattr(emit, "SHARED_DECISIONS_MAX_COLUMNS", 0)
    cases = [(f"r_{name}", mk()) for name, mk in sorted(CASES.items())]
    cases = [(p, f) for p, f in cases if _binnable(f) and (f.is_categorical.any() or f.missing_zero.any())]
    sources = [emit_source(f, CEmitOptions(prefix=p, walk="binned")).text() for p, f in cases]
    assert all("#define LUMBER_ROW_WALK 0" in src and "#define LUMBER_GLOBAL_DEC 0" in src for src in sources)
    build_shared(sources, tmp_path / "r.so", BuildOptions(warnings_as_errors=True, extra_flags=("-O1",)))
    assert len(cases) >= 2
    for p, f in cases:
        assert_same(CLibrary(tmp_path / "r.so", prefix=p), f, corpus(f))


@pytest.mark.slow
@needs_cc
@settings(max_examples=40)
@given(st.lists(forests(max_trees=12, max_depth=7, max_features=6), min_size=6, max_size=6))
def test_random_forests_match_reference_thorough(tmp_path_factory: pytest.TempPathFactory,
                                                 fs: list[Forest]) -> None:
    _random_forests(tmp_path_factory, fs, "-O3")


def test_float32_round_down_is_equivalent() -> None:
    """For every float32 x: x <= t (in float64) iff x <= round_down_f32(t) (in float32)."""
    rng = np.random.default_rng(0)
    t = np.concatenate([
        rng.normal(size=2000) * 10.0 ** rng.integers(-40, 39, size=2000),
        [0.0, -0.0, 1e-46, -1e-46, 3.5e38, -3.5e38, 3.4028235677973366e38, np.inf, -np.inf, 1e300, -1e300],
        (np.float64(np.float32(1.0)) + np.float64(np.nextafter(np.float32(1.0), np.float32(2)))) / 2 + np.zeros(1)])
    t32 = round_down_f32(t)
    assert (t32.astype(np.float64) <= t).all()
    with np.errstate(over="ignore"):
        base = t.astype(np.float32)
    for step in range(-3, 4):
        x = base.copy()
        for _ in range(abs(step)):
            x = np.nextafter(x, np.float32(np.inf if step > 0 else -np.inf))
        with np.errstate(over="ignore"):
            up = np.nextafter(t32, np.float32(np.inf))
        for probe in (x, t32, up):
            with np.errstate(invalid="ignore"):
                np.testing.assert_array_equal(probe.astype(np.float64) <= t, probe <= t32)


@needs_cc
def test_threads_python_pool_and_openmp(tmp_path: Path) -> None:
    """Row chunks on Python threads and OpenMP threads give the serial result."""
    from cases import categorical_lightgbm, numeric_nan

    models = {"num": numeric_nan(), "cat": categorical_lightgbm()}
    rng = np.random.default_rng(0)
    X = np.column_stack([rng.normal(size=5001) * 3, rng.integers(-1, 7, size=5001) + rng.choice([0, 0.5], 5001)])
    X[::17, 0] = np.nan
    X[::23, 1] = np.nan
    from lumber.backends.c import supports_openmp

    builds = [("plain", False)] + ([("omp", True)] if supports_openmp(find_compiler()) else [])
    for tag, openmp in builds:
        libs = build_many([(f"{tag}_{k}", f, False) for k, f in models.items()], tmp_path / f"{tag}.so",
                          opt="-O1", openmp=openmp)
        for k, f in models.items():
            lib = libs[f"{tag}_{k}"]
            assert lib.has_openmp == openmp
            ref = f.evaluate(X).reshape(len(X), -1)
            np.testing.assert_array_equal(lib.predict_raw(X, threads=1), ref)
            np.testing.assert_array_equal(lib.predict_raw(X, threads=2), ref)
            np.testing.assert_array_equal(lib.predict_raw(X, threads=3, parallel="python"), ref)
            if openmp:
                np.testing.assert_array_equal(lib.predict_raw(X, threads=3, parallel="openmp"), ref)
            else:
                with pytest.raises(CompileError, match="without OpenMP"):
                    lib.predict_raw(X, threads=2, parallel="openmp")


@needs_cc
def test_predict_rows_checks_refused_values_on_every_thread_path(tmp_path: Path) -> None:
    """predict_rows with check: a NaN, or an infinity after rounding to float32, where the schema refuses
    it is found in any block (first row, last row, one block in the middle) on one thread, OpenMP threads
    and Python threads, in binned, value and unrolled walks; accepted rows give the reference margins.
    Through lumber.compile the error names the column and row, as prepare_input does."""
    from cases import float32_average, numeric_nan

    from lumber.backends.c import supports_openmp
    from lumber.ir import InputDataError

    strict = {"f64": numeric_nan(), "f32": float32_average()}
    strict = {k: f.replace(schema=f.schema.with_(allow_nan=False, allow_inf=False)).validate()
              for k, f in strict.items()}
    openmp = supports_openmp(find_compiler())
    libs = build_many([(f"{k}_{i}", f, u) for k, f in strict.items() for i, u in enumerate(["binned", "values", True])],
                      tmp_path / "strict.so", opt="-O1", openmp=openmp)
    rng = np.random.default_rng(3)
    X = rng.normal(size=(5003, 2)) * 3
    modes = [(1, "auto"), (3, "python")] + ([(2, "openmp"), (3, "openmp")] if openmp else [])
    for k, f in strict.items():
        ref = f.evaluate(X).reshape(len(X), -1)
        for i in range(3):
            lib = libs[f"{k}_{i}"]
            for threads, parallel in modes:
                np.testing.assert_array_equal(lib.predict_rows(X, threads, parallel, check=True), ref)
                for row in (0, 2500, len(X) - 1):
                    for bad in (np.nan, np.inf, -np.inf) + ((4e38,) if k == "f32" else ()):
                        Y = X.copy()
                        Y[row, row % 2] = bad
                        with pytest.raises(InputDataError, match="refuses"):
                            lib.predict_rows(Y, threads, parallel, check=True)
                        lib.predict_rows(Y, threads, parallel)  # unchecked: routed, no error
    pred = lumber.compile(strict["f32"], target="c")
    Y = X.copy()
    Y[4, 1] = 5e38
    with pytest.raises(InputDataError, match=r"infinite value in column 'x1' \(row 5\) after rounding to float32"):
        pred.predict_raw(Y, threads=2)
    Y[4, 1] = np.nan
    with pytest.raises(InputDataError, match=r"NaN in column 'x1' \(row 5\)"):
        pred.predict_raw(Y)
    np.testing.assert_array_equal(pred.predict_raw(X[:, :].copy(), threads=2), strict["f32"].evaluate(X))


def test_emitted_c_is_deterministic_and_golden(update_goldens: bool) -> None:
    from cases import categorical_lightgbm

    a = emit_source(categorical_lightgbm(), CEmitOptions(name="tiny")).text()
    b = emit_source(categorical_lightgbm(), CEmitOptions(name="tiny")).text()
    assert a == b
    # the shipped runtime is not part of the golden file: it changes independently of the printer
    head = a[: a.index("/* lumber C runtime")]
    head = re.sub(r"Generated by lumber \S+;", "Generated by lumber VERSION;", head)
    head = re.sub(r'\\"lumber_version\\": \\"[^"\\]*\\"', r'\\"lumber_version\\": \\"VERSION\\"', head)
    golden = GOLDEN / "tiny.c"
    if update_goldens:
        golden.parent.mkdir(parents=True, exist_ok=True)
        golden.write_text(head)
    assert head == golden.read_text(), "emitted C changed: review and rerun with --update-goldens"


def test_unroll_auto_prints_code_for_small_models() -> None:
    from cases import numeric_nan

    src = emit_source(numeric_nan(), CEmitOptions(unroll=None)).text()
    assert "#define LUMBER_HAS_CODE 1" in src and "static int32_t lumber_tree_1(const LUMBER_IN_T *x)" in src
    assert "#define LUMBER_HAS_CODE 0" in emit_source(numeric_nan()).text()


def test_header_declares_prefixed_api() -> None:
    from cases import float32_average

    art = emit_source(float32_average(), CEmitOptions(name="rf", prefix="rf_model"))
    assert set(art.files) == {"rf.c", "rf.h"}
    h = art.text("rf.h")
    assert "int32_t rf_model_predict_raw(const float *rows, int64_t n, double *out, int32_t threads);" in h
    assert "const char *rf_model_fingerprint(void);" in h


@needs_cc
def test_header_compiles_with_a_c_program(tmp_path: Path) -> None:
    """The .c/.h pair links into a program that calls the single-row entry point."""
    from cases import multiclass

    f = multiclass()
    art = emit_source(f, CEmitOptions(name="mc", prefix="mc"))
    art.write(tmp_path / "mc.c")
    (tmp_path / "main.c").write_text(
        '#include <stdio.h>\n#include "mc.h"\n'
        "int main(void) { double x[2] = {0.25, 2.0}, out[3]; mc_predict_row(x, out);\n"
        '  printf("%.17g %.17g %.17g %d\\n", out[0], out[1], out[2], mc_n_outputs()); return 0; }\n')
    exe = tmp_path / "prog"
    subprocess.run([find_compiler(), "-std=c99", "-O2", "-Wall", "-Wextra", "-Werror", str(tmp_path / "main.c"),
                    str(tmp_path / "mc.c"), "-o", str(exe), "-lm"], check=True, capture_output=True)
    out = subprocess.run([str(exe)], check=True, capture_output=True, text=True).stdout.split()
    np.testing.assert_array_equal(np.array(out[:3], dtype=float), f.evaluate(np.array([[0.25, 2.0]]))[0])
    assert out[3] == "3"


# -- bad input ---------------------------------------------------------------------------------------

def test_missing_compiler_is_a_clear_error_and_numpy_still_works(monkeypatch: pytest.MonkeyPatch) -> None:
    from cases import numeric_nan

    f = numeric_nan()
    with pytest.raises(CompileError, match=r"no C compiler found \(tried: no-such-cc-\w+\)"):
        lumber.compile(f, target="c", options=lumber.COptions(cc="no-such-cc-xyz"))
    monkeypatch.setenv("PATH", "/nonexistent")
    monkeypatch.delenv("CC", raising=False)
    with pytest.raises(CompileError, match="target 'numpy' predicts without a compiler"):
        lumber.compile(f, target="c")
    X = np.array([[0.2, 1.0], [np.nan, 9.0]])
    np.testing.assert_array_equal(lumber.compile(f, target="numpy").predict_raw(X), f.evaluate(X))
    src = lumber.compile(f, target="c-source")
    assert "lumber_predict_raw" in src.source
    np.testing.assert_array_equal(src.predict_raw(X), f.evaluate(X))


@needs_cc
def test_unwritable_output_path(tmp_path: Path) -> None:
    from cases import numeric_nan

    blocker = tmp_path / "file"
    blocker.write_text("")
    with pytest.raises(OutputError, match="is a file, not a folder"):
        build_shared(emit_source(numeric_nan()).text(), blocker / "m.so")
    assert [p.name for p in tmp_path.iterdir()] == ["file"]
    with pytest.raises(OutputError, match="is a directory"):
        lumber.compile(numeric_nan(), target="c-source", path=tmp_path)
    with pytest.raises(OutputError, match="is a file, not a folder"):
        lumber.compile(numeric_nan(), target="c-source", path=blocker / "nope" / "m.c")


def test_bad_prefix_and_block_are_refused() -> None:
    from cases import numeric_nan

    with pytest.raises(CompileError, match="not a C identifier"):
        emit_source(numeric_nan(), CEmitOptions(prefix="9lives"))
    with pytest.raises(CompileError, match="block must be between"):
        emit_source(numeric_nan(), CEmitOptions(block=2))


@needs_cc
def test_compiler_failure_reports_output(tmp_path: Path) -> None:
    with pytest.raises(CompileError, match="C compiler failed"):
        build_shared("this is not C;", tmp_path / "x.so", BuildOptions())
    assert not (tmp_path / "x.so").exists()


@needs_cc
def test_loader_rejects_foreign_files(tmp_path: Path) -> None:
    (tmp_path / "junk.so").write_bytes(b"not a library")
    with pytest.raises(ModelFormatError, match="not a library lumber built"):
        CLibrary(tmp_path / "junk.so")
    with pytest.raises(ModelFormatError, match="no such compiled model"):
        CLibrary(tmp_path / "absent.so")
