"""``quantize``: ObliviousEnsemble -> ObliviousEnsemble with integer bins (CatBoost-style borders), exact.

Per feature, the sorted unique thresholds of its levels become the borders of
a binarized column: ``bin(x) = #{b : x > b}``, so the level ``x > b_k`` is
``bin > k``. A NaN input gets one bin ``p`` that gives every level of the
feature its ``nan_true`` bit (``p > k`` exactly for the levels true on NaN);
when no single ``p`` does (levels disagree about NaN out of threshold order),
the feature gets two columns, one whose NaN bin is above every border (for the
levels true on NaN) and one whose NaN bin is 0. Thresholds, tables and
semantics are unchanged: the pass only adds the bin arrays the table
evaluators use (``ObliviousEnsemble`` docstring).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import numpy as np
import numpy.typing as npt

from lumber.ir import CompileError, ObliviousEnsemble

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
    thr = ens.level_threshold
    nan_true = ens.level_nan_true
    level_col = np.zeros(L, dtype=np.int32)
    level_bin = np.zeros(L, dtype=np.int32)
    col_feature: list[int] = []
    col_nan_bin: list[int] = []
    borders: list[npt.NDArray[np.float64]] = []
    order = np.argsort(feat, kind="stable")
    starts = np.flatnonzero(np.concatenate([[True], feat[order][1:] != feat[order][:-1]])) if L else []
    bounds = list(starts) + [L]

    def add_column(f: int, levels: npt.NDArray[np.int64], nan_bin: int | None) -> None:
        u, k = np.unique(thr[levels], return_inverse=True)
        if u.shape[0] > MAX_BORDERS:
            raise CompileError(
                f"feature '{ens.schema.features[f].name}' has {u.shape[0]:,} distinct thresholds; "
                f"quantized columns hold at most {MAX_BORDERS:,}",
                "keep the unquantized form (the numpy evaluator needs no bins)")
        level_col[levels] = len(col_feature)
        level_bin[levels] = k
        col_feature.append(f)
        col_nan_bin.append(u.shape[0] if nan_bin is None else nan_bin)
        borders.append(u)

    for a, b in zip(bounds[:-1], bounds[1:]):
        levels = order[a:b]
        f = int(feat[levels[0]])
        u, k = np.unique(thr[levels], return_inverse=True)
        t_mask = nan_true[levels]
        lower = int(k[t_mask].max()) + 1 if t_mask.any() else 0
        upper = int(k[~t_mask].min()) if (~t_mask).any() else u.shape[0]
        if lower <= upper:
            add_column(f, levels, lower)
        else:
            add_column(f, levels[t_mask], None)  # NaN above every border: all true
            add_column(f, levels[~t_mask], 0)    # NaN in bin 0: all false
    offset = np.zeros(len(borders) + 1, dtype=np.int64)
    np.cumsum([b.shape[0] for b in borders], out=offset[1:])
    return ens.replace(
        col_feature=np.asarray(col_feature, dtype=np.int32), col_nan_bin=np.asarray(col_nan_bin, dtype=np.int32),
        border_offset=offset, border=np.concatenate(borders) if borders else np.zeros(0),
        level_col=level_col, level_bin=level_bin,
    )


__all__ = ["MAX_BORDERS", "Quantize", "bin_bytes", "quantize_ensemble"]
