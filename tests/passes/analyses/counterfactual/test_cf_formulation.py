"""Pieces of the MILP that make credit-sized queries fast: compact levels and cost-bound pruning.

Both must keep every point the optimum could be: the brute-force tests check the optimum end to
end; these check the invariants directly (one level per cut on the side nearer the case, the
level of a cell routes like the cell, pruning never drops a leaf a cheap enough point reaches).
"""

from __future__ import annotations

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from lumber.passes.analyses.counterfactual import CounterfactualOptions
from lumber.ir import FeatureKind, Forest
from lumber.passes.analyses.counterfactual.domain import Grid, NumericDomain
from lumber.passes.analyses.counterfactual.leafcuts import prune_reach
from lumber.passes.analyses.counterfactual.model import MilpModel
from lumber.passes.analyses.counterfactual.problem import build_domains
from lumber.passes.analyses.counterfactual.solve import make_query
from lumber.passes.analyses.counterfactual.trees import classify, reachable
from strategies import forests


def _domain(x0: float, cuts: list[float], relation: bool = False) -> NumericDomain:
    d = NumericDomain(0, Grid("float32"), x0, -np.inf, np.inf)
    for u in cuts:
        d.add_cut(float(Grid("float32").down(np.array([u]))[0]))
    d.in_relation = relation
    d.finalize(MilpModel())
    return d


def test_compact_levels_one_per_cut_on_the_side_nearer_the_case() -> None:
    g = Grid("float32")
    d = _domain(1.0, [-2.0, 0.5, 1.0, 3.0])
    up = lambda v: float(g.up(np.array([v]))[0])  # noqa: E731
    assert d.compact
    assert d.levels.tolist() == [-2.0, 0.5, 1.0, up(1.0), up(3.0)]
    # each cut's indicator [x > u] is the mu of the interval holding u
    cols, const = d.gt_cols(np.array([-2.0, 0.5, 1.0, 3.0]))
    assert cols.tolist() == d.mu.tolist()[:4] and np.all(const == 0.0)
    # below every level: always right; at or above the top: never
    cols, const = d.gt_cols(np.array([-5.0, 10.0]))
    assert cols.tolist() == [-1, -1] and const.tolist() == [1.0, 0.0]


def test_snap_keeps_the_cell_and_lowers_the_cost() -> None:
    d = _domain(1.0, [-2.0, 0.5, 3.0])
    cuts = np.array([-2.0, 0.5, 3.0])
    for x in [-7.0, -2.0, -1.0, 0.5, 0.75, 1.0, 2.0, 3.0, 3.5, 40.0]:
        s = d.snap(x)
        assert s in d.levels
        assert np.array_equal(s > cuts, x > cuts), (x, s)  # same side of every cut
        assert abs(s - 1.0) <= abs(x - 1.0)


def test_features_in_relations_keep_both_sides_of_each_cut() -> None:
    d = _domain(1.0, [0.5, 3.0], relation=True)
    assert not d.compact
    assert d.snap(2.0) == 2.0
    g = Grid("float32")
    assert set(d.levels.tolist()) >= {0.5, float(g.up(np.array([0.5]))[0]), 3.0, float(g.up(np.array([3.0]))[0])}


def _numeric_only(forest: Forest) -> bool:
    return all(f.kind != FeatureKind.CATEGORICAL for f in forest.schema.features)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(forest=forests(max_trees=4, max_depth=4, max_features=3), data=st.data())
def test_pruning_keeps_every_leaf_a_point_within_the_bound_reaches(forest: Forest, data: st.DataObject) -> None:
    n = forest.n_features
    x0 = np.array(data.draw(st.lists(st.floats(-3, 8, width=32), min_size=n, max_size=n)), dtype=np.float64)
    x = np.array(data.draw(st.lists(st.floats(-3, 8, width=32), min_size=n, max_size=n)), dtype=np.float64)
    cat = [i for i, f in enumerate(forest.schema.features) if f.kind == FeatureKind.CATEGORICAL]
    x0[cat] = np.trunc(np.abs(x0[cat]))
    x[cat] = np.trunc(np.abs(x[cat]))
    norm = data.draw(st.sampled_from(["l0", "l1", "l2", "linf"]))
    q = make_query(forest, x0, None if forest.schema.task.name != "REGRESSION" else (-np.inf, np.inf), options=CounterfactualOptions(norm=norm, weights=(np.full(n, 0.7), np.full(n, 1.3))))[0]
    bound = float(q.cost.total(x[None, :])[0])
    doms, why = build_domains(q, q.lo, q.hi)
    assert not why
    ch = classify(forest, doms)
    reach = reachable(forest, ch)
    kept = prune_reach(forest, ch, reach, doms, q.cost, bound)
    assert not np.any(kept & ~reach)
    leaves = forest.apply_global(forest.prepare_input(x[None, :]))[0]
    assert kept[leaves].all(), "a leaf of a point within the bound was pruned"
