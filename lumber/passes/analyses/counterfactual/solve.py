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

One query runs: the bound (a plausible query's relaxation: the isolation forest
without the explained model), the warm start, the fast path (the warm start
proven optimal by the per-tree bound of ``fastpath``: no MILP), the best-first
box search where ``options.box_search`` asks for it (``bestfirst.py``: a proven
answer ends the query; otherwise its best point and bound carry over), else the
MILP with the search strategy of ``options.strategy`` (:class:`Whole` or :class:`Cases`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Any, Callable, Sequence, TypeGuard

import numpy as np
import numpy.typing as npt

from lumber.ir import Constraints, Direction, FeatureKind, Forest, InputDataError, LinearRelation, Norm, Scale, Task
from lumber.ir.display import Display
from lumber.ir.domains import DomainKind, Domains, case_bounds, infer_domains
from lumber.ir.decision import resolve_target

from . import actionability, bestfirst
from .deadline import Clock, Deadline
from .heuristic import Candidates, improve, warm_start
from .fastpath import SPLIT_DEPTH, FastPathRecord, LeafBoxes, plain_boxes, split_bound_proves
from lumber.ir.constraints import parse_weights

from ..change_cost import ChangeCost
from .objective import CaseCost, feature_scales
from .options import CounterfactualOptions
from .problem import Problem, Query, build, change_pattern
from .reference import Reference
from .result import CounterfactualResult
from .domain import CategoricalDomain, Domain, NumericDomain
from .solver import (HIGHS_DEFAULTS, INFEASIBLE, NO_SOLUTION, OPTIMAL, TIME_LIMIT, UNVERIFIED, Case, SolveOutcome,
                     SolverOptions, solve, solve_enumerated)
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
               options: CounterfactualOptions | None = None, reference: Any = None,
               isolation: tuple[Forest, float] | None = None) -> list[Query]:
    """One :class:`Query` per acceptable target (several when ``target`` is None on a multiclass model).

    ``options.domains`` (default: inferred from the schema, the constraints and ``reference``) puts every
    numeric feature on its grid (whole numbers, 0/1, multiples of a resolution) within its bounds,
    and keeps one-hot groups one-hot."""
    opts = options or CounterfactualOptions()
    norm: str | Norm = opts.norm
    scale, weights, domains = opts.scale, opts.weights, opts.domains
    clip_to_reference = opts.clip_to_reference
    schema = forest.schema
    x0 = forest.prepare_input(np.asarray(x, dtype=np.float64).reshape(1, -1) if not hasattr(x, "iloc") else x)
    if x0.shape[0] != 1:
        raise InputDataError(f"one case at a time: got {x0.shape[0]} rows", "use lumber.counterfactual for batches")
    x0 = x0[0]
    cons = constraints
    if cons is not None:
        norm, scale, target = cons.check_features(schema.feature_names).settings(norm, scale, target)
    ref = Reference.of(forest, reference)
    R = None if ref is None else ref.rows
    forests = [forest] + ([isolation[0]] if isolation is not None else [])
    cat = categorical_features(forests)
    names = schema.feature_names
    down, up = _weights(weights, cons, names)
    used = _used(forests)
    if ref is not None and (scale is None or isinstance(scale, (str, Scale))):  # once per batch
        scales = ref.memo(forest, ("scales", str(scale), cat.tobytes(), used.tobytes()),
                          lambda: feature_scales(scale, R, names, cat, used))
    else:
        scales = feature_scales(scale, R, names, cat, used)
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
    return [Query(forest, x0, s, cost, cons, lo, hi, allowed, cat, codes, isolation, domains, opts, ref) for s in specs]


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
                         options: CounterfactualOptions | None = None, reference: Any = None,
                         isolation: tuple[Forest, float] | None = None, verifier: Verifier | None = None,
                         clock: Clock | None = None) -> CounterfactualResult:
    """The cheapest change of ``x`` that makes ``forest`` predict ``target`` (see the package docstring).

    ``options`` (default :class:`CounterfactualOptions`) sets the norm, costs, time limit and search;
    ``isolation`` is ``(isolation_forest_ir, delta)``; ``verifier`` ``f(X) -> decisions`` of the source
    model (default: ``Forest.evaluate``); ``clock`` (default ``time.perf_counter``) is what
    ``options.time_limit`` is measured on."""
    opts = options or CounterfactualOptions()
    deadline = Deadline.after(opts.time_limit, clock)
    t0 = deadline.clock()
    ref = Reference.of(forest, reference)
    queries = make_query(forest, x, target, constraints, options=opts, reference=ref, isolation=isolation)
    R = ref if opts.warm_start else None
    verify = verifier or default_verifier(forest)
    run = solver_options(opts)
    best: CounterfactualResult | None = None
    for q in queries:
        res = _solve_query(q, run, verify, R, deadline)
        if opts.k > 1 and res.found:
            res.alternatives = _diverse(q, res, opts.k - 1, run, verify, R, deadline)
        if best is None or _better(res, best):
            best = res
    assert best is not None
    if best.status == INFEASIBLE and constraints is not None and not deadline.expired():
        _name_blocking(best, forest, x, target, constraints, opts, ref, isolation, verify, deadline)
    best.total_seconds = deadline.clock() - t0
    shown = Display(forest, queries[0].domains)
    for r in [best, *best.alternatives]:
        r.display = shown
    return best


BLOCKING_SECONDS = 2.0
"""Seconds each try of :func:`_name_blocking` may take at most (a point is usually found by the warm start)."""


def relaxations(cons: Constraints) -> list[tuple[str, Constraints]]:
    """The constraints without one of their lines each: ``(what was left out, the rest)``."""
    out: list[tuple[str, Constraints]] = []
    if cons.max_changes is not None:
        out.append((f"changes <= {cons.max_changes}", replace(cons, max_changes=None)))
    for k, r in enumerate(cons.rules):
        if r.immutable or r.direction != Direction.ANY or r.lower is not None or r.upper is not None or r.allowed is not None:
            what = ("immutable " if r.immutable else "") + f"the rule on {r.feature}"
            out.append((what, replace(cons, rules=cons.rules[:k] + cons.rules[k + 1:])))
    for k, rel in enumerate(cons.relations):
        out.append((f"relation {k + 1}", replace(cons, relations=cons.relations[:k] + cons.relations[k + 1:])))
    for k, imp in enumerate(cons.implications):
        out.append((f"implication {k + 1}",
                    replace(cons, implications=cons.implications[:k] + cons.implications[k + 1:])))
    return out


def _name_blocking(res: CounterfactualResult, forest: Forest, x: Any, target: Any, cons: Constraints,
                   opts: CounterfactualOptions, reference: Reference | None, isolation: tuple[Forest, float] | None,
                   verify: Verifier, deadline: Deadline) -> None:
    """Name the constraint that blocks an infeasible query: the first one without which a verified point
    reaches the target (each try gets an equal share of the time left, at most :data:`BLOCKING_SECONDS`;
    a try that ends without a point names nothing). The query stays infeasible; only ``blocking`` and the
    message say more."""
    tries = relaxations(cons)
    for k, (what, rest) in enumerate(tries):
        left = deadline.remaining()
        if left <= 0:
            return
        sub = replace(opts, k=1, time_limit=max(min(left / (len(tries) - k), BLOCKING_SECONDS), 0.01))
        queries = make_query(forest, x, target, rest, options=sub, reference=reference, isolation=isolation)
        R = reference if sub.warm_start else None
        for q in queries:
            r = _solve_query(q, solver_options(sub), verify, R, Deadline.after(sub.time_limit, deadline.clock))
            if r.found and r.verified and not r.violations:
                res.blocking = what
                res.message = f"{res.message}; without {what} a point reaches {q.spec.describe()}".lstrip("; ")
                return


def solver_options(opts: CounterfactualOptions) -> SolverOptions:
    """The HiGHS options of a query's MILPs (each gets the time left as its limit)."""
    return SolverOptions(time_limit=opts.time_limit, threads=opts.threads, mip_rel_gap=opts.mip_gap,
                         presolve=opts.presolve, seed=opts.seed, highs_options=tuple(opts.highs_options),
                         defaults=HIGHS_DEFAULTS)


def _better(a: CounterfactualResult, b: CounterfactualResult) -> bool:
    if a.found != b.found:
        return a.found
    if a.found:
        return (a.verified, -a.cost) > (b.verified, -b.cost)
    return a.status == NO_SOLUTION and b.status == INFEASIBLE


def _base(q: Query, status: str, verify: Verifier, message: str = "") -> CounterfactualResult:
    orig = q.memo("original", lambda: verify(q.x0[None, :]))
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


def _searched(q: Query, found: bestfirst.SearchOutcome, verify: Verifier) -> CounterfactualResult | None:
    """The box search's proven answer as the query's result; None when it proved nothing (or the model's
    own ``predict`` does not confirm its point)."""
    if found.status == INFEASIBLE:
        return _base(q, INFEASIBLE, verify, f"no point reaches {q.spec.describe()} under the constraints")
    if found.status != OPTIMAL or found.x is None:
        return None
    res = _finish(q, _base(q, OPTIMAL, verify), found.x, verify)
    if not (res.verified and not res.violations):
        return None
    res.objective, res.bound, res.gap = found.objective, res.cost, 0.0
    return res


def _solve_query(q: Query, opts: SolverOptions, verify: Verifier, reference: Reference | None,
                 deadline: Deadline, nogoods: Sequence[FloatArray] = ()) -> CounterfactualResult:
    meets: Callable[[FloatArray], npt.NDArray[np.bool_]] = lambda X: forest_meets(q.forest, q.spec, X)
    if not nogoods and bool(meets(q.x0[None, :])[0]):  # the model and its source library both agree
        done = _finish(q, _base(q, OPTIMAL, verify), q.x0.copy(), verify)
        if done.verified and not done.violations:
            done.cost, done.objective, done.bound, done.gap = 0.0, 0.0, 0.0, 0.0
            done.message = NO_CHANGE
            return done
    use_heuristic = q.options.warm_start
    starts: list[FloatArray] = []
    lb_rel = 0.0
    if q.isolation is not None and use_heuristic:
        rel = _plausible_relaxation(q, opts, verify, deadline.share(q.options.relaxation_share), nogoods)
        if isinstance(rel, CounterfactualResult):
            return rel
        if rel is not None:
            starts, lb_rel = [rel[0]], rel[1]
    # the warm start may use half of the time left: the model building and the solve need the rest
    x_h = warm_start(q, meets, reference, nogoods=nogoods, deadline=deadline.share(0.5),
                     starts=starts) if use_heuristic else None
    c_h = float(q.cost.total(x_h[None, :])[0]) if x_h is not None else None
    box_first = bestfirst.first(q, nogoods)  # (its first box proves what the fast path would, and more)
    if q.options.fast_path and not box_first and x_h is not None and c_h is not None and c_h > 0 \
            and not deadline.expired():
        proven = _proven_without_solver(q, x_h, c_h, verify, opts)
        if proven is not None:
            return proven
    search = strategy(q.options)
    found = bestfirst.answer(q, x_h, c_h, deadline, opts.mip_rel_gap) if box_first else None
    if found is not None:
        proven = _searched(q, found, verify)
        if proven is not None:
            return proven
        if found.x is not None and (c_h is None or q.cost.from_objective(found.objective) < c_h):
            x_h, c_h = found.x, q.cost.from_objective(found.objective)
        lb_rel = max(lb_rel, q.cost.from_objective(found.bound) if math.isfinite(found.bound) else 0.0)
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
        out = search.solve(q, prob, run, start, c_h, starts[0] if starts else None)
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


def _proven_without_solver(q: Query, x: FloatArray, cost: float, verify: Verifier, opts: SolverOptions
                           ) -> CounterfactualResult | None:
    """The warm start's point as the proven optimum, when the per-tree bound (:func:`fastpath.leaf_bound_proves`)
    shows that nothing within the MIP gap below its cost reaches the target; None otherwise (or when the
    model's own ``predict`` does not confirm the point)."""
    below = cost * (1.0 - float(opts.mip_rel_gap))
    changed = np.flatnonzero(~((x == q.x0) | (np.isnan(x) & np.isnan(q.x0))))
    boxes, record = None, FastPathRecord()
    if q.reference is not None and plain_boxes(q.forest):  # a batch: built once, and the record of its proofs
        boxes = q.reference.memo(q.forest, "leaf boxes", lambda: LeafBoxes.of(q.forest))
        record = q.reference.memo(q.forest, ("fast path", q.spec.key, q.cost.norm), FastPathRecord)
    others = [i for i in range(q.x0.shape[0]) if i not in set(changed.tolist())]  # (changed ones first)
    proven = split_bound_proves(q, below, [int(i) for i in changed] + others, boxes=boxes,
                                depth=SPLIT_DEPTH if record.splits_pay() else 0)
    record.add(proven)
    if not proven:
        return None
    res = _finish(q, _base(q, OPTIMAL, verify), x, verify)
    if not (res.verified and not res.violations):
        return None
    res.objective = q.cost.to_objective(res.cost)
    res.bound = below
    res.gap = (res.cost - below) / res.cost  # (attempts stays 0: no MILP was built)
    return res


PLAUSIBLE_FULL_OPTIONS: tuple[tuple[str, object], ...] = (
    ("mip_allow_restart", False),
    ("mip_pscost_minreliable", 0),
)
"""HiGHS options (after ``solver.HIGHS_DEFAULTS``, before the caller's) for the full MILP of a query with an
isolation forest."""


class Whole:
    """The search strategy ``"whole"``: one MILP, from the warm start."""

    def solve(self, q: Query, prob: Problem, run: SolverOptions, start: FloatArray | None, cutoff: float | None,
              relaxed: FloatArray | None) -> SolveOutcome:
        return solve(prob.model, run, start)


@dataclass(frozen=True)
class Cases:
    """The search strategy ``"cases"``: a plausible query solved case by case (``solver.solve_enumerated``).

    The cases are every combination of values of the two-valued and categorical features whose changes
    alone cost less than the warm start (:func:`discrete_cases`); with more than ``max_cases`` of them,
    the two values of the one two-valued feature the plausible relaxation's optimum flips (:func:`flip`:
    the costliest such flag). On the credit Table 4 queries (RF 100 x 5, IF 100 x 32, l1) most of the LP
    relaxation's gap sits in such a flag (a payment delay at 0.3-0.8 in the LP), where HiGHS spends its
    root on cuts before it branches. Without a relaxation point or a warm start the model is solved whole.
    """

    max_cases: int = 64

    def solve(self, q: Query, prob: Problem, run: SolverOptions, start: FloatArray | None, cutoff: float | None,
              relaxed: FloatArray | None) -> SolveOutcome:
        if relaxed is None or start is None or not cutoff:
            return solve(prob.model, run, start)
        enum = discrete_cases(q, prob, cutoff, self.max_cases)
        if enum is None:
            pick = flip(q, prob, relaxed)
            enum = discrete_cases(q, prob, cutoff, self.max_cases, only=pick) if pick is not None else None
        if enum is None:
            return solve(prob.model, run, start)
        return solve_enumerated(prob.model, run, start, *enum)


def strategy(options: CounterfactualOptions) -> Whole | Cases:
    """The search strategy object of ``options.strategy``."""
    return Cases(options.max_cases) if options.strategy == "cases" else Whole()


def _two_valued(d: Domain) -> TypeGuard[NumericDomain]:
    """A numeric feature with two levels and a single level column that only the trees read (a 0/1 flag, or
    one cut): the column is 0 or 1 in every solution that matters, so its two values are a complete split."""
    return (isinstance(d, NumericDomain) and d.levels.shape[0] == 2 and d.x_int_col < 0
            and not d.in_relation)


def flip(q: Query, prob: Problem, x_r: FloatArray) -> int | None:
    """The costliest two-valued feature that the relaxation's optimum ``x_r`` changes, or None."""
    costs = q.cost.feature_costs(x_r[None, :])[0]
    pick: NumericDomain | None = None
    for d in prob.domains:
        if (_two_valued(d) and x_r[d.index] != q.x0[d.index]
                and (pick is None or costs[d.index] > costs[pick.index])):
            pick = d
    return None if pick is None else pick.index


def discrete_cases(q: Query, prob: Problem, cutoff: float, max_cases: int, only: int | None = None
                   ) -> tuple[list[Case], FloatArray] | None:
    """Every combination of values of the two-valued and categorical features (or of feature ``only``)
    whose changes alone cost less than ``cutoff`` (the warm start's cost), with that cost as the
    combination's floor in objective units; None when there are none or more than ``max_cases``.

    The cases cover every point cheaper than the warm start: the cost only grows with each feature's
    change, so a combination whose own changes reach ``cutoff`` holds no cheaper point. Each two-valued
    level column is declared integer (its two levels are the feature's only domain values, or the two
    cells of its one cut), so its two cases cover every solution.
    """
    feats: list[tuple[int, npt.NDArray[np.int64], list[FloatArray], FloatArray]] = []
    for d in prob.domains:
        if only is not None and d.index != only:
            continue
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
            return len(out) <= max_cases
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
             reference: Reference | None, deadline: Deadline) -> list[CounterfactualResult]:
    """Up to ``n`` more counterfactuals, each with a change pattern not seen before (no-good cuts)."""
    assert first.x is not None
    patterns = [change_pattern(q, first.x)]
    out: list[CounterfactualResult] = []
    for _ in range(n):
        res = _solve_query(q, opts, verify, reference, deadline, nogoods=patterns)
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
