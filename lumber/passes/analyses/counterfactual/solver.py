"""The HiGHS adapter: a :class:`MilpModel` in, a :class:`SolveOutcome` out.

The model is loaded in bulk (one ``addCols``/``addRows`` CSR call each), HiGHS
stays silent, and every answer is checked before it is trusted (see
:func:`solve`). :func:`solve_enumerated` solves a model case by case over a
disjunction the caller proves complete. Every MILP in lumber goes through here:
counterfactuals and the re-composition's set cover.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, replace

import highspy
import numpy as np
import numpy.typing as npt

from ...highs import new_highs
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
    """What HiGHS may use for one solve. ``presolve=None`` keeps HiGHS's default (on)."""

    time_limit: float = 60.0
    threads: int = 1
    mip_rel_gap: float = 1e-6
    mip_abs_gap: float = 1e-9
    presolve: bool | None = None
    seed: int = 0
    highs_options: tuple[tuple[str, object], ...] = ()
    """Further HiGHS options by name (e.g. ``(("mip_heuristic_effort", 0.01),)``), applied last."""
    defaults: tuple[tuple[str, object], ...] = ()
    """Options applied before ``highs_options`` (:data:`HIGHS_DEFAULTS` for counterfactual MILPs)."""


HIGHS_DEFAULTS: tuple[tuple[str, object], ...] = (
    ("mip_heuristic_run_rins", False),
    ("mip_heuristic_run_rens", False),
)
"""HiGHS options every counterfactual MILP starts from (``SolverOptions.highs_options`` come after them
and win). Without the RINS and RENS sub-MIPs: these models arrive with a warm start (or find a point at
the root), and the sub-MIPs then spend most of the time before the proof (measured on OCEAN's Table 4
credit queries, RF 100 x 5 with an isolation forest 100 x 32, l1, one thread: captured MILPs took
1.80 / 1.95 / 1.87 / 4.65 s where stock HiGHS took 3.10 / 2.50 / 2.68 / 6.31 s)."""


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
    another ``threads`` value then ends at once with status "Not Set" and no point (after a
    ``threads=2`` query every ``threads=1`` query came back as ``error``). Restarting it costs nothing
    between solves; it must come from the thread that solves next."""
    with _SCHEDULER_LOCK:
        if _SCHEDULER_THREADS and _SCHEDULER_THREADS[0] != threads:
            reset = getattr(highspy.Highs, "resetGlobalScheduler", None)
            if reset is not None:
                reset(True)
        _SCHEDULER_THREADS[:] = [threads]


def solve(model: MilpModel, options: SolverOptions, start: FloatArray | None = None) -> SolveOutcome:
    """Solve ``model`` with HiGHS; ``start`` is a feasible assignment to warm-start from.

    Trusted only where the answer checks out: with a start solution HiGHS 1.16 can report the optimum's
    objective while handing back the start's columns (objective 0.5, columns of cost 1.5). The returned
    columns must price at the reported objective; if they do not, the model is solved again without the
    start, in the time left."""
    if model.n_cols == 0:  # everything was decided while building
        bad = model.infeasible_constant_rows > 0
        return SolveOutcome(INFEASIBLE if bad else OPTIMAL, None if bad else np.zeros(0), model.offset,
                            model.offset, 0.0, 0.0, 0, "empty model")
    out = HighsSession(model, options).run(start)
    if start is None or out.x is None:
        return out
    priced = float(model.cost @ out.x) + float(model.offset)
    if abs(priced - out.objective) <= 1e-7 * (1.0 + abs(out.objective)):
        return out
    rest = max(float(options.time_limit) - out.seconds, 0.01)
    again = HighsSession(model, replace(options, time_limit=rest)).run(None)
    return replace(again, seconds=again.seconds + out.seconds)


Case = tuple[npt.NDArray[np.int64], FloatArray]
"""Columns and the values they are fixed at: one side of a disjunction the caller branches on."""


CASE_LP_SECONDS = 0.25
"""How long :func:`solve_enumerated` lets a case's LP run before the case goes to its MILP undecided."""


def solve_enumerated(model: MilpModel, options: SolverOptions, start: FloatArray | None, cases: list[Case],
                     floors: FloatArray, lp_seconds: float = CASE_LP_SECONDS) -> SolveOutcome:
    """Solve ``model`` case by case, cheapest floor first, with the best point so far as the cutoff.

    ``cases`` must cover every integer solution of ``model`` whose objective is below ``start``'s, and
    ``floors[k]`` must bound the objective (offset included) of every solution in case ``k`` from below.
    A case closes when its floor reaches the incumbent, when its LP relaxation cut off at the incumbent is
    infeasible (one LP loaded once, each case's columns fixed in turn, at most ``lp_seconds``), or
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
    lp = _CaseLp(model, options) if np.isfinite(inc) and lp_seconds > 0 else None
    nodes, messages = 0, []
    for k in [int(k) for k in np.argsort(floors, kind="stable")]:
        if floors[k] >= inc or _left(options, t0) <= 0:
            continue
        held = _holds(start, cases[k])
        if lp is not None and not (held and inc == start_obj):  # (the start's case has a point at the cutoff)
            floors[k] = max(floors[k], lp.floor(cases[k], inc, min(lp_seconds, _left(options, t0))))
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
        self.session = HighsSession(model, replace(options, highs_options=(), threads=1), relaxed=True)
        h = self.session.h
        self.lb, self.ub, self.offset = model.lb, model.ub, float(model.offset)
        nz = np.flatnonzero(model.cost)
        self.row = int(h.getNumRow())
        h.addRow(-self.session.inf, self.session.inf, int(nz.shape[0]), nz.astype(np.int32), model.cost[nz])
        self.fixed = np.zeros(0, dtype=np.int64)

    def floor(self, case: Case, cutoff: float, time_limit: float) -> float:
        """The case's LP optimum under ``objective <= cutoff``: +inf when infeasible, -inf when undecided."""
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


class HighsSession:
    """One model loaded into HiGHS, to be solved (again) with :meth:`run`."""

    def __init__(self, model: MilpModel, opt: SolverOptions, relaxed: bool = False) -> None:
        self.model, self.opt = model, opt
        h = self.h = new_highs()
        h.setOptionValue("time_limit", float(opt.time_limit))
        h.setOptionValue("threads", int(opt.threads))
        h.setOptionValue("mip_rel_gap", float(opt.mip_rel_gap))
        h.setOptionValue("mip_abs_gap", float(opt.mip_abs_gap))
        h.setOptionValue("random_seed", int(opt.seed))
        h.setOptionValue("presolve", "on" if opt.presolve in (None, True) else "off")
        self.threads = int(opt.threads)
        for name, value in tuple(opt.defaults) + tuple(opt.highs_options):
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

    def run(self, start: FloatArray | None = None, time_limit: float | None = None) -> SolveOutcome:
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


