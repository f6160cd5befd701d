"""The table runtime's kernel paths (portable C, AVX2, AVX-512), each pinned to the numpy evaluator bit for bit.

Every path runs on the rows' own summation order (base score, then the trees in order), so each must
equal :meth:`ObliviousEnsemble.evaluate` exactly, -0.0 and NaN included: row counts around the vector
widths (1, 63, 64, 65, 1000) and a super-block boundary, 1 and 2 threads, NaN and category levels,
trees of every dictionary kind the AVX-512 path distinguishes (<= 8, 16, 32 distinct values, more,
none), bin groups inside and across the index's low byte, and 16-bit bins.
"""

from __future__ import annotations


import numpy as np
import pytest
from hypothesis import given, settings

from c_tools import needs_cc
from oblivious_strategies import ensembles, rows

import lumber
from lumber.compiler.targets.table import TableCOptions, TableCTarget, TableOptions, TableTarget
from lumber.ir import CompileError, Feature, FeatureKind, ObliviousEnsemble, Schema, Task
from lumber.passes.transforms.quantize import quantize_ensemble

PATHS = ("portable", "avx2", "avx512")


@pytest.fixture(params=PATHS, scope="module")
def isa(request: pytest.FixtureRequest) -> str:
    from lumber.backends.c.build import find_compiler
    from lumber.backends.table_c import isa_available

    try:
        find_compiler()
    except CompileError:
        pytest.skip("no C compiler")
    if not isa_available(request.param):
        pytest.skip(f"this CPU lacks the {request.param} path")
    return str(request.param)


def same(got: np.ndarray, expected: np.ndarray) -> None:
    """Bit for bit: equal values, -0.0 apart from 0.0, NaN where NaN."""
    np.testing.assert_array_equal(got, expected)
    np.testing.assert_array_equal(np.signbit(got), np.signbit(expected))


def check_paths(e: ObliviousEnsemble, X: np.ndarray, isa: str, counts: tuple[int, ...],
                march_native: bool = True) -> None:
    from lumber.backends.table_c import TableRuntime

    q = quantize_ensemble(e).validate()
    rt = TableRuntime(q, isa=isa, march_native=march_native)
    assert rt.isa == isa
    Xc = np.ascontiguousarray(q.prepare_input(X), dtype=rt.dtype)
    expected = q.evaluate(X).reshape(len(X), -1)
    for n in counts:
        same(rt.predict_raw(np.ascontiguousarray(Xc[:n])), expected[:n])
    same(rt.predict_raw(Xc, threads=2), expected)
    same(rt.predict_raw(np.ascontiguousarray(Xc[1:])), expected[1:])  # rows not at a block's start


@needs_cc
@settings(max_examples=25, deadline=None)
@given(e=ensembles(max_depth=11, max_trees=6, float32_sums=False, bins=True, value_pool=40))
def test_every_path_equals_numpy(isa: str, e: ObliviousEnsemble) -> None:
    check_paths(e, rows(e.n_features, 1000), isa, (1, 63, 64, 65, 1000))


@needs_cc
@settings(max_examples=15, deadline=None)
@given(e=ensembles(max_depth=10, max_trees=6, float32_sums=False, bins=True))
def test_every_path_equals_numpy_without_dictionaries(isa: str, e: ObliviousEnsemble) -> None:
    check_paths(e, rows(e.n_features, 300, seed=2), isa, (1, 2, 65, 300))


def kinds_ensemble(wide_bins: bool = False) -> ObliviousEnsemble:
    """One tree of each kind: depths 1-10 with 1-300 distinct values (every dictionary kind and none:
    300 values, or a table too small to gain from one),
    a depth-9 tree whose bin group (3 borders) spans levels 7-8 (a carry out of the low byte), a depth-10
    tree with a bin group at levels 8-9, and a categorical level; wide_bins adds 300 borders on feature 0."""
    rng = np.random.default_rng(11)
    n_distinct = [1, 3, 8, 9, 16, 17, 32, 33, 200, 300, 5, 7, 12, 1, 3]
    depths = [3, 4, 5, 6, 6, 6, 7, 8, 10, 10, 9, 10, 10, 1, 2]
    F = 4
    feats: list[int] = []
    thr: list[float] = []
    nan: list[bool] = []
    sets: list[list[int]] = []
    borders: list[list[float]] = []
    bits: list[int] = []
    value: list[np.ndarray] = []
    for t, (d, nd) in enumerate(zip(depths, n_distinct)):
        group = (7, 2) if t == 10 else (8, 2) if t == 11 else None  # (first level, levels)
        for lvl in range(d):
            f = int(rng.integers(0, F - 1))
            s: list[int] = []
            b: list[float] = []
            bit = 0
            th = float(rng.normal())
            if group and group[0] <= lvl < group[0] + group[1]:
                f, b, bit, th = 1, [-0.5, 0.0, 0.75], lvl - group[0], [-0.5, 0.0, 0.75][(1 << (lvl - group[0])) - 1]
            elif lvl == 0 and t % 4 == 3:
                f, s, th = F - 1, [0, 2, 5], np.nan
            feats.append(f); thr.append(th); nan.append(bool(rng.random() < 0.5))
            sets.append(s); borders.append(b); bits.append(bit)
        pool = np.concatenate([[-0.0], rng.normal(size=nd - 1)]) if nd > 1 else np.array([-0.0])
        cells = 1 << d
        v = rng.choice(pool, size=cells)
        v[: min(nd, cells)] = pool[: min(nd, cells)]
        value.append(rng.permutation(v))
    if wide_bins:  # 30 more depth-10 trees over 300 distinct thresholds of feature 0
        extra = np.linspace(-3, 3, 300)
        for k in range(30):
            depths.append(10)
            feats += [0] * 10; thr += extra[10 * k:10 * k + 10].tolist(); nan += [False] * 10
            sets += [[] for _ in range(10)]; borders += [[] for _ in range(10)]; bits += [0] * 10
            value.append(rng.normal(size=1024))
    L = len(feats)
    set_off = np.zeros(L + 1, dtype=np.int64)
    np.cumsum([len(s) for s in sets], out=set_off[1:])
    b_off = np.zeros(L + 1, dtype=np.int64)
    np.cumsum([len(b) for b in borders], out=b_off[1:])
    features = tuple(Feature(f"x{i}") for i in range(F - 1)) + (Feature("c", FeatureKind.CATEGORICAL, tuple(range(6))),)
    schema = Schema(features=features, task=Task.REGRESSION, n_outputs=1, base_score=(0.25,))
    T = len(depths)
    return ObliviousEnsemble(
        schema=schema, depth=np.array(depths, dtype=np.int32), level_feature=np.array(feats),
        level_threshold=np.array(thr, dtype=np.float64), level_nan_true=np.array(nan, dtype=bool),
        tree_output=np.zeros(T, dtype=np.int32), value=np.concatenate(value),
        level_set_offset=set_off, level_set_code=np.array([c for s in sets for c in s], dtype=np.int64),
        level_border_offset=b_off, level_border=np.array([v for b in borders for v in b], dtype=np.float64),
        level_code_bit=np.array(bits, dtype=np.int32)).validate()


def kinds_rows(n: int, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 4)) * 1.5
    X[:, 3] = rng.integers(-1, 7, n)
    X[rng.random(X.shape) < 0.07] = np.nan
    return X


@needs_cc
@pytest.mark.parametrize("wide", [False, True], ids=["byte-bins", "16-bit-bins"])
def test_every_tree_kind_on_every_path(isa: str, wide: bool) -> None:
    from lumber.backends.table_c import bin_type, dictionary_arrays

    e = kinds_ensemble(wide)
    q = quantize_ensemble(e).validate()
    assert bin_type(q) == ("uint16_t" if wide else "uint8_t")
    d = dictionary_arrays(q)
    assert d is not None
    distinct = np.diff(d["dict_offset"])
    assert {1, 3, 8, 9, 16, 17, 32, 33, 200} <= set(distinct.tolist()) and 0 in distinct  # 300: no dictionary
    check_paths(e, kinds_rows(8300), isa, (1, 63, 64, 65, 1000, 8193, 8300))


@needs_cc
def test_every_path_in_a_portable_build(isa: str) -> None:
    """The runtime built without -march=native: the vector paths come from their target attributes alone."""
    check_paths(kinds_ensemble(), kinds_rows(1100, seed=3), isa, (1, 65, 1100), march_native=False)


@needs_cc
def test_paths_agree_on_a_lightgbm_model(isa: str) -> None:
    """A re-composed LightGBM model (categorical splits, NaN) per path: the ``table`` target's runtime
    and the ``table-c`` library built with the path forced."""
    import lightgbm as lgb

    rng = np.random.default_rng(4)
    X = rng.normal(size=(600, 5))
    X[:, 4] = rng.integers(0, 6, 600)
    y = (X[:, 0] + (X[:, 4] % 2) + rng.normal(size=600) > 0.5).astype(int)
    X[rng.random(X.shape) < 0.05] = np.nan
    bst = lgb.train({"objective": "binary", "num_leaves": 15, "max_depth": 5, "verbose": -1, "num_threads": 1,
                     "seed": 0, "min_data_per_group": 5, "cat_smooth": 1}, lgb.Dataset(X, y, categorical_feature=[4]), 20)
    ref = lumber.load(bst)
    tab = TableTarget().compile(ref, TableOptions(isa=isa, max_depth=8))
    want = tab.ensemble.evaluate(X)  # the tables' own numpy evaluator (re-composition sums in its own order)
    np.testing.assert_allclose(want, ref.evaluate(X), rtol=0, atol=1e-12)
    same(tab.predict_raw(X), want)
    same(tab.predict_raw(X[:65]), want[:65])
    lib = TableCTarget().compile(ref, TableCOptions(isa=isa, max_depth=8))
    same(lib.predict_raw(X), want)
    same(lib.predict_raw(X[:1]), want[:1])


def test_unknown_paths_are_refused() -> None:
    from lumber.backends.table_c import TableRuntime, isa_code

    with pytest.raises(CompileError, match="unknown isa 'sse9'"):
        isa_code("sse9")
    e = kinds_ensemble()
    with pytest.raises(CompileError, match="unknown isa"):
        TableRuntime(quantize_ensemble(e), isa="neon")
    with pytest.raises(CompileError, match="unknown isa"):
        TableTarget().compile(e, TableOptions(isa="neon"))
    with pytest.raises(CompileError, match="unknown isa"):
        TableCTarget().compile(e, TableCOptions(isa="neon"))
    with pytest.raises(CompileError, match="engine='numpy' has none"):
        TableTarget().compile(e, TableOptions(isa="portable", engine="numpy"))


def borders_ensemble(input_dtype: str, counts: tuple[int, ...] = (1, 16, 17, 200, 255), trees: int = 330,
                     depth: int = 6) -> ObliviousEnsemble:
    """Trees whose levels cycle over the features, feature f taking ``counts[f]`` distinct thresholds,
    among them -0.0, 0.0 and +inf (the defaults quantize to columns of 1, 16 and over 128 borders: a
    counted column of one step of 16 compares, a full step, and two steps)."""
    rng = np.random.default_rng(5)
    F = len(counts)
    pools = []
    for n in counts:
        p = np.sort(rng.normal(size=n) * 2).astype(input_dtype).astype(np.float64)
        if n >= 17:
            p[n // 2], p[n // 2 + 1], p[-1] = -0.0, 0.0, np.inf
        pools.append(p)
    at = [0] * F
    feats: list[int] = []
    thr: list[float] = []
    for i in range(trees * depth):
        f = i % F
        feats.append(f)
        thr.append(float(pools[f][at[f] % len(pools[f])]))
        at[f] += 1
    L = trees * depth
    schema = Schema(features=tuple(Feature(f"x{i}") for i in range(F)), task=Task.REGRESSION, n_outputs=1,
                    base_score=(0.5,), input_dtype=input_dtype)
    return ObliviousEnsemble(
        schema=schema, depth=np.full(trees, depth, dtype=np.int32), level_feature=np.array(feats),
        level_threshold=np.array(thr), level_nan_true=rng.random(L) < 0.5,
        tree_output=np.zeros(trees, dtype=np.int32), value=rng.normal(size=trees << depth)).validate()


def borders_rows(e: ObliviousEnsemble, n: int, seed: int = 0) -> np.ndarray:
    """Rows on and next to the thresholds (exact values, one float step either side), NaN, +-inf, +-0.0."""
    rng = np.random.default_rng(seed)
    F = e.n_features
    X = rng.normal(size=(n, F)) * 2
    dt = np.float32 if e.schema.input_dtype == "float32" else np.float64
    for f in range(F):
        th = np.unique(e.level_threshold[e.level_feature == f])
        th = th[np.isfinite(th)]
        pick = th[rng.integers(0, len(th), n)].astype(dt)
        step = rng.integers(-1, 2, n)
        near = np.where(step < 0, np.nextafter(pick, dt(-np.inf)), np.where(step > 0, np.nextafter(pick, dt(np.inf)), pick))
        use = rng.random(n) < 0.5
        X[use, f] = near[use]
    special = np.array([np.nan, np.inf, -np.inf, 0.0, -0.0])
    hit = rng.random(X.shape) < 0.08
    X[hit] = special[rng.integers(0, len(special), int(hit.sum()))]
    return X


@needs_cc
@pytest.mark.parametrize("input_dtype", ["float64", "float32"])
def test_binarization_by_counting_on_every_path(isa: str, input_dtype: str) -> None:
    """Columns of 1, 16 and over 128 borders (the counted columns' one and two steps), rows on, just below
    and just above every border, NaN, infinities and signed zeros; odd row counts and 2 threads."""
    from lumber.backends.table_c import bin_type

    e = borders_ensemble(input_dtype)
    q = quantize_ensemble(e).validate()
    assert bin_type(q) == "uint8_t"
    assert q.border_offset is not None
    widths = np.diff(q.border_offset)
    assert widths.max() > 128 and (widths == 16).any() and (widths == 1).any()  # two steps, one full step, one
    check_paths(e, borders_rows(e, 8300), isa, (1, 63, 64, 65, 1023, 1025, 8193))


@needs_cc
def test_one_row_kernel_with_many_columns(isa: str) -> None:
    """More than 128 binarized columns: no one-row layout (the row's bins do not fit two registers), and
    the one-row path still equals numpy row by row."""
    from lumber.backends.table_c import row_arrays

    e = borders_ensemble("float64", counts=(2,) * 130, trees=80, depth=5)
    q = quantize_ensemble(e).validate()
    assert q.col_feature is not None and q.col_feature.shape[0] > 128 and row_arrays(q) is None
    assert row_arrays(quantize_ensemble(borders_ensemble("float64")).validate()) is not None
    from lumber.backends.table_c import TableRuntime

    rt = TableRuntime(q, isa=isa)
    X = borders_rows(e, 40, seed=1)
    want = q.evaluate(X).reshape(-1, 1)
    for i in range(len(X)):
        same(rt.predict_raw(np.ascontiguousarray(X[i:i + 1])), want[i:i + 1])


@needs_cc
def test_predictor_one_row_route() -> None:
    """``predict_raw`` on a 1-row 2-D float array (float64 for a float32 model, a non-contiguous view)
    takes the runtime's one-row kernel and equals the batch and numpy bit for bit."""
    e = borders_ensemble("float32")
    pred = TableTarget().compile(e, TableOptions())
    X = borders_rows(e, 300, seed=2)
    want = pred.ensemble.evaluate(X)
    batch = pred.predict_raw(X)
    same(batch, want)
    Xf = np.asfortranarray(X)
    for i in range(0, 300, 7):
        same(pred.predict_raw(X[i:i + 1]), want[i:i + 1])
        same(pred.predict_raw(Xf[i:i + 1]), want[i:i + 1])
