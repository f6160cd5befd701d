"""Local counterfactual rules: for each case, the smallest set S of features to change and
the boxes over S that reach the target with probability ``pi_c`` (Amoukou and Brunel).

The case's other features stay fixed. Leaves are reached by exact routing of
the case's fixed values (NaN included), so a rule is conditioned exactly on
what the model sees.
"""

from __future__ import annotations

import itertools
from dataclasses import replace
from typing import Any, Callable, Iterator, Sequence

import numpy as np
import numpy.typing as npt

from .actionable import action_space
from .context import RuleContext
from .core import Outcome, Query, make_query, plausible_alternatives, search_rules, subset_cdp
from .recourse import POLISH_SIGMA, _sample, noisy_keep, robustness_report, sample_cases, screen_robustness
from .robust_search import FRESH_DRAWS, SEARCH_BELOW, most_robust_point
from .results import ALREADY_TARGET, FOUND, CounterfactualRule, CounterfactualSample, RuleSet
from .targets import decisions, describe_decision, resolve_target

FloatArray = npt.NDArray[np.float64]


def local_rules(ctx: RuleContext, X: Any, target: Any = None, *, rows: Sequence[int] | None = None,
                progress: Callable[[int], None] | None = None) -> RuleSet:
    """Local rules (and samples, ``options.n_samples`` per case) for every row of ``X``.

    ``target``: a class label, several labels, ``(a, b)`` for a regressor, or
    ``None`` for "any other class". ``rows`` names the cases in the output (and
    keys each case's random stream); default ``0..n-1``. ``progress(1)`` is called as each
    case's rule search ends (the CLI's progress bar); samples are drawn for all cases after.
    """
    Xm = ctx.model.prepare_input(X)
    Xr = ctx.table.forest.prepare_input(X)
    n = Xm.shape[0]
    keys = list(range(n)) if rows is None else [int(r) for r in rows]
    dec = decisions(ctx.model, Xm)
    names = ctx.names
    opt = ctx.options
    feats = tuple(ctx.model.schema.features)
    results: list[CounterfactualRule] = []
    more: dict[int, Iterator[Outcome]] = {}
    queries: dict[int, Callable[[Any], Any]] = {}
    for i in range(n):
        tgt = resolve_target(ctx.model, target, dec[i])
        common: dict[str, Any] = dict(target=tgt, pi=opt.pi, pi_c=opt.pi_c, schema_features=feats, x=Xm[i].copy(),
                                      prediction=describe_decision(ctx.model, dec[i]), row=keys[i])
        if tgt.hit(dec[i:i + 1])[0]:
            results.append(CounterfactualRule(ALREADY_TARGET, f"the model already predicts {common['prediction']}",
                                              features=(), cdp=1.0, **common))
            if progress is not None:
                progress(1)
            continue
        act = action_space(ctx.constraints, names, Xm[i], Xm[i])
        def query(k: Any, i: int = i, act: Any = act) -> Any:
            return make_query(ctx, act, ctx.cells.point_routes(Xr[i:i + 1])[0], keys[i], point=Xm[i], k=k)

        out, gen = search_rules(ctx, tgt, query, exclude=Xr[i])
        if out.status == FOUND:
            more[i] = gen
            queries[i] = query
        results.append(_result(out, names, common))
        if progress is not None:
            progress(1)
    found = [k for k, r in enumerate(results) if r.found]
    if opt.n_samples > 0 and found:
        samples = sample_cases(ctx, Xm[found], [results[k].rules for k in found], [results[k].target for k in found],
                               [keys[k] for k in found], opt.n_samples)
        for k, s in zip(found, samples):
            results[k].samples = s
        for k in found:
            if opt.widen > 0 and not _good(results[k].samples, _robust_target(ctx)):
                results[k] = _widen(ctx, results[k], more[k], Xm[k], keys[k], names)
            if opt.robust_search and _robust_target(ctx) > 0 and not _good(results[k].samples, SEARCH_BELOW):
                results[k] = _search_boxes(ctx, results[k], queries[k](None), Xm[k], Xr[k], keys[k], names)
    return RuleSet(results, rule_info(ctx))


def _result(out: Outcome, names: Sequence[str], common: dict[str, Any]) -> CounterfactualRule:
    return CounterfactualRule(out.status, out.message, features=tuple(names[j] for j in out.features), cdp=out.cdp,
                              reached_pi=out.reached_pi, rules=out.rules, search=out.search, **common)


def _common(res: CounterfactualRule) -> dict[str, Any]:
    """What a case's result keeps when another outcome replaces its rules."""
    return dict(target=res.target, pi=res.pi, pi_c=res.pi_c, schema_features=res.schema_features, x=res.x,
                prediction=res.prediction, row=res.row)


def _robust_target(ctx: RuleContext) -> float:
    a = ctx.options.anneal
    return a.robust_target if a.robust_sigma > 0 else 0.0


def _robustness(s: CounterfactualSample) -> float:
    """Share of noisy copies (sigma^2 = 0.01) keeping the target; 1 when not measured."""
    return float(s.robustness[0][1]) if s.robustness else 1.0


def _good(samples: Sequence[CounterfactualSample], robust: float = 0.0) -> bool:
    return bool(samples) and samples[0].verified and samples[0].inlier and _robustness(samples[0]) >= robust


def _rank(samples: Sequence[CounterfactualSample], robust: float = 0.0) -> tuple[bool, bool, float, float]:
    s = samples[0] if samples else None
    if s is None:
        return (False, False, -np.inf, -np.inf)
    return (s.verified, s.inlier, min(_robustness(s), robust), s.inlier_score)


def _widen(ctx: RuleContext, res: CounterfactualRule, more: Iterator[Outcome], x: FloatArray, key: int,
           names: Sequence[str]) -> CounterfactualRule:
    """Try the next feature sets of the search while the best sample is an outlier, misses the target or
    (with a robustness reward) keeps it in fewer than ``robust_target`` of its noisy copies; keep the
    first set whose sample is a verified, robust inlier, else the best sample seen.

    Sets whose rules hold no plausible counterfactual point among training values
    (``Outcome.plausible is False``) are passed over without annealing; at most
    ``widen`` sets are annealed (the generator itself stops after ``widen_sets`` sets).
    """
    best = res
    robust = _robust_target(ctx)
    fragile = robust > 0 and bool(res.samples) and res.samples[0].verified and res.samples[0].inlier
    alternatives = (_by_screen(ctx, more, x, res, key) if fragile
                    else plausible_alternatives(more, ctx.options.widen))
    for out in alternatives:
        [samples] = sample_cases(ctx, x[None, :], [out.rules], [res.target], [key], ctx.options.n_samples)
        if _rank(samples, robust) > _rank(best.samples, robust):
            best = _result(out, names, _common(res))
            best.samples = samples
            why = ("not verified" if not (res.samples and res.samples[0].verified) else
                   "an outlier" if not res.samples[0].inlier else
                   f"kept by {_robustness(res.samples[0]):.2f} of its noisy copies")
            best.message += f"; widened from {{{', '.join(res.features)}}} whose best sample is {why}"
        if _good(best.samples, robust):
            break
    if best is not res and robust > 0 and best.samples:
        # the sets were compared on the report's own copies: the winner's report would be biased up by
        # that choice, so it is drawn again
        Xs = np.stack([s.x for s in best.samples])
        rep = robustness_report(ctx, np.repeat(x[None, :], Xs.shape[0], axis=0), Xs,
                                [best.target] * Xs.shape[0], key, stream=REPORT_AGAIN)
        best.samples = tuple(replace(s, robustness=r) for s, r in zip(best.samples, rep))
    return best


def _search_boxes(ctx: RuleContext, res: CounterfactualRule, q: Query, x: FloatArray, xr: FloatArray, key: int,
                  names: Sequence[str]) -> CounterfactualRule:
    """``RuleOptions.robust_search``: the most robust point of any admissible box of the case
    (:func:`robust_search.most_robust_point`) replaces the sample, and its box the rules, when the sample
    is no plausible hit or keeps the target in fewer fresh noisy copies (as many as the point was scored
    on: the report's 200 would let noise decide)."""
    found = most_robust_point(ctx, x, q, res.target, key, xr)
    now = _robustness(res.samples[0]) if res.samples else -1.0
    if found is not None and _good(res.samples):  # the sample on as many fresh copies as the search's point
        rng = np.random.default_rng([ctx.options.seed, int(key), 61])
        now = float(noisy_keep(ctx, x[None, :], res.samples[0].x[None, :], [res.target], POLISH_SIGMA, FRESH_DRAWS,
                               rng)[0])
    if found is None or (_good(res.samples) and found.share <= now):  # the search's point is a plausible hit
        res.message += (f"; the robust search over {found.feature_sets} feature sets ({found.boxes} admissible "
                        f"boxes) found no point more robust" if found is not None else
                        "; the robust search found no plausible point in any admissible box")
        return res
    score = float(ctx.score(found.x[None, :])[0]) if ctx.score is not None else 0.0
    reached = bool(res.target.hit(ctx.decide(found.x[None, :]))[0])
    sample = _sample(ctx, x, found.x, score, reached, 0, names)
    [rep] = robustness_report(ctx, x[None, :], found.x[None, :], [res.target], key, stream=REPORT_AGAIN)
    S = np.array([iv.index for iv in found.rule.intervals], dtype=np.int64)
    mask = np.bitwise_or.reduce(q.bits[S]).astype(np.uint64)
    cdp = float(subset_cdp(ctx, q, res.target, np.array([mask], dtype=np.uint64))[0])
    was = f"{{{', '.join(res.features)}}} (sample kept by {now:.2f} of its noisy copies)"
    out = Outcome(FOUND, f"1 rule over {{{', '.join(names[j] for j in S)}}}: the most robust of {found.boxes} "
                  f"admissible boxes searched over {found.feature_sets} feature sets (robust search), "
                  f"in place of {was}",
                  S, cdp, cdp >= ctx.options.pi, (found.rule,), res.search, None)
    best = _result(out, names, _common(res))
    more: tuple[CounterfactualSample, ...] = ()
    if ctx.options.n_samples > 1:  # the others from the same box, as the sampler draws them
        [drawn] = sample_cases(ctx, x[None, :], [(found.rule,)], [res.target], [key], ctx.options.n_samples)
        more = tuple(d for d in drawn if not np.array_equal(d.x, found.x))[:ctx.options.n_samples - 1]
    best.samples = (replace(sample, robustness=rep), *more)
    return best


REPORT_AGAIN = 53
"""Random stream of the robustness report drawn again for a sample chosen among widened sets."""


def _by_screen(ctx: RuleContext, more: Iterator[Outcome], x: FloatArray, res: CounterfactualRule,
               key: int) -> list[Outcome]:
    """The further feature sets of the search, the ``widen`` whose boxes' random points keep the target
    best under noise first (:func:`recourse.screen_robustness`; sets with no plausible point among the
    draws last). Sets are pulled from the search (which stops after ``widen_sets``) until one screens at
    ``robust_target`` or better: on large data each set costs a rule construction.

    On the diabetes regression the search order (CDP) put sets over 9-10 features, whose samples
    keep the target in about 0.55 of the noisy copies, before sets over 6-7 features whose interior
    keeps it in 0.85-0.95; annealing only the first six passed the latter over. Sets whose boxes
    hold no plausible training row (``Outcome.plausible is False``) are screened too: annealing
    combines feature values across rows and often finds an inlier there."""
    robust = _robust_target(ctx)
    outs: list[Outcome] = []
    score: list[float] = []
    for out in itertools.takewhile(lambda o: o.status == FOUND, more):
        outs.append(out)
        score.append(float(screen_robustness(ctx, x, [out.rules], res.target, key)[0]))
        if score[-1] >= robust:
            break
    order = np.argsort(-np.array(score), kind="stable")[:ctx.options.widen]
    return [outs[k] for k in order.tolist()]


def rule_info(ctx: RuleContext) -> dict[str, Any]:
    f = ctx.table.forest
    return {"rule_forest": {"trees": f.n_trees, "leaves": ctx.table.n_leaves, "source": dict(f.schema.source)},
            "training_rows": int(ctx.X_raw.shape[0]), "pi": ctx.options.pi, "pi_c": ctx.options.pi_c,
            "k": ctx.options.k, "k_max": ctx.options.k_max, "fallback": ctx.options.fallback,
            "min_cell_rows": ctx.options.min_cell_rows, "robust_search": ctx.options.robust_search,
            "seed": ctx.options.seed}


__all__ = ["local_rules", "rule_info"]
