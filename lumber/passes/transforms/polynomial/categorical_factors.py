"""Categorical splits in the polynomial form: one indicator per category cell.

A categorical feature's splits cut its values into cells: each category code
named by some split (``EQUAL``), invalid codes (``INVALID``: negative, too
large, or non-integral under the model's category rule), NaN (``MISSING``,
when the model accepts NaN) and the rest (valid codes no split names). The
indicators of all cells but the rest, with the constant 1, are a basis of the
functions constant on the cells, so the form stays unique (Theorem 1):

* a leaf whose path admits a set A of cells, the rest not among them, has the
  factor ``sum_{cell in A} I{cell}``;
* when the rest is admitted, ``1 - sum_{cell not in A} I{cell}``.

Two conditions on one feature never share a monomial: the factors above
already are the intersection of every split on the path.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from lumber.ir import Forest
from lumber.ir.polynomial import ConditionKind

NONE = -2
"""Padding of term tables (no term); ``-1`` is the constant 1."""


@dataclass(frozen=True)
class CategoryCells:
    """The cells of every categorical feature and their condition blocks."""

    codes: dict[int, npt.NDArray[np.int64]]
    """Per categorical feature, the sorted category codes some split names."""
    nan_cell: bool
    """NaN is a cell of its own (the model accepts NaN)."""

    def block_size(self, f: int) -> int:
        return int(self.codes[f].shape[0]) + 1 + int(self.nan_cell)

    def block(self, f: int) -> tuple[npt.NDArray[np.int8], npt.NDArray[np.float64], npt.NDArray[np.bool_]]:
        """Kinds, thresholds and NaN values of feature ``f``'s conditions in table order
        (by kind: MISSING, EQUAL by code, INVALID)."""
        m = self.codes[f].shape[0]
        kinds = [ConditionKind.MISSING] * int(self.nan_cell) + [ConditionKind.EQUAL] * m + [ConditionKind.INVALID]
        thr = np.concatenate([[np.nan] * int(self.nan_cell), self.codes[f].astype(np.float64), [np.nan]])
        return np.array(kinds, dtype=np.int8), thr, np.array([self.nan_cell] * int(self.nan_cell) + [False] * (m + 1))


def category_cells(forest: Forest, cat_nodes: npt.NDArray[np.int64]) -> CategoryCells:
    """Collect the named codes per categorical feature (``cat_nodes``: global ids of categorical splits)."""
    feat = forest.feature[cat_nodes].astype(np.int64)
    sizes = forest.cat_offset[cat_nodes + 1] - forest.cat_offset[cat_nodes]
    starts = forest.cat_offset[cat_nodes]
    idx = np.repeat(starts - np.concatenate([[0], np.cumsum(sizes)[:-1]]), sizes) + np.arange(int(sizes.sum()))
    values = forest.cat_values[idx].astype(np.int64)
    value_feat = np.repeat(feat, sizes)
    codes = {int(f): np.unique(values[value_feat == f]) for f in np.unique(feat)}
    return CategoryCells(codes=codes, nan_cell=bool(forest.schema.allow_nan))


def categorical_factors(forest: Forest, cells: CategoryCells, c_off: npt.NDArray[np.int64],
                        node: npt.NDArray[np.int64], went_left: npt.NDArray[np.bool_],
                        group: npt.NDArray[np.int64], group_feature: npt.NDArray[np.int64],
                        ) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.float64], npt.NDArray[np.int64]]:
    """Term tables ``(tc, tw, nt)`` of categorical (leaf, feature) groups.

    ``node``/``went_left``: the path entries on categorical splits (global node ids);
    ``group``: each entry's group number in ``0..len(group_feature)-1``. Term ``i`` of
    group ``g`` is ``tw[g, i] * cond(tc[g, i])``; ``tc == -1`` is the constant 1.
    """
    G = group_feature.shape[0]
    parts: list[tuple[npt.NDArray[np.int64], npt.NDArray[np.int64], npt.NDArray[np.float64]]] = []
    width = 1
    for f, codes in cells.codes.items():
        gsel = np.flatnonzero(group_feature == f)
        if gsel.size == 0:
            continue
        local = np.full(G, -1, dtype=np.int64)
        local[gsel] = np.arange(gsel.size)
        esel = np.flatnonzero(group_feature[group] == f)
        m = codes.shape[0]
        # cells: codes 0..m-1, INVALID m, NaN m+1, rest m+2; per entry, which cells go left
        left = np.empty((esel.size, m + 3), dtype=bool)
        n = node[esel]
        in_left = forest.cat_in_set_left[n]
        member = _membership(forest, n, codes)
        left[:, :m] = np.where(member, in_left[:, None], ~in_left[:, None])
        left[:, m] = forest.cat_invalid_left[n]
        left[:, m + 1] = forest.missing_left[n]
        left[:, m + 2] = ~in_left
        ok = left == went_left[esel, None]
        allowed = np.ones((gsel.size, m + 3), dtype=bool)
        np.logical_and.at(allowed, local[group[esel]], ok)
        if not cells.nan_cell:  # NaN never occurs: let it follow the rest, so it needs no term
            allowed[:, m + 1] = allowed[:, m + 2]
        # condition id of each cell (the rest has none)
        base = int(c_off[f])
        nan_shift = int(cells.nan_cell)
        cid = np.concatenate([base + nan_shift + np.arange(m), [base + nan_shift + m], [base], [-1]])
        termed = np.ones(m + 3, dtype=bool)
        termed[m + 2] = False
        termed[m + 1] = cells.nan_cell
        rest = allowed[:, m + 2]
        # rest admitted: 1 - sum of the refused cells; else: sum of the admitted cells
        use = np.where(rest[:, None], ~allowed, allowed) & termed[None, :]
        sign = np.where(rest, -1.0, 1.0)
        k = use.sum(axis=1) + rest
        w = int(k.max()) if k.size else 1
        tc = np.full((gsel.size, w), NONE, dtype=np.int64)
        tw = np.zeros((gsel.size, w))
        tc[rest, 0] = -1
        tw[rest, 0] = 1.0
        r, c = np.nonzero(use)
        slot = np.arange(r.size) - np.searchsorted(r, r) + rest[r]
        tc[r, slot] = cid[c]
        tw[r, slot] = sign[r]
        parts.append((gsel, tc, tw))
        width = max(width, w)
    tc_all = np.full((G, width), NONE, dtype=np.int64)
    tw_all = np.zeros((G, width))
    for gsel, tc, tw in parts:
        tc_all[gsel, :tc.shape[1]] = tc
        tw_all[gsel, :tw.shape[1]] = tw
    return tc_all, tw_all, (tc_all != NONE).sum(axis=1)


def _membership(forest: Forest, nodes: npt.NDArray[np.int64], codes: npt.NDArray[np.int64]) -> npt.NDArray[np.bool_]:
    """``(len(nodes), len(codes))``: is each code in each node's category set."""
    out = np.zeros((nodes.size, codes.size), dtype=bool)
    sizes = forest.cat_offset[nodes + 1] - forest.cat_offset[nodes]
    if not sizes.sum():
        return out
    row = np.repeat(np.arange(nodes.size), sizes)
    idx = np.repeat(forest.cat_offset[nodes] - np.concatenate([[0], np.cumsum(sizes)[:-1]]), sizes) \
        + np.arange(int(sizes.sum()))
    out[row, np.searchsorted(codes, forest.cat_values[idx])] = True
    return out


__all__ = ["CategoryCells", "categorical_factors", "category_cells"]
