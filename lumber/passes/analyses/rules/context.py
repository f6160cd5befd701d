"""What every rule query needs, built once per (explained model, rule forest, training data).

The explained model decides; the rule forest (a random forest fitted to the
explained model's decisions, or the model itself when it is one) estimates.
Training decisions are the explained model's, never the data's labels: the
rules explain the model (Amoukou and Brunel, "f(X) as the output of a learned
model").
"""

from __future__ import annotations

import functools
import hashlib
from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np
import numpy.typing as npt

from lumber.ir import Constraints, Forest, InputDataError, Target
from lumber.ir.display import Display
from lumber.ir.domains import Domains, infer_domains

from .cells import Bits, CellCounter, CellIndex, Routes, build_cells
from .divergent import FALLBACKS
from .sampling import AnnealOptions
from .table import LeafTable, build_leaf_table, impurity_importance
from .targets import decisions, is_classifier, margin_decisions

FloatArray = npt.NDArray[np.float64]
Scorer = Callable[[FloatArray], FloatArray]

SEARCH_MODES = ("auto", "exhaustive", "sampled")
RANKS = ("splits", "impurity")
ESTIMATE_CACHE = 1 << 18
"""Estimated route rows kept per context (the cache is cleared when it would grow past this)."""


@dataclass(frozen=True, kw_only=True)
class RuleOptions:
    """Options of ``lumber.counterfactual_rules``: the estimators, the rule search and the samples
    (K = 10, pi = pi_c = 0.9 as in the paper; :meth:`paper` switches the rest to the paper's protocol)."""

    # -- the estimators
    surrogate: Any = None
    """The random forest that estimates: None/``"auto"`` (the model itself when it is a random forest, else
    a fitted surrogate), ``"fit"``, ``"model"``, or a random forest (object, file or Forest)."""
    n_estimators: int = 20
    """Trees of the fitted surrogate."""
    max_depth: int | None = 10
    """Depth of the fitted surrogate's trees."""
    isolation: Any = None
    """A fitted scikit-learn ``IsolationForest`` (or its Forest) scoring samples; default: one fitted on the
    training rows with ``random_state=seed`` and :attr:`contamination`."""
    contamination: float | str = 0.1
    """The default isolation forest's false-alarm rate on the training rows: a sample is plausible when its
    score is above this quantile of the training rows' scores (the definition ``lumber.counterfactual``'s
    plausibility uses); ``"auto"``: scikit-learn's fixed threshold (the paper's setting)."""
    verify_with_model: bool = True
    """Also check every sample with the source model object's ``predict``."""

    # -- the rule search

    pi: float = 0.9
    """CDP a divergent set must reach."""
    pi_c: float = 0.9
    """CRP a rule box must reach."""
    k: int = 10
    """Candidate features: the K the rule forest splits on most."""
    k_max: int = 30
    """When no rule is found over the K candidates, one second pass over the ``k_max`` most-used
    features (<= k: none); see ``core.search_rules``."""
    rank: str = "splits"
    """How the K candidates are chosen: the features the rule forest splits on most (``"splits"``) or
    those with the highest impurity importance (``"impurity"``, ``table.impurity_importance``: what the
    paper's code does, with ``feature_importances_``)."""
    max_sets_wide: int = 40
    """Feature sets tried in that second pass."""
    search: str = "auto"
    """``exhaustive`` subsets, ``sampled`` from decision paths, or ``auto`` (sampled above ``max_subsets``)."""
    max_subsets: int = 2048
    max_rules: int = 5
    """Disjoint rules kept per case or region."""
    strict: bool = False
    """Only divergent sets (CDP >= pi); otherwise fall back to the best sets by CDP when none reaches pi."""
    min_cell_rows: int = 1
    """Projected Forest cells never shrink below this many training rows (``cells.CellIndex.min_rows``;
    1: the paper's definition, every determined split applies; the paper's code uses 5)."""
    fallback: str = "max_cdp"
    """When no set reaches pi: sets by CDP, highest first (the paper's code), or ``"smallest"``: the best
    set of each size, smallest first (see ``divergent.search_divergent``)."""
    max_sets: int = 10
    """Feature sets tried (best first) before giving up on a case: up to this many reaching pi, and this many
    below it (``core.rule_outcomes``)."""
    max_candidates: int = 256
    """Target rows (highest weight first) whose leaves and cells become candidate boxes; also the
    number of qualifying boxes (most plausible first) fed to the merge."""
    n_samples: int = 1
    """Counterfactual samples per case (0: none)."""
    widen: int = 6
    """When a case's best sample is an outlier, anneal up to this many further feature sets of the search
    (larger S) and keep the first whose sample is a verified inlier (0: keep the sparsest rule)."""
    widen_sets: int = 96
    """Feature sets tried after the first one that gives rules, for widening. For an outlier sample only
    those whose boxes hold a plausible counterfactual point among training values are annealed (see
    ``core.plausible_values``); for a plausible sample that is not robust enough all of them are
    screened for robustness and the ``widen`` most promising annealed (``local._by_screen``). On the
    diabetes regression sets with rules are sparse in the search order (2-7 of the first 25 tried for
    the weakest cases), so a budget of a few dozen sets leaves robust sets untried."""
    robust_search: bool = False
    """Local rules: when a case's sample (after widening) keeps the target in fewer than
    ``robust_search.SEARCH_BELOW`` of its noisy copies, search every admissible box of every feature set
    over the K candidates for the most robust point (``robust_search.most_robust_point``; seconds per
    such case) and, when it beats the sample on fresh copies, report it with its box as the rule. It lifts
    the diabetes regression's stability at sigma^2 = 0.01 above the 0.95 aimed at, at several times the
    time per case, hence opt-in (``bench/rules.py --datasets diabetes --box-ceiling``)."""
    seed: int = 0
    anneal: AnnealOptions = field(default_factory=AnnealOptions)

    @classmethod
    def paper(cls, **changes: Any) -> "RuleOptions":
        """The paper's protocol (its text and public code): no second search over ``k_max`` features, the K
        candidates by impurity importance, Projected Forest cells of at least 5 rows, scikit-learn's fixed
        isolation threshold, the sparsest rule kept (no widening) and score-only annealing (no robustness
        reward). ``changes`` override fields, as in ``RuleOptions.paper(k=8)``."""
        return cls(**{"k_max": 0, "rank": "impurity", "min_cell_rows": 5, "contamination": "auto", "widen": 0,
                      "anneal": AnnealOptions(guided=False, robust_sigma=0.0), **changes})

    def check(self) -> "RuleOptions":
        for name in ("pi", "pi_c"):
            v = getattr(self, name)
            if not 0.0 < v <= 1.0:
                raise InputDataError(f"{name} must be in (0, 1], got {v!r}")
        for name in ("k", "k_max"):
            v = getattr(self, name)
            if not (1 if name == "k" else 0) <= v <= 62:
                raise InputDataError(f"{name} must be between {1 if name == 'k' else 0} and 62, got {v!r}",
                                     "k is the number of most-used features the search considers, k_max the "
                                     "number in the second pass when no rule is found over k")
        if self.min_cell_rows < 1:
            raise InputDataError(f"min_cell_rows must be >= 1, got {self.min_cell_rows!r}")
        if self.fallback not in FALLBACKS:
            raise InputDataError(f"fallback must be one of {', '.join(FALLBACKS)}, got {self.fallback!r}")
        if self.rank not in RANKS:
            raise InputDataError(f"rank must be one of {', '.join(RANKS)}, got {self.rank!r}")
        if self.search not in SEARCH_MODES:
            raise InputDataError(f"search must be one of {', '.join(SEARCH_MODES)}, got {self.search!r}")
        if min(self.max_rules, self.max_subsets, self.max_candidates, self.max_sets, self.max_sets_wide) < 1:
            raise InputDataError("max_rules, max_subsets, max_candidates, max_sets and max_sets_wide must be at "
                                 "least 1")
        if self.widen < 0 or self.widen_sets < 0:
            raise InputDataError(f"widen and widen_sets must be >= 0, got {self.widen!r}, {self.widen_sets!r}")
        if self.n_samples < 0:
            raise InputDataError(f"n_samples must be >= 0, got {self.n_samples!r}")
        if isinstance(self.n_estimators, bool) or not isinstance(self.n_estimators, int) or self.n_estimators < 1:
            raise InputDataError(f"n_estimators must be at least 1, got {self.n_estimators!r}")
        c = self.contamination
        if not (c == "auto" or (isinstance(c, (int, float)) and not isinstance(c, bool) and 0.0 < c <= 0.5)):
            raise InputDataError(f"contamination must be 'auto' or in (0, 0.5], got {c!r}",
                                 "the share of training rows the default isolation forest calls outliers")
        return self


@dataclass(frozen=True, eq=False)
class RuleContext:
    model: Forest
    """The explained model (decisions, verification)."""
    table: LeafTable
    """The rule forest's leaves and training membership."""
    X_raw: FloatArray
    """Training rows as the explained model reads them (sample values come from here)."""
    train_decision: FloatArray
    constraints: Constraints | None
    score: Scorer | None
    """Inlier score for samples (isolation forest ``decision_function``; >= 0 is an inlier)."""
    options: RuleOptions
    cells: CellIndex
    """The rule forest's training-row routing (the Projected Forest's cells, :mod:`cells`)."""
    margins: Scorer | None = None
    """Raw margins of the explained model for prepared rows (default: its interpreter); a compiled
    predictor giving the same numbers makes sampling and plausibility checks faster."""
    domains: Domains | None = None
    """The values a person could give each feature (:mod:`lumber.ir.domains`): samples take only
    domain values (integers stay integers, no change below a feature's resolution)."""
    importance: FloatArray | None = None
    """The rule forest's impurity importance per feature (``table.impurity_importance`` on the training
    decisions), which ``RuleOptions.rank="impurity"`` ranks the candidates by."""
    _hit_bits: dict[Any, Bits] = field(default_factory=dict, repr=False)
    _estimates: dict[bytes, float] = field(default_factory=dict, repr=False)

    def decide(self, P: FloatArray) -> FloatArray:
        """The explained model's decision of each prepared row."""
        if self.margins is None:
            return decisions(self.model, P)
        return margin_decisions(self.model.schema, self.margins(P))

    def estimate(self, routes: Routes, target: Target) -> FloatArray:
        """``cells.estimate`` of each route row (Projected Forest / Regional RF), cached per
        (target, routes): the subset search, box scoring, merging, pruning and widening of a
        query ask for the same routes again (a box between the same thresholds routes alike)."""
        R = np.ascontiguousarray(routes, dtype=np.int8)
        base = hashlib.blake2b(repr((id(self.cells), target.key)).encode(), digest_size=16)
        keys = []
        for r in R:
            h = base.copy()
            h.update(r.data)
            keys.append(h.digest())
        todo: dict[bytes, int] = {}
        for i, k in enumerate(keys):
            if k not in self._estimates and k not in todo:
                todo[k] = i
        if todo:
            if len(self._estimates) + len(todo) > ESTIMATE_CACHE:
                self._estimates.clear()  # and estimate every route of this call (its cached ones are gone)
                todo = {}
                for i, k in enumerate(keys):
                    todo.setdefault(k, i)
            idx = np.fromiter(todo.values(), dtype=np.int64, count=len(todo))
            got = self.cells.estimate(R[idx], self.hit_bits(target))[0]
            self._estimates.update(zip(todo.keys(), got.tolist()))
        return np.array([self._estimates[k] for k in keys], dtype=np.float64)

    def score_and_decide(self, P: FloatArray) -> tuple[FloatArray, FloatArray]:
        """Inlier score and the explained model's decision of each point (requires ``score``).

        Not cached: rule construction scores the same (case, training value) points again for
        every feature set, but with the compiled margins (``margins``, the API's ``Margins``) a
        point costs a few microseconds, less than looking it up by its bytes did."""
        assert self.score is not None
        P = np.ascontiguousarray(P, dtype=np.float64)
        return np.asarray(self.score(P), dtype=np.float64).reshape(-1), self.decide(P)

    @property
    def names(self) -> list[str]:
        return self.model.schema.feature_names

    @functools.cached_property
    def display(self) -> Display:
        """How rule conditions print: the rule forest's cells (its thresholds bound the boxes), the
        explained model's labels, the request's domains."""
        return Display(self.table.forest, self.domains if self.domains is not None else infer_domains(self.model.schema))

    def hit(self, target: Target) -> npt.NDArray[np.bool_]:
        return target.hit(self.train_decision)

    def hit_bits(self, target: Target) -> Bits:
        """Target rows packed as a bitset (cached per target set)."""
        key = target.key
        if key not in self._hit_bits:
            self._hit_bits[key] = self.cells.hit_bits(self.hit(target))
        return self._hit_bits[key]


def build_context(model: Forest, rule_forest: Forest, X_train: Any, *, constraints: Constraints | None = None,
                  score: Scorer | None = None, options: RuleOptions | None = None,
                  margins: Scorer | None = None, domains: Domains | None = None,
                  cell_counts: CellCounter | None = None) -> RuleContext:
    """Prepare the training rows for both forests and record the explained model's decisions
    (``cell_counts``: a faster counter of the estimators' bitsets, ``cells.CellIndex.counter``)."""
    opts = (options or RuleOptions()).check()
    if rule_forest.schema.feature_names != model.schema.feature_names:
        raise InputDataError("the rule forest reads other features than the explained model",
                             f"model: {', '.join(model.schema.feature_names[:8])}; rule forest: "
                             f"{', '.join(rule_forest.schema.feature_names[:8])}")
    X_raw = model.prepare_input(X_train)
    table = build_leaf_table(rule_forest, X_train)
    dec = decisions(model, X_raw)
    return RuleContext(model, table, X_raw, dec, constraints, score, opts,
                       build_cells(rule_forest, table.X, min_rows=opts.min_cell_rows, counter=cell_counts), margins,
                       domains, impurity_importance(table, dec, is_classifier(model)))


__all__ = ["RANKS", "RuleContext", "RuleOptions", "SEARCH_MODES", "build_context"]
