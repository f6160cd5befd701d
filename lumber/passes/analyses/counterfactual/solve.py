"""The driver: build the MILP, solve it, map the solution back, verify it, retry if needed.

Every returned point is checked against the target with the verifier (the
source library when the caller passes one, else ``Forest.evaluate``) and
against every constraint. If the model does not give the target there -- a
margin met only within the MIP tolerance, a float32 tie -- the MILP is built
again with a ten times larger margin, up to ``MARGINS``.

``time_limit`` bounds the whole query through one :class:`Deadline`: the warm
start may use half of what is left, the solver gets the rest after the model
is built; at the deadline the best verified point so far comes back as
``time_limit`` with its proven bound and gap, or ``no_solution`` if there is none.
"""

from __future__ import annotations

import math
from dataclasses import replace
from typing import Any, Callable, Sequence, TypeGuard

import numpy as np
import numpy.typing as npt

from lumber.ir import Constraints, FeatureKind, Forest, InputDataError, LinearRelation, Norm, Task
from lumber.ir.display import Display
from lumber.ir.domains import DomainKind, Domains, case_bounds, infer_domains
from lumber.ir.decision import resolve_target

from . import actionability
from .deadline import Clock, Deadline
from .heuristic import Candidates, improve, warm_start
from lumber.ir.constraints import parse_weights

from ..change_cost import ChangeCost
from .objective import CaseCost, feature_scales
from .problem import Problem, Query, build, change_pattern
from .result import CounterfactualResult
from .plausibility import BoxBound, leave_box
from .domain import CategoricalDomain, Domain, NumericDomain
from .solver import (INFEASIBLE, NO_SOLUTION, OPTIMAL, TIME_LIMIT, UNVERIFIED, Case, HighsSession, SolverOptions,
                     solve, solve_cases, solve_enumerated)
from .targets import forest_meets, target_specs

FloatArray = npt.NDArray[np.float64]
Verifier = Callable[[FloatArray], Any]

NO_CHANGE = "no change needed: the case already gets the target"

MARGINS = (1e-5, 1e-4, 1e-3, 1e-2)
"""Target margins tried in turn, relative to the largest leaf coefficient of each score row."""


def _weights(weights: Any, cons: Constraints | None, names: Sequence[str]) -> tuple[FloatArray, FloatArray]:
    down, up = parse_weights(weights, names)
    return (down, up) if cons is None else cons.costs(names, down, up)


def categorical_features(forests: Sequence[Forest]) -> npt.NDArray[np.bool_]:
    f0 = forests[0]
    cat = np.array([f.kind == FeatureKind.CATEGORICAL for f in f0.schema.features], dtype=bool)
    for f in forests:
        cat[np.unique(f.feature[f.is_categorical])] = True
    return cat


def category_codes(forests: Sequence[Forest], i: int, x0: float, reference: FloatArray | None) -> FloatArray:
    """The codes a categorical feature may take: the schema's categories, else every code the model or data shows."""
    feat = forests[0].schema.features[i]
    if feat.categories is not None:
        codes = np.arange(len(feat.categories), dtype=np.float64)
    else:
        parts = []
        for f in forests:
            nodes = np.flatnonzero((f.feature == i) & f.is_categorical)
            for nd in nodes:
                parts.append(f.categories_of(int(nd)).astype(np.float64))
            t = f.threshold[(f.feature == i) & ~f.is_categorical & (f.left >= 0)]
            parts += [np.floor(t), np.floor(t) + 1]
        if reference is not None:
            parts.append(np.trunc(np.asarray(reference, dtype=np.float64)[:, i]))
        codes = np.concatenate(parts) if parts else np.zeros(0)
    if np.isfinite(x0) and x0 >= 0:
        codes = np.append(codes, np.trunc(x0))
    codes = codes[np.isfinite(codes) & (codes >= 0)]
    return np.unique(codes)


def make_query(forest: Forest, x: Any, target: Any = None, constraints: Constraints | None = None, *,
               norm: str | Norm = "l1", scale: Any = None, weights: Any = None, reference: Any = None,
               isolation: tuple[Forest, float] | None = None, clip_to_reference: bool = False,
               domains: Domains | None = None) -> list[Query]:
    """One :class:`Query` per acceptable target (several when ``target`` is None on a multiclass model).

    ``domains`` (default: inferred from the schema, the constraints and ``reference``) puts every
    numeric feature on its grid (whole numbers, 0/1, multiples of a resolution) within its bounds,
    and keeps one-hot groups one-hot."""
    schema = forest.schema
    x0 = forest.prepare_input(np.asarray(x, dtype=np.float64).reshape(1, -1) if not hasattr(x, "iloc") else x)
    if x0.shape[0] != 1:
        raise InputDataError(f"one case at a time: got {x0.shape[0]} rows", "use lumber.counterfactual for batches")
    x0 = x0[0]
    cons = constraints
    if cons is not None:
        unknown = [r.feature for r in cons.rules if r.feature not in schema.feature_names]
        if unknown:
            raise InputDataError(f"constraints name unknown features: {', '.join(unknown)}",
                                 f"features: {', '.join(schema.feature_names[:12])}")
        if cons.norm is not None:
            norm = cons.norm
        if cons.scale is not None:
            scale = cons.scale
        if cons.target is not None:
            target = cons.target
    R = None if reference is None else forest.prepare_input(reference)
    forests = [forest] + ([isolation[0]] if isolation is not None else [])
    cat = categorical_features(forests)
    names = schema.feature_names
    down, up = _weights(weights, cons, names)
    scales = feature_scales(scale, R, names, cat, _used(forests))
    cost = CaseCost(ChangeCost(Norm.parse(norm), down, up, scales, cat), x0)
    if cons is not None:
        lo, hi = cons.bounds(names, x0)
    else:
        lo, hi = np.full(len(names), -np.inf), np.full(len(names), np.inf)
    if clip_to_reference and R is not None and len(R):
        with np.errstate(invalid="ignore"):
            lo = np.maximum(lo, np.fmin(np.nanmin(R, axis=0), x0))
            hi = np.minimum(hi, np.fmax(np.nanmax(R, axis=0), x0))
    allowed: dict[int, FloatArray] = {}
    if cons is not None:
        for r in cons.rules:
            if r.allowed is not None:
                allowed[names.index(r.feature)] = np.asarray(r.allowed, dtype=np.float64)
    if domains is None:
        domains = infer_domains(schema, cons, R, categorical=cat)
    elif len(domains) != len(names):
        raise InputDataError(f"domains describe {len(domains)} features; the model reads {len(names)}")
    for i, d in enumerate(domains.features):
        if not cat[i] and d.kind != DomainKind.CATEGORICAL:
            a, b = case_bounds(d, float(x0[i]))
            lo[i], hi[i] = max(lo[i], a), min(hi[i], b)
    cons = _with_onehot(cons, domains, names, x0)
    codes = {i: category_codes(forests, i, float(x0[i]), R) for i in np.flatnonzero(cat).tolist()}
    current = None
    if schema.task in (Task.BINARY, Task.MULTICLASS):
        current = float(schema.class_index(forest.evaluate(x0[None, :]))[0])
    specs = target_specs(resolve_target(forest, target, current, explainer="counterfactuals"))
    return [Query(forest, x0, s, cost, cons, lo, hi, allowed, cat, codes, isolation, domains) for s in specs]


def _with_onehot(cons: Constraints | None, domains: Domains, names: Sequence[str], x0: FloatArray
                 ) -> Constraints | None:
    """One-hot groups as relations ``sum of members == 1`` (for cases whose group is one-hot now)."""
    rels = []
    for g in domains.groups:
        idx = [list(names).index(m) for m in g.members if m in names]
        if idx and np.all(np.isin(x0[idx], (0.0, 1.0))) and float(x0[idx].sum()) == 1.0:
            rels.append(LinearRelation(tuple((names[i], 1.0) for i in idx), (), "==", 1.0))
    if not rels:
        return cons
    base = cons if cons is not None else Constraints()
    return replace(base, relations=tuple(base.relations) + tuple(rels))


def default_verifier(forest: Forest) -> Verifier:
    return lambda X: forest.schema.decide(forest.evaluate(X))


def solve_counterfactual(forest: Forest, x: Any, target: Any = None, constraints: Constraints | None = None, *,
                         norm: str | Norm = "l1", scale: Any = None, weights: Any = None, reference: Any = None,
                         isolation: tuple[Forest, float] | None = None, k: int = 1, time_limit: float = 60.0,
                         backend: str = "highs", presolve: bool | None = None, threads: int = 1,
                         mip_gap: float = 1e-6, use_warm_start: bool = True, verifier: Verifier | None = None,
                         clip_to_reference: bool = False, domains: Domains | None = None,
                         highs_options: Sequence[tuple[str, Any]] = (), clock: Clock | None = None,
                         race: int = 1) -> CounterfactualResult:
    """The cheapest change of ``x`` that makes ``forest`` predict ``target`` (see the package docstring).

    ``clock`` (default ``time.perf_counter``) is what ``time_limit`` is measured on. ``race=2`` solves
    every MILP twice at once on two threads with different HiGHS settings and keeps the first proven
    answer (``solver.RACE_VARIANTS``; with ``threads=1``)."""
    deadline = Deadline.after(time_limit, clock)
    t0 = deadline.clock()
    queries = make_query(forest, x, target, constraints, norm=norm, scale=scale, weights=weights,
                         reference=reference, isolation=isolation, clip_to_reference=clip_to_reference,
                         domains=domains)
    R = None if reference is None else forest.prepare_input(reference)
    verify = verifier or default_verifier(forest)
    # presolve=None keeps HiGHS's default (on): in bench/counterfactual.py (backends) neither setting
    # won consistently on these models, unlike the 200-tree case in FACTS.md where presolve dominated
    opts = SolverOptions(backend=backend, time_limit=time_limit, threads=threads, mip_rel_gap=mip_gap,
                         presolve=presolve, highs_options=tuple(highs_options), race=race)
    best: CounterfactualResult | None = None
    for q in queries:
        res = _solve_query(q, opts, verify, R if use_warm_start else None, use_warm_start, deadline)
        if k > 1 and res.found:
            res.alternatives = _diverse(q, res, k - 1, opts, verify, R if use_warm_start else None,
                                        use_warm_start, deadline)
        if best is None or _better(res, best):
            best = res
    assert best is not None
    best.total_seconds = deadline.clock() - t0
    shown = Display(forest, queries[0].domains)
    for r in [best, *best.alternatives]:
        r.display = shown
    return best


def _better(a: CounterfactualResult, b: CounterfactualResult) -> bool:
    if a.found != b.found:
        return a.found
    if a.found:
        return (a.verified, -a.cost) > (b.verified, -b.cost)
    return a.status == NO_SOLUTION and b.status == INFEASIBLE


def _base(q: Query, status: str, verify: Verifier, message: str = "") -> CounterfactualResult:
    orig = verify(q.x0[None, :])
    return CounterfactualResult(status=status, schema=q.forest.schema, x0=q.x0.copy(), x=None,
                                target=q.spec.describe(), norm=q.cost.norm.name.lower(),
                                original_prediction=_first(orig), message=message)


def _first(p: Any) -> Any:
    a = np.asarray(p).reshape(-1)
    return a[0].item() if isinstance(a[0], np.generic) else a[0]


def _finish(q: Query, res: CounterfactualResult, x: FloatArray, verify: Verifier) -> CounterfactualResult:
    pred = verify(x[None, :])
    res.x = x
    res.prediction = _first(pred)
    res.verified = bool(q.spec.satisfied(pred)[0])
    if q.isolation is not None:
        iso, delta = q.isolation
        if float(iso.evaluate(x[None, :])[0]) < delta - 1e-9:
            res.verified = False
            res.message = (res.message + "; " if res.message else "") + "the point is not plausible"
    res.violations = actionability.violations(q.constraints, q.names, q.x0, x)
    res.cost = float(q.cost.total(x[None, :])[0])
    return res


def _solve_query(q: Query, opts: SolverOptions, verify: Verifier, reference: FloatArray | None,
                 use_heuristic: bool, deadline: Deadline, nogoods: Sequence[FloatArray] = ()) -> CounterfactualResult:
    meets: Callable[[FloatArray], npt.NDArray[np.bool_]] = lambda X: forest_meets(q.forest, q.spec, X)
    if not nogoods and bool(meets(q.x0[None, :])[0]):  # the model and its source library both agree
        done = _finish(q, _base(q, OPTIMAL, verify), q.x0.copy(), verify)
        if done.verified and not done.violations:
            done.cost, done.objective, done.bound, done.gap = 0.0, 0.0, 0.0, 0.0
            done.message = NO_CHANGE
            return done
    starts: list[FloatArray] = []
    lb_rel = 0.0
    if q.isolation is not None and use_heuristic:
        rel = _plausible_relaxation(q, opts, verify, deadline.share(RELAXATION_SHARE), nogoods)
        if isinstance(rel, CounterfactualResult):
            return rel
        if rel is not None:
            starts, lb_rel = [rel[0]], rel[1]
    # the warm start may use half of the time left: the model building and the solve need the rest
    x_h = warm_start(q, meets, reference, nogoods=nogoods, deadline=deadline.share(0.5),
                     starts=starts) if use_heuristic else None
    c_h = float(q.cost.total(x_h[None, :])[0]) if x_h is not None else None
    if q.isolation is not None and x_h is not None and c_h is not None and CUT_ROUNDS > 0:
        cut = _cut_loop(q, opts, verify, x_h, c_h, deadline.share(CUT_SHARE), nogoods)
        if isinstance(cut, CounterfactualResult):
            return cut
        lb_rel = max(lb_rel, cut)
    res = _base(q, INFEASIBLE, verify)
    solve_secs = 0.0
    for attempt, eps in enumerate(MARGINS):
        if deadline.expired():  # (a later attempt keeps the earlier, unverified point)
            if attempt == 0:
                res.status, res.message = NO_SOLUTION, "time limit reached before solving: no point found"
            break
        prob = build(q, eps=eps, tie_eps=0.0 if attempt == 0 else eps, cost_bound=c_h, nogoods=nogoods,
                     deadline=deadline)
        remaining = deadline.remaining()
        _size(res, prob)
        res.attempts, res.epsilon = attempt + 1, eps
        if prob.infeasible:
            _clear(res)
            res.status, res.message = INFEASIBLE, prob.infeasible
            break
        if remaining <= 0 or prob.expired:
            if attempt == 0:
                res.status, res.message = NO_SOLUTION, "time limit reached while building the model: no point found"
            break
        start = prob.assignment(x_h) if x_h is not None else None
        run = replace(opts, time_limit=max(remaining, 0.01))
        if q.isolation is not None:
            run = replace(run, highs_options=PLAUSIBLE_FULL_OPTIONS + tuple(run.highs_options))
        enum = _discrete_cases(q, prob, c_h) if ENUMERATE and starts and start is not None and c_h else None
        cases = _flip_cases(q, prob, starts[0]) if FLIP_SPLIT and starts and enum is None else None
        if enum is not None:
            out = solve_enumerated(prob.model, run, start, *enum)
        elif cases:
            out = solve_cases(prob.model, run, start, cases, _probe_limit(run.time_limit))
        else:
            out = solve(prob.model, run, start)
        solve_secs += out.seconds
        res.status, res.gap, res.bound, res.objective = out.status, out.gap, q.cost.from_objective(out.bound) \
            if math.isfinite(out.bound) else out.bound, out.objective
        if out.x is None:
            _clear(res)
            res.message = {INFEASIBLE: f"no point reaches {q.spec.describe()} under the constraints",
                           NO_SOLUTION: "time limit reached before any point was found"}.get(out.status, out.message)
            break
        # polish: the solver's tolerances (about 1e-7) can leave a feature one grid step off its level
        x = prob.point(out.x)
        cands = Candidates(q, meets, nogoods)
        polished = improve(cands, x, deadline=deadline)
        if polished is not x and cands.exact(polished) and not any(
                np.array_equal(change_pattern(q, polished), pat) for pat in nogoods):
            x = polished
        _finish(q, res, x, verify)
        if res.verified and not res.violations:
            break
        res.message = f"margin {eps:g} did not verify; retrying with a larger margin"
    res.solve_seconds = solve_secs
    if res.found and res.status == TIME_LIMIT:
        _raise_bound(res, lb_rel)
        _proven_bound(res)
    dearer = res.found and c_h is not None and res.cost > c_h * (1 + 1e-9) + 1e-12
    if x_h is not None and (not res.found or not res.verified or dearer):
        # the solver could not confirm anything better than the heuristic point: report it, unproven
        fallback = _finish(q, _base(q, TIME_LIMIT, verify), x_h, verify)
        if fallback.verified:
            fallback.message = f"solver: {res.status} ({res.message}); returning the heuristic point"
            fallback.solve_seconds, fallback.attempts, fallback.epsilon = solve_secs, res.attempts, res.epsilon
            fallback.n_variables, fallback.n_binaries, fallback.n_rows, fallback.nnz = (
                res.n_variables, res.n_binaries, res.n_rows, res.nnz)
            fallback.bound, fallback.gap = res.bound, math.nan
            _raise_bound(fallback, lb_rel)
            _proven_bound(fallback)
            return fallback
    if res.found and not (res.verified and not res.violations):
        res.status = UNVERIFIED
        res.message = "the model does not give the target at the solver's point, even with the largest margin"
    elif res.status == OPTIMAL and res.found:
        res.message = ""
    return res


PLAUSIBLE_FULL_OPTIONS: tuple[tuple[str, object], ...] = (
    ("mip_allow_restart", False),
    ("mip_pscost_minreliable", 0),
)
"""HiGHS options (after ``solver.HIGHS_DEFAULTS``, before the caller's) for the full MILP of a query with an
isolation forest."""


FLIP_SPLIT = True
"""Branch first on the two-valued feature the plausible relaxation's optimum flips (:func:`_flip_cases`)."""
PROBE_SHARE = 0.05
"""Share of the solver's time the side without the warm start may take before the split is given up
(the whole model is then solved with the time left). The probes that decided took 0.5-1.0 s on credit;
row 55's did not decide, and at a tenth (3 s) the time it lost cost that query its proof (26 s whole)."""
PROBE_FLOOR = 1.0
"""Seconds a probe may take at least (up to a quarter of the time), so that short limits still split."""


def _probe_limit(seconds: float) -> float:
    return min(max(PROBE_SHARE * seconds, PROBE_FLOOR), 0.25 * seconds)


def _two_valued(d: Domain) -> TypeGuard[NumericDomain]:
    """A numeric feature with two levels and a single level column that only the trees read (a 0/1 flag, or
    one cut): the column is 0 or 1 in every solution that matters, so its two values are a complete split."""
    return (isinstance(d, NumericDomain) and d.levels.shape[0] == 2 and d.x_int_col < 0
            and not d.in_relation)


def _flip_cases(q: Query, prob: Problem, x_r: FloatArray) -> list[Case] | None:
    """The two sides of the costliest two-valued feature (a 0/1 flag) that the relaxation's optimum
    ``x_r`` changes, or None. Its single level column is 0 or 1 in every solution (the flows that read it
    are binary), so the two sides cover them all.

    On the credit Table 4 queries (RF 100 x 5, IF 100 x 32, l1) most of the LP relaxation's gap sits in
    such a flip: a payment-delay flag at 0.3-0.8 in the LP. HiGHS spends its root on cuts before it
    branches there. ``solver.solve_cases`` first probes the side that keeps the case's value, cut off
    at the warm start's cost (its LP was infeasible, in 0.05-0.13 s, on those rows). Then it solves the
    flipped side alone. A/B over the 20 queries, one core each, load 1-2, with a 3 s probe: median
    3.08 s against 3.72 s, 17 proven either way. Row 62 took 6.1 s instead of 16.9 s, row 56 4.8 s
    instead of 6.7 s, and row 174 2.6 s instead of 4.3 s. Row 37 took 24.2 s instead of 21.7 s, and row
    55 29.9 s instead of 26.5 s; on those two the flip is not where the gap is. With the 1.5 s probe
    (:data:`PROBE_SHARE`) two bench runs gave medians of 3.21 and 3.22 s (3.75 s before), with 17 of
    20 proven.
    """
    costs = q.cost.feature_costs(x_r[None, :])[0]
    pick: NumericDomain | None = None
    for d in prob.domains:
        if (_two_valued(d) and x_r[d.index] != q.x0[d.index]
                and (pick is None or costs[d.index] > costs[pick.index])):
            pick = d
    if pick is None:
        return None
    return [(pick.mu, np.array([v])) for v in (0.0, 1.0)]


ENUMERATE = True
"""Solve a plausible query case by case over its two-valued and categorical features (:func:`_discrete_cases`)."""
MAX_CASES = 64
"""More combinations than this below the warm start's cost: the query is solved whole (or split on one flag)."""


def _discrete_cases(q: Query, prob: Problem, cutoff: float) -> tuple[list[Case], FloatArray] | None:
    """Every combination of values of the two-valued and categorical features whose changes alone cost less
    than ``cutoff`` (the warm start's cost), with that cost as the combination's floor in objective units;
    None when there are none or more than :data:`MAX_CASES`.

    The cases cover every point cheaper than the warm start: the cost only grows with each feature's
    change, so a combination whose own changes reach ``cutoff`` holds no cheaper point. Each two-valued
    level column is declared integer (its two levels are the feature's only domain values, or the two
    cells of its one cut), so its two cases cover every solution.
    """
    feats: list[tuple[int, npt.NDArray[np.int64], list[FloatArray], FloatArray]] = []
    for d in prob.domains:
        if _two_valued(d):
            feats.append((d.index, d.mu, [np.zeros(1), np.ones(1)], d.levels.copy()))
        elif isinstance(d, CategoricalDomain) and d.codes.shape[0] > 1:
            n = d.codes.shape[0]  # (the case's own code keeps its value; x0_code is -1 when it has none)
            xs = np.where(np.arange(n) == d.x0_code, d.x0, d.codes.astype(np.float64))
            feats.append((d.index, d.nu, list(np.eye(n)), xs))
    if not feats:
        return None
    x = q.x0.copy()
    cost: Callable[[], float] = lambda: float(q.cost.total(x[None, :])[0])
    out: list[tuple[list[int], float]] = []

    def walk(f: int, picks: list[int]) -> bool:
        if f == len(feats):
            out.append((list(picks), cost()))
            return len(out) <= MAX_CASES
        i, _, _, xs = feats[f]
        for j in range(xs.shape[0]):
            x[i] = xs[j]
            if cost() < cutoff and not walk(f + 1, picks + [j]):
                return False
        x[i] = q.x0[i]
        return True

    if not walk(0, []) or not out:
        return None
    cols = np.concatenate([c for _, c, _, _ in feats])
    prob.model.set_integer(cols)  # (the one-hot columns of categories are integer already)
    cases = [(cols, np.concatenate([feats[f][2][j] for f, j in enumerate(picks)])) for picks, _ in out]
    floors = np.array([q.cost.to_objective(c) for _, c in out])
    return cases, floors


RELAXATION_OPTIONS: tuple[tuple[str, object], ...] = (("mip_pscost_minreliable", 0),)
"""HiGHS options (after ``solver.HIGHS_DEFAULTS``, before the caller's) for the plausible relaxation."""
RELAXATION_SHARE = 0.25
"""Share of the time left that the plausible relaxation (the query without the explained model) may use."""


def _plausible_relaxation(q: Query, opts: SolverOptions, verify: Verifier, deadline: Deadline,
                          nogoods: Sequence[FloatArray]) -> CounterfactualResult | tuple[FloatArray, float] | None:
    """The query without the explained model: only the isolation forest, the costs and the constraints.

    Its MILP is a third of the full one and solves in about a second on credit (RF 100 x 5, IF 100 x 32),
    where the full MILP's relaxation is weak: its optimum bounds the query's cost from below, is the
    query's optimum when the model already gives the target there (returned as the result), and
    otherwise starts the warm start's walk inside the plausible region (``heuristic.greedy``): on 8
    credit queries its point was at most 1.2% above the best known cost on 5 (below it on 2) and
    13-20% above on 3, where the plausible reference rows alone gave up to 60x the optimum.
    Returns None when it found no point in time.
    """
    prob = build(q, nogoods=nogoods, deadline=deadline, explained=False)
    if prob.infeasible or prob.expired or deadline.remaining() <= 0:
        return None
    out = solve(prob.model, replace(opts, time_limit=max(deadline.remaining(), 0.01),
                                    highs_options=RELAXATION_OPTIONS + tuple(opts.highs_options)))
    if out.x is None:
        return None
    x = prob.point(out.x)
    lb = q.cost.from_objective(out.bound) if out.status == OPTIMAL or math.isfinite(out.bound) else 0.0
    if out.status == OPTIMAL and bool(forest_meets(q.forest, q.spec, x[None, :])[0]):
        done = _finish(q, _base(q, OPTIMAL, verify), x, verify)
        if done.verified and not done.violations:
            _size(done, prob)
            done.objective, done.bound, done.gap, done.solve_seconds = out.objective, done.cost, 0.0, out.seconds
            return done
    return x, max(lb, 0.0) if math.isfinite(lb) else 0.0


CUT_SHARE = 0.2
"""Share of the time left that the cut loop may use before the full encoding takes over."""
CUT_ROUNDS = 0
"""Cut-loop solves at most before the full encoding (0: no cut loop). Off by default, as measured on
OCEAN's Table 4 credit queries (RF 100 x 5, IF 100 x 32, l1; bench/counterfactual.py --cut-rounds): the
optimum without the isolation forest was plausible on 1 query of 10 (proven in one solve, 2.8 s instead
of 4.2 s at load 10); on the others the loop crept while each solve cost about as much as the whole
full-encoding query: 0.0207 -> 0.0285 in 21 solves where the optimum is 0.0995, 0.127 -> 0.148 in 3
where the best known point costs 1.07 (the isolation forest alone bounds it by 0.78 in a second)."""


def _cut_loop(q: Query, opts: SolverOptions, verify: Verifier, x_h: FloatArray, c_h: float, deadline: Deadline,
              nogoods: Sequence[FloatArray]) -> CounterfactualResult | float:
    """The query without the isolation forest in the MILP, plausibility enforced by cuts.

    The MILP without the isolation forest (forest, domains, costs, constraints; a level at every
    isolation split) is a relaxation: its optimum, when plausible, is the query's optimum. When it is
    not, the row "leave this box" (:func:`plausibility.leave_box`: a box around the optimum that holds
    no plausible point) removes only implausible points, and the model is solved again with the row
    (HiGHS keeps the model loaded), from the heuristic point ``x_h`` (plausible, so it meets every row).
    Each optimum bounds the query's cost from below. Returns the proven optimum as a result, else the
    best lower bound (0 when it proved nothing) after ``CUT_ROUNDS`` solves or at ``deadline``.
    """
    assert q.isolation is not None and q.isolation_encoded is not None
    iso, delta = q.isolation
    if opts.backend != "highs" or not BoxBound.supported(q.isolation_encoded, q.x0):
        return 0.0
    prob = build(q, cost_bound=c_h, nogoods=nogoods, deadline=deadline, encode_isolation=False)
    if prob.infeasible or prob.expired or deadline.remaining() <= 0:
        return 0.0
    start = prob.assignment(x_h)
    session = HighsSession(prob.model, opts)
    bound = BoxBound(q.isolation_encoded, prob.domains, delta)
    lb, secs = 0.0, 0.0
    for _ in range(CUT_ROUNDS):
        if deadline.remaining() <= 0:
            break
        out = session.run(start, time_limit=deadline.remaining())
        secs += out.seconds
        if out.status != OPTIMAL or out.x is None or not math.isfinite(out.bound):
            break
        priced = float(prob.model.cost @ out.x) + float(prob.model.offset)
        if abs(priced - out.objective) > 1e-7 * (1.0 + abs(out.objective)):
            break  # HiGHS handed back other columns than its optimum's (see solver._solve_highs)
        lb = max(lb, q.cost.from_objective(out.bound))
        x = prob.point(out.x)
        if float(iso.evaluate(x[None, :])[0]) >= delta - 1e-9:
            done = _finish(q, _base(q, OPTIMAL, verify), x, verify)
            if done.verified and not done.violations and (
                    done.cost <= q.cost.from_objective(out.objective) * (1 + 1e-9) + 1e-12):
                _size(done, prob)
                done.objective, done.bound, done.solve_seconds = out.objective, min(lb, done.cost), secs
                done.gap = (done.cost - done.bound) / done.cost if done.cost > 0 else 0.0
                return done
            break  # not verified at this margin: the full encoding decides
        cut = leave_box(bound, prob.domains, x)
        if cut is None:
            break
        expr, need = cut
        session.make_integer(np.array(need, dtype=np.int64))
        cols, inv = np.unique(np.asarray(expr.cols, dtype=np.int64), return_inverse=True)
        coefs = np.bincount(inv, weights=np.asarray(expr.coefs, dtype=np.float64), minlength=cols.shape[0])
        session.add_row(cols[coefs != 0.0], coefs[coefs != 0.0], 1.0 - expr.const, np.inf)
    return lb


def _raise_bound(res: CounterfactualResult, lb: float) -> None:
    """Take a higher proven lower bound (the plausible relaxation's) and recompute the gap from it."""
    if lb > 0 and not (math.isfinite(res.bound) and res.bound >= lb):
        res.bound = min(lb, res.cost)
        res.gap = (res.cost - res.bound) / res.cost if res.cost > 0 else 0.0


def _proven_bound(res: CounterfactualResult) -> None:
    """A bound and gap for an unproven point: a cost is never negative, so 0 bounds it when the solver proved
    nothing better (no bound yet, or the solver never ran)."""
    if not (math.isfinite(res.bound) and res.bound >= 0):
        res.bound = 0.0
    if not (math.isfinite(res.gap) and res.gap >= 0):
        res.gap = (res.cost - res.bound) / res.cost if res.cost > 0 else 0.0


def _clear(res: CounterfactualResult) -> None:
    """Forget the point of an earlier attempt (a later, stricter one found none)."""
    res.x, res.verified, res.prediction, res.violations, res.cost = None, False, None, [], math.inf


def _size(res: CounterfactualResult, prob: Problem) -> None:
    res.n_variables, res.n_binaries = prob.model.n_cols, prob.n_binaries
    res.n_rows, res.nnz = prob.model.n_rows, prob.model.nnz


def _diverse(q: Query, first: CounterfactualResult, n: int, opts: SolverOptions, verify: Verifier,
             reference: FloatArray | None, use_heuristic: bool, deadline: Deadline) -> list[CounterfactualResult]:
    """Up to ``n`` more counterfactuals, each with a change pattern not seen before (no-good cuts)."""
    assert first.x is not None
    patterns = [change_pattern(q, first.x)]
    out: list[CounterfactualResult] = []
    for _ in range(n):
        res = _solve_query(q, opts, verify, reference, use_heuristic, deadline, nogoods=patterns)
        if not res.found:
            break
        out.append(res)
        patterns.append(change_pattern(q, res.x))  # type: ignore[arg-type]
    return out


def _used(forests: Sequence[Forest]) -> npt.NDArray[np.bool_]:
    """Features some forest splits on (the explained model or the isolation forest)."""
    used = np.zeros(forests[0].n_features, dtype=bool)
    for f in forests:
        used[f.feature[f.feature >= 0]] = True
    return used
