"""Feature domains: which values a counterfactual may give each feature, and the MILP variables that hold them.

A model only sees a feature through its splits, so the real line is cut into
*cells*. Values are *representable* on a grid: float32 or float64 (the model's
input dtype), integers (ordinal features), or a finite set (binary features,
ordinal features with named levels, allowed values). A numerical split
``x <= t`` becomes a *cut* at ``u = down(t)``, the largest representable value
``<= t``; its right side starts at ``up(u)``, the smallest representable value
above it. ``u`` and ``up(u)`` are both *levels*, so the interval between them is
a *gap* holding no representable value, and the order-simplex variable of that
interval is the indicator ``[x > t]`` (OCEAN, Parmentier & Vidal 2021, with the epsilon of
the paper replaced by the grid step: the witness lands strictly inside its cell
in the model's own dtype).

``mu[j]`` in [0, 1] is the fraction of level interval ``[L_j, L_j+1]`` that lies
below ``x``; ``x = L_0 + sum_j (L_j+1 - L_j) mu[j]`` and ``mu`` is non-increasing.
Categorical features use one-hot ``nu`` over their allowed codes.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Union

import numpy as np
import numpy.typing as npt

from lumber.ir.domains import DomainKind, FeatureDomain

from .model import LinExpr, MilpModel

FloatArray = npt.NDArray[np.float64]

@dataclass(frozen=True)
class Grid:
    """The representable values of a feature: ``float32``, ``float64``, ``int``, ``finite`` (``values``)
    or ``step`` (``origin + k * step`` for whole ``k``, rounded to float32 when ``single``)."""

    kind: str
    values: FloatArray | None = None
    step: float = 0.0
    origin: float = 0.0
    single: bool = False

    def _at(self, k: FloatArray) -> FloatArray:
        with np.errstate(over="ignore", invalid="ignore"):
            v = self.origin + k * self.step
        return v.astype(np.float32).astype(np.float64) if self.single else v

    def _k_down(self, v: FloatArray) -> FloatArray:
        """Largest whole ``k`` with ``_at(k) <= v`` (step grids)."""
        with np.errstate(invalid="ignore", over="ignore"):
            k = np.floor((v - self.origin) / self.step)
            k = np.where(self._at(k) > v, k - 1, k)
            k = np.where(self._at(k + 1) <= v, k + 1, k)
        return k

    def down(self, v: FloatArray) -> FloatArray:
        """Largest representable value ``<= v`` (``-inf`` when there is none)."""
        v = np.asarray(v, dtype=np.float64)
        if self.kind == "step":
            return np.where(np.isfinite(v), self._at(self._k_down(v)), v)
        if self.kind == "float64":
            return v.copy()
        if self.kind == "float32":
            with np.errstate(over="ignore"):
                f = v.astype(np.float32)
            f = np.where(f.astype(np.float64) > v, np.nextafter(f, np.float32(-np.inf)), f)
            return f.astype(np.float64)
        if self.kind == "int":
            return np.floor(v)
        g = self._values
        i = np.searchsorted(g, v, side="right") - 1
        return np.where(i >= 0, g[np.maximum(i, 0)], -np.inf)

    def up(self, v: FloatArray) -> FloatArray:
        """Smallest representable value ``> v`` (``+inf`` when there is none)."""
        v = np.asarray(v, dtype=np.float64)
        if self.kind == "float64":
            return np.nextafter(v, np.inf)
        if self.kind == "float32":
            d = self.down(v).astype(np.float32)
            return np.nextafter(d, np.float32(np.inf)).astype(np.float64)
        if self.kind == "int":
            return np.floor(v) + 1.0
        if self.kind == "step":
            return np.where(np.isfinite(v), self._at(self._k_down(v) + 1), np.where(v < 0, -np.inf, np.inf))
        g = self._values
        i = np.searchsorted(g, v, side="right")
        return np.where(i < g.shape[0], g[np.minimum(i, g.shape[0] - 1)], np.inf)

    def ceil(self, v: FloatArray) -> FloatArray:
        """Smallest representable value ``>= v``."""
        v = np.asarray(v, dtype=np.float64)
        d = self.down(v)
        return np.where(d == v, d, self.up(v))

    def below(self, v: FloatArray) -> FloatArray:
        """Largest representable value ``< v``."""
        v = np.asarray(v, dtype=np.float64)
        d = self.down(v)
        if self.kind == "float64":
            return np.where(d == v, np.nextafter(v, -np.inf), d)
        if self.kind == "float32":
            return np.where(d == v, np.nextafter(d.astype(np.float32), np.float32(-np.inf)).astype(np.float64), d)
        if self.kind == "int":
            return np.ceil(v) - 1.0
        if self.kind == "step":
            k = self._k_down(v)
            return np.where(np.isfinite(v), self._at(np.where(self._at(k) == v, k - 1, k)), v)
        g = self._values
        i = np.searchsorted(g, v, side="left") - 1
        return np.where(i >= 0, g[np.maximum(i, 0)], -np.inf)

    def representable(self, v: float) -> bool:
        return bool(np.isfinite(v) and self.down(np.array([v]))[0] == v)

    def nearest(self, v: float, lo: float, hi: float) -> float:
        """Representable value nearest ``v`` within ``[lo, hi]`` (both representable)."""
        a, b = float(self.down(np.array([v]))[0]), float(self.ceil(np.array([v]))[0])
        cands = [c for c in (a, b) if lo <= c <= hi] or [lo, hi]
        return min(cands, key=lambda c: (abs(c - v), c))

    @property
    def _values(self) -> FloatArray:
        assert self.values is not None
        return self.values

    @property
    def lowest(self) -> float:
        return float(self._values[0]) if self.kind == "finite" and self._values.size else -np.inf

    @property
    def highest(self) -> float:
        return float(self._values[-1]) if self.kind == "finite" and self._values.size else np.inf


@dataclass
class FixedDomain:
    """A feature the counterfactual cannot (or need not) change: it keeps ``value``."""

    index: int
    value: float

    def x_expr(self) -> LinExpr:
        return LinExpr.constant(self.value)


@dataclass
class NumericDomain:
    """A numerical, ordinal or binary feature: values on ``grid`` within ``[lo, hi]``."""

    index: int
    grid: Grid
    x0: float
    lo: float
    hi: float
    cuts: set[float] = field(default_factory=set)
    """Representable values u for which the indicator ``[x > u]`` is needed."""
    extra_levels: set[float] = field(default_factory=set)
    binary_cuts: set[float] = field(default_factory=set)
    integer_x: bool = False
    """Add an integer column equal to x (integer grid features in linear relations)."""
    in_relation: bool = False
    """A linear relation reads x itself, so an interior point is kept (rounded to the grid)."""
    levels: FloatArray = field(default_factory=lambda: np.zeros(0))
    mu: npt.NDArray[np.int64] = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    x_int_col: int = -1
    compact: bool = False
    """One level per cut (see :meth:`finalize`)."""

    def add_cut(self, u: float) -> None:
        self.cuts.add(float(u))

    def finalize(self, model: MilpModel, compact: bool = True) -> None:
        """Choose the levels and create the mu columns (``compact=False``: both sides of every cut, the
        paper's epsilon form).

        Every cut ``u`` splits the feature into ``x <= u`` and ``x >= up(u)``. Normally one
        level per cut is enough: the end of each cell nearer ``x0`` (``up(u)`` above ``x0``,
        ``u`` below), because every split, cost and condition only reads which cell ``x``
        is in and the cost grows away from ``x0`` (*compact* levels, see :meth:`snap`).
        A feature read by a linear relation keeps both sides of every cut, since the
        relation may need a point deeper inside a cell.
        """
        g = self.grid
        cuts = np.array(sorted(self.cuts), dtype=np.float64)
        x0_ok = g.representable(self.x0)
        self.compact = compact and x0_ok and not (self.in_relation or self.integer_x or self.extra_levels)
        if self.compact:
            pts = [np.where(cuts >= self.x0, g.up(cuts), cuts)]
        else:
            pts = [cuts, g.up(cuts), np.array(sorted(self.extra_levels), dtype=np.float64)]
        if x0_ok:
            pts.append(np.array([self.x0]))
        lv = np.unique(np.concatenate(pts)) if pts else np.zeros(0)
        lv = lv[np.isfinite(lv)]
        if np.isfinite(self.lo):
            lv = np.append(lv, self.lo)
        if np.isfinite(self.hi):
            lv = np.append(lv, self.hi)
        lv = np.unique(lv[(lv >= self.lo) & (lv <= self.hi)])
        if lv.size == 0:  # no level inside the bounds: the nearest bound (the caller fixes such features)
            lv = np.array([self.lo if np.isfinite(self.lo) else self.hi])
        self.levels = lv
        k = lv.shape[0] - 1
        self.mu = model.add_cols(k, 0.0, 1.0, name=f"mu[{self.index}]")
        if k > 1:
            model.add_pair_rows(self.mu[:-1], 1.0, self.mu[1:], -1.0, 0.0, np.inf)
        bins = [self.mu_index(u) for u in self.binary_cuts]
        model.set_integer(np.array([self.mu[j] for j in bins if j >= 0], dtype=np.int64))
        if self.integer_x:
            self.x_int_col = int(model.add_cols(1, lv[0], lv[-1], integer=True, name=f"xint[{self.index}]")[0])
            model.add_expr_row(self.x_expr() - LinExpr.var(self.x_int_col), 0.0, 0.0)

    def snap(self, x: float) -> float:
        """The level of ``x``'s cell nearest ``x0`` (same routing, no higher cost); ``x`` itself
        when levels are not compact."""
        if not self.compact:
            return x
        lv = self.levels
        if x >= self.x0:
            j = int(np.searchsorted(lv, x, side="right")) - 1
            return float(lv[max(j, 0)])
        j = int(np.searchsorted(lv, x, side="left"))
        return float(lv[min(j, lv.shape[0] - 1)])

    def mu_index(self, u: float) -> int:
        """Index of the interval whose mu is ``[x > u]``; -1 when ``[x > u]`` is constant."""
        cols, _ = self._interval(np.array([u], dtype=np.float64))
        return int(cols[0])

    def _interval(self, u: FloatArray) -> tuple[npt.NDArray[np.int64], FloatArray]:
        """Per cut: the interval ``[L_j, L_j+1)`` holding it (-1 outside the levels) and the constant
        value of ``[x > u]`` there. The cut must be one of the registered ones: ``L_j == u`` or
        ``L_j+1 == up(u)``, so that the interval's mu is the indicator itself."""
        lv = self.levels
        j = np.searchsorted(lv, u, side="right") - 1
        inner = (u >= lv[0]) & (u < lv[-1])
        jj = np.clip(j, 0, max(lv.shape[0] - 2, 0))
        if inner.any():
            nxt = lv[np.minimum(jj + 1, lv.shape[0] - 1)]
            ok = (lv[jj] == u) | (nxt == self.grid.up(u))
            if np.any(inner & ~ok):
                raise ValueError(f"feature {self.index}: cut values missing from the levels")
        idx = np.where(inner, jj, -1)
        const = np.where(u < lv[0], 1.0, 0.0)
        return idx.astype(np.int64), const

    def gt(self, u: float) -> LinExpr:
        """The indicator ``[x > u]`` for a cut ``u``."""
        if u < self.levels[0]:
            return LinExpr.constant(1.0)
        if u >= self.levels[-1]:
            return LinExpr.constant(0.0)
        j = self.mu_index(u)
        if j < 0:  # pragma: no cover - _interval raises first
            raise ValueError(f"feature {self.index}: {u!r} is not a cut level")
        return LinExpr.var(int(self.mu[j]))

    def gt_cols(self, u: FloatArray) -> tuple[npt.NDArray[np.int64], FloatArray]:
        """Vectorised :meth:`gt`: column (or -1) and the constant used where the column is -1."""
        u = np.asarray(u, dtype=np.float64)
        j, const = self._interval(u)
        cols = np.where(j >= 0, self.mu[np.maximum(j, 0)] if self.mu.size else -1, -1)
        return cols.astype(np.int64), const

    def x_expr(self) -> LinExpr:
        lv = self.levels
        d = np.diff(lv)
        return LinExpr(float(lv[0]), [int(c) for c in self.mu], [float(v) for v in d])

    def increase_expr(self) -> LinExpr:
        """``[x > x0]``."""
        return self.gt(float(self.grid.down(np.array([self.x0]))[0]))

    def decrease_expr(self) -> LinExpr:
        """``[x < x0]``."""
        return 1.0 - self.gt(float(self.grid.below(np.array([self.x0]))[0]))

    def change_cuts(self) -> tuple[float, float]:
        return float(self.grid.down(np.array([self.x0]))[0]), float(self.grid.below(np.array([self.x0]))[0])

    def equals_cuts(self, v: float) -> tuple[float, float]:
        """Cuts whose indicators give ``[x == v]`` as ``gt(a) - gt(b)``."""
        return float(self.grid.below(np.array([v]))[0]), float(self.grid.down(np.array([v]))[0])

    def mu_from_x(self, x: float) -> FloatArray:
        lv = self.levels
        d = np.diff(lv)
        with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
            m = np.clip((x - lv[:-1]) / d, 0.0, 1.0)
        return np.where(d > 0, m, 0.0)

    def value_from(self, sol: FloatArray, tol: float = 1e-6) -> float:
        """The representable value a solution's mu describes (an interior point is rounded to the grid)."""
        lv = self.levels
        k = lv.shape[0] - 1
        if k <= 0:
            return float(lv[0])
        if self.x_int_col >= 0:
            v = float(np.round(sol[self.x_int_col]))
            return float(min(max(v, lv[0]), lv[-1]))
        m = sol[self.mu]
        full = m >= 1.0 - tol
        j = int(np.argmin(full)) if not full.all() else k
        if j == k:
            return float(lv[k])
        frac = float(m[j])
        if frac <= tol:
            return float(lv[j])
        a, b = float(lv[j]), float(lv[j + 1])
        if self.grid.up(np.array([a]))[0] >= b or not self.integer_x and not self.in_relation:
            # no split between a and b: every point of the interval routes alike, so take the end nearer x0
            return a if abs(a - self.x0) <= abs(b - self.x0) else b
        return self.grid.nearest(a + (b - a) * frac, a, b)


@dataclass
class CategoricalDomain:
    """A categorical feature: one-hot ``nu`` over the allowed ``codes``."""

    index: int
    codes: npt.NDArray[np.int64]
    x0: float
    x0_code: int
    """Code of the original value (-1 when it is not a valid category)."""
    nu: npt.NDArray[np.int64] = field(default_factory=lambda: np.zeros(0, dtype=np.int64))

    def finalize(self, model: MilpModel, compact: bool = True) -> None:
        n = self.codes.shape[0]
        self.nu = model.add_cols(n, 0.0, 1.0, integer=True, name=f"nu[{self.index}]")
        model.add_rows(np.zeros(n, dtype=np.int64), self.nu, np.ones(n), np.array([1.0]), np.array([1.0]))

    def member_expr(self, values: FloatArray) -> LinExpr:
        """``[code in values]``."""
        sel = np.isin(self.codes, np.asarray(values, dtype=np.float64).astype(np.int64))
        return LinExpr(0.0, [int(c) for c in self.nu[sel]], [1.0] * int(sel.sum()))

    def change_expr(self) -> LinExpr:
        return 1.0 - self.member_expr(np.array([self.x0_code]))

    def x_expr(self) -> LinExpr:
        return LinExpr(0.0, [int(c) for c in self.nu], [float(c) for c in self.codes])

    def value_from(self, sol: FloatArray) -> float:
        code = int(self.codes[int(np.argmax(sol[self.nu]))])
        return self.x0 if code == self.x0_code else float(code)

    def nu_from_x(self, x: float) -> FloatArray:
        return (self.codes == int(np.trunc(x))).astype(np.float64)


Domain = Union[FixedDomain, NumericDomain, CategoricalDomain]


def grid_for(kind: str, input_dtype: str, x0: float, finite: FloatArray | None = None,
             domain: FeatureDomain | None = None) -> Grid:
    """The grid of a numeric-like feature: ``kind`` is ``numerical``, ``ordinal`` or ``binary`` (the
    schema's word), refined by the feature's ``domain`` (integer, binary, a resolution) when given."""
    if finite is not None:
        return Grid("finite", np.unique(np.asarray(finite, dtype=np.float64)))
    if domain is not None and domain.kind == DomainKind.BINARY:
        vals = [0.0, 1.0] + ([x0] if np.isfinite(x0) else [])
        return Grid("finite", np.unique(np.array(vals, dtype=np.float64)))
    if domain is not None and domain.resolution > 0:
        o = domain.origin(x0)
        if domain.resolution == 1.0 and o == 0.0:
            return Grid("int")
        return Grid("step", step=domain.resolution, origin=o, single=input_dtype == "float32")
    if kind == "binary" and x0 in (0.0, 1.0):
        return Grid("finite", np.array([0.0, 1.0]))
    if kind == "ordinal" and float(x0).is_integer():
        return Grid("int")
    return Grid("float32" if input_dtype == "float32" else "float64")
