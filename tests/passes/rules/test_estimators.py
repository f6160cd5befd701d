"""Projected Forest (CDP) and Regional RF (CRP) estimators: hand-computed values, a brute-force
node walk that filters the training rows (the paper's definition, NaN routing included), and a
Monte Carlo check of CDP against the exact conditional share on discrete data."""

from __future__ import annotations

import itertools
from typing import Any

import numpy as np
import pytest

from lumber.ir import Forest, Target
from lumber.ir.interp import go_left
from lumber.passes.analyses.rules import build_cells, build_context, cdp, crp, projected_weights, regional_probability
from lumber.passes.analyses.rules.actionable import ActionSpace
from lumber.passes.analyses.rules.cells import BOTH
from lumber.passes.analyses.rules.core import make_query, subset_cdp
from lumber.passes.analyses.rules.divergent import _combinations

INF = np.inf


# -- by hand ----------------------------------------------------------------------------------
#
# Rows r0..r5 = (0.2,0.2) (0.3,0.8) (0.4,0.9) (0.8,0.1) (0.9,2.0) (0.1,3.0); hits r1 r2 r4 r5.
# Tree A: x0 <= 0.5 ? (x1 <= 0.5 ? L1 : L2) : L3.   Tree B: x1 <= 1.5 ? L4 : L5.
# x = (0.2, 0.2). A query's cell in a tree: the rows that go its way at every reached split it
# determines.

def test_cdp_by_hand(hand: dict[str, Any]) -> None:
    ci = build_cells(hand["rule_forest"], hand["X"], min_rows=1)
    x = hand["x"][None, :]
    # S = {x1}: tree A's root keeps x0 <= 0.5 (r0 r1 r2 r5: 3 hits of 4), tree B keeps every row (4 of 6)
    assert cdp(ci, hand["hit"], x, ["x1"])[0] == pytest.approx((3 / 4 + 4 / 6) / 2, abs=1e-15)
    # S = {x0}: A goes both ways at the root but x1 <= 0.5 is still determined: r0 r3 (0 of 2);
    # B keeps x1 <= 1.5 (r0..r3: 2 of 4). The union of the reached leaves would give (1/3 + 2/4) / 2.
    assert cdp(ci, hand["hit"], x, ["x0"])[0] == pytest.approx((0 / 2 + 2 / 4) / 2, abs=1e-15)
    # nothing resampled: A:L1 (0 of 1), B:L4 (2 of 4)
    assert cdp(ci, hand["hit"], x, [])[0] == pytest.approx(0.25, abs=1e-15)
    # everything resampled: the base rate in each tree
    assert cdp(ci, hand["hit"], x, ["x0", "x1"])[0] == pytest.approx(4 / 6, abs=1e-15)


def test_crp_by_hand(hand: dict[str, Any]) -> None:
    ci = build_cells(hand["rule_forest"], hand["X"], min_rows=1)
    x = hand["x"][None, :]
    # x1 in (0.5, 1]: A keeps x0 <= 0.5 and x1 > 0.5 (r1 r2 r5: 3 of 3), B x1 <= 1.5 (2 of 4)
    assert crp(ci, hand["hit"], x, ["x1"], [0.5], [1.0])[0] == pytest.approx(0.75, abs=1e-15)
    # x1 in (0.5, 3]: A (1), B straddles its split: both ways, every row (4 of 6)
    assert crp(ci, hand["hit"], x, ["x1"], [0.5], [3.0])[0] == pytest.approx((1 + 4 / 6) / 2, abs=1e-15)
    # x1 in (1.5, inf]: A (1), B right only (r4 r5: 2 of 2)
    assert crp(ci, hand["hit"], x, ["x1"], [1.5], [INF])[0] == pytest.approx(1.0, abs=1e-15)


def test_regional_by_hand(hand: dict[str, Any]) -> None:
    ci = build_cells(hand["rule_forest"], hand["X"], min_rows=1)
    # R = x0 in (0.5, 1]: A right (r3 no, r4 yes -> 1/2); B both (4/6)
    lo = np.array([[0.5, -INF]])
    hi = np.array([[1.0, INF]])
    assert regional_probability(ci, hand["hit"], lo, hi)[0] == pytest.approx((1 / 2 + 4 / 6) / 2, abs=1e-15)
    # add x1 in (1.5, 3]: A L3 (1/2), B right (2/2)
    lo2 = np.array([[0.5, 1.5]])
    hi2 = np.array([[1.0, 3.0]])
    assert regional_probability(ci, hand["hit"], lo2, hi2)[0] == pytest.approx(0.75, abs=1e-15)


def test_projected_weights_by_hand(hand: dict[str, Any]) -> None:
    ci = build_cells(hand["rule_forest"], hand["X"], min_rows=1)
    rp = ci.point_routes(hand["x"][None, :])[0]
    x1_free = np.where(ci.feature == 1, BOTH, rp).astype(np.int8)
    w = projected_weights(ci, x1_free)
    a, b = 1 / 4, 1 / 6
    np.testing.assert_allclose(w, np.array([a + b, a + b, a + b, b, b, a + b]) / 2, rtol=0, atol=1e-15)
    assert w @ hand["hit"] == pytest.approx(cdp(ci, hand["hit"], hand["x"][None, :], ["x1"])[0])
    # x0 resampled: A's cell is {r0, r3} (x1 <= 0.5 still determined), B's {r0..r3}
    w0 = projected_weights(ci, np.where(ci.feature == 0, BOTH, rp).astype(np.int8))
    np.testing.assert_allclose(w0, np.array([1 / 2 + 1 / 4, 1 / 4, 1 / 4, 1 / 2 + 1 / 4, 0, 0]) / 2, atol=1e-15)
    assert w0.sum() == pytest.approx(1.0)


def test_empty_cells_leave_the_mean(hand: dict[str, Any]) -> None:
    """A tree whose cell holds no training row does not count (here: only tree B does)."""
    ci = build_cells(hand["rule_forest"], hand["X"][[0, 3, 4]], min_rows=1)
    x = np.array([[0.2, 0.8]])  # A: x0 <= 0.5 and x1 > 0.5 (no row); B: x1 <= 1.5 (r0, r3: no hits)
    p, used = ci.estimate(ci.point_routes(x), ci.hit_bits(hand["hit"][[0, 3, 4]]))
    assert used[0] == 1 and p[0] == 0.0


# -- brute force on random forests -------------------------------------------------------------

def _reference(forest: Forest, X_train: np.ndarray, hit: np.ndarray, x: np.ndarray, lo: np.ndarray,
               hi: np.ndarray, is_point: np.ndarray, min_rows: int = 1) -> float:
    """Walk every tree level by level: point features one way, interval features left/right/both,
    free features both ways; at every split the query goes one way only, drop the training rows
    that go the other way, unless that level would leave fewer than ``min_rows`` rows (then stop
    filtering). Mean over trees with rows left of the target share."""
    ratios = []
    n_rows = X_train.shape[0]
    for t in range(forest.n_trees):
        keep = np.ones(n_rows, dtype=bool)
        level = [int(forest.tree_offset[t])]
        filtering = True
        while level:
            nxt: list[int] = []
            cut = keep.copy()
            for n in level:
                if forest.left[n] < 0:
                    continue
                j = int(forest.feature[n])
                node = np.array([n])
                if is_point[j]:
                    ways = [bool(go_left(forest, node, np.array([x[j]]))[0])]
                elif np.isneginf(lo[j]) and np.isposinf(hi[j]):  # resampled freely: both ways, no filter
                    ways = [True, False]
                else:
                    thr = float(forest.threshold[n])
                    ways = ([True] if lo[j] < thr else []) + ([False] if hi[j] > thr else [])
                if len(ways) == 1:
                    cut &= go_left(forest, np.repeat(n, n_rows), X_train[:, j]) == ways[0]
                nxt += [int(forest.left[n] if w else forest.right[n]) for w in ways]
            if filtering and cut.sum() >= min_rows:
                keep = cut
            else:
                filtering = False
            level = nxt
        if keep.sum() > 0:
            ratios.append(float(hit[keep].mean()))
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
@pytest.mark.parametrize("min_rows", [1, 5, 40])
def test_estimators_match_node_walk(random_rf: dict[str, Any], case: int, min_rows: int) -> None:
    f, X, hit = random_rf["forest"], random_rf["X"], random_rf["hit"]
    ci = build_cells(f, X, min_rows=min_rows)
    rng = np.random.default_rng(case)
    x = X[rng.integers(0, X.shape[0])].copy()
    if case % 3 == 0:
        x[rng.integers(0, 4)] = np.nan  # NaN routed by the learned direction
    S = np.flatnonzero(rng.random(4) < 0.5)
    is_point = np.ones(4, dtype=bool)
    is_point[S] = False
    free_lo, free_hi = np.full(4, -INF), np.full(4, INF)
    assert cdp(ci, hit, x[None], S)[0] == pytest.approx(_reference(f, X, hit, x, free_lo, free_hi, is_point,
                                                                              min_rows), abs=1e-12)
    blo = np.sort(rng.normal(size=(2, S.size)), axis=0)
    lo, hi = free_lo.copy(), free_hi.copy()
    lo[S], hi[S] = blo[0], blo[1]
    assert crp(ci, hit, x[None], S, blo[0], blo[1])[0] == pytest.approx(
        _reference(f, X, hit, x, lo, hi, is_point, min_rows), abs=1e-12)
    a = rng.normal(size=4) - 1
    rlo = np.where(rng.random(4) < 0.5, a, -INF)
    rhi = np.where(rng.random(4) < 0.5, a + 2, INF)
    assert regional_probability(ci, hit, rlo[None], rhi[None])[0] == pytest.approx(
        _reference(f, X, hit, x, rlo, rhi, np.zeros(4, dtype=bool), min_rows), abs=1e-12)


def test_subset_masks_match_the_node_walk(random_rf: dict[str, Any]) -> None:
    """The search's subset masks score every subset exactly as the node walk, actionability included."""
    f, X = random_rf["forest"], random_rf["X"]
    ctx = build_context(f, f, X)
    target = Target(classes=(1,), labels=(0, 1))
    hit = ctx.hit(target)  # the model's decisions (here the forest's own)
    alo = np.array([-INF, -0.5, -INF, 0.0])  # actionable intervals
    ahi = np.array([INF, 1.0, 0.3, INF])
    act = ActionSpace(np.ones(4, dtype=bool), alo, ahi, ("",) * 4)
    for r in (0, 17, 99):
        x = X[r]
        q = make_query(ctx, act, ctx.cells.point_routes(x[None])[0], 0, point=x)
        cand = q.candidates
        for s in range(1, cand.size + 1):
            masks = _combinations(cand.size, s)
            got = subset_cdp(ctx, q, target, masks)
            for m, g in zip(masks, got):
                S = cand[[b for b in range(cand.size) if (int(m) >> b) & 1]]
                is_point = np.ones(4, dtype=bool)
                is_point[S] = False
                lo, hi = np.full(4, -INF), np.full(4, INF)
                lo[S], hi[S] = alo[S], ahi[S]
                assert g == pytest.approx(_reference(f, X, hit, x, lo, hi, is_point, ctx.cells.min_rows),
                                          abs=1e-12)


# -- Monte Carlo: CDP_S(x) = P(f(X) in Y* | X_Sbar = x_Sbar) on the training rows ---------------

def test_cdp_matches_monte_carlo_on_discrete_data() -> None:
    """On discrete data the conditional law given X_Sbar = x_Sbar is the training rows that match x
    exactly outside S; the share of them the model sends to the target is a Monte Carlo estimate of
    CDP_S(x). The Projected Forest's cells agree with it; the union of the reached leaves (lumber's
    earlier estimator) did not."""
    from sklearn.ensemble import RandomForestClassifier

    import lumber
    from lumber.passes.analyses.rules import build_leaf_table

    rng = np.random.default_rng(0)
    n, d = 4000, 4
    X = rng.integers(0, 3, size=(n, d)).astype(np.float64)
    X[:, 3] = np.where(rng.random(n) < 0.7, X[:, 0], X[:, 3])  # a dependent feature
    y = ((X[:, 0] + X[:, 1] * X[:, 2] + (X[:, 3] == 2)) >= 3).astype(int)  # the "model's decisions"
    rf = RandomForestClassifier(n_estimators=10, max_depth=8, random_state=0, n_jobs=1).fit(X, y)
    f = lumber.load(rf)
    Xf = f.prepare_input(X)
    ci = build_cells(f, Xf, min_rows=1)
    tab = build_leaf_table(f, Xf)
    errs, union_errs = [], []
    for x in Xf[rng.choice(n, 25, replace=False)]:
        hit = y != (int(x[0] + x[1] * x[2] + (x[3] == 2)) >= 3)
        for size in (1, 2, 3):
            for S in itertools.combinations(range(d), size):
                rest = [j for j in range(d) if j not in S]
                match = np.all(X[:, rest] == x[rest], axis=1)
                if match.sum() < 50:
                    continue
                mc = hit[match].mean()
                errs.append(abs(cdp(ci, hit, x[None], list(S))[0] - mc))
                # the union of the reached leaves: every row of a leaf the query reaches
                reach = np.ones(tab.n_leaves, dtype=bool)
                for j in rest:
                    reach &= (x[j] > tab.lo[:, j]) & (x[j] <= tab.hi[:, j])
                ratios = [hit[reach[tab.row_leaf[:, t]]].mean() for t in range(tab.n_trees)]
                union_errs.append(abs(np.mean(ratios) - mc))
    assert len(errs) > 200
    # measured: cells mean 0.005, 95th percentile 0.025 (the rest: splits a tree did not make);
    # union mean 0.061, 95th percentile 0.175
    assert np.mean(errs) < 0.01 and np.percentile(errs, 95) < 0.04
    assert np.mean(union_errs) > 5 * np.mean(errs)
