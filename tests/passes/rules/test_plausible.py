"""Plausibility-aware local rules and the wider second search, on hand-built forests.

The inlier score is a plain function of the point here (no isolation forest), so which
counterfactual points are plausible is known by hand.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from builders import make_forest
from rules_helpers import classifier
from lumber.ir import InputDataError
from lumber.passes.analyses.rules import FOUND, NO_RULE, RuleOptions, build_context, local_rules

INF = np.inf


@pytest.fixture(scope="module")
def bands() -> dict[str, Any]:
    """Target class iff x0 in (0, 1] or (2, 3]: two disjoint bands along one feature, each holding
    two training rows (see test_local.py)."""
    spec = ("x0", 1.0, ("x0", 0.0, 0.0, 1.0), ("x0", 2.0, 2.0, ("x0", 3.0, 3.0, 4.0)))
    rule_forest = make_forest([spec, spec], ["x0", "x1"], average=True)
    model = classifier([("x0", 1.0, ("x0", 0.0, -5.0, 5.0), ("x0", 2.0, -5.0, ("x0", 3.0, 5.0, -5.0)))],
                       ["x0", "x1"])
    x0 = np.array([-0.5, 0.5, 0.7, 1.5, 1.7, 2.5, 2.6, 3.5, 4.0])
    return {"rule_forest": rule_forest, "model": model, "X": np.column_stack([x0, np.arange(9.0)])}


def _bands(b: dict[str, Any], score: Any, **opts: Any) -> Any:
    ctx = build_context(b["model"], b["rule_forest"], b["X"], score=score, options=RuleOptions(**opts))
    return local_rules(ctx, np.array([[5.0, 4.0]]), target=1)[0]


def high(X: np.ndarray) -> np.ndarray:
    """Inlier iff x0 > 2."""
    return X[:, 0] - 2.0


def low(X: np.ndarray) -> np.ndarray:
    """Inlier iff x0 <= 1."""
    return 1.0 - X[:, 0]


@pytest.mark.parametrize("score, box", [(high, (2.0, 3.0)), (low, (0.0, 1.0))])
def test_plausible_box_comes_first(bands: dict[str, Any], score: Any, box: tuple[float, float]) -> None:
    """Both bands have CRP 1 and the same plausibility 2/9; the one whose counterfactual points are
    inliers comes first, carries the inlier share (2 rows of weight 1/9), and the sample is drawn there."""
    res = _bands(bands, score, n_samples=1)
    assert res.status == FOUND and len(res.rules) == 2
    first, other = res.rules
    assert (first.intervals[0].lo, first.intervals[0].hi) == box
    assert first.inliers == pytest.approx(2 / 9) and other.inliers == 0.0
    assert first.probability == other.probability == 1.0
    [s] = res.samples
    assert s.inlier and s.verified and first.contains(s.x)[0]
    assert res.to_dict()["rules"][0]["inliers"] == pytest.approx(2 / 9)


@pytest.mark.parametrize("score, box", [(high, (2.0, 3.0)), (low, (0.0, 1.0))])
def test_plausible_box_survives_max_rules(bands: dict[str, Any], score: Any, box: tuple[float, float]) -> None:
    """With one rule kept, it is the band holding plausible points, whichever that is."""
    res = _bands(bands, score, n_samples=1, max_rules=1)
    [r] = res.rules
    assert (r.intervals[0].lo, r.intervals[0].hi) == box
    assert res.samples[0].inlier


def test_no_scorer_no_inlier_share(bands: dict[str, Any]) -> None:
    res = _bands(bands, None, n_samples=0)
    assert all(r.inliers is None for r in res.rules)
    assert res.to_dict()["rules"][0]["inliers"] is None


def test_no_plausible_point_anywhere(bands: dict[str, Any]) -> None:
    """A score that calls everything an outlier: the rules are the same as without one, inlier share 0,
    and the sample is still verified (it is the best the box offers) but flagged as an outlier."""
    res = _bands(bands, lambda X: np.full(X.shape[0], -1.0), n_samples=1)
    assert res.status == FOUND and sorted((r.intervals[0].lo, r.intervals[0].hi) for r in res.rules) == [
        (0.0, 1.0), (2.0, 3.0)]
    assert all(r.inliers == 0.0 for r in res.rules)
    assert res.samples[0].verified and not res.samples[0].inlier


def test_prune_keeps_a_feature_its_plausible_points_need(hand: dict[str, Any]) -> None:
    """Box x0 any, x1 > 1.5 over S = {x0, x1} (test_local.py: x0 is dropped, CRP 1 with x0 fixed). With
    inliers only where x0 > 0.85, the box's plausible point is r4's (0.9, 2.0); fixing x0 at the case's
    0.2 would leave none, so x0 stays in the rule."""
    from lumber.passes.analyses.rules import action_space
    from lumber.passes.analyses.rules.boxes import ScoredBox
    from lumber.passes.analyses.rules.core import _prune, make_query, plausible_values, set_weights

    x = hand["x"]
    ctx = build_context(hand["model"], hand["rule_forest"], hand["X"], score=lambda X: X[:, 0] - 0.85,
                        options=RuleOptions(pi_c=0.9))
    act = action_space(None, ["x0", "x1"], x, x)
    q = make_query(ctx, act, ctx.cells.point_routes(x[None, :])[0], 0, point=x)
    S = np.array([0, 1])
    tgt = local_rules(ctx, x[None, :], target=1)[0].target
    w = set_weights(ctx, q, S)
    good = plausible_values(ctx, q, tgt, S, w)
    assert good is not None and good[0].tolist() == [[0.9, 2.0]]
    box = ScoredBox(np.array([-INF, 1.5]), np.array([INF, INF]), 0.9, 7 / 24)
    keep, crp, _, inl = _prune(ctx, q, tgt, S, box, act.lo[S], act.hi[S], good)
    assert keep.tolist() == [True, True] and crp == 0.9 and inl == pytest.approx(float(good[1][0]))
    # an inlier region that does not depend on x0: x0 is dropped as before
    ctx2 = build_context(hand["model"], hand["rule_forest"], hand["X"], score=lambda X: X[:, 1] - 1.5,
                         options=RuleOptions(pi_c=0.9))
    good2 = plausible_values(ctx2, q, tgt, S, w)
    keep2, crp2, _, inl2 = _prune(ctx2, q, tgt, S, box, act.lo[S], act.hi[S], good2)
    assert keep2.tolist() == [False, True] and crp2 == pytest.approx(1.0) and inl2 is not None and inl2 > 0


# -- the second, wider search --------------------------------------------------------------------

@pytest.fixture(scope="module")
def wide() -> dict[str, Any]:
    """x0 is split on most (twice), x1 once; the model's target is x1 > 0.5. With K = 1 only x0 may
    move and no box over x0 reaches pi_c (tree B keeps the case's x1 <= 0.5 leaf, which holds no
    target row); with K = 2, x1 moves and x1 > 0.5 reaches CRP (4/5 + 1) / 2 = 0.9 (tree A: the
    case's leaf x0 <= 0.25 holds 4 target rows of 5; tree B: x1 > 0.5 holds only target rows)."""
    rule_forest = make_forest([("x0", 0.5, ("x0", 0.25, 1.0, 2.0), 3.0), ("x1", 0.5, 4.0, 5.0)], ["x0", "x1"],
                              average=True)
    model = classifier([("x1", 0.5, -5.0, 5.0)], ["x0", "x1"])
    X = np.array([[0.1, 0.1], [0.1, 0.9], [0.05, 0.9], [0.2, 0.9], [0.15, 0.95], [0.3, 0.1], [0.3, 0.9],
                  [0.8, 0.1], [0.8, 0.9], [0.9, 0.8]])
    return {"rule_forest": rule_forest, "model": model, "X": X, "x": np.array([[0.1, 0.1]])}


def test_second_pass_over_more_features(wide: dict[str, Any]) -> None:
    ctx = build_context(wide["model"], wide["rule_forest"], wide["X"], options=RuleOptions(k=1, k_max=2))
    res = local_rules(ctx, wide["x"], target=1)[0]
    assert res.status == FOUND and "x1" in res.features
    assert "no rule over the 1 most-used features, so the search moved on to the 2 most-used" in res.message
    assert [(iv.feature.name, iv.lo, iv.hi) for r in res.rules for iv in r.intervals] == [("x1", 0.5, INF)]
    assert res.rules[0].probability == pytest.approx(0.9)


def test_no_second_pass_when_off(wide: dict[str, Any]) -> None:
    ctx = build_context(wide["model"], wide["rule_forest"], wide["X"], options=RuleOptions(k=1, k_max=0))
    res = local_rules(ctx, wide["x"], target=1)[0]
    assert res.status == NO_RULE and res.features == ("x0",) and "most-used" not in res.message


def test_options_checked() -> None:
    with pytest.raises(InputDataError, match="k_max must be between 0 and 62"):
        RuleOptions(k_max=63).check()
    with pytest.raises(InputDataError, match="widen and widen_sets must be >= 0"):
        RuleOptions(widen_sets=-1).check()
    with pytest.raises(InputDataError, match="max_sets_wide"):
        RuleOptions(max_sets_wide=0).check()


def test_robustness_bonus_only_for_inliers() -> None:
    """An outlier that survives every noise draw never outranks an inlier that survives none."""
    from lumber.passes.analyses.rules.sampling import AnnealOptions, _energy

    opt = AnnealOptions(robust_sigma=0.1, robust_weight=0.5)
    e = _energy(np.array([-0.01, 0.001, 0.02]), np.array([True, True, True]), np.array([0.5, 0.0, 0.25]), opt)
    assert e.tolist() == pytest.approx([-0.01, 0.001, 0.27])
    assert int(np.argmax(e)) == 2 and e[1] > e[0]


def test_text_shows_the_plausible_share(bands: dict[str, Any]) -> None:
    text = _bands(bands, high, n_samples=0).to_text()
    assert "(plausibility 0.222, plausible points 0.222, support 22.2% of training rows)" in text
    assert "plausible points 0.000" in text
    assert "plausible points" not in _bands(bands, None, n_samples=0).to_text()
