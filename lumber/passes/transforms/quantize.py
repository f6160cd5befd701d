"""``quantize``: ObliviousEnsemble -> ObliviousEnsemble with integer bins (CatBoost-style borders), exact.

Per feature, the sorted unique thresholds of its levels become the borders of
a binarized column: ``bin(x) = #{b : x > b}``, so the level ``x > b_k`` is
``bin > k``. A NaN input gets one bin ``p`` that gives every level of the
feature its ``nan_true`` bit (``p > k`` exactly for the levels true on NaN);
when no single ``p`` does (levels disagree about NaN out of threshold order),
the feature gets two columns, one whose NaN bin is above every border (for the
levels true on NaN) and one whose NaN bin is 0. Category levels (``code in
set``) each read a *set column* of their (feature, set, NaN bit): bin 1 for a
member, 0 for a valid non-member, ``col_invalid_bin`` for an invalid value,
and the NaN bit as the NaN bin; the level's bit is ``bin > 0``. Thresholds, tables and
semantics are unchanged: the pass only adds the bin arrays the table
evaluators use (``ObliviousEnsemble`` docstring).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import numpy as np
import numpy.typing as npt

from lumber.ir import CompileError, ObliviousEnsemble
from lumber.ir.oblivious import INVALID_CODE

from ..base import PassContext, PassReport, Transform

MAX_BORDERS = 65535
"""Borders one column may hold (bins must fit 16 bits)."""


@dataclass(frozen=True)
class Quantize(Transform[ObliviousEnsemble, ObliviousEnsemble]):
    """Give every level an integer bin comparison on a binarized column (exact)."""

    name: ClassVar[str] = "quantize"

    def run(self, ir: ObliviousEnsemble, ctx: PassContext) -> ObliviousEnsemble:
        out = quantize_ensemble(ir)
        assert out.col_feature is not None and out.border_offset is not None
        widths = np.diff(out.border_offset)
        stats = {"columns": int(out.col_feature.shape[0]), "borders": int(widths.sum()),
                 "max_borders": int(widths.max()) if widths.size else 0, "bin_bytes": bin_bytes(out)}
        ctx.report(PassReport(self.name, (
            f"{stats['columns']} binarized columns, {stats['borders']:,} borders "
            f"(at most {stats['max_borders']} per column: {stats['bin_bytes'] * 8}-bit bins)"), stats))
        return out


def bin_bytes(ens: ObliviousEnsemble) -> int:
    """Bytes per bin the table evaluators use: 1 when every column has at most 255 borders, else 2."""
    if ens.border_offset is None or ens.border_offset.shape[0] < 2:
        return 1
    return 1 if int(np.diff(ens.border_offset).max()) <= 255 else 2


def quantize_ensemble(ens: ObliviousEnsemble) -> ObliviousEnsemble:
    """``ens`` with ``col_*``, ``border*`` and ``level_col``/``level_bin`` filled (see module docstring)."""
    L = ens.n_levels
    feat = ens.level_feature.astype(np.int64)
    is_set = np.isnan(ens.level_threshold)
    thr = ens.level_threshold
    nan_true = ens.level_nan_true
    level_col = np.zeros(L, dtype=np.int32)
    level_bin = np.zeros(L, dtype=np.int32)
    col_feature: list[int] = []
    col_nan_bin: list[int] = []
    borders: list[npt.NDArray[np.float64]] = []
    bin_lv = ens.bin_level
    code_bin = np.zeros(0 if ens.level_border is None else ens.level_border.shape[0], dtype=np.int32)
    # bin groups by their first level: (borders, the code a NaN reads as)
    starts_g = np.flatnonzero(bin_lv & (ens.level_code_bit == 0)) if ens.has_bin_levels else np.zeros(0, np.int64)
    group_of_feature: dict[int, list[int]] = {}
    for g in starts_g.tolist():
        group_of_feature.setdefault(int(feat[g]), []).append(g)

    def group_levels(g: int) -> range:
        return range(g, g + int(ens.level_borders(g).shape[0]).bit_length())

    def nan_code(g: int) -> int:
        return sum(int(nan_true[i]) << j for j, i in enumerate(group_levels(g)))

    def add_column(f: int, levels: npt.NDArray[np.int64], groups: list[int], nan_bin: int | None) -> None:
        parts = [thr[levels]] + [ens.level_borders(g) for g in groups]
        u = np.unique(np.concatenate(parts))
        if u.shape[0] > MAX_BORDERS:
            raise CompileError(
                f"feature '{ens.schema.features[f].name}' has {u.shape[0]:,} distinct thresholds; "
                f"quantized columns hold at most {MAX_BORDERS:,}",
                "keep the unquantized form (the numpy evaluator needs no bins)")
        c = len(col_feature)
        level_col[levels] = c
        level_bin[levels] = np.searchsorted(u, thr[levels])
        for g in groups:
            lv = np.asarray(group_levels(g))
            level_col[lv] = c
            level_bin[lv] = np.searchsorted(u, thr[lv])
            assert ens.level_border_offset is not None
            for i in lv.tolist():
                a, b = ens.level_border_offset[i], ens.level_border_offset[i + 1]
                code_bin[a:b] = np.searchsorted(u, ens.level_borders(i))
        col_feature.append(f)
        col_nan_bin.append(u.shape[0] if nan_bin is None else nan_bin)
        borders.append(u)

    thr_levels = np.flatnonzero(~is_set & ~bin_lv)
    features = sorted(set(feat[thr_levels].tolist()) | set(group_of_feature))
    for f in features:
        levels = thr_levels[feat[thr_levels] == f]
        groups = group_of_feature.get(f, [])
        # every threshold with its NaN bit: a group's code c sets its lowest c borders on NaN
        vals = np.concatenate([thr[levels]] + [ens.level_borders(g) for g in groups])
        nan_bits = np.concatenate([nan_true[levels]] + [np.arange(ens.level_borders(g).shape[0]) < nan_code(g)
                                                       for g in groups])
        u, k = np.unique(vals, return_inverse=True)
        lower = int(k[nan_bits].max()) + 1 if nan_bits.any() else 0
        upper = int(k[~nan_bits].min()) if (~nan_bits).any() else u.shape[0]
        if lower <= upper:
            add_column(f, levels, groups, lower)
            continue
        t_mask = nan_true[levels]
        all_true = [g for g in groups if nan_code(g) == ens.level_borders(g).shape[0]]
        all_false = [g for g in groups if nan_code(g) == 0]
        if t_mask.any() or all_true:
            add_column(f, levels[t_mask], all_true, None)  # NaN above every border: all true
        if (~t_mask).any() or all_false:
            add_column(f, levels[~t_mask], all_false, 0)   # NaN in bin 0: all false
        for g in groups:
            if g not in all_true and g not in all_false:  # its own column; NaN in the bin of its code
                add_column(f, levels[:0], [g], nan_code(g))
    col_invalid_bin = [-1] * len(col_feature)
    set_cols: dict[tuple[int, tuple[int, ...], bool], int] = {}
    f32 = ens.schema.input_dtype == "float32"
    for i in np.flatnonzero(is_set):
        codes = ens.level_set(int(i))
        key = (int(feat[i]), tuple(int(c) for c in codes), bool(nan_true[i]))
        c = set_cols.get(key)
        if c is None:
            valid = codes[codes >= 0]
            if f32 and valid.size and int(valid.max()) >= 1 << 24:
                raise CompileError(
                    f"feature '{ens.schema.features[key[0]].name}': category code {int(valid.max())} is not a "
                    "float32 value; set columns of float32-input models hold codes below 2^24",
                    "keep the unquantized form (the numpy evaluator needs no bins)")
            c = set_cols[key] = len(col_feature)
            col_feature.append(key[0])
            col_nan_bin.append(int(key[2]))
            borders.append(valid.astype(np.float64))
            col_invalid_bin.append(int(codes.size > 0 and codes[0] == INVALID_CODE))
        level_col[i] = c
        level_bin[i] = 0
    offset = np.zeros(len(borders) + 1, dtype=np.int64)
    np.cumsum([b.shape[0] for b in borders], out=offset[1:])
    return ens.replace(
        col_feature=np.asarray(col_feature, dtype=np.int32), col_nan_bin=np.asarray(col_nan_bin, dtype=np.int32),
        border_offset=offset, border=np.concatenate(borders) if borders else np.zeros(0),
        level_col=level_col, level_bin=level_bin,
        col_invalid_bin=np.asarray(col_invalid_bin, dtype=np.int32) if set_cols else None,
        level_code_bin=code_bin if ens.has_bin_levels else None,
    )


__all__ = ["MAX_BORDERS", "Quantize", "bin_bytes", "quantize_ensemble"]
