"""``oblivious``: Polynomial -> ObliviousEnsemble, exact (MonoForest re-composition, Algorithm 1 and beyond).

An oblivious tree over a condition set ``S`` computes any function of those
conditions, in particular any sum of monomials whose conditions lie in ``S``:
its table row ``idx`` holds the sum of the weights of its monomials whose
conditions all hold at ``idx`` (a subset-sum over the hypercube). So a
re-composition is a *cover*: every monomial goes to one tree whose condition
set contains it, and the ensemble's polynomial is the input polynomial again
(exact up to float rounding of the table sums).

Strategies:

``greedy`` (the paper's Algorithm 1): monomials from most conditions to
fewest; one that fits in an existing tree joins it, else it starts a tree
with exactly its conditions. One tree per maximal monomial.

``pack``: the same order, but a monomial that fits nowhere may
also *extend* the existing tree that already holds most of its conditions,
when the grown tree stays within ``max-depth`` and the tables within a total
budget (:class:`CostModel`: a table lookup per tree and row is the evaluator's
main cost, levels are nearly free, so fewer and deeper trees are faster).
Afterwards trees whose condition sets nest are merged (``merge``), smallest
first.

``grow`` (default): tree at a time. The maximal monomials (no monomial one condition
larger contains them) decide the cover, their subsets follow. Trees start from
maximal monomials no two of which fit in one tree (each needs its own anyway,
:func:`cover_lower_bound`), then from the largest uncovered one; a tree grows one or two conditions
at a time, always by the condition (pair) that completes the most uncovered
maximal monomials per level added, until ``max-depth``; then every maximal
monomial inside its level set is covered. Filling one tree before starting the
next packs monomials that share conditions; on LightGBM 500 x 63 at depth 10 it
needs about a quarter fewer trees than ``pack`` (``bench/oblivious.py --recompose`` measures both). A local search
(:func:`polish_sets`) then trims every tree to the monomials only it covers and removes (or shrinks)
the trees whose monomials fit into the others.

Depth (``max-depth=auto``, the default, with ``grow``): deeper tables hold more monomials each, so a cover
needs fewer of them, but each costs more per row once its index outgrows a byte. :func:`choose_depth`
prices unpolished ``grow`` covers by the measured cost of one table per row at its depth
(:data:`COST_FILE`, with the command that measured it) from depth 10 deeper while cheaper, then shallower,
gives up a cover as soon as it costs more than the cheapest, and keeps the cheapest whose tables fit
``table-mb``; a runtime measured on other rows passes its own costs (:class:`CostModel`).

Covering non-maximal monomials needs no search: a monomial one condition
short of an already placed monomial goes to that monomial's tree (one
vectorized step per degree); only the rest (maximal monomials, or ones whose
supersets skip a degree) are placed one by one through an inverted index
from conditions to trees. Monomials whose weights touch one output only go
to scalar trees of that output, others to vector trees.

Conditions become levels: ``x > b`` (NaN: ``cond_nan_true``), the
MISSING condition ``x is NaN`` becomes ``x > +inf`` true on NaN, and the
category conditions become category levels (``ObliviousEnsemble`` docstring).
A tree's category conditions of one feature exclude each other, so its ``n``
codes of that feature share ``n.bit_length()`` levels: level ``j`` is the set of
codes whose 1-based rank in the tree has bit ``j`` ("not a valid category" is the
code -1), and the levels read the rank, 0 when the value is none of them
(:func:`category_groups`). Thresholds of one numeric feature in a tree share
levels the same way (``bins``, default on): ``k`` of them are ``k.bit_length()``
bin levels holding the count of thresholds below the value (the
``ObliviousEnsemble`` docstring's bin code), so the strategies price them like
category codes (:func:`level_groups`). Every strategy counts a tree's size in
these levels.
"""

from __future__ import annotations

import json
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar, Literal

import numpy as np
import numpy.typing as npt
import scipy.sparse

from lumber.ir import CompileError, ObliviousEnsemble, Polynomial
from lumber.ir.oblivious import INVALID_CODE, MAX_DEPTH
from lumber.ir.polynomial import ConditionKind

from ..analyses.counterfactual.model import MilpModel
from ..analyses.counterfactual.solver import SolverOptions, solve
from ..base import PassContext, PassReport, Transform

STRATEGIES = ("greedy", "pack", "grow")
SEED_LIMIT = 20_000
"""Largest maximal monomials searched for ones that need a tree each (``grow`` seeds, :func:`cover_lower_bound`)."""
POOL_SECONDS = 120.0
"""Most seconds HiGHS spends choosing trees from the pooled covers (``restarts``)."""
POLISH_ROUNDS = 20
"""Most rounds of :func:`polish_sets` after ``grow`` (each removes fewer trees; rounds also stop below 0.1%)."""
DEFAULT_MAX_DEPTH = 8
"""``pack`` and ``greedy``'s depth for ``max-depth=auto``: tables of up to 256 rows, the C evaluator's fastest
index width (one byte) and L1-sized tables."""


COST_FILE = Path(__file__).with_name("table_cost.json")
"""The measured cost of one table per row by its depth, with the command that measured it
(``bench/oblivious.py --table-cost --save-costs``), where it ran and on what."""


def measured_table_ns(path: Path = COST_FILE) -> tuple[float, ...]:
    """Nanoseconds per row of one table by its depth (index 0-:data:`MAX_DEPTH`) from ``path``'s
    ``ns_by_depth``: a depth below the shallowest measured one costs as much as it, one between two
    measured depths is interpolated linearly, one past the deepest adds the last measured step per level."""
    doc = json.loads(path.read_text(encoding="utf-8"))
    measured = sorted((int(d), float(v)) for d, v in doc["ns_by_depth"].items())
    if not measured:
        raise CompileError(f"{path.name} holds no table costs", "rerun bench/oblivious.py --table-cost --save-costs")
    d, v = np.array([x[0] for x in measured], dtype=np.float64), np.array([x[1] for x in measured])
    depths = np.arange(MAX_DEPTH + 1, dtype=np.float64)
    ns = np.interp(depths, d, v)
    if d.shape[0] > 1:
        step = (v[-1] - v[-2]) / (d[-1] - d[-2])
        ns = np.where(depths > d[-1], v[-1] + step * (depths - d[-1]), ns)
    return tuple(float(x) for x in ns)


TABLE_NS = measured_table_ns()
"""Nanoseconds per row of one table by its depth (index 0-16), from :data:`COST_FILE`."""
AUTO_DEPTHS = (8, 10, 12, 14, 16)
"""The depths ``max-depth=auto`` weighs (:func:`choose_depth`), with the polynomial's degree when deeper."""


@dataclass(frozen=True)
class CostModel:
    """Relative evaluation cost of one tree per row: ``lookup + level * depth`` (``pack``'s placements);
    ``table_ns`` by depth for the whole cover (``max-depth=auto``).

    The table lookup dominates (the C evaluator computes the levels of 32 rows per
    vector instruction), so fewer, deeper trees are cheaper as long as their tables stay
    cache-friendly: ``max-depth`` bounds one table, ``budget_bytes`` all of them together
    (no tree grows past it). A monomial that fits nowhere may also join one of the
    ``recent`` trees it shares no condition with.
    """

    lookup: float = 1.0
    level: float = 0.06
    budget_bytes: int = 64 << 20
    recent: int = 8
    table_ns: tuple[float, ...] = TABLE_NS
    """Cost of one table per row by its depth (the index); past the end, the last step repeats per level.
    A table runtime measured on the user's rows can pass its own."""
    depths: tuple[int, ...] = AUTO_DEPTHS
    """Candidate depths of ``max-depth=auto``."""
    first: int = 10
    """The depth ``max-depth=auto`` prices first (:func:`choose_depth`): the search goes deeper from there,
    then shallower."""

    def tree(self, depth: int) -> float:
        return self.lookup + self.level * depth

    def table(self, depth: int) -> float:
        """``table_ns`` at ``depth`` (extrapolated linearly past its end)."""
        ns = self.table_ns
        if depth < len(ns):
            return float(ns[depth])
        step = ns[-1] - ns[-2] if len(ns) > 1 else 0.0
        return float(ns[-1] + step * (depth - len(ns) + 1))

    def cover(self, levels: list[int]) -> float:
        """Cost of a cover per row: its trees' tables summed."""
        return sum(self.table(d) for d in levels)


class OverBudget(Exception):
    """A ``grow`` cover given up once its trees cost more than a limit (:func:`grow_sets` ``give_up``)."""

    def __init__(self, trees: int, cost: float) -> None:
        super().__init__(f"{trees} trees cost {cost:.1f} ns/row, over the limit")
        self.trees, self.cost = trees, cost


@dataclass
class _Cover:
    """Trees being built: condition sets, their level counts, a dense tree x condition membership
    matrix and per-tree group counts (so a placement scores every tree in one numpy step), and the
    table bytes so far.

    ``groups[c]`` is the category group of condition ``c`` (-1: a level of its own); a tree
    holding ``n`` codes of one group spends ``n.bit_length()`` levels on them (:func:`category_groups`).
    """

    max_depth: int
    strategy: str
    cost: CostModel
    groups: npt.NDArray[np.int64]
    sets: list[set[int]] = field(default_factory=list)
    levels: list[int] = field(default_factory=list)
    group_count: list[Counter[int]] = field(default_factory=list)
    table_bytes: int = 0
    extensions: int = 0
    scored: int = 0
    """Placements scored against every tree (one vectorized step each)."""

    def __post_init__(self) -> None:
        g = self.groups
        self._dense_group = np.full(g.shape[0], -1, dtype=np.int64)  # condition -> dense group column
        gid = np.unique(g[g >= 0])
        if gid.size:
            self._dense_group[g >= 0] = np.searchsorted(gid, g[g >= 0])
        self._member = np.zeros((g.shape[0], 16), dtype=bool)  # condition x tree: a condition's row is contiguous
        self._gcount = np.zeros((max(int(gid.size), 1), 16), dtype=np.int64)  # group x tree
        self._levels = np.zeros(16, dtype=np.int64)
        self._bitlen = np.array([k.bit_length() for k in range(g.shape[0] + 2)], dtype=np.int64)

    def _reserve(self, t: int) -> None:
        if t < self._levels.shape[0]:
            return
        cap = 2 * self._levels.shape[0]
        for name in ("_member", "_gcount", "_levels"):
            old = getattr(self, name)
            new = np.zeros(old.shape[:-1] + (cap,), dtype=old.dtype)
            new[..., :old.shape[-1]] = old
            setattr(self, name, new)

    def _record(self, t: int, new: set[int]) -> None:
        cols = np.fromiter(new, dtype=np.int64, count=len(new))
        self._member[cols, t] = True
        dg = self._dense_group[cols]
        np.add.at(self._gcount[:, t], dg[dg >= 0], 1)
        self._levels[t] = self.levels[t]

    def grown(self, t: int, new: set[int]) -> int:
        """Levels of tree ``t`` with the conditions ``new`` (none of them in it yet) added."""
        if t < 0:
            return _levels(new, self.groups)
        levels = self.levels[t]
        gc = self.group_count[t]
        add: Counter[int] = Counter()
        for c in new:
            g = int(self.groups[c])
            if g < 0:
                levels += 1
            else:
                add[g] += 1
        for g, k in add.items():
            n = gc.get(g, 0)
            levels += (n + k).bit_length() - n.bit_length()
        return levels

    def new_tree(self, conds: set[int]) -> int:
        t = len(self.sets)
        self._reserve(t)
        self.sets.append(set(conds))
        self.levels.append(_levels(conds, self.groups))
        self.group_count.append(Counter(int(self.groups[c]) for c in conds if self.groups[c] >= 0))
        self._record(t, set(conds))
        self.table_bytes += 8 << self.levels[t]
        return t

    def extend(self, t: int, conds: set[int]) -> None:
        s = self.sets[t]
        new = conds - s
        grown = self.grown(t, new)
        self.table_bytes += (8 << grown) - (8 << self.levels[t])
        self.levels[t] = grown
        s |= new
        for c in new:
            if self.groups[c] >= 0:
                self.group_count[t][int(self.groups[c])] += 1
        self._record(t, new)
        self.extensions += 1

    def covering(self, conds: list[int]) -> int:
        """The first tree containing every condition, or -1."""
        T = len(self.sets)
        if T == 0:
            return -1
        rows = self._member[conds, :T]
        hit = np.flatnonzero(np.logical_and.reduce(rows, axis=0))
        return int(hit[0]) if hit.size else -1

    def place(self, conds: list[int]) -> int:
        """Tree for a monomial no tree covers: a new one, or (pack) the cheapest extension:
        fewest new levels, then the smallest grown table, then the oldest tree.

        Candidates are the trees sharing a condition with the monomial and the ``recent`` newest;
        all of them are scored at once (levels each would grow by, from the membership matrix and
        the group counts), so a placement costs one pass over the trees in numpy, never a Python
        loop over them."""
        cs = set(conds)
        T = len(self.sets)
        if self.strategy != "pack" or T == 0:
            return self.new_tree(cs)
        self.scored += 1
        own = _levels(cs, self.groups)
        cols = np.array(sorted(cs), dtype=np.int64)
        has = self._member[cols, :T]
        size = self._levels[:T]
        dg = self._dense_group[cols]
        plain = dg < 0
        grown = size + (plain.sum() - has[plain].sum(axis=0))
        if not plain.all():
            n = self._gcount[dg[~plain], :T]  # a monomial holds at most one code per group
            step = self._bitlen[n + 1] - self._bitlen[n]
            grown = grown + np.where(has[~plain], 0, step).sum(axis=0)
        ok: npt.NDArray[np.bool_] = np.asarray(has.any(axis=0))
        ok[max(0, T - self.cost.recent):] = True
        ok &= grown <= self.max_depth
        grow_bytes = (8 << grown) - (8 << size)
        ok &= ~((grow_bytes > (8 << own)) & (self.table_bytes + grow_bytes > self.cost.budget_bytes))
        cand = np.flatnonzero(ok)
        if cand.size == 0:
            return self.new_tree(cs)
        diff = grown[cand] - size[cand]
        cand = cand[diff == diff.min()]
        t = int(cand[np.argmin(grown[cand])])  # argmin: the oldest among equals
        if self.cost.level * int(grown[t] - size[t]) > self.cost.tree(own):
            return self.new_tree(cs)
        self.extend(t, cs)
        return t


def _levels(conds: Any, groups: npt.NDArray[np.int64]) -> int:
    """Levels a tree over ``conds`` needs: one per condition outside a group, ``n.bit_length()``
    for the ``n`` codes of each category group."""
    per: Counter[int] = Counter()
    levels = 0
    for c in conds:
        g = int(groups[c])
        if g < 0:
            levels += 1
        else:
            per[g] += 1
    return levels + sum(n.bit_length() for n in per.values())


def level_groups(poly: Polynomial, bins: bool = True) -> npt.NDArray[np.int64]:
    """``int64[n_conditions + 1]``: the group of each condition whose tree levels it shares with the
    others of its group, -1 for the others and the padding id: the category groups
    (:func:`category_groups`, group id = the feature) and, with ``bins``, the thresholds of each
    numeric feature (group id ``n_features + f``), which a tree holds as a bin code.

    A bin code gives NaN one code, so a feature's thresholds form one group only when the ones
    true on NaN are its lowest (a NaN then reads as "above those"); otherwise the thresholds true
    on NaN and the others form two groups (``n_features + f`` and ``2 n_features + f``). A group
    two of whose conditions meet in one monomial (not canonical) keeps one level per condition."""
    groups = category_groups(poly)
    if not bins:
        return groups
    F = poly.schema.n_features
    kind = poly.cond_kind
    num = (kind == ConditionKind.GREATER) & np.isfinite(poly.cond_threshold)
    feat = poly.cond_feature.astype(np.int64)
    num_groups = np.where(num, F + feat, -1)
    for f in np.unique(feat[num]).tolist():
        at = np.flatnonzero(num & (feat == f))
        nan = poly.cond_nan_true[at][np.argsort(poly.cond_threshold[at], kind="stable")]
        if np.any(nan[1:] & ~nan[:-1]):  # not a prefix: split by NaN bit
            num_groups[at[poly.cond_nan_true[at]]] = 2 * F + f
    num_groups = _ungroup_shared(poly, num_groups)
    groups[:-1] = np.where(num_groups >= 0, num_groups, groups[:-1])
    return groups


def _ungroup_shared(poly: Polynomial, groups: npt.NDArray[np.int64]) -> npt.NDArray[np.int64]:
    """``groups`` with every group two of whose conditions meet in one monomial set to -1."""
    groups = groups.copy()
    if (groups >= 0).any() and poly.nnz:
        g_ent = groups[poly.mono_cond]
        sel = g_ent >= 0
        nf = int(groups.max()) + 1
        u, cnt = np.unique(poly.mono_of_entry[sel].astype(np.int64) * nf + g_ent[sel], return_counts=True)
        bad = np.unique(u[cnt > 1] % nf)
        groups[np.isin(groups, bad)] = -1
    return groups


def category_groups(poly: Polynomial) -> npt.NDArray[np.int64]:
    """``int64[n_conditions + 1]``: the category group (the feature) of each ``EQUAL``/``INVALID``
    condition, -1 for the others and for the padding id ``n_conditions``.

    The category conditions of one feature are mutually exclusive (a value has one code, or
    none), so a tree holding ``n`` of them needs ``n.bit_length()`` levels, not ``n``: level ``j``
    tests ``code in {codes whose 1-based rank in the tree has bit j}``, and the levels together
    read the rank (0: none of them). A feature whose category conditions meet in one monomial
    (never the case for canonical polynomials) keeps one level per condition.
    """
    kind = poly.cond_kind
    cat = (kind == ConditionKind.EQUAL) | (kind == ConditionKind.INVALID)
    groups = _ungroup_shared(poly, np.where(cat, poly.cond_feature.astype(np.int64), -1))
    return np.append(groups, -1)


@dataclass(frozen=True)
class RecomposeOblivious(Transform[Polynomial, ObliviousEnsemble]):
    """Re-compose a polynomial into oblivious trees (exact); see the module docstring."""

    name: ClassVar[str] = "oblivious"
    max_depth: int | Literal["auto"] = "auto"
    """Deepest table (2^max_depth rows); at least the polynomial's largest degree.
    ``auto``: with ``grow``, the depth of the cheapest cover by the table runtime's cost per table and
    depth (:func:`choose_depth`); with ``pack`` and ``greedy``, 8 or the largest degree when that is more."""
    strategy: str = "grow"
    """``grow`` (fill one tree at a time with the maximal monomials it completes), ``pack`` (extend
    trees under a cost model) or ``greedy`` (the paper's Algorithm 1)."""
    merge: bool = True
    """Merge trees whose condition sets nest (pack only)."""
    table_mb: int = 64
    """Total table size (MiB): no tree grows past it (``pack``), no cover over it is chosen (``max-depth=auto``)."""
    bins: bool = True
    """Let several thresholds of one feature share a tree's levels as a bin code (bin levels)."""
    polish: int = POLISH_ROUNDS
    """Most rounds of local search after ``grow`` (:func:`polish_sets`; 0: none)."""
    restarts: int = 0
    """``grow`` only: this many more covers from random monomial orders, the fewest trees among all of
    them chosen by a set-cover MILP (:func:`pooled_sets`; each restart costs one more build)."""

    def __post_init__(self) -> None:
        if self.max_depth != "auto" and not (isinstance(self.max_depth, int) and 1 <= self.max_depth <= MAX_DEPTH):
            raise CompileError(f"max-depth must be 'auto' or between 1 and {MAX_DEPTH}, got {self.max_depth}")
        if self.strategy not in STRATEGIES:
            raise CompileError(f"unknown strategy {self.strategy!r}", f"strategies: {', '.join(STRATEGIES)}")
        if self.table_mb < 1:
            raise CompileError(f"table-mb must be positive, got {self.table_mb}")
        if not (isinstance(self.polish, int) and self.polish >= 0):
            raise CompileError(f"polish must be a number of rounds, 0 or more, got {self.polish}")
        if not (isinstance(self.restarts, int) and self.restarts >= 0):
            raise CompileError(f"restarts must be a number of covers, 0 or more, got {self.restarts}")

    def run(self, ir: Polynomial, ctx: PassContext) -> ObliviousEnsemble:
        ens, stats = recompose(ir, max_depth=self.max_depth, strategy=self.strategy, merge=self.merge,
                               cost=CostModel(budget_bytes=self.table_mb << 20), bins=self.bins, polish=self.polish,
                               restarts=self.restarts)
        by_depth = ", ".join(f"{c} x depth {d}" for d, c in sorted(stats["trees_by_depth"].items()))
        depth = stats["max_depth_cap"]
        chosen = ""
        if stats["depth_choice"]:
            tried = ", ".join(
                f"{d}: over {v['cost']:,.0f} ns/row at {int(v['trees']):,} trees, given up" if v.get("given_up")
                else f"{d}: {int(v['trees']):,} trees, {v['table_bytes'] / 2**20:,.0f} MiB, over table-mb"
                if v.get("over_budget") else f"{d}: {int(v['trees']):,} trees, {v['cost']:,.0f} ns/row"
                for d, v in sorted(stats["depth_choice"].items()))
            chosen = f", chosen among unpolished covers ({tried})"
        ctx.report(PassReport(self.name, (
            f"{ir.n_monomials:,} monomials -> {ens.n_trees:,} oblivious trees ({by_depth}); "
            f"{stats['table_bytes'] / 1024:,.1f} KiB of tables; {stats['searched']:,} monomials placed by search, "
            f"{stats['extensions']:,} tree extensions, {stats['merged']:,} nested trees merged "
            f"(strategy {self.strategy}, max-depth {depth}{chosen})"), stats))
        return ens


def _output_groups(poly: Polynomial) -> npt.NDArray[np.int64]:
    """Per monomial: the one output its weights touch (multi-output polynomials), -1 for several;
    all 0 for one output. Each group gets trees of its own."""
    if poly.n_outputs == 1:
        return np.zeros(poly.n_monomials, dtype=np.int64)
    nonzero = poly.weight != 0
    return np.where(nonzero.sum(axis=1) == 1, np.argmax(nonzero, axis=1), -1)


def choose_depth(poly: Polynomial, cost: CostModel | None = None, bins: bool = True) -> tuple[
        int, dict[int, dict[str, float]], dict[int, list[list[int]]]]:
    """The depth of the cheapest cover (``max-depth=auto``): ``grow`` covers without polishing, priced by
    ``cost.cover`` (the tables' cost per row by their depths), at the candidate depths (``cost.depths``,
    and the polynomial's degree when that is deeper). The search starts at ``cost.first`` (or the nearest
    candidate above it), goes deeper while the covers get cheaper, then shallower while they do; a cover
    is given up as soon as its trees so far cost more than the cheapest cover found (it cannot win), so
    the shallow covers of many trees are rarely built in full. Deeper tables hold more monomials each
    (fewer trees) but cost more each; where the balance lies depends on the model. Returns the depth,
    each tried depth's ``{"trees", "cost"}`` (``"given_up": 1.0`` with the trees and cost when it was
    dropped; ``"over_budget": 1.0`` when its tables, at 8 bytes a cell, exceed ``cost.budget_bytes``: it is
    never chosen) and the chosen depth's unpolished condition sets per output group."""
    cost = cost or CostModel()
    ids = np.asarray(poly.padded_ids, dtype=np.int64)
    deg = poly.degree.astype(np.int64)
    groups = level_groups(poly, bins)
    group = _output_groups(poly)
    lo = max(poly.max_degree, 1)
    cands = sorted({d for d in cost.depths if d >= lo} | ({lo} if lo > max(cost.depths) else set()))
    tried: dict[int, dict[str, float]] = {}
    best: tuple[float, int, dict[int, list[list[int]]]] | None = None
    if poly.n_monomials == 0:
        return lo, tried, {}

    def price(d: int) -> bool:
        """Build and price the cover at depth ``d``; whether it is the cheapest so far."""
        nonlocal best
        sets: dict[int, list[list[int]]] = {}
        spent = 0.0
        try:
            for g in sorted(set(group.tolist())):
                limit = (cost, best[0], spent) if best is not None else None
                sets[g] = grow_sets(ids[group == g], deg[group == g], poly.n_conditions, d, groups, polish=0,
                                    give_up=limit)
                spent += cost.cover([_levels(s, groups) for s in sets[g]])
        except OverBudget as over:
            tried[d] = {"trees": float(sum(len(v) for v in sets.values()) + over.trees), "cost": over.cost,
                        "given_up": 1.0}
            return False
        levels = [_levels(s, groups) for ss in sets.values() for s in ss]
        tried[d] = {"trees": float(len(levels)), "cost": cost.cover(levels),
                    "table_bytes": float(sum(8 << lv for lv in levels))}
        if tried[d]["table_bytes"] > cost.budget_bytes:  # tables too large to keep, however fast
            tried[d]["over_budget"] = 1.0
            return False
        if best is None or tried[d]["cost"] < best[0]:
            best = (tried[d]["cost"], d, sets)
            return True
        return False

    start = next((i for i, d in enumerate(cands) if d >= cost.first), len(cands) - 1)
    price(cands[start])
    for d in cands[start + 1:]:  # deeper while cheaper
        if not price(d):
            break
    for d in reversed(cands[:start]):  # then shallower while cheaper
        if not price(d):
            break
    if best is None:  # every cover over the table budget: the shallowest candidate, built in full
        d = cands[0]
        return d, tried, {}
    return best[1], tried, best[2]


def recompose(poly: Polynomial, *, max_depth: int | Literal["auto"] = DEFAULT_MAX_DEPTH, strategy: str = "grow",
              merge: bool = True, cost: CostModel | None = None, bins: bool = True,
              polish: int = POLISH_ROUNDS, restarts: int = 0) -> tuple[ObliviousEnsemble, dict[str, Any]]:
    """The ensemble and statistics (trees, depths, table bytes, search counts, seconds); ``max_depth``
    ``"auto"``: with ``grow`` the depth of the cheapest cover under ``cost`` (:func:`choose_depth`, reported
    as ``depth_choice``), else :data:`DEFAULT_MAX_DEPTH` or the largest degree; ``polish``: the most rounds of :func:`polish_sets` after ``grow``, ``restarts``:
    more ``grow`` covers to choose trees from (:func:`pooled_sets`)."""
    t0 = time.perf_counter()
    cost = cost or CostModel()
    choice: dict[int, dict[str, float]] = {}
    pre: dict[int, list[list[int]]] = {}
    if max_depth != "auto":
        depth = max_depth
    elif strategy != "grow":
        depth = max(DEFAULT_MAX_DEPTH, poly.max_degree)
    else:
        depth, choice, pre = choose_depth(poly, cost, bins)
        if restarts:
            pre = {}
    if poly.max_degree > depth:
        j = int(np.flatnonzero(poly.degree == poly.max_degree)[0])
        raise CompileError(
            f"monomial {j} has {poly.max_degree} conditions but max-depth is {depth}: "
            f"every monomial must fit in one oblivious tree",
            f"use oblivious{{max-depth={poly.max_degree}}} or more (tables of 2^{poly.max_degree} rows), "
            "or prune the polynomial first")
    group = _output_groups(poly)
    ids = np.asarray(poly.padded_ids, dtype=np.int64)
    deg = poly.degree
    groups = level_groups(poly, bins)
    outputs: list[int] = []
    sets_all: list[list[int]] = []
    tree_of_all = np.full(poly.n_monomials, -1, dtype=np.int64)
    searched = extensions = merged = 0
    for g in sorted(set(group.tolist())):
        members = np.flatnonzero(group == g)
        cover = _Cover(depth, strategy, cost, groups)
        if strategy == "grow":
            if g in pre:
                top = members[maximal_monomials(ids[members], deg[members])]
                grown = polish_sets(pre[g], ids[top], deg[top].astype(np.int64), poly.n_conditions, groups,
                                    depth, polish) if polish > 0 else pre[g]
            elif restarts:
                grown = pooled_sets(ids[members], deg[members], poly.n_conditions, depth, groups, polish,
                                    restarts)
            else:
                grown = grow_sets(ids[members], deg[members], poly.n_conditions, depth, groups, polish)
            for conds in grown:
                cover.new_tree(set(conds))
        assign = _cover(cover, ids[members], deg[members])
        searched += int(assign[1])
        extensions += cover.extensions
        tree_of = assign[0]
        sets = cover.sets
        if merge and strategy == "pack":
            tree_of, sets, n_merged = _merge_nested(sets, tree_of)
            merged += n_merged
        if max(cover.levels, default=0) > depth:
            raise CompileError(f"internal error: a tree of {max(cover.levels)} levels (max-depth {depth})")
        tree_of_all[members] = tree_of + len(sets_all)
        sets_all.extend(sorted(s) for s in sets)
        outputs.extend([int(g)] * len(sets))
    ens = _build(poly, outputs, sets_all, tree_of_all, groups)
    st = ens.statistics()
    stats = {"trees": ens.n_trees, "trees_by_depth": st["trees_by_depth"], "table_entries": st["table_entries"],
             "table_bytes": st["table_bytes"], "max_depth": st["max_depth"], "searched": searched,
             "extensions": extensions, "merged": merged, "monomials": poly.n_monomials,
             "seconds": time.perf_counter() - t0, "strategy": strategy, "max_depth_cap": depth,
             "depth_choice": choice}
    return ens, stats


def _hash_rows(a: npt.NDArray[np.int64], mul: npt.NDArray[np.uint64]) -> npt.NDArray[np.uint64]:
    with np.errstate(over="ignore"):
        return (a.astype(np.uint64) * mul[None, :a.shape[1]]).sum(axis=1, dtype=np.uint64)


def _cover(cover: _Cover, ids: npt.NDArray[np.int64], deg: npt.NDArray[np.int64]) -> tuple[npt.NDArray[np.int64], int]:
    """Tree of every monomial (rows of ``ids``: sorted condition ids, then padding); also how many
    monomials were placed by search (the others joined the tree of a superset one degree up)."""
    n, W = ids.shape
    tree_of = np.full(n, -1, dtype=np.int64)
    mul = (np.random.default_rng(0x5EED).integers(1, 2**62, size=W + 1, dtype=np.int64) * 2 + 1).astype(np.uint64)
    searched = 0
    max_deg = int(deg.max()) if n else 0
    for k in range(max_deg, 0, -1):
        here = np.flatnonzero(deg == k)
        if here.size == 0:
            continue
        if k < max_deg:
            _inherit(ids, deg, tree_of, here, k, mul)
        todo = here[tree_of[here] < 0]
        searched += int(todo.size)
        for m in todo.tolist():
            conds = ids[m, :k].tolist()
            t = cover.covering(conds)
            tree_of[m] = t if t >= 0 else cover.place(conds)
    return tree_of, searched


def maximal_monomials(ids: npt.NDArray[np.int64], deg: npt.NDArray[np.int64]) -> npt.NDArray[np.bool_]:
    """Monomials no monomial of one degree more contains (rows of ``ids``: sorted ids, then padding).

    A monomial whose only supersets are two or more degrees up also counts as maximal: the
    cover then places it itself, which is never wrong, only a little less dense."""
    n, W = ids.shape
    out = np.ones(n, dtype=bool)
    mul = (np.random.default_rng(0x5EED).integers(1, 2**62, size=W + 1, dtype=np.int64) * 2 + 1).astype(np.uint64)
    for k in range(1, int(deg.max()) if n else 0):
        here = np.flatnonzero(deg == k)
        sup = np.flatnonzero(deg == k + 1)
        if here.size == 0 or sup.size == 0:
            continue
        for cand, _ in _one_condition_short(ids, here, sup, k, mul):
            out[cand] = False
    return out


def cover_lower_bound(poly: Polynomial, max_depth: int, limit: int = SEED_LIMIT) -> int:
    """A lower bound on the trees of any exact re-composition into tables of at most ``max_depth`` levels.

    Every maximal monomial needs a tree holding all its conditions, and a tree holding two of them
    holds their union; a canonical monomial has at most one condition per level group, so the union of
    two needs ``|A u B|`` levels however they are grouped (two codes or thresholds of one group take two
    levels). Maximal monomials no two of which fit in ``max_depth`` levels together therefore need one
    tree each: their count bounds every strategy from below (``ceil(monomials / 2^max_depth)`` assumes
    full tables, which the data rarely allows). The set is grown greedily, fewest compatible partners
    first, among the ``limit`` largest maximal monomials of degree above ``max_depth / 2`` (two of those
    sharing no condition never fit together), per output group as :func:`recompose` builds trees."""
    group = _output_groups(poly)
    ids = np.asarray(poly.padded_ids, dtype=np.int64)
    deg = poly.degree.astype(np.int64)
    nc = poly.n_conditions
    total = 0
    for g in np.unique(group).tolist():
        members = np.flatnonzero(group == g)
        top = members[maximal_monomials(ids[members], deg[members])]
        top = top[deg[top] > max_depth // 2]
        top = top[np.argsort(-deg[top], kind="stable")[:limit]]
        if top.size == 0:
            total += int(members.size > 0)  # its monomials need one tree at least
            continue
        total += int(_incompatible(ids[top], deg[top], nc, max_depth).shape[0])
    return total


def _incompatible(P: npt.NDArray[np.int64], dg: npt.NDArray[np.int64], nc: int,
                  max_depth: int) -> npt.NDArray[np.int64]:
    """Rows of ``P`` (monomials: sorted condition ids, then padding ``nc``; degrees ``dg``) no two of which
    fit in one tree of ``max_depth`` levels, grown greedily from the row with the fewest partners that fit.

    Two canonical monomials together need ``|A u B|`` levels (:func:`cover_lower_bound`), so a pair fits
    when they share at least ``dg_A + dg_B - max_depth`` conditions: one sparse (or, with few conditions,
    dense) product of the monomial x condition matrix with itself, 1,024 rows at a time."""
    m = P.shape[0]
    rows = np.repeat(np.arange(m), P.shape[1])
    cols = P.reshape(-1)
    real = cols < nc
    A = scipy.sparse.csr_matrix((np.ones(int(real.sum()), dtype=np.float32), (rows[real], cols[real])), shape=(m, nc))
    dense = nc <= 2048  # few conditions (Adult: 321): most pairs share some, a dense product is faster
    At = A.T.toarray() if dense else A.T.tocsc()
    fits: list[npt.NDArray[np.int64]] = []
    for lo in range(0, m, 1024):
        hi = min(m, lo + 1024)
        shared = A[lo:hi] @ At
        if dense:
            ok = shared >= (dg[lo:hi, None] + dg[None, :] - max_depth)
            ok[np.arange(hi - lo), np.arange(lo, hi)] = False
            fits.extend(np.flatnonzero(row) for row in ok)
        else:
            sh = scipy.sparse.csr_matrix(shared)
            r = np.repeat(np.arange(hi - lo), np.diff(sh.indptr))
            keep = (sh.data >= dg[lo + r] + dg[sh.indices] - max_depth) & (sh.indices != lo + r)
            cut = np.searchsorted(r[keep], np.arange(hi - lo + 1))
            part = sh.indices[keep].astype(np.int64)
            fits.extend(part[cut[i]:cut[i + 1]] for i in range(hi - lo))
    blocked = np.zeros(m, dtype=bool)
    out: list[int] = []
    for v in np.argsort([f.shape[0] for f in fits], kind="stable").tolist():
        if not blocked[v]:
            out.append(v)
            blocked[v] = True
            blocked[fits[v]] = True
    return np.array(out, dtype=np.int64)


def grow_sets(ids: npt.NDArray[np.int64], deg: npt.NDArray[np.int64], n_conditions: int,
              max_depth: int, groups: npt.NDArray[np.int64] | None = None,
              polish: int = POLISH_ROUNDS, give_up: tuple[CostModel, float, float] | None = None) -> list[list[int]]:
    """Condition sets covering every maximal monomial, built one tree at a time (strategy ``grow``).

    A tree starts from one of the maximal monomials that need a tree each (:func:`_incompatible`), then
    from the largest uncovered maximal monomial; while it has room it adds the
    condition that completes the most uncovered monomials per level it costs (those missing
    exactly it), or the pair that completes the most per level, each monomial counted by the square of
    its degree (the large ones fit in the fewest trees, so they go first where they fit; credit and
    synthetic 500 x 63 at depth 10: 2% and 1% fewer trees than counting each once), or else the fewest levels that
    complete one monomial it shares conditions with, or else the next uncovered monomial that fits.
    With ``groups`` (:func:`category_groups`) a category code costs the levels its group grows by,
    often none (the third code of a group rides on the two levels of the first two).
    Then up to ``polish`` rounds of :func:`polish_sets` remove the trees the others can absorb.
    ``give_up`` ``(cost, limit, spent)``: raise :class:`OverBudget` as soon as ``spent`` plus the trees so
    far by ``cost.table`` exceed ``limit`` (:func:`choose_depth` drops a depth that cannot win without
    finishing it).
    """
    nc = n_conditions
    spent = give_up[2] if give_up is not None else 0.0
    grp = np.full(nc + 1, -1, dtype=np.int64) if groups is None else np.asarray(groups, dtype=np.int64)
    top = np.flatnonzero(maximal_monomials(ids, deg))
    P, dg = ids[top], deg[top]
    m, W = P.shape
    # inverted index: condition -> maximal monomials holding it
    ent_m = np.repeat(np.arange(m), W)
    ent_c = P.reshape(-1)
    real = ent_c < nc
    ent_m, ent_c = ent_m[real], ent_c[real]
    o = np.argsort(ent_c, kind="stable")
    post_m = ent_m[o]
    post_off = np.zeros(nc + 1, dtype=np.int64)
    np.cumsum(np.bincount(ent_c, minlength=nc), out=post_off[1:])
    alive = np.ones(m, dtype=bool)
    seen = np.zeros(m, dtype=bool)
    hits = np.zeros(m, dtype=np.int64)  # conditions of each maximal monomial in the tree being grown
    tag = np.zeros(m, dtype=np.int64)
    in_s = np.zeros(nc + 1, dtype=bool)
    in_s[nc] = True
    grouped = grp >= 0
    gid = np.maximum(grp, 0)
    gcount = np.zeros(int(grp.max()) + 1 if grouped.any() else 1, dtype=np.int64)
    bitlen = np.array([int(k).bit_length() for k in range(int(np.bincount(gid[grouped]).max(initial=0)) + 2)])
    n_groups = int(np.unique(grp[grouped]).shape[0])
    group_ids = np.unique(grp[grouped])
    # each maximal monomial's code in each group (nc: none), to see which missing codes are free
    code_of = np.full((m, max(n_groups, 1)), nc, dtype=np.int64)
    if n_groups:
        col = np.full(int(grp.max()) + 1, -1, dtype=np.int64)
        col[group_ids] = np.arange(n_groups)
        at_r, at_j = np.nonzero(grouped[P])
        code_of[at_r, col[grp[P[at_r, at_j]]]] = P[at_r, at_j]
    weight = dg.astype(np.float64) ** 2
    order = np.argsort(-dg, kind="stable")
    # monomials no two of which fit in one tree need a tree each: those trees start first (synthetic
    # 500 x 63 at depth 10: 5,507 -> 5,443 trees, credit 3,588 -> 3,581, Adult 7,005 -> 6,944)
    big = order[:SEED_LIMIT][dg[order[:SEED_LIMIT]] > max_depth // 2]
    if big.size > 1:
        first = big[_incompatible(P[big], dg[big], nc, max_depth)]
        head = np.zeros(m, dtype=bool)
        head[first] = True
        order = np.concatenate([first, order[~head[order]]])
    sets: list[list[int]] = []
    ptr = 0

    def take(conds: list[int]) -> npt.NDArray[np.int64]:
        """Add ``conds`` to the tree; returns the uncovered maximal monomials it touches first."""
        in_s[conds] = True
        for c in conds:
            if grp[c] >= 0:
                gcount[grp[c]] += 1
            hits[post_m[post_off[c]:post_off[c + 1]]] += 1
        parts = [post_m[post_off[c]:post_off[c + 1]] for c in conds]
        new = np.concatenate(parts) if parts else np.zeros(0, np.int64)
        new = new[alive[new] & ~seen[new]]
        tag[new] = np.arange(new.shape[0])
        new = new[tag[new] == np.arange(new.shape[0])]  # each monomial once
        seen[new] = True
        return new

    def cond_cost() -> npt.NDArray[np.int64]:
        """Levels each condition would add to the tree now (0 for those in it and the padding)."""
        step = bitlen[gcount + 1] - bitlen[gcount]
        cc = np.where(grouped, step[gid], 1)
        cc[in_s] = 0
        return cc

    while True:
        while ptr < m and not alive[order[ptr]]:
            ptr += 1
        if ptr >= m:
            break
        seed = int(order[ptr])
        S = [int(c) for c in P[seed, :dg[seed]]]
        touched = take(S)
        every = [touched]  # every monomial the tree touches; ``touched``: those it does not hold yet
        n_plain = int((grp[S] < 0).sum())
        while True:
            room = max_depth - n_plain - int(bitlen[gcount].sum())
            # a monomial missing more than room + (free group codes) conditions cannot fit
            cc = cond_cost()
            free = np.flatnonzero(bitlen[gcount[group_ids] + 1] == bitlen[gcount[group_ids]])
            short = dg[touched] - hits[touched]
            held = short == 0  # held monomials stay held: the tree only grows
            if held.any():
                touched, short = touched[~held], short[~held]
            ok = short <= room + free.shape[0]
            cand, miss = touched[ok], short[ok]
            add = miss
            if free.size:  # missing codes of groups that have room for one more code cost nothing
                codes = code_of[cand[:, None], free[None, :]]
                add = miss - (~in_s[codes]).sum(axis=1)
            fit = add <= room
            cand, miss, add = cand[fit], miss[fit], add[fit]
            if cand.size == 0:  # nothing it touches fits: the next uncovered monomial that does
                extra = []
                for q in range(ptr + 1, min(m, ptr + 64)):  # at no room, one whose codes are free
                    i = int(order[q])
                    row = P[i, :dg[i]]
                    if alive[i] and not in_s[row].all() and int(cc[row].sum()) <= room:
                        extra = [int(c) for c in row if not in_s[c]]
                        break
                if not extra:
                    break
                S.extend(extra)
                n_plain += int((grp[extra] < 0).sum())
                every.append(take(extra))
                touched = np.concatenate([touched, every[-1]])
                continue
            per_level = cc + np.where(cc == 0, 1e-3, 0.0)  # a free condition scores 1000x
            best: list[int] = []
            score = 0.0
            one = np.flatnonzero(miss == 1)
            n1 = np.zeros(nc + 1, dtype=np.int64)
            if one.size:
                rows = P[cand[one]]
                c1 = rows[~in_s[rows]]
                n1 = np.bincount(c1, weights=weight[cand[one]], minlength=nc + 1)
                s1 = n1 / per_level
                b = int(np.argmax(s1))
                best, score = [b], float(s1[b])
            two = np.flatnonzero(miss == 2)
            if two.size:
                rows = P[cand[two]]
                c2 = rows[~in_s[rows]].reshape(-1, 2)
                key = c2[:, 0] * (nc + 1) + c2[:, 1]
                uk, inv = np.unique(key, return_inverse=True)
                cnt = np.bincount(inv, weights=weight[cand[two]])
                a, b2 = uk // (nc + 1), uk % (nc + 1)
                s2 = (cnt + n1[a] + n1[b2]) / (per_level[a] + per_level[b2])
                j = int(np.argmax(s2))
                if s2[j] > score:
                    best, score = [int(a[j]), int(b2[j])], float(s2[j])
            if not best:
                j = int(np.argmin(add))
                best = [int(c) for c in P[cand[j]] if not in_s[c]]
            S.extend(best)
            n_plain += int((grp[best] < 0).sum())
            every.append(take(best))
            touched = np.concatenate([touched, every[-1]])
        touched = np.concatenate(every)
        alive[touched[hits[touched] == dg[touched]]] = False
        alive[seed] = False
        hits[touched] = 0
        seen[touched] = False
        in_s[S] = False
        in_s[nc] = True
        if give_up is not None:
            spent += give_up[0].table(n_plain + int(bitlen[gcount].sum()))
        gcount[:] = 0
        sets.append(sorted(S))
        if give_up is not None and spent > give_up[1]:
            raise OverBudget(len(sets), spent)
    if polish > 0:
        sets = polish_sets(sets, P, dg, nc, grp, max_depth, polish)
    return sets


def polish_sets(sets: list[list[int]], P: npt.NDArray[np.int64], dg: npt.NDArray[np.int64], nc: int,
                groups: npt.NDArray[np.int64], max_depth: int, rounds: int = POLISH_ROUNDS) -> list[list[int]]:
    """Fewer trees covering the same maximal monomials (rows of ``P``: sorted condition ids, padding ``nc``;
    degrees ``dg``), by local search on a finished cover.

    A greedy cover leaves trees that exist for a few monomials, and trees whose levels hold conditions
    only monomials covered elsewhere too need. Each round first *trims* every tree to the conditions of
    the monomials no other tree covers (smallest such count first, so the small trees shed their shared
    monomials onto the big ones, and trees freed of all of them go), which frees levels; then, smallest
    first, moves each tree's own monomials to the tree each grows by the fewest levels within
    ``max_depth`` (levels counted with ``groups`` as :func:`_levels`): if all move, the tree goes; if
    the ones that fit nowhere need fewer levels than the tree had, it shrinks to them (its spare levels
    take others' monomials later); else nothing changes. Rounds stop after ``rounds`` or when one
    removes under 0.1% of the trees. Each tree keeps the list of monomials it covers (a trimmed tree
    filters it, a grown one adds the monomials holding a new condition) and a condition x tree table
    of the levels each condition would add, so a move scores every tree in one numpy step.
    """
    m, W = P.shape
    T = len(sets)
    grp = np.asarray(groups, dtype=np.int64)
    grouped = grp >= 0
    gids = np.unique(grp[grouped])
    col = np.full(int(grp.max()) + 1 if grouped.any() else 1, -1, dtype=np.int64)
    col[gids] = np.arange(gids.shape[0])
    cgroup = np.where(grouped, col[np.maximum(grp, 0)], -1)  # condition -> dense group, -1: a level of its own
    bitlen = np.array([k.bit_length() for k in range(nc + 3)], dtype=np.int64)
    member = np.zeros((nc + 1, T), dtype=bool)  # condition x tree; the padding row holds in every tree
    member[nc] = True
    gcount = np.zeros((max(int(gids.shape[0]), 1), T), dtype=np.int64)  # group x tree: codes held
    levels = np.zeros(T, dtype=np.int64)
    levels8 = np.zeros(T, dtype=np.int8)  # ``levels`` for the int8 sums of the moves' scores
    cost = np.ones((nc + 1, T), dtype=np.int8)  # condition x tree: levels it would add (0: held, or a free code)
    cost[nc] = 0
    step = np.ones_like(gcount)  # group x tree: levels one more code of the group adds
    group_of = cgroup.tolist()
    bit_len = bitlen.tolist()
    by_group = np.argsort(cgroup[:nc], kind="stable")
    group_cut = np.searchsorted(cgroup[:nc][by_group], np.arange(gcount.shape[0] + 1))
    alive = np.ones(T, dtype=bool)
    trees = [set(s) for s in sets]
    stored: list[set[int]] = [set() for _ in range(T)]  # each tree's conditions as the tables hold them

    def store(t: int) -> None:
        """The tables' column ``t`` from ``trees[t]``: only the changed conditions' rows, and the rows of the
        groups whose next code now costs another number of levels."""
        new, old = trees[t], stored[t]
        gone, came = old - new, new - old
        if not gone and not came:
            return
        counts: dict[int, int] = {}  # the changed groups' code counts in tree t, before
        delta = 0
        for c in gone | came:
            g = group_of[c]
            if g < 0:
                delta += 1 if c in came else -1
            elif g not in counts:
                counts[g] = int(gcount[g, t])
        now = dict(counts)
        for c in gone:
            if group_of[c] >= 0:
                now[group_of[c]] -= 1
        for c in came:
            if group_of[c] >= 0:
                now[group_of[c]] += 1
        moved = []
        for g, n in now.items():
            gcount[g, t] = n
            delta += bit_len[n] - bit_len[counts[g]]
            if bit_len[n + 1] - bit_len[n] != bit_len[counts[g] + 1] - bit_len[counts[g]]:
                moved.append(g)
                step[g, t] = bit_len[n + 1] - bit_len[n]
        levels[t] += delta
        levels8[t] = levels[t]
        ch = np.fromiter(gone | came, dtype=np.int64, count=len(gone) + len(came))
        member[ch, t] = np.fromiter((c in came for c in ch.tolist()), dtype=bool, count=ch.shape[0])
        rows = np.concatenate([ch] + [by_group[group_cut[g]:group_cut[g + 1]] for g in moved]) if moved else ch
        g_rows = cgroup[rows]
        cost[rows, t] = np.where(member[rows, t], 0, np.where(g_rows < 0, 1, step[np.maximum(g_rows, 0), t]))
        stored[t] = set(new)

    for t in range(T):
        store(t)
    ent_m = np.repeat(np.arange(m), W)
    ent_c = P.reshape(-1)
    real = ent_c < nc
    ent_m, ent_c = ent_m[real], ent_c[real]
    post_m = ent_m[np.argsort(ent_c, kind="stable")]  # condition -> monomials holding it
    post_off = np.zeros(nc + 1, dtype=np.int64)
    np.cumsum(np.bincount(ent_c, minlength=nc), out=post_off[1:])
    cov = _covering_trees(P, member)  # tree -> the monomials it covers
    n_cover = np.bincount(np.concatenate(cov + [np.zeros(0, dtype=np.int64)]), minlength=m)

    def trim(t: int) -> npt.NDArray[np.int64]:
        """Tree ``t`` down to the conditions of the monomials only it covers (returned); none: it goes."""
        own = cov[t][n_cover[cov[t]] == 1]
        need = set(P[own][P[own] < nc].tolist())
        if need != trees[t]:
            trees[t] = need
            store(t)
            keep = member[P[cov[t]], t].all(axis=1)
            n_cover[cov[t][~keep]] -= 1
            cov[t] = cov[t][keep]
            alive[t] = bool(need)
        return own

    for _ in range(rounds):
        start = int(alive.sum())
        own_count = np.zeros(T, dtype=np.int64)
        for t in np.flatnonzero(alive).tolist():
            own_count[t] = trim(t).shape[0]
        for t in np.flatnonzero(alive)[np.argsort(own_count[alive], kind="stable")].tolist():
            own = trim(t)
            if not alive[t]:
                continue
            alive[t] = False
            before: dict[int, set[int]] = {}
            stay: set[int] = set()  # conditions of the monomials that fit nowhere else
            old_levels = int(levels[t])
            gain = True
            for q in own[np.argsort(-dg[own], kind="stable")].tolist():
                cs = P[q, :dg[q]]
                if any(member[cs, u].all() for u in before):  # an earlier move already covers it
                    continue
                grown = np.add.reduce(cost[cs], axis=0, dtype=np.int8)  # one code per group at most (canonical)
                grown += levels8
                fit = np.flatnonzero(alive & (grown <= max_depth))
                if fit.size == 0:
                    stay.update(cs.tolist())
                    if _levels(stay, grp) >= old_levels:  # t cannot shrink: stop trying
                        gain = False
                        break
                    continue
                u = int(fit[np.lexsort((grown[fit], grown[fit] - levels[fit]))[0]])
                before.setdefault(u, set(trees[u]))
                trees[u] |= set(cs.tolist())
                store(u)
            if not gain:  # no gain: t stays, the others are restored
                for u, old in before.items():
                    trees[u] = old
                    store(u)
                alive[t] = True
                continue
            trees[t] = stay
            store(t)
            # t goes (or shrinks to the monomials that fit nowhere else); the grown trees cover more
            alive[t] = bool(stay)
            keep = member[P[cov[t]], t].all(axis=1)
            n_cover[cov[t][~keep]] -= 1
            cov[t] = cov[t][keep]
            for u, old in before.items():
                new = trees[u] - old
                cand = np.concatenate([post_m[post_off[c]:post_off[c + 1]] for c in new])
                cand = np.unique(cand[member[P[cand], u].all(axis=1)])  # each holds a new condition: new
                n_cover[cand] += 1
                cov[u] = np.concatenate([cov[u], cand])
        if (start - int(alive.sum())) * 1000 < start:
            break
    if (n_cover == 0).any():
        raise CompileError("internal error: polishing the cover left a maximal monomial without a tree")
    return [sorted(trees[t]) for t in np.flatnonzero(alive).tolist()]


def pooled_sets(ids: npt.NDArray[np.int64], deg: npt.NDArray[np.int64], n_conditions: int, max_depth: int,
                groups: npt.NDArray[np.int64], polish: int, restarts: int,
                time_limit: float = POOL_SECONDS) -> list[list[int]]:
    """The fewest trees from ``1 + restarts`` polished ``grow`` covers (the monomials in the given order,
    then in random orders, seeded), chosen by a set-cover MILP over the pooled distinct trees (HiGHS:
    every maximal monomial in a chosen tree), then polished again. The best single cover stands when
    HiGHS finds nothing better within ``time_limit`` seconds."""
    nc = n_conditions
    top = np.flatnonzero(maximal_monomials(ids, deg))
    P, dg = ids[top], deg[top]
    rng = np.random.default_rng(0x5EED)
    best: list[list[int]] = []
    pool: dict[tuple[int, ...], None] = {}
    for r in range(restarts + 1):
        perm = np.arange(P.shape[0]) if r == 0 else rng.permutation(P.shape[0])
        sets = grow_sets(P[perm], dg[perm], nc, max_depth, groups, polish)
        if not best or len(sets) < len(best):
            best = sets
        pool.update(dict.fromkeys(tuple(s) for s in sets))
    cand = [list(s) for s in pool]
    T = len(cand)
    member = np.zeros((nc + 1, T), dtype=bool)
    member[nc] = True
    for t, s in enumerate(cand):
        member[s, t] = True
    cov = _covering_trees(P, member)
    cols = np.concatenate(cov)
    tree = np.repeat(np.arange(T), [c.shape[0] for c in cov])
    A = scipy.sparse.csr_matrix((np.ones(cols.shape[0]), (cols, tree)), shape=(P.shape[0], T))
    cover = MilpModel()
    cover.add_cols(T, 0.0, 1.0, 1.0, integer=True)
    rows = np.repeat(np.arange(A.shape[0]), np.diff(A.indptr))
    cover.add_rows(rows, A.indices.astype(np.int64), A.data, np.ones(A.shape[0]), np.full(A.shape[0], np.inf))
    out = solve(cover, SolverOptions(time_limit=float(time_limit), threads=1, seed=0, mip_rel_gap=1e-4))
    x = out.x if out.x is not None else np.zeros(0)
    chosen = [cand[t] for t in np.flatnonzero(x > 0.5)] if x.shape[0] == T else []
    if not chosen or (A[:, x > 0.5].sum(axis=1) < 1).any() or len(chosen) >= len(best):
        return best
    return polish_sets(chosen, P, dg, nc, groups, max_depth, polish)


def _covering_trees(P: npt.NDArray[np.int64], member: npt.NDArray[np.bool_]) -> list[npt.NDArray[np.int64]]:
    """For each tree (column of the condition x tree ``member``, padding row all true): the rows of ``P``
    all of whose conditions it holds -- an AND of the monomial's condition rows as 64-tree bit words."""
    T = member.shape[1]
    words = np.packbits(member, axis=1, bitorder="little")
    words = np.pad(words, ((0, 0), (0, -words.shape[1] % 8))).view(np.uint64)
    mono: list[npt.NDArray[np.int64]] = []
    tree: list[npt.NDArray[np.int64]] = []
    for lo in range(0, P.shape[0], 4096):
        acc = np.bitwise_and.reduce(words[P[lo:lo + 4096]], axis=1)  # monomial x word
        r, w = np.nonzero(acc)
        bits = np.unpackbits(acc[r, w].view(np.uint8).reshape(-1, 8), axis=1, bitorder="little")
        i, b = np.nonzero(bits)
        mono.append(lo + r[i])
        tree.append(w[i] * 64 + b)
    mi, ti = np.concatenate(mono), np.concatenate(tree)
    o = np.argsort(ti, kind="stable")
    cut = np.searchsorted(ti[o], np.arange(T + 1))
    mi = mi[o]
    return [mi[cut[t]:cut[t + 1]] for t in range(T)]


def _one_condition_short(ids: npt.NDArray[np.int64], here: npt.NDArray[np.int64], sup: npt.NDArray[np.int64], k: int,
                         mul: npt.NDArray[np.uint64]) -> Iterator[tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]]:
    """For each position j: the degree-``k`` monomials of ``here`` equal to a degree-``k+1`` monomial of ``sup``
    with its j-th condition dropped, as ``(cand, hit)`` (``sup[hit]`` is each one's superset)."""
    keys = _hash_rows(ids[here][:, :k], mul)
    order = np.argsort(keys, kind="stable")
    sorted_keys = keys[order]
    sub_ids = ids[sup][:, :k + 1]
    for j in range(k + 1):
        drop = np.concatenate([sub_ids[:, :j], sub_ids[:, j + 1:]], axis=1)
        kk = _hash_rows(drop, mul)
        pos = np.minimum(np.searchsorted(sorted_keys, kk), sorted_keys.shape[0] - 1)
        hit = np.flatnonzero(sorted_keys[pos] == kk)
        cand = here[order[pos[hit]]]
        ok = (ids[cand][:, :k] == drop[hit]).all(axis=1)
        yield cand[ok], hit[ok]


def _inherit(ids: npt.NDArray[np.int64], deg: npt.NDArray[np.int64], tree_of: npt.NDArray[np.int64],
             here: npt.NDArray[np.int64], k: int, mul: npt.NDArray[np.uint64]) -> None:
    """Degree-``k`` monomials one condition short of a placed degree-``k+1`` monomial join its tree."""
    sup = np.flatnonzero((deg == k + 1) & (tree_of >= 0))
    if sup.size == 0:
        return
    for cand, hit in _one_condition_short(ids, here, sup, k, mul):
        free = tree_of[cand] < 0
        cand, src = cand[free], sup[hit[free]]
        if cand.size:
            first = np.unique(cand, return_index=True)[1]
            tree_of[cand[first]] = tree_of[src[first]]


def _merge_nested(sets: list[set[int]], tree_of: npt.NDArray[np.int64]) -> tuple[
        npt.NDArray[np.int64], list[set[int]], int]:
    """Fold every tree whose conditions lie inside another tree's into that tree (smallest first)."""
    index: dict[int, list[int]] = {}
    for t, s in enumerate(sets):
        for c in s:
            index.setdefault(c, []).append(t)
    target = np.arange(len(sets))
    alive = np.ones(len(sets), dtype=bool)
    for t in sorted(range(len(sets)), key=lambda i: (len(sets[i]), i)):
        s = sets[t]
        if not s:
            continue
        shortest = min((index[c] for c in s), key=len)
        for u in shortest:
            if u != t and alive[u] and len(sets[u]) >= len(s) and s <= sets[u] and (len(sets[u]) > len(s) or u < t):
                target[t] = u
                alive[t] = False
                break
    # resolve chains (t -> u -> v)
    for _ in range(len(sets)):
        nxt = target[target]
        if np.array_equal(nxt, target):
            break
        target = nxt
    keep = np.flatnonzero(alive)
    new_id = np.full(len(sets), -1, dtype=np.int64)
    new_id[keep] = np.arange(keep.shape[0])
    return new_id[target[tree_of]], [sets[t] for t in keep], int(len(sets) - keep.shape[0])


def _layout(conds: list[int], groups: npt.NDArray[np.int64], poly: Polynomial) -> tuple[
        list[int], list[list[int]], dict[int, int], tuple[tuple[int, int, bool], ...], list[Any]]:
    """One tree's levels from its conditions: a level per ungrouped condition, then ``n.bit_length()``
    levels per group of ``n`` conditions. Returns each level's conditions (one, or the group's
    members whose rank has the level's bit), its kind (-1: plain, else the group), each condition's
    bits in the table index, the groups' ``(first bit, bits, numeric)`` and, per level, ``None`` or
    (for a bin level) ``(bit, the group's conditions by threshold)``. A category code's rank follows
    the condition ids, a threshold's rank its threshold (rank r: the code from which it holds)."""
    F = poly.schema.n_features
    by_group: dict[int, list[int]] = {}
    for c in conds:
        if groups[c] >= 0:
            by_group.setdefault(int(groups[c]), []).append(c)
    # one or two thresholds of a feature are as many plain levels (a bin code saves levels from three on,
    # and plain levels are cheaper to evaluate)
    lone = {c for g, cs in by_group.items() if g >= F and len(cs) <= 2 for c in cs}
    by_group = {g: cs for g, cs in by_group.items() if not (g >= F and len(cs) <= 2)}
    plain = [c for c in conds if groups[c] < 0 or c in lone]
    kinds = [-1] * len(plain)
    members = [[c] for c in plain]
    bins: list[Any] = [None] * len(plain)
    bits = {c: 1 << i for i, c in enumerate(plain)}
    spans = []
    pos = len(plain)
    for g in sorted(by_group):
        numeric = g >= F
        codes = by_group[g]
        if numeric:
            codes = sorted(codes, key=lambda c: float(poly.cond_threshold[c]))
        width = len(codes).bit_length()
        for j in range(width):
            kinds.append(g)
            members.append([c for r, c in enumerate(codes, 1) if r >> j & 1])
            bins.append((j, codes) if numeric else None)
        for r, c in enumerate(codes, 1):
            bits[c] = r << pos
        spans.append((pos, width, numeric))
        pos += width
    return kinds, members, bits, tuple(spans), bins


def _build(poly: Polynomial, outputs: list[int], sets: list[list[int]],
           tree_of: npt.NDArray[np.int64], groups: npt.NDArray[np.int64]) -> ObliviousEnsemble:
    """Tables by subset sums: each monomial's weight goes to the row where exactly its conditions
    hold (a group's bits: the rank of its code, 0 without one), then every row adds the rows below
    it: ``table[idx] += table[idx without bit]`` along each plain level, ``table[rank] += table[0]``
    along each group (a monomial without a code of the group holds for every code).

    Trees are ordered by (depth, output, group layout) so tables of one shape are contiguous.
    """
    K = poly.n_outputs
    nc = poly.n_conditions
    lay = [_layout(c, groups, poly) for c in sets]
    depth_of = [len(x[0]) for x in lay]
    order = sorted(range(len(sets)), key=lambda t: (depth_of[t], outputs[t], lay[t][3], t))
    rank = np.empty(len(sets), dtype=np.int64)
    rank[order] = np.arange(len(sets))
    sets = [sets[t] for t in order]
    lay = [lay[t] for t in order]
    tout = np.array([outputs[t] if K > 1 else 0 for t in order], dtype=np.int32)
    depth = np.array([len(x[0]) for x in lay], dtype=np.int32)
    tree_of = rank[tree_of]
    width = np.where(tout >= 0, 1, K).astype(np.int64)
    voff = np.zeros(len(sets) + 1, dtype=np.int64)
    np.cumsum(width << depth.astype(np.int64), out=voff[1:])
    value = np.zeros(int(voff[-1]))
    # row of every monomial in its tree: OR of the bits of each of its conditions
    n_ent = sum(len(c) for c in sets)
    key = np.fromiter((t * nc + c for t, cs in enumerate(sets) for c in cs), dtype=np.int64, count=n_ent)
    cbits = np.fromiter((x[2][c] for x, cs in zip(lay, sets) for c in cs), dtype=np.int64, count=n_ent)
    korder = np.argsort(key, kind="stable")
    skey = key[korder]
    ent_mono = poly.mono_of_entry
    ent_key = tree_of[ent_mono] * nc + poly.mono_cond
    at = np.searchsorted(skey, ent_key)
    if poly.nnz and (np.any(at >= skey.shape[0]) or np.any(skey[np.minimum(at, skey.shape[0] - 1)] != ent_key)):
        raise CompileError("internal error: a monomial was placed in a tree that lacks one of its conditions")
    row = np.zeros(poly.n_monomials, dtype=np.int64)
    np.bitwise_or.at(row, ent_mono, cbits[korder[at]])
    t_m = tree_of
    k_m = tout[t_m]
    base = voff[t_m] + row * width[t_m]
    if K == 1:
        np.add.at(value, base, poly.weight[:, 0])
    else:
        scalar = k_m >= 0
        np.add.at(value, base[scalar], poly.weight[scalar, k_m[scalar]])
        vec = np.flatnonzero(~scalar)
        if vec.size:
            np.add.at(value, (base[vec][:, None] + np.arange(K)[None, :]).reshape(-1), poly.weight[vec].reshape(-1))
    # subset sums, per block of trees with one (depth, width, group layout)
    t = 0
    while t < len(sets):
        u = t
        while u < len(sets) and depth[u] == depth[t] and width[u] == width[t] and lay[u][3] == lay[t][3]:
            u += 1
        d, w = int(depth[t]), int(width[t])
        block = value[voff[t]:voff[u]]
        spans = lay[t][3]
        in_group = sum(b for _, b, _ in spans)
        for bit in range(d - in_group):  # plain levels come first
            v = block.reshape(u - t, 1 << (d - bit - 1), 2, 1 << bit, w)
            v[:, :, 1] += v[:, :, 0]
        for first, b, numeric in spans:
            v = block.reshape(u - t, 1 << (d - first - b), 1 << b, 1 << first, w)
            if numeric:  # a threshold of rank r holds from code r on
                np.cumsum(v, axis=2, out=v)
            else:  # a code holds at its rank only; no code of the group: every rank
                v[:, :, 1:] += v[:, :, :1]
        t = u
    n_levels = int(depth.sum())
    level_cond = np.fromiter((x[1][i][0] for x in lay for i in range(len(x[0]))), dtype=np.int64, count=n_levels)
    kinds = poly.cond_kind[level_cond]
    missing = kinds == ConditionKind.MISSING
    equal, invalid = kinds == ConditionKind.EQUAL, kinds == ConditionKind.INVALID
    is_set = equal | invalid
    thr = np.where(missing, np.inf, np.where(is_set, np.nan, poly.cond_threshold[level_cond]))
    set_arrays: dict[str, Any] = {}
    if is_set.any():  # x = code is the code; "not a valid category" is -1; a group's level holds several
        def code(c: int) -> int:
            return int(poly.cond_threshold[c]) if poly.cond_kind[c] == ConditionKind.EQUAL else INVALID_CODE

        members = [m for x in lay for m in x[1]]
        lists = [sorted(code(c) for c in members[j]) if is_set[j] else [] for j in range(n_levels)]
        size = np.array([len(v) for v in lists], dtype=np.int64)
        off = np.zeros(n_levels + 1, dtype=np.int64)
        np.cumsum(size, out=off[1:])
        set_arrays = {"level_set_offset": off,
                      "level_set_code": np.array([c for v in lists for c in v], dtype=np.int64)}
    nan_true = poly.cond_nan_true[level_cond] | missing
    bin_info = [b for x in lay for b in x[4]]
    if any(b is not None for b in bin_info):  # bit j of the count of the group's thresholds below x
        border_lists = [poly.cond_threshold[b[1]] if b is not None else np.zeros(0) for b in bin_info]
        boff = np.zeros(n_levels + 1, dtype=np.int64)
        np.cumsum([a.shape[0] for a in border_lists], out=boff[1:])
        code_bit = np.array([b[0] if b is not None else 0 for b in bin_info], dtype=np.int32)
        for i, b in enumerate(bin_info):
            if b is not None:
                j, conds = b
                thr[i] = poly.cond_threshold[conds[(1 << j) - 1]]
                nan_true[i] = bool(int(poly.cond_nan_true[conds].sum()) >> j & 1)  # NaN: the code of the
                # thresholds true on it, the lowest ones (level_groups)
        set_arrays.update(level_border_offset=boff, level_border=np.concatenate(border_lists), level_code_bit=code_bit)
    schema = poly.schema.with_(base_score=tuple(float(b) for b in poly.bias))
    return ObliviousEnsemble(schema=schema, depth=depth, level_feature=poly.cond_feature[level_cond],
                             level_threshold=thr, level_nan_true=nan_true,
                             tree_output=tout, value=value, **set_arrays)


__all__ = ["AUTO_DEPTHS", "DEFAULT_MAX_DEPTH", "STRATEGIES", "TABLE_NS", "CostModel", "RecomposeOblivious",
           "category_groups", "choose_depth",
           "cover_lower_bound", "grow_sets", "level_groups", "maximal_monomials", "polish_sets", "pooled_sets", "recompose"]
