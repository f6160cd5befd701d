"""Lay a Forest out as C tables: one slot per node, siblings adjacent, leaves as self loops.

The walk step is ``slot = child[slot] + went_right``, so a node needs only its
first child; a leaf points at itself with a NaN threshold, so extra steps are
harmless and a tree can be walked a fixed number of steps without branches.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from lumber.ir import Forest

MODE_FIXED, MODE_CONVERGE, MODE_CODE = 0, 1, 3
MODE_SPECIAL = 4
"""Flag on a tree's mode: it has categorical or zero-as-missing nodes (full node semantics)."""

FLAG_MISSING_LEFT = 1
FLAG_MISSING_ZERO = 2
FLAG_CATEGORICAL = 4
FLAG_IN_SET_LEFT = 8
FLAG_INVALID_LEFT = 16
FLAG_FAST_CAT = 32
"""Categorical node whose set fits a 32-bit direction mask (members <= FAST_CAT_MAX)."""
FAST_CAT_MAX = 28
"""Mask bits: 0..28 the codes, 29 any other valid code, 30 invalid values, 31 NaN."""

MAX_CODE = 2**32
"""No category rule accepts a code at or above this, so larger set members can never match."""


@dataclass(frozen=True)
class CatTables:
    """Category sets of categorical slots: bitsets when dense, sorted lists when sparse."""

    ref: npt.NDArray[np.int32]       # per slot: index into desc, 0 for non-categorical slots
    desc: npt.NDArray[np.uint32]     # (n_sets, 3): offset, size, is_list
    words: npt.NDArray[np.uint32]
    codes: npt.NDArray[np.uint32]


@dataclass(frozen=True)
class Layout:
    """Slot-ordered arrays ready to print.

    Special slots (categorical or zero-as-missing) read a decision column in the walk:
    ``walk_feature = n_features + k`` (k-th special node of its tree) against
    ``walk_threshold = 0.5``; ``feature``/``threshold`` keep the node's own test.
    """

    node_of: npt.NDArray[np.int64]   # forest node id of each slot
    child: npt.NDArray[np.int64]     # first child slot (self for leaves)
    feature: npt.NDArray[np.int64]   # 0 for leaves
    threshold: npt.NDArray[np.float64]  # in the input dtype's values; NaN on leaves
    walk_feature: npt.NDArray[np.int64]
    walk_threshold: npt.NDArray[np.float64]
    special_offset: npt.NDArray[np.int64]  # per tree + 1: CSR into special_slots
    special_slots: npt.NDArray[np.int64]
    row_stride: int                  # n_features + most special nodes in one tree
    flags: npt.NDArray[np.uint8]
    local: npt.NDArray[np.int64]     # node id local to its tree (what apply() returns)
    root: npt.NDArray[np.int64]      # per tree
    steps: npt.NDArray[np.int64]     # per tree
    mode: npt.NDArray[np.int64]      # per tree
    cats: CatTables | None
    catmask: npt.NDArray[np.uint32] | None  # per slot, for FLAG_FAST_CAT slots
    fastcat_features: npt.NDArray[np.int64]  # features read by FLAG_FAST_CAT slots


def round_down_f32(t: npt.NDArray[np.float64]) -> npt.NDArray[np.float32]:
    """Largest float32 <= t, elementwise: for float32 x, ``x <= t`` iff ``x <= round_down_f32(t)``."""
    with np.errstate(over="ignore"):
        t32 = t.astype(np.float32)
    up = t32.astype(np.float64) > t
    t32[up] = np.nextafter(t32[up], np.float32(-np.inf))
    return t32


def slot_order(forest: Forest) -> npt.NDArray[np.int64]:
    """Node ids in slot order: per tree breadth first, each internal node's children adjacent."""
    left = forest.left.astype(np.int64)
    right = forest.right.astype(np.int64)
    levels = []
    frontier = forest.tree_offset[:-1].astype(np.int64)
    while frontier.size:
        levels.append(frontier)
        inner = frontier[left[frontier] >= 0]
        frontier = np.stack([left[inner], right[inner]], axis=1).reshape(-1)
    order = np.concatenate(levels) if levels else np.zeros(0, dtype=np.int64)
    return order[np.argsort(forest.node_tree[order], kind="stable")]


def walk_modes(forest: Forest, special: npt.NDArray[np.bool_]) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]:
    """Per tree: steps and walk mode.

    A tree whose leaves are all near its maximum depth is walked exactly that many
    steps (no leaf test at all); a lopsided tree walks its minimum leaf depth, then
    steps until every row of the group sits on a leaf.
    """
    T = forest.n_trees
    depth = forest.depth.astype(np.int64)
    tree = forest.node_tree.astype(np.int64)
    leaf = forest.is_leaf
    lt, ld = tree[leaf], depth[leaf]
    dmax = np.zeros(T, dtype=np.int64)
    np.maximum.at(dmax, lt, ld)
    dmin = np.full(T, np.iinfo(np.int64).max, dtype=np.int64)
    np.minimum.at(dmin, lt, ld)
    nleaf = np.bincount(lt, minlength=T)
    dmean = np.bincount(lt, weights=ld, minlength=T) / np.maximum(nleaf, 1)
    converge = dmax > dmean + 4
    steps = np.where(converge, dmin, dmax)
    mode = np.where(converge, MODE_CONVERGE, MODE_FIXED) | np.where(special, MODE_SPECIAL, 0)
    return steps, mode


def _cat_tables(forest: Forest, node_of: npt.NDArray[np.int64], flags: npt.NDArray[np.uint8]) -> CatTables:
    n_slots = node_of.shape[0]
    ref = np.zeros(n_slots, dtype=np.int32)
    desc: list[tuple[int, int, int]] = []
    words: list[npt.NDArray[np.uint32]] = []
    codes: list[npt.NDArray[np.uint32]] = []
    n_words = n_codes = 0
    for s in np.flatnonzero(flags & FLAG_CATEGORICAL):
        vals = forest.categories_of(int(node_of[s]))
        vals = vals[vals < MAX_CODE]
        ref[s] = len(desc)
        top = int(vals.max()) + 1 if vals.size else 0
        nw = (top + 31) // 32
        if nw <= max(8, 4 * vals.size):
            w = np.zeros(nw, dtype=np.uint32)
            np.bitwise_or.at(w, vals >> 5, np.left_shift(np.uint32(1), (vals & 31).astype(np.uint32)))
            desc.append((n_words, nw, 0))
            words.append(w)
            n_words += nw
        else:
            desc.append((n_codes, vals.size, 1))
            codes.append(vals.astype(np.uint32))
            n_codes += vals.size
    return CatTables(
        ref=ref,
        desc=np.array(desc, dtype=np.uint32).reshape(-1, 3),
        words=np.concatenate(words) if words else np.zeros(0, dtype=np.uint32),
        codes=np.concatenate(codes) if codes else np.zeros(0, dtype=np.uint32),
    )


def _catmasks(forest: Forest, node_of: npt.NDArray[np.int64], flags: npt.NDArray[np.uint8]) -> npt.NDArray[np.uint32]:
    """Direction masks (bit set = go right) of small category sets, per slot."""
    mask = np.zeros(node_of.shape[0], dtype=np.uint32)
    for s in np.flatnonzero(flags & FLAG_FAST_CAT):
        node = int(node_of[s])
        in_left = bool(forest.cat_in_set_left[node])
        member = np.zeros(FAST_CAT_MAX + 1, dtype=bool)
        member[forest.categories_of(node)] = True
        right = np.concatenate([np.where(member, not in_left, in_left),
                                [in_left, not forest.cat_invalid_left[node], not forest.missing_left[node]]])
        mask[s] = int((right.astype(np.uint64) << np.arange(32, dtype=np.uint64)).sum())
    return mask


def layout(forest: Forest) -> Layout:
    """Slot arrays of ``forest``; thresholds rounded down to float32 when it reads float32."""
    node_of = slot_order(forest)
    n = node_of.shape[0]
    slot_of = np.empty(n, dtype=np.int64)
    slot_of[node_of] = np.arange(n)
    left = forest.left.astype(np.int64)[node_of]
    right = forest.right.astype(np.int64)[node_of]
    internal = left >= 0
    child = np.where(internal, slot_of[np.maximum(left, 0)], np.arange(n))
    assert np.array_equal(slot_of[right[internal]], child[internal] + 1), "siblings must be adjacent"
    cat = forest.is_categorical[node_of] & internal
    numeric = internal & ~cat
    thr = np.where(numeric, forest.threshold[node_of], np.where(cat, 0.0, np.nan))
    if forest.schema.input_dtype == "float32":
        thr = round_down_f32(thr).astype(np.float64)
    feature = np.where(internal, forest.feature[node_of], 0).astype(np.int64)
    flags = np.zeros(n, dtype=np.uint8)
    flags |= np.where(forest.missing_left[node_of] | ~internal, FLAG_MISSING_LEFT, 0).astype(np.uint8)
    flags |= np.where(forest.missing_zero[node_of] & internal, FLAG_MISSING_ZERO, 0).astype(np.uint8)
    flags |= np.where(cat, FLAG_CATEGORICAL, 0).astype(np.uint8)
    flags |= np.where(cat & forest.cat_in_set_left[node_of], FLAG_IN_SET_LEFT, 0).astype(np.uint8)
    flags |= np.where(cat & forest.cat_invalid_left[node_of], FLAG_INVALID_LEFT, 0).astype(np.uint8)
    if cat.any():
        top = np.zeros(n, dtype=np.int64)
        sizes = np.diff(forest.cat_offset)[node_of]
        cat_slots = np.flatnonzero(cat & (sizes > 0))
        top[cat_slots] = [int(forest.categories_of(int(node_of[s])).max()) for s in cat_slots]
        fast = cat & (top <= FAST_CAT_MAX) & ~forest.missing_zero[node_of]
        flags |= np.where(fast, FLAG_FAST_CAT, 0).astype(np.uint8)
    fast_slot = (flags & FLAG_FAST_CAT) != 0
    special_slot = (flags & (FLAG_MISSING_ZERO | FLAG_CATEGORICAL)) != 0
    tree_of_slot = forest.node_tree[node_of]
    per_tree = np.bincount(tree_of_slot[special_slot], minlength=forest.n_trees)
    special = per_tree > 0
    steps, mode = walk_modes(forest, special)
    local = node_of - forest.tree_offset[:-1][tree_of_slot]
    special_slots = np.flatnonzero(special_slot)  # slot order is tree order, so grouped by tree
    special_offset = np.zeros(forest.n_trees + 1, dtype=np.int64)
    np.cumsum(per_tree, out=special_offset[1:])
    k = np.arange(special_slots.shape[0]) - special_offset[tree_of_slot[special_slots]]
    walk_feature = feature.copy()
    walk_feature[special_slots] = forest.n_features + k
    walk_threshold = thr.copy()
    walk_threshold[special_slots] = 0.5
    return Layout(
        node_of=node_of, child=child, feature=feature, threshold=thr, flags=flags, local=local,
        root=slot_of[forest.tree_offset[:-1]] if forest.n_trees else np.zeros(0, dtype=np.int64),
        steps=steps, mode=mode, walk_feature=walk_feature, walk_threshold=walk_threshold,
        special_offset=special_offset, special_slots=special_slots,
        row_stride=forest.n_features + (int(per_tree.max()) if per_tree.size else 0),
        cats=_cat_tables(forest, node_of, flags) if cat.any() else None,
        catmask=_catmasks(forest, node_of, flags) if fast_slot.any() else None,
        fastcat_features=np.unique(feature[fast_slot]),
    )


BIN_MAX_COLUMNS = 2**16 - 1
"""Binned walks address columns with 16 bits: 2 * n_features + decision columns must fit."""


@dataclass(frozen=True)
class BinTables:
    """A forest's numeric tests as small integers: the walk compares bin codes instead of values.

    For feature f, ``values[offset[f] : offset[f] + size[f]]`` are its distinct thresholds sorted
    ascending, padded with +inf to ``2 * half[f]`` entries (``half[f]`` a power of two, or 0 when no
    node tests f). A row value x becomes its code b(x) = #{thresholds < x}; a node with the k-th
    threshold goes right iff x > t_k iff b(x) > k, so routing is that of the values, exactly.
    NaN is coded 0 in column f (then every test sends it left) and ``size[f]`` in column
    ``n_features + f`` (every test sends it right); a node reads the column of its missing direction.
    Decision columns of special nodes follow at ``2 * n_features + k`` and hold 0 or 1 (test ``> 0``).
    Leaves test column 0 against the largest code, which no value exceeds.
    """

    bits: int                           # 8 or 16: the code type
    offset: npt.NDArray[np.int64]       # per feature
    size: npt.NDArray[np.int64]         # per feature: distinct thresholds
    half: npt.NDArray[np.int64]         # per feature: first search step
    values: npt.NDArray[np.float64]     # padded sorted thresholds, in the input dtype's values
    column: npt.NDArray[np.int64]       # per slot
    code: npt.NDArray[np.int64]         # per slot: threshold code k
    row_stride: int


def bin_tables(forest: Forest, lay: Layout) -> BinTables | None:
    """Integer codes for the walk, or None when a feature has more than 65535 thresholds (or NaN ones)."""
    F = forest.n_features
    internal = lay.child != np.arange(lay.child.shape[0])
    special = np.zeros(internal.shape[0], dtype=bool)
    special[lay.special_slots] = True
    numeric = internal & ~special
    stride = lay.row_stride + F
    if stride > BIN_MAX_COLUMNS or (numeric.any() and np.isnan(lay.threshold[numeric]).any()):
        return None
    feat, thr = lay.feature[numeric], lay.threshold[numeric]
    offset = np.zeros(F, dtype=np.int64)
    size = np.zeros(F, dtype=np.int64)
    half = np.zeros(F, dtype=np.int64)
    code = np.zeros(internal.shape[0], dtype=np.int64)
    chunks: list[npt.NDArray[np.float64]] = []
    at = 0
    order = np.argsort(feat, kind="stable")
    bounds = np.searchsorted(feat[order], np.arange(F + 1))
    slots = np.flatnonzero(numeric)
    for f in range(F):
        idx = order[bounds[f]:bounds[f + 1]]
        if idx.size == 0:
            continue
        uniq = np.unique(thr[idx])
        if uniq.size > 2**16 - 2:
            return None
        code[slots[idx]] = np.searchsorted(uniq, thr[idx])
        p = 1
        while p < uniq.size + 1:
            p *= 2
        offset[f], size[f], half[f] = at, uniq.size, p // 2
        chunks.append(np.concatenate([uniq, np.full(p - uniq.size, np.inf)]))
        at += p
    bits = 8 if int(size.max(initial=0)) <= 2**8 - 1 else 16
    column = np.where(numeric, lay.feature + np.where(lay.flags & FLAG_MISSING_LEFT, 0, F), 0)
    column[special] = lay.walk_feature[special] + F
    code[special] = 0
    code[~internal] = 2**bits - 1
    return BinTables(bits=bits, offset=offset, size=size, half=half,
                     values=np.concatenate(chunks) if chunks else np.zeros(1), column=column, code=code,
                     row_stride=stride)
