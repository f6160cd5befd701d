"""The most robust counterfactual point of any admissible box: recourse that survives imprecise execution.

The sampler (:mod:`recourse`) looks for robust points inside the rules of a few feature sets: the
divergent set's merged boxes, then the most promising further sets. On hard targets that leaves
robustness on the table (the diabetes regression, target [200, 250]: 0.93 of noisy copies at
sigma^2 = 0.01, where the paper reports 0.96 on its Diabetes). This search is the exhaustive version,
opt-in (``RuleOptions.robust_search``) because it costs seconds per case: every feature set over the
case's K candidates (the highest-CDP ones within ``SET_BUDGET`` on large data), every admissible box of
each -- the merged rules and each candidate box (a leaf or forest cell of a target row) whose CRP
reaches ``pi_c`` on its own -- random training-value points in each box ranked by their share of noisy
copies keeping the target, then a coordinate search (:func:`recourse.polish`) from the best points of
the best boxes, and the winner re-scored on fresh copies. Every point it returns lies in a box that is a
local counterfactual rule by the paper's definition (CRP >= pi_c with the other features fixed); the box
is reported as the case's rule.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, replace

import numpy as np
import numpy.typing as npt

from lumber.ir import Target

from .boxes import candidate_boxes, in_boxes, weighted_share
from .context import RuleContext
from .core import Query, _allowed, _rules_on, box_crp, query_weights, set_values, subset_cdp
from .recourse import POLISH_DRAWS, POLISH_SIGMA, _job, best_random_points, noisy_keep, polish
from .results import Interval, Rule

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]

SEARCH_POINTS = 4000
"""Random points per admissible box."""
MAX_BOXES = 512
"""Boxes searched per case, highest CRP first when there are more (the diabetes regression has about 56 per
case; adult thousands over its 15 feature sets, each box costing a value pool over 34,000 rows)."""
POINT_BUDGET, MIN_POINTS = 1 << 18, 64
"""Random points per case over all boxes (each box gets at least ``MIN_POINTS``): the diabetes regression's
56 boxes per case get the full ``SEARCH_POINTS``; adult's hundreds of boxes share the budget."""
SEARCH_DRAWS, SEARCH_TOP, SEARCH_CHECK = 64, 10, 400
"""Each box's points are ranked on ``SEARCH_DRAWS`` noisy copies; its ``SEARCH_TOP`` best re-scored on
``SEARCH_CHECK`` fresh ones."""
POLISH_BOXES, POLISH_STARTS = 24, 5
"""The coordinate search starts from the ``POLISH_STARTS`` best points of each of the ``POLISH_BOXES``
best boxes. Fewer points or starts leave the diabetes regression's chosen points below the 0.95 aimed at
(on 2,000 fresh copies, ``bench/rules.py --datasets diabetes --box-ceiling``), and so does searching the
merged rules alone: single candidate boxes hold some of the most robust points."""
SEARCH_BELOW = 0.99
"""Local rules search a case when its sample's robustness report (200 copies at sigma^2 = 0.01) is below
this: the report is an estimate, and a case reported at 0.95-0.98 often has a box that does better
(on the diabetes regression, searching only the cases below 0.95 leaves the mean below 0.95)."""
SET_BUDGET = 1 << 19
"""Feature sets visited per case times training rows: every set of the K = 10 candidates on the diabetes
regression (331 rows) and breast cancer (426); on adult (34,000 rows) the 15 of highest CDP, where each
rule construction takes about a second."""
POLISH_CHECK = 2000
"""Fresh noisy copies that rank the polished points (with 400, the pick among about 120 was often not the
best: the winner's curse)."""
FRESH_DRAWS = 2000
"""Fresh noisy copies that score the chosen point (the search's own shares are biased up by selection)."""


@dataclass(frozen=True)
class RobustPoint:
    """The search's answer for one case."""

    x: FloatArray
    rule: Rule
    """The admissible box the point was found in (its features are the point's S)."""
    share: float
    """Share of ``FRESH_DRAWS`` fresh noisy copies (sigma^2 = 0.01) keeping the target."""
    random_best: float
    """The best random point's share (``SEARCH_CHECK`` copies), before the coordinate search."""
    polished: float
    """The best share the coordinate search reached on its own copies (biased up)."""
    boxes: int
    """Admissible boxes searched (at most ``MAX_BOXES``)."""
    feature_sets: int


def feature_sets(ctx: RuleContext, q: Query, target: Target, max_size: int | None) -> list[IntArray]:
    """Subsets of the query's candidates (smallest first, at most ``max_subsets``), the
    ``SET_BUDGET // training rows`` of highest CDP when there are more: each costs a rule construction,
    whose time grows with the training rows."""
    cand = q.candidates.tolist()
    top = len(cand) if max_size is None else min(max_size, len(cand))
    sets = [np.array(S, dtype=np.int64) for s in range(1, top + 1) for S in itertools.combinations(sorted(cand), s)]
    sets = sets[:ctx.options.max_subsets]
    limit = max(1, SET_BUDGET // max(1, int(ctx.X_raw.shape[0])))
    if len(sets) <= limit:
        return sets
    masks = np.array([np.bitwise_or.reduce(q.bits[S]) for S in sets], dtype=np.uint64)
    cdp = subset_cdp(ctx, q, target, masks)
    keep = np.sort(np.argsort(-cdp, kind="stable")[:limit])
    return [sets[k] for k in keep.tolist()]


def admissible_boxes(ctx: RuleContext, q: Query, target: Target, S: IntArray,
                     exclude: FloatArray) -> list[Rule]:
    """The merged rules over S and every candidate box over S reaching ``pi_c`` on its own (allowed by the
    action space, not holding the case's own values)."""
    rules, _ = _rules_on(ctx, target, q, S, exclude)
    out = list(rules)
    lo, hi = candidate_boxes(ctx.table, S, query_weights(ctx, q, S), ctx.hit(target), q.action.lo, q.action.hi,
                             max_rows=ctx.options.max_candidates)
    if lo.shape[0]:
        keep = _allowed(q.action.lo[S], q.action.hi[S], exclude[S])(lo, hi)
        lo, hi = lo[keep], hi[keep]
    if lo.shape[0]:
        crp = box_crp(ctx, q, target, S, lo, hi)
        ok = crp >= ctx.options.pi_c
        if not ok.any():
            return out
        feats = ctx.model.schema.features
        for k in np.flatnonzero(ok).tolist():  # plausibility and support: only for the box that wins (described)
            ivs = tuple(Interval(feats[j], int(j), float(a), float(b), ctx.display) for j, a, b in zip(S, lo[k], hi[k]))
            out.append(Rule(ivs, float(crp[k]), float("nan"), float("nan")))
    return out


def described(ctx: RuleContext, q: Query, rule: Rule) -> Rule:
    """The rule with the plausibility and support a rule reports (a candidate box has them unset)."""
    if np.isfinite(rule.plausibility) and np.isfinite(rule.support):
        return rule
    S = np.array([iv.index for iv in rule.intervals], dtype=np.int64)
    lo = np.array([[iv.lo for iv in rule.intervals]])
    hi = np.array([[iv.hi for iv in rule.intervals]])
    _, vals, wr = set_values(ctx, q, S)
    plaus = float(weighted_share(vals, wr, lo, hi)[0])
    support = float(in_boxes(ctx.table.X[:, S], lo, hi)[0].mean())
    return replace(rule, plausibility=plaus, support=support)


def most_robust_point(ctx: RuleContext, x: FloatArray, q: Query, target: Target, key: int,
                      exclude: FloatArray) -> RobustPoint | None:
    """The most robust plausible point reaching the target inside any admissible box of the case (None:
    no box holds one). ``exclude`` is the case as the rule forest reads it."""
    x = np.asarray(x, dtype=np.float64)
    opt = ctx.options
    sigma = POLISH_SIGMA
    rng = np.random.default_rng([opt.seed, int(key), 59])
    max_size = ctx.constraints.max_changes if ctx.constraints is not None else None
    boxes: list[Rule] = []
    sets = feature_sets(ctx, q, target, max_size)
    for S in sets:
        boxes.extend(admissible_boxes(ctx, q, target, S, exclude))
    n_sets = len(sets)
    if len(boxes) > MAX_BOXES:  # the most probable first (stable: the sets' order on ties)
        order = np.argsort(-np.array([r.probability for r in boxes]), kind="stable")[:MAX_BOXES]
        boxes = [boxes[k] for k in np.sort(order).tolist()]
    best, best_x, best_rule = -1.0, None, None
    tops: list[tuple[float, int, FloatArray]] = []  # (best share, box, its best points)
    jobs = {}
    per_box = min(SEARCH_POINTS, max(MIN_POINTS, POINT_BUDGET // max(1, len(boxes))))
    for b, rule in enumerate(boxes):
        job = _job(ctx, x, rule, 0)
        if job is None:
            continue
        jobs[b] = job
        top, again = best_random_points(ctx, x, [job], target, rng, per_box, SEARCH_DRAWS, SEARCH_TOP, SEARCH_CHECK)
        if not again.size:
            continue
        if float(again.max()) > best:
            best, best_x, best_rule = float(again.max()), top[int(np.argmax(again))], rule
        tops.append((float(again.max()), b, top[np.argsort(-again, kind="stable")[:POLISH_STARTS]]))
    if best_x is None or best_rule is None:
        return None
    random_best, polished = best, -1.0  # the starts hold every box's best random point: they compete again
    tops.sort(key=lambda t: (-t[0], t[1]))
    for _, b, starts in tops[:POLISH_BOXES]:  # the same copies score every candidate of a box (common numbers)
        Q = polish(ctx, x, jobs[b], starts, target, rng, sigma, POLISH_DRAWS)
        again = noisy_keep(ctx, np.repeat(x[None, :], Q.shape[0], axis=0), Q, [target] * Q.shape[0], sigma,
                           POLISH_CHECK, rng)
        score = ctx.score(Q) if ctx.score is not None else np.zeros(Q.shape[0])
        ok = np.flatnonzero(target.hit(ctx.decide(Q)) & (np.asarray(score) >= 0))
        if ok.size and float(again[ok].max()) > polished:
            polished = float(again[ok].max())
            best_x, best_rule = Q[ok[int(np.argmax(again[ok]))]], boxes[b]
    if polished < 0:
        polished = random_best
    fresh = float(noisy_keep(ctx, x[None, :], best_x[None, :], [target], sigma, FRESH_DRAWS, rng)[0])
    return RobustPoint(best_x.copy(), described(ctx, q, best_rule), fresh, random_best, polished, len(boxes), n_sets)
