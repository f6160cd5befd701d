"""Optimal counterfactual explanations for tree ensembles (papers.md section 3, OCEAN), solved as a MILP.

Entry point for other passes and the public API::

    from lumber.passes.analyses.counterfactual import solve_counterfactual

    res = solve_counterfactual(forest, x, target=1, constraints=None, norm="l1", scale=None, weights=None)
    res.status      # "optimal" | "time_limit" | "infeasible" | "no_solution" | "unverified"
    res.x           # the counterfactual (feature space, model input dtype), or None
    res.cost        # its cost under the norm: sum / sqrt(sum of squares) / max of per-feature costs
    res.changes     # [Change(feature, before, after, delta)]
    res.verified    # the model predicts the target at res.x (checked on every returned point)

``solve_counterfactual(forest, x, target, constraints, *, norm, scale, weights, reference, isolation, k,
time_limit, backend, presolve, threads, mip_gap, use_warm_start, verifier, clip_to_reference,
highs_options, race)``:

- ``forest``: a lumber ``Forest`` (use ``lumber.load`` on a model object or file);
  ``x``: one case (1-D array or a one-row DataFrame).
- ``target``: a class label, ``(lo, hi)`` for regression, a ``lumber.ir.Target``, or None (any other
  class; the best of them). A ``Constraints`` object's ``target``, ``norm`` and ``scale`` override the keywords.
- ``norm``: ``"l0"``, ``"l1"``, ``"l2"`` or ``"linf"`` of the weighted, scaled change
  ``d_i = w_up_i (x_i - x0_i) / s_i`` (upward) or ``w_down_i (x0_i - x_i) / s_i`` (downward); a category
  change costs ``w_up``. The minimum is exact for all four: splits only see cells, and the cost is exact
  at every cell boundary (l2 is minimised as the sum of squares and reported as its root).
- ``scale``: None, ``"std"``, ``"minmax"`` (from ``reference`` rows) or per-feature numbers.
- ``weights``: None, a scalar, per-feature numbers, ``(down, up)`` arrays, or ``{feature: w or (down, up)}``;
  a constraint's ``cost`` wins.
- ``reference``: training rows, for scaling, for the warm start (nearest feasible row of the target,
  repaired to the constraints) and for ``clip_to_reference`` (keep values in the data's range).
- ``isolation``: ``(isolation_forest_ir, delta)``: the point must have mean isolation path length
  ``>= delta`` (see :func:`isolation_threshold`). Such a query solves the isolation forest alone first,
  then the full MILP case by case over its flags' and categories' values (``solve._discrete_cases``,
  ``solver.solve_enumerated``), with HiGHS options of its own (``solve.PLAUSIBLE_FULL_OPTIONS``).
- ``k``: also find up to ``k - 1`` further counterfactuals with other change patterns (``.alternatives``).
- ``verifier``: ``f(X) -> predictions`` of the source model (default: ``Forest.evaluate``).
- ``highs_options``: further HiGHS options as ``(name, value)`` pairs (highspy backend), applied after
  ``solver.HIGHS_DEFAULTS``.
- ``threads``: HiGHS threads (1.16 runs its parallel MIP search when above 1, and a query that branches
  first on a flag solves both sides at once); ``race=2``: instead two one-thread HiGHS runs of each MILP
  with different settings, the first proven answer wins.

The exact nearest class change of an ensemble under a weighted L1 / L2 / Linf metric, as the
sensitive-tests analysis needs it, is ``solve_counterfactual(forest, x, target=None, norm="l2",
scale=scales, weights=w).cost``; with ``constraints`` it respects the same actionability rules.

Layout: ``domain`` (feature grids, levels, mu / nu variables), ``trees`` (branch choice, flows,
consistency rows), ``objective``, ``targets``, ``actionability``, ``plausibility``, ``problem`` (one MILP),
``heuristic`` (warm start), ``solver`` (HiGHS / scipy backends), ``solve`` (driver), ``result``.
"""

from .plausibility import isolation_threshold, path_lengths
from .result import Change, CounterfactualResult
from .solve import MARGINS, make_query, solve_counterfactual
from .solver import INFEASIBLE, NO_SOLUTION, OPTIMAL, TIME_LIMIT, UNVERIFIED, SolverOptions

__all__ = [
    "Change", "CounterfactualResult", "INFEASIBLE", "MARGINS", "NO_SOLUTION", "OPTIMAL", "SolverOptions",
    "TIME_LIMIT", "UNVERIFIED", "isolation_threshold", "make_query", "path_lengths",
    "solve_counterfactual",
]
