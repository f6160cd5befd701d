"""Rule sampling reads the feature domains (lumber.ir.domains): sampled values are whole numbers
where the feature is integer, whole steps where it has a resolution, category codes (printed by
label), within bounds, and never a change below resolution."""

from __future__ import annotations

from typing import Any

import numpy as np

from lumber.compiler.api.rules import RuleExplainer, RuleOptions
from lumber.ir.domains import DomainKind, FeatureDomain
from lumber.passes.analyses.rules.sampling import value_pool

INF = np.inf


def test_value_pool_keeps_domain_values_only() -> None:
    raw = np.array([0.0, 1.0, 2.0, 3.0, 4.5, 6.0, 7.0])
    step2 = FeatureDomain("x", DomainKind.INTEGER, 0.0, 10.0, step=2.0)
    # x0 = 2: whole steps of 2 from 2, at least 2 away; 4.5 and the odd values are not reachable
    assert value_pool(raw, raw, -INF, INF, domain=step2, x0=2.0).tolist() == [0.0, 2.0, 6.0]
    integer = FeatureDomain("x", DomainKind.INTEGER, 0.0, 10.0)
    assert value_pool(raw, raw, 3.0, 7.0, domain=integer, x0=0.0).tolist() == [6.0, 7.0]
    # no training value in the box: the domain value nearest the midpoint, not the midpoint itself
    got = value_pool(raw, raw, 7.0, 9.0, domain=integer, x0=0.0)
    assert got.tolist() == [8.0]
    assert value_pool(raw, raw, 7.0, 9.0).tolist() == [8.0]  # without a domain: the midpoint
    assert value_pool(raw, raw, 7.0, 8.5).tolist() == [7.75]
    assert value_pool(raw, raw, 7.0, 8.5, domain=integer, x0=0.0).tolist() == [8.0]
    # an interval holding no domain value: nothing to sample
    assert value_pool(raw, raw, 7.2, 7.9, domain=integer, x0=0.0).size == 0
    # open intervals stay inside the domain's bounds
    assert value_pool(raw, raw, 9.0, INF, domain=integer, x0=0.0).tolist() == [10.0]
    cat = FeatureDomain("c", DomainKind.CATEGORICAL, codes=(0.0, 1.0, 2.0), labels=("a", "b", "c"))
    assert value_pool(raw, raw, 1.5, 5.0, domain=cat, x0=0.0).tolist() == [2.0]
    assert value_pool(raw, raw, 2.5, 5.0, domain=cat, x0=0.0).size == 0


def test_samples_are_domain_points(compas_model: dict[str, Any]) -> None:
    """With a resolution in the constraint file, every sample changes PriorsCount by whole steps of 3
    (the training values are integers; only multiples of 3 away from the case's value qualify)."""
    Xtr, Xte = compas_model["Xtr"], compas_model["Xte"]
    ex = RuleExplainer(compas_model["model"], Xtr, constraints="PriorsCount: step 3\n",
                       options=RuleOptions(n_samples=2))
    dom = ex.context.domains
    assert dom is not None and dom["PriorsCount"].step == 3.0
    assert all(d.kind != DomainKind.CONTINUOUS for d in dom.features)  # compas is integer-coded
    rs = ex.local(Xte.iloc[:10])
    seen = 0
    for r in rs:
        for s in r.samples:
            assert not dom.problems(r.x, s.x), (r.row, dom.problems(r.x, s.x))
            assert not [v for v in s.violations if "resolution" in v or "whole" in v]
            for ch in s.changes:
                assert float(ch.after) == int(ch.after)
                if ch.feature == "PriorsCount":
                    assert (ch.after - ch.before) % 3 == 0
                    seen += 1
    assert sum(len(r.samples) for r in rs) >= 8 and seen >= 1


def test_fine_equals_problem_value_by_value() -> None:
    """``FeatureDomain.fine`` (the whole pool at once, what ``value_pool`` uses) agrees with
    ``problem`` asked one value at a time, for every kind, on and off grid, at and near the case's
    value, NaN and infinities included."""
    import math

    rng = np.random.default_rng(0)
    domains = [FeatureDomain("c"), FeatureDomain("c01", lower=0.0, upper=1.0),
               FeatureDomain("i", DomainKind.INTEGER, lower=-3.0, upper=40.0),
               FeatureDomain("s", lower=0.0, upper=10.0, step=0.25),
               FeatureDomain("b", DomainKind.BINARY, lower=0.0, upper=1.0),
               FeatureDomain("k", DomainKind.CATEGORICAL, codes=(0.0, 2.0, 5.0)),
               FeatureDomain("k_any", DomainKind.CATEGORICAL)]
    base = np.concatenate([rng.uniform(-5, 45, 200), np.round(rng.uniform(-5, 45, 200)),
                           np.round(rng.uniform(0, 10, 100) * 4) / 4, [0.0, 1.0, 2.0, 5.0, 0.5, 1e-12, -0.0],
                           [np.nan, np.inf, -np.inf]])
    for d in domains:
        for x0 in (0.0, 1.0, 2.0, 3.3, 7.25, 7.3, math.nan):
            vals = np.concatenate([base, [x0, x0 + 0.5, x0 + 1e-12, x0 - 1.0]])
            want = np.array([not d.problem(x0, float(v)) for v in vals])
            assert d.fine(x0, vals).tolist() == want.tolist(), (d.name, x0)
