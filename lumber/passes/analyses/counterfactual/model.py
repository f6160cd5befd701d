"""A solver-neutral MILP under construction: columns and rows added in bulk numpy blocks.

Every part of the formulation appends whole arrays (one call per tree family or
per feature), never one coefficient at a time, and :meth:`MilpModel.csr` turns
the accumulated triplets into the CSR matrix the solver backends load with one
call. :class:`LinExpr` is the small symbolic sum used for the few hand-written
rows (relations, implications, targets of fixed trees).
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt

INF = float("inf")

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]


@dataclass
class LinExpr:
    """``const + sum(coef[k] * var[cols[k]])``."""

    const: float = 0.0
    cols: list[int] = field(default_factory=list)
    coefs: list[float] = field(default_factory=list)

    @staticmethod
    def var(col: int, coef: float = 1.0) -> "LinExpr":
        return LinExpr(0.0, [int(col)], [float(coef)])

    @staticmethod
    def constant(c: float) -> "LinExpr":
        return LinExpr(float(c))

    def __add__(self, other: "LinExpr | float") -> "LinExpr":
        if isinstance(other, LinExpr):
            return LinExpr(self.const + other.const, self.cols + other.cols, self.coefs + other.coefs)
        return LinExpr(self.const + float(other), list(self.cols), list(self.coefs))

    __radd__ = __add__

    def __sub__(self, other: "LinExpr | float") -> "LinExpr":
        return self + (other * -1.0 if isinstance(other, LinExpr) else -float(other))

    def __rsub__(self, other: float) -> "LinExpr":
        return self * -1.0 + other

    def __mul__(self, k: float) -> "LinExpr":
        return LinExpr(self.const * k, list(self.cols), [c * k for c in self.coefs])

    __rmul__ = __mul__

    @property
    def is_constant(self) -> bool:
        return all(c == 0.0 for c in self.coefs)

    def value(self, v: FloatArray) -> float:
        return self.const + float(sum(c * v[j] for j, c in zip(self.cols, self.coefs)))

    def bounds(self, lb: FloatArray, ub: FloatArray) -> tuple[float, float]:
        """Interval of values over the column box (used for big-M constants)."""
        lo = hi = self.const
        for j, c in zip(self.cols, self.coefs):
            a, b = c * lb[j], c * ub[j]
            lo += min(a, b)
            hi += max(a, b)
        return lo, hi


class MilpModel:
    """Columns (bounds, cost, integrality) and rows (``lo <= A x <= hi``) as numpy blocks."""

    def __init__(self) -> None:
        self._lb: list[FloatArray] = []
        self._ub: list[FloatArray] = []
        self._cost: list[FloatArray] = []
        self._int: list[npt.NDArray[np.bool_]] = []
        self._names: list[tuple[int, int, str]] = []
        self.n_cols = 0
        self._rr: list[IntArray] = []
        self._rc: list[IntArray] = []
        self._rv: list[FloatArray] = []
        self._rlo: list[FloatArray] = []
        self._rhi: list[FloatArray] = []
        self.n_rows = 0
        self.offset = 0.0
        self.infeasible_constant_rows = 0
        """Rows whose terms all vanished and whose constant breaks the bounds (the query is infeasible)."""
        self._frozen: tuple[FloatArray, FloatArray, FloatArray, npt.NDArray[np.bool_]] | None = None

    # -- columns -------------------------------------------------------------------------

    def add_cols(self, n: int, lb: float | FloatArray = 0.0, ub: float | FloatArray = 1.0,
                 cost: float | FloatArray = 0.0, integer: bool | npt.NDArray[np.bool_] = False,
                 name: str = "") -> IntArray:
        """Append ``n`` columns; returns their indices."""
        start = self.n_cols
        if n <= 0:
            return np.zeros(0, dtype=np.int64)
        self._lb.append(np.broadcast_to(np.asarray(lb, dtype=np.float64), (n,)).copy())
        self._ub.append(np.broadcast_to(np.asarray(ub, dtype=np.float64), (n,)).copy())
        self._cost.append(np.broadcast_to(np.asarray(cost, dtype=np.float64), (n,)).copy())
        self._int.append(np.broadcast_to(np.asarray(integer, dtype=bool), (n,)).copy())
        self._names.append((start, start + n, name))
        self.n_cols += n
        self._frozen = None
        return np.arange(start, start + n, dtype=np.int64)

    def _columns(self) -> tuple[FloatArray, FloatArray, FloatArray, npt.NDArray[np.bool_]]:
        if self._frozen is None:
            if self.n_cols:
                self._frozen = (np.concatenate(self._lb), np.concatenate(self._ub),
                                np.concatenate(self._cost), np.concatenate(self._int))
                self._lb, self._ub, self._cost, self._int = ([self._frozen[0]], [self._frozen[1]],
                                                             [self._frozen[2]], [self._frozen[3]])
            else:
                z = np.zeros(0)
                self._frozen = (z, z, z, np.zeros(0, dtype=bool))
        return self._frozen

    @property
    def lb(self) -> FloatArray:
        return self._columns()[0]

    @property
    def ub(self) -> FloatArray:
        return self._columns()[1]

    @property
    def cost(self) -> FloatArray:
        return self._columns()[2]

    @property
    def integer(self) -> npt.NDArray[np.bool_]:
        return self._columns()[3]

    def set_integer(self, cols: IntArray) -> None:
        self._columns()[3][np.asarray(cols, dtype=np.int64)] = True

    def add_cost(self, cols: IntArray, coefs: FloatArray) -> None:
        np.add.at(self._columns()[2], np.asarray(cols, dtype=np.int64), np.asarray(coefs, dtype=np.float64))

    def fix(self, cols: IntArray, lo: FloatArray | float, hi: FloatArray | float) -> None:
        lb, ub, _, _ = self._columns()
        cols = np.asarray(cols, dtype=np.int64)
        lb[cols] = np.maximum(lb[cols], lo)
        ub[cols] = np.minimum(ub[cols], hi)

    def add_cost_row(self, hi: float) -> None:
        """The row ``cost . x <= hi`` (the objective without its offset), when any column has a cost."""
        c = self.cost
        nz = np.flatnonzero(c)
        if nz.size:
            self.add_rows(np.zeros(nz.shape[0], dtype=np.int64), nz, c[nz], np.array([-INF]), np.array([hi]))

    def with_fixed(self, cols: IntArray, values: FloatArray) -> MilpModel:
        """A copy with columns ``cols`` also bound to ``values`` (a value outside a column's bounds leaves it
        with ``lb > ub``: no point). The row blocks are shared: they are never changed in place, and rows
        added to the copy go to its own lists."""
        m = copy.copy(self)
        lb, ub, cost, integer = (a.copy() for a in self._columns())
        cols = np.asarray(cols, dtype=np.int64)
        v = np.asarray(values, dtype=np.float64)
        lb[cols], ub[cols] = np.maximum(lb[cols], v), np.minimum(ub[cols], v)
        m._frozen = (lb, ub, cost, integer)
        m._lb, m._ub, m._cost, m._int = [lb], [ub], [cost], [integer]
        m._names = list(self._names)
        m._rr, m._rc, m._rv, m._rlo, m._rhi = (list(self._rr), list(self._rc), list(self._rv), list(self._rlo),
                                               list(self._rhi))
        return m

    def col_group(self, j: int) -> str:
        for a, b, name in self._names:
            if a <= j < b:
                return name
        return ""

    # -- rows ----------------------------------------------------------------------------

    def add_rows(self, rows: IntArray, cols: IntArray, vals: FloatArray, lo: FloatArray, hi: FloatArray) -> IntArray:
        """Append ``len(lo)`` rows given as triplets; ``rows`` index the new rows from 0."""
        m = int(np.asarray(lo).shape[0])
        if m == 0:
            return np.zeros(0, dtype=np.int64)
        start = self.n_rows
        self._rr.append(np.asarray(rows, dtype=np.int64) + start)
        self._rc.append(np.asarray(cols, dtype=np.int64))
        self._rv.append(np.asarray(vals, dtype=np.float64))
        self._rlo.append(np.asarray(lo, dtype=np.float64).copy())
        self._rhi.append(np.asarray(hi, dtype=np.float64).copy())
        self.n_rows += m
        return np.arange(start, start + m, dtype=np.int64)

    def add_pair_rows(self, c1: IntArray, v1: FloatArray | float, c2: IntArray, v2: FloatArray | float,
                      lo: FloatArray | float, hi: FloatArray | float) -> IntArray:
        """Rows ``lo <= v1 * x[c1] + v2 * x[c2] <= hi``, vectorised."""
        c1 = np.asarray(c1, dtype=np.int64)
        m = c1.shape[0]
        r = np.arange(m, dtype=np.int64)
        return self.add_rows(np.concatenate([r, r]), np.concatenate([c1, np.asarray(c2, dtype=np.int64)]),
                             np.concatenate([np.broadcast_to(v1, (m,)), np.broadcast_to(v2, (m,))]),
                             np.broadcast_to(np.asarray(lo, dtype=np.float64), (m,)),
                             np.broadcast_to(np.asarray(hi, dtype=np.float64), (m,)))

    def add_expr_row(self, expr: LinExpr, lo: float = -INF, hi: float = INF) -> int:
        """``lo <= expr <= hi`` (the constant moves to the bounds); constant rows are checked, not added."""
        cols = np.asarray(expr.cols, dtype=np.int64)
        vals = np.asarray(expr.coefs, dtype=np.float64)
        keep = vals != 0.0
        cols, vals = cols[keep], vals[keep]
        if cols.size == 0:
            if expr.const < lo - 1e-9 or expr.const > hi + 1e-9:
                self.infeasible_constant_rows += 1
            return -1
        return int(self.add_rows(np.zeros(cols.shape[0], dtype=np.int64), cols, vals,
                                 np.array([lo - expr.const]), np.array([hi - expr.const]))[0])

    def csr(self) -> tuple[FloatArray, FloatArray, npt.NDArray[np.int32], npt.NDArray[np.int32], FloatArray]:
        """Row bounds and CSR arrays (duplicates summed, explicit zeros dropped)."""
        if not self.n_rows:
            return np.zeros(0), np.zeros(0), np.zeros(1, dtype=np.int32), np.zeros(0, dtype=np.int32), np.zeros(0)
        rr = np.concatenate(self._rr)
        rc = np.concatenate(self._rc)
        rv = np.concatenate(self._rv)
        key = rr * max(self.n_cols, 1) + rc
        order = np.argsort(key, kind="stable")
        key, rr, rc, rv = key[order], rr[order], rc[order], rv[order]
        first = np.ones(key.shape[0], dtype=bool)
        first[1:] = key[1:] != key[:-1]
        grp = np.cumsum(first) - 1
        vals = np.zeros(int(first.sum()))
        np.add.at(vals, grp, rv)
        rr, rc = rr[first], rc[first]
        nz = vals != 0.0
        rr, rc, vals = rr[nz], rc[nz], vals[nz]
        starts = np.zeros(self.n_rows + 1, dtype=np.int64)
        np.add.at(starts, rr + 1, 1)
        starts = np.cumsum(starts)
        return (np.concatenate(self._rlo), np.concatenate(self._rhi), starts.astype(np.int32),
                rc.astype(np.int32), vals)

    @property
    def nnz(self) -> int:
        return int(sum(a.shape[0] for a in self._rv))

    def row_activity(self, v: FloatArray) -> tuple[FloatArray, FloatArray, FloatArray]:
        """``(lo, A v, hi)`` for checking a candidate assignment."""
        lo, hi, starts, idx, vals = self.csr()
        row_of = np.repeat(np.arange(self.n_rows), np.diff(starts))
        act = np.bincount(row_of, weights=vals * v[idx], minlength=self.n_rows).astype(np.float64, copy=False)
        return lo, act, hi

    def is_feasible(self, v: FloatArray, tol: float = 1e-7) -> bool:
        lb, ub, _, integer = self._columns()
        if np.any(v < lb - tol) or np.any(v > ub + tol):
            return False
        if np.any(np.abs(v[integer] - np.round(v[integer])) > tol):
            return False
        lo, act, hi = self.row_activity(v)
        return bool(np.all(act >= lo - tol * (1 + np.abs(lo))) and np.all(act <= hi + tol * (1 + np.abs(hi))))
