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

``pack`` (default): the same order, but a monomial that fits nowhere may
also *extend* the existing tree that already holds most of its conditions,
when the grown tree stays within ``max-depth`` and the tables within a total
budget (:class:`CostModel`: a table lookup per tree and row is the evaluator's
main cost, levels are nearly free, so fewer and deeper trees are faster).
Afterwards trees whose condition sets nest are merged (``merge``), smallest
first.

``grow``: tree at a time. The maximal monomials (no monomial one condition
larger contains them) decide the cover, their subsets follow. A tree starts
from the largest uncovered maximal monomial and grows one or two conditions
at a time, always by the condition (pair) that completes the most uncovered
maximal monomials per level added, until ``max-depth``; then every maximal
monomial inside its level set is covered. Filling one tree before starting the
next packs monomials that share conditions; on LightGBM 500 x 63 at depth 10 it
needs about a quarter fewer trees than ``pack`` (docs/passes.md has the numbers).

Covering non-maximal monomials needs no search: a monomial one condition
short of an already placed monomial goes to that monomial's tree (one
vectorized step per degree); only the rest (maximal monomials, or ones whose
supersets skip a degree) are placed one by one through an inverted index
from conditions to trees. Monomials whose weights touch one output only go
to scalar trees of that output, others to vector trees.

Conditions become levels: ``x > b`` (NaN: ``cond_nan_true``), the
MISSING condition ``x is NaN`` becomes ``x > +inf`` true on NaN, and the
category conditions become category levels: ``x = code`` the set ``{code}``,
"not a valid category" the set ``{-1}`` (``ObliviousEnsemble`` docstring).
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any, ClassVar, Literal

import numpy as np
import numpy.typing as npt

from lumber.ir import CompileError, ObliviousEnsemble, Polynomial
from lumber.ir.oblivious import INVALID_CODE, MAX_DEPTH
from lumber.ir.polynomial import ConditionKind

from ..base import PassContext, PassReport, Transform

STRATEGIES = ("greedy", "pack", "grow")
DEFAULT_MAX_DEPTH = 8
"""Tables of up to 256 rows: the C evaluator's fastest index width (one byte) and L1-sized tables."""


@dataclass(frozen=True)
class CostModel:
    """Relative evaluation cost of one tree per row: ``lookup + level * depth``.

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

    def tree(self, depth: int) -> float:
        return self.lookup + self.level * depth


@dataclass
class _Cover:
    """Trees being built: condition sets, an inverted index and the table bytes so far."""

    max_depth: int
    strategy: str
    cost: CostModel
    sets: list[set[int]] = field(default_factory=list)
    index: dict[int, list[int]] = field(default_factory=dict)
    table_bytes: int = 0
    extensions: int = 0

    def new_tree(self, conds: set[int]) -> int:
        t = len(self.sets)
        self.sets.append(set(conds))
        for c in conds:
            self.index.setdefault(c, []).append(t)
        self.table_bytes += 8 << len(conds)
        return t

    def extend(self, t: int, conds: set[int]) -> None:
        s = self.sets[t]
        new = conds - s
        self.table_bytes += (8 << (len(s) + len(new))) - (8 << len(s))
        s |= new
        for c in new:
            self.index.setdefault(c, []).append(t)
        self.extensions += 1

    def covering(self, conds: list[int]) -> int:
        """A tree containing every condition, or -1 (scans the shortest posting list)."""
        best: list[int] | None = None
        for c in conds:
            lst = self.index.get(c)
            if lst is None:
                return -1
            if best is None or len(lst) < len(best):
                best = lst
        if best is None:
            return -1
        cs = set(conds)
        for t in best:
            if cs <= self.sets[t]:
                return t
        return -1

    def place(self, conds: list[int]) -> int:
        """Tree for a monomial no tree covers: a new one, or (pack) the cheapest extension:
        fewest new conditions, then the smallest grown table, then the oldest tree."""
        cs = set(conds)
        if self.strategy != "pack":
            return self.new_tree(cs)
        k = len(cs)
        counts: Counter[int] = Counter()
        for c in cs:
            counts.update(self.index.get(c, ()))
        for t in range(max(0, len(self.sets) - self.cost.recent), len(self.sets)):
            counts.setdefault(t, 0)
        best: tuple[float, int, int] = (self.cost.tree(k), 1 << 62, -1)
        for t, shared in counts.items():
            size = len(self.sets[t])
            grown = size + k - shared
            if grown > self.max_depth:
                continue
            if self.table_bytes + (8 << grown) - (8 << size) > self.cost.budget_bytes:
                continue
            cand = (self.cost.level * (k - shared), grown, t)
            if cand < best:
                best = cand
        if best[2] < 0:
            return self.new_tree(cs)
        self.extend(best[2], cs)
        return best[2]


@dataclass(frozen=True)
class RecomposeOblivious(Transform[Polynomial, ObliviousEnsemble]):
    """Re-compose a polynomial into oblivious trees (exact); see the module docstring."""

    name: ClassVar[str] = "oblivious"
    max_depth: int | Literal["auto"] = "auto"
    """Deepest table (2^max_depth rows); at least the polynomial's largest degree.
    ``auto``: 8, or the largest degree when that is more."""
    strategy: str = "pack"
    """``greedy`` (the paper's Algorithm 1), ``pack`` (extend trees under a cost model) or ``grow``
    (fill one tree at a time with the maximal monomials it completes)."""
    merge: bool = True
    """Merge trees whose condition sets nest (pack only)."""
    table_mb: int = 64
    """Total table size (MiB) past which no tree grows (``pack``)."""

    def __post_init__(self) -> None:
        if self.max_depth != "auto" and not (isinstance(self.max_depth, int) and 1 <= self.max_depth <= MAX_DEPTH):
            raise CompileError(f"max-depth must be 'auto' or between 1 and {MAX_DEPTH}, got {self.max_depth}")
        if self.strategy not in STRATEGIES:
            raise CompileError(f"unknown strategy {self.strategy!r}", f"strategies: {', '.join(STRATEGIES)}")
        if self.table_mb < 1:
            raise CompileError(f"table-mb must be positive, got {self.table_mb}")

    def run(self, ir: Polynomial, ctx: PassContext) -> ObliviousEnsemble:
        depth = max(DEFAULT_MAX_DEPTH, ir.max_degree) if self.max_depth == "auto" else self.max_depth
        ens, stats = recompose(ir, max_depth=depth, strategy=self.strategy, merge=self.merge,
                               cost=CostModel(budget_bytes=self.table_mb << 20))
        by_depth = ", ".join(f"{c} x depth {d}" for d, c in sorted(stats["trees_by_depth"].items()))
        ctx.report(PassReport(self.name, (
            f"{ir.n_monomials:,} monomials -> {ens.n_trees:,} oblivious trees ({by_depth}); "
            f"{stats['table_bytes'] / 1024:,.1f} KiB of tables; {stats['searched']:,} monomials placed by search, "
            f"{stats['extensions']:,} tree extensions, {stats['merged']:,} nested trees merged "
            f"(strategy {self.strategy}, max-depth {depth})"), stats))
        return ens


def recompose(poly: Polynomial, *, max_depth: int = DEFAULT_MAX_DEPTH, strategy: str = "pack", merge: bool = True,
              cost: CostModel | None = None) -> tuple[ObliviousEnsemble, dict[str, Any]]:
    """The ensemble and statistics (trees, depths, table bytes, search counts, seconds)."""
    t0 = time.perf_counter()
    cost = cost or CostModel()
    if poly.max_degree > max_depth:
        j = int(np.flatnonzero(poly.degree == poly.max_degree)[0])
        raise CompileError(
            f"monomial {j} has {poly.max_degree} conditions but max-depth is {max_depth}: "
            f"every monomial must fit in one oblivious tree",
            f"use oblivious{{max-depth={poly.max_degree}}} or more (tables of 2^{poly.max_degree} rows), "
            "or prune the polynomial first")
    K = poly.n_outputs
    nonzero = poly.weight != 0
    group = np.where(nonzero.sum(axis=1) == 1, np.argmax(nonzero, axis=1), -1) if K > 1 else np.zeros(
        poly.n_monomials, dtype=np.int64)
    ids = np.asarray(poly.padded_ids, dtype=np.int64)
    deg = poly.degree
    outputs: list[int] = []
    sets_all: list[list[int]] = []
    tree_of_all = np.full(poly.n_monomials, -1, dtype=np.int64)
    searched = extensions = merged = 0
    for g in sorted(set(group.tolist())):
        members = np.flatnonzero(group == g)
        cover = _Cover(max_depth, strategy, cost)
        if strategy == "grow":
            for conds in grow_sets(ids[members], deg[members], poly.n_conditions, max_depth):
                cover.new_tree(set(conds))
        assign = _cover(cover, ids[members], deg[members])
        searched += int(assign[1])
        extensions += cover.extensions
        tree_of = assign[0]
        sets = cover.sets
        if merge and strategy == "pack":
            tree_of, sets, n_merged = _merge_nested(sets, tree_of)
            merged += n_merged
        tree_of_all[members] = tree_of + len(sets_all)
        sets_all.extend(sorted(s) for s in sets)
        outputs.extend([int(g)] * len(sets))
    ens = _build(poly, outputs, sets_all, tree_of_all)
    st = ens.statistics()
    stats = {"trees": ens.n_trees, "trees_by_depth": st["trees_by_depth"], "table_entries": st["table_entries"],
             "table_bytes": st["table_bytes"], "max_depth": st["max_depth"], "searched": searched,
             "extensions": extensions, "merged": merged, "monomials": poly.n_monomials,
             "seconds": time.perf_counter() - t0, "strategy": strategy, "max_depth_cap": max_depth}
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


def grow_sets(ids: npt.NDArray[np.int64], deg: npt.NDArray[np.int64], n_conditions: int,
              max_depth: int) -> list[list[int]]:
    """Level sets covering every maximal monomial, built one tree at a time (strategy ``grow``).

    A tree starts from the largest uncovered maximal monomial; while it has room it adds the
    condition that completes the most uncovered monomials (those missing exactly it), or the pair
    that completes the most per level, or else the fewest conditions that complete one monomial
    it shares conditions with, or else the next uncovered monomial that fits.
    """
    top = np.flatnonzero(maximal_monomials(ids, deg))
    P, dg = ids[top], deg[top]
    m, W = P.shape
    nc = n_conditions
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
    tag = np.zeros(m, dtype=np.int64)
    in_s = np.zeros(nc + 1, dtype=bool)
    in_s[nc] = True
    order = np.argsort(-dg, kind="stable")
    sets: list[list[int]] = []
    ptr = 0

    def holders(conds: list[int]) -> npt.NDArray[np.int64]:
        """Uncovered maximal monomials holding one of ``conds`` that the tree has not seen yet."""
        parts = [post_m[post_off[c]:post_off[c + 1]] for c in conds]
        new = np.concatenate(parts) if parts else np.zeros(0, np.int64)
        new = new[alive[new] & ~seen[new]]
        tag[new] = np.arange(new.shape[0])
        new = new[tag[new] == np.arange(new.shape[0])]  # each monomial once
        seen[new] = True
        return new

    while True:
        while ptr < m and not alive[order[ptr]]:
            ptr += 1
        if ptr >= m:
            break
        seed = int(order[ptr])
        S = [int(c) for c in P[seed, :dg[seed]]]
        in_s[S] = True
        cand = holders(S)
        touched = [cand]
        while True:
            room = max_depth - len(S)
            hit = in_s[P[cand]]
            miss = W - hit.sum(axis=1)
            fit = miss <= room
            cand, hit, miss = cand[fit], hit[fit], miss[fit]
            if room == 0:
                break
            best: list[int] = []
            score = 0.0
            one = np.flatnonzero(miss == 1)
            n1 = np.zeros(nc + 1, dtype=np.int64)
            if one.size:
                c1 = P[cand[one]][~hit[one]]
                n1 = np.bincount(c1, minlength=nc + 1)
                b = int(np.argmax(n1))
                best, score = [b], float(n1[b])
            two = np.flatnonzero(miss == 2) if room >= 2 else np.zeros(0, np.int64)
            if two.size:
                c2 = P[cand[two]][~hit[two]].reshape(-1, 2)
                key = c2[:, 0] * (nc + 1) + c2[:, 1]
                uk, cnt = np.unique(key, return_counts=True)
                a, b2 = uk // (nc + 1), uk % (nc + 1)
                s2 = (cnt + n1[a] + n1[b2]) / 2.0
                j = int(np.argmax(s2))
                if s2[j] > score:
                    best, score = [int(a[j]), int(b2[j])], float(s2[j])
            if not best:
                more = np.flatnonzero(miss >= 3)
                if more.size:
                    j = int(more[np.argmin(miss[more])])
                    best = [int(c) for c in P[cand[j]][~hit[j]]]
            if not best:
                for q in range(ptr + 1, min(m, ptr + 64)):
                    i = int(order[q])
                    if alive[i] and dg[i] <= room and not in_s[P[i]].all():
                        best = [int(c) for c in P[i, :dg[i]] if not in_s[c]]
                        break
            if not best:
                break
            S.extend(best)
            in_s[best] = True
            new = holders(best)
            touched.append(new)
            cand = np.concatenate([cand, new])
        done = cand[miss == 0] if cand.size else cand
        alive[done] = False
        alive[seed] = False
        in_s[S] = False
        for t in touched:
            seen[t] = False
        sets.append(sorted(S))
    return sets


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


def _build(poly: Polynomial, outputs: list[int], sets: list[list[int]],
           tree_of: npt.NDArray[np.int64]) -> ObliviousEnsemble:
    """Tables by subset sums: each monomial's weight goes to the row where exactly its conditions
    hold, then ``table[idx] = sum of rows idx' subset of idx`` (one numpy step per bit and depth).

    Trees are ordered by (depth, output) so tables of one shape are contiguous.
    """
    K = poly.n_outputs
    nc = poly.n_conditions
    order = sorted(range(len(sets)), key=lambda t: (len(sets[t]), outputs[t], t))
    rank = np.empty(len(sets), dtype=np.int64)
    rank[order] = np.arange(len(sets))
    sets = [sets[t] for t in order]
    tout = np.array([outputs[t] if K > 1 else 0 for t in order], dtype=np.int32)
    depth = np.array([len(c) for c in sets], dtype=np.int32)
    tree_of = rank[tree_of]
    level_cond = np.concatenate([np.asarray(c, dtype=np.int64) for c in sets]) if sets else np.zeros(0, np.int64)
    level_tree = np.repeat(np.arange(len(sets), dtype=np.int64), depth)
    level_pos = np.arange(level_cond.shape[0]) - np.repeat(np.cumsum(depth) - depth, depth)
    width = np.where(tout >= 0, 1, K).astype(np.int64)
    voff = np.zeros(len(sets) + 1, dtype=np.int64)
    np.cumsum(width << depth.astype(np.int64), out=voff[1:])
    value = np.zeros(int(voff[-1]))
    # row of every monomial in its tree: OR of 1 << level of each of its conditions
    key = level_tree * nc + level_cond
    korder = np.argsort(key, kind="stable")
    skey = key[korder]
    ent_mono = poly.mono_of_entry
    ent_key = tree_of[ent_mono] * nc + poly.mono_cond
    at = np.searchsorted(skey, ent_key)
    if poly.nnz and (np.any(at >= skey.shape[0]) or np.any(skey[np.minimum(at, skey.shape[0] - 1)] != ent_key)):
        raise CompileError("internal error: a monomial was placed in a tree that lacks one of its conditions")
    row = np.zeros(poly.n_monomials, dtype=np.int64)
    np.bitwise_or.at(row, ent_mono, np.left_shift(1, level_pos[korder[at]]))
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
    # subset sums, per block of trees with one (depth, width)
    t = 0
    while t < len(sets):
        u = t
        while u < len(sets) and depth[u] == depth[t] and width[u] == width[t]:
            u += 1
        d, w = int(depth[t]), int(width[t])
        if d:
            block = value[voff[t]:voff[u]].reshape((u - t,) + (2,) * d + (w,))
            for axis in range(1, d + 1):
                hi: list[slice | int] = [slice(None)] * (d + 2)
                lo: list[slice | int] = [slice(None)] * (d + 2)
                hi[axis], lo[axis] = 1, 0
                block[tuple(hi)] += block[tuple(lo)]
        t = u
    kinds = poly.cond_kind[level_cond]
    missing = kinds == ConditionKind.MISSING
    equal, invalid = kinds == ConditionKind.EQUAL, kinds == ConditionKind.INVALID
    thr = np.where(missing, np.inf, np.where(equal | invalid, np.nan, poly.cond_threshold[level_cond]))
    set_arrays: dict[str, Any] = {}
    if (equal | invalid).any():  # x = code is the set {code}; "not a valid category" the set {-1}
        size = (equal | invalid).astype(np.int64)
        off = np.zeros(level_cond.shape[0] + 1, dtype=np.int64)
        np.cumsum(size, out=off[1:])
        codes = np.where(equal, poly.cond_threshold[level_cond], float(INVALID_CODE))[size > 0]
        set_arrays = dict(level_set_offset=off, level_set_code=codes.astype(np.int64))
    schema = poly.schema.with_(base_score=tuple(float(b) for b in poly.bias))
    return ObliviousEnsemble(schema=schema, depth=depth, level_feature=poly.cond_feature[level_cond],
                             level_threshold=thr, level_nan_true=poly.cond_nan_true[level_cond] | missing,
                             tree_output=tout, value=value, **set_arrays)


__all__ = ["CostModel", "DEFAULT_MAX_DEPTH", "RecomposeOblivious", "STRATEGIES", "grow_sets",
           "maximal_monomials", "recompose"]
