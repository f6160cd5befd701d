"""LightGBM's zero-as-missing splits in the polynomial form.

A split with ``missing_zero`` sends ``|x| <= ZERO_THRESHOLD`` where it sends
NaN, and compares every other value with its threshold. Two extra thresholds on
the feature, just below ``-Z`` and at ``Z``, make the zero region
``[-Z, Z]`` a run of cells (it may hold more cells when ordinary thresholds
fall inside it). A leaf then admits up to three intervals of cells: below the
zero region, inside it, above it. Ordinary splits narrow all three; a
zero-as-missing split narrows the outer two by its threshold and keeps or
empties the inner one by its missing direction. The factor is the sum of the
admitted intervals' indicators (``c_lo - c_hi`` each), contiguous intervals
merged, plus the NaN term: such features always use the explicit NaN mode.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from lumber.ir.forest import ZERO_THRESHOLD

NONE = -2
"""Padding of term tables (no term); ``-1`` is the constant 1."""


def zero_boundaries(input_dtype: str) -> tuple[float, float]:
    """Thresholds ``(zl, zh)`` with ``zl < x <= zh`` iff ``|x| <= ZERO_THRESHOLD`` for inputs of the dtype."""
    z = float(ZERO_THRESHOLD)
    if input_dtype == "float32":
        return float(np.nextafter(np.float32(-z), np.float32(-np.inf))), z
    return float(np.nextafter(-z, -np.inf)), z


def zero_feature_factors(k: npt.NDArray[np.int64], went_left: npt.NDArray[np.bool_],
                         zero_node: npt.NDArray[np.bool_], missing_left: npt.NDArray[np.bool_],
                         group: npt.NDArray[np.int64], n_groups: int, m: npt.NDArray[np.int64],
                         za: npt.NDArray[np.int64], zb: npt.NDArray[np.int64], base: npt.NDArray[np.int64],
                         miss_id: npt.NDArray[np.int64], nan_cell: bool,
                         ) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.float64]]:
    """Term tables ``(tc, tw)`` (width 7) for (leaf, feature) groups of zero-as-missing features.

    Per path entry: ``k`` the split's threshold index within its feature (``m`` for +inf),
    ``went_left``, ``zero_node`` (the split has ``missing_zero``), ``missing_left``, ``group``.
    Per group: ``m`` thresholds of its feature, ``za``/``zb`` the indices of the zero
    boundaries (zero cells are ``za+1 .. zb``), ``base`` the id of the feature's first
    condition, ``miss_id`` its MISSING condition. Cell ``j`` lies above threshold ``j-1``.
    """
    full_lo = np.where(went_left, 0, k + 1)
    full_hi = np.where(went_left, k, m[group])
    lo = np.zeros(n_groups, dtype=np.int64)
    hi = m.copy()
    np.maximum.at(lo, group, full_lo)
    np.minimum.at(hi, group, full_hi)
    # the zero region sees only ordinary splits' intervals, and each zero split's missing direction
    zlo = za + 1
    zhi = zb.copy()
    plain = ~zero_node
    np.maximum.at(zlo, group[plain], full_lo[plain])
    np.minimum.at(zhi, group[plain], full_hi[plain])
    kept = np.ones(n_groups, dtype=bool)
    np.logical_and.at(kept, group[zero_node], missing_left[zero_node] == went_left[zero_node])
    nan_in = np.ones(n_groups, dtype=bool)
    np.logical_and.at(nan_in, group, missing_left == went_left)
    parts = np.stack([np.stack([lo, np.minimum(hi, za)], 1),
                      np.stack([np.where(kept, zlo, 1), np.where(kept, zhi, 0)], 1),
                      np.stack([np.maximum(lo, zb + 1), hi], 1)], 1)  # (G, 3, [lo, hi])
    live = parts[:, :, 0] <= parts[:, :, 1]
    # merge contiguous intervals so equal functions get equal terms
    for a, b in ((0, 1), (1, 2), (0, 2)):
        join = live[:, a] & live[:, b] & (parts[:, a, 1] + 1 == parts[:, b, 0])
        parts[join, a, 1] = parts[join, b, 1]
        live[join, b] = False
    tc = np.full((n_groups, 7), NONE, dtype=np.int64)
    tw = np.zeros((n_groups, 7))
    for p in range(3):
        on = live[:, p]
        plo, phi = parts[:, p, 0], parts[:, p, 1]
        tc[on, 2 * p] = np.where(plo[on] == 0, -1, base[on] + plo[on] - 1)
        tw[on, 2 * p] = 1.0
        upper = on & (phi < m)
        tc[upper, 2 * p + 1] = base[upper] + phi[upper]
        tw[upper, 2 * p + 1] = -1.0
    if nan_cell:  # GREATER conditions are false on NaN: the intervals give [lo == 0] there
        coef = nan_in.astype(float) - (live & (parts[:, :, 0] == 0)).any(axis=1)
        has = coef != 0
        tc[has, 6] = miss_id[has]
        tw[has, 6] = coef[has]
    return tc, tw


__all__ = ["zero_boundaries", "zero_feature_factors"]
