"""One rule query, local or regional: divergent set, candidate boxes, merge, rules.

The query is described by which leaves its fixed part allows (bits per
feature, :mod:`estimators`) and by the actionable space. A local query fixes
the case's values; a regional query fixes the region's intervals. Everything
after that is shared.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any, Callable, Iterator

import numpy as np
import numpy.typing as npt

from lumber.ir import Target

from .actionable import ActionSpace
from .boxes import ScoredBox, candidate_boxes, compress, in_boxes, merge_boxes, unique_rows, weighted_share
from .context import RuleContext
from .divergent import SearchLog, candidate_features, search_divergent
from .cells import Routes
from .estimators import feature_bits
from .results import FOUND, NO_DIVERGENT_SET, NO_RULE, Interval, Rule, SearchInfo

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]
BitArray = npt.NDArray[np.uint64]
BoolArray = npt.NDArray[np.bool_]

MAX_POINTS = 2048
"""Rows scored per feature set of a local query for plausible counterfactual points (highest weight first)."""

MAX_CASES = 32
"""Region cases (training rows in the region, a fixed random subset) scored per feature set."""

MAX_PAIRS = 8192
"""(case, value) counterfactual points scored per feature set of a regional query."""


@dataclass(frozen=True)
class Outcome:
    status: str
    message: str
    features: IntArray
    cdp: float
    reached_pi: bool
    rules: tuple[Rule, ...]
    search: SearchInfo | None
    plausible: bool | None = None
    """Some rule's box holds a training value whose counterfactual point is an inlier reaching the
    target (for a region: for some of its cases; None: not known, e.g. no inlier score)."""


@dataclass(frozen=True)
class Query:
    """The fixed part of a query as routes through the rule forest, and the candidate features' bits."""

    candidates: IntArray
    bits: BitArray
    route_fixed: Routes
    """Per internal node of the rule forest: where the fixed part goes (a point one way; a region's
    interval one way or both)."""
    route_action: Routes
    """Per internal node: where a resampled feature goes (its actionable interval; free: both ways)."""
    action: ActionSpace
    key: int
    point: FloatArray | None = None
    """A local query's case (1-D) or a regional query's cases (2-D: the region's training rows) as
    the explained model reads them: rules then prefer boxes holding plausible counterfactual points
    (a case with S set to a training row's values)."""

    memo: dict[Any, Any] = field(default_factory=dict, compare=False, repr=False)
    """Per (context, feature set): weights, weighted values and plausible values (:func:`set_values`,
    :func:`plausible_set`): the search, rule building and pruning ask for the same sets again."""

    @property
    def regional(self) -> bool:
        return self.point is not None and np.ndim(self.point) == 2


def make_query(ctx: RuleContext, action: ActionSpace, route_fixed: Routes, key: int,
               point: FloatArray | None = None, k: int | None = None) -> Query:
    """Pick the candidate features (``k``, default ``options.k``); ``route_fixed`` is the fixed part
    (``ctx.cells.point_routes`` of a case, or ``interval_routes`` of a region)."""
    score = ctx.importance if ctx.options.rank == "impurity" else None
    cand = candidate_features(ctx.table, action.movable, ctx.options.k if k is None else k, score)
    bits = feature_bits(ctx.table.n_features, cand)
    route_action = ctx.cells.interval_routes(action.lo[None, :], action.hi[None, :])[0]
    return Query(cand, bits, np.asarray(route_fixed, dtype=np.int8), route_action, action, key, point)


def subset_routes(ctx: RuleContext, q: Query, masks: BitArray) -> Routes:
    """``(m, V)``: routes when the features of ``masks[m]`` are resampled (actionable interval) and
    the rest stay fixed."""
    fb = q.bits[ctx.cells.feature]
    inm = (masks[:, None] & fb[None, :]) != 0
    return np.where(inm, q.route_action[None, :], q.route_fixed[None, :]).astype(np.int8)  # type: ignore


def subset_cdp(ctx: RuleContext, q: Query, target: Target, masks: BitArray) -> FloatArray:
    """``CDP`` of every subset mask for the query (the Projected Forest's cells, :mod:`cells`)."""
    out = np.empty(masks.shape[0])
    step = 64
    for s in range(0, masks.shape[0], step):
        out[s:s + step] = ctx.estimate(subset_routes(ctx, q, masks[s:s + step]), target)
    return out


def set_weights(ctx: RuleContext, q: Query, S: IntArray) -> FloatArray:
    """Projected Forest weights of the training rows when S is resampled (the rest fixed)."""
    mask = np.bitwise_or.reduce(q.bits[S]).astype(np.uint64) if S.size else np.uint64(0)
    return ctx.cells.weights(subset_routes(ctx, q, np.array([mask], dtype=np.uint64))[0])


MEMO_SETS = 256
"""Feature sets remembered per query (``Query.memo`` is cleared when it would grow past this)."""


def _memo(q: Query, key: Any, make: Callable[[], Any]) -> Any:
    if key not in q.memo:
        if len(q.memo) >= MEMO_SETS:
            q.memo.clear()
        got = make()
        for a in got if isinstance(got, tuple) else (got,):
            if isinstance(a, np.ndarray):
                a.flags.writeable = False  # shared by every caller
        q.memo[key] = got
    return q.memo[key]


def set_values(ctx: RuleContext, q: Query, S: IntArray) -> tuple[FloatArray, FloatArray, FloatArray]:
    """Projected Forest weights of the training rows when S is resampled (:func:`set_weights`), and
    the distinct values over S (as the rule forest reads them) of the weighted rows with their
    summed weights (:func:`boxes.compress`); cached per query and set."""
    w = query_weights(ctx, q, S)

    def make() -> tuple[FloatArray, FloatArray]:
        rows = np.flatnonzero(w > 0)
        return compress(ctx.table.X[np.ix_(rows, S)], w[rows])
    vals, wr = _memo(q, (ctx, "values", tuple(S.tolist())), make)
    return w, vals, wr


def query_weights(ctx: RuleContext, q: Query, S: IntArray) -> FloatArray:
    """:func:`set_weights`, cached per query and set."""
    return _memo(q, (ctx, "weights", tuple(S.tolist())), lambda: set_weights(ctx, q, S))  # type: ignore[no-any-return]


def plausible_set(ctx: RuleContext, q: Query, target: Target, S: IntArray,
                  w: FloatArray) -> tuple[FloatArray, FloatArray] | None:
    """:func:`plausible_values` of S with its weights ``w`` (those of :func:`set_values`), cached per
    query, target and set."""
    return _memo(q, (ctx, "plausible", target.key, tuple(S.tolist())),  # type: ignore[no-any-return]
                 lambda: plausible_values(ctx, q, target, S, w))


def box_routes(ctx: RuleContext, q: Query, S: IntArray, lo: FloatArray, hi: FloatArray) -> Routes:
    """``(b, V)``: routes with S in the box ``lo[b] < x_S <= hi[b]`` and the rest fixed."""
    d = ctx.table.n_features
    L = np.full((lo.shape[0], d), -np.inf)
    H = np.full((lo.shape[0], d), np.inf)
    L[:, S] = lo
    H[:, S] = hi
    on = np.flatnonzero(np.isin(ctx.cells.feature, S))  # only the splits on S move
    out = np.repeat(q.route_fixed[None, :], lo.shape[0], axis=0)
    out[:, on] = ctx.cells.interval_routes(L, H, nodes=on)
    return out


def box_crp(ctx: RuleContext, q: Query, target: Target, S: IntArray, lo: FloatArray,
            hi: FloatArray) -> FloatArray:
    """``CRP`` of each box over S for the query (Regional RF with the paper's cells)."""
    out = np.empty(lo.shape[0])
    step = 64
    for s in range(0, lo.shape[0], step):
        out[s:s + step] = ctx.estimate(box_routes(ctx, q, S, lo[s:s + step], hi[s:s + step]), target)
    return out


def find_rules(ctx: RuleContext, target: Target, q: Query, exclude: FloatArray | None = None) -> Outcome:
    """The first feature set (in search order) that gives a rule reaching ``pi_c``, or why none does."""
    return next(rule_outcomes(ctx, target, q, exclude))


def search_rules(ctx: RuleContext, target: Target, query: Callable[[int | None], Query],
                 exclude: FloatArray | None = None) -> tuple[Outcome, Iterator[Outcome]]:
    """The first outcome over the K most-used features and the generator of further ones; when
    that finds no rule, one second pass over the ``options.k_max`` most-used features.

    With many correlated features (breast cancer: 30), the features outside the K
    candidates stay fixed at the case's values and keep enough trees on the case's
    side that no box over <= K features reaches ``pi_c``; letting more features move
    (sampled subsets once a size has more than ``max_subsets``, ``max_sets_wide``
    sets tried) finds one. The second pass is reported in the outcome's message.
    """
    opt = ctx.options
    q = query(None)
    gen = rule_outcomes(ctx, target, q, exclude)
    out = next(gen)
    if out.status == FOUND or opt.k_max <= opt.k:
        return out, gen
    q2 = query(opt.k_max)
    if q2.candidates.size <= q.candidates.size:
        return out, gen
    gen2 = rule_outcomes(ctx, target, q2, exclude, max_sets=opt.max_sets_wide)
    out2 = next(gen2)
    if out2.status != FOUND:
        return replace(out, message=out.message + f"; nor over the {q2.candidates.size} most-used features "
                       f"({opt.max_sets_wide} sets tried): {out2.message}"), gen2
    note = (f"; no rule over the {q.candidates.size} most-used features, so the search moved on to the "
            f"{q2.candidates.size} most-used")
    first = replace(out2, message=out2.message + note)

    def chain() -> Iterator[Outcome]:
        for o in gen2:
            yield replace(o, message=o.message + note)
    return first, chain()


def rule_outcomes(ctx: RuleContext, target: Target, q: Query, exclude: FloatArray | None = None,
                  max_sets: int | None = None) -> Iterator[Outcome]:
    """Feature sets from the divergent search, tried in order; yields an outcome for each set that
    gives rules (at most ``max_sets`` sets are tried), or a single failure outcome when none does.

    ``exclude`` is the case's own point (as the rule forest reads it): a local
    rule must prescribe a change, so no rule box may contain the case's values on S.
    """
    opt = ctx.options
    tab = ctx.table
    names = ctx.names
    if q.candidates.size == 0:
        yield Outcome(NO_DIVERGENT_SET, "no feature may move: every candidate is immutable, unused by the "
                      "rule forest or has no room left under the constraints", q.candidates, 0.0, False, (), None)
        return
    max_size = ctx.constraints.max_changes if ctx.constraints is not None else None
    log = SearchLog()
    attempts = search_divergent(tab, lambda masks: subset_cdp(ctx, q, target, masks), q.candidates, log, pi=opt.pi,
                                max_size=max_size, search=opt.search, max_subsets=opt.max_subsets,
                                strict=opt.strict, per_size=1 + opt.widen_sets if opt.widen else 1,
                                fallback=opt.fallback, fallback_max_size=-(-tab.n_features // 2),
                                rng=np.random.default_rng([opt.seed, q.key]))
    tried = 0
    budget = opt.max_sets if max_sets is None else max_sets
    # until a set gives rules: up to ``budget`` sets reaching pi and ``budget`` below it (divergent sets that
    # rest on a cell of a row or two often have no box, and must not use up the sets below pi); after it,
    # ``widen_sets`` more of any kind
    n_div = n_below = 0
    limit: int | None = None
    best_crp = -1.0
    any_divergent = False
    found = False
    for att in attempts:
        if limit is not None:
            if tried >= limit:
                break
        elif att.divergent:
            if n_div >= budget:
                continue
            n_div += 1
        else:
            if n_below >= budget:
                break
            n_below += 1
        tried += 1
        any_divergent |= att.divergent
        rules, crp = _rules_on(ctx, target, q, att.features, exclude)
        best_crp = max(best_crp, crp)
        if rules:
            if not found:
                limit = tried + (opt.widen_sets if opt.widen else 0)
            found = True
            info = _info(ctx, q, log, tried)
            used = np.array(sorted({iv.index for r in rules for iv in r.intervals}), dtype=np.int64)
            Snames = ", ".join(names[j] for j in used)
            msg = f"{len(rules)} rule(s) over {{{Snames}}}"
            if not att.divergent and any_divergent:
                msg += (f"; the sets reaching pi={opt.pi:g} give no box with probability >= pi_c={opt.pi_c:g}, "
                        f"so the rules use the best set below pi that has one (CDP {att.cdp:.3f})")
            elif not att.divergent:
                msg += (f"; no feature set reaches pi={opt.pi:g} (best CDP {max(log.best_by_size):.3f}), "
                        f"so the rules use the best set that has one (CDP {att.cdp:.3f})")
            cdp_used = att.cdp
            if used.size < att.features.size:
                msg += (f"; {{{', '.join(names[j] for j in att.features if j not in used)}}} left as they are "
                        "(the rules hold with them fixed)")
                umask = np.bitwise_or.reduce(q.bits[used]).astype(np.uint64)
                cdp_used = float(subset_cdp(ctx, q, target, np.array([umask], dtype=np.uint64))[0])
            known = [r.inliers for r in rules if r.inliers is not None]
            plausible = any(v > 0 for v in known) if known else None
            yield Outcome(FOUND, msg, used, cdp_used, cdp_used >= opt.pi, tuple(rules), info, plausible)
    if found:
        return
    info = _info(ctx, q, log, tried)
    best = ", ".join(names[j] for j in log.best_features)
    no_pi = (f"no set of at most {len(log.best_by_size)} features reaches pi={opt.pi:g} "
             f"(best CDP {max(log.best_by_size, default=0.0):.3f} with {{{best}}})")
    if tried == 0:
        yield Outcome(NO_DIVERGENT_SET, no_pi, log.best_features, max(log.best_by_size, default=0.0), False, (), info)
        return
    msg = (f"no rule reaches pi_c={opt.pi_c:g}: {tried} feature set(s) tried"
           + (f", best box CRP {best_crp:.3f}" if best_crp >= 0 else ", no candidate box")
           + ("" if any_divergent else f"; and {no_pi}"))
    yield Outcome(NO_RULE, msg, log.best_features, max(log.best_by_size, default=0.0), any_divergent, (), info)


def _info(ctx: RuleContext, q: Query, log: SearchLog, tried: int) -> SearchInfo:
    names = ctx.names
    return SearchInfo(tuple(names[j] for j in q.candidates), log.evaluated, log.sampled, tuple(log.best_by_size),
                      tried)


def _rules_on(ctx: RuleContext, target: Target, q: Query, S: IntArray,
              exclude: FloatArray | None) -> tuple[list[Rule], float]:
    """Disjoint rule boxes over S reaching ``pi_c`` (most plausible first), and the best CRP seen."""
    opt = ctx.options
    tab = ctx.table
    act = q.action
    w = query_weights(ctx, q, S)
    lo, hi = candidate_boxes(tab, S, w, ctx.hit(target), act.lo, act.hi, max_rows=opt.max_candidates)
    allowed = _allowed(act.lo[S], act.hi[S], None if exclude is None else exclude[S])
    if lo.shape[0]:
        keep = allowed(lo, hi)
        lo, hi = lo[keep], hi[keep]
    if lo.shape[0] == 0:
        return [], -1.0
    crp = box_crp(ctx, q, target, S, lo, hi)
    best = float(crp.max())
    ok = crp >= opt.pi_c
    if not ok.any():
        return [], best
    _, vals, wr = set_values(ctx, q, S)
    lo, hi, crp = lo[ok], hi[ok], crp[ok]
    plaus = weighted_share(vals, wr, lo, hi)
    good = plausible_set(ctx, q, target, S, w)
    prefer = (plausible_rank(q, weighted_share(good[0], good[1], lo, hi), plaus) if good is not None
              else np.zeros(lo.shape[0]))
    if lo.shape[0] > opt.max_candidates:
        top = np.lexsort((-crp, -plaus, -prefer))[: opt.max_candidates]
        lo, hi, crp, plaus, prefer = lo[top], hi[top], crp[top], plaus[top], prefer[top]
    merged = merge_boxes(
        lo, hi, crp, plaus, pi_c=opt.pi_c, max_rules=opt.max_rules, allowed=allowed, prefer=prefer,
        crp_of=lambda a, b: box_crp(ctx, q, target, S, a, b),
        plaus_of=lambda a, b: weighted_share(vals, wr, a, b))
    feats = ctx.model.schema.features
    rules = []
    for m in merged:
        keep, crp_m, plaus_m, inl = _prune(ctx, q, target, S, m, act.lo[S], act.hi[S], good)
        Sk = S[keep]
        support = float(in_boxes(tab.X[:, Sk], m.lo[None, keep], m.hi[None, keep])[0].mean())
        ivs = tuple(Interval(feats[j], int(j), float(m.lo[k]), float(m.hi[k]), ctx.display)
                    for k, j in zip(np.flatnonzero(keep), Sk))
        rules.append(Rule(ivs, crp_m, plaus_m, support, inl))
    if good is not None:  # rules holding plausible points first (stable: most plausible first otherwise)
        rules.sort(key=lambda r: -float(plausible_rank(q, np.array([r.inliers or 0.0]),
                                                       np.array([r.plausibility]))[0]))
    return rules, best


def plausible_rank(q: Query, inliers: FloatArray, plaus: FloatArray) -> FloatArray:
    """How much a box is preferred for its plausible counterfactual points (higher first).

    Local: 1 when the box holds any (annealing can then return an inlier), else 0.
    Regional: the share of the box's (case, value) points that are plausible, since a
    box is used by every case of the region, not just one.
    """
    if not q.regional:
        return (inliers > 0).astype(np.float64)  # type: ignore[no-any-return]
    return np.divide(inliers, plaus, out=np.zeros_like(inliers), where=plaus > 0)  # type: ignore[no-any-return]


def plausible_values(ctx: RuleContext, q: Query, target: Target, S: IntArray,
                     w: FloatArray) -> tuple[FloatArray, FloatArray] | None:
    """Values over S (as the rule forest reads them) of the weighted training rows whose counterfactual
    point -- the local case with S set to the row's values -- is an inlier that reaches the target,
    with their weights; None without an inlier score or a case.

    This is what annealing inside a box can find among row-wise training values: a box holding
    none of them yields an outlier sample, however long the chain runs. At most
    ``MAX_POINTS`` rows (highest weight first) are scored.

    Regional query: every value is tried with each of (at most ``MAX_CASES``) region cases
    (``MAX_PAIRS`` points at most: the distinct values of highest total weight), and a value's
    weight is scaled by the share of cases for which its point is plausible, so a box's
    weighted sum is its share of plausible (case, value) points.
    """
    if ctx.score is None or q.point is None or S.size == 0:
        return None
    cases = scored_cases(ctx, q)
    m = cases.shape[0]
    rows = np.flatnonzero(w > 0)
    if m == 1 and rows.size > MAX_POINTS:  # local: the rows of highest weight
        rows = np.sort(rows[np.argsort(-w[rows], kind="stable")[:MAX_POINTS]])
    if rows.size == 0 or m == 0:
        return np.zeros((0, S.size)), np.zeros(0)
    uniq, inv = unique_rows(ctx.X_raw[np.ix_(rows, S)])
    n_vals = MAX_POINTS if m == 1 else max(1, min(MAX_POINTS, MAX_PAIRS // m))
    share = np.zeros(uniq.shape[0])
    top = np.arange(uniq.shape[0])
    if top.size > n_vals:  # the values of highest total weight; the others count as not plausible
        top = np.sort(np.argsort(-np.bincount(inv, weights=w[rows]), kind="stable")[:n_vals])
    share[top] = plausible_pairs(ctx, target, cases, S, uniq[top]).mean(axis=1)
    share = share[inv]
    sel = share > 0
    return compress(ctx.table.X[np.ix_(rows[sel], S)], w[rows[sel]] * share[sel])


def scored_cases(ctx: RuleContext, q: Query) -> FloatArray:
    """The query's cases whose counterfactual points are scored (a regional query: a fixed
    random subset of at most ``MAX_CASES`` of the region's rows)."""
    cases = np.atleast_2d(np.asarray(q.point, dtype=np.float64))
    if cases.shape[0] > MAX_CASES:
        pick = np.random.default_rng([ctx.options.seed, q.key, 11]).choice(cases.shape[0], MAX_CASES, replace=False)
        cases = cases[np.sort(pick)]
    return cases


def plausible_pairs(ctx: RuleContext, target: Target, cases: FloatArray, S: IntArray,
                    values: FloatArray) -> BoolArray:
    """``(value, case)``: the case with S set to the value (model input space) is an inlier that
    reaches the target (requires ``ctx.score``)."""
    assert ctx.score is not None
    m = cases.shape[0]
    P = np.tile(cases, (values.shape[0], 1))  # value-major: case c of value u at u * m + c
    P[:, S] = np.repeat(values, m, axis=0)
    score, dec = ctx.score_and_decide(P)
    ok = (score >= 0) & target.hit(dec)
    return ok.reshape(values.shape[0], m)  # type: ignore[no-any-return]


def case_share(ctx: RuleContext, q: Query, target: Target, rules: tuple[Rule, ...]) -> float | None:
    """Share of the query's scored cases for which some rule's box holds a training row whose values
    on the rule's features give an inlier reaching the target (None without a score or a case).

    This is what sampling can reach for each case (it anneals over every rule's training
    values): a regional rule set is more plausible when it serves more of its cases.
    """
    if ctx.score is None or q.point is None:
        return None
    cases = scored_cases(ctx, q)
    m = cases.shape[0]
    if m == 0:
        return None
    served = np.zeros(m, dtype=bool)
    rng = np.random.default_rng([ctx.options.seed, q.key, 13])
    for r in rules:
        idx = np.array([iv.index for iv in r.intervals], dtype=np.int64)
        rows = np.flatnonzero(in_boxes(ctx.table.X[:, idx], r.lo[None], r.hi[None])[0])
        if rows.size == 0:
            continue
        uniq, _ = unique_rows(ctx.X_raw[np.ix_(rows, idx)])
        n_vals = max(1, MAX_PAIRS // m)
        if uniq.shape[0] > n_vals:
            uniq = uniq[np.sort(rng.choice(uniq.shape[0], n_vals, replace=False))]
        served |= plausible_pairs(ctx, target, cases, idx, uniq).any(axis=0)
        if served.all():
            break
    return float(served.mean())


def _prune(ctx: RuleContext, q: Query, target: Target, S: IntArray, box: ScoredBox, alo: FloatArray, ahi: FloatArray,
           good: tuple[FloatArray, FloatArray] | None) -> tuple[BoolArray, float, float, float | None]:
    """Drop the features a rule leaves unrestricted when keeping them fixed still reaches ``pi_c``.

    A box may span a feature's whole actionable range ("any value"); the rule is
    then clearer and sparser with that feature left as it is, provided the
    probability, re-estimated with the feature fixed, stays at ``pi_c`` or above,
    and the box does not lose its last plausible counterfactual point (``good``,
    see :func:`plausible_values`; for a region: its share of plausible points does not
    drop): fixing the feature may be what makes them outliers.
    Returns the kept features, CRP, plausibility and inlier share.
    """
    keep = np.ones(S.size, dtype=bool)
    crp, plaus = box.crp, box.plausibility
    inl = None if good is None else float(weighted_share(good[0], good[1], box.lo[None], box.hi[None])[0])
    rank = None if inl is None else float(plausible_rank(q, np.array([inl]), np.array([plaus]))[0])
    free = np.flatnonzero((box.lo <= alo) & (box.hi >= ahi))
    for k in free:
        trial = keep.copy()
        trial[k] = False
        if not trial.any():
            break
        c = float(box_crp(ctx, q, target, S[trial], box.lo[None, trial], box.hi[None, trial])[0])
        if c < ctx.options.pi_c:
            continue
        w, vals, wr = set_values(ctx, q, S[trial])
        plaus_t = float(weighted_share(vals, wr, box.lo[None, trial], box.hi[None, trial])[0])
        inl_t = rank_t = None
        if good is not None:
            g = plausible_set(ctx, q, target, S[trial], w)
            assert g is not None
            inl_t = float(weighted_share(g[0], g[1], box.lo[None, trial], box.hi[None, trial])[0])
            rank_t = float(plausible_rank(q, np.array([inl_t]), np.array([plaus_t]))[0])
            if rank is not None and rank_t < rank:
                continue
        keep, crp, inl, plaus, rank = trial, c, inl_t, plaus_t, rank_t
    return keep, crp, plaus, inl


def _allowed(alo: FloatArray, ahi: FloatArray,
             point: FloatArray | None) -> Callable[[FloatArray, FloatArray], BoolArray]:
    """Boxes a rule may be: not the whole actionable space, and not holding the case's own values."""
    def ok(lo: FloatArray, hi: FloatArray) -> BoolArray:
        trivial = np.all((lo <= alo[None, :]) & (hi >= ahi[None, :]), axis=1)
        if point is None:
            return ~trivial  # type: ignore[no-any-return]
        with np.errstate(invalid="ignore"):
            holds = np.all((point[None, :] > lo) & (point[None, :] <= hi), axis=1)
        return ~trivial & ~holds  # type: ignore[no-any-return]
    return ok


def plausible_alternatives(more: Iterator[Outcome], limit: int) -> Iterator[Outcome]:
    """The next found feature sets of a search whose rules may hold a plausible point (scored
    or not), at most ``limit``, pulled lazily: the search runs no further than asked."""
    taken = 0
    while taken < limit:
        out = next(more, None)
        if out is None or out.status != FOUND:
            return
        if out.plausible is False:
            continue
        taken += 1
        yield out


__all__ = ["MAX_CASES", "MAX_PAIRS", "MAX_POINTS", "Outcome", "Query", "box_crp", "box_routes", "case_share",
           "find_rules", "make_query", "plausible_alternatives", "plausible_pairs", "plausible_rank", "plausible_set",
           "plausible_values", "query_weights", "rule_outcomes", "scored_cases", "search_rules", "set_values",
           "set_weights", "subset_cdp", "subset_routes"]
