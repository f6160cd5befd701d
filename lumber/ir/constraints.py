"""The constraint model: what may change in a case, at what cost, toward what target.

The constraint language (``lumber/compiler/dsl``) compiles to these objects, and
every analysis (sensitive tests, MILP counterfactuals, counterfactual rules)
consumes them; Python users may also build them directly. All values are in
the model's feature space (category codes, not labels); ``schema`` resolves
labels when a DSL file is checked.

Linear relations are normalised to ``sum a_i * x_i + sum b_i * x0_i  op  rhs``
where ``x`` is the counterfactual and ``x0`` the original case; a change
``dX`` is ``x - x0``. For one case ``x0`` is known, so every relation is a plain
linear constraint over ``x`` (:meth:`LinearRelation.over_x`).
"""

from __future__ import annotations

import difflib
import enum
from dataclasses import asdict, dataclass, field, replace
from typing import Any, Mapping, Sequence, Union

import numpy as np
import numpy.typing as npt

from .diagnostics import InputDataError, SourceSpan
from .decision import Target, class_index, class_labels
from .schema import Schema


class Direction(enum.IntEnum):
    ANY = 0
    INCREASE = 1
    """The value may only grow (or stay)."""
    DECREASE = 2


class Norm(enum.IntEnum):
    """How per-feature change costs combine: count (l0), sum (l1), Euclidean (l2) or maximum (linf)."""

    L0 = 0
    L1 = 1
    L2 = 2
    LINF = 3

    @classmethod
    def parse(cls, value: "Norm | str") -> "Norm":
        """The norm a user named: a :class:`Norm` or ``l0``/``l1``/``l2``/``linf`` in any case,
        with ``inf`` and hyphens (``l-inf``) accepted; the one parser of every explainer and the DSL."""
        if isinstance(value, Norm):
            return value
        if isinstance(value, str):
            norm = NORM_NAMES.get(value.strip().lower().replace("-", ""))
            if norm is not None:
                return norm
        raise InputDataError(f"unknown norm {value!r}", f"accepted: {', '.join(repr(n) for n in NORM_WORDS)}")

    @property
    def word(self) -> str:
        """The canonical name (``l0``, ``l1``, ``l2``, ``linf``)."""
        return self.name.lower()


class Scale(enum.IntEnum):
    """What divides a change before it is costed."""

    NONE = 0
    STD = 1
    """Divide each change by the feature's standard deviation on reference data."""
    MINMAX = 2
    """Divide each change by the feature's range on reference data."""

    @classmethod
    def parse(cls, value: "Scale | str") -> "Scale":
        """The scaling a user named: a :class:`Scale` or ``none``/``std``/``minmax`` in any case."""
        if isinstance(value, Scale):
            return value
        if isinstance(value, str):
            scale = SCALE_NAMES.get(value.strip().lower())
            if scale is not None:
                return scale
        raise InputDataError(f"unknown scale {value!r}",
                             f"accepted: {', '.join(repr(n) for n in SCALE_NAMES)}, or per-feature spreads")

    @property
    def word(self) -> str:
        return self.name.lower()


NORM_WORDS = ("l0", "l1", "l2", "linf")
"""Canonical norm names, as messages and the DSL list them."""
NORM_NAMES = {"l0": Norm.L0, "l1": Norm.L1, "l2": Norm.L2, "linf": Norm.LINF, "inf": Norm.LINF}
"""Every accepted spelling after lower-casing and dropping hyphens (so ``L-inf`` and ``inf`` are linf)."""
SCALE_NAMES = {"none": Scale.NONE, "std": Scale.STD, "minmax": Scale.MINMAX}


@dataclass(frozen=True)
class Bound:
    """A bound that is absolute (``value``) or relative to the original (``x0 + value``)."""

    value: float
    relative: bool = False

    def resolve(self, x0: float) -> float:
        return x0 + self.value if self.relative else self.value


@dataclass(frozen=True)
class FeatureRule:
    """Everything said about one feature. Unset fields mean "no restriction"."""

    feature: str
    immutable: bool = False
    direction: Direction = Direction.ANY
    lower: Bound | None = None
    upper: Bound | None = None
    allowed: tuple[float, ...] | None = None
    """Allowed category codes (categorical) or levels (ordinal) for the new value."""
    order: tuple[float, ...] | None = None
    """Ordinal features: the levels from lowest to highest (as codes)."""
    cost_up: float | None = None
    """Cost per unit of increase (before scaling); None means the default weight 1."""
    cost_down: float | None = None
    domain: str | None = None
    """The feature's value kind when the file says it: ``continuous``, ``integer`` or ``binary``
    (see :mod:`lumber.ir.domains`); None leaves it to the schema and the data."""
    step: float | None = None
    """Resolution: the smallest change that means something (``CapitalGain: step 1``)."""
    span: SourceSpan | None = field(default=None, compare=False)


@dataclass(frozen=True)
class LinearRelation:
    """``sum(a * x[f] for f, a in x_terms) + sum(b * x0[f] for f, b in x0_terms)  op  rhs``."""

    x_terms: tuple[tuple[str, float], ...]
    x0_terms: tuple[tuple[str, float], ...] = ()
    op: str = "<="
    """One of ``<=``, ``>=``, ``==``."""
    rhs: float = 0.0
    span: SourceSpan | None = field(default=None, compare=False)

    def over_x(self, names: Sequence[str], x0: npt.NDArray[np.float64]) -> tuple[npt.NDArray[np.float64], str, float]:
        """Coefficients over the feature vector, the operator and the constant for case ``x0``."""
        idx = {n: i for i, n in enumerate(names)}
        a = np.zeros(len(names))
        for f, c in self.x_terms:
            a[idx[f]] += c
        rhs = self.rhs - sum(c * float(x0[idx[f]]) for f, c in self.x0_terms)
        return a, self.op, rhs

    def holds(self, names: Sequence[str], x0: npt.NDArray[np.float64], x: npt.NDArray[np.float64], tol: float = 1e-9) -> bool:
        a, op, rhs = self.over_x(names, x0)
        lhs = float(a @ np.asarray(x, dtype=np.float64))
        if op == "<=":
            return lhs <= rhs + tol
        if op == ">=":
            return lhs >= rhs - tol
        return abs(lhs - rhs) <= tol


class Event(enum.IntEnum):
    INCREASES = 0
    DECREASES = 1
    CHANGES = 2
    UNCHANGED = 3


@dataclass(frozen=True)
class FeatureEvent:
    """Condition "feature increases / decreases / changes / is unchanged"."""

    feature: str
    event: Event
    span: SourceSpan | None = field(default=None, compare=False)


@dataclass(frozen=True)
class Membership:
    """Condition "the new value of feature is one of ``values``" (codes)."""

    feature: str
    values: tuple[float, ...]
    original: bool = False
    """Test the original value instead of the new one."""
    span: SourceSpan | None = field(default=None, compare=False)


Condition = Union[FeatureEvent, Membership, LinearRelation]


@dataclass(frozen=True)
class Implication:
    """``if condition then every consequence holds``."""

    condition: Condition
    then: tuple[Condition, ...]
    span: SourceSpan | None = field(default=None, compare=False)


@dataclass(frozen=True)
class OneHotGroup:
    """Columns that one-hot encode one variable: each is 0 or 1 and exactly one is 1."""

    name: str
    members: tuple[str, ...]
    span: SourceSpan | None = field(default=None, compare=False)


@dataclass(frozen=True)
class Plausibility:
    """A plausibility requirement, e.g. ``isolation-forest(contamination=0.1)``."""

    method: str
    params: tuple[tuple[str, Any], ...] = ()
    span: SourceSpan | None = field(default=None, compare=False)

    def param(self, name: str, default: Any = None) -> Any:
        return dict(self.params).get(name, default)


@dataclass(frozen=True)
class Constraints:
    """The compiled constraint model (see module docstring).

    ``rules`` holds at most one :class:`FeatureRule` per feature; features not
    mentioned are free with unit cost. ``norm``/``scale``/``target`` left as
    ``None`` mean "use the caller's keyword default".
    """

    rules: tuple[FeatureRule, ...] = ()
    norm: Norm | None = None
    scale: Scale | None = None
    max_changes: int | None = None
    relations: tuple[LinearRelation, ...] = ()
    implications: tuple[Implication, ...] = ()
    plausibility: Plausibility | None = None
    target: Target | None = None
    onehot: tuple[OneHotGroup, ...] = ()
    class_names: tuple[tuple[Any, str], ...] = ()
    """``class 0 means paid, 1 means default``: ``(class label, name)`` pairs; decisions print by the names
    (display only, :meth:`named`)."""
    words: tuple[tuple[str, float, str], ...] = ()
    """``1 means "payment delayed 1+ month"``: ``(feature, value, words)``; the value prints as the words
    (display only, :meth:`named`)."""
    source: str | None = field(default=None, compare=False)

    def named(self, schema: Schema) -> Schema:
        """``schema`` with this file's class names and value words (unchanged without any). A class the file
        does not name keeps ``class LABEL``."""
        if not self.class_names and not self.words:
            return schema
        names = None
        if self.class_names:
            labels = class_labels(schema)
            given = {class_index(labels, lab): str(name) for lab, name in self.class_names}
            names = [given.get(i, schema.class_text(i)) for i in range(len(labels))]
        words: dict[str, list[tuple[float, str]]] = {}
        for feat, v, text in self.words:
            words.setdefault(feat, []).append((float(v), str(text)))
        return schema.named(names, words)

    def rule(self, feature: str) -> FeatureRule:
        for r in self.rules:
            if r.feature == feature:
                return r
        return FeatureRule(feature)

    def with_rule(self, rule: FeatureRule) -> "Constraints":
        others = tuple(r for r in self.rules if r.feature != rule.feature)
        return replace(self, rules=others + (rule,))

    def immutable_features(self) -> list[str]:
        return [r.feature for r in self.rules if r.immutable]

    def check_features(self, names: Sequence[str]) -> "Constraints":
        """Self, when every rule names one of ``names``; else an InputDataError with the nearest name."""
        unknown = [r.feature for r in self.rules if r.feature not in names]
        if unknown:
            near = difflib.get_close_matches(unknown[0], names, n=1)
            raise InputDataError(f"constraints name unknown features: {', '.join(unknown)}",
                                 f"did you mean '{near[0]}'?" if near else f"features: {', '.join(names[:12])}")
        return self

    def settings(self, norm: Any, scale: Any, target: Any) -> tuple[Any, Any, Any]:
        """``(norm, scale, target)``: this file's own where it states them, else the caller's (the one rule
        every explainer follows: the constraints win over keywords and options)."""
        return (self.norm if self.norm is not None else norm, self.scale if self.scale is not None else scale,
                self.target if self.target is not None else target)

    def bounds(self, names: Sequence[str], x0: npt.NDArray[np.float64]
               ) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.float64]]:
        """Per-feature interval for the new values of case ``x0`` (:meth:`MoveLimits.interval`)."""
        x = np.asarray(x0, dtype=np.float64)
        return MoveLimits.of(self, names).interval(x, x)

    def costs(self, names: Sequence[str], down: npt.ArrayLike | None = None, up: npt.ArrayLike | None = None
              ) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.float64]]:
        """Per-feature (cost_down, cost_up) weights: a rule's cost where it gives one, else ``down``/``up``
        (default 1). The given arrays are copied, never written."""
        d = np.ones(len(names)) if down is None else np.array(down, dtype=np.float64)
        u = np.ones(len(names)) if up is None else np.array(up, dtype=np.float64)
        for i, n in enumerate(names):
            r = self.rule(n)
            if r.cost_down is not None:
                d[i] = r.cost_down
            if r.cost_up is not None:
                u[i] = r.cost_up
        return d, u

    def _target_dict(self) -> dict[str, Any] | None:
        """The target as stated: label and interval, and a threshold's cutoff and side when it has one."""
        t = self.target
        if t is None:
            return None
        d: dict[str, Any] = {"interval": list(t.interval) if t.interval is not None else None,
                             "label": t.label.item() if isinstance(t.label, np.generic) else t.label}
        if t.cutoff is not None:
            d["cutoff"] = t.cutoff.to_dict()
            d["below"] = t.below
        return d

    def to_dict(self) -> dict[str, Any]:
        def clean(v: Any) -> Any:
            if isinstance(v, enum.Enum):
                return v.name.lower()
            if isinstance(v, dict):
                return {k: clean(x) for k, x in v.items() if k != "span"}
            if isinstance(v, (list, tuple)):
                return [clean(x) for x in v]
            if isinstance(v, np.generic):
                return v.item()
            return v

        d = {f: clean(getattr(self, f)) for f in ("norm", "scale", "max_changes", "target", "plausibility")}
        d["target"] = self._target_dict()
        d["plausibility"] = clean(asdict(self.plausibility)) if self.plausibility is not None else None
        d["rules"] = [clean(asdict(r)) for r in self.rules]
        d["relations"] = [clean(asdict(r)) for r in self.relations]
        d["implications"] = [clean(asdict(i)) for i in self.implications]
        d["onehot"] = [clean(asdict(g)) for g in self.onehot]
        if self.class_names:
            d["class_names"] = [[clean(lab), name] for lab, name in self.class_names]
        if self.words:
            d["words"] = [list(w) for w in self.words]
        return d

    @staticmethod
    def coerce(value: "Constraints | Mapping[str, Any] | None") -> "Constraints":
        """The one coercion of a constraints argument: None (no constraints), a Constraints, or a
        mapping for :meth:`from_mapping`; anything else is an :class:`InputDataError` naming the
        accepted forms."""
        if value is None:
            return Constraints()
        if isinstance(value, Constraints):
            return value
        if isinstance(value, Mapping):
            try:
                return Constraints.from_mapping(value)
            except (KeyError, TypeError, ValueError) as exc:
                raise InputDataError(f"constraints mapping is malformed: {exc}",
                                     "keys: immutable, increase, decrease, bounds, cost, norm, scale, max_changes"
                                     ) from None
        raise InputDataError(f"constraints must be a lumber.Constraints, a mapping or a file, "
                             f"not {type(value).__name__}",
                             "build one with lumber.parse_constraints(path) or Constraints.from_mapping({...})")

    @staticmethod
    def from_mapping(m: Mapping[str, Any]) -> "Constraints":
        """Quick construction from plain Python: ``{"immutable": [...], "increase": [...], ...}``."""
        rules: dict[str, FeatureRule] = {}

        def upd(name: str, **kw: Any) -> None:
            rules[name] = replace(rules.get(name, FeatureRule(name)), **kw)

        for n in m.get("immutable", ()):
            upd(n, immutable=True)
        for n in m.get("increase", ()):
            upd(n, direction=Direction.INCREASE)
        for n in m.get("decrease", ()):
            upd(n, direction=Direction.DECREASE)
        for n, (lo, hi) in dict(m.get("bounds", {})).items():
            upd(n, lower=None if lo is None else Bound(float(lo)), upper=None if hi is None else Bound(float(hi)))
        costs = dict(m.get("cost", {}))
        downs, ups = parse_weights(costs, tuple(costs))  # {feature: w or (down, up)}, as weights= reads them
        for n, down, up in zip(costs, downs.tolist(), ups.tolist()):
            upd(n, cost_up=up, cost_down=down)
        norm = m.get("norm")
        scale = m.get("scale")
        return Constraints(
            rules=tuple(rules.values()),
            norm=None if norm is None else Norm.parse(norm),
            scale=None if scale is None else Scale.parse(scale),
            max_changes=m.get("max_changes"),
        )


def _feature_index(names: Sequence[str], name: Any, what: str) -> int:
    if name not in names:
        near = difflib.get_close_matches(str(name), list(names), n=1)
        raise InputDataError(f"{what}: unknown feature '{name}'",
                             f"did you mean '{near[0]}'?" if near else f"features: {', '.join(list(names)[:12])}")
    return list(names).index(name)


def parse_weights(weights: Any, names: Sequence[str]) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.float64]]:
    """The one reading of per-feature weights (``weights=``, a constraints mapping's ``cost``) as
    ``(w_down, w_up)``, one entry per feature of ``names``.

    Accepted: None (every weight 1), a scalar, one number per feature, a pair of such arrays
    ``(down, up)``, or a mapping ``{feature: w}`` / ``{feature: (w_down, w_up)}`` (others 1). A weight is
    the cost of one unit of change: finite and at least 0 (0: that move is free, as ``cost 0`` in a
    constraint file). To keep a feature from changing, make it immutable.
    """
    d = len(names)
    down, up = np.ones(d), np.ones(d)
    if weights is None:
        return down, up
    try:
        if isinstance(weights, Mapping):
            for k, v in weights.items():
                i = _feature_index(names, k, "weights")
                down[i], up[i] = (v, v) if np.ndim(v) == 0 else (float(w) for w in v)
        elif isinstance(weights, tuple) and len(weights) == 2 and np.ndim(weights[0]) == 1:
            down, up = (np.asarray(w, dtype=np.float64).reshape(-1).copy() for w in weights)
        else:
            arr = np.asarray(weights, dtype=np.float64)
            if arr.ndim > 1 or (arr.ndim == 1 and arr.shape[0] != d):
                raise InputDataError(f"weights has shape {arr.shape}; expected one number per feature ({d}), "
                                     "(down, up) arrays or a mapping name -> weight")
            down, up = np.broadcast_to(arr, (d,)).copy(), np.broadcast_to(arr, (d,)).copy()
    except (TypeError, ValueError):
        raise InputDataError(f"weights must be numbers, not {weights!r}",
                             "a scalar, one number per feature, (down, up) arrays or {feature: w or (down, up)}"
                             ) from None
    if down.shape[0] != d or up.shape[0] != d:
        raise InputDataError(f"weights (down, up) must each hold one number per feature ({d})")
    for arr in (down, up):
        bad = np.flatnonzero(~np.isfinite(arr) | (arr < 0))
        if bad.size:
            raise InputDataError(f"weight of feature '{names[bad[0]]}' is {arr[bad[0]]}: weights must be finite "
                                 "and at least 0", "to keep a feature from changing, make it immutable instead")
    return down, up


def parse_spreads(scale: Any, names: Sequence[str]) -> npt.NDArray[np.float64]:
    """The one reading of explicit per-feature scales: one number per feature, or ``{feature: s}`` (others 1);
    every scale positive and finite. (Named scalings, ``"std"``/``"minmax"``, come from reference rows.)"""
    d = len(names)
    if isinstance(scale, Mapping):
        spreads = np.ones(d)
        for k, v in scale.items():
            spreads[_feature_index(names, k, "scale")] = float(v)
    else:
        try:
            spreads = np.asarray(scale, dtype=np.float64).reshape(-1)
        except (TypeError, ValueError):
            raise InputDataError(f"scale must be None, 'std', 'minmax', one number per feature or a mapping, "
                                 f"not {scale!r}") from None
        if spreads.shape[0] != d:
            raise InputDataError(f"scale has {spreads.shape[0]} entries for {d} features")
    bad = np.flatnonzero(~(spreads > 0) | ~np.isfinite(spreads))
    if bad.size:
        raise InputDataError(
            f"scale of feature '{names[bad[0]]}' is {spreads[bad[0]]}: scales must be positive and finite")
    return spreads


@dataclass(frozen=True, eq=False)
class MoveLimits:
    """Where each feature's new value may lie, as arrays over the features of ``names``: the one encoding of
    the constraints' intervals (sensitive tests, counterfactuals and rules read it through :meth:`interval`).

    lower, upper : float64[d]
        Bounds (``-inf``/``inf``: none); relative ones add to the original value.
    lower_relative, upper_relative : bool[d]
    immutable, increase_only, decrease_only : bool[d]
    """

    lower: npt.NDArray[np.float64]
    upper: npt.NDArray[np.float64]
    lower_relative: npt.NDArray[np.bool_]
    upper_relative: npt.NDArray[np.bool_]
    immutable: npt.NDArray[np.bool_]
    increase_only: npt.NDArray[np.bool_]
    decrease_only: npt.NDArray[np.bool_]

    @staticmethod
    def of(constraints: "Constraints | None", names: Sequence[str]) -> "MoveLimits":
        d = len(names)
        lim = MoveLimits(np.full(d, -np.inf), np.full(d, np.inf), np.zeros(d, dtype=bool), np.zeros(d, dtype=bool),
                         np.zeros(d, dtype=bool), np.zeros(d, dtype=bool), np.zeros(d, dtype=bool))
        index = {n: i for i, n in enumerate(names)}
        for r in (constraints.rules if constraints is not None else ()):
            i = index.get(r.feature)
            if i is None:
                continue
            lim.immutable[i] |= r.immutable
            lim.increase_only[i] |= r.direction == Direction.INCREASE
            lim.decrease_only[i] |= r.direction == Direction.DECREASE
            if r.lower is not None:
                lim.lower[i], lim.lower_relative[i] = r.lower.value, r.lower.relative
            if r.upper is not None:
                lim.upper[i], lim.upper_relative[i] = r.upper.value, r.upper.relative
        return lim

    def interval(self, lo0: npt.ArrayLike, hi0: npt.ArrayLike, features: Any = None
                 ) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.float64]]:
        """The closed interval ``[lo, hi]`` a new value may take for every case whose original value lies in
        ``[lo0, hi0]`` (one case: ``lo0 == hi0``; arrays broadcast over ``features``, all by default).

        A relative lower bound counts from ``hi0`` and a relative upper one from ``lo0`` (every case must
        keep it); ``increase`` keeps the new value at least ``hi0``, ``decrease`` at most ``lo0``,
        ``immutable`` both. An unknown (NaN) original value sets no relative bound and no direction.
        """
        cols = slice(None) if features is None else np.asarray(features, dtype=np.int64)
        lo0 = np.asarray(lo0, dtype=np.float64)
        hi0 = np.asarray(hi0, dtype=np.float64)
        with np.errstate(invalid="ignore"):
            lo = np.where(self.lower_relative[cols], hi0 + self.lower[cols], self.lower[cols])
            hi = np.where(self.upper_relative[cols], lo0 + self.upper[cols], self.upper[cols])
            lo = np.where(np.isnan(lo), -np.inf, lo)
            hi = np.where(np.isnan(hi), np.inf, hi)
            up_ok = ~(self.immutable[cols] | self.decrease_only[cols])
            down_ok = ~(self.immutable[cols] | self.increase_only[cols])
            hi = np.where(~up_ok & ~np.isnan(lo0), np.minimum(hi, lo0), hi)
            lo = np.where(~down_ok & ~np.isnan(hi0), np.maximum(lo, hi0), lo)
        return lo, hi

