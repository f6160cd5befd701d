"""``MoveLimits``: the one encoding of the constraints' intervals, against a rule-by-rule reading of them."""

from __future__ import annotations

import math

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from lumber.ir import Bound, Constraints, Direction, FeatureRule
from lumber.ir.constraints import MoveLimits

NAMES = ("a", "b", "c")
values = st.one_of(st.just(math.nan), st.floats(-5, 5, allow_nan=False))
bounds = st.one_of(st.none(), st.builds(Bound, st.floats(-3, 3, allow_nan=False), st.booleans()))
rules = st.builds(FeatureRule, st.sampled_from(NAMES), immutable=st.booleans(),
                  direction=st.sampled_from(list(Direction)), lower=bounds, upper=bounds)


def reference(rule: FeatureRule, lo0: float, hi0: float) -> tuple[float, float]:
    """The rule read literally, one feature and one range of original values at a time."""
    known = not (math.isnan(lo0) or math.isnan(hi0))
    lo, hi = -math.inf, math.inf
    if rule.lower is not None and (known or not rule.lower.relative):
        lo = hi0 + rule.lower.value if rule.lower.relative else rule.lower.value
    if rule.upper is not None and (known or not rule.upper.relative):
        hi = lo0 + rule.upper.value if rule.upper.relative else rule.upper.value
    if known and (rule.immutable or rule.direction == Direction.INCREASE):
        lo = max(lo, hi0)
    if known and (rule.immutable or rule.direction == Direction.DECREASE):
        hi = min(hi, lo0)
    return lo, hi


@given(st.lists(rules, max_size=3, unique_by=lambda r: r.feature), st.lists(values, min_size=3, max_size=3),
       st.lists(st.floats(0, 2), min_size=3, max_size=3))
def test_intervals_read_every_rule_as_written(rs: list[FeatureRule], x: list[float], widths: list[float]) -> None:
    cons = Constraints(rules=tuple(rs))
    lo0 = np.asarray(x)
    hi0 = lo0 + np.asarray(widths)
    lo, hi = MoveLimits.of(cons, NAMES).interval(lo0, hi0)
    for i, n in enumerate(NAMES):
        want = reference(cons.rule(n), float(lo0[i]), float(hi0[i]))
        assert (lo[i], hi[i]) == want, (cons.rule(n), lo0[i], hi0[i])
    one, other = cons.bounds(NAMES, lo0), MoveLimits.of(cons, NAMES).interval(lo0, lo0)  # one case: lo0 == hi0
    np.testing.assert_array_equal(one[0], other[0])
    np.testing.assert_array_equal(one[1], other[1])
