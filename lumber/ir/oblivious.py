"""The ObliviousEnsemble IR: symmetric (oblivious) trees as decision tables.

Every node at one depth of an oblivious tree tests the same condition, so a
tree of depth ``d`` is ``d`` conditions (its *levels*) and a table of ``2^d``
outputs: level ``l`` contributes bit ``l`` of the row's table index. This is
CatBoost's model form and the target of MonoForest's re-composition
(``oblivious`` pass); evaluation is a few bit operations and one lookup per
tree, with no data-dependent branch.

A level's condition is the Polynomial IR's: ``x > threshold`` for a non-NaN
``x`` (``x`` rounded to ``schema.input_dtype``) and ``nan_true`` for NaN.
``threshold = +inf`` with ``nan_true`` is ``I{x is NaN}`` (the polynomial's
MISSING condition).

Category levels. A level whose threshold is NaN tests category membership
instead: its bit is ``code(x) in set`` with ``code`` the schema's category rule
(:class:`~lumber.ir.schema.CategoryRule`) and the set a sorted list of codes in
``level_set_code[level_set_offset[i]:level_set_offset[i + 1]]``; the code -1 in
a set stands for *invalid* values (negative, too large, infinite: the rule's),
and NaN takes ``nan_true`` as everywhere. The polynomial's ``EQUAL`` condition
is the set ``{code}``, its ``INVALID`` condition the set ``{-1}``, so models
with native categorical splits (LightGBM, XGBoost, CatBoost one-hot) compile to
tables exactly.

Bin levels. Several thresholds of one numeric feature in one tree can share
levels as a *bin code*: a group of ``w = k.bit_length()`` consecutive levels of a
tree holds the sorted borders ``B`` (``k`` of them, ``level_border``), and its
level ``j`` (``level_code_bit``) is bit ``j`` of ``code(x) = #{b in B : x > b}``;
a NaN takes each level's ``nan_true`` (together a code ``<= k``). The table index
then holds the code in the group's bits, so ``k`` thresholds cost ``w`` levels, as
``k`` category codes do. Such a level's ``level_threshold`` is ``B[2^j - 1]``,
the lowest border above which its bit can be on.

Quantization (the ``quantize`` pass) adds integer *bins*: each level reads a
binarized column whose value is ``bin(x) = #{borders b : x > b}`` (NaN maps
to ``col_nan_bin``), and its bit is ``bin > level_bin``. A category level
reads a *set column* (``col_invalid_bin >= 0``): its borders are the set's
valid codes and its bin is 1 for a member, 0 for a valid non-member,
``col_invalid_bin`` for an invalid value; the level's bin is 0. The C table
evaluator binarizes every column once per row and then works on small
integers only. A bin level reads its feature's column too, and
``level_code_bin`` holds the column bins of its borders, so its group's code is
``#{g in level_code_bin : bin > g}``, computed once per group and row.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt

from .assemble import TreeArrays, concat_trees
from .diagnostics import IRLocation, ValidationError
from .graph import parents
from .interp import category_codes, prepare_input
from .schema import FeatureKind, Schema
from .serialize import ir_kind, load_ir, save_ir

if TYPE_CHECKING:  # pragma: no cover
    import networkx as nx

    from .forest import Forest

MAX_DEPTH = 24
"""Deepest table accepted (16M entries); re-composition caps far below this."""
BLOCK_ENTRIES = 1 << 21
"""Rows x levels handled in one numpy step during evaluation."""
QUANT_FIELDS = ("col_feature", "col_nan_bin", "border_offset", "border", "level_col", "level_bin")
SET_FIELDS = ("level_set_offset", "level_set_code")
BIN_FIELDS = ("level_border_offset", "level_border", "level_code_bit")
INVALID_CODE = -1
"""The member of a category set that stands for invalid values (see the module docstring)."""


@ir_kind("oblivious")
@dataclass(frozen=True, eq=False)
class ObliviousEnsemble:
    """Oblivious trees as parallel level arrays plus one flat value array.

    Tree ``t`` has ``depth[t]`` levels ``level_offset[t]:level_offset[t + 1]``;
    level ``l`` of the tree sets bit ``l`` of the leaf index
    ``idx = sum_l bit_l << l``. Its table is ``value[value_offset[t]:value_offset[t + 1]]``:
    ``2^depth`` scalars when ``tree_output[t] = k >= 0`` (the tree adds to output
    ``k`` only), else ``2^depth`` rows of ``n_outputs`` values (row-major).

    schema : Schema
        As the Forest's: raw margin = ``base_score`` + trees in order (in
        ``accumulate_dtype``), divided by the trees per output when ``average``.
    depth : int32[n_trees]
        Levels per tree, ``0 <= depth <= MAX_DEPTH`` (depth 0: a constant).
    level_feature : int32[n_levels]
    level_threshold : float64[n_levels]
        Bit is ``x > threshold`` for non-NaN ``x``; never NaN (``+inf``: only NaN can set
        the bit). For float32 inputs a float32 value or an infinity.
    level_nan_true : bool[n_levels]
        The bit when ``x`` is NaN.
    tree_output : int32[n_trees]
        Output column of a scalar tree, or -1 for a tree with vector rows.
    value : float64[n_values]
        Tables, tree after tree (finite).

    Category levels (both ``None`` when no level tests a category):

    level_set_offset : int64[n_levels + 1], level_set_code : int64[n_set_codes]
        CSR: the category set of level ``i`` (threshold NaN), sorted unique codes >= -1;
        threshold levels have empty sets.

    Bin levels (all three ``None`` when no level is one):

    level_border_offset : int64[n_levels + 1], level_border : float64[n_level_borders]
        CSR: the borders of bin level ``i`` (strictly increasing, finite), the same for
        every level of its group; other levels have none.
    level_code_bit : int32[n_levels]
        The bit of the group's code a bin level is (0 for other levels).

    Quantization (all ``None``, or all set by the ``quantize`` pass):

    col_feature : int32[n_cols]
        Input feature of each binarized column.
    col_nan_bin : int32[n_cols]
        Bin of a NaN input.
    border_offset : int64[n_cols + 1], border : float64[n_borders]
        CSR: column ``c``'s borders ``border[border_offset[c]:border_offset[c + 1]]``,
        strictly increasing; ``bin(x) = #{b : x > b}``.
    level_col : int32[n_levels], level_bin : int32[n_levels]
        Level ``i`` reads column ``level_col[i]`` and its bit is ``bin > level_bin[i]``;
        ``border[border_offset[level_col[i]] + level_bin[i]] == level_threshold[i]``.
    level_code_bin : int32[n_level_borders] or None
        With bin levels: the bin of each of ``level_border`` in its level's column.
    col_invalid_bin : int32[n_cols] or None
        -1 for threshold columns; for a set column (category level), the bin (0 or 1) of an
        invalid value. ``None`` when there are no set columns.
    """

    schema: Schema
    depth: npt.NDArray[np.int32]
    level_feature: npt.NDArray[np.int32]
    level_threshold: npt.NDArray[np.float64]
    level_nan_true: npt.NDArray[np.bool_]
    tree_output: npt.NDArray[np.int32]
    value: npt.NDArray[np.float64]
    level_set_offset: npt.NDArray[np.int64] | None = None
    level_set_code: npt.NDArray[np.int64] | None = None
    col_feature: npt.NDArray[np.int32] | None = None
    col_nan_bin: npt.NDArray[np.int32] | None = None
    border_offset: npt.NDArray[np.int64] | None = None
    border: npt.NDArray[np.float64] | None = None
    level_col: npt.NDArray[np.int32] | None = None
    level_bin: npt.NDArray[np.int32] | None = None
    col_invalid_bin: npt.NDArray[np.int32] | None = None
    level_border_offset: npt.NDArray[np.int64] | None = None
    level_border: npt.NDArray[np.float64] | None = None
    level_code_bit: npt.NDArray[np.int32] | None = None
    level_code_bin: npt.NDArray[np.int32] | None = None

    ARRAY_FIELDS = (
        ("depth", np.int32), ("level_feature", np.int32), ("level_threshold", np.float64),
        ("level_nan_true", np.bool_), ("tree_output", np.int32), ("value", np.float64),
        ("level_set_offset", np.int64), ("level_set_code", np.int64), ("col_feature", np.int32), ("col_nan_bin", np.int32), ("border_offset", np.int64),
        ("border", np.float64), ("level_col", np.int32), ("level_bin", np.int32), ("col_invalid_bin", np.int32),
        ("level_border_offset", np.int64), ("level_border", np.float64), ("level_code_bit", np.int32),
        ("level_code_bin", np.int32),
    )

    def __post_init__(self) -> None:
        for name, dtype in self.ARRAY_FIELDS:
            arr = getattr(self, name)
            if arr is None:
                continue
            a = np.ascontiguousarray(arr, dtype=dtype).reshape(-1).view()
            a.flags.writeable = False
            object.__setattr__(self, name, a)

    # -- shape ------------------------------------------------------------------------------

    @property
    def n_trees(self) -> int:
        return int(self.depth.shape[0])

    @property
    def n_levels(self) -> int:
        return int(self.level_feature.shape[0])

    @property
    def n_features(self) -> int:
        return self.schema.n_features

    @property
    def n_outputs(self) -> int:
        return self.schema.n_outputs

    @property
    def max_depth(self) -> int:
        return int(self.depth.max()) if self.n_trees else 0

    @property
    def quantized(self) -> bool:
        """The ``quantize`` pass has filled the bin arrays."""
        return self.level_col is not None

    @property
    def has_categories(self) -> bool:
        """Some level tests category membership (threshold NaN)."""
        return self.level_set_offset is not None and bool(np.isnan(self.level_threshold).any())

    @property
    def has_bin_levels(self) -> bool:
        """Some level is a bit of a bin code (several thresholds of one feature sharing levels)."""
        return self.level_border_offset is not None and bool(self.level_border_offset[-1] > 0)

    @cached_property
    def bin_level(self) -> npt.NDArray[np.bool_]:
        """``bool[n_levels]``: which levels are bits of a bin code."""
        if self.level_border_offset is None:
            out = np.zeros(self.n_levels, dtype=bool)
        else:
            out = np.diff(self.level_border_offset) > 0
        out.flags.writeable = False
        return out

    def level_borders(self, i: int) -> npt.NDArray[np.float64]:
        """Borders of bin level ``i`` (empty for other levels)."""
        if self.level_border_offset is None or self.level_border is None:
            return np.zeros(0)
        return self.level_border[self.level_border_offset[i]:self.level_border_offset[i + 1]]

    def level_set(self, i: int) -> npt.NDArray[np.int64]:
        """Category set of level ``i`` (empty for a threshold level); -1 stands for invalid values."""
        if self.level_set_offset is None or self.level_set_code is None:
            return np.zeros(0, dtype=np.int64)
        return self.level_set_code[self.level_set_offset[i]:self.level_set_offset[i + 1]]

    @cached_property
    def level_offset(self) -> npt.NDArray[np.int64]:
        """``[n_trees + 1]``: tree ``t``'s levels are ``level_offset[t]:level_offset[t + 1]``."""
        off = np.zeros(self.n_trees + 1, dtype=np.int64)
        np.cumsum(self.depth, out=off[1:])
        off.flags.writeable = False
        return off

    @cached_property
    def table_width(self) -> npt.NDArray[np.int64]:
        """Values per table row: 1 for scalar trees, ``n_outputs`` for vector trees."""
        w = np.where(self.tree_output >= 0, 1, self.n_outputs).astype(np.int64)
        w.flags.writeable = False
        return w

    @cached_property
    def value_offset(self) -> npt.NDArray[np.int64]:
        """``[n_trees + 1]``: tree ``t``'s table is ``value[value_offset[t]:value_offset[t + 1]]``."""
        off = np.zeros(self.n_trees + 1, dtype=np.int64)
        np.cumsum(self.table_width << self.depth.astype(np.int64), out=off[1:])
        off.flags.writeable = False
        return off

    @cached_property
    def level_position(self) -> npt.NDArray[np.int64]:
        """Bit of the leaf index each level sets (its rank inside its tree)."""
        pos = np.arange(self.n_levels, dtype=np.int64) - np.repeat(self.level_offset[:-1], self.depth)
        pos.flags.writeable = False
        return pos

    @cached_property
    def level_tree(self) -> npt.NDArray[np.int64]:
        t = np.repeat(np.arange(self.n_trees, dtype=np.int64), self.depth)
        t.flags.writeable = False
        return t

    def replace(self, **changes: Any) -> "ObliviousEnsemble":
        return replace(self, **changes)

    def select_trees(self, trees: Any) -> "ObliviousEnsemble":
        """The ensemble of the trees ``trees`` (indices, in that order) with this one's schema, not quantized:
        its margins are the base score plus those trees' sums (what it costs to evaluate a part of a cover,
        e.g. its tables of one depth)."""
        t = np.asarray(trees, dtype=np.int64).reshape(-1)
        if t.size and (t.min() < 0 or t.max() >= self.n_trees):
            raise ValidationError(f"tree index out of range 0..{self.n_trees - 1}")
        lo, hi = self.level_offset[t], self.level_offset[t + 1]
        lv = np.concatenate([np.arange(a, b) for a, b in zip(lo.tolist(), hi.tolist())] + [np.zeros(0, np.int64)])
        vlo, vhi = self.value_offset[t], self.value_offset[t + 1]
        vals = np.concatenate([self.value[a:b] for a, b in zip(vlo.tolist(), vhi.tolist())] + [np.zeros(0)])
        extra: dict[str, Any] = {}
        for off_name, arr_name in (("level_set_offset", "level_set_code"), ("level_border_offset", "level_border")):
            off, arr = getattr(self, off_name), getattr(self, arr_name)
            if off is None or arr is None:
                continue
            parts = [arr[off[i]:off[i + 1]] for i in lv.tolist()]
            new_off = np.zeros(lv.shape[0] + 1, dtype=np.int64)
            np.cumsum([p.shape[0] for p in parts], out=new_off[1:])
            extra[off_name] = new_off
            extra[arr_name] = np.concatenate(parts + [np.zeros(0, dtype=arr.dtype)])
        if self.level_code_bit is not None:
            extra["level_code_bit"] = self.level_code_bit[lv]
        return ObliviousEnsemble(schema=self.schema, depth=self.depth[t], level_feature=self.level_feature[lv],
                                 level_threshold=self.level_threshold[lv], level_nan_true=self.level_nan_true[lv],
                                 tree_output=self.tree_output[t], value=vals, **extra)

    def table(self, t: int) -> npt.NDArray[np.float64]:
        """Tree ``t``'s table as ``[2^depth, n_outputs]`` (zeros in columns a scalar tree does not feed)."""
        rows = 1 << int(self.depth[t])
        vals = self.value[self.value_offset[t]:self.value_offset[t + 1]]
        k = int(self.tree_output[t])
        if k < 0:
            return vals.reshape(rows, self.n_outputs)
        out = np.zeros((rows, self.n_outputs))
        out[:, k] = vals
        return out

    def levels(self, t: int) -> slice:
        return slice(int(self.level_offset[t]), int(self.level_offset[t + 1]))

    # -- checks -----------------------------------------------------------------------------

    def validate(self) -> "ObliviousEnsemble":
        """Check every documented invariant; raises ``ValidationError``. Returns self."""
        verify_oblivious(self)
        return self

    # -- semantics ----------------------------------------------------------------------------

    def prepare_input(self, X: Any) -> npt.NDArray[np.float64]:
        """Check and convert user data exactly as ``Forest.prepare_input`` does."""

        return prepare_input(self.schema, X)

    def level_bits(self, Xp: npt.NDArray[np.float64]) -> npt.NDArray[np.bool_]:
        """``(n, n_levels)`` bit of every level on prepared rows."""
        xs = Xp[:, self.level_feature]
        with np.errstate(invalid="ignore"):
            bits = xs > self.level_threshold[None, :]
        if self.has_categories:
            cat = np.flatnonzero(np.isnan(self.level_threshold))
            bits[:, cat] = category_membership(self, cat, xs[:, cat])
        if self.has_bin_levels:
            bl = np.flatnonzero(self.bin_level)
            bits[:, bl] = bin_level_bits(self, bl, xs[:, bl])
        nan = np.isnan(xs)
        if nan.any():
            bits = np.where(nan, self.level_nan_true[None, :], bits)
        return bits

    def _leaf_block(self, Xp: npt.NDArray[np.float64]) -> npt.NDArray[np.int64]:
        bits = self.level_bits(Xp).astype(np.int64) << self.level_position[None, :]
        out = np.zeros((Xp.shape[0], self.n_trees), dtype=np.int64)
        live = np.flatnonzero(self.depth > 0)
        if live.size:
            out[:, live] = np.add.reduceat(bits, self.level_offset[live], axis=1)
        return out

    def _block_rows(self) -> int:
        borders = 0 if self.level_border is None else int(self.level_border.shape[0])
        return max(1, BLOCK_ENTRIES // max(self.n_levels + borders + self.n_trees * self.n_outputs, 1))

    def bin_groups(self, t: int) -> list[tuple[int, int]]:
        """Tree ``t``'s bin-code groups as ``(first level position, levels)``, lowest first."""
        out: list[tuple[int, int]] = []
        first = int(self.level_offset[t])
        if not self.has_bin_levels:
            return out
        bl, bit = self.bin_level, self.level_code_bit
        assert bit is not None
        for p in range(int(self.depth[t])):
            i = first + p
            if bl[i] and bit[i] == 0:
                out.append((p, int(self.level_borders(i).shape[0]).bit_length()))
        return out

    def apply(self, X: Any) -> npt.NDArray[np.int64]:
        """Table index of every row in every tree, ``(n, n_trees)``."""
        Xp = self.prepare_input(X)
        out = np.empty((Xp.shape[0], self.n_trees), dtype=np.int64)
        step = self._block_rows()
        for r0 in range(0, Xp.shape[0], step):
            out[r0:r0 + step] = self._leaf_block(Xp[r0:r0 + step])
        return out

    def evaluate(self, X: Any) -> npt.NDArray[np.float64]:
        """Raw margins: ``(n,)`` when ``n_outputs == 1``, else ``(n, n_outputs)``.

        Sums run tree by tree from ``base_score`` (numpy's ``cumsum`` is sequential),
        the order the C evaluator uses, so both agree bit for bit.
        """
        Xp = self.prepare_input(X)
        n, K, T = Xp.shape[0], self.n_outputs, self.n_trees
        acc_dtype = np.dtype(self.schema.accumulate_dtype)
        base = np.asarray(self.schema.base_score, dtype=acc_dtype)
        out = np.empty((n, K), dtype=np.float64)
        tout = self.tree_output
        voff = self.value_offset[:-1]
        width = self.table_width
        step = self._block_rows()
        for r0 in range(0, n, step):
            leaf = self._leaf_block(Xp[r0:r0 + step])
            m = leaf.shape[0]
            terms = np.zeros((m, T + 1, K), dtype=acc_dtype)
            terms[:, 0, :] = base
            pos = voff[None, :] + leaf * width[None, :]
            for k in range(K):
                scalar = tout == k
                col = np.where(tout >= 0, 0, k)
                feeds = scalar | (tout < 0)
                v = self.value[pos + col[None, :]].astype(acc_dtype)
                terms[:, 1:, k] = np.where(feeds[None, :], v, -0.0)  # -0.0 adds nothing: C skips the tree
            out[r0:r0 + m] = np.cumsum(terms, axis=1, dtype=acc_dtype)[:, -1, :]
        if self.schema.average:
            out = out / np.maximum(self.trees_per_output(), 1.0)[None, :]
        return out[:, 0] if K == 1 else out

    def trees_per_output(self) -> npt.NDArray[np.float64]:
        """How many trees feed each output (the divisor of averaged ensembles)."""
        tout = self.tree_output
        counts = np.bincount(tout[tout >= 0], minlength=self.n_outputs).astype(np.float64)
        return counts + float((tout < 0).sum())

    def predict_proba(self, X: Any) -> npt.NDArray[np.float64]:
        return self.schema.proba(self.evaluate(X))

    def predict(self, X: Any) -> npt.NDArray[Any]:
        return self.schema.decide(self.evaluate(X))

    # -- conversions --------------------------------------------------------------------------

    def to_forest(self) -> "Forest":
        """The same model as a Forest of complete binary trees (exact: same routing, same leaves).

        The root tests the last level, so the leaves in breadth-first order are the table rows.
        Unreachable rows (``x > 2`` but not ``x > 1``) become unreachable leaves.
        """

        K = self.n_outputs
        trees = []
        for t in range(self.n_trees):
            if self.has_bin_levels and self.bin_level[self.levels(t)].any():
                trees.append(_grid_tree(self, t))
                continue
            d = int(self.depth[t])
            lv = self.levels(t)
            n_int = (1 << d) - 1
            n_nodes = 2 * n_int + 1
            ids = np.arange(n_nodes)
            internal = ids < n_int
            node_level = np.zeros(n_nodes, dtype=np.int64)
            if d:
                # depth of node i in a complete tree is floor(log2(i + 1)); it tests level d - 1 - depth
                node_level[internal] = d - 1 - np.floor(np.log2(ids[internal] + 1)).astype(np.int64)
            feat = np.where(internal, self.level_feature[lv][node_level] if d else -1, -1)
            thr = np.where(internal, self.level_threshold[lv][node_level] if d else np.nan, np.nan)
            ml = np.where(internal, ~self.level_nan_true[lv][node_level] if d else False, False)
            left = np.where(internal, 2 * ids + 1, -1)
            right = np.where(internal, 2 * ids + 2, -1)
            value = np.zeros((n_nodes, K))
            k = int(self.tree_output[t])
            tab = self.table(t)
            value[n_int:] = tab
            # category levels, and "is missing" levels of categorical features (an empty set: only NaN
            # goes right), become categorical nodes: members go right (bit 1), invalid values go right
            # iff -1 is in the set
            kinds = np.array([f.kind == FeatureKind.CATEGORICAL for f in self.schema.features])
            cat = internal & (np.isnan(thr) | ((thr == np.inf) & kinds[np.maximum(feat, 0)]))
            extra: dict[str, Any] = {}
            if cat.any():
                first = int(self.level_offset[t])
                sets = {int(i): self.level_set(first + int(node_level[i])) for i in np.flatnonzero(cat)}
                thr = np.where(cat, np.nan, thr)
                extra = dict(is_categorical=cat, categories={i: v[v >= 0] for i, v in sets.items()},
                             cat_in_set_left=np.zeros(n_nodes, dtype=bool),
                             cat_invalid_left=np.array([i not in sets or INVALID_CODE not in sets[i]
                                                        for i in range(n_nodes)]) & cat)
            trees.append(TreeArrays(left=left, right=right, feature=feat, threshold=thr, missing_left=ml,
                                    value=value[:, k] if k >= 0 else value, output=k, **extra))
        return concat_trees(self.schema, trees)

    @staticmethod
    def from_forest(forest: "Forest") -> "ObliviousEnsemble":
        """A Forest whose every tree is oblivious (CatBoost's) as tables; ``ValidationError`` otherwise."""
        return forest_to_oblivious(forest)

    # -- storage and views ------------------------------------------------------------------

    def save(self, path: str | Path) -> None:
        """Write the versioned ``.lumber`` format atomically (see docs/ir.md)."""

        save_ir(self, path)

    @staticmethod
    def load(path: str | Path) -> "ObliviousEnsemble":
        return load_ir(path, ObliviousEnsemble)  # type: ignore[no-any-return]

    def describe_level(self, i: int) -> str:
        """``age > 30.5``, ``age > 30.5 or missing``, ``age is missing``, ``color in {'red', 'blue'}``,
        ``bit 1 of age's bin among (30.5, 40.5, 50.5)``."""
        feature = self.schema.features[int(self.level_feature[i])]
        name = feature.name
        thr = float(self.level_threshold[i])
        if self.bin_level[i]:
            assert self.level_code_bit is not None
            borders = ", ".join(repr(float(b)) for b in self.level_borders(i))
            text = f"bit {int(self.level_code_bit[i])} of {name}'s bin among ({borders})"
            return text + " (set when missing)" if self.level_nan_true[i] else text
        if np.isnan(thr):
            cats = feature.categories
            shown = ["an invalid value" if c == INVALID_CODE else repr(cats[c]) if cats is not None and c < len(cats)
                     else str(int(c)) for c in self.level_set(i)]
            text = f"{name} in {{{', '.join(shown)}}}"
            return text + " or missing" if self.level_nan_true[i] else text
        if thr == np.inf:
            return f"{name} is missing" if self.level_nan_true[i] else "false"
        text = f"{name} > {thr!r}"
        return text + " or missing" if self.level_nan_true[i] else text

    def statistics(self) -> dict[str, Any]:
        """Trees, depths, table sizes (``--time-passes`` reports and ``lumber inspect``)."""
        by_depth = np.bincount(self.depth, minlength=self.max_depth + 1) if self.n_trees else np.zeros(1, np.int64)
        entries = int(self.value.shape[0])
        return {
            "trees": self.n_trees,
            "levels": self.n_levels,
            "max_depth": self.max_depth,
            "mean_depth": float(self.depth.mean()) if self.n_trees else 0.0,
            "trees_by_depth": {int(d): int(c) for d, c in enumerate(by_depth) if c},
            "table_entries": entries,
            "table_bytes": entries * 8,
            "features_used": int(np.unique(self.level_feature).shape[0]),
            "category_levels": int(np.isnan(self.level_threshold).sum()),
            "bin_levels": int(self.bin_level.sum()),
            "outputs": self.n_outputs,
            "quantized": self.quantized,
        }

    summary = statistics

    def to_networkx(self) -> "nx.DiGraph":
        """One chain per tree: ``("tree", t) -> ("level", t, 0) -> ... `` with the conditions as labels."""
        import networkx as nx

        g = nx.DiGraph()
        for t in range(self.n_trees):
            g.add_node(("tree", t), depth=int(self.depth[t]), output=int(self.tree_output[t]),
                       table_entries=1 << int(self.depth[t]))
            prev: Any = ("tree", t)
            for pos, i in enumerate(range(*self.levels(t).indices(self.n_levels))):
                node = ("level", t, pos)
                g.add_node(node, label=self.describe_level(i), feature=int(self.level_feature[i]),
                           threshold=float(self.level_threshold[i]), nan_true=bool(self.level_nan_true[i]))
                g.add_edge(prev, node)
                prev = node
        return g


def category_membership(e: ObliviousEnsemble, levels: npt.NDArray[np.int64],
                        x: npt.NDArray[np.float64]) -> npt.NDArray[np.bool_]:
    """``(n, len(levels))``: is ``code(x[:, j])`` in the set of category level ``levels[j]``
    (NaN rows come out False; the caller applies ``nan_true``)."""

    assert e.level_set_offset is not None and e.level_set_code is not None
    codes = category_codes(x, e.schema.category_rule)  # -1: invalid or NaN
    off = e.level_set_offset
    sizes = off[levels + 1] - off[levels]
    rank = np.repeat(np.arange(levels.shape[0], dtype=np.int64), sizes)
    members = np.concatenate([e.level_set_code[off[i]:off[i + 1]] for i in levels]) if levels.size else \
        np.zeros(0, np.int64)
    keys = (rank << 34) | (members + 1)  # sorted: ranks ascend, codes ascend within a set
    q = (np.arange(levels.shape[0], dtype=np.int64)[None, :] << 34) | (codes + 1)
    pos = np.minimum(np.searchsorted(keys, q), max(keys.shape[0] - 1, 0))
    out = keys[pos] == q if keys.size else np.zeros(q.shape, dtype=bool)
    return out & ~np.isnan(x)


def bin_level_bits(e: ObliviousEnsemble, levels: npt.NDArray[np.int64],
                   x: npt.NDArray[np.float64]) -> npt.NDArray[np.bool_]:
    """``(n, len(levels))``: bit ``level_code_bit`` of ``#{b in borders : x > b}`` for the bin levels
    ``levels`` (NaN rows come out False; the caller applies ``nan_true``)."""
    assert e.level_border_offset is not None and e.level_border is not None and e.level_code_bit is not None
    off = e.level_border_offset
    sizes = off[levels + 1] - off[levels]
    starts = np.zeros(levels.shape[0], dtype=np.int64)
    np.cumsum(sizes[:-1], out=starts[1:])
    at = np.arange(int(sizes.sum()), dtype=np.int64) + np.repeat(off[levels] - starts, sizes)
    rank = np.repeat(np.arange(levels.shape[0], dtype=np.int64), sizes)
    with np.errstate(invalid="ignore"):
        above = x[:, rank] > e.level_border[at][None, :]
    code = np.add.reduceat(above.astype(np.int64), starts, axis=1) if levels.size else np.zeros(x.shape, np.int64)
    return ((code >> e.level_code_bit[levels][None, :].astype(np.int64)) & 1).astype(bool)


def _grid_tree(e: ObliviousEnsemble, t: int) -> Any:
    """Tree ``t`` (which has bin levels) as a binary tree: from the root down, one node per plain
    level (every path) and a balanced search over its borders per bin group, whose ``k + 1``
    outcomes are the group's codes; a leaf's table row is the sum of its path's bits."""

    first, d = int(e.level_offset[t]), int(e.depth[t])
    kinds = np.array([f.kind == FeatureKind.CATEGORICAL for f in e.schema.features])
    groups = {p: w for p, w in e.bin_groups(t)}
    in_group = {p + j for p, w in groups.items() for j in range(w)}
    # a factor: internal nodes (feature, threshold, missing_left, left ref, right ref, category set or None),
    # refs >= 0 are nodes of the factor, < 0 outcome -1 - o; and each outcome's index contribution
    factors: list[tuple[list[tuple[int, float, bool, int, int, Any]], list[int]]] = []
    p = d - 1
    while p >= 0:
        i = first + p
        f = int(e.level_feature[i])
        if p in in_group:
            lo = max(q for q in groups if q <= p)
            w = groups[lo]
            borders = e.level_borders(i)
            nan_code = sum(int(e.level_nan_true[first + lo + j]) << j for j in range(w))
            nodes: list[tuple[int, float, bool, int, int, Any]] = []

            def search(a: int, b: int) -> int:  # codes a..b; returns a ref
                if a == b:
                    return -1 - a
                mid = (a + b) // 2
                me = len(nodes)
                nodes.append((f, float(borders[mid]), not nan_code > mid, 0, 0, None))
                left, right = search(a, mid), search(mid + 1, b)
                nodes[me] = nodes[me][:3] + (left, right, None)
                return me

            search(0, borders.shape[0])
            factors.append((nodes, [c << lo for c in range(borders.shape[0] + 1)]))
            p = lo - 1
            continue
        thr = float(e.level_threshold[i])
        cat = bool(np.isnan(thr) or (thr == np.inf and kinds[f]))
        factors.append(([(f, np.nan if cat else thr, not bool(e.level_nan_true[i]), -1, -2,
                          e.level_set(i) if cat else None)], [0, 1 << p]))
        p -= 1
    reach = [1]
    for nodes, out in factors:
        reach.append(reach[-1] * len(out))
    n = 1 + sum(r * (len(nodes) - 1 + len(out)) for r, (nodes, out) in zip(reach, factors))
    left = np.full(n, -1, dtype=np.int64)
    right = np.full(n, -1, dtype=np.int64)
    feat = np.full(n, -1, dtype=np.int64)
    thr_a = np.full(n, np.nan)
    ml = np.zeros(n, dtype=bool)
    is_cat = np.zeros(n, dtype=bool)
    cats: dict[int, npt.NDArray[np.int64]] = {}
    inv_left = np.zeros(n, dtype=bool)
    front = np.zeros(1, dtype=np.int64)
    idx = np.zeros(1, dtype=np.int64)
    nxt = 1
    for nodes, out in factors:
        P, ni, no = front.shape[0], len(nodes), len(out)
        base = nxt + np.arange(P, dtype=np.int64)[:, None] * (ni - 1 + no)
        ids = np.concatenate([front[:, None], base + np.arange(ni - 1)[None, :]], axis=1)
        leaves = base + (ni - 1) + np.arange(no)[None, :]
        nxt += P * (ni - 1 + no)
        for j, (f, th, miss_left, lr, rr, members) in enumerate(nodes):
            at = ids[:, j]
            feat[at], thr_a[at], ml[at] = f, th, miss_left
            left[at] = ids[:, lr] if lr >= 0 else leaves[:, -1 - lr]
            right[at] = ids[:, rr] if rr >= 0 else leaves[:, -1 - rr]
            if members is not None:
                is_cat[at] = True
                inv_left[at] = INVALID_CODE not in members
                for a in at.tolist():
                    cats[a] = members[members >= 0]
        front = leaves.reshape(-1)
        idx = (idx[:, None] + np.asarray(out, dtype=np.int64)[None, :]).reshape(-1)
    k = int(e.tree_output[t])
    tab = e.table(t)
    value = np.zeros((n, e.n_outputs))
    value[front] = tab[idx]
    extra: dict[str, Any] = {}
    if is_cat.any():
        extra = dict(is_categorical=is_cat, categories=cats, cat_in_set_left=np.zeros(n, dtype=bool),
                     cat_invalid_left=inv_left)
    return TreeArrays(left=left, right=right, feature=feat, threshold=thr_a, missing_left=ml,
                      value=value[:, k] if k >= 0 else value, output=k, **extra)


# -- conversions --------------------------------------------------------------------------------


def forest_to_oblivious(forest: "Forest") -> ObliviousEnsemble:
    """Tables of a Forest whose trees are all oblivious: complete, one numerical condition per depth.

    Raises ``ValidationError`` naming the first tree that is not (zero-as-missing
    splits, unequal leaf depths, different splits at one depth). A categorical
    split is the level ``code in set``; when its members go left, the level's bit
    stands for the left branch (the table rows are indexed accordingly).
    """

    n = forest.n_nodes
    depth = forest.depth.astype(np.int64)
    is_leaf = forest.is_leaf
    tree_of = forest.node_tree.astype(np.int64)
    T = forest.n_trees
    internal = ~is_leaf

    def fail(t: int, why: str) -> ValidationError:
        return ValidationError(f"tree {t} is not oblivious: {why}",
                               "use the 'polynomial,oblivious' passes to re-compose any forest",
                               location=IRLocation(tree=t))

    bad = internal & forest.missing_zero
    if bad.any():
        raise fail(int(tree_of[np.flatnonzero(bad)[0]]), "it has a zero-as-missing split")
    # a categorical node is the level "code in set"; when members go left, its bit means left
    cat = internal & forest.is_categorical
    flip = cat & forest.cat_in_set_left
    tdepth = np.zeros(T, dtype=np.int64)
    np.maximum.at(tdepth, tree_of, depth)
    leaf_ids = np.flatnonzero(is_leaf)
    shallow = depth[leaf_ids] != tdepth[tree_of[leaf_ids]]
    if shallow.any():
        raise fail(int(tree_of[leaf_ids[shallow][0]]), "its leaves are not all at the same depth")
    # path index of every node: root 0, left child 2p, right child 2p + 1 (the root's bit is the MSB)
    par = parents(forest)
    pos = np.zeros(n, dtype=np.int64)
    order = np.argsort(depth, kind="stable")
    for dd in range(1, int(depth.max()) + 1 if n else 1):
        nodes = order[depth[order] == dd]
        p = par[nodes]
        pos[nodes] = 2 * pos[p] + ((forest.right[p] == nodes) ^ flip[p])
    # every internal node at depth L of tree t tests the same condition: level d - 1 - L
    set_ids: dict[tuple[int, ...], int] = {}
    set_id = np.full(n, -1.0)
    for node in np.flatnonzero(cat):
        set_id[node] = set_ids.setdefault(tuple(forest.categories_of(int(node)).tolist()), len(set_ids))
    nan_bit = np.where(flip, forest.missing_left, ~forest.missing_left)
    invalid_member = np.where(flip, forest.cat_invalid_left, ~forest.cat_invalid_left) & cat
    level_key = np.stack([tree_of[internal], depth[internal]], axis=1)
    sig = np.stack([forest.feature[internal].astype(np.float64), np.where(cat, 0.0, forest.threshold)[internal],
                    nan_bit[internal].astype(np.float64), set_id[internal], invalid_member[internal].astype(np.float64)],
                   axis=1)
    o = np.lexsort((level_key[:, 1], level_key[:, 0]))
    ks, ss = level_key[o], sig[o]
    same_group = np.all(ks[1:] == ks[:-1], axis=1)
    differs = same_group & ~np.all(ss[1:] == ss[:-1], axis=1)
    if differs.any():
        raise fail(int(ks[1:][differs][0, 0]), f"two nodes at depth {int(ks[1:][differs][0, 1])} test different conditions")
    first = np.concatenate([[True], ~same_group]) if ks.shape[0] else np.zeros(0, bool)
    kf, sf = ks[first], ss[first]
    # levels: tree t, level l = d - 1 - L; sort by (tree, level)
    lvl = tdepth[kf[:, 0]] - 1 - kf[:, 1]
    o2 = np.lexsort((lvl, kf[:, 0]))
    kf, sf = kf[o2], sf[o2]
    sets: dict[str, Any] = {}
    by_id = {v: k for k, v in set_ids.items()}
    members = [(([INVALID_CODE] if row[4] else []) + list(by_id[int(row[3])])) if row[3] >= 0 else []
               for row in sf]
    is_set = np.array([len(mm) > 0 for mm in members], dtype=bool)
    # a categorical split with no member (only NaN sets the bit) is the level "x is missing"
    sf[(sf[:, 3] >= 0) & ~is_set, 1] = np.inf
    if is_set.any():
        off = np.zeros(sf.shape[0] + 1, dtype=np.int64)
        np.cumsum([len(mm) for mm in members], out=off[1:])
        sets = dict(level_set_offset=off, level_set_code=np.array([c for mm in members for c in mm], dtype=np.int64))
    K = forest.n_outputs
    vals = []
    for t in range(T):
        sl = forest.tree_slice(t)
        leaves = np.flatnonzero(is_leaf[sl]) + sl.start
        tab = np.zeros((1 << int(tdepth[t]), K))
        tab[pos[leaves]] = forest.value[leaves]
        k = int(forest.tree_output[t])
        vals.append(tab[:, k] if k >= 0 else tab.reshape(-1))
    return ObliviousEnsemble(
        schema=forest.schema, depth=tdepth.astype(np.int32), level_feature=sf[:, 0].astype(np.int32),
        level_threshold=np.where(is_set, np.nan, sf[:, 1]), level_nan_true=sf[:, 2] == 1,
        tree_output=forest.tree_output, value=np.concatenate(vals) if vals else np.zeros(0), **sets,
    ).validate()


# -- invariants --------------------------------------------------------------------------------


def verify_oblivious(e: ObliviousEnsemble) -> None:
    """Raise ``ValidationError`` at the first broken invariant (docs/ir.md, ObliviousEnsemble)."""

    def fail(msg: str, field: str | None = None, tree: int | None = None) -> ValidationError:
        return ValidationError(msg, location=IRLocation(field=field, tree=tree))

    e.schema.validate()
    T, L, K = e.n_trees, e.n_levels, e.n_outputs
    if np.any((e.depth < 0) | (e.depth > MAX_DEPTH)):
        t = int(np.flatnonzero((e.depth < 0) | (e.depth > MAX_DEPTH))[0])
        raise fail(f"depth {int(e.depth[t])} out of range [0, {MAX_DEPTH}]", "depth", t)
    if int(e.depth.sum()) != L:
        raise fail(f"depths sum to {int(e.depth.sum())} but there are {L} levels", "depth")
    for name in ("level_threshold", "level_nan_true"):
        if getattr(e, name).shape != (L,):
            raise fail(f"'{name}' has shape {getattr(e, name).shape}, expected ({L},)", name)
    if e.tree_output.shape != (T,):
        raise fail(f"'tree_output' has shape {e.tree_output.shape}, expected ({T},)", "tree_output")
    if np.any((e.level_feature < 0) | (e.level_feature >= e.n_features)):
        i = int(np.flatnonzero((e.level_feature < 0) | (e.level_feature >= e.n_features))[0])
        raise fail(f"level feature out of range (model has {e.n_features} features)", "level_feature",
                   int(e.level_tree[i]))
    is_set = np.isnan(e.level_threshold)
    _verify_sets(e, is_set, fail)
    _verify_bins(e, is_set, fail)
    if e.schema.input_dtype == "float32":
        with np.errstate(over="ignore", invalid="ignore"):
            back = e.level_threshold.astype(np.float32).astype(np.float64)
        bad = (back != e.level_threshold) & ~is_set
        if bad.any():
            i = int(np.flatnonzero(bad)[0])
            raise fail("float32-input model has a threshold that is not a float32 value", "level_threshold",
                       int(e.level_tree[i]))
    if np.any((e.tree_output < -1) | (e.tree_output >= K)):
        t = int(np.flatnonzero((e.tree_output < -1) | (e.tree_output >= K))[0])
        raise fail(f"tree_output must be -1 or an output column below {K}", "tree_output", t)
    if e.value.shape[0] != int(e.value_offset[-1]):
        raise fail(f"value has {e.value.shape[0]} entries, the trees' tables need {int(e.value_offset[-1])}", "value")
    if not np.all(np.isfinite(e.value)):
        i = int(np.flatnonzero(~np.isfinite(e.value))[0])
        t = int(np.searchsorted(e.value_offset, i, side="right") - 1)
        raise fail("table value is NaN or infinite", "value", t)
    present = [getattr(e, f) is not None for f in QUANT_FIELDS]
    if any(present) and not all(present):
        raise fail("quantization arrays must be all present or all absent", "level_col")
    if all(present):
        _verify_quantization(e, fail)


def _verify_sets(e: ObliviousEnsemble, is_set: npt.NDArray[np.bool_], fail: Any) -> None:
    """Category levels: NaN threshold iff a non-empty sorted set of codes >= -1."""
    present = [getattr(e, f) is not None for f in SET_FIELDS]
    if any(present) and not all(present):
        raise fail("level_set_offset and level_set_code must be both present or both absent", "level_set_offset")
    if not all(present):
        if is_set.any():
            i = int(np.flatnonzero(is_set)[0])
            raise fail("level threshold is NaN (a category level) but the ensemble has no category sets",
                       "level_threshold", int(e.level_tree[i]))
        return
    off, code = e.level_set_offset, e.level_set_code
    assert off is not None and code is not None
    L = e.n_levels
    if off.shape != (L + 1,) or off[0] != 0 or off[-1] != code.shape[0] or np.any(np.diff(off) < 0):
        raise fail("level_set_offset must run from 0 to len(level_set_code), one entry per level plus one",
                   "level_set_offset")
    size = np.diff(off)
    wrong = (size > 0) != is_set
    if wrong.any():
        i = int(np.flatnonzero(wrong)[0])
        raise fail("a level has a category set iff its threshold is NaN (and the set is not empty)",
                   "level_set_code", int(e.level_tree[i]))
    if code.size and np.any(code < INVALID_CODE):
        raise fail("category codes must be >= 0 (or -1 for invalid values)", "level_set_code")
    inner = np.ones(code.shape[0], dtype=bool)
    inner[off[:-1][size > 0]] = False
    if code.shape[0] > 1 and np.any(inner[1:] & ~(code[1:] > code[:-1])):
        raise fail("a level's category codes must be sorted and unique", "level_set_code")


def _verify_bins(e: ObliviousEnsemble, is_set: npt.NDArray[np.bool_], fail: Any) -> None:
    """Bin levels: complete groups of consecutive levels sharing sorted borders, one bit each."""
    present = [getattr(e, f) is not None for f in BIN_FIELDS]
    if any(present) and not all(present):
        raise fail("level_border_offset, level_border and level_code_bit must be all present or all absent",
                   "level_border_offset")
    if not all(present):
        if e.level_code_bin is not None:
            raise fail("level_code_bin without bin levels", "level_code_bin")
        return
    off, border, bit = e.level_border_offset, e.level_border, e.level_code_bit
    assert off is not None and border is not None and bit is not None
    L = e.n_levels
    if off.shape != (L + 1,) or off[0] != 0 or off[-1] != border.shape[0] or np.any(np.diff(off) < 0):
        raise fail("level_border_offset must run from 0 to len(level_border), one entry per level plus one",
                   "level_border_offset")
    if bit.shape != (L,):
        raise fail(f"'level_code_bit' has shape {bit.shape}, expected ({L},)", "level_code_bit")
    size = np.diff(off)
    is_bin = size > 0
    tree = e.level_tree

    def at(mask: npt.NDArray[np.bool_], msg: str, field: str) -> None:
        if mask.any():
            i = int(np.flatnonzero(mask)[0])
            raise fail(msg, field, int(tree[i]))

    at(is_bin & is_set, "a level cannot be both a category level and a bin level", "level_border")
    at(~is_bin & (bit != 0), "only bin levels have a code bit", "level_code_bit")
    if not np.all(np.isfinite(border)):
        raise fail("bin level borders must be finite", "level_border")
    inner = np.ones(border.shape[0], dtype=bool)
    inner[off[:-1][is_bin]] = False
    if border.shape[0] > 1 and np.any(inner[1:] & ~(border[1:] > border[:-1])):
        raise fail("a bin level's borders must be strictly increasing", "level_border")
    if e.schema.input_dtype == "float32":
        with np.errstate(over="ignore"):
            if np.any(border.astype(np.float32).astype(np.float64) != border):
                raise fail("float32-input model has a bin border that is not a float32 value", "level_border")
    width = np.frexp(size.astype(np.float64))[1].astype(np.int64)  # k.bit_length()
    at(is_bin & ((bit < 0) | (bit >= width)), "a bin level's bit must be below its borders' bit length",
       "level_code_bit")
    b = np.flatnonzero(is_bin)
    lowest = border[off[b] + (np.int64(1) << bit[b].astype(np.int64)) - 1]
    bad = np.zeros(L, dtype=bool)
    bad[b] = lowest != e.level_threshold[b]
    at(bad, "a bin level's threshold must be its border 2^bit - 1", "level_threshold")
    # groups: bit j > 0 follows bit j - 1 of the same feature and borders in the same tree
    same_prev = np.zeros(L, dtype=bool)
    if L > 1:
        same_prev[1:] = ((tree[1:] == tree[:-1]) & is_bin[:-1] & (e.level_feature[1:] == e.level_feature[:-1])
                         & (size[1:] == size[:-1]) & (bit[1:] == bit[:-1] + 1))
    for i in np.flatnonzero(same_prev & is_bin).tolist():
        if not np.array_equal(e.level_borders(i), e.level_borders(i - 1)):
            same_prev[i] = False
    at(is_bin & (bit > 0) & ~same_prev, "a bin level's bit j > 0 must follow bit j - 1 of its group", "level_code_bit")
    last = np.zeros(L, dtype=bool)
    last[b] = bit[b] == width[b] - 1
    nxt_ok = np.zeros(L, dtype=bool)
    nxt_ok[:-1] = same_prev[1:]
    at(is_bin & ~last & ~nxt_ok, "a bin group must hold every bit of its code", "level_code_bit")
    starts = np.flatnonzero(is_bin & (bit == 0))
    for i in starts.tolist():
        w = int(width[i])
        code = sum(int(e.level_nan_true[i + j]) << j for j in range(w))
        if code > int(size[i]):
            raise fail("a bin group's NaN bits must spell a code no larger than its border count", "level_nan_true",
                       int(tree[i]))


def _verify_quantization(e: ObliviousEnsemble, fail: Any) -> None:
    assert e.col_feature is not None and e.col_nan_bin is not None and e.border_offset is not None
    assert e.border is not None and e.level_col is not None and e.level_bin is not None
    C, L = e.col_feature.shape[0], e.n_levels
    if e.col_nan_bin.shape != (C,) or e.border_offset.shape != (C + 1,):
        raise fail("col_nan_bin / border_offset do not match col_feature", "col_nan_bin")
    off = e.border_offset
    if off[0] != 0 or off[-1] != e.border.shape[0] or np.any(np.diff(off) < 0):
        raise fail("border_offset must run from 0 to len(border)", "border_offset")
    if np.any((e.col_feature < 0) | (e.col_feature >= e.n_features)):
        raise fail("column feature out of range", "col_feature")
    m = np.diff(off)
    inv = e.col_invalid_bin
    if inv is not None and inv.shape != (C,):
        raise fail("col_invalid_bin must have one entry per column", "col_invalid_bin")
    set_col = inv >= 0 if inv is not None else np.zeros(C, dtype=bool)
    if np.any((e.col_nan_bin < 0) | (e.col_nan_bin > np.where(set_col, 1, m))):
        raise fail("col_nan_bin must lie in [0, number of borders]", "col_nan_bin")
    if np.any(np.isnan(e.border)):
        raise fail("border is NaN", "border")
    inner = np.ones(e.border.shape[0], dtype=bool)
    inner[off[:-1][m > 0]] = False
    if e.border.shape[0] > 1 and np.any(inner[1:] & ~(e.border[1:] > e.border[:-1])):
        raise fail("borders of a column must be strictly increasing", "border")
    if e.level_col.shape != (L,) or e.level_bin.shape != (L,):
        raise fail("level_col / level_bin must have one entry per level", "level_col")
    if np.any((e.level_col < 0) | (e.level_col >= C)):
        raise fail("level column out of range", "level_col")
    lc = e.level_col
    if np.any((e.level_bin < 0) | (e.level_bin >= np.where(set_col[lc], 1, m[lc]))):
        raise fail("level bin out of its column's border range", "level_bin")
    if np.any(e.col_feature[lc] != e.level_feature):
        i = int(np.flatnonzero(e.col_feature[lc] != e.level_feature)[0])
        raise fail("level reads a column of another feature", "level_col", int(e.level_tree[i]))
    is_set = np.isnan(e.level_threshold)
    if np.any(set_col[lc] != is_set):
        i = int(np.flatnonzero(set_col[lc] != is_set)[0])
        raise fail("category levels read set columns and threshold levels border columns", "level_col",
                   int(e.level_tree[i]))
    if inv is not None and np.any(inv > 1):
        raise fail("a set column's invalid-value bin is 0 or 1", "col_invalid_bin")
    if np.any(e.col_nan_bin[set_col] > 1):
        raise fail("a set column's NaN bin is 0 or 1", "col_nan_bin")
    thr_level = ~is_set
    at = off[lc] + e.level_bin
    if np.any(e.border[at[thr_level]] != e.level_threshold[thr_level]):
        i = int(np.flatnonzero(thr_level)[np.flatnonzero(e.border[at[thr_level]] != e.level_threshold[thr_level])[0]])
        raise fail("level bin does not match its threshold", "level_bin", int(e.level_tree[i]))
    for i in np.flatnonzero(is_set).tolist():
        c = int(lc[i])
        codes = e.level_set(int(i))
        assert inv is not None
        if (e.level_bin[i] != 0 or not np.array_equal(e.border[off[c]:off[c + 1]], codes[codes >= 0])
                or (inv[c] == 1) != bool(codes[0] == INVALID_CODE)):
            raise fail("category level does not match its set column", "level_col", int(e.level_tree[i]))
    is_bin = e.bin_level
    wrong_nan = ((e.col_nan_bin[lc] > e.level_bin) != e.level_nan_true) & ~is_bin
    if np.any(wrong_nan):
        i = int(np.flatnonzero(wrong_nan)[0])
        raise fail("column NaN bin does not give the level's NaN bit", "col_nan_bin", int(e.level_tree[i]))
    if not is_bin.any():
        if e.level_code_bin is not None and e.level_code_bin.shape[0]:
            raise fail("level_code_bin without bin levels", "level_code_bin")
        return
    cb, boff, lb = e.level_code_bin, e.level_border_offset, e.level_border
    assert boff is not None and lb is not None and e.level_code_bit is not None
    if cb is None or cb.shape != lb.shape:
        raise fail("bin levels of a quantized ensemble need level_code_bin, one bin per border", "level_code_bin")
    size = np.diff(boff)
    rank = np.repeat(np.arange(L), size)
    col = lc[rank]
    inside = (cb >= 0) & (cb < m[col])
    wrong = ~inside
    wrong[inside] = e.border[off[col[inside]] + cb[inside]] != lb[inside]
    if wrong.any():
        i = int(rank[np.flatnonzero(wrong)[0]])
        raise fail("a bin level's code bins do not match its borders", "level_code_bin", int(e.level_tree[i]))
    nan_above = np.add.reduceat((e.col_nan_bin[col] > cb).astype(np.int64), boff[:-1][is_bin])
    code = (nan_above >> e.level_code_bit[is_bin].astype(np.int64)) & 1
    if np.any(code.astype(bool) != e.level_nan_true[is_bin]):
        i = int(np.flatnonzero(is_bin)[np.flatnonzero(code.astype(bool) != e.level_nan_true[is_bin])[0]])
        raise fail("column NaN bin does not give the bin level's NaN bit", "col_nan_bin", int(e.level_tree[i]))


__all__ = ["INVALID_CODE", "MAX_DEPTH", "ObliviousEnsemble", "bin_level_bits", "category_membership",
           "forest_to_oblivious",
           "verify_oblivious"]
