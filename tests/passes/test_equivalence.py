"""``lumber.equivalent``: equal functions with different tree shapes are recognised; any difference
(one leaf, one NaN direction, float32 rounding) yields a counterexample that evaluates differently."""

from __future__ import annotations

import itertools
from typing import Any

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import lumber
from builders import make_forest
from lumber.ir import Forest, PostTransform, Task
from lumber.ir.forest import ZERO_THRESHOLD
from lumber.passes.analyses.equivalence import widen_to_float64
from lumber.passes.transforms.polynomial import canonical_thresholds, forest_to_polynomial
from strategies import forests


def tree_spec(f: Forest, t: int) -> Any:
    """Tree ``t`` as a builders spec (numerical splits only)."""
    names = f.schema.feature_names

    def walk(n: int) -> Any:
        if f.left[n] < 0:
            return f.value[n].tolist()
        return (names[f.feature[n]], float(f.threshold[n]), walk(int(f.left[n])), walk(int(f.right[n])),
                bool(f.missing_left[n]))

    return walk(int(f.tree_offset[t]))


def graft(a: Any, b: Any) -> Any:
    """One tree computing a + b: every leaf of ``a`` replaced by ``b`` shifted by that leaf."""
    if isinstance(a, tuple):
        return (a[0], a[1], graft(a[2], b), graft(a[3], b), a[4])
    if isinstance(b, tuple):
        return (b[0], b[1], graft(a, b[2]), graft(a, b[3]), b[4])
    return [x + y for x, y in zip(a, b)]


def rebuild(f: Forest, trees: list[Any], **changes: Any) -> Forest:
    s = f.schema
    kw = dict(task=s.task, n_outputs=s.n_outputs, base_score=s.base_score, post_transform=s.post_transform,
              average=s.average, input_dtype=s.input_dtype, classes=s.classes)
    kw.update(changes)
    return make_forest(trees, s.feature_names, **kw)


@pytest.fixture(scope="module")
def lgb_forest() -> Forest:
    import lightgbm as lgb
    from sklearn.datasets import load_breast_cancer

    X, y = load_breast_cancer(return_X_y=True)
    X = X[:, :6].copy()
    X[np.random.default_rng(0).random(X.shape) < 0.15] = np.nan  # learned NaN directions
    bst = lgb.train({"objective": "binary", "num_leaves": 5, "verbose": -1, "num_threads": 1, "seed": 0},
                    lgb.Dataset(X, y), num_boost_round=6)
    return lumber.load(bst)


def composed(f: Forest) -> Forest:
    """Same function, other shapes: trees grafted pairwise (3 deeper trees), in reverse order."""
    specs = [tree_spec(f, t) for t in range(f.n_trees)]
    return rebuild(f, [graft(specs[i], specs[i + 1]) for i in range(0, len(specs), 2)][::-1])


def test_lightgbm_model_equals_its_rebuilt_trees(lgb_forest: Forest) -> None:
    g = composed(lgb_forest)
    assert g.n_trees == 3 and g.max_depth > lgb_forest.max_depth
    r = lumber.equivalent(lgb_forest, g)
    assert r.equal and bool(r) and r.counterexample is None and r.tolerance > 0


def test_one_leaf_change_is_caught_with_a_verified_counterexample(lgb_forest: Forest) -> None:
    g = composed(lgb_forest)
    value = g.value.copy()
    leaf = int(np.flatnonzero(g.is_leaf)[7])
    value[leaf] += 0.01
    h = g.replace(value=value)
    r = lumber.equivalent(lgb_forest, h)
    assert not r.equal and r.verified and r.counterexample is not None
    assert r.difference == pytest.approx(0.01, rel=1e-6)
    x = r.counterexample[None, :]
    assert h.apply_global(x)[0, g.node_tree[leaf]] == leaf  # the counterexample reaches the changed leaf
    assert abs(lgb_forest.evaluate(x)[0] - h.evaluate(x)[0]) == pytest.approx(0.01, rel=1e-6)


def test_a_different_nan_direction_is_caught_with_a_nan_counterexample(lgb_forest: Forest) -> None:
    g = composed(lgb_forest)
    ml = g.missing_left.copy()
    root = int(g.tree_offset[0])
    ml[root] = not ml[root]
    r = lumber.equivalent(lgb_forest, g.replace(missing_left=ml))
    assert not r.equal and r.verified
    assert np.isnan(r.counterexample[g.feature[root]])


def test_a_redundant_split_is_not_a_difference(lgb_forest: Forest) -> None:
    spec = tree_spec(lgb_forest, 0)
    name = lgb_forest.schema.feature_names[0]
    padded = (name, 0.123, spec, spec, True)  # both sides identical: the split changes nothing
    specs = [padded] + [tree_spec(lgb_forest, t) for t in range(1, lgb_forest.n_trees)]
    g = rebuild(lgb_forest, specs)
    assert lumber.equivalent(lgb_forest, g).equal
    # its monomials cancel up to rounding (the exact pass keeps ~1e-16 residues; equivalence drops them)
    p = forest_to_polynomial(g)
    c = p.cond_threshold.tolist().index(0.123)
    assert np.abs(p.weight[p.mono_of_entry[p.mono_cond == c]]).max() < 1e-15


def test_float32_inputs_versus_widened_float64_thresholds() -> None:
    t32 = float(np.float32(0.1))
    f32 = make_forest([("x0", t32, 1.0, 2.0)], ["x0"], input_dtype="float32")
    wide = float(widen_to_float64(forest_to_polynomial(f32)).cond_threshold[0])
    # the widened threshold is exactly where float32 rounding switches sides
    assert np.float32(wide) <= np.float32(t32) < np.float32(np.nextafter(wide, 1.0))
    assert lumber.equivalent(f32, make_forest([("x0", wide, 1.0, 2.0)], ["x0"])).equal
    r = lumber.equivalent(f32, make_forest([("x0", t32, 1.0, 2.0)], ["x0"]))
    assert not r.equal and r.verified and t32 < r.counterexample[0] <= wide


def test_polynomials_and_mismatched_schemas(lgb_forest: Forest) -> None:
    p = forest_to_polynomial(lgb_forest)
    assert lumber.equivalent(p, lgb_forest).equal
    pruned = p.select(np.arange(p.n_monomials) != 3)
    r = lumber.equivalent(pruned, lgb_forest)
    assert not r.equal and r.verified
    r = lumber.equivalent(lgb_forest, make_forest([("x0", 0.5, 1.0, 2.0)], ["x0"]))
    assert not r.equal and "features" in r.reason
    other = rebuild(lgb_forest, [tree_spec(lgb_forest, t) for t in range(lgb_forest.n_trees)],
                    post_transform=PostTransform.IDENTITY, task=Task.REGRESSION)
    r = lumber.equivalent(lgb_forest, other)
    assert not r.equal and "post-transforms" in r.reason and r.verified


# -- ground truth by brute force over every cell -------------------------------------------------------


def cell_grid(a: Forest, b: Forest) -> np.ndarray:
    """One row per combination of cells of both models' thresholds (plus NaN): the whole input space."""
    dtype = np.float32 if a.schema.input_dtype == "float32" else np.float64
    cols = []
    for j in range(a.n_features):
        ts = []
        for f in (a, b):
            node = (f.left >= 0) & (f.feature == j)
            ts.append(canonical_thresholds(f.threshold[node], a.schema.input_dtype))
        t = np.unique(np.concatenate(ts + [np.zeros(1)]))
        reps = list(t) + [float(np.nextafter(dtype(t.max()), dtype(np.inf))),
                          float(np.nextafter(dtype(t.min()), dtype(-np.inf))), np.nan]
        cols.append(reps)
    return np.array(list(itertools.product(*cols)), dtype=np.float64)


@given(forests(max_trees=3, max_depth=3, max_features=3, categorical=False, missing_zero=False),
       st.integers(0, 10**6), st.sampled_from([0.0, 0.0, 0.25, 1e-3]))
def test_decision_agrees_with_brute_force(f: Forest, seed: int, delta: float) -> None:
    rng = np.random.default_rng(seed)
    g = f.replace(schema=f.schema.with_(accumulate_dtype="float64"))
    if f.n_trees > 1:  # same trees, another order
        specs = [tree_spec(f, t) for t in rng.permutation(f.n_trees)]
        if f.tree_output.max() < 0 or f.n_outputs == 1:
            g = rebuild(f, specs, average=f.schema.average)
    if delta:
        value = g.value.copy()
        leaf = rng.choice(np.flatnonzero(g.is_leaf))
        value[leaf] += delta
        g = g.replace(value=value)
    f64 = f.replace(schema=f.schema.with_(accumulate_dtype="float64"))
    grid = cell_grid(f64, g)
    differs = not np.allclose(f64.evaluate(grid), g.evaluate(grid), rtol=0, atol=1e-9)
    r = lumber.equivalent(f64, g)
    assert r.equal == (not differs)
    if not r.equal:
        assert r.verified


# -- categorical splits ----------------------------------------------------------------------------


def test_categorical_trees_of_other_shapes_are_equivalent_and_a_changed_cell_is_caught() -> None:
    from builders import categorical

    feats = ["x", categorical("c", range(5))]
    a = make_forest([("c", {1, 3}, ("c", {3}, 10.0, 20.0), ("x", 0.0, 30.0, 40.0))], feats)
    # the same function: split off 3 first, then 1, then x
    b = make_forest([("c", {3}, 10.0, ("c", {1}, 20.0, ("x", 0.0, 30.0, 40.0)))], feats)
    assert lumber.equivalent(a, b).equal
    c = make_forest([("c", {3}, 10.0, ("c", {1, 4}, 20.0, ("x", 0.0, 30.0, 40.0)))], feats)
    r = lumber.equivalent(a, c)
    assert not r.equal and r.verified
    assert r.counterexample is not None and r.counterexample[1] == 4.0


def category_grid(a: Forest, b: Forest) -> np.ndarray:
    """Every cell of both models: thresholds per numerical feature, every code (and odd values) per
    categorical one."""
    cols = []
    grid = cell_grid(a, b)
    dtype = np.float32 if a.schema.input_dtype == "float32" else np.float64
    for j in range(a.n_features):
        if any(f.is_categorical[(f.left >= 0) & (f.feature == j)].any() for f in (a, b)):
            cols.append([0.0, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 2.5, -1.0, 1e10, np.nan])
        else:  # plus LightGBM's zero region: 0, its bounds and the values just outside
            z = dtype(ZERO_THRESHOLD)
            zero = [0.0, float(z), -float(z), float(np.nextafter(z, dtype(np.inf))), float(np.nextafter(-z, dtype(-np.inf)))]
            cols.append(np.unique(np.concatenate([grid[:, j][~np.isnan(grid[:, j])], zero])).tolist() + [np.nan])
    return np.array(list(itertools.product(*cols)), dtype=np.float64)


@given(forests(max_trees=3, max_depth=3, max_features=3),
       st.integers(0, 10**6), st.sampled_from([0.0, 0.25, 1e-3]))
def test_categorical_and_zero_as_missing_decision_agrees_with_brute_force(f: Forest, seed: int, delta: float) -> None:
    f = f.replace(schema=f.schema.with_(accumulate_dtype="float64"))
    g = f
    if delta:
        value = g.value.copy()
        value[np.random.default_rng(seed).choice(np.flatnonzero(g.is_leaf))] += delta
        g = g.replace(value=value)
    grid = category_grid(f, g)
    differs = not np.allclose(f.evaluate(grid), g.evaluate(grid), rtol=0, atol=1e-9)
    r = lumber.equivalent(f, g)
    assert r.equal == (not differs)
    if not r.equal:
        assert r.verified
