"""Hypothesis strategies for ObliviousEnsembles (tests of the IR, the passes and the table backends)."""

from __future__ import annotations

from typing import Any

import numpy as np
from hypothesis import strategies as st

from lumber.ir import CategoryRule, Feature, FeatureKind, ObliviousEnsemble, PostTransform, Schema, Task

THRESHOLDS = [-1.0, 0.0, 0.5, 1.5, np.inf]
VALUES = [-2.0, -1.0, -0.5, 0.0, 0.25, 0.5, 1.0, 1.5, 2.0, 3.0, 5.0, 2.0**31, np.nan, np.inf, -np.inf]
"""Row values; on a categorical feature they are codes 0-5, a fraction, negatives, huge and infinite
(invalid under some category rules), and NaN."""


@st.composite
def ensembles(draw: Any, max_trees: int = 5, max_depth: int = 4, float32_sums: bool = True,
              categorical: bool = True) -> ObliviousEnsemble:
    """Random valid ensembles: scalar and vector trees, NaN bits, +inf levels, averaging, float32/64,
    category levels (``code in set``, -1 standing for invalid values) under every category rule."""
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
    tout = [draw(st.integers(-1, K - 1)) if K > 1 else 0 for _ in range(T)]
    n_val = sum((1 if k >= 0 else K) << d for k, d in zip(tout, depth))
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
    return ObliviousEnsemble(schema=schema, depth=np.array(depth, dtype=np.int32), level_feature=np.array(feat),
                             level_threshold=np.array(thr, dtype=np.float64), level_nan_true=np.array(nan, dtype=bool),
                             tree_output=np.array(tout, dtype=np.int32), value=np.array(value),
                             **set_arrays).validate()


def rows(F: int, n: int = 300, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return rng.choice(VALUES, size=(n, F))
