"""``contributions``: exact per-row Shapley values of a tree ensemble's margin.

Each tree's margin is a sum over its leaves, and a leaf is reached when every
test on its path holds. Group the tests of a path by feature: the path's
feature ``k`` holds for the row (``o_k``) when every test of ``k`` on the path
routes the row's value toward the leaf, exactly as the model routes it (NaN,
zero-as-missing and category sets included). The leaf's share of a coalition
game is then a product over its path features, and its Shapley values have a
closed form; a row's contributions are the sums over leaves and trees.

*Interventional* (``reference`` rows): the game of a row ``x`` against one
reference ``r`` is ``f(x_S, r_rest)``. A leaf's term is ``v`` when the
features in ``S`` hold for ``x`` and the others hold for ``r``. With ``A`` the
path features only ``x`` satisfies and ``B`` those only ``r`` satisfies (a
feature neither satisfies makes the leaf unreachable), the leaf's Shapley
values are ``v (|A|-1)! |B|! / (|A|+|B|)!`` for each feature of ``A`` and
``-v |A|! (|B|-1)! / (|A|+|B|)!`` for each of ``B``. The values are averaged
over the references; the base value is the mean margin of the references.

*Path-dependent* (no reference): a feature outside ``S`` follows both branches
weighted by the training cover of each child (``Forest.count``), the game of
TreeSHAP. A leaf's term is ``v prod_{k in S} o_k prod_{k not in S} z_k`` with
``z_k`` the product of the cover fractions of ``k``'s tests on the path; its
Shapley value for ``k`` is ``v (o_k - z_k) sum_s c_s s! (D-1-s)! / D!`` where
``c_s`` are the coefficients of ``prod_{j != k} (z_j + o_j t)``. The base
value is the game's empty coalition, ``sum_leaves v prod z``.

Either way ``base_value + values.sum(axis=1)`` is each row's margin, summed in
float64 (a source that accumulates in float32, as XGBoost does, differs from
that sum by its own rounding). Averaged forests divide by their tree count.
"""

from __future__ import annotations

from dataclasses import dataclass
from math import factorial
from typing import Any, Literal

import numpy as np
import numpy.typing as npt

from lumber.ir import Forest, InputDataError, Task
from lumber.ir.interp import _membership_keys, forest_apply, go_left, trees_per_output

from .attribution import output_names

BLOCK_ENTRIES = 1 << 21
"""Pair-matrix entries (leaves x rows x references) computed at once."""


@dataclass(frozen=True, eq=False)
class Contributions:
    """Per-row Shapley values of the margin.

    values : float64[n_rows, n_features] (one output) or float64[n_rows, n_features, n_outputs]
        Each feature's contribution to each row's margin.
    base_value : float (one output) or float64[n_outputs]
        The margin with no feature known: the mean margin of the reference rows (interventional) or
        the cover-weighted mean leaf value (path-dependent).
    ``base_value + values.sum(axis=1)`` equals ``margin`` row by row.
    """

    feature_names: tuple[str, ...]
    output_names: tuple[str, ...]
    values: npt.NDArray[np.float64]
    base_value: Any
    margin: npt.NDArray[np.float64]
    """Each row's margin (float64 sum of leaf values), ``(n,)`` or ``(n, n_outputs)``."""
    method: Literal["interventional", "path-dependent"]
    n_reference: int
    """Reference rows averaged over (0 for path-dependent)."""

    @property
    def n_rows(self) -> int:
        return int(self.values.shape[0])

    def output_values(self, output: int = 0) -> npt.NDArray[np.float64]:
        """``(n_rows, n_features)`` for one output."""
        return self.values if self.values.ndim == 2 else self.values[:, :, output]

    def output_base(self, output: int = 0) -> float:
        return float(self.base_value) if np.ndim(self.base_value) == 0 else float(self.base_value[output])

    def ranking(self, row: int, output: int = 0) -> list[tuple[str, float]]:
        """Features of one row by decreasing |contribution| (ties in column order)."""
        col = self.output_values(output)[row]
        order = np.lexsort((np.arange(col.shape[0]), -np.abs(col)))
        return [(self.feature_names[i], float(col[i])) for i in order]

    def to_dict(self) -> dict[str, Any]:
        """Exact values (floats as Python floats) for JSON."""
        rows = []
        for i in range(self.n_rows):
            outs = []
            for k, name in enumerate(self.output_names):
                m = self.margin[i] if self.margin.ndim == 1 else self.margin[i, k]
                outs.append({"output": name, "margin": float(m),
                             "values": {f: float(v) for f, v in zip(self.feature_names, self.output_values(k)[i])}})
            rows.append({"row": i, "outputs": outs})
        base = ({self.output_names[0]: self.output_base(0)} if np.ndim(self.base_value) == 0
                else {n: float(b) for n, b in zip(self.output_names, self.base_value)})
        return {"method": self.method, "references": self.n_reference, "base_value": base, "rows": rows}


# -- paths -------------------------------------------------------------------------------------


@dataclass(frozen=True)
class _TreePaths:
    """Leaves of one tree and their path features, padded to ``D`` slots per leaf.

    Slot ``(l, k)`` is the ``k``-th distinct feature on leaf ``l``'s path; a padding slot has
    feature -1 and holds for every row. ``entry_*`` list the path tests, grouped by slot: node,
    branch toward the leaf (True: left) and slot index ``l * D + k``."""

    leaves: npt.NDArray[np.int64]
    slot_feature: npt.NDArray[np.int64]
    entry_node: npt.NDArray[np.int64]
    entry_left: npt.NDArray[np.bool_]
    entry_slot: npt.NDArray[np.int64]
    zero_fraction: npt.NDArray[np.float64] | None
    """``[L, D]``: product of cover fractions of the slot's tests (1 on padding); None without covers."""

    @property
    def depth(self) -> int:
        return int(self.slot_feature.shape[1])


def _tree_paths(forest: Forest, t: int) -> _TreePaths:
    lo, hi = int(forest.tree_offset[t]), int(forest.tree_offset[t + 1])
    left, right, feat = forest.left, forest.right, forest.feature
    count = forest.count
    stack: list[tuple[int, list[tuple[int, bool]]]] = [(lo, [])]
    paths: list[tuple[int, list[tuple[int, bool]]]] = []
    while stack:
        node, path = stack.pop()
        if left[node] < 0:
            paths.append((node, path))
            continue
        stack.append((int(right[node]), path + [(node, False)]))
        stack.append((int(left[node]), path + [(node, True)]))
    paths.sort()
    slots = [list(dict.fromkeys(int(feat[n]) for n, _ in p)) for _, p in paths]
    D = max([len(s) for s in slots] + [1])
    L = len(paths)
    slot_feature = np.full((L, D), -1, dtype=np.int64)
    zero = np.ones((L, D)) if count is not None else None
    e_node, e_left, e_slot = [], [], []
    for l, ((leaf, path), fs) in enumerate(zip(paths, slots)):
        slot_feature[l, :len(fs)] = fs
        where = {f: k for k, f in enumerate(fs)}
        for n, gl in path:
            k = where[int(feat[n])]
            e_node.append(n)
            e_left.append(gl)
            e_slot.append(l * D + k)
            if zero is not None:
                assert count is not None
                child = int(left[n] if gl else right[n])
                zero[l, k] *= count[child] / count[n] if count[n] > 0 else 0.0
    assert all(lo <= leaf < hi for leaf, _ in paths)
    order = np.argsort(np.array(e_slot, dtype=np.int64), kind="stable")  # entries grouped by slot
    return _TreePaths(np.array([p[0] for p in paths], dtype=np.int64), slot_feature,
                      np.array(e_node, dtype=np.int64)[order], np.array(e_left, dtype=bool)[order],
                      np.array(e_slot, dtype=np.int64)[order], zero)


def _holds(forest: Forest, paths: _TreePaths, X: npt.NDArray[np.float64],
           keys: npt.NDArray[np.int64] | None) -> npt.NDArray[np.bool_]:
    """``[L, n, D]``: every test of slot ``(l, k)`` routes row ``i`` toward leaf ``l``."""
    L, D = paths.slot_feature.shape
    n = X.shape[0]
    fails = np.zeros((n, L * D), dtype=np.int64)
    if paths.entry_node.size:
        nodes = paths.entry_node
        x = X[:, forest.feature[nodes]]
        gl = go_left(forest, np.broadcast_to(nodes, x.shape).reshape(-1), x.reshape(-1), keys).reshape(x.shape)
        starts = np.flatnonzero(np.r_[True, paths.entry_slot[1:] != paths.entry_slot[:-1]])
        bad = (gl != paths.entry_left[None, :]).astype(np.int64)
        fails[:, paths.entry_slot[starts]] = np.add.reduceat(bad, starts, axis=1)
    return (fails == 0).reshape(n, L, D).transpose(1, 0, 2)


# -- the two games -----------------------------------------------------------------------------


def _interventional_weights(D: int) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.float64]]:
    """``plus[a, b] = (a-1)! b! / (a+b)!`` (a >= 1) and ``minus[a, b] = a! (b-1)! / (a+b)!`` (b >= 1)."""
    plus = np.zeros((D + 1, D + 1))
    minus = np.zeros((D + 1, D + 1))
    for a in range(D + 1):
        for b in range(D + 1):
            if a >= 1:
                plus[a, b] = factorial(a - 1) * factorial(b) / factorial(a + b)
            if b >= 1:
                minus[a, b] = factorial(a) * factorial(b - 1) / factorial(a + b)
    return plus, minus


def _interventional_slots(x_holds: npt.NDArray[np.bool_], r_holds: npt.NDArray[np.bool_]) -> npt.NDArray[np.float64]:
    """``[L, n, D]``: per slot, the Shapley value summed over references, per unit leaf value."""
    L, n, D = x_holds.shape
    m = r_holds.shape[1]
    plus, minus = (w.ravel() for w in _interventional_weights(D))
    x_fails = (~x_holds).astype(np.float64)          # [L, n, D]
    r_fails = (~r_holds).astype(np.float64)          # [L, m, D]
    a = r_fails.sum(axis=2).astype(np.int64)         # [L, m]: features only x satisfies (when alive)
    b = x_fails.sum(axis=2).astype(np.int64)         # [L, n]: features only r satisfies
    out = np.empty((L, n, D))
    step = max(1, BLOCK_ENTRIES // max(1, n * m))
    for s in range(0, L, step):
        sl = slice(s, min(L, s + step))
        alive = np.matmul(x_fails[sl], r_fails[sl].transpose(0, 2, 1)) == 0   # [l, n, m]: no feature fails both
        idx = a[sl][:, None, :] * (D + 1) + b[sl][:, :, None]
        wp = plus[idx] * alive
        wm = minus[idx] * alive
        out[sl] = np.matmul(wp, r_fails[sl]) - wm.sum(axis=2)[:, :, None] * x_fails[sl]
    return out


def _path_dependent_slots(x_holds: npt.NDArray[np.bool_], zero: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
    """``[L, n, D]``: per slot, the TreeSHAP value per unit leaf value."""
    L, n, D = x_holds.shape
    one = x_holds.astype(np.float64)
    z = np.broadcast_to(zero[:, None, :], one.shape)
    poly = np.zeros((L, n, D + 1))
    poly[..., 0] = 1.0
    for k in range(D):  # prod_k (z_k + o_k t)
        shifted = np.zeros_like(poly)
        shifted[..., 1:] = poly[..., :-1] * one[..., k:k + 1]
        poly = poly * z[..., k:k + 1] + shifted
    w = np.array([factorial(s) * factorial(D - 1 - s) / factorial(D) for s in range(D)])
    out = np.zeros((L, n, D))
    for k in range(D):
        ok, zk = one[..., k], z[..., k]
        others = np.zeros((L, n, D))
        # o_k = 1: divide by (t + z_k), from the top (z_k <= 1 keeps the recurrence stable)
        q = np.zeros((L, n))
        for i in range(D, 0, -1):
            q = poly[..., i] - zk * q if i < D else poly[..., D]
            others[..., i - 1] = q
        # o_k = 0: divide the constant factor z_k (a zero factor makes the whole game zero)
        const = np.divide(poly[..., :D], zk[..., None], out=np.zeros((L, n, D)), where=zk[..., None] > 0)
        others = np.where(ok[..., None] > 0, others, const)
        out[..., k] = (ok - zk) * (others @ w)
    return out


# -- the analysis -----------------------------------------------------------------------------


def _margins64(forest: Forest, X: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
    """``[n, K]`` margins summed in float64 (before averaging)."""
    leaves = forest_apply(forest, X)
    acc = np.tile(np.asarray(forest.schema.base_score, dtype=np.float64), (X.shape[0], 1))
    for t in range(forest.n_trees):
        k = int(forest.tree_output[t])
        if k >= 0:
            acc[:, k] += forest.value[leaves[:, t], k]
        else:
            acc += forest.value[leaves[:, t]]
    return acc


def contributions(forest: Forest, rows: Any, reference: Any | None = None) -> Contributions:
    """Exact Shapley values of each row's margin: interventional against ``reference`` rows, else
    path-dependent (TreeSHAP) from the forest's node covers.

    ``rows`` and ``reference`` are arrays or DataFrames with the model's feature columns; they are
    prepared as the model reads them (``Forest.prepare_input``). Raises ``InputDataError`` for an
    empty reference set, and for a path-dependent query on a model without node covers.
    """
    if forest.schema.task == Task.ANOMALY:
        raise InputDataError("contributions explain a model's margin; an isolation forest's score has no "
                             "margin to share out", "explain the classifier or regressor instead")
    X = forest.prepare_input(rows)
    R = forest.prepare_input(reference) if reference is not None else None
    if R is not None and R.shape[0] == 0:
        raise InputDataError("the reference set has no rows", "pass background rows (e.g. a sample of the "
                             "training data), or no reference for path-dependent values")
    if R is None and forest.count is None:
        raise InputDataError("this model records no node covers, which path-dependent contributions weigh "
                             "branches by", "pass reference rows (e.g. a sample of the training data)")
    n, F, K = X.shape[0], forest.n_features, forest.n_outputs
    phi = np.zeros((K, n, F))
    keys = _membership_keys(forest) if forest.is_categorical.any() else None
    base = np.asarray(forest.schema.base_score, dtype=np.float64).copy()
    if R is not None:
        base = _margins64(forest, R).mean(axis=0)
    for t in range(forest.n_trees):
        paths = _tree_paths(forest, t)
        L, D = paths.slot_feature.shape
        vals = forest.value[paths.leaves]                       # [L, K]
        k_out = int(forest.tree_output[t])
        outs = [k_out] if k_out >= 0 else list(range(K))
        onehot = np.zeros((L * D, F))
        real = paths.slot_feature.reshape(-1) >= 0
        onehot[np.flatnonzero(real), paths.slot_feature.reshape(-1)[real]] = 1.0
        x_holds = _holds(forest, paths, X, keys)
        if R is not None:
            slots = _interventional_slots(x_holds, _holds(forest, paths, R, keys)) / R.shape[0]
        else:
            assert paths.zero_fraction is not None
            slots = _path_dependent_slots(x_holds, paths.zero_fraction)
            reach = paths.zero_fraction.prod(axis=1)           # [L]: v(empty coalition) per leaf
            for k in outs:
                base[k] += float(reach @ vals[:, k])
        flat = slots.transpose(1, 0, 2).reshape(n, L * D)      # [n, L*D]
        for k in outs:
            leaf_w = np.repeat(vals[:, k], D)                  # value of each slot's leaf
            phi[k] += (flat * leaf_w[None, :]) @ onehot
    margin = _margins64(forest, X)
    if forest.schema.average:
        counts = np.maximum(trees_per_output(forest), 1)
        phi /= counts[:, None, None]
        margin = margin / counts[None, :]
        base = base / counts
    values = phi[0] if K == 1 else phi.transpose(1, 2, 0)
    return Contributions(
        feature_names=tuple(forest.schema.feature_names), output_names=output_names(forest),
        values=values, base_value=float(base[0]) if K == 1 else base, margin=margin[:, 0] if K == 1 else margin,
        method="interventional" if R is not None else "path-dependent",
        n_reference=0 if R is None else int(R.shape[0]))


__all__ = ["Contributions", "contributions"]
