"""Hypothesis strategies: random valid Forests and inputs that hit their boundaries.

``forests()`` draws array trees directly (numerical and categorical splits,
NaN directions, LightGBM-style zero-as-missing, several outputs), so every
transform and backend can be checked against ``Forest.evaluate`` on shapes no
training run would produce. ``inputs_for(forest)`` draws rows that sit on,
just above and just below every threshold, plus NaN, zeros and odd categories.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from hypothesis import strategies as st

from lumber.ir import Feature, FeatureKind, Forest, PostTransform, Schema, Task
from lumber.ir.assemble import TreeArrays, concat_trees
from lumber.ir.forest import ZERO_THRESHOLD
from lumber.ir.schema import CategoryRule

THRESHOLDS = st.sampled_from([-2.0, -0.5, 0.0, 0.25, 0.5, 1.0, 1.5, 3.0, 7.25])


@st.composite
def tree_arrays(draw: Any, n_features: int, categorical: list[int], n_outputs: int, output: int,
                max_depth: int, allow_missing_zero: bool) -> TreeArrays:
    left: list[int] = []
    right: list[int] = []
    feat: list[int] = []
    thr: list[float] = []
    miss: list[bool] = []
    mzero: list[bool] = []
    iscat: list[bool] = []
    inset: list[bool] = []
    invalid: list[bool] = []
    val: list[list[float]] = []
    cats: dict[int, np.ndarray] = {}

    def grow(depth: int) -> int:
        i = len(left)
        left.append(-1); right.append(-1); feat.append(-1); thr.append(np.nan); miss.append(False)
        mzero.append(False); iscat.append(False); inset.append(True); invalid.append(False)
        val.append([0.0] * n_outputs)
        split = depth < max_depth and draw(st.booleans() if depth > 0 else st.just(True))
        if split:
            f = draw(st.integers(0, n_features - 1))
            feat[i] = f
            miss[i] = draw(st.booleans())
            if f in categorical:
                iscat[i] = True
                cats[i] = np.array(sorted(draw(st.sets(st.integers(0, 5), min_size=1, max_size=4))), dtype=np.int64)
                inset[i] = draw(st.booleans())
                invalid[i] = draw(st.booleans())
            else:
                thr[i] = draw(THRESHOLDS)
                mzero[i] = allow_missing_zero and draw(st.booleans())
            left[i] = grow(depth + 1)
            right[i] = grow(depth + 1)
        else:
            leaf = [draw(st.floats(-4, 4, allow_nan=False, width=32)) for _ in range(n_outputs)]
            if output >= 0:
                leaf = [leaf[0] if k == output else 0.0 for k in range(n_outputs)]
            val[i] = leaf
        return i

    grow(0)
    return TreeArrays(
        left=np.array(left), right=np.array(right), feature=np.array(feat), threshold=np.array(thr),
        missing_left=np.array(miss), value=np.array(val), output=output, missing_zero=np.array(mzero),
        is_categorical=np.array(iscat), categories=cats, cat_in_set_left=np.array(inset),
        cat_invalid_left=np.array(invalid),
    )


@st.composite
def forests(draw: Any, *, max_trees: int = 5, max_depth: int = 4, max_features: int = 4,
            categorical: bool = True, multiclass: bool = True, missing_zero: bool = True,
            input_dtype: str | None = None) -> Forest:
    """A random valid Forest (regression, binary or multiclass)."""
    n_features = draw(st.integers(1, max_features))
    cat_feats = [f for f in range(n_features) if categorical and draw(st.booleans()) and f > 0]
    task = draw(st.sampled_from([Task.REGRESSION, Task.BINARY] + ([Task.MULTICLASS] if multiclass else [])))
    K = draw(st.integers(3, 4)) if task == Task.MULTICLASS else 1
    n_trees = draw(st.integers(1, max_trees))
    trees = []
    for t in range(n_trees):
        output = (t % K) if K > 1 and draw(st.booleans()) else (-1 if K > 1 else 0)
        trees.append(draw(tree_arrays(n_features, cat_feats, K, output, draw(st.integers(0, max_depth)),
                                      missing_zero)))
    features = tuple(
        Feature(f"x{i}", FeatureKind.CATEGORICAL if i in cat_feats else FeatureKind.NUMERICAL,
                tuple(range(6)) if i in cat_feats else None)
        for i in range(n_features))
    post = {Task.REGRESSION: PostTransform.IDENTITY, Task.BINARY: PostTransform.SIGMOID,
            Task.MULTICLASS: PostTransform.SOFTMAX}[task]
    schema = Schema(
        features=features, task=task, n_outputs=K,
        base_score=tuple(draw(st.floats(-1, 1, width=32)) for _ in range(K)),
        post_transform=post, average=draw(st.booleans()) and task != Task.MULTICLASS,
        input_dtype=input_dtype or draw(st.sampled_from(["float32", "float64"])),
        classes=None, category_rule=draw(st.sampled_from(list(CategoryRule))),
    )
    return concat_trees(schema, trees)


def boundary_rows(forest: Forest, n_random: int = 32, seed: int = 0) -> np.ndarray:
    """Rows on, just above and just below every threshold, plus NaN/zero/odd-category rows and random rows.

    Each row starts from a random background row and moves one feature, so every
    split sees its own boundary values.
    """
    rng = np.random.default_rng(seed)
    nf = forest.n_features
    base = rng.uniform(-3, 8, size=(n_random, nf))
    cat_cols = [i for i, f in enumerate(forest.schema.features) if f.kind == FeatureKind.CATEGORICAL]
    for c in cat_cols:
        base[:, c] = rng.integers(0, 7, size=n_random)
    dtype = np.float32 if forest.schema.input_dtype == "float32" else np.float64
    rows = [base]
    internal = np.flatnonzero((forest.left >= 0) & ~forest.is_categorical)
    for node in internal:
        t = forest.threshold[node]
        f = forest.feature[node]
        td = dtype(t)
        probes = {float(t), float(td), float(np.nextafter(td, dtype(np.inf))), float(np.nextafter(td, dtype(-np.inf)))}
        for v in probes:
            r = base[rng.integers(0, n_random)].copy()
            r[f] = v
            rows.append(r[None, :])
    z = ZERO_THRESHOLD  # LightGBM's zero-as-missing bound, and the values just outside it
    specials = [np.nan, 0.0, -0.0, 1e-36, -1e-36, z, -z, float(np.nextafter(z, np.inf)), float(np.nextafter(-z, -np.inf)),
                -0.5, -1.0, 0.99, 3.7, 5.0, 6.0, 2.0**24, 2.0**31, 1e10]
    for f in range(nf):
        for v in specials:
            r = base[rng.integers(0, n_random)].copy()
            r[f] = v
            rows.append(r[None, :])
    return np.concatenate(rows, axis=0)
