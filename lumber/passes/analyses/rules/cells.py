"""Projected-forest cells: the paper's CDP / CRP estimator (Amoukou and Brunel).

The Projected Forest (Bénard et al.; Amoukou & Brunel section 4.1) drops a
query down every tree, sending it both ways at splits it does not determine
(a resampled feature, or a box that straddles the threshold), and keeps the
training rows that fall in *every* leaf it reaches: the rows that go the
query's way at each reached split it does determine. That set is the query's
cell of the tree's partition projected onto the determined features. The
estimate is the mean over trees (with a non-empty cell) of the target share in
the cell; the weights ``w_i = mean_t 1[i in cell_t] / |cell_t|``.

This is narrower than "the rows of the reached leaves" (their union): a row of
a reached leaf may still be on the other side of a determined split in another
reached branch. The union over-smooths the fixed features and drifted from a
Monte Carlo estimate of ``P(f(X) in Y* | X_Sbar = x_Sbar)`` by 0.055 on average
on compas (the cell estimate: 0.002; ``bench/rules.py --cdp-check``).

Implementation: every internal node's training-row routing is a bitset
(rows packed 64 to a word), keyed by (feature, threshold, missing rule) so
nodes that split alike share one. A query is a route code per internal node
(``LEFT``, ``RIGHT``, ``BOTH``, or ``NONE`` for an empty interval). Per tree
the determined reached splits on one feature with one missing rule are nested,
so only the tightest left and tightest right split per (tree, feature, missing
rule) segment bind; the cell is the AND of those bitsets, its size a popcount.
Everything is vectorized over queries; no Python loop over nodes or rows.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterator, Protocol

import numpy as np
import numpy.typing as npt

from lumber.ir import Forest
from lumber.ir.forest import ZERO_THRESHOLD
from lumber.ir.interp import go_left

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]
BoolArray = npt.NDArray[np.bool_]
Bits = npt.NDArray[np.uint64]
Routes = npt.NDArray[np.int8]

NONE, LEFT, RIGHT, BOTH = 0, 1, 2, 3
"""Route codes: bit 1 = the query may go left, bit 2 = right."""

BIG = np.iinfo(np.int64).max
CHUNK_WORDS = 1 << 22
"""Bitset words gathered at once (bounds temporaries to ~32 MB)."""

_POP8 = np.array([bin(i).count("1") for i in range(256)], dtype=np.uint8)


def popcount(a: Bits, axis: int = -1) -> IntArray:
    """Set bits along ``axis`` of a uint64 array."""
    if hasattr(np, "bitwise_count"):
        return np.bitwise_count(a).sum(axis=axis, dtype=np.int64)  # type: ignore[no-any-return]
    b = _POP8[np.ascontiguousarray(a).view(np.uint8)]
    shape = a.shape[:-1] + (a.shape[-1] * 8,)
    return b.reshape(shape).sum(axis=axis, dtype=np.int64)  # type: ignore[no-any-return]


def pack_rows(mask: BoolArray) -> Bits:
    """``(..., n)`` booleans -> ``(..., ceil(n / 64))`` uint64 words (row i at bit i % 64 of word i // 64)."""
    n = mask.shape[-1]
    words = max(1, -(-n // 64))
    pad = np.zeros(mask.shape[:-1] + (words * 64,), dtype=bool)
    pad[..., :n] = mask
    return np.packbits(pad, axis=-1, bitorder="little").view(np.uint64)  # type: ignore[no-any-return]


def unpack_rows(bits: Bits, n: int) -> BoolArray:
    b = np.unpackbits(np.ascontiguousarray(bits).view(np.uint8), axis=-1, bitorder="little")
    return b[..., :n].astype(bool)  # type: ignore[no-any-return]


class CellCounter(Protocol):
    """Faster counts of the Projected Forest's cells giving numpy's integers (the API passes a C
    kernel, ``lumber.backends.c.bitsets``); either method may return None (not available, e.g. not
    built yet): numpy then does the work."""

    def and_counts(self, bits: Bits, keys: IntArray, start: IntArray,
                   hit: Bits) -> tuple[IntArray, IntArray] | None:
        """As :func:`and_counts`."""

    def route_counts(self, cells: "CellIndex", routes: Routes,
                     hit: Bits) -> tuple[IntArray, IntArray, BoolArray] | None:
        """As :meth:`CellIndex.counts` with ``min_rows`` 1: from the routes to the counts."""


def _group_blocks(start: IntArray, words: int) -> Iterator[tuple[int, int]]:
    """Ranges of groups whose bitsets (gathered and AND-ed) stay under ``CHUNK_WORDS`` words."""
    G = start.size - 1
    per = max(1, CHUNK_WORDS // max(words, 1))
    g0 = 0
    while g0 < G:
        g1 = min(G, g0 + per, max(g0 + 1, int(np.searchsorted(start, start[g0] + per, side="right")) - 1))
        yield g0, g1
        g0 = g1


def _and_block(bits: Bits, keys: IntArray, start: IntArray, g0: int, g1: int) -> Bits:
    out = np.empty((g1 - g0, bits.shape[1]), dtype=np.uint64)
    out[:] = bits[-1]  # an empty group: every row
    a, b = int(start[g0]), int(start[g1])
    if b > a:
        first = start[g0:g1]
        full = np.diff(start[g0:g1 + 1]) > 0
        out[full] = np.bitwise_and.reduceat(bits[keys[a:b]], first[full] - a, axis=0)
    return out


def and_rows(bits: Bits, keys: IntArray, start: IntArray) -> Bits:
    """``(G, words)``: for each group g the AND of ``bits[keys[start[g]:start[g + 1]]]``; an empty
    group is ``bits[-1]`` (every row)."""
    out = np.empty((start.size - 1, bits.shape[1]), dtype=np.uint64)
    for g0, g1 in _group_blocks(start, bits.shape[1]):
        out[g0:g1] = _and_block(bits, keys, start, g0, g1)
    return out


def and_counts(bits: Bits, keys: IntArray, start: IntArray, hit: Bits) -> tuple[IntArray, IntArray]:
    """Set bits of each group's AND (:func:`and_rows`) and of the AND with ``hit``: the rows of each
    cell and its target rows (numpy; ``lumber.backends.c.bitsets`` streams the same in C)."""
    G = start.size - 1
    W = np.empty(G, dtype=np.int64)
    H = np.empty(G, dtype=np.int64)
    for g0, g1 in _group_blocks(start, bits.shape[1]):
        cell = _and_block(bits, keys, start, g0, g1)
        W[g0:g1] = popcount(cell)
        H[g0:g1] = popcount(cell & hit[None, :])
    return W, H


@dataclass(frozen=True, eq=False)
class CellIndex:
    """Per rule forest and training rows: node routing bitsets and the segment layout.

    Internal nodes are indexed ``0..V-1`` (``inner`` maps them to global node ids),
    sorted by segment; segments (tree, feature, missing rule) are grouped by tree.
    """

    forest: Forest
    n_rows: int
    inner: IntArray
    """Global node id of each internal node (in segment order)."""
    feature: IntArray
    threshold: FloatArray
    missing_left: BoolArray
    missing_zero: BoolArray
    seg_start: IntArray
    """Offsets of each segment's nodes (``S + 1``)."""
    seg_tree_start: IntArray
    """Offsets of each tree's segments (``T + 1``)."""
    rank: IntArray
    """Rank of each node's threshold among its segment group's distinct thresholds."""
    seg_key: IntArray
    """Per segment: offset of its group's thresholds in the key table."""
    bits: Bits
    """``(2K + 1, words)``: rows routed left at each key, then right, then every row."""
    levels: tuple[tuple[IntArray, IntArray, IntArray], ...]
    """Per depth: (internal index, left child, right child) with children as global node ids."""
    leaf_tree: IntArray
    """Tree of each global node."""
    seg_tree: IntArray
    """Tree of each segment."""
    depth: IntArray
    """Depth of each internal node."""
    min_rows: int = 1
    """A cell never shrinks below this many training rows: the determined splits apply level by level
    from the root and stop before the level that would (Bénard's projected trees do not split nodes
    below ``min_node_size``; the paper's code uses 5). 1 (default): every determined split applies,
    the paper's text ("the observations that fall in the intersection of the leaves")."""
    node_inner: IntArray | None = None
    """Internal index of each global node (-1: a leaf)."""
    inner_seg: IntArray | None = None
    """Segment of each internal node."""
    counter: CellCounter | None = None
    """Counts cells faster with the same integers (:class:`CellCounter`); None: numpy."""

    @property
    def n_keys(self) -> int:
        return (self.bits.shape[0] - 1) // 2

    @property
    def n_trees(self) -> int:
        return int(self.seg_tree_start.shape[0] - 1)

    # -- routes --------------------------------------------------------------------------------

    def point_routes(self, X: FloatArray) -> Routes:
        """``(q, V)``: the route of each point ``X[q]`` at every internal node (LEFT or RIGHT)."""
        X = np.atleast_2d(X)
        q, V = X.shape[0], self.inner.shape[0]
        vals = X[:, self.feature]
        nodes = np.broadcast_to(self.inner, (q, V)).reshape(-1)
        left = go_left(self.forest, nodes, vals.reshape(-1)).reshape(q, V)
        return np.where(left, LEFT, RIGHT).astype(np.int8)  # type: ignore[no-any-return]

    def interval_routes(self, lo: FloatArray, hi: FloatArray, nodes: IntArray | None = None) -> Routes:
        """``(q, V)``: routes of the boxes ``lo[q] < x <= hi[q]`` (every feature an interval); with
        ``nodes`` (internal indices) only those columns, ``(q, len(nodes))``.

        Left is possible when some value of the interval goes left (``lo < t``, or
        the zero band for a zero-as-missing split going left), right likewise; an
        interval that is the whole line also allows the missing value's way.
        """
        lo2, hi2 = np.atleast_2d(lo), np.atleast_2d(hi)
        sel = slice(None) if nodes is None else nodes
        feat = self.feature[sel]
        a, b = lo2[:, feat], hi2[:, feat]
        t = self.threshold[None, sel]
        mz = self.missing_zero[None, sel]
        ml = self.missing_left[None, sel]
        z = ZERO_THRESHOLD
        with np.errstate(invalid="ignore"):
            c = np.minimum(b, t)  # (a, c]: the values going left by the threshold
            d = np.maximum(a, t)  # (d, b]: going right
            can_l = a < c
            can_r = d < b
            # zero-as-missing: values in the zero band take the missing way, so a side needs a value outside it
            can_l = np.where(mz, can_l & ((a < -z) | (c > z)), can_l)
            can_r = np.where(mz, can_r & ((d < -z) | (b > z)), can_r)
            band = mz & (a < z) & (b >= -z) & (a < b)
            free = np.isneginf(a) & np.isposinf(b)  # a free feature may also be missing
        miss = band | free
        can_l = can_l | (miss & ml)
        can_r = can_r | (miss & ~ml)
        return (can_l.astype(np.int8) * LEFT + can_r.astype(np.int8) * RIGHT).astype(np.int8)  # type: ignore

    # -- estimates -----------------------------------------------------------------------------

    def cells(self, routes: Routes) -> tuple[Bits, BoolArray]:
        """``(q, T, words)`` cell bitsets and ``(q, T)`` "the query reaches a leaf" for each route row."""
        bl, br, level, alive = self._plan(routes, None)
        keys, start = self._entries(bl, br, level)
        return and_rows(self.bits, keys, start).reshape(routes.shape[0], self.n_trees, -1), alive

    def counts(self, routes: Routes, hit: Bits) -> tuple[IntArray, IntArray, BoolArray]:
        """``(q, T)`` rows of each cell, of those the ``hit`` rows, and "the query reaches a leaf"."""
        if self.counter is not None and self.min_rows <= 1:
            got = self.counter.route_counts(self, routes, hit)
            if got is not None:
                return got
        bl, br, level, alive = self._plan(routes, hit)
        keys, start = self._entries(bl, br, level)
        W, H = self._count(keys, start, hit)
        q = routes.shape[0]
        return W.reshape(q, self.n_trees), H.reshape(q, self.n_trees), alive

    def _count(self, keys: IntArray, start: IntArray, hit: Bits) -> tuple[IntArray, IntArray]:
        got = None if self.counter is None else self.counter.and_counts(self.bits, keys, start, hit)
        return and_counts(self.bits, keys, start, hit) if got is None else got

    def _plan(self, routes: Routes, hit: Bits | None) -> tuple[IntArray, IntArray, IntArray, BoolArray]:
        """Each query's reached leaves and, per segment, its tightest determined left and right split
        (``(q, S, D)`` ranks, by depth when ``min_rows`` > 1), with the level of splits each tree's cell
        keeps (``(q, T)``; -1: none, every row)."""
        q = routes.shape[0]
        n_nodes = self.forest.n_nodes
        reached = np.zeros((q, n_nodes), dtype=bool)
        reached[:, self.forest.roots] = True
        for vi, lc, rc in self.levels:
            r = routes[:, vi]
            par = reached[:, self.inner[vi]]
            reached[:, lc] = par & ((r & LEFT) != 0)
            reached[:, rc] = par & ((r & RIGHT) != 0)
        leaves = self.forest.left < 0
        lidx = np.flatnonzero(leaves)
        lt = self.leaf_tree[lidx]
        alive = np.logical_or.reduceat(reached[:, lidx], np.searchsorted(lt, np.arange(self.n_trees)), axis=1)
        if self.seg_start.size <= 1:
            none = np.zeros((q, 0, 1), dtype=np.int64)
            return none, none, np.full((q, self.n_trees), -1, dtype=np.int64), alive
        rin = reached[:, self.inner]
        cl = rin & (routes == LEFT)
        cr = rin & (routes == RIGHT)
        ss = self.seg_start[:-1]
        rank = self.rank[None, :]
        if self.min_rows <= 1:
            bl = np.minimum.reduceat(np.where(cl, rank, BIG), ss, axis=1)[:, :, None]
            br = np.maximum.reduceat(np.where(cr, rank, -1), ss, axis=1)[:, :, None]
            return bl, br, np.zeros((q, self.n_trees), dtype=np.int64), alive
        # the tightest split per segment among the determined splits at depth <= d, for every d
        D = len(self.levels)
        bl = np.empty((q, ss.size, D), dtype=np.int64)
        br = np.empty((q, ss.size, D), dtype=np.int64)
        for d in range(D):
            at = (self.depth == d)[None, :]
            bl[:, :, d] = np.minimum.reduceat(np.where(cl & at, rank, BIG), ss, axis=1)
            br[:, :, d] = np.maximum.reduceat(np.where(cr & at, rank, -1), ss, axis=1)
        np.minimum.accumulate(bl, axis=2, out=bl)
        np.maximum.accumulate(br, axis=2, out=br)
        full = np.full((q, self.n_trees), D - 1, dtype=np.int64)
        ones = self.bits[-1] if hit is None else hit  # only the cell sizes matter here
        small = self._count(*self._entries(bl, br, full), ones)[0].reshape(q, self.n_trees) < self.min_rows
        if not small.any():
            return bl, br, full, alive
        # a cell may not shrink below min_rows: keep the splits of the deepest level that leaves that
        # many rows (levels apply top-down; -1 = no split, every row). Binary search, all pairs at once.
        lo = np.full((q, self.n_trees), -1, dtype=np.int64)
        hi = full.copy()
        while True:
            open_ = small & (hi - lo > 1)
            if not open_.any():
                break
            mid = np.where(open_, (lo + hi) // 2, full)
            ok = self._count(*self._entries(bl, br, mid), ones)[0].reshape(q, self.n_trees) >= self.min_rows
            lo = np.where(open_ & ok, mid, lo)
            hi = np.where(open_ & ~ok, mid, hi)
        return bl, br, np.where(small, lo, full), alive

    def _entries(self, bl: IntArray, br: IntArray, level: IntArray) -> tuple[IntArray, IntArray]:
        """The bitsets whose AND is each (query, tree)'s cell: each segment's tightest left and right
        split at the tree's ``level`` (``bl``/``br``: ``(q, S, D)`` ranks; level -1: no split). Returns
        the keys (rows of ``bits``) grouped by ``query * T + tree`` and the groups' offsets (``q * T + 1``);
        a tree without a determined split has an empty group (every row).

        Only the bitsets of determined splits are listed (regional queries leave most segments free)."""
        q = level.shape[0]
        T = self.n_trees
        if bl.shape[1] == 0:
            return np.zeros(0, dtype=np.int64), np.zeros(q * T + 1, dtype=np.int64)
        lv = level[:, self.seg_tree]  # (q, S)
        take = np.maximum(lv, 0)[:, :, None]
        L = np.take_along_axis(bl, np.minimum(take, bl.shape[2] - 1), axis=2)[:, :, 0]
        R = np.take_along_axis(br, np.minimum(take, br.shape[2] - 1), axis=2)[:, :, 0]
        none = lv < 0
        K = self.n_keys
        ones = 2 * K
        kl = np.where((L < BIG) & ~none, self.seg_key[None, :] + np.minimum(L, K), ones)
        kr = np.where((R >= 0) & ~none, K + self.seg_key[None, :] + np.maximum(R, 0), ones)
        idx = np.empty((q, 2 * kl.shape[1]), dtype=np.int64)
        idx[:, 0::2] = kl
        idx[:, 1::2] = kr
        # entries come out grouped by (query, tree) because segments are sorted by tree
        qq, jj = np.nonzero(idx != ones)
        grp = qq * T + np.repeat(self.seg_tree, 2)[jj]
        return idx[qq, jj], np.searchsorted(grp, np.arange(q * T + 1)).astype(np.int64)

    def estimate(self, routes: Routes, hit: Bits) -> tuple[FloatArray, IntArray]:
        """Mean over trees of the target share of each query's cell, and the trees that count
        (a tree whose cell holds no training row is left out; with none the estimate is 0)."""
        q = routes.shape[0]
        prob = np.empty(q)
        used = np.empty(q, dtype=np.int64)
        words = self.bits.shape[1]
        step = max(1, min(256, CHUNK_WORDS // max(self.n_trees * words, 1)))
        for s in range(0, q, step):
            W, H, alive = self.counts(routes[s:s + step], hit)
            W = W * alive
            H = H * alive
            valid = W > 0
            ratio = np.divide(H, W, out=np.zeros(W.shape), where=valid)
            nv = valid.sum(axis=1)
            prob[s:s + step] = ratio.sum(axis=1) / np.maximum(nv, 1)
            used[s:s + step] = nv
        return prob, used

    def weights(self, route: Routes) -> FloatArray:
        """Forest weights ``w_i`` of the training rows for one query (``route`` of shape ``(V,)``)."""
        cell, alive = self.cells(route[None, :])
        member = unpack_rows(cell[0], self.n_rows) & alive[0][:, None]  # (T, n)
        W = member.sum(axis=1)
        valid = W > 0
        if not valid.any():
            return np.zeros(self.n_rows)
        inv = np.divide(1.0, W, out=np.zeros(W.shape), where=valid)
        return (member * inv[:, None]).sum(axis=0) / float(valid.sum())  # type: ignore[no-any-return]

    def hit_bits(self, hit: BoolArray) -> Bits:
        return pack_rows(np.asarray(hit, dtype=bool))


def build_cells(forest: Forest, X: FloatArray, min_rows: int = 1, counter: CellCounter | None = None) -> CellIndex:
    """Routing bitsets of the training rows ``X`` (as the forest reads them) at every split."""
    inner_all = np.flatnonzero(forest.left >= 0).astype(np.int64)
    if forest.is_categorical[inner_all].any():
        raise ValueError("projected cells need threshold splits")
    tree = forest.node_tree.astype(np.int64)
    feat = forest.feature[inner_all].astype(np.int64)
    thr = forest.threshold[inner_all].astype(np.float64)
    ml = forest.missing_left[inner_all].astype(bool)
    mz = forest.missing_zero[inner_all].astype(bool)
    group = feat * 4 + ml.astype(np.int64) * 2 + mz.astype(np.int64)
    # segment order: tree, group, threshold
    order = np.lexsort((thr, group, tree[inner_all]))
    inner = inner_all[order]
    feat, thr, ml, mz, group = feat[order], thr[order], ml[order], mz[order], group[order]
    t_in = tree[inner]
    seg_id = np.concatenate([[True], (t_in[1:] != t_in[:-1]) | (group[1:] != group[:-1])]) if inner.size else \
        np.zeros(0, dtype=bool)
    seg_start = np.concatenate([np.flatnonzero(seg_id), [inner.size]]).astype(np.int64)
    seg_tree = t_in[seg_start[:-1]] if inner.size else np.zeros(0, dtype=np.int64)
    seg_tree_start = np.searchsorted(seg_tree, np.arange(forest.n_trees + 1)).astype(np.int64)
    # keys: distinct (group, threshold); rank within the group
    gkey = np.lexsort((thr, group))
    g_sorted, t_sorted = group[gkey], thr[gkey]
    first = np.concatenate([[True], (g_sorted[1:] != g_sorted[:-1]) | (t_sorted[1:] != t_sorted[:-1])]) \
        if inner.size else np.zeros(0, dtype=bool)
    key_of_sorted = np.cumsum(first) - 1
    key = np.empty(inner.size, dtype=np.int64)
    key[gkey] = key_of_sorted
    n_keys = int(first.sum())
    gstart_key = np.empty(n_keys, dtype=np.int64)  # the group's first key, per key
    kg = g_sorted[first]
    new_group = np.concatenate([[True], kg[1:] != kg[:-1]]) if n_keys else np.zeros(0, dtype=bool)
    gfirst = np.maximum.accumulate(np.where(new_group, np.arange(n_keys), 0)) if n_keys else gstart_key
    gstart_key[:] = gfirst
    rank = key - gstart_key[key]
    seg_key = gstart_key[key[seg_start[:-1]]] if inner.size else np.zeros(0, dtype=np.int64)
    # routing bitsets per key (exact: the forest's own go_left at a representative node)
    rep = np.empty(n_keys, dtype=np.int64)
    rep[key] = inner
    n = X.shape[0]
    words = max(1, -(-n // 64))
    bits = np.empty((2 * n_keys + 1, words), dtype=np.uint64)
    block = max(1, (1 << 22) // max(n, 1))
    for s in range(0, n_keys, block):
        nodes = rep[s:s + block]
        vals = X[:, forest.feature[nodes]].T  # (b, n)
        left = go_left(forest, np.repeat(nodes, n), vals.reshape(-1)).reshape(nodes.size, n)
        bits[s:s + nodes.size] = pack_rows(left)
        bits[n_keys + s:n_keys + s + nodes.size] = pack_rows(~left)
    bits[2 * n_keys] = pack_rows(np.ones(n, dtype=bool))
    # levels for the reach computation (internal index of the parent, children global ids)
    pos = np.full(forest.n_nodes, -1, dtype=np.int64)
    pos[inner] = np.arange(inner.size)
    depth = forest.depth[inner]
    levels = []
    for d in range(int(depth.max()) + 1 if inner.size else 0):
        vi = np.flatnonzero(depth == d)
        g = inner[vi]
        levels.append((vi, forest.left[g].astype(np.int64), forest.right[g].astype(np.int64)))
    return CellIndex(forest=forest, n_rows=n, inner=inner, feature=feat, threshold=thr, missing_left=ml,
                     missing_zero=mz, seg_start=seg_start, seg_tree_start=seg_tree_start, rank=rank,
                     seg_key=seg_key, bits=bits, levels=tuple(levels), leaf_tree=tree, seg_tree=seg_tree,
                     depth=depth.astype(np.int64), min_rows=int(min_rows), node_inner=pos,
                     inner_seg=np.repeat(np.arange(seg_start.size - 1, dtype=np.int64), np.diff(seg_start)),
                     counter=counter)


__all__ = ["BOTH", "CellCounter", "CellIndex", "LEFT", "NONE", "RIGHT", "and_counts", "and_rows", "build_cells",
           "pack_rows", "popcount", "unpack_rows"]
