"""Regional counterfactual rules: one recourse for every case of a hyper-rectangle R.

Outside S the query keeps R's intervals (the Regional RF sends a split on such
a feature left, right or both ways), so the rule holds for the region as a
whole: IF the cases of R move S into the box THEN the target is reached with
probability ``pi_c``. Moves must be allowed for every case in R (see
:mod:`actionable`). Coverage over a data set is the share of its cases that
lie in a region with a rule.

With an inlier score, boxes are ranked by their share of plausible (region case,
training value) counterfactual points (:func:`core.plausible_values`), so the
rules favour moves that stay realistic for the region's cases; ``Rule.inliers``
is that share on the plausibility scale. A later feature set of the search
replaces the first when its rules give more of the region's cases a plausible
point (``extra["region_plausible_cases"]``); every rule still reaches ``pi_c``.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any, Iterator, Mapping, Sequence

import numpy as np
import numpy.typing as npt

from lumber.ir import Forest, InputDataError, Schema, Target

from ..leaf_boxes import tree_boxes
from .actionable import action_space
from .context import RuleContext
from .core import Outcome, Query, case_share, make_query, plausible_alternatives, search_rules
from .local import rule_info
from .recourse import sample_cases
from .results import EMPTY_REGION, FOUND, CounterfactualRule, CounterfactualSample, Interval, RuleSet
from .targets import class_labels, describe_decision, is_classifier, resolve_target

FloatArray = npt.NDArray[np.float64]
BoolArray = npt.NDArray[np.bool_]


@dataclass(frozen=True)
class Region:
    """A hyper-rectangle ``lo < x <= hi`` over the model's features (infinite = unbounded)."""

    lo: FloatArray
    hi: FloatArray
    name: str = ""

    def contains(self, X: FloatArray) -> BoolArray:
        with np.errstate(invalid="ignore"):
            ok = (X > self.lo[None, :]) & (X <= self.hi[None, :])
        bounded = ~(np.isneginf(self.lo) & np.isposinf(self.hi))
        return np.all(ok | ~bounded[None, :], axis=1)  # type: ignore[no-any-return]

    def intervals(self, schema: Schema, shown: Any = None) -> tuple[Interval, ...]:
        return tuple(Interval(schema.features[j], j, float(self.lo[j]), float(self.hi[j]), shown)
                     for j in range(schema.n_features) if np.isfinite(self.lo[j]) or np.isfinite(self.hi[j]))

    @staticmethod
    def from_bounds(schema: Schema, bounds: Mapping[str, tuple[float | None, float | None]],
                    name: str = "") -> "Region":
        """Closed intervals ``a <= x <= b`` by feature name (``None`` for an open end)."""
        lo = np.full(schema.n_features, -np.inf)
        hi = np.full(schema.n_features, np.inf)
        names = schema.feature_names
        for f, ab in bounds.items():
            if f not in names:
                raise InputDataError(f"region names unknown feature {f!r}",
                                     f"features: {', '.join(names[:12])}{' ...' if len(names) > 12 else ''}")
            try:
                a, b = ab
            except (TypeError, ValueError):
                raise InputDataError(f"region bound for {f!r} must be a pair (a, b), got {ab!r}") from None
            j = names.index(f)
            if a is not None:
                lo[j] = float(np.nextafter(float(a), -np.inf))
            if b is not None:
                hi[j] = float(b)
            if not lo[j] < hi[j]:
                raise InputDataError(f"region interval for {f!r} is empty: [{a}, {b}]")
        return Region(lo, hi, name)

    @staticmethod
    def from_leaf(forest: Forest, node: int, name: str = "") -> "Region":
        """The box of a leaf (global node id) of a forest with threshold splits."""
        if not 0 <= node < forest.n_nodes or forest.left[node] >= 0:
            raise InputDataError(f"node {node} is not a leaf of the forest")
        t = int(forest.node_tree[node])
        b = tree_boxes(forest, t)
        k = int(np.flatnonzero(b.leaf == node)[0])
        return Region(b.lo[k].copy(), b.hi[k].copy(), name or f"tree {t} leaf {node - int(forest.tree_offset[t])}")


def regional_rules(ctx: RuleContext, regions: Sequence[Region], target: Any = None) -> RuleSet:
    """A regional rule for each region (target: as for local rules; ``None`` = away from the
    region's majority decision)."""
    tab = ctx.table
    names = ctx.names
    opt = ctx.options
    feats = tuple(ctx.model.schema.features)
    results: list[CounterfactualRule] = []
    for r, reg in enumerate(regions):
        if reg.lo.shape[0] != tab.n_features or reg.hi.shape[0] != tab.n_features:
            raise InputDataError(f"region {r} has {reg.lo.shape[0]} bounds for {tab.n_features} features")
        inside = reg.contains(tab.X)
        n_in = int(inside.sum())
        ivs = reg.intervals(ctx.model.schema, ctx.display)
        cur = _majority(ctx, inside)
        tgt = resolve_target(ctx.model, target, cur) if (cur is not None or target is not None) else _no_target(ctx)
        common: dict[str, Any] = dict(target=tgt, pi=opt.pi, pi_c=opt.pi_c, schema_features=feats, region=ivs,
                                      region_rows=n_in, row=None,
                                      prediction=None if cur is None else describe_decision(ctx.model, cur))
        extra = {"region_name": reg.name, "region_target_share": float(ctx.hit(tgt)[inside].mean()) if n_in else 0.0}
        if n_in == 0:
            results.append(CounterfactualRule(EMPTY_REGION, "no training row lies in the region", features=(),
                                              cdp=0.0, extra=extra, **common))
            continue
        lo0 = np.where(np.isneginf(reg.lo), -np.inf, np.nextafter(reg.lo, np.inf))
        act = action_space(ctx.constraints, names, lo0, reg.hi)
        queries: list[Query] = []

        def query(k: int | None, reg: Region = reg, act: Any = act, r: int = r, inside: BoolArray = inside,
                  queries: list[Query] = queries) -> Query:
            queries.append(make_query(ctx, act, ctx.cells.interval_routes(reg.lo[None], reg.hi[None])[0],
                                      1_000_000 + r, point=ctx.X_raw[inside], k=k))
            return queries[-1]
        out, gen = search_rules(ctx, tgt, query)
        if out.status == FOUND and opt.widen > 0:
            out, share = _widen(ctx, tgt, queries[-1], out, gen)
            if share is not None:
                extra["region_plausible_cases"] = share
        results.append(CounterfactualRule(out.status, out.message, features=tuple(names[j] for j in out.features),
                                          cdp=out.cdp, reached_pi=out.reached_pi, rules=out.rules, search=out.search,
                                          extra=extra, **common))
    return RuleSet(results, rule_info(ctx))


def _widen(ctx: RuleContext, target: Target, q: Query, out: Outcome,
           more: Iterator[Outcome]) -> tuple[Outcome, float | None]:
    """Keep the search's first rule set unless a later feature set serves more of the region's cases
    with a plausible counterfactual point (:func:`core.case_share`); stops at a set serving all.

    As for local rules, sets whose boxes hold no plausible point are passed over and at
    most ``widen`` further sets are scored; every candidate reaches ``pi_c`` on the region.
    """
    best = case_share(ctx, q, target, out.rules)
    if best is None:
        return out, None
    first = out
    for o in plausible_alternatives(more, ctx.options.widen if best < 1.0 else 0):
        share = case_share(ctx, q, target, o.rules)
        assert share is not None
        if share > best:
            out, best = o, share
        if best >= 1.0:
            break
    if out is not first:
        out = replace(out, message=out.message + f"; widened from {{{', '.join(ctx.names[j] for j in first.features)}}}"
                      " whose rules give fewer of the region's cases a plausible counterfactual point")
    return out, best


def _no_target(ctx: RuleContext) -> Target:
    """Placeholder for an empty region with no target given (there is no decision to move away from)."""
    return Target(classes=(), labels=class_labels(ctx.model)) if is_classifier(ctx.model) else Target(
        interval=(np.nan, np.nan))


def _majority(ctx: RuleContext, inside: BoolArray) -> float | None:
    d = ctx.train_decision[inside]
    if d.size == 0:
        return None
    if is_classifier(ctx.model):
        vals, counts = np.unique(d, return_counts=True)
        return float(vals[int(np.argmax(counts))])
    return float(np.median(d))


def region_of(results: Sequence[CounterfactualRule], X: FloatArray, schema: Schema) -> npt.NDArray[np.int64]:
    """For each row, the first regional result with a rule whose region holds it (-1: none)."""
    out = np.full(X.shape[0], -1, dtype=np.int64)
    for k, res in enumerate(results):
        if not res.found or res.region is None:
            continue
        lo = np.full(schema.n_features, -np.inf)
        hi = np.full(schema.n_features, np.inf)
        for iv in res.region:
            lo[iv.index], hi[iv.index] = iv.lo, iv.hi
        hit = Region(lo, hi).contains(X) & (out < 0)
        out[hit] = k
    return out


def coverage(results: Sequence[CounterfactualRule], X: FloatArray, schema: Schema) -> float:
    """Share of the rows of ``X`` that lie in a region whose regional rule was found."""
    if X.shape[0] == 0:
        return 0.0
    return float((region_of(results, X, schema) >= 0).mean())


def apply_regional(ctx: RuleContext, result: CounterfactualRule, X: Any, *, n_samples: int = 1,
                   key: int = 0) -> list[tuple[CounterfactualSample, ...]]:
    """Counterfactual samples for cases of ``X`` from a regional result's rules (cases keep their
    values outside S)."""
    Xm = ctx.model.prepare_input(X)
    if not result.found:
        return [() for _ in range(Xm.shape[0])]
    return sample_cases(ctx, Xm, [result.rules] * Xm.shape[0], [result.target] * Xm.shape[0],
                        [key * 100_000 + i for i in range(Xm.shape[0])], n_samples)


__all__ = ["Region", "apply_regional", "coverage", "region_of", "regional_rules"]
