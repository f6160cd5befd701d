"""The divergent-set search's order and budget (Amoukou and Brunel, Definition 3.2): divergent sets first,
then -- unless strict -- the sets below pi, also when some set reaches pi but gives no rule."""

from __future__ import annotations

from typing import Any, Iterator

import numpy as np
import pytest

from lumber.passes.analyses.rules import FOUND, NO_RULE, Interval, Rule, RuleOptions, build_context, local_rules
from lumber.passes.analyses.rules import core
from lumber.passes.analyses.rules.divergent import Attempt, SearchLog, search_divergent

CDP = {0b001: 0.95, 0b010: 0.5, 0b100: 0.2, 0b011: 0.7, 0b101: 0.6, 0b110: 0.4, 0b111: 0.3}
"""CDP of each subset of three candidates (bit k = candidate k): only {c0} reaches pi = 0.9."""


def _search(**kw: Any) -> list[Attempt]:
    def score(masks: np.ndarray) -> np.ndarray:
        return np.array([CDP[int(m)] for m in masks])

    cand = np.array([10, 11, 12], dtype=np.int64)
    return list(search_divergent(None, score, cand, SearchLog(), pi=0.9, search="exhaustive", **kw))  # type: ignore


def test_sets_below_pi_follow_the_divergent_one() -> None:
    """{c0} reaches pi and comes first; the best set below pi of each size follows (sizes up to half the
    features by CDP, then larger ones): {c0, c1} 0.7 and {c1} 0.5, then {c0, c1, c2}. Before, a divergent
    set ended the search, and a case whose divergent sets gave no box had no rule."""
    got = _search(fallback_max_size=2)
    assert [(a.features.tolist(), a.cdp, a.divergent) for a in got] == [
        ([10], 0.95, True), ([10, 11], 0.7, False), ([11], 0.5, False), ([10, 11, 12], 0.3, False)]
    assert [a.features.tolist() for a in _search(strict=True)] == [[10]]


def test_failed_divergent_sets_do_not_use_up_the_budget(hand: dict[str, Any], monkeypatch: pytest.MonkeyPatch) -> None:
    """Twelve sets reach pi but give no box (as sets resting on a one-row cell do on small data), then
    a set below pi gives a rule: with max_sets = 10 the search tries 10 of the divergent sets and still
    reaches it; the message says why a set below pi was used."""
    feats = hand["rule_forest"].schema.features

    def attempts(*_: Any, **__: Any) -> Iterator[Attempt]:
        for _k in range(12):
            yield Attempt(np.array([0]), 1.0, True)
        yield Attempt(np.array([1]), 0.4, False)

    tried: list[tuple[int, ...]] = []

    def rules_on(ctx: Any, target: Any, q: Any, S: np.ndarray, exclude: Any) -> tuple[list[Rule], float]:
        tried.append(tuple(S.tolist()))
        if S.tolist() == [1]:
            return [Rule((Interval(feats[1], 1, 1.5, np.inf),), 1.0, 0.3, 0.3)], 1.0
        return [], 0.5

    monkeypatch.setattr(core, "search_divergent", attempts)
    monkeypatch.setattr(core, "_rules_on", rules_on)
    ctx = build_context(hand["model"], hand["rule_forest"], hand["X"], options=RuleOptions(max_sets=10, k_max=0))
    res = local_rules(ctx, hand["x"][None, :], target=1)[0]
    assert res.status == FOUND and res.features == ("x1",) and not res.reached_pi
    assert tried == [(0,)] * 10 + [(1,)]
    assert "the sets reaching pi=0.9 give no box" in res.message
    # and when no set below pi gives one either, the case has no rule, after max_sets of each kind
    tried.clear()
    monkeypatch.setattr(core, "_rules_on", lambda *a: (tried.append(tuple(a[3].tolist())), ([], 0.5))[1])
    res = local_rules(ctx, hand["x"][None, :], target=1)[0]
    assert res.status == NO_RULE and tried == [(0,)] * 10 + [(1,)]


@pytest.mark.parametrize("kind", ["classifier", "regressor"])
def test_impurity_importance_matches_scikit_learn(kind: str) -> None:
    """Fitted on every row (no bootstrap) with all features per split, scikit-learn's
    ``feature_importances_`` is the impurity decrease on exactly the rows the table holds: equal."""
    from sklearn.ensemble import RandomForestClassifier, RandomForestRegressor

    from lumber.compiler.frontends import load
    from lumber.passes.analyses.rules.table import build_leaf_table, impurity_importance

    rng = np.random.default_rng(0)
    X = rng.normal(size=(300, 5))
    y = X[:, 0] + 0.5 * X[:, 2] ** 2 + 0.1 * rng.normal(size=300)
    if kind == "classifier":
        y = np.digitize(y, [-0.5, 0.8])  # three classes
        rf: Any = RandomForestClassifier(n_estimators=4, max_depth=4, bootstrap=False, max_features=None,
                                         random_state=0).fit(X, y)
    else:
        rf = RandomForestRegressor(n_estimators=4, max_depth=4, bootstrap=False, max_features=None,
                                   random_state=0).fit(X, y)
    tab = build_leaf_table(load(rf), X)
    got = impurity_importance(tab, y.astype(np.float64), kind == "classifier")
    assert got == pytest.approx(rf.feature_importances_, abs=1e-9)


def test_rank_impurity_picks_the_k_most_important_features() -> None:
    """``rank="impurity"`` takes the K features of highest impurity importance, ``"splits"`` those split on
    most: on a forest where x0 decides and x1..x3 only fit label noise (many small splits), they differ."""
    from dataclasses import replace

    from sklearn.ensemble import RandomForestClassifier

    import lumber
    from lumber.passes.analyses.rules.actionable import action_space
    from lumber.passes.analyses.rules.divergent import candidate_features

    rng = np.random.default_rng(1)
    X = rng.random((400, 4))
    y = (X[:, 0] > 0.5).astype(int) ^ (rng.random(400) < 0.15)
    rf = lumber.load(RandomForestClassifier(n_estimators=5, max_depth=8, random_state=0).fit(X, y))
    ctx = build_context(rf, rf, X, options=RuleOptions(k=1))
    imp, usage = ctx.importance, ctx.table.usage
    assert imp is not None and int(np.argmax(imp)) == 0 and int(np.argmax(usage)) != 0
    movable = np.ones(4, dtype=bool)
    assert candidate_features(ctx.table, movable, 4, imp).tolist() == np.argsort(-imp, kind="stable").tolist()

    def first(c: Any) -> list[int]:
        q = core.make_query(c, action_space(None, c.names, X[0], X[0]), c.cells.point_routes(X[:1])[0], 0)
        return q.candidates.tolist()  # type: ignore[no-any-return]

    assert first(ctx) == [int(np.argmax(usage))]
    assert first(replace(ctx, options=replace(ctx.options, rank="impurity"))) == [0]
    with pytest.raises(Exception, match="rank must be one of"):
        RuleOptions(rank="gain").check()
