"""Feature domains: the values a person could give each feature, shared by every explainer.

A model reads floats, but an explanation is for people: an age is a whole
number, a flag is 0 or 1, a sum of money changes by at least a cent or a
dollar, a one-hot group has exactly one column set. A :class:`FeatureDomain`
says which values a feature can take (its kind, bounds and resolution) and
:class:`Domains` holds one per feature plus the one-hot groups. It is built
once per explanation request by :func:`infer_domains` from, in order of
precedence, the constraint file, the model's schema and the reference
(training) rows, and then read by the counterfactual MILP (its grids), the
sensitive tests, rule sampling, the printers and the reports.

Kinds: ``continuous`` (any value of the model's input type, or multiples of
``step``), ``integer`` (whole numbers), ``binary`` (0 or 1), ``categorical``
(one of ``codes``, labelled by ``labels`` when known); a binary member of a
one-hot group names its ``group``.
"""

from __future__ import annotations

import enum
import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Sequence

import numpy as np
import numpy.typing as npt

from .constraints import Constraints, OneHotGroup
from .schema import FeatureKind, Schema

if TYPE_CHECKING:
    from .forest import Forest

FloatArray = npt.NDArray[np.float64]


class DomainKind(str, enum.Enum):
    CONTINUOUS = "continuous"
    INTEGER = "integer"
    BINARY = "binary"
    CATEGORICAL = "categorical"


@dataclass(frozen=True)
class FeatureDomain:
    """The values one feature may take (see the module docstring)."""

    name: str
    kind: DomainKind = DomainKind.CONTINUOUS
    lower: float = -math.inf
    upper: float = math.inf
    step: float = 0.0
    """Resolution: every change is a whole number of steps (0: the input type's own grid)."""
    codes: tuple[float, ...] | None = None
    """Categorical: the codes a value may take."""
    labels: tuple[Any, ...] | None = None
    """Category (or ordinal level) labels: the label of code ``i`` is ``labels[i]``."""
    group: str | None = None
    """The one-hot group this binary column belongs to."""
    source: str = "default"
    """Where the kind came from: ``constraints``, ``schema``, ``data`` or ``default``."""

    @property
    def resolution(self) -> float:
        """The smallest change a person can make (0: any change the input type can hold)."""
        if self.kind in (DomainKind.INTEGER, DomainKind.BINARY):
            return max(1.0, self.step)
        return self.step

    @property
    def discrete(self) -> bool:
        return self.kind != DomainKind.CONTINUOUS or self.step > 0

    def origin(self, x0: float) -> float:
        """The grid's anchor for a case with value ``x0``: 0 when ``x0`` is on the grid, else ``x0``'s offset
        (a case's own value always stays available, and every change is whole steps)."""
        s = self.resolution
        if s <= 0 or not math.isfinite(x0):
            return 0.0
        r = x0 - s * math.floor(x0 / s)
        return 0.0 if min(r, s - r) <= 1e-9 * max(s, abs(x0)) else r

    def contains(self, v: float, x0: float | None = None) -> bool:
        """Is ``v`` a value of the domain (``x0``: the case's value, always allowed)?"""
        if x0 is not None and (v == x0 or (math.isnan(v) and math.isnan(x0))):
            return True
        if not math.isfinite(v):
            return False
        if self.kind == DomainKind.CATEGORICAL:
            return self.codes is None or float(v) in set(self.codes)
        if self.kind == DomainKind.BINARY:
            return v in (0.0, 1.0)
        if v < self.lower or v > self.upper:
            return False
        s = self.resolution
        if s > 0:
            o = self.origin(x0) if x0 is not None else 0.0
            k = (v - o) / s
            return abs(k - round(k)) <= 1e-9 * max(1.0, abs(k))
        return True

    def problem(self, x0: float, v: float) -> str:
        """Why ``v`` is no value a person could move ``x0`` to (empty when it is fine)."""
        if v == x0 or (math.isnan(v) and math.isnan(x0)):
            return ""
        if not self.contains(v, x0):
            what = {DomainKind.INTEGER: "not a whole number", DomainKind.BINARY: "not 0 or 1",
                    DomainKind.CATEGORICAL: "not one of its categories"}.get(self.kind, "")
            if not what:
                what = (f"outside [{self.lower:g}, {self.upper:g}]" if not self.lower <= v <= self.upper
                        else f"not a whole number of steps of {self.step:g}")
            return f"{self.name} = {v!r} is {what}"
        s = self.resolution
        if s > 0 and math.isfinite(x0) and abs(v - x0) < s * (1 - 1e-9):
            return f"{self.name} changes by {abs(v - x0)!r}, below its resolution {s:g}"
        return ""

    def fine(self, x0: float, values: FloatArray) -> npt.NDArray[np.bool_]:
        """``not problem(x0, v)`` for every ``v`` of ``values`` at once (rule sampling checks whole pools)."""
        v = np.asarray(values, dtype=np.float64)
        same = (v == x0) | (np.isnan(v) & math.isnan(x0))
        with np.errstate(invalid="ignore"):
            if self.kind == DomainKind.CATEGORICAL:
                ok = np.isfinite(v) & (np.isin(v, np.array(self.codes, dtype=np.float64))
                                       if self.codes is not None else True)
            elif self.kind == DomainKind.BINARY:
                ok = (v == 0.0) | (v == 1.0)
            else:
                ok = np.isfinite(v) & (v >= self.lower) & (v <= self.upper)
                s = self.resolution
                if s > 0:
                    k = (v - self.origin(x0)) / s
                    ok &= np.abs(k - np.round(k)) <= 1e-9 * np.maximum(1.0, np.abs(k))
            s = self.resolution
            if s > 0 and math.isfinite(x0):
                ok &= ~(np.abs(v - x0) < s * (1 - 1e-9))
        return same | ok  # type: ignore[no-any-return]

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {"name": self.name, "kind": self.kind.value, "source": self.source}
        if math.isfinite(self.lower):
            d["lower"] = self.lower
        if math.isfinite(self.upper):
            d["upper"] = self.upper
        if self.step:
            d["step"] = self.step
        if self.codes is not None:
            d["codes"] = list(self.codes)
        if self.labels is not None:
            d["labels"] = [c if isinstance(c, (str, int, float, bool)) else str(c) for c in self.labels]
        if self.group is not None:
            d["group"] = self.group
        return d


@dataclass(frozen=True)
class Domains:
    """One :class:`FeatureDomain` per model feature, in column order, and the one-hot groups."""

    features: tuple[FeatureDomain, ...]
    groups: tuple[OneHotGroup, ...] = ()

    def __len__(self) -> int:
        return len(self.features)

    def __getitem__(self, key: int | str) -> FeatureDomain:
        if isinstance(key, str):
            for d in self.features:
                if d.name == key:
                    return d
            raise KeyError(key)
        return self.features[key]

    @property
    def names(self) -> list[str]:
        return [d.name for d in self.features]

    def problems(self, x0: Any, x: Any) -> list[str]:
        """Every way ``x`` is no point a person could reach from ``x0``: values outside their domain,
        changes below resolution, broken one-hot groups (empty when ``x`` is fine)."""
        a = np.asarray(x0, dtype=np.float64).reshape(-1)
        b = np.asarray(x, dtype=np.float64).reshape(-1)
        out = [p for d, u, v in zip(self.features, a, b) if (p := d.problem(float(u), float(v)))]
        names = self.names
        for g in self.groups:
            idx = [names.index(m) for m in g.members if m in names]
            vals = b[idx]
            changed = not np.array_equal(vals, a[idx], equal_nan=True)
            if changed and not (np.all(np.isin(vals, (0.0, 1.0))) and vals.sum() == 1.0):
                out.append(f"one-hot group {g.name} does not have exactly one of "
                           f"{{{', '.join(g.members)}}} set")
        return out

    def to_dict(self) -> dict[str, Any]:
        return {"features": [d.to_dict() for d in self.features],
                "onehot": [{"name": g.name, "members": list(g.members)} for g in self.groups]}


def _integral(col: FloatArray) -> bool:
    v = col[np.isfinite(col)]
    return bool(v.size) and bool(np.all(v == np.round(v))) and bool(np.all(np.abs(v) < 2.0 ** 53))


def infer_domains(schema: Schema, constraints: Constraints | None = None, reference: Any = None,
                  categorical: Sequence[bool] | npt.NDArray[np.bool_] | None = None) -> Domains:
    """The domains of ``schema``'s features: the constraint file first, then the schema, then the data.

    ``reference`` (training rows, prepared to the model's columns) makes a column whose values are
    all whole numbers ``integer``, a column holding only 0 and 1 ``binary``, and its observed range
    the default bounds (absolute bounds in the constraints replace them, so a file can widen them).
    ``categorical`` marks features the model splits by category sets (beyond the schema's kinds).
    """
    R = None if reference is None else np.asarray(reference, dtype=np.float64)
    if R is not None and (R.ndim != 2 or R.shape[1] != schema.n_features):
        R = None
    cons = constraints or Constraints()
    in_group = {m: g.name for g in cons.onehot for m in g.members}
    out = []
    for i, f in enumerate(schema.features):
        col = R[:, i] if R is not None else None
        finite = col[np.isfinite(col)] if col is not None else np.zeros(0)
        lo = float(finite.min()) if finite.size else -math.inf
        hi = float(finite.max()) if finite.size else math.inf
        kind, source = DomainKind.CONTINUOUS, "default"
        is_cat = f.kind == FeatureKind.CATEGORICAL or (categorical is not None and bool(categorical[i]))
        if is_cat:
            kind, source = DomainKind.CATEGORICAL, "schema"
        elif f.kind == FeatureKind.BINARY:
            kind, source = DomainKind.BINARY, "schema"
        elif f.kind == FeatureKind.ORDINAL:
            kind, source = DomainKind.INTEGER, "schema"
        elif finite.size:
            if np.all(np.isin(finite, (0.0, 1.0))) and np.unique(finite).size == 2:
                kind, source = DomainKind.BINARY, "data"
            elif _integral(finite):
                kind, source = DomainKind.INTEGER, "data"
        rule = cons.rule(f.name)
        step = 0.0
        if f.name in in_group:
            kind, source = DomainKind.BINARY, "constraints"
        if rule.domain is not None:
            kind, source = DomainKind(rule.domain), "constraints"
        if rule.step is not None:
            step, source = float(rule.step), "constraints"
        if rule.lower is not None and not rule.lower.relative:
            lo = rule.lower.value
        if rule.upper is not None and not rule.upper.relative:
            hi = rule.upper.value
        codes = None
        if kind == DomainKind.CATEGORICAL:
            if f.categories is not None:
                codes = tuple(float(c) for c in range(len(f.categories)))
            elif finite.size:
                codes = tuple(float(c) for c in np.unique(np.trunc(finite[finite >= 0])))
            lo, hi = -math.inf, math.inf
        if kind == DomainKind.BINARY:
            lo, hi = max(lo, 0.0) if math.isfinite(lo) else 0.0, min(hi, 1.0) if math.isfinite(hi) else 1.0
        out.append(FeatureDomain(f.name, kind, lo, hi, step, codes, f.categories, in_group.get(f.name), source))
    return Domains(tuple(out), tuple(cons.onehot))


def case_bounds(domain: FeatureDomain, x0: float) -> tuple[float, float]:
    """The domain's bounds widened to hold the case's own value (a case is never out of its own domain)."""
    lo, hi = domain.lower, domain.upper
    if math.isfinite(x0):
        lo, hi = min(lo, x0), max(hi, x0)
    return lo, hi


def domains_for(forest: "Forest", constraints: Constraints | None = None, reference: Any = None) -> Domains:
    """The domains every explainer of one request shares, for ``forest`` (``reference``: training rows in
    any form ``Forest.prepare_input`` accepts; categorical splits make a feature categorical)."""
    cat = np.zeros(forest.n_features, dtype=bool)
    cat[np.unique(forest.feature[forest.is_categorical])] = True
    R = forest.prepare_input(reference) if reference is not None else None
    return infer_domains(forest.schema, constraints, R, categorical=cat)


__all__ = ["DomainKind", "Domains", "FeatureDomain", "case_bounds", "domains_for", "infer_domains"]
