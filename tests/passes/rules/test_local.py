"""Local counterfactual rules on hand-built forests: divergent set, boxes, merge, disjoint rules,
actionability, empty results, regression targets and samples."""

from __future__ import annotations

import json
from typing import Any

import numpy as np
import pytest

from builders import make_forest
from rules_helpers import classifier
from lumber.ir import Constraints, Direction, FeatureRule, InputDataError, Task
from lumber.passes.analyses.rules import (
    ALREADY_TARGET, FOUND, NO_DIVERGENT_SET, NO_RULE, RuleOptions, build_context, local_rules,
)

INF = np.inf


def _ctx(hand: dict[str, Any], **opts: Any) -> Any:
    cons = opts.pop("constraints", None)
    return build_context(hand["model"], hand["rule_forest"], hand["X"], constraints=cons,
                         options=RuleOptions(**opts))


def test_rule_by_hand(hand: dict[str, Any]) -> None:
    """pi = 0.7: S = {x1} (CDP 17/24; {x0} has 5/12). Candidate boxes over x1: A:L2 (0.5, inf],
    B:L5 (1.5, inf], the cells (0.5, 1.5] of r1/r2 and (1.5, inf] of r4/r5; B:L4 holds x itself.
    Only (1.5, inf] reaches pi_c = 0.9 (CRP 1); its plausibility is w(r4) + w(r5) = 1/12 + 5/24."""
    res = local_rules(_ctx(hand, pi=0.7, pi_c=0.9), hand["x"][None, :], target=1)[0]
    assert res.status == FOUND and res.reached_pi
    assert res.features == ("x1",)
    assert res.cdp == pytest.approx(17 / 24)
    assert len(res.rules) == 1
    r = res.rules[0]
    assert (r.intervals[0].lo, r.intervals[0].hi) == (1.5, INF)
    assert r.probability == pytest.approx(1.0)
    assert r.plausibility == pytest.approx(7 / 24)
    assert r.support == pytest.approx(2 / 6)
    text = res.to_text()
    assert "IF x1 > 1.5" in text and "THEN class 1 with probability 1.000" in text


def test_merge_by_hand(hand: dict[str, Any]) -> None:
    """pi_c = 0.8 also admits (0.5, inf] (CRP (1 + 4/6) / 2); it contains (1.5, inf] and is more plausible."""
    res = local_rules(_ctx(hand, pi=0.7, pi_c=0.8), hand["x"][None, :], target=1)[0]
    assert [(iv.lo, iv.hi) for r in res.rules for iv in r.intervals] == [(0.5, INF)]
    assert res.rules[0].probability == pytest.approx(5 / 6)
    assert res.rules[0].plausibility == pytest.approx(17 / 24)
    assert res.rules[0].support == pytest.approx(4 / 6)


def test_samples_lie_in_the_rule_and_are_checked(hand: dict[str, Any]) -> None:
    res = local_rules(_ctx(hand, pi=0.7, pi_c=0.8, n_samples=2), hand["x"][None, :], target=1)[0]
    assert 1 <= len(res.samples) <= 2
    for s in res.samples:
        assert res.rules[s.rule].contains(s.x)[0]
        assert s.x[0] == hand["x"][0]  # x0 is not in S: unchanged
        assert s.verified == (hand["model"].predict(s.x[None, :])[0] == 1)
        assert [c.feature for c in s.changes] == ["x1"]
        assert s.x[1] in hand["X"][:, 1]  # values come from training rows


def test_deterministic_for_a_seed(hand: dict[str, Any]) -> None:
    a = local_rules(_ctx(hand, pi=0.7, pi_c=0.8, n_samples=2, seed=5), hand["x"][None, :], target=1)
    b = local_rules(_ctx(hand, pi=0.7, pi_c=0.8, n_samples=2, seed=5), hand["x"][None, :], target=1)
    assert json.dumps(a.to_dict(), sort_keys=True) == json.dumps(b.to_dict(), sort_keys=True)


def test_already_target(hand: dict[str, Any]) -> None:
    res = local_rules(_ctx(hand), np.array([[0.2, 0.8]]), target=1)[0]
    assert res.status == ALREADY_TARGET and not res.rules
    assert "already predicts 1" in res.message


def test_immutable_feature_never_moves(hand: dict[str, Any]) -> None:
    """With x1 immutable only x0 may move: CDP_{x0} = 1/4 < pi (tree A's cell keeps x1 <= 0.5: r0, r3,
    no hit; tree B's x1 <= 1.5: 2 of 4). The target rows in the cells (r1, r2) lie in leaves whose
    x0 interval holds x or is the whole line, so there is no candidate box: no rule, reported as a
    status."""
    cons = Constraints(rules=(FeatureRule("x1", immutable=True),))
    res = local_rules(_ctx(hand, pi=0.7, pi_c=0.9, constraints=cons), hand["x"][None, :], target=1)[0]
    assert res.status == NO_RULE
    assert "no rule reaches pi_c=0.9" in res.message and "no candidate box" in res.message
    assert "x1" not in res.features and res.search is not None and res.search.candidates == ("x0",)
    strict = local_rules(_ctx(hand, pi=0.7, strict=True, constraints=cons), hand["x"][None, :], target=1)[0]
    assert strict.status == NO_DIVERGENT_SET
    assert strict.message == "no set of at most 1 features reaches pi=0.7 (best CDP 0.250 with {x0})"


def test_every_feature_immutable(hand: dict[str, Any]) -> None:
    cons = Constraints.from_mapping({"immutable": ["x0", "x1"]})
    res = local_rules(_ctx(hand, constraints=cons), hand["x"][None, :], target=1)[0]
    assert res.status == NO_DIVERGENT_SET and "no feature may move" in res.message


def test_unreachable_pi_is_a_status(hand: dict[str, Any]) -> None:
    res = local_rules(_ctx(hand, pi=1.0, strict=True), hand["x"][None, :], target=1)[0]
    assert res.status == NO_DIVERGENT_SET and "reaches pi=1" in res.message
    assert not res.found and res.to_dict()["status"] == "no_divergent_set"
    assert "no_divergent_set: no set of at most 2 features reaches pi=1" in res.to_text()


# -- disjoint boxes and directions --------------------------------------------------------------

@pytest.fixture(scope="module")
def bands() -> dict[str, Any]:
    """Target class iff x0 in (0, 1] or (2, 3]: two disjoint bands along one feature."""
    spec = ("x0", 1.0, ("x0", 0.0, 0.0, 1.0), ("x0", 2.0, 2.0, ("x0", 3.0, 3.0, 4.0)))
    rule_forest = make_forest([spec, spec], ["x0", "x1"], average=True)
    model = classifier([("x0", 1.0, ("x0", 0.0, -5.0, 5.0), ("x0", 2.0, -5.0, ("x0", 3.0, 5.0, -5.0)))],
                       ["x0", "x1"])
    x0 = np.array([-0.5, 0.5, 0.7, 1.5, 1.7, 2.5, 2.6, 3.5, 4.0])
    X = np.column_stack([x0, np.arange(9.0)])
    return {"rule_forest": rule_forest, "model": model, "X": X}


def _bands(bands: dict[str, Any], x0: float, **opts: Any) -> Any:
    cons = opts.pop("constraints", None)
    ctx = build_context(bands["model"], bands["rule_forest"], bands["X"], constraints=cons,
                        options=RuleOptions(**opts))
    return local_rules(ctx, np.array([[x0, 4.0]]), target=1)[0]


def test_disjoint_boxes(bands: dict[str, Any]) -> None:
    """S = {x0} reaches only CDP 4/9 (no set reaches pi, so the rule says so); the leaves (0, 1] and
    (2, 3] each have CRP 1 and do not touch: two disjoint rules, each holding 2 of the 9 rows."""
    res = _bands(bands, 5.0, n_samples=0)
    assert res.status == FOUND and not res.reached_pi
    assert res.cdp == pytest.approx(4 / 9)
    boxes = sorted((r.intervals[0].lo, r.intervals[0].hi) for r in res.rules)
    assert boxes == [(0.0, 1.0), (2.0, 3.0)]
    assert all(r.probability == 1.0 and r.plausibility == pytest.approx(2 / 9) for r in res.rules)
    assert "CDP 0.444 < pi 0.9" in res.to_text()


@pytest.mark.parametrize("direction, box", [(Direction.INCREASE, (2.0, 3.0)), (Direction.DECREASE, (0.0, 1.0))])
def test_directions_clip_boxes(bands: dict[str, Any], direction: Direction, box: tuple[float, float]) -> None:
    cons = Constraints(rules=(FeatureRule("x0", direction=direction),))
    res = _bands(bands, 1.5, constraints=cons, n_samples=3)
    assert [(iv.lo, iv.hi) for r in res.rules for iv in r.intervals] == [box]
    for s in res.samples:
        assert (s.x[0] >= 1.5) if direction == Direction.INCREASE else (s.x[0] <= 1.5)
        assert s.verified


def test_bounds_clip_boxes(bands: dict[str, Any]) -> None:
    cons = Constraints.from_mapping({"bounds": {"x0": (None, 2.55)}})
    res = _bands(bands, 5.0, constraints=cons, n_samples=0)
    assert sorted((iv.lo, iv.hi) for r in res.rules for iv in r.intervals) == [(0.0, 1.0), (2.0, 2.55)]


# -- regression ---------------------------------------------------------------------------------

def test_regression_target_interval() -> None:
    """Prediction 10 / 20 / 30 by x0 band; target [15, 25] is the middle band (1, 2]."""
    spec = ("x0", 1.0, 10.0, ("x0", 2.0, 20.0, 30.0))
    model = make_forest([spec], ["x0", "x1"], task=Task.REGRESSION)
    rule_forest = make_forest([spec, spec], ["x0", "x1"], average=True)
    X = np.column_stack([np.repeat([0.5, 1.5, 2.5], 4), np.arange(12.0)])
    ctx = build_context(model, rule_forest, X, options=RuleOptions(n_samples=1))
    res = local_rules(ctx, np.array([[0.5, 3.0]]), target=(15.0, 25.0))[0]
    assert res.status == FOUND and res.prediction == 10.0
    assert [(iv.lo, iv.hi) for r in res.rules for iv in r.intervals] == [(1.0, 2.0)]
    s = res.samples[0]
    assert s.verified and s.prediction == 20.0 and s.x[0] == 1.5
    assert "target prediction in [15, 25]" in res.to_text()
    with pytest.raises(InputDataError, match="needs a target interval"):
        local_rules(ctx, np.array([[0.5, 3.0]]))
    with pytest.raises(InputDataError, match="is empty"):
        local_rules(ctx, np.array([[0.5, 3.0]]), target=(3.0, 1.0))


def test_unknown_class_target(hand: dict[str, Any]) -> None:
    with pytest.raises(InputDataError, match="target 7 is not a class"):
        local_rules(_ctx(hand), hand["x"][None, :], target=7)


@pytest.mark.parametrize("opts, match", [({"pi": 0.0}, "pi must be in"), ({"pi_c": 1.5}, "pi_c must be in"),
                                         ({"k": 0}, "k must be between"), ({"search": "greedy"}, "search must be")])
def test_bad_options(hand: dict[str, Any], opts: dict[str, Any], match: str) -> None:
    with pytest.raises(InputDataError, match=match):
        _ctx(hand, **opts)


def test_robust_sampling_prefers_the_middle_of_a_band(bands: dict[str, Any]) -> None:
    """With a robustness reward (noise of 5% of the range, 0.275 here) the sample moves to the band's
    middle, where noisy implementations still reach the target; without it any value in a band does."""
    from lumber.passes.analyses.rules import AnnealOptions

    X = np.column_stack([np.array([-0.5, 0.05, 0.5, 0.95, 1.5, 1.7, 2.05, 2.5, 2.95, 3.5, 5.0]), np.zeros(11)])
    for sigma, expected in ((0.05, (0.5, 2.5)), (0.0, (0.95,))):
        opts = RuleOptions(n_samples=1, anneal=AnnealOptions(robust_sigma=sigma, batch=20, max_iter=20))
        ctx = build_context(bands["model"], bands["rule_forest"], X, options=opts)
        [s] = local_rules(ctx, np.array([[5.0, 0.0]]), target=1)[0].samples
        assert s.verified and s.x[0] in expected


def test_unrestricted_features_are_pruned(hand: dict[str, Any]) -> None:
    """Box over S = {x0, x1}: x0 any value, x1 > 1.5. With x0 resampled, tree A goes both ways at its
    root but its x1 split is determined (x1 > 0.5: r1 r2 r4 r5, 4 hits of 4) and tree B goes right
    (2 of 2): CRP 1. Fixing x0 at the case's 0.2 still gives CRP 1 (A: r1 r2 r5), so x0 is dropped
    and the rule's probability and plausibility are re-estimated without it; when fixing it falls
    below pi_c the feature stays."""
    from lumber.passes.analyses.rules import action_space
    from lumber.passes.analyses.rules.boxes import ScoredBox
    from lumber.passes.analyses.rules.core import _prune, box_crp, make_query

    ctx = _ctx(hand, pi_c=0.9)
    x = hand["x"]
    act = action_space(None, ["x0", "x1"], x, x)
    q = make_query(ctx, act, ctx.cells.point_routes(x[None, :])[0], 0)
    S = np.array([0, 1])
    box = ScoredBox(np.array([-INF, 1.5]), np.array([INF, INF]), 0.0, 0.0)
    tgt = local_rules(ctx, x[None, :], target=1)[0].target
    both = box_crp(ctx, q, tgt, S, box.lo[None], box.hi[None])
    assert both[0] == pytest.approx(1.0)
    keep, crp, plaus, inl = _prune(ctx, q, tgt, S, box, act.lo[S], act.hi[S], None)
    assert keep.tolist() == [False, True] and crp == pytest.approx(1.0) and plaus == pytest.approx(7 / 24)
    assert inl is None
    # x1 in (0.5, 1.5] with x0 fixed: A r1 r2 r5 (1), B x1 <= 1.5 (2/4) -> 0.75 < pi_c = 0.8: x0 stays
    box2 = ScoredBox(np.array([-INF, 0.5]), np.array([INF, 1.5]), 0.65, 0.5)
    keep2, crp2, plaus2, _ = _prune(_ctx(hand, pi_c=0.8), q, tgt, S, box2, act.lo[S], act.hi[S], None)
    assert keep2.tolist() == [True, True] and (crp2, plaus2) == (0.65, 0.5)
