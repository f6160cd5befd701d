"""Reference semantics of the Forest IR: the oracle for every test.

Evaluation advances all rows through all trees together, one tree level per
numpy step (no Python loop over nodes or rows), in row blocks so memory stays
bounded. Sums run tree by tree in the source model's accumulation order so
margins match it bit for bit where the source allows.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt

from .arrays import ForestArrays
from .binding import bind_frame
from .diagnostics import InputDataError
from .schema import CategoryRule, FeatureKind, PostTransform, Schema

BLOCK_ENTRIES = 1 << 21
"""Rows x trees advanced together; bounds the temporary arrays to a few tens of MB."""

ZERO_THRESHOLD = 1.0000000180025095e-35
"""LightGBM's ``kZeroThreshold`` (declared ``1e-35f``: float32(1e-35) widened to double, not the
double 1e-35): with ``missing_zero`` a value with ``|x| <= ZERO_THRESHOLD`` is missing."""


OUT_OF_DICTIONARY = "<OOD>"
"""YDF's code-0 item: every label not in the dictionary is read as it (YDF's own unknown-category rule)."""


def _frame_to_array(schema: Schema, frame: Any) -> npt.NDArray[np.float64]:
    """A pandas DataFrame -> float64 array in the schema's column order (labels mapped to codes).

    Columns bind by name (``binding.bind``): never by position unless the frame
    or the model carries no names. A feature that records its category labels
    reads labels only, never codes: a label that looks like a number ("2") is
    the label "2", not code 2.
    """
    import pandas as pd

    names = schema.feature_names
    frame = bind_frame(names, frame)
    out = np.empty((len(names), len(frame)), dtype=np.float64)  # one row per column: contiguous writes
    for j, feat in enumerate(schema.features):
        col = frame.iloc[:, j]
        if isinstance(col.dtype, pd.CategoricalDtype):
            col = col.astype(object)
        if feat.categories is not None:
            out[j] = _label_codes(schema, feat, col)
            continue
        if pd.api.types.is_bool_dtype(col.dtype) or pd.api.types.is_numeric_dtype(col.dtype):
            out[j] = col.to_numpy(dtype=np.float64, na_value=np.nan)
            continue
        num = pd.to_numeric(col, errors="coerce")
        bad = num.isna() & col.notna()
        if bad.any():
            row = int(np.flatnonzero(bad.to_numpy())[0])
            raise InputDataError(
                f"column '{feat.name}' holds non-numeric value {col.iloc[row]!r} (row {row + 1})",
                f"feature '{feat.name}' is {feat.kind.name.lower()}: it accepts numbers")
        out[j] = num.to_numpy(dtype=np.float64)
    return np.ascontiguousarray(out.T)


def _number(v: Any) -> float | None:
    """``v`` as a number when it is one (numbers and numeric labels compare by value: 2 == 2.0)."""
    if isinstance(v, (bool, np.bool_)) or v is None:
        return None
    if isinstance(v, (int, float, np.integer, np.floating)):
        f = float(v)
        return f if f == f else None
    return None


def _label_codes(schema: Schema, feat: Any, col: Any) -> npt.NDArray[np.float64]:
    """Codes of a column of category labels: by label text (numbers by value), missing stays NaN.

    A label the model does not know follows the model's rule for unknown
    categories where it has one (YDF: ``<OOD>``, code 0); otherwise it is an
    error naming the column, the row and the accepted labels, never a guess.
    """
    import pandas as pd

    cats = feat.categories
    by_text = {str(c): i for i, c in enumerate(cats)}
    by_value: dict[float, int] = {}
    for i, c in enumerate(cats):
        v = _number(c)
        if v is None and isinstance(c, str):
            try:
                v = float(c) if c.strip() else None
            except ValueError:
                v = None
        if v is not None and v == v:
            by_value.setdefault(v, i)
    idx, uniques = pd.factorize(col, use_na_sentinel=True)  # each distinct label looked up once
    ood = (0 if cats and cats[0] == OUT_OF_DICTIONARY and schema.source.get("library") == "ydf" else None)
    table = np.empty(len(uniques) + 1, dtype=np.float64)
    table[-1] = np.nan  # idx -1: missing
    for u, v in enumerate(uniques):
        num = _number(v)
        code = by_value.get(num) if num is not None else by_text.get(str(v))
        if code is None:
            if ood is None:
                row = int(np.flatnonzero(idx == u)[0])
                shown = ", ".join(map(str, cats[:8]))
                raise InputDataError(
                    f"column '{feat.name}' holds unknown category {v!r} (row {row + 1})",
                    f"known categories: {shown}{', ...' if len(cats) > 8 else ''}",
                    "categories bind by label, never by code; this model has no rule for unknown labels")
            code = ood
        table[u] = code
    codes = table[idx]
    return codes


def prepare_input(schema: Schema, X: Any) -> npt.NDArray[np.float64]:
    """Validate user data and round it to the model's input dtype (returned as float64).

    Accepts a 2-D array-like (columns by position: an array carries no names) or a
    pandas DataFrame (columns bound by feature name, strictly; see ``binding``).
    Errors name the problem and what is accepted.
    """
    if hasattr(X, "iloc") and not hasattr(X, "columns") and getattr(X, "ndim", 0) == 1 and hasattr(X, "to_frame"):
        X = X.to_frame().T  # one case as a pandas Series (``frame.iloc[0]``): a one-row frame, bound by name
    if hasattr(X, "iloc") and hasattr(X, "columns"):
        arr = _frame_to_array(schema, X)
    else:
        try:
            arr = np.asarray(X)
        except Exception as exc:  # ragged lists and the like
            raise InputDataError(f"data is not a rectangular array: {exc}") from None
        if arr.dtype == object or arr.dtype.kind in "USV":
            try:
                arr = arr.astype(np.float64)
            except (TypeError, ValueError):
                raise InputDataError("data holds non-numeric values",
                                     "pass numbers (category labels need a DataFrame with named columns)") from None
        if arr.dtype.kind == "c":
            raise InputDataError("data holds complex numbers; pass real numbers")
        if arr.ndim == 1:
            arr = arr.reshape(1, -1) if schema.n_features != 1 else arr.reshape(-1, 1)
        if arr.ndim != 2:
            raise InputDataError(f"data must be 2-D (rows x features), got {arr.ndim} dimensions")
        arr = np.asarray(arr, dtype=np.float64)
    if arr.shape[1] != schema.n_features:
        raise InputDataError(
            f"data has {arr.shape[1]} columns but the model reads {schema.n_features} features",
            f"expected columns: {', '.join(schema.feature_names[:12])}{' ...' if schema.n_features > 12 else ''}")
    if schema.input_dtype == "float32":
        with np.errstate(over="ignore"):
            arr = arr.astype(np.float32).astype(np.float64)
    if not schema.allow_nan and np.isnan(arr).any():
        r, c = np.argwhere(np.isnan(arr))[0]
        raise InputDataError(
            f"NaN in column '{schema.features[c].name}' (row {r + 1}): this model cannot route missing values",
            f"{schema.source.get('library', 'the source library')} rejects NaN for this model; impute first")
    if not schema.allow_inf and np.isinf(arr).any():
        r, c = np.argwhere(np.isinf(arr))[0]
        raise InputDataError(
            f"infinite value in column '{schema.features[c].name}' (row {r + 1})"
            + (" after rounding to float32" if schema.input_dtype == "float32" else ""),
            "the source model rejects infinite inputs; pass finite values")
    return np.ascontiguousarray(arr)


def category_codes(x: npt.NDArray[np.float64], rule: CategoryRule) -> npt.NDArray[np.int64]:
    """Category code of each value under the library's rule; -1 marks invalid (NaN included)."""
    codes = np.full(x.shape, -1, dtype=np.int64)
    finite = np.isfinite(x)
    if rule == CategoryRule.LIGHTGBM:
        ok = finite & (np.abs(x) < 2.0**31)
        t = np.trunc(np.where(ok, x, 0.0))
        ok &= t >= 0
    elif rule == CategoryRule.XGBOOST:
        ok = finite & (x >= 0) & (x < 2.0**24)
        t = np.trunc(np.where(ok, x, 0.0))
    else:
        ok = finite & (x >= 0) & (x < 2.0**32)
        t = np.trunc(np.where(ok, x, 0.0))
        if rule == CategoryRule.SKLEARN:
            ok &= t == x
    codes[ok] = t[ok].astype(np.int64)
    return codes


def _membership_keys(forest: ForestArrays) -> npt.NDArray[np.int64]:
    """Sorted keys ``node << 32 | category`` of every category set (for searchsorted)."""
    sizes = np.diff(forest.cat_offset)
    nodes = np.repeat(np.arange(forest.n_nodes, dtype=np.int64), sizes)
    return (nodes << 32) | forest.cat_values


def go_left(forest: ForestArrays, nodes: npt.NDArray[np.int64], x: npt.NDArray[np.float64],
            keys: npt.NDArray[np.int64] | None = None) -> npt.NDArray[np.bool_]:
    """Branch decision for input values ``x`` at (non-leaf) ``nodes``: True means left."""
    isnan = np.isnan(x)
    missing = isnan | (forest.missing_zero[nodes] & (np.abs(x) <= ZERO_THRESHOLD))
    with np.errstate(invalid="ignore"):
        left = x <= forest.threshold[nodes]
    cat = forest.is_categorical[nodes]
    if cat.any():
        ci = np.flatnonzero(cat)
        cn = nodes[ci]
        codes = category_codes(x[ci], forest.schema.category_rule)
        valid = codes >= 0
        if keys is None:
            keys = _membership_keys(forest)
        q = (cn << 32) | np.where(valid, codes, 0)
        pos = np.searchsorted(keys, q)
        member = np.zeros(ci.shape[0], dtype=bool)
        inb = pos < keys.shape[0]
        member[inb] = keys[pos[inb]] == q[inb]
        member &= valid
        dec = np.where(member, forest.cat_in_set_left[cn], ~forest.cat_in_set_left[cn])
        dec = np.where(valid, dec, forest.cat_invalid_left[cn])
        left[ci] = dec
    return np.where(missing, forest.missing_left[nodes], left)


def forest_apply(forest: ForestArrays, X: npt.NDArray[np.float64]) -> npt.NDArray[np.int64]:
    """Global leaf id per row and tree, ``(n, n_trees)``; ``X`` already prepared."""
    n, T = X.shape[0], forest.n_trees
    out = np.empty((n, T), dtype=np.int64)
    if n == 0 or T == 0:
        return out
    keys = _membership_keys(forest) if forest.is_categorical.any() else None
    roots = forest.tree_offset[:-1].astype(np.int64)
    block = max(1, BLOCK_ENTRIES // max(T, 1))
    left_arr = forest.left.astype(np.int64)
    right_arr = forest.right.astype(np.int64)
    feat = forest.feature
    for start in range(0, n, block):
        stop = min(n, start + block)
        m = stop - start
        node = np.broadcast_to(roots, (m, T)).reshape(-1).copy()
        row = np.repeat(np.arange(start, stop, dtype=np.int64), T)
        active = np.flatnonzero(left_arr[node] >= 0)
        while active.size:
            nd = node[active]
            x = X[row[active], feat[nd]]
            gl = go_left(forest, nd, x, keys)
            nxt = np.where(gl, left_arr[nd], right_arr[nd])
            node[active] = nxt
            active = active[left_arr[nxt] >= 0]
        out[start:stop] = node.reshape(m, T)
    return out


def accumulate(forest: ForestArrays, leaves: npt.NDArray[np.int64]) -> npt.NDArray[np.float64]:
    """Raw margins from leaf ids: start at base_score, add trees in order, then average."""
    schema = forest.schema
    n = leaves.shape[0]
    K = schema.n_outputs
    acc_dtype = np.dtype(schema.accumulate_dtype)
    acc = np.empty((n, K), dtype=acc_dtype)
    acc[:] = np.asarray(schema.base_score, dtype=acc_dtype)
    tout = forest.tree_output
    for t in range(forest.n_trees):
        k = int(tout[t])
        if k >= 0:
            acc[:, k] += forest.value[leaves[:, t], k].astype(acc_dtype)
        else:
            acc += forest.value[leaves[:, t]].astype(acc_dtype)
    out = acc.astype(np.float64)
    if schema.average:
        counts = trees_per_output(forest)
        out = out / np.maximum(counts, 1)[None, :]
    if K == 1:
        return out[:, 0]
    return out


def trees_per_output(forest: ForestArrays) -> npt.NDArray[np.float64]:
    """How many trees contribute to each output (the divisor of averaged forests)."""
    K = forest.n_outputs
    tout = forest.tree_output
    counts = np.bincount(tout[tout >= 0], minlength=K).astype(np.float64)
    counts += float((tout < 0).sum())
    return counts


def forest_evaluate(forest: ForestArrays, X: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
    """Raw margins of prepared input ``X``."""
    return accumulate(forest, forest_apply(forest, X))


__all__ = [
    "prepare_input", "category_codes", "go_left", "forest_apply", "forest_evaluate",
    "accumulate", "trees_per_output", "FeatureKind", "PostTransform",
]
