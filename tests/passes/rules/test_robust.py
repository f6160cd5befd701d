"""Robust recourse: the sampler prefers the interior of a rule's box (its decision survives noise on the
changed features) and every sample carries a robustness report (Amoukou and Brunel, noisy responses)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from lumber.compiler.api.rules import RuleExplainer, RuleOptions
from lumber.passes.analyses.rules import AnnealOptions
from lumber.passes.analyses.rules.recourse import ROBUSTNESS_SIGMA2, noisy_keep


@pytest.fixture(scope="module")
def step() -> dict[str, Any]:
    """Class 1 iff x0 > 0.5 (x1 is noise); training values of x0 spread evenly over [0, 1]."""
    from sklearn.ensemble import RandomForestClassifier

    rng = np.random.default_rng(0)
    X = np.column_stack([np.linspace(0, 1, 401), rng.random(401)])
    y = (X[:, 0] > 0.5).astype(int)
    rf = RandomForestClassifier(n_estimators=5, max_depth=3, random_state=0, n_jobs=1).fit(X, y)
    return {"model": rf, "X": X, "x": np.array([0.1, 0.5])}


def _sample(step: dict[str, Any], **anneal: Any) -> Any:
    ex = RuleExplainer(step["model"], step["X"], options=RuleOptions(seed=0, anneal=AnnealOptions(**anneal)))
    res = ex.local(step["x"][None, :], target=1)[0]
    assert res.found and res.samples
    return ex, res.samples[0]


def test_robust_sample_sits_inside_the_box(step: dict[str, Any]) -> None:
    """The rule is x0 > 0.5; with noise of 0.1 (sigma^2 = 0.01 of the range) a sample keeps the target
    in >= 95% of its noisy copies only at x0 >= 0.5 + 1.65 * 0.1. The default (robust) sampler gets
    there; the paper's score-only energy is free to stop anywhere in the box."""
    _, s = _sample(step)
    assert s.verified and s.inlier
    assert [a for a, _ in s.robustness] == list(ROBUSTNESS_SIGMA2)
    assert s.robustness[0][1] >= 0.95 and s.x[0] >= 0.5 + 1.6 * 0.1
    _, plain = _sample(step, robust_sigma=0.0)
    assert plain.verified and plain.robustness[0][1] <= s.robustness[0][1]
    assert all(0.0 <= b <= 1.0 for _, b in s.robustness)


def test_noisy_keep_matches_the_normal_tail(step: dict[str, Any]) -> None:
    """A point at x0 = 0.7 with noise sd 0.1 on x0 stays above 0.5 with probability Phi(2) = 0.977."""
    ex, _ = _sample(step)
    ctx = ex.context
    tgt = ex.local(step["x"][None, :], target=1)[0].target
    x0 = np.array([[0.1, 0.5]])
    share = noisy_keep(ctx, x0, np.array([[0.7, 0.5]]), [tgt], 0.1, 2000, np.random.default_rng(1))
    assert share[0] == pytest.approx(0.977, abs=0.015)
    # nothing changed: no noise, the decision is kept by every copy
    same = noisy_keep(ctx, np.array([[0.7, 0.5]]), np.array([[0.7, 0.5]]), [tgt], 0.1, 50, np.random.default_rng(1))
    assert same[0] == 1.0


def test_robustness_is_reported_in_json_and_text(step: dict[str, Any]) -> None:
    ex, s = _sample(step)
    d = s.to_dict()
    assert [r["sigma2"] for r in d["robustness"]] == list(ROBUSTNESS_SIGMA2)
    assert "keeps the target under noise sigma^2 0.01/0.025/0.05" in s.to_text(ex.forest.schema.features)


@pytest.fixture(scope="module")
def corner() -> dict[str, Any]:
    """Class 1 iff x0 > 0.5 and x1 > 0.3, both spread evenly over [0, 1]."""
    from sklearn.ensemble import RandomForestClassifier

    rng = np.random.default_rng(0)
    X = rng.random((600, 2))
    y = ((X[:, 0] > 0.5) & (X[:, 1] > 0.3)).astype(int)
    rf = RandomForestClassifier(n_estimators=5, max_depth=4, random_state=0, n_jobs=1).fit(X, y)
    return {"model": rf, "X": X}


def test_a_feature_already_inside_its_interval_may_stay(corner: dict[str, Any]) -> None:
    """A rule x0 > 0.5 AND 0.3 < x1 <= 0.6 for the case (0.1, 0.45): x1 already satisfies it. Its pool
    holds the case's value (a quarter of the draws), x0's does not, the hit rate's pools hold training
    values only; and the robust sample keeps x1: moved anywhere in (0.3, 0.6] it would be perturbed
    (noise sd 0.158) and fall below 0.3 in some copies, unchanged it is not perturbed at all."""
    from lumber.passes.analyses.rules import Interval, Rule, sample_cases
    from lumber.passes.analyses.rules.recourse import STAY_SHARE, _job

    ex = RuleExplainer(corner["model"], corner["X"], options=RuleOptions(seed=0))
    ctx = ex.context
    feats = ex.forest.schema.features
    x = np.array([0.1, 0.45])
    rule = Rule((Interval(feats[0], 0, 0.5, np.inf), Interval(feats[1], 1, 0.3, 0.6)), 1.0, 0.3, 0.3)
    job = _job(ctx, x, rule, 0)
    assert job is not None
    stay0, stay1 = (float(np.mean(p == v)) for p, v in zip(job.pools, x))
    assert stay0 == 0.0 and stay1 == pytest.approx(STAY_SHARE, abs=0.01)
    plain = _job(ctx, x, rule, 0, stay=False)
    assert plain is not None and not np.isin(x[1], plain.pools[1])
    tgt = ex.local(x[None, :], target=1)[0].target
    [[s]] = sample_cases(ctx, x[None, :], [[rule]], [tgt], [0], 1)
    assert s.verified and [c.feature for c in s.changes] == [feats[0].name]
    assert s.x[1] == 0.45 and s.robustness[0][1] >= 0.95


@pytest.fixture(scope="module")
def either() -> dict[str, Any]:
    """Class 1 iff x0 > 0.5 or x1 > 0.5, both spread evenly over [0, 1]; the case (0.1, 0.1) is class 0."""
    from sklearn.ensemble import RandomForestClassifier

    rng = np.random.default_rng(0)
    X = rng.random((600, 2))
    y = ((X[:, 0] > 0.5) | (X[:, 1] > 0.5)).astype(int)
    rf = RandomForestClassifier(n_estimators=5, max_depth=4, random_state=0, n_jobs=1).fit(X, y)
    return {"model": rf, "X": X, "x": np.array([0.1, 0.1])}


def _fragile_then_robust(either: dict[str, Any], monkeypatch: pytest.MonkeyPatch, n_fragile: int) -> RuleExplainer:
    """The search proposes ``n_fragile`` sets whose rule is x0 in (0.5, 0.55] (at the model's edge: about
    half of the noisy copies fall back below 0.5), then one whose rule is 0.7 < x1 <= 0.8 (its interior
    keeps the target in about 0.99 of the copies at sigma^2 = 0.01)."""
    from lumber.passes.analyses.rules import Interval, Rule, core
    from lumber.passes.analyses.rules.divergent import Attempt

    ex = RuleExplainer(either["model"], either["X"], options=RuleOptions(seed=0, k_max=0))
    feats = ex.forest.schema.features

    def attempts(*_: Any, **__: Any) -> Any:
        for _k in range(n_fragile):
            yield Attempt(np.array([0]), 0.95, True)
        yield Attempt(np.array([1]), 0.92, True)

    def rules_on(ctx: Any, target: Any, q: Any, S: np.ndarray, exclude: Any) -> tuple[list[Any], float]:
        j = int(S[0])
        lo, hi = (0.5, 0.55) if j == 0 else (0.7, 0.8)
        return [Rule((Interval(feats[j], j, lo, hi),), 1.0, 0.05, 0.05)], 1.0

    monkeypatch.setattr(core, "search_divergent", attempts)
    monkeypatch.setattr(core, "_rules_on", rules_on)
    return ex


def test_screen_ranks_rule_sets_as_brute_force_does(either: dict[str, Any], monkeypatch: pytest.MonkeyPatch) -> None:
    """The robustness screen of two rule sets against brute force: every value of each rule's pool
    scored on 4,000 noisy copies. The screen (random points, 32 copies each) ranks the sets the same
    way and is within sampling error of the brute-force best; -1 for a set with no plausible point."""
    from lumber.passes.analyses.rules import Interval, Rule
    from lumber.passes.analyses.rules.recourse import _job, screen_robustness

    ex = RuleExplainer(either["model"], either["X"], options=RuleOptions(seed=0))
    ctx = ex.context
    feats = ex.forest.schema.features
    x = either["x"]
    tgt = ex.local(x[None, :], target=1)[0].target
    sets = [[Rule((Interval(feats[0], 0, 0.5, 0.55),), 1.0, 0.05, 0.05)],
            [Rule((Interval(feats[1], 1, 0.7, 0.8),), 1.0, 0.1, 0.1)],
            [Rule((Interval(feats[1], 1, 0.0, 0.2),), 1.0, 0.2, 0.2)]]  # stays in class 0: nothing reaches it
    got = screen_robustness(ctx, x, sets, tgt, key=0)
    brute = []
    for rs in sets:
        job = _job(ctx, x, rs[0], 0)
        assert job is not None
        P = np.repeat(x[None, :], job.pools[0].size, axis=0)
        P[:, job.features[0]] = job.pools[0]
        score, dec = ctx.score_and_decide(P)
        ok = (score >= 0) & tgt.hit(dec)
        share = noisy_keep(ctx, np.repeat(x[None, :], int(ok.sum()), axis=0), P[ok], [tgt] * int(ok.sum()),
                           0.1, 4000, np.random.default_rng(3))
        brute.append(float(share.max()) if share.size else -1.0)
    assert brute[2] == -1.0 and got[2] == -1.0
    assert brute[1] > brute[0] + 0.2 and got[1] > got[0]
    assert got[:2] == pytest.approx(brute[:2], abs=0.2)


def test_fragile_sample_widens_to_the_most_robust_set(either: dict[str, Any], monkeypatch: pytest.MonkeyPatch) -> None:
    """Eight fragile sets before the robust one: annealing the next ``widen = 6`` sets in search order
    would never reach it; ranked by the screen it is annealed first, and its sample keeps the target."""
    ex = _fragile_then_robust(either, monkeypatch, 8)
    res = ex.local(either["x"][None, :], target=1)[0]
    assert res.found and res.features == ("f1",)
    s = res.samples[0]
    assert s.verified and s.robustness[0][1] >= 0.95 and 0.7 < s.x[1] <= 0.8
    assert "widened from {f0}" in res.message and "noisy copies" in res.message


def _crn_value(ctx: Any, x: np.ndarray, P: np.ndarray, tgt: Any, sigma: float, draws: int, seed: int) -> np.ndarray:
    """Brute force for ``polish``: each point's share of the same ``draws`` noisy copies (the stream
    ``polish`` draws from) keeping the target; -1 for a point that is no plausible hit."""
    from lumber.passes.analyses.rules.recourse import feature_span

    z = np.random.default_rng(seed).normal(size=(draws, x.shape[0])) * (sigma * feature_span(ctx))[None, :]
    score, dec = ctx.score_and_decide(P)
    out = np.full(P.shape[0], -1.0)
    for i in np.flatnonzero((score >= 0) & tgt.hit(dec)):
        changed = P[i] != x
        out[i] = tgt.hit(ctx.decide(P[i][None, :] + z * changed[None, :])).mean()
    return out


@pytest.mark.parametrize("start", [(0.52, 0.32), (0.95, 0.35), (0.6, 0.9)])
def test_polish_reaches_the_brute_force_optimum_of_the_box(corner: dict[str, Any], start: tuple[float, float]) -> None:
    """The coordinate search in a box x0 in (0.5, 1], x1 in (0.3, 1] of the corner model, from three
    starts: every pair of the two features' pool values (at most ``POLISH_VALUES`` each, the values it
    tries) scored on the same noisy copies; the search ends at the best pair's share, inside the box,
    a plausible hit, never below its start."""
    from lumber.passes.analyses.rules import Interval, Rule
    from lumber.passes.analyses.rules.recourse import POLISH_VALUES, _job, polish

    ex = RuleExplainer(corner["model"], corner["X"], options=RuleOptions(seed=0))
    ctx = ex.context
    feats = ex.forest.schema.features
    x = np.array([0.1, 0.1])
    tgt = ex.local(x[None, :], target=1)[0].target
    rule = Rule((Interval(feats[0], 0, 0.5, 1.0), Interval(feats[1], 1, 0.3, 1.0)), 1.0, 0.3, 0.3)
    job = _job(ctx, x, rule, 0)
    assert job is not None
    pools = []
    for p in job.pools:
        u = np.unique(p)
        pools.append(u[np.unique(np.linspace(0, u.size - 1, POLISH_VALUES).round().astype(np.int64))])
    s0 = np.array(start)
    s0 = np.array([pools[0][np.argmin(abs(pools[0] - s0[0]))], pools[1][np.argmin(abs(pools[1] - s0[1]))]])
    [got] = polish(ctx, x, job, s0[None, :], tgt, np.random.default_rng(5), 0.1, 256)
    grid = np.array([(a, b) for a in pools[0] for b in pools[1]])
    brute = _crn_value(ctx, x, grid, tgt, 0.1, 256, 5)
    [mine] = _crn_value(ctx, x, got[None, :], tgt, 0.1, 256, 5)
    [before] = _crn_value(ctx, x, s0[None, :], tgt, 0.1, 256, 5)
    assert 0.5 < got[0] <= 1.0 and 0.3 < got[1] <= 1.0
    assert mine == brute.max() and mine >= before


def test_polished_sampler_keeps_a_plausible_hit(step: dict[str, Any]) -> None:
    """With the coordinate search on (the default) the sample is still a verified inlier in the rule's box,
    and at least as robust on the report's fresh copies as without it, within sampling error."""
    _, s = _sample(step)
    _, plain = _sample(step, robust_polish=0)
    assert s.verified and s.inlier and s.x[0] > 0.5
    assert s.robustness[0][1] >= plain.robustness[0][1] - 0.03


def test_screen_share_is_not_biased_up_by_its_selection(step: dict[str, Any]) -> None:
    """A rule x0 in (0.55, 0.56] near the model's edge: every point of it keeps the target in about
    Phi(0.55) = 0.71 of its noisy copies (sd 0.1 on x0). The screen picks the best of 256 random points by
    32 copies each; read off those same copies, that best averages 0.78 over four streams. Re-scored on
    fresh copies, the screen's share stays within sampling error of the truth."""
    from lumber.passes.analyses.rules.recourse import screen_robustness
    from lumber.passes.analyses.rules.results import Interval, Rule

    ex, _ = _sample(step)
    ctx = ex.context
    tgt = ex.local(step["x"][None, :], target=1)[0].target
    rule = Rule((Interval(ex.forest.schema.features[0], 0, 0.55, 0.56),), 1.0, 1.0, 0.05)
    grid = np.column_stack([np.linspace(0.5502, 0.56, 50), np.full(50, step["x"][1])])
    truth = noisy_keep(ctx, np.repeat(step["x"][None, :], 50, axis=0), grid, [tgt] * 50, 0.1, 4000,
                       np.random.default_rng(2)).max()
    assert 0.68 <= truth <= 0.76  # the model's edge is near 0.5, as the fixture says
    shares = [float(screen_robustness(ctx, step["x"], [[rule]], tgt, key=k)[0]) for k in range(4)]
    assert all(s >= 0.0 for s in shares)
    assert np.mean(shares) <= truth + 0.03, (shares, truth)


def _only_fragile(either: dict[str, Any], monkeypatch: pytest.MonkeyPatch, robust_search: bool,
                  n_samples: int = 1) -> RuleExplainer:
    """The divergent search proposes only sets whose rule is the fragile x0 in (0.5, 0.55]."""
    from lumber.passes.analyses.rules import Interval, Rule, core
    from lumber.passes.analyses.rules.divergent import Attempt

    ex = RuleExplainer(either["model"], either["X"], options=RuleOptions(seed=0, k_max=0, robust_search=robust_search,
                                                                         n_samples=n_samples))
    feats = ex.forest.schema.features

    def attempts(*_: Any, **__: Any) -> Any:
        for _k in range(8):
            yield Attempt(np.array([0]), 0.95, True)

    def rules_on(ctx: Any, target: Any, q: Any, S: np.ndarray, exclude: Any) -> tuple[list[Any], float]:
        return [Rule((Interval(feats[0], 0, 0.5, 0.55),), 1.0, 0.05, 0.05)], 1.0

    monkeypatch.setattr(core, "search_divergent", attempts)
    monkeypatch.setattr(core, "_rules_on", rules_on)
    return ex


def test_robust_search_finds_the_robust_box_the_search_order_hides(either: dict[str, Any],
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """Every set the divergent search proposes has only the fragile rule x0 in (0.5, 0.55] (about half
    of the noisy copies fall back below 0.5), so widening finds nothing better. With ``robust_search``
    the case's own admissible boxes are searched (the real ones: ``robust_search`` builds them itself):
    the sample that comes back keeps the target in >= 0.95 of its copies, lies in the box reported as
    the rule (every other feature unchanged), and that box reaches pi_c, recomputed here."""
    from lumber.passes.analyses.rules.actionable import action_space
    from lumber.passes.analyses.rules.core import box_crp, make_query

    x = either["x"]
    plain = _only_fragile(either, monkeypatch, False).local(x[None, :], target=1)[0]
    assert plain.samples[0].robustness[0][1] < 0.9  # the trap: every proposed set is fragile
    ex = _only_fragile(either, monkeypatch, True)
    res = ex.local(x[None, :], target=1)[0]
    s = res.samples[0]
    assert "(robust search)" in res.message and s.verified and s.inlier
    assert s.robustness[0][1] >= 0.95
    [rule] = res.rules
    assert 0.0 <= rule.support <= 1.0 and 0.0 <= rule.plausibility <= 1.0  # described, not left unset
    ivs = sorted(rule.intervals, key=lambda iv: iv.index)
    assert all(iv.lo < s.x[iv.index] <= iv.hi for iv in ivs)
    ctx = ex.context
    xm = ctx.model.prepare_input(x[None, :])[0]  # the case as the model reads it (float32 here)
    assert all(s.x[j] == xm[j] for j in range(x.size) if j not in {iv.index for iv in ivs})
    q = make_query(ctx, action_space(ctx.constraints, ctx.names, x, x),
                   ctx.cells.point_routes(ctx.table.forest.prepare_input(x[None, :]))[0], 0, point=x)
    S = np.array([iv.index for iv in ivs], dtype=np.int64)
    crp = box_crp(ctx, q, res.target, S, np.array([[iv.lo for iv in ivs]]), np.array([[iv.hi for iv in ivs]]))
    assert crp[0] >= ctx.options.pi_c
    # fresh copies, not the report's: the pick is not an artefact of the copies it was scored on
    fresh = noisy_keep(ctx, xm[None, :], s.x[None, :], [res.target], 0.1, 4000, np.random.default_rng(11))[0]
    assert fresh >= 0.95
    # more samples asked for: the search's point first, the others drawn from the same box
    many = _only_fragile(either, monkeypatch, True, n_samples=3).local(x[None, :], target=1)[0]
    assert np.array_equal(many.samples[0].x, s.x) and len(many.samples) == 3
    assert all(bool(many.rules[0].contains(t.x[None, :])[0]) and t.verified for t in many.samples)


def test_robust_search_visits_the_highest_cdp_sets_within_its_budget(corner: dict[str, Any],
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """With room for every subset the search visits all of them, smallest first; with a budget of one set
    per ``len(X)`` rows it visits the one of highest CDP (brute force over the three subsets of two
    candidates), and the search still returns a point in a box over that set."""
    from lumber.passes.analyses.rules import robust_search
    from lumber.passes.analyses.rules.actionable import action_space
    from lumber.passes.analyses.rules.core import make_query, subset_cdp

    ex = RuleExplainer(corner["model"], corner["X"], options=RuleOptions(seed=0))
    ctx = ex.context
    x = np.array([0.1, 0.1])
    tgt = ex.local(x[None, :], target=1)[0].target
    xr = ctx.table.forest.prepare_input(x[None, :])[0]
    q = make_query(ctx, action_space(ctx.constraints, ctx.names, x, x), ctx.cells.point_routes(xr[None, :])[0], 0,
                   point=x)
    every = robust_search.feature_sets(ctx, q, tgt, None)
    assert [S.tolist() for S in every] == [[0], [1], [0, 1]]
    cdp = subset_cdp(ctx, q, tgt, np.array([np.bitwise_or.reduce(q.bits[S]) for S in every], dtype=np.uint64))
    monkeypatch.setattr(robust_search, "SET_BUDGET", corner["X"].shape[0])
    [only] = robust_search.feature_sets(ctx, q, tgt, None)
    assert only.tolist() == every[int(np.argmax(cdp))].tolist()
    found = robust_search.most_robust_point(ctx, x, q, tgt, 0, xr)
    assert found is not None and found.feature_sets == 1
    assert {iv.index for iv in found.rule.intervals} <= set(only.tolist())


def test_widened_sample_report_is_drawn_again(either: dict[str, Any], monkeypatch: pytest.MonkeyPatch) -> None:
    """The sets were compared on the reports' own copies, so the winner's report is drawn again on another
    stream (``local.REPORT_AGAIN``): the report equals a fresh report of that point on that stream, not the
    one the comparison read (stream 29)."""
    from lumber.passes.analyses.rules.local import REPORT_AGAIN
    from lumber.passes.analyses.rules.recourse import robustness_report

    ex = _fragile_then_robust(either, monkeypatch, 2)
    x = either["x"]
    res = ex.local(x[None, :], target=1, rows=[7])[0]
    assert "widened from" in res.message
    s = res.samples[0]
    ctx = ex.context
    xm = ctx.model.prepare_input(x[None, :])  # as the model reads it (float32 for scikit-learn's forests)
    [again] = robustness_report(ctx, xm, s.x[None, :], [res.target], 7, stream=REPORT_AGAIN)
    [first] = robustness_report(ctx, xm, s.x[None, :], [res.target], 7)
    assert s.robustness == again
    assert first != again  # the streams differ: the test can tell them apart
