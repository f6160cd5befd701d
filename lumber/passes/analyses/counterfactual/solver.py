"""MILP backends behind one small interface: HiGHS through highspy (default) or scipy.optimize.milp.

Both load the model in bulk (one ``addCols``/``addRows`` CSR call each; one
sparse matrix for scipy), keep the solver silent, and report a
:class:`SolveOutcome` with status, objective, dual bound, gap, time and nodes.
Solvers are imported lazily.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, replace

import numpy as np
import numpy.typing as npt

from ...highs import new_highs, quiet_stdout
from .model import MilpModel

FloatArray = npt.NDArray[np.float64]

OPTIMAL = "optimal"
TIME_LIMIT = "time_limit"
"""A feasible point was found but the time ran out before optimality was proven."""
INFEASIBLE = "infeasible"
NO_SOLUTION = "no_solution"
"""The time ran out before any feasible point was found."""
ERROR = "error"
UNVERIFIED = "unverified"
"""A point was found but the model does not give the target there, even with the largest margin."""


@dataclass(frozen=True)
class SolverOptions:
    """What the MILP solver may use. ``presolve=None`` lets each backend use its measured default."""

    backend: str = "highs"
    """``"highs"`` (highspy) or ``"scipy"`` (scipy.optimize.milp, HiGHS vendored by scipy)."""
    time_limit: float = 60.0
    threads: int = 1
    mip_rel_gap: float = 1e-6
    mip_abs_gap: float = 1e-9
    presolve: bool | None = None
    seed: int = 0
    highs_options: tuple[tuple[str, object], ...] = ()
    """Further HiGHS options by name (e.g. ``(("mip_heuristic_effort", 0.01),)``), applied last."""
    race: int = 1
    """HiGHS runs raced on as many threads (``threads=1`` each, options varied by :data:`RACE_VARIANTS`):
    the first to prove its answer wins and stops the others (see :func:`_race`)."""


HIGHS_DEFAULTS: tuple[tuple[str, object], ...] = (
    ("mip_heuristic_run_rins", False),
    ("mip_heuristic_run_rens", False),
)
"""HiGHS options every counterfactual MILP starts from (``SolverOptions.highs_options`` and the race
variants come after them and win). Without the RINS and RENS sub-MIPs: these models arrive with a warm
start (or find a point at the root), and the sub-MIPs then spend most of the time before the proof.
Measured on OCEAN's Table 4 credit queries (RF 100 x 5, isolation forest 100 x 32, l1, one thread):
captured MILPs took 1.80 / 1.95 / 1.87 / 4.65 s where stock HiGHS took 3.10 / 2.50 / 2.68 / 6.31 s, and
the whole 20-query run had a median of 2.66 s against 3.2 s, 17 proven either way (see
docs/explanations.md)."""

RACE_VARIANTS: tuple[tuple[tuple[str, object], ...], ...] = (
    (),
    (("random_seed", 1), ("mip_heuristic_run_rins", True), ("mip_heuristic_run_rens", True)),
)
"""What each raced run changes over :data:`HIGHS_DEFAULTS` (the caller's ``highs_options`` still win).
The second is stock HiGHS with another seed: its sub-MIPs found better points and bounds on some hard
credit queries, where the default settings are fastest on most."""


@dataclass
class SolveOutcome:
    status: str
    x: FloatArray | None
    objective: float
    bound: float
    gap: float
    seconds: float
    nodes: int
    message: str = ""


_SCHEDULER_LOCK = threading.Lock()
_SCHEDULER_THREADS: list[int] = []
"""The thread count HiGHS's process-wide scheduler was started with (empty before the first solve)."""


def _match_scheduler(threads: int) -> None:
    """Restart HiGHS's thread scheduler when a solve asks for another thread count than the last one.

    HiGHS (1.16) starts one static scheduler per process, sized by the first solve; an instance with
    another ``threads`` value then ends at once with status "Not Set" and no point (measured: after a
    ``threads=2`` query every ``threads=1`` query came back as ``error``). Restarting it costs nothing
    between solves. HiGHS keeps scheduler state per thread, so the restart must come from the thread
    that solves next: :func:`_race` matches it before its workers start (a restart from a worker broke
    the caller's next solve the same way)."""
    import highspy

    with _SCHEDULER_LOCK:
        if _SCHEDULER_THREADS and _SCHEDULER_THREADS[0] != threads:
            reset = getattr(highspy.Highs, "resetGlobalScheduler", None)
            if reset is not None:
                reset(True)
        _SCHEDULER_THREADS[:] = [threads]


def solve(model: MilpModel, options: SolverOptions, start: FloatArray | None = None) -> SolveOutcome:
    """Solve ``model`` with the chosen backend; ``start`` is a feasible assignment to warm-start from."""
    if model.n_cols == 0:  # everything was decided while building
        bad = model.infeasible_constant_rows > 0
        return SolveOutcome(INFEASIBLE if bad else OPTIMAL, None if bad else np.zeros(0), model.offset,
                            model.offset, 0.0, 0.0, 0, "empty model")
    if options.backend == "highs":
        return _solve_highs(model, options, start)
    if options.backend == "scipy":
        return _solve_scipy(model, options)
    from lumber.ir import InputDataError

    raise InputDataError(f"unknown MILP backend {options.backend!r}", "accepted: 'highs', 'scipy'")


Case = tuple[npt.NDArray[np.int64], FloatArray]
"""Columns and the values they are fixed at: one side of a disjunction the caller branches on."""


def solve_cases(model: MilpModel, options: SolverOptions, start: FloatArray | None, cases: list[Case],
                probe_limit: float) -> SolveOutcome:
    """Solve ``model`` as the disjunction of ``cases`` when the cases away from ``start`` are quickly
    decided; otherwise solve ``model`` whole.

    The cases must cover every integer solution of ``model`` (the caller's branching is complete). Each
    case that does not hold ``start`` is probed first, for at most ``probe_limit`` seconds, with the
    objective cut off at ``start``'s (only a cheaper point matters there): its LP relaxation, then, unless
    that is infeasible, the MILP. If every probe ends proven
    (infeasible or optimal), the case holding ``start`` gets the time left, from ``start``, and the best
    case optimum is the model's. If a probe does not end in time, the whole model is solved from
    ``start`` with the time left, and the probes' time is lost. With ``options.threads > 1`` and two
    cases the probe runs beside the case holding ``start`` (:func:`_cases_at_once`).
    """
    empty = SolveOutcome(INFEASIBLE, None, np.inf, np.inf, np.inf, 0.0, 0, "the case is outside the bounds")
    children = [model.with_fixed(*c) for c in cases]
    live = [k for k, ch in enumerate(children) if not np.any(ch.lb > ch.ub)]
    outs: list[SolveOutcome] = [empty] * (len(cases) - len(live))
    first = [k for k in live if not _holds(start, cases[k])]
    last = [k for k in live if _holds(start, cases[k])]
    t0 = time.perf_counter()  # wall time, loading each copy into HiGHS included
    probes = []
    for k in first:
        if start is not None:  # a probed case only matters below start's objective
            children[k].add_cost_row(_cutoff(float(model.cost @ start)))
        if options.backend == "highs" and _lp_infeasible(children[k], options, probe_limit):
            outs.append(replace(empty, message="its LP relaxation is infeasible"))
        else:
            probes.append(k)
    probe_limit -= time.perf_counter() - t0  # the LPs' time is the probes' time
    if (len(probes) == 1 and len(last) == 1 and options.threads > 1 and options.backend == "highs"
            and _interruptible()):
        return _cases_at_once(model, options, start, children[probes[0]], children[last[0]], probe_limit, t0)
    for k in probes:
        out = solve(children[k], replace(options, time_limit=max(min(probe_limit, _left(options, t0)), 0.01)), None)
        if out.status not in (OPTIMAL, INFEASIBLE):
            return _whole(model, options, start, t0, out.nodes)
        outs.append(out)
    for k in last:
        outs.append(solve(children[k], replace(options, time_limit=max(_left(options, t0), 0.01)), start))
    return _combine(outs, complete=len(outs) == len(cases), rel_gap=float(options.mip_rel_gap),
                    seconds=time.perf_counter() - t0)


CASE_LP_SECONDS = 0.25
"""How long :func:`solve_enumerated` lets a case's LP run before the case goes to its MILP undecided."""


def solve_enumerated(model: MilpModel, options: SolverOptions, start: FloatArray | None, cases: list[Case],
                     floors: FloatArray) -> SolveOutcome:
    """Solve ``model`` case by case, cheapest floor first, with the best point so far as the cutoff.

    ``cases`` must cover every integer solution of ``model`` whose objective is below ``start``'s, and
    ``floors[k]`` must bound the objective (offset included) of every solution in case ``k`` from below.
    A case closes when its floor reaches the incumbent, when its LP relaxation cut off at the incumbent is
    infeasible (one LP loaded once, each case's columns fixed in turn, at most :data:`CASE_LP_SECONDS`), or
    when its MILP (the case's columns fixed, cut off at the incumbent, from ``start`` when the case holds
    it) ends proven. A point found lowers the cutoff for the cases after it. When every case is closed the
    incumbent is proven optimal; at the time limit the bound is the smallest floor still open.
    """
    t0 = time.perf_counter()
    offset = float(model.offset)
    inc = start_obj = float(model.cost @ start) + offset if start is not None else np.inf
    best = start
    floors = np.array(floors, dtype=np.float64)
    for k, (cols, vals) in enumerate(cases):
        if np.any(np.maximum(model.lb[cols], vals) > np.minimum(model.ub[cols], vals)):
            floors[k] = np.inf  # the case is outside the bounds
    lp = _CaseLp(model, options) if options.backend == "highs" and np.isfinite(inc) else None
    nodes, messages = 0, []
    for k in [int(k) for k in np.argsort(floors, kind="stable")]:
        if floors[k] >= inc or _left(options, t0) <= 0:
            continue
        held = _holds(start, cases[k])
        if lp is not None and not (held and inc == start_obj):  # (the start's case has a point at the cutoff)
            floors[k] = max(floors[k], lp.floor(cases[k], inc, min(CASE_LP_SECONDS, _left(options, t0))))
            if floors[k] >= inc:
                continue
        child = model.with_fixed(*cases[k])
        if not held and np.isfinite(inc):  # only a cheaper point matters here
            child.add_cost_row(_cutoff(inc - offset))
        out = solve(child, replace(options, time_limit=max(_left(options, t0), 0.01)), start if held else None)
        nodes += out.nodes
        if out.x is not None and out.objective < inc:
            inc, best = out.objective, out.x
        if out.status in (OPTIMAL, INFEASIBLE):
            floors[k] = np.inf
        else:
            floors[k] = max(floors[k], out.bound) if np.isfinite(out.bound) else floors[k]
            messages.append(out.message)
    low = min([inc, *floors[floors < inc]])
    seconds = time.perf_counter() - t0
    if best is None:
        status = INFEASIBLE if low == np.inf else NO_SOLUTION
        return SolveOutcome(status, None, np.inf, low, np.inf, seconds, nodes, "; ".join(messages))
    gap = max((inc - low) / max(abs(inc), 1e-300), 0.0)
    proven = inc - low <= float(options.mip_rel_gap) * max(abs(inc), 1e-300)
    return SolveOutcome(OPTIMAL if proven else TIME_LIMIT, best, inc, low, gap, seconds, nodes, "; ".join(messages))


class _CaseLp:
    """The LP relaxation of a model loaded once, with a row holding its objective under a cutoff; each call
    fixes one case's columns (the previous case's are freed) and solves it again (HiGHS starts from its
    last basis where it can)."""

    def __init__(self, model: MilpModel, options: SolverOptions) -> None:
        self.session = HighsSession(model, replace(options, highs_options=(), threads=1, race=1), relaxed=True)
        h = self.session.h
        self.lb, self.ub, self.offset = model.lb, model.ub, float(model.offset)
        nz = np.flatnonzero(model.cost)
        self.row = int(h.getNumRow())
        h.addRow(-self.session.inf, self.session.inf, int(nz.shape[0]), nz.astype(np.int32), model.cost[nz])
        self.fixed = np.zeros(0, dtype=np.int64)

    def floor(self, case: Case, cutoff: float, time_limit: float) -> float:
        """The case's LP optimum under ``objective <= cutoff``: +inf when infeasible, -inf when undecided."""
        import highspy

        h = self.session.h
        if self.fixed.size:
            h.changeColsBounds(int(self.fixed.shape[0]), self.fixed.astype(np.int32), self.lb[self.fixed],
                               self.ub[self.fixed])
        cols, vals = case
        self.fixed = np.asarray(cols, dtype=np.int64)
        lo, hi = np.maximum(self.lb[self.fixed], vals), np.minimum(self.ub[self.fixed], vals)
        if np.any(lo > hi):
            return np.inf
        h.changeColsBounds(int(self.fixed.shape[0]), self.fixed.astype(np.int32), lo, hi)
        h.changeRowBounds(self.row, -self.session.inf, _cutoff(cutoff - self.offset))
        if time_limit <= 0:
            return -np.inf
        self.session.run(time_limit=h.getRunTime() + time_limit)  # (HiGHS's clock runs on across runs)
        st = h.getModelStatus()
        if st == highspy.HighsModelStatus.kInfeasible:
            return np.inf
        if st == highspy.HighsModelStatus.kOptimal:
            return float(h.getInfo().objective_function_value)
        return -np.inf


def _holds(start: FloatArray | None, case: Case) -> bool:
    """Does ``start`` lie in ``case``?"""
    return start is not None and bool(np.all(np.abs(start[case[0]] - case[1]) <= 1e-9))


def _cutoff(objective: float) -> float:
    """A cost row's upper end at ``objective``, a hair above it so that a point of that cost stays in."""
    return objective * (1 + 1e-9) + 1e-12


def _left(options: SolverOptions, t0: float) -> float:
    """Seconds of ``options.time_limit`` left since ``t0``."""
    return float(options.time_limit) - (time.perf_counter() - t0)


def _whole(model: MilpModel, options: SolverOptions, start: FloatArray | None, t0: float,
           probe_nodes: int) -> SolveOutcome:
    """The fallback of :func:`solve_cases`: the whole model with the time left; the probes' time and nodes
    count."""
    whole = solve(model, replace(options, time_limit=max(_left(options, t0), 0.01)), start)
    return replace(whole, seconds=time.perf_counter() - t0, nodes=whole.nodes + probe_nodes)


def _lp_infeasible(model: MilpModel, options: SolverOptions, time_limit: float) -> bool:
    """Is the LP relaxation of ``model`` infeasible (so the MILP is)? On the credit Table 4 queries the
    flag probe's LP, cut off at the warm start's cost, was infeasible in 0.05-0.13 s where HiGHS's MIP
    took 0.55-0.94 s (presolve, probing and cliques) to say the same at its root."""
    import highspy

    session = HighsSession(model, replace(options, highs_options=()), relaxed=True)
    session.run(time_limit=min(float(options.time_limit), time_limit))
    return bool(session.h.getModelStatus() == highspy.HighsModelStatus.kInfeasible)


def _cases_at_once(model: MilpModel, options: SolverOptions, start: FloatArray | None, probe: MilpModel,
                   held: MilpModel, probe_limit: float, t0: float) -> SolveOutcome:
    """:func:`solve_cases` with two cases on two threads (``options.threads > 1``): the probe and the case
    holding ``start`` are solved at once, one HiGHS thread each, so the probe's time is no longer added to
    the query's. If the probe ends unproven, the other is stopped and the whole model solved as before."""
    one = replace(options, threads=1, race=1)
    _match_scheduler(1)  # here, not in a worker (see _race)
    stop = threading.Event()
    outs: dict[str, SolveOutcome] = {}
    errors: list[BaseException] = []

    def go(key: str, child: MilpModel, opt: SolverOptions, st: FloatArray | None,
           halt: threading.Event | None) -> None:
        try:
            outs[key] = _solve_highs(child, opt, st, halt)
        except BaseException as e:  # noqa: BLE001 - re-raised in the caller's thread
            errors.append(e)
            stop.set()

    left = _left(options, t0)
    probing = threading.Thread(target=go, daemon=True, args=(
        "probe", probe, replace(one, time_limit=max(min(probe_limit, left), 0.01)), None, stop))
    holding = threading.Thread(target=go, daemon=True, args=(
        "held", held, replace(one, time_limit=max(left, 0.01)), start, stop))
    probing.start()
    holding.start()
    probing.join()
    decided = not errors and outs["probe"].status in (OPTIMAL, INFEASIBLE)
    if not decided:
        stop.set()
    holding.join()
    if errors:
        raise errors[0]
    p, h = outs["probe"], outs["held"]
    if not decided:  # from the held case's point when it is cheaper (its columns are the model's)
        if h.x is not None and (start is None or h.objective < float(model.cost @ start) + model.offset):
            start = h.x
        return _whole(model, options, start, t0, p.nodes + h.nodes)
    return _combine([p, h], complete=True, rel_gap=float(options.mip_rel_gap), seconds=time.perf_counter() - t0)


def _combine(outs: list[SolveOutcome], complete: bool, rel_gap: float, seconds: float) -> SolveOutcome:
    """One outcome for a disjunction: the best point, and the smallest bound over its cases."""
    found = [o for o in outs if o.x is not None]
    best = min(found, key=lambda o: o.objective) if found else None

    def bound(o: SolveOutcome) -> float:
        if o.status == INFEASIBLE:
            return np.inf
        if o.status == OPTIMAL and o.x is not None:
            return o.objective
        return o.bound if np.isfinite(o.bound) else -np.inf

    low = min([bound(o) for o in outs] + ([] if complete else [-np.inf]))
    nodes = sum(o.nodes for o in outs)
    if best is None:
        proven = complete and all(o.status == INFEASIBLE for o in outs)
        status = INFEASIBLE if proven else (ERROR if any(o.status == ERROR for o in outs) else NO_SOLUTION)
        return SolveOutcome(status, None, np.inf, low, np.inf, seconds, nodes, "; ".join(o.message for o in outs))
    obj = best.objective
    low = min(low, obj)
    gap = max((obj - low) / max(abs(obj), 1e-300), 0.0) if np.isfinite(low) else np.inf
    proven = np.isfinite(low) and (obj - low <= rel_gap * max(abs(obj), 1e-300) or obj == low)
    return SolveOutcome(OPTIMAL if proven else TIME_LIMIT, best.x, obj, low, gap, seconds, nodes, best.message)


def _solve_highs(model: MilpModel, opt: SolverOptions, start: FloatArray | None,
                 stop: threading.Event | None = None) -> SolveOutcome:
    """HiGHS, trusted only where its answer checks out: with a start solution HiGHS 1.16 can
    report the optimum's objective while handing back the start's columns (a case found by
    test_cf_optimality: objective 0.5, columns of cost 1.5). The returned columns must price
    at the reported objective; if they do not, the query is solved again without the start."""
    out = _run_highs(model, opt, start, stop)
    if start is None or out.x is None:
        return out
    priced = float(model.cost @ out.x) + float(model.offset)
    if abs(priced - out.objective) <= 1e-7 * (1.0 + abs(out.objective)):
        return out
    rest = max(float(opt.time_limit) - out.seconds, 0.01)
    again = _run_highs(model, replace(opt, time_limit=rest), None, stop)
    return replace(again, seconds=again.seconds + out.seconds)


def _run_highs(model: MilpModel, opt: SolverOptions, start: FloatArray | None,
               stop: threading.Event | None = None) -> SolveOutcome:
    if opt.race > 1 and opt.threads == 1 and _interruptible() and stop is None:
        return _race(model, opt, start)
    return HighsSession(model, opt, stop=stop).run(start)


def _interruptible() -> bool:
    import highspy

    return hasattr(highspy.Highs, "cbMipInterrupt")  # highspy >= 1.8: a run can be stopped from outside


def _race(model: MilpModel, opt: SolverOptions, start: FloatArray | None) -> SolveOutcome:
    """``opt.race`` HiGHS runs of the same model on their own threads (HiGHS frees the GIL while it
    solves); the first proven answer (optimal or infeasible) stops the others, and every thread has
    ended before this returns. Without a proven answer the cheapest point comes back with the highest
    dual bound of all runs (each is a valid lower bound of the same minimum)."""
    n = max(1, min(int(opt.race), len(RACE_VARIANTS)))
    _match_scheduler(1)  # here, not in a worker: a restart from another thread breaks this one's next solve
    stop = threading.Event()
    sessions = [HighsSession(model, replace(opt, race=1, highs_options=RACE_VARIANTS[k] + tuple(opt.highs_options)),
                             stop=stop) for k in range(n)]
    done: list[SolveOutcome] = []
    errors: list[BaseException] = []

    def go(s: HighsSession) -> None:
        try:
            out = s.run(start)
        except BaseException as e:  # noqa: BLE001 - re-raised in the caller's thread
            errors.append(e)
            stop.set()
            return
        done.append(out)
        if out.status in (OPTIMAL, INFEASIBLE):
            stop.set()

    t0 = time.perf_counter()
    workers = [threading.Thread(target=go, args=(s,), daemon=True) for s in sessions]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    secs = time.perf_counter() - t0
    if errors:
        raise errors[0]
    proven = [o for o in done if o.status in (OPTIMAL, INFEASIBLE)]
    if proven:
        return replace(proven[0], seconds=secs, nodes=sum(o.nodes for o in done))
    found = [o for o in done if o.x is not None]
    bounds = [o.bound for o in done if np.isfinite(o.bound)]
    if not found:
        return replace(done[0], seconds=secs, bound=max(bounds) if bounds else done[0].bound)
    best = min(found, key=lambda o: o.objective)
    bound = min(max(bounds), best.objective) if bounds else best.bound
    gap = abs(best.objective - bound) / max(abs(best.objective), 1e-300) if np.isfinite(bound) else best.gap
    return replace(best, seconds=secs, bound=bound, gap=gap, nodes=sum(o.nodes for o in done))


class HighsSession:
    """One HiGHS model kept loaded between solves, so that rows (cuts) can be added and the model solved
    again without rebuilding it (``plausibility`` cut loop)."""

    def __init__(self, model: MilpModel, opt: SolverOptions, stop: threading.Event | None = None,
                 relaxed: bool = False) -> None:
        import highspy

        self.model, self.opt, self.stop = model, opt, stop
        h = self.h = new_highs()
        if stop is not None:  # checked at HiGHS's MIP interrupt points (a few per second; no cost measured)
            def interrupt(e: object) -> None:
                if stop.is_set():
                    e.interrupt()  # type: ignore[attr-defined]

            h.cbMipInterrupt += interrupt
        h.setOptionValue("time_limit", float(opt.time_limit))
        h.setOptionValue("threads", int(opt.threads))
        h.setOptionValue("mip_rel_gap", float(opt.mip_rel_gap))
        h.setOptionValue("mip_abs_gap", float(opt.mip_abs_gap))
        h.setOptionValue("random_seed", int(opt.seed))
        h.setOptionValue("presolve", "on" if opt.presolve in (None, True) else "off")
        self.threads = int(opt.threads)
        for name, value in HIGHS_DEFAULTS + tuple(opt.highs_options):
            h.setOptionValue(name, value)
            if name == "threads":
                self.threads = int(value)  # type: ignore[call-overload]
        n = model.n_cols
        empty_i = np.zeros(0, dtype=np.int32)
        h.addCols(n, model.cost, model.lb, model.ub, 0, empty_i, empty_i, np.zeros(0))
        ints = np.flatnonzero(model.integer).astype(np.int32)
        if ints.size and not relaxed:  # relaxed: the LP relaxation
            h.changeColsIntegrality(ints.shape[0], ints, np.full(ints.shape[0], 1, dtype=np.uint8))
        lo, hi, starts, idx, vals = model.csr()
        self.inf = inf = highspy.kHighsInf
        if model.n_rows:
            h.addRows(model.n_rows, np.where(np.isfinite(lo), lo, -inf), np.where(np.isfinite(hi), hi, inf),
                      int(vals.shape[0]), starts[:-1].copy(), idx, vals)
        if model.offset:
            h.changeObjectiveOffset(float(model.offset))

    def add_row(self, cols: npt.NDArray[np.int64], vals: FloatArray, lo: float, hi: float) -> None:
        """Append ``lo <= sum vals * x[cols] <= hi`` to the loaded model (and to ``model``, for checks)."""
        self.model.add_rows(np.zeros(cols.shape[0], dtype=np.int64), cols, vals, np.array([lo]), np.array([hi]))
        self.h.addRow(lo if np.isfinite(lo) else -self.inf, hi if np.isfinite(hi) else self.inf,
                      int(cols.shape[0]), cols.astype(np.int32), np.asarray(vals, dtype=np.float64))

    def make_integer(self, cols: npt.NDArray[np.int64]) -> None:
        new = np.asarray(cols, dtype=np.int64)
        new = new[~self.model.integer[new]]
        if new.size:
            self.model.set_integer(new)
            self.h.changeColsIntegrality(int(new.shape[0]), new.astype(np.int32),
                                         np.ones(new.shape[0], dtype=np.uint8))

    def run(self, start: FloatArray | None = None, time_limit: float | None = None) -> SolveOutcome:
        import highspy

        h = self.h
        _match_scheduler(self.threads)
        if time_limit is not None:
            h.setOptionValue("time_limit", float(max(time_limit, 0.01)))
        t0 = time.perf_counter()
        if start is not None:
            sol = highspy.HighsSolution()
            sol.col_value = list(np.asarray(start, dtype=np.float64))
            h.setSolution(sol)
        h.run()
        secs = time.perf_counter() - t0
        st = h.getModelStatus()
        name = h.modelStatusToString(st)
        info = h.getInfo()
        has_sol = int(info.primal_solution_status) == 2
        x = np.array(h.getSolution().col_value, dtype=np.float64) if has_sol else None
        obj = float(info.objective_function_value) if has_sol else np.inf
        bound = float(info.mip_dual_bound)
        gap = float(info.mip_gap) if has_sol else np.inf
        nodes = int(info.mip_node_count)
        if st == highspy.HighsModelStatus.kOptimal:
            status = OPTIMAL
        elif st in (highspy.HighsModelStatus.kInfeasible,):
            status = INFEASIBLE
        elif st in (highspy.HighsModelStatus.kTimeLimit, highspy.HighsModelStatus.kIterationLimit,
                    highspy.HighsModelStatus.kSolutionLimit, highspy.HighsModelStatus.kInterrupt):
            status = TIME_LIMIT if has_sol else NO_SOLUTION
        else:
            status = TIME_LIMIT if has_sol else ERROR
        return SolveOutcome(status, x, obj, bound, gap, secs, nodes, name)


def _solve_scipy(model: MilpModel, opt: SolverOptions) -> SolveOutcome:
    from scipy.optimize import Bounds, LinearConstraint, milp
    from scipy.sparse import csr_matrix

    t0 = time.perf_counter()
    lo, hi, starts, idx, vals = model.csr()
    cons = []
    if model.n_rows:
        A = csr_matrix((vals, idx, starts), shape=(model.n_rows, model.n_cols))
        cons.append(LinearConstraint(A, lo, hi))
    options = {"disp": False, "time_limit": float(opt.time_limit), "mip_rel_gap": float(opt.mip_rel_gap),
               "presolve": opt.presolve in (None, True)}
    with quiet_stdout():
        res = milp(model.cost, integrality=model.integer.astype(np.uint8), bounds=Bounds(model.lb, model.ub),
                   constraints=cons, options=options)
    secs = time.perf_counter() - t0
    x = np.asarray(res.x, dtype=np.float64) if res.x is not None else None
    obj = float(res.fun) + model.offset if res.x is not None else np.inf
    bound = float(getattr(res, "mip_dual_bound", np.nan) or np.nan) + model.offset
    gap = float(getattr(res, "mip_gap", np.nan) or 0.0) if x is not None else np.inf
    nodes = int(getattr(res, "mip_node_count", 0) or 0)
    if res.status == 0:
        status = OPTIMAL
    elif res.status == 2:
        status = INFEASIBLE
    elif res.status == 1:
        status = TIME_LIMIT if x is not None else NO_SOLUTION
    else:
        status = TIME_LIMIT if x is not None else ERROR
    return SolveOutcome(status, x, obj, bound, gap, secs, nodes, str(res.message))
