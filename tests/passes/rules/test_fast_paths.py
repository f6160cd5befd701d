"""The speed paths of rule construction give the same numbers as the plain ones: compiled margins
(isolation forest and explained model) against the interpreter, cached estimates against
``CellIndex.estimate``, and a whole query with and without them."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import numpy as np

from lumber.compiler.api.rules import Margins, RuleExplainer
from lumber.passes.analyses.rules.core import make_query, subset_routes


def test_compiled_margins_equal_the_interpreter(compas_model: dict[str, Any]) -> None:
    ex = RuleExplainer(compas_model["model"], compas_model["Xtr"], n_samples=0)
    rng = np.random.default_rng(0)
    X = ex.context.X_raw[rng.integers(0, ex.context.X_raw.shape[0], 500)].copy()
    X += rng.normal(size=X.shape) * 0.5  # off the training grid too
    X[::9, 1] = np.nan
    for forest in (ex.forest, ex.isolation[0]):
        fast = Margins(forest, after=0)
        got = fast(X)
        assert fast.native is not None or fast.failed
        assert np.array_equal(got, forest.evaluate(X))
        assert fast(X[:0]).shape == forest.evaluate(X[:0]).shape


def test_cached_estimates_equal_the_estimator(compas_model: dict[str, Any]) -> None:
    ex = RuleExplainer(compas_model["model"], compas_model["Xtr"], n_samples=0)
    ctx = ex.context
    Xm = ex.forest.prepare_input(compas_model["Xte"].iloc[:3])
    from lumber.passes.analyses.rules.actionable import action_space
    from lumber.passes.analyses.rules.targets import resolve_target

    tgt = resolve_target(ctx.model, None, float(ctx.decide(Xm[:1])[0]))
    act = action_space(None, ctx.names, Xm[0], Xm[0])
    q = make_query(ctx, act, ctx.cells.point_routes(Xm[:1])[0], 0, point=Xm[0])
    masks = np.arange(1 << q.candidates.size, dtype=np.uint64)
    routes = subset_routes(ctx, q, masks)
    routes = np.concatenate([routes, routes[::-1]])  # repeats within one call
    want = ctx.cells.estimate(routes, ctx.hit_bits(tgt))[0]
    assert np.array_equal(ctx.estimate(routes, tgt), want)
    assert np.array_equal(ctx.estimate(routes[5:9], tgt), want[5:9])  # from the cache
    other = resolve_target(ctx.model, [c for c in (0, 1) if (c,) != tgt.classes], None)
    assert np.array_equal(ctx.estimate(routes[:4], other), ctx.cells.estimate(routes[:4], ctx.hit_bits(other))[0])


def test_rules_do_not_depend_on_the_fast_paths(compas_model: dict[str, Any]) -> None:
    ex = RuleExplainer(compas_model["model"], compas_model["Xtr"], n_samples=1)
    ex._iso_margins = Margins(ex.isolation[0], after=0)
    fast_ctx = replace(ex.context, margins=Margins(ex.forest, after=0), _estimates={}, _hit_bits={})
    slow_ctx = replace(ex.context, margins=None, _estimates={}, _hit_bits={})
    from lumber.passes.analyses.rules import local_rules

    cases = compas_model["Xte"].iloc[:4]
    fast = local_rules(fast_ctx, cases)
    ex._iso_margins = Margins(ex.isolation[0], after=10 ** 12)
    slow = local_rules(slow_ctx, cases)
    for a, b in zip(fast, slow):
        assert a.status == b.status and a.features == b.features
        assert [r.intervals for r in a.rules] == [r.intervals for r in b.rules]
        assert [s.x.tolist() for s in a.samples] == [s.x.tolist() for s in b.samples]


def test_unique_rows_is_numpy_unique() -> None:
    from lumber.passes.analyses.rules.boxes import unique_rows

    rng = np.random.default_rng(3)
    for d in (1, 3, 6):
        V = rng.integers(0, 4, size=(400, d)).astype(np.float64) / 2
        V[::7, 0] = -0.0
        uniq, inv = unique_rows(V)
        want, first, winv = np.unique(V, axis=0, return_index=True, return_inverse=True)
        assert np.array_equal(uniq, want) and np.array_equal(inv, winv.reshape(-1))
        assert np.array_equal(np.signbit(uniq), np.signbit(V[first]))  # the first occurrence's value
    V = rng.integers(0, 3, size=(300, 2)).astype(np.float64)
    V[::5, 1] = np.nan
    uniq, inv = unique_rows(V)
    assert np.array_equal(uniq[inv], V, equal_nan=True)
    assert uniq.shape[0] == len({(a, str(b)) for a, b in V.tolist()})
    assert unique_rows(V[:0])[0].shape == (0, 2)
