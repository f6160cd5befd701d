"""Regional counterfactual rules: hand-computed regional CDP/CRP, disjoint rules for a region,
coverage, regions from leaves and bounds, and samples for the region's cases."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from test_local import bands  # noqa: F401  (fixture)
from lumber.ir import Constraints, InputDataError
from lumber.passes.analyses.rules import (
    EMPTY_REGION, FOUND, NO_RULE, Region, RuleOptions, apply_regional, build_context, coverage, region_of,
    regional_rules,
)

INF = np.inf


def test_regional_rule_by_hand(hand: dict[str, Any]) -> None:
    """R: 0.5 < x0 <= 1 (rows r3 class 0, r4 class 1). Outside S the region's intervals are kept:
    CDP_{x0}(R) = 4/6 (x0 free, x1 unbounded), CDP_{x1}(R) = (1/2 + 4/6) / 2. With pi = 0.6 S = {x0};
    the box x0 <= 0.5 (tree A: L1, L2 hold 3 hits of 4; tree B both leaves, 4 of 6) has CRP 17/24."""
    ctx = build_context(hand["model"], hand["rule_forest"], hand["X"], options=RuleOptions(pi=0.6, pi_c=0.7))
    region = Region(np.array([0.5, -INF]), np.array([1.0, INF]), "R")
    res = regional_rules(ctx, [region], target=1)[0]
    assert res.status == FOUND and res.is_regional
    assert res.region_rows == 2 and res.extra["region_target_share"] == 0.5
    assert res.features == ("x0",) and res.cdp == pytest.approx(4 / 6)
    assert res.search is not None and res.search.best_by_size[0] == pytest.approx(4 / 6)
    [rule] = res.rules
    assert (rule.intervals[0].lo, rule.intervals[0].hi) == (-INF, 0.5)
    assert rule.probability == pytest.approx(17 / 24)
    assert rule.plausibility == pytest.approx(4 / 6) and rule.support == pytest.approx(4 / 6)
    text = res.to_text()
    assert text.startswith("region IF 0.5 < x0 <= 1 (2 training rows, mostly 0); target class 1")
    assert "rule 1: IF x0 <= 0.5 (the rest of the region's conditions)" in text


def test_region_with_two_disjoint_rules_and_coverage(bands: dict[str, Any]) -> None:  # noqa: F811
    ctx = build_context(bands["model"], bands["rule_forest"], bands["X"], options=RuleOptions(n_samples=1))
    leaf_e = int(np.flatnonzero((bands["rule_forest"].left < 0))[4])  # tree 0's leaf x0 > 3
    region = Region.from_leaf(bands["rule_forest"], leaf_e)
    assert (region.lo[0], region.hi[0]) == (3.0, INF) and region.name == "tree 0 leaf 8"
    rs = regional_rules(ctx, [region, Region.from_bounds(ctx.model.schema, {"x0": (10, 20)})])
    res, empty = rs[0], rs[1]
    assert res.status == FOUND and res.prediction == 0 and res.target.describe() == "class 1"
    assert sorted((r.intervals[0].lo, r.intervals[0].hi) for r in res.rules) == [(0.0, 1.0), (2.0, 3.0)]
    assert empty.status == EMPTY_REGION and empty.message == "no training row lies in the region"
    X = bands["X"]
    assert coverage(rs.results, X, ctx.model.schema) == pytest.approx(2 / 9)
    np.testing.assert_array_equal(region_of(rs.results, X, ctx.model.schema), [-1] * 7 + [0, 0])
    samples = apply_regional(ctx, res, X[7:])
    for case, ss in zip(X[7:], samples):
        [s] = ss
        assert s.verified and s.x[1] == case[1]
        assert any(r.contains(s.x)[0] for r in res.rules)


def test_region_actionability_for_every_case(bands: dict[str, Any]) -> None:  # noqa: F811
    """'increase' must hold for every case of R = (3, 5]: the new x0 must be >= 5, where no target lies."""
    cons = Constraints.from_mapping({"increase": ["x0"]})
    ctx = build_context(bands["model"], bands["rule_forest"], bands["X"], constraints=cons)
    res = regional_rules(ctx, [Region.from_bounds(ctx.model.schema, {"x0": (3.2, 5)})], target=1)[0]
    assert res.status == NO_RULE
    dec = build_context(bands["model"], bands["rule_forest"], bands["X"],
                        constraints=Constraints.from_mapping({"decrease": ["x0"]}))
    ok = regional_rules(dec, [Region.from_bounds(dec.model.schema, {"x0": (3.2, 5)})], target=1)[0]
    assert ok.status == FOUND and len(ok.rules) == 2


def test_region_bounds_errors(bands: dict[str, Any]) -> None:  # noqa: F811
    schema = bands["model"].schema
    with pytest.raises(InputDataError, match="unknown feature 'x9'"):
        Region.from_bounds(schema, {"x9": (0, 1)})
    with pytest.raises(InputDataError, match="is empty"):
        Region.from_bounds(schema, {"x0": (2, 1)})
    with pytest.raises(InputDataError, match="must be a pair"):
        Region.from_bounds(schema, {"x0": 3})  # type: ignore[dict-item]
    with pytest.raises(InputDataError, match="is not a leaf"):
        Region.from_leaf(bands["rule_forest"], 0)
