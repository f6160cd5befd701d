"""The speed paths of rule construction give the same numbers as the plain ones: compiled margins
(isolation forest and explained model) against the interpreter, cached estimates against
``CellIndex.estimate``, the C bitset counts against numpy's, the blocked box test against a plain
comparison, and whole local and regional queries with and without them."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import numpy as np

from lumber.compiler.api.rules import CellCounts, Margins, RuleExplainer, RuleOptions
from lumber.passes.analyses.rules.core import make_query, subset_routes


def test_compiled_margins_equal_the_interpreter(compas_model: dict[str, Any]) -> None:
    ex = RuleExplainer(compas_model["model"], compas_model["Xtr"], options=RuleOptions(n_samples=0))
    rng = np.random.default_rng(0)
    X = ex.context.X_raw[rng.integers(0, ex.context.X_raw.shape[0], 500)].copy()
    X += rng.normal(size=X.shape) * 0.5  # off the training grid too
    X[::9, 1] = np.nan
    for forest in (ex.forest, ex.isolation[0]):
        fast = Margins(forest, after=0, background=False)
        got = fast(X)
        assert fast.native is not None or fast.failed
        assert np.array_equal(got, forest.evaluate(X))
        assert fast(X[:0]).shape == forest.evaluate(X[:0]).shape
        later = Margins(forest, after=0)  # compiled in the background, used once ready
        assert np.array_equal(later(X), forest.evaluate(X))
        later.wait()
        assert later.native is not None or later.failed
        assert np.array_equal(later(X), forest.evaluate(X))


def test_cached_estimates_equal_the_estimator(compas_model: dict[str, Any]) -> None:
    ex = RuleExplainer(compas_model["model"], compas_model["Xtr"], options=RuleOptions(n_samples=0))
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


def _fast_and_slow(ex: RuleExplainer) -> tuple[Any, Any]:
    """The explainer's context with every fast path forced on, and with none (numpy counts, the
    interpreter); the isolation forest's margins are switched by the caller."""
    ctx = ex.context
    fast_ctx = replace(ctx, margins=Margins(ex.forest, after=0, background=False), _estimates={}, _hit_bits={},
                       cells=replace(ctx.cells, counter=CellCounts(after=0, background=False)))
    slow_ctx = replace(ctx, margins=None, _estimates={}, _hit_bits={}, cells=replace(ctx.cells, counter=None))
    return fast_ctx, slow_ctx


def _same_rules(fast: Any, slow: Any) -> None:
    for a, b in zip(fast, slow, strict=True):
        assert a.status == b.status and a.features == b.features and a.cdp == b.cdp and a.message == b.message
        assert [r.intervals for r in a.rules] == [r.intervals for r in b.rules]
        assert [(r.probability, r.plausibility, r.support, r.inliers) for r in a.rules] == \
            [(r.probability, r.plausibility, r.support, r.inliers) for r in b.rules]
        assert [s.x.tolist() for s in a.samples] == [s.x.tolist() for s in b.samples]
        assert a.extra == b.extra


def test_a_full_estimate_cache_is_cleared_without_losing_a_route(compas_model: dict[str, Any],
                                                                 monkeypatch: Any) -> None:
    """When a call brings the cache past its size, the cache is emptied: the call's routes that were
    cached before must be estimated again, not looked up (a KeyError on breast cancer before)."""
    from lumber.passes.analyses.rules import context
    from lumber.passes.analyses.rules.actionable import action_space
    from lumber.passes.analyses.rules.targets import resolve_target

    ex = RuleExplainer(compas_model["model"], compas_model["Xtr"], options=RuleOptions(n_samples=0))
    ctx = ex.context
    Xm = ex.forest.prepare_input(compas_model["Xte"].iloc[:1])
    tgt = resolve_target(ctx.model, None, float(ctx.decide(Xm)[0]))
    q = make_query(ctx, action_space(None, ctx.names, Xm[0], Xm[0]), ctx.cells.point_routes(Xm)[0], 0, point=Xm[0])
    routes = subset_routes(ctx, q, np.arange(1 << q.candidates.size, dtype=np.uint64))
    want = ctx.cells.estimate(routes, ctx.hit_bits(tgt))[0]
    monkeypatch.setattr(context, "ESTIMATE_CACHE", 12)
    assert np.array_equal(ctx.estimate(routes[:8], tgt), want[:8])
    assert np.array_equal(ctx.estimate(routes[4:16], tgt), want[4:16])  # 4 cached + 8 new > 12: cleared
    assert len(ctx._estimates) <= 12


def test_rules_do_not_depend_on_the_fast_paths(compas_model: dict[str, Any]) -> None:
    ex = RuleExplainer(compas_model["model"], compas_model["Xtr"], options=RuleOptions(n_samples=1))
    fast_ctx, slow_ctx = _fast_and_slow(ex)
    assert fast_ctx.cells.counter.native is None  # type: ignore[union-attr]
    from lumber.passes.analyses.rules import local_rules

    cases = compas_model["Xte"].iloc[:4]
    ex._iso_margins = Margins(ex.isolation[0], after=0, background=False)
    fast = local_rules(fast_ctx, cases)
    assert fast_ctx.cells.counter.native is not None or fast_ctx.cells.counter._native.failed  # type: ignore
    ex._iso_margins = Margins(ex.isolation[0], after=10 ** 12)
    slow = local_rules(slow_ctx, cases)
    _same_rules(fast, slow)


def test_regional_rules_do_not_depend_on_the_fast_paths(compas_model: dict[str, Any]) -> None:
    from lumber.passes.analyses.rules import Region, regional_rules

    ex = RuleExplainer(compas_model["model"], compas_model["Xtr"], options=RuleOptions(n_samples=0, widen=2))
    fast_ctx, slow_ctx = _fast_and_slow(ex)
    schema = ex.forest.schema
    regions = [Region.from_bounds(schema, {"PriorsCount": (3, None)}, "many priors"),
               Region.from_bounds(schema, {"AgeGroup": (None, 1), "Sex": (0, 0)}, "young men")]
    ex._iso_margins = Margins(ex.isolation[0], after=0, background=False)
    fast = regional_rules(fast_ctx, regions)
    ex._iso_margins = Margins(ex.isolation[0], after=10 ** 12)
    slow = regional_rules(slow_ctx, regions)
    assert any(r.found for r in slow)
    _same_rules(fast, slow)


def test_bitset_counts_in_c_equal_numpy(c_compiler: str) -> None:
    from lumber.backends.c.bitsets import BitsetCounts
    from lumber.passes.analyses.rules.cells import and_counts, and_rows, popcount

    kernel = BitsetCounts()  # a compiler exists (the fixture): a build failure is a failure
    rng = np.random.default_rng(5)
    for words in (1, 2, 63, 64, 65, 130, 531):
        bits = rng.integers(0, 1 << 62, size=(40, words), dtype=np.uint64) * np.uint64(3)
        bits[-1] = ~np.uint64(0)  # every row
        hit = rng.integers(0, 1 << 62, size=words, dtype=np.uint64) << np.uint64(rng.integers(0, 3))
        sizes = rng.integers(0, 6, size=200)
        sizes[:3] = 0  # empty groups: every row
        start = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)
        keys = rng.integers(0, 40, size=int(start[-1])).astype(np.int64)
        want = np.array([np.bitwise_and.reduce(bits[keys[a:b]], axis=0) if b > a else bits[-1]
                         for a, b in zip(start[:-1], start[1:])])
        assert np.array_equal(and_rows(bits, keys, start), want)
        W, H = and_counts(bits, keys, start, hit)
        assert np.array_equal(W, popcount(want)) and np.array_equal(H, popcount(want & hit))
        W2, H2 = kernel.and_counts(bits, keys, start, hit)
        assert np.array_equal(W, W2) and np.array_equal(H, H2)
    W, H = kernel.and_counts(bits, keys[:0], np.zeros(1, dtype=np.int64), hit)
    assert W.shape == H.shape == (0,)
    import pytest

    with pytest.raises(ValueError, match="out of range"):
        kernel.and_counts(bits, np.array([40]), np.array([0, 1]), hit)
    with pytest.raises(ValueError, match="start"):
        kernel.and_counts(bits, np.array([1, 2]), np.array([0, 1]), hit)


def test_estimates_with_the_c_counts_equal_numpy(compas_model: dict[str, Any], c_compiler: str) -> None:
    """Point, box, partly free and empty-interval routes: the kernel's walk over the reached nodes
    (min_rows 1) and its AND counts (min_rows > 1: numpy's level search) give numpy's integers."""
    import pytest

    from lumber.passes.analyses.rules.cells import build_cells

    ex = RuleExplainer(compas_model["model"], compas_model["Xtr"], options=RuleOptions(n_samples=0))
    ctx = ex.context
    X = ctx.table.X
    rng = np.random.default_rng(2)
    hit = ctx.cells.hit_bits(rng.random(X.shape[0]) < 0.4)
    P = ctx.cells.point_routes(X[rng.integers(0, X.shape[0], 40)])
    lo = np.where(rng.random((40, X.shape[1])) < 0.5, rng.normal(size=(40, X.shape[1])) * 2, -np.inf)
    B = ctx.cells.interval_routes(lo, lo + rng.choice([-1.0, 0.5, 3.0], size=lo.shape))  # some empty: NONE
    free = rng.random(P.shape) < 0.3
    routes = np.concatenate([P, B, np.where(free, 3, P).astype(np.int8), np.full_like(P[:2], 3)])
    assert (B == 0).any()
    for min_rows in (1, 5, 200):
        plain = build_cells(ctx.cells.forest, X, min_rows=min_rows)
        counter = CellCounts(after=0, background=False)
        fast = replace(plain, counter=counter)
        for a, b in zip(plain.estimate(routes, hit), fast.estimate(routes, hit)):
            assert np.array_equal(a, b)
        for a, b in zip(plain.counts(routes, hit), fast.counts(routes, hit)):
            assert np.array_equal(a, b)
        assert np.array_equal(plain.weights(routes[3]), fast.weights(routes[3]))
        assert not counter.failed, "the bitset kernel did not build although a C compiler exists"
        if min_rows == 1:
            direct = counter.route_counts(plain, routes, hit)
            assert direct is not None
            for a, b in zip(plain.counts(routes, hit), direct):
                assert np.array_equal(a, b)
            f = plain.forest
            with pytest.raises(ValueError, match="out of range"):
                counter.native.route_counts(routes, plain.node_inner, f.left, f.right, f.roots + f.n_nodes,
                                            plain.inner_seg, plain.rank, plain.seg_key, plain.n_keys, plain.bits,
                                            hit)
            with pytest.raises(ValueError, match="shapes"):
                counter.native.route_counts(routes, plain.node_inner, f.left, f.right, f.roots, plain.inner_seg,
                                            plain.rank, plain.seg_key, plain.n_keys, plain.bits[:-1], hit)


def test_in_boxes_equals_plain_comparisons() -> None:
    from lumber.passes.analyses.rules import boxes

    rng = np.random.default_rng(4)
    for n, b, d in [(0, 3, 2), (5, 0, 2), (7, 3, 0), (3000, 200, 3), (70_000, 9, 2)]:
        V = rng.integers(0, 5, size=(n, d)).astype(np.float64)
        if n and d:
            V[::3, 0] = np.nan
        lo = rng.integers(-1, 4, size=(b, d)).astype(np.float64)
        hi = lo + rng.integers(0, 4, size=(b, d))
        if b and d:
            lo[0, 0], hi[-1, -1] = -np.inf, np.inf
        with np.errstate(invalid="ignore"):
            want = np.all((V[None, :, :] > lo[:, None, :]) & (V[None, :, :] <= hi[:, None, :]), axis=2)
        assert np.array_equal(boxes.in_boxes(V, lo, hi), want)


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


def test_route_counts_with_missing_values_equal_numpy() -> None:
    """A random forest trained with NaN (learned missing directions), NaN in the queries."""
    from sklearn.ensemble import RandomForestClassifier

    import lumber
    from lumber.passes.analyses.rules.cells import build_cells

    rng = np.random.default_rng(7)
    X = rng.normal(size=(700, 5)).round(1)
    X[rng.random(X.shape) < 0.1] = np.nan
    y = (np.nan_to_num(X[:, 0]) - np.nan_to_num(X[:, 3]) > 0).astype(int)
    forest = lumber.load(RandomForestClassifier(n_estimators=9, max_depth=7, random_state=0, n_jobs=1).fit(X, y))
    Xp = forest.prepare_input(X)
    plain = build_cells(forest, Xp)
    counter = CellCounts(after=0, background=False)
    fast = replace(plain, counter=counter)
    hit = plain.hit_bits(y == 1)
    Q = Xp[rng.integers(0, 700, 50)].copy()
    Q[::4, 1] = np.nan
    P = plain.point_routes(Q)
    routes = np.concatenate([P, np.where(rng.random(P.shape) < 0.4, 3, P).astype(np.int8)])
    for a, b in zip(plain.counts(routes, hit), fast.counts(routes, hit)):
        assert np.array_equal(a, b)
    assert counter.native is not None or counter.failed


def test_native_builds_start_earlier_for_large_training_sets() -> None:
    from lumber.compiler.api.rules import COMPILE_AFTER, LARGE_TRAINING, native_after

    assert native_after(COMPILE_AFTER, LARGE_TRAINING - 1) == COMPILE_AFTER
    assert native_after(COMPILE_AFTER, LARGE_TRAINING) == COMPILE_AFTER // 4
