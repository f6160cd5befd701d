"""Optimal counterfactual explanations for tree ensembles (OCEAN, Parmentier & Vidal 2021), solved as a MILP.

Entry point for other passes and the public API::

    from lumber.passes.analyses.counterfactual import CounterfactualOptions, solve_counterfactual

    res = solve_counterfactual(forest, x, target=1, constraints=None,
                               options=CounterfactualOptions(norm="l1", time_limit=30))
    res.status      # "optimal" | "time_limit" | "infeasible" | "no_solution" | "unverified"
    res.x           # the counterfactual (feature space, model input dtype), or None
    res.cost        # its cost under the norm: sum / sqrt(sum of squares) / max of per-feature costs
    res.changes     # [Change(feature, before, after, delta)]
    res.verified    # the model predicts the target at res.x (checked on every returned point)

``solve_counterfactual(forest, x, target, constraints, *, options, reference, isolation, verifier, clock)``:

- ``forest``: a lumber ``Forest`` (use ``lumber.load`` on a model object or file);
  ``x``: one case (1-D array or a one-row DataFrame).
- ``target``: a class label, ``(lo, hi)`` for regression, a ``lumber.ir.Target``, or None (any other
  class; the best of them). A ``Constraints`` object's ``target``, ``norm`` and ``scale`` override the options.
- ``options``: a :class:`CounterfactualOptions` (norm, scale, weights, ``k``, domains, time limit,
  search strategy, HiGHS options, encoding). The norm is ``"l0"``, ``"l1"``, ``"l2"`` or ``"linf"`` of
  the weighted, scaled change ``d_i = w_up_i (x_i - x0_i) / s_i`` (upward) or
  ``w_down_i (x0_i - x_i) / s_i`` (downward); a category change costs ``w_up``. The minimum is exact for
  all four: splits only see cells, and the cost is exact at every cell boundary (l2 is minimised as the
  sum of squares and reported as its root).
- ``reference``: training rows, for scaling, for the warm start (nearest feasible row of the target,
  repaired to the constraints) and for ``clip_to_reference`` (keep values in the data's range).
- ``isolation``: ``(isolation_forest_ir, delta)``: the point must have mean isolation path length
  ``>= delta`` (see :func:`isolation_threshold`). Such a query solves the isolation forest alone first
  (its optimum bounds the cost and starts the warm start), then the full MILP with the search strategy
  of ``options.strategy``.
- ``verifier``: ``f(X) -> predictions`` of the source model (default: ``Forest.evaluate``).

The exact nearest class change of an ensemble under a weighted L1 / L2 / Linf metric, as the
sensitive-tests analysis needs it, is ``solve_counterfactual(forest, x, target=None,
options=CounterfactualOptions(norm="l2", scale=scales, weights=w)).cost``; with ``constraints`` it
respects the same actionability rules.

Layout: ``options`` (what a query may use), ``domain`` (feature grids, levels, mu / nu variables),
``trees`` (branch choice, flows, consistency rows), ``objective``, ``targets``, ``actionability``,
``plausibility``, ``leafcuts`` (leaf-cost rows and pruning), ``problem`` (one MILP), ``heuristic``
(warm start), ``fastpath`` (the per-tree bound that proves a warm start optimal without a MILP),
``bestfirst`` (the best-first box search, before the MILP where the constraints limit the number of
changes: ``options.box_search``), ``solver`` (the HiGHS adapter), ``solve`` (driver and search
strategies), ``reference`` (what a batch builds once), ``result``.
"""

from .options import CounterfactualOptions
from .plausibility import isolation_threshold, path_lengths
from .result import Change, CounterfactualResult
from .solve import MARGINS, make_query, solve_counterfactual
from .solver import INFEASIBLE, NO_SOLUTION, OPTIMAL, TIME_LIMIT, UNVERIFIED, SolverOptions

__all__ = [
    "Change", "CounterfactualOptions", "CounterfactualResult", "INFEASIBLE", "MARGINS", "NO_SOLUTION", "OPTIMAL",
    "SolverOptions", "TIME_LIMIT", "UNVERIFIED", "isolation_threshold", "make_query", "path_lengths",
    "solve_counterfactual",
]
