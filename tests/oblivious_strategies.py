"""Hypothesis strategies for ObliviousEnsembles (tests of the IR, the passes and the table backends)."""

from __future__ import annotations

from typing import Any

import numpy as np
from hypothesis import strategies as st

from lumber.ir import CategoryRule, Feature, FeatureKind, ObliviousEnsemble, PostTransform, Schema, Task

THRESHOLDS = [-1.0, 0.0, 0.5, 1.5, np.inf]
BORDERS = [-1.0, -0.5, 0.0, 0.25, 0.5, 1.0, 1.5, 2.0]
"""Borders of bin levels (a group of k of them is k.bit_length() levels)."""
VALUES = [-2.0, -1.0, -0.5, 0.0, 0.25, 0.5, 1.0, 1.5, 2.0, 3.0, 5.0, 2.0**31, np.nan, np.inf, -np.inf]
"""Row values; on a categorical feature they are codes 0-5, a fraction, negatives, huge and infinite
(invalid under some category rules), and NaN."""


@st.composite
def ensembles(draw: Any, max_trees: int = 5, max_depth: int = 4, float32_sums: bool = True,
              categorical: bool = True, bins: bool = False, value_pool: int = 0) -> ObliviousEnsemble:
    """Random valid ensembles: scalar and vector trees, NaN bits, +inf levels, averaging, float32/64,
    category levels (``code in set``, -1 standing for invalid values) under every category rule and,
    with ``bins``, bin groups (the last 1-3 levels of a tree: bits of the count of 1-7 borders of a
    numeric feature below the value, NaN reading as any code up to the count); with ``value_pool``, cell
    values drawn from at most that many distinct floats and -0.0."""
    F = draw(st.integers(1, 4))
    K = draw(st.sampled_from([1, 1, 3]))
    T = draw(st.integers(0, max_trees))
    dtype = draw(st.sampled_from(["float32", "float64"]))
    depth = [draw(st.integers(0, max_depth)) for _ in range(T)]
    L = sum(depth)
    cat_feats = {f for f in range(F) if categorical and draw(st.booleans())}
    feat = [draw(st.integers(0, F - 1)) for _ in range(L)]
    thr = [draw(st.sampled_from(THRESHOLDS)) for _ in range(L)]
    sets = [sorted(draw(st.sets(st.integers(-1, 5), min_size=1, max_size=4)))
            if f in cat_feats and draw(st.integers(0, 3)) else [] for f in feat]
    thr = [np.nan if s_ else t for t, s_ in zip(thr, sets)]
    nan = [draw(st.booleans()) for _ in range(L)]
    borders: list[list[float]] = [[] for _ in range(L)]
    bits = [0] * L
    numeric = [f for f in range(F) if f not in cat_feats]
    start = 0
    for d in depth:
        if bins and numeric and d and draw(st.booleans()):
            w = draw(st.integers(1, min(3, d)))
            k = draw(st.integers(1 << (w - 1), (1 << w) - 1))
            b = sorted(draw(st.lists(st.sampled_from(BORDERS), min_size=k, max_size=k, unique=True)))
            f = draw(st.sampled_from(numeric))
            code = draw(st.integers(0, k))
            for j in range(w):
                i = start + d - w + j
                feat[i], thr[i], nan[i], sets[i], borders[i], bits[i] = f, b[(1 << j) - 1], bool(code >> j & 1), [], b, j
        start += d
    tout = [draw(st.integers(-1, K - 1)) if K > 1 else 0 for _ in range(T)]
    n_val = sum((1 if k >= 0 else K) << d for k, d in zip(tout, depth))
    if value_pool:  # few distinct cell values (the C runtime's per-tree dictionaries), -0.0 among them
        pool = [-0.0, *draw(st.lists(st.floats(-4, 4), min_size=1, max_size=value_pool))]
        value = [draw(st.sampled_from(pool)) for _ in range(n_val)]
    else:
        value = [draw(st.floats(-4, 4, width=32)) for _ in range(n_val)]
    features = tuple(Feature(f"x{i}", FeatureKind.CATEGORICAL, tuple(range(6))) if i in cat_feats
                     else Feature(f"x{i}") for i in range(F))
    schema = Schema(features=features, category_rule=draw(st.sampled_from(list(CategoryRule))), task=Task.REGRESSION if K == 1 else Task.MULTICLASS, n_outputs=K,
                    base_score=tuple(draw(st.floats(-1, 1, width=32)) for _ in range(K)),
                    post_transform=PostTransform.IDENTITY if K == 1 else PostTransform.SOFTMAX,
                    average=draw(st.booleans()), input_dtype=dtype,
                    accumulate_dtype=draw(st.sampled_from(["float64", "float64", "float32"] if float32_sums else ["float64"])))
    set_arrays: dict[str, Any] = {}
    if any(sets):
        off = np.zeros(L + 1, dtype=np.int64)
        np.cumsum([len(s_) for s_ in sets], out=off[1:])
        set_arrays = dict(level_set_offset=off, level_set_code=np.array([c for s_ in sets for c in s_], dtype=np.int64))
    if any(borders):
        off = np.zeros(L + 1, dtype=np.int64)
        np.cumsum([len(b) for b in borders], out=off[1:])
        set_arrays.update(level_border_offset=off, level_border=np.array([v for b in borders for v in b], dtype=np.float64),
                          level_code_bit=np.array(bits, dtype=np.int32))
    return ObliviousEnsemble(schema=schema, depth=np.array(depth, dtype=np.int32), level_feature=np.array(feat),
                             level_threshold=np.array(thr, dtype=np.float64), level_nan_true=np.array(nan, dtype=bool),
                             tree_output=np.array(tout, dtype=np.int32), value=np.array(value),
                             **set_arrays).validate()


def rows(F: int, n: int = 300, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return rng.choice(VALUES, size=(n, F))
