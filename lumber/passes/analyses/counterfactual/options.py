"""What a counterfactual query may use: one frozen options object, the only way to set the search.

``lumber.counterfactual(model, x, options=CounterfactualOptions(norm="l2", time_limit=10))``; the same
object goes to :func:`~lumber.passes.analyses.counterfactual.solve_counterfactual`. A constraint file's
``norm``, ``scale`` and ``cost`` lines win over :attr:`norm`, :attr:`scale` and :attr:`weights`.
"""

from __future__ import annotations

import numbers
from dataclasses import dataclass
from typing import Any

from lumber.ir import InputDataError, Norm
from lumber.ir.domains import Domains

STRATEGIES = ("whole", "cases")
BOX_SEARCH = ("auto", "first", "off")


@dataclass(frozen=True, kw_only=True)
class CounterfactualOptions:
    """Options of one counterfactual query (and of every case of a batch)."""

    # -- the question
    norm: str | Norm = "l1"
    """``"l0"``, ``"l1"``, ``"l2"`` or ``"linf"`` of the weighted, scaled change."""
    scale: Any = None
    """None, ``"std"``, ``"minmax"`` (from the reference rows) or one number per feature."""
    weights: Any = None
    """None, a scalar, one number per feature, ``(down, up)`` arrays, or ``{feature: w or (down, up)}``."""
    k: int = 1
    """Counterfactuals per case: the optimum and up to ``k - 1`` more with other change patterns."""
    clip_to_reference: bool = False
    """Keep every value within the reference rows' range (and the case's own value)."""
    domains: Domains | None = None
    """The values a person could give each feature; None: inferred from the schema, constraints and reference."""
    isolation_forest: Any = None
    """Plausibility: a fitted ``IsolationForest`` (or its Forest) trained on the target class."""
    contamination: float | None = None
    """Plausibility without a forest: fit one on the reference rows of the target class at this contamination."""
    seed: int = 0
    """Seed of a fitted isolation forest and of HiGHS."""
    verify_with_model: bool = True
    """Check every point with the source model's own ``predict`` (else with the lowered Forest)."""

    # -- the search
    time_limit: float = 30.0
    """Seconds per case for the whole query (warm start, model building, solving, verification)."""
    strategy: str = "cases"
    """``"cases"``: a plausible query is solved case by case over its two-valued and categorical features
    (when there are at most :attr:`max_cases` combinations below the warm start's cost; else over the one
    flag the plausible relaxation flips); ``"whole"``: one MILP."""
    max_cases: int = 64
    box_search: str = "auto"
    """The best-first box search (``bestfirst.py``) before the MILP, on the queries it takes (no isolation
    forest, relations or implications): ``"auto"``: when the constraints limit the number of changes
    (``changes <= k``, where the MILP's relaxation is weakest); ``"first"``: always; ``"off"``: never.
    It may use the whole time limit; the MILP gets what is left when it has not proven the answer. A query
    that goes to it skips the fast path (its first box proves what the fast path would)."""
    """More combinations than this below the warm start's cost: ``"cases"`` splits on one flag only."""
    warm_start: bool = True
    """Start from a heuristic point (reference rows repaired to the constraints, a greedy walk), which also
    bounds the domains; False: the MILP alone."""
    fast_path: bool = True
    """Before building a MILP, try to prove the warm start optimal by the per-tree bound
    (``fastpath.leaf_bound_proves``, about a millisecond); False: every query goes to the MILP."""
    relaxation_share: float = 0.25
    """Share of the time left that a plausible query's relaxation (the isolation forest without the
    explained model) may use."""
    threads: int = 1
    """HiGHS threads per query."""
    mip_gap: float = 1e-6
    """Relative gap at which HiGHS stops and the point counts as optimal."""
    presolve: bool | None = None
    """HiGHS presolve; None: HiGHS's default (on)."""
    highs_options: tuple[tuple[str, Any], ...] = ()
    """Further HiGHS options as ``(name, value)`` pairs, applied last."""

    # -- the encoding
    integer_flows: bool = True
    """Declare the tree flows binary in a MILP with an isolation forest (cliques for the solver)."""
    interval_rows: bool = True
    """Tree consistency as cumulative interval rows (stronger LP) instead of a pair of rows per node."""
    compact_levels: bool = True
    """One level per cut, on the side nearer the case (False: both sides)."""
    prune_leaves: bool = True
    """With a warm start, drop the leaves whose cheapest point costs more than it."""
    window: int | None = None
    """Cells the greedy walk tries beside each numeric feature's value (farther ones sparsely); None: all."""

    def __post_init__(self) -> None:
        Norm.parse(self.norm)  # raises on an unknown norm
        if not isinstance(self.time_limit, numbers.Real) or not self.time_limit > 0:  # NaN fails too
            raise InputDataError(f"time_limit must be a number of seconds above 0, got {self.time_limit!r}",
                                 "it bounds each case's whole query; math.inf: no limit")
        if self.strategy not in STRATEGIES:
            raise InputDataError(f"unknown counterfactual strategy {self.strategy!r}",
                                 f"accepted: {', '.join(STRATEGIES)}")
        for name in ("k", "threads", "max_cases"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, numbers.Integral) or v < 1:
                raise InputDataError(f"{name} must be a whole number of at least 1, got {v!r}")
        if not (isinstance(self.mip_gap, numbers.Real) and 0 <= self.mip_gap < 1):
            raise InputDataError(f"mip_gap must lie in [0, 1), got {self.mip_gap!r}")
        if self.box_search not in BOX_SEARCH:
            raise InputDataError(f"unknown box_search {self.box_search!r}", f"accepted: {', '.join(BOX_SEARCH)}")
        if not (isinstance(self.relaxation_share, numbers.Real) and 0 < self.relaxation_share < 1):
            raise InputDataError(f"relaxation_share must lie in (0, 1), got {self.relaxation_share!r}")
        if self.window is not None and (not isinstance(self.window, numbers.Integral) or self.window < 1):
            raise InputDataError(f"window must be None or a whole number of at least 1, got {self.window!r}")
        if self.contamination is not None and not (0 < float(self.contamination) <= 0.5):
            raise InputDataError(f"contamination must lie in (0, 0.5], got {self.contamination!r}")
