"""Projected Forest (CDP) and Regional RF (CRP) estimators: hand-computed values and a brute-force
per-node reference on random scikit-learn forests (NaN routing included)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from lumber.ir import Forest
from lumber.ir.interp import go_left
from lumber.passes.analyses.rules import build_leaf_table, cdp, crp, projected_weights, reach_mask, regional_probability
from lumber.passes.analyses.rules.divergent import _combinations
from lumber.passes.analyses.rules.estimators import (
    feature_bits, interval_bits, point_bits, subset_cdp, subset_reach, tree_average,
)

INF = np.inf


# -- by hand ----------------------------------------------------------------------------------
#
# Rows r0..r5 = (0.2,0.2) (0.3,0.8) (0.4,0.9) (0.8,0.1) (0.9,2.0) (0.1,3.0); hits r1 r2 r4 r5.
# Leaves: A:L1 = {r0}, A:L2 = {r1, r2, r5}, A:L3 = {r3, r4}; B:L4 = {r0..r3}, B:L5 = {r4, r5}.
# x = (0.2, 0.2).

def test_cdp_by_hand(hand: dict[str, Any]) -> None:
    tab = build_leaf_table(hand["rule_forest"], hand["X"])
    x = hand["x"][None, :]
    # S = {x1}: tree A reaches L1, L2 (3 hits of 4 rows), tree B both leaves (4 of 6)
    assert cdp(tab, hand["hit"], x, ["x1"])[0] == pytest.approx((3 / 4 + 4 / 6) / 2, abs=1e-15)
    # S = {x0}: tree A reaches L1, L3 (1 of 3), tree B only L4 (2 of 4)
    assert cdp(tab, hand["hit"], x, ["x0"])[0] == pytest.approx((1 / 3 + 2 / 4) / 2, abs=1e-15)
    # nothing resampled: A:L1 (0 of 1), B:L4 (2 of 4)
    assert cdp(tab, hand["hit"], x, [])[0] == pytest.approx(0.25, abs=1e-15)
    # everything resampled: the base rate in each tree
    assert cdp(tab, hand["hit"], x, ["x0", "x1"])[0] == pytest.approx(4 / 6, abs=1e-15)


def test_crp_by_hand(hand: dict[str, Any]) -> None:
    tab = build_leaf_table(hand["rule_forest"], hand["X"])
    x = hand["x"][None, :]
    # x1 in (0.5, 1]: A goes right at x1 <= 0.5 only (L2: 3 of 3), B left only (L4: 2 of 4)
    assert crp(tab, hand["hit"], x, ["x1"], [0.5], [1.0])[0] == pytest.approx(0.75, abs=1e-15)
    # x1 in (0.5, 3]: A L2 (1), B both ways (4 of 6)
    assert crp(tab, hand["hit"], x, ["x1"], [0.5], [3.0])[0] == pytest.approx((1 + 4 / 6) / 2, abs=1e-15)
    # x1 in (1.5, inf]: A L2 (1), B right only (L5: 2 of 2)
    assert crp(tab, hand["hit"], x, ["x1"], [1.5], [INF])[0] == pytest.approx(1.0, abs=1e-15)


def test_regional_by_hand(hand: dict[str, Any]) -> None:
    tab = build_leaf_table(hand["rule_forest"], hand["X"])
    # R = x0 in (0.5, 1]: A right (L3: r3 no, r4 yes -> 1/2); B both (4/6)
    lo = np.array([[0.5, -INF]])
    hi = np.array([[1.0, INF]])
    assert regional_probability(tab, hand["hit"], lo, hi)[0] == pytest.approx((1 / 2 + 4 / 6) / 2, abs=1e-15)
    # add x1 in (1.5, 3]: A L3 (1/2), B L5 (2/2)
    hi2 = np.array([[1.0, 3.0]])
    lo2 = np.array([[0.5, 1.5]])
    assert regional_probability(tab, hand["hit"], lo2, hi2)[0] == pytest.approx(0.75, abs=1e-15)


def test_projected_weights_by_hand(hand: dict[str, Any]) -> None:
    tab = build_leaf_table(hand["rule_forest"], hand["X"])
    is_point = np.array([True, False])
    reach = reach_mask(tab, hand["x"][None, :], None, None, is_point)[0]
    w = projected_weights(tab, reach)
    a, b = 1 / 4, 1 / 6
    np.testing.assert_allclose(w, np.array([a + b, a + b, a + b, b, b, a + b]) / 2, rtol=0, atol=1e-15)
    assert w.sum() == pytest.approx(1.0)
    assert w @ hand["hit"] == pytest.approx(cdp(tab, hand["hit"], hand["x"][None, :], ["x1"])[0])


def test_empty_trees_leave_the_mean(hand: dict[str, Any]) -> None:
    """A tree whose reached leaves hold no training row does not count (here: only tree B does)."""
    tab = build_leaf_table(hand["rule_forest"], hand["X"][[0, 3, 4]])  # A:L2 now empty
    x = np.array([[0.2, 0.8]])  # reaches A:L2 (empty) and B:L4 (r0, r3: no hits)
    p, used = tree_average(tab, reach_mask(tab, x, None, None, np.ones(2, dtype=bool)),
                           tab.hits_per_leaf(hand["hit"][[0, 3, 4]]))
    assert used[0] == 1 and p[0] == 0.0


# -- brute force on random forests -------------------------------------------------------------

def _reference(forest: Forest, X_train: np.ndarray, hit: np.ndarray, x: np.ndarray, lo: np.ndarray,
               hi: np.ndarray, is_point: np.ndarray) -> float:
    """Walk every tree node by node: point features one way, interval features left/right/both,
    free features both ways."""
    leaves_of_rows = forest.apply_global(X_train)
    ratios = []
    for t in range(forest.n_trees):
        reached: list[int] = []
        stack = [int(forest.tree_offset[t])]
        while stack:
            n = stack.pop()
            if forest.left[n] < 0:
                reached.append(n)
                continue
            j = int(forest.feature[n])
            if is_point[j]:
                gl = bool(go_left(forest, np.array([n]), np.array([x[j]]))[0])
                stack.append(int(forest.left[n] if gl else forest.right[n]))
                continue
            if np.isneginf(lo[j]) and np.isposinf(hi[j]):  # resampled freely: both ways (NaN-only leaves too)
                stack += [int(forest.left[n]), int(forest.right[n])]
                continue
            thr = float(forest.threshold[n])
            if lo[j] < thr:
                stack.append(int(forest.left[n]))
            if hi[j] > thr:
                stack.append(int(forest.right[n]))
        inside = np.isin(leaves_of_rows[:, t], reached)
        if inside.sum() > 0:
            ratios.append(float(hit[inside].mean()))
    return float(np.mean(ratios)) if ratios else 0.0


@pytest.fixture(scope="module")
def random_rf() -> dict[str, Any]:
    from sklearn.ensemble import RandomForestClassifier

    import lumber

    rng = np.random.default_rng(3)
    X = rng.normal(size=(300, 4)).round(2)
    X[rng.random(X.shape) < 0.05] = np.nan
    y = ((np.nan_to_num(X[:, 0]) + np.nan_to_num(X[:, 1]) ** 2 - np.nan_to_num(X[:, 2])) > 0.5).astype(int)
    rf = RandomForestClassifier(n_estimators=7, max_depth=6, random_state=0, n_jobs=1).fit(X, y)
    forest = lumber.load(rf)
    return {"forest": forest, "X": forest.prepare_input(X), "hit": y == 1, "rng": rng}


@pytest.mark.parametrize("case", range(12))
def test_estimators_match_node_walk(random_rf: dict[str, Any], case: int) -> None:
    f, X, hit = random_rf["forest"], random_rf["X"], random_rf["hit"]
    tab = build_leaf_table(f, X)
    rng = np.random.default_rng(case)
    x = X[rng.integers(0, X.shape[0])].copy()
    if case % 3 == 0:
        x[rng.integers(0, 4)] = np.nan  # NaN routed by the learned direction
    S = np.flatnonzero(rng.random(4) < 0.5)
    is_point = np.ones(4, dtype=bool)
    is_point[S] = False
    free_lo, free_hi = np.full(4, -INF), np.full(4, INF)
    assert cdp(tab, hit, x[None], S)[0] == pytest.approx(_reference(f, X, hit, x, free_lo, free_hi, is_point),
                                                         abs=1e-12)
    blo = np.sort(rng.normal(size=(2, S.size)), axis=0)
    lo, hi = free_lo.copy(), free_hi.copy()
    lo[S], hi[S] = blo[0], blo[1]
    assert crp(tab, hit, x[None], S, blo[0], blo[1])[0] == pytest.approx(
        _reference(f, X, hit, x, lo, hi, is_point), abs=1e-12)
    a = rng.normal(size=4) - 1
    rlo = np.where(rng.random(4) < 0.5, a, -INF)
    rhi = np.where(rng.random(4) < 0.5, a + 2, INF)
    assert regional_probability(tab, hit, rlo[None], rhi[None])[0] == pytest.approx(
        _reference(f, X, hit, x, rlo, rhi, np.zeros(4, dtype=bool)), abs=1e-12)


def test_bit_packed_subsets_match_generic(random_rf: dict[str, Any]) -> None:
    """The bit-packed path scores every subset exactly as the generic estimator, actionability included."""
    f, X, hit = random_rf["forest"], random_rf["X"], random_rf["hit"]
    tab = build_leaf_table(f, X)
    hits_leaf = tab.hits_per_leaf(hit)
    cand = np.array([2, 0, 3, 1], dtype=np.int64)
    bits = feature_bits(4, cand)
    alo = np.array([-INF, -0.5, -INF, 0.0])  # actionable intervals
    ahi = np.array([INF, 1.0, 0.3, INF])
    for r in (0, 17, 99):
        x = X[r]
        bad_fixed = point_bits(tab, x[None], bits)[0]
        bad_act = interval_bits(tab, alo[None], ahi[None], bits, cand)[0]
        for s in range(1, 5):
            masks = _combinations(4, s)
            got = subset_cdp(tab, hits_leaf, bad_fixed, bad_act, masks)
            for m, g in zip(masks, got):
                S = cand[[b for b in range(4) if (int(m) >> b) & 1]]
                is_point = np.ones(4, dtype=bool)
                is_point[S] = False
                lo, hi = np.full(4, -INF), np.full(4, INF)
                lo[S], hi[S] = alo[S], ahi[S]
                assert g == pytest.approx(_reference(f, X, hit, x, lo, hi, is_point), abs=1e-12)
            reach = subset_reach(bad_fixed, bad_act, masks)
            assert reach.shape == (masks.shape[0], tab.n_leaves)
