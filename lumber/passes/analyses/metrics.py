"""The metric of an explanation: what a change costs and which changes are allowed.

Alvarez (section 4) scales each axis (min/max or standard deviation from
reference data), lets the user weight features, weight the two directions of
a feature differently, freeze a feature or one of its directions. A
:class:`Metric` holds exactly that, per feature, resolved from a
:class:`~lumber.ir.Constraints` (what the constraint language compiles to)
and plain keyword options. Keywords give defaults; a constraint object
overrides them.

Costs are the one cost model of every explanation
(:class:`~lumber.passes.analyses.change_cost.ChangeCost`), with the spread folded
into its weights: a numerical change ``dx`` costs ``dx * up[f]`` when it increases the
value and ``-dx * down[f]`` when it decreases it, with ``up = weight_up /
spread`` (``spread`` = 1, the standard deviation or the range on reference
data). A categorical feature (kind CATEGORICAL, or tested by a categorical
split) is nominal: any change of category (of the code the model reads, under
its category rule) costs ``up[f]`` (its weight, never scaled), so L1 counts
weighted changed categories and L2 adds their squares.
The per-feature costs combine by the L1, L2 or L-infinity norm.
"""

from __future__ import annotations

import difflib
import enum
from dataclasses import dataclass, field, replace
from typing import Any, Sequence

import numpy as np
import numpy.typing as npt

from lumber.ir import (
    CompileError, Constraints, Diagnostic, Direction, FeatureKind, FeatureRule, Forest, InputDataError, Norm, Scale,
    Severity, SourceSpan,
)
from lumber.ir.constraints import MoveLimits, parse_spreads, parse_weights
from lumber.ir.domains import DomainKind, Domains

from .change_cost import ChangeCost, reference_spread
from .realizable import above, below


class Kind(enum.IntEnum):
    """How the metric moves a feature."""

    CONTINUOUS = 0
    INTEGER = 1
    """Binary and ordinal features: changes land on integers."""
    CATEGORICAL = 2
    """Nominal: a change picks another category code at a fixed cost."""


@dataclass(frozen=True, eq=False)
class Metric:
    """Per-feature costs and admissible moves, for one model (see module docstring).

    norm : Norm
        L1, L2 or LINF.
    up, down : float64[d]
        Cost of one unit of increase / decrease (weights divided by spreads);
        for categorical features ``up`` is the cost of any change.
    spread : float64[d]
        The scaling divisor of each feature (1 when unscaled or categorical).
    kind : int8[d]
        :class:`Kind` of each feature.
    domain_lo, domain_hi : float64[d]
        Values a moved feature may take (binary [0, 1]; ordinal levels; category codes).
    n_codes : int64[d]
        Category codes ``0..n_codes-1`` a categorical feature may move to.
    immutable, increase_only, decrease_only : bool[d]
        Frozen features and frozen directions.
    lower, upper : float64[d]; lower_relative, upper_relative : bool[d]
        Bounds on the new value (relative bounds are offsets from the case's value).
    allowed : dict feature -> int64 codes
        Categories a categorical feature may move to (all when absent).
    max_changes : int or None
        At most this many features may change.
    """

    names: tuple[str, ...]
    input_dtype: str
    cost: ChangeCost
    """What a move costs: ``up``/``down`` as its weights, scale 1 (the spread is folded in)."""
    scale: Scale | None
    spread: npt.NDArray[np.float64]
    kind: npt.NDArray[np.int8]
    domain_lo: npt.NDArray[np.float64]
    domain_hi: npt.NDArray[np.float64]
    n_codes: npt.NDArray[np.int64]
    immutable: npt.NDArray[np.bool_]
    increase_only: npt.NDArray[np.bool_]
    decrease_only: npt.NDArray[np.bool_]
    lower: npt.NDArray[np.float64]
    upper: npt.NDArray[np.float64]
    lower_relative: npt.NDArray[np.bool_]
    upper_relative: npt.NDArray[np.bool_]
    allowed: dict[int, npt.NDArray[np.int64]] = field(default_factory=dict)
    max_changes: int | None = None

    @property
    def n_features(self) -> int:
        return len(self.names)

    @property
    def norm(self) -> Norm:
        return self.cost.norm

    @property
    def up(self) -> npt.NDArray[np.float64]:
        return self.cost.w_up

    @property
    def down(self) -> npt.NDArray[np.float64]:
        return self.cost.w_down

    @property
    def integer(self) -> npt.NDArray[np.bool_]:
        return self.kind == Kind.INTEGER

    @property
    def categorical(self) -> npt.NDArray[np.bool_]:
        return self.kind == Kind.CATEGORICAL

    @property
    def constrained(self) -> npt.NDArray[np.bool_]:
        """Features whose admissible values depend on the case (need per-case bounds)."""
        return (self.immutable | self.increase_only | self.decrease_only
                | np.isfinite(self.lower) | np.isfinite(self.upper))

    @property
    def all_frozen(self) -> bool:
        return bool(self.immutable.all())

    def case_bounds(self, X0: npt.NDArray[np.float64],
                    features: Sequence[int] | npt.NDArray[np.integer[Any]] | None = None
                    ) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.float64]]:
        """Realizable closed interval ``[lo, hi]`` each case may move feature ``f`` in.

        Returns ``(n, len(features))`` arrays (all features by default). A missing
        original value gives ``(-inf, inf)``: missing values never move (see
        ``sensitive_tests``).
        """
        cols = np.arange(self.n_features) if features is None else np.asarray(features, dtype=np.int64)
        x = X0[:, cols]
        limits = MoveLimits(self.lower, self.upper, self.lower_relative, self.upper_relative, self.immutable,
                            self.increase_only, self.decrease_only)
        lo, hi = limits.interval(x, x, cols)
        integer = self.integer[cols]
        return (above(lo, False, self.input_dtype, integer), below(hi, False, self.input_dtype, integer))

    def feature_costs(self, X0: npt.NDArray[np.float64], P: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
        """``(n, d)`` cost of moving each feature from ``X0`` to ``P`` (NaN to NaN costs 0)."""
        return self.cost.feature_costs(X0, P)

    def combine(self, costs: npt.NDArray[np.float64], axis: int = -1) -> npt.NDArray[np.float64]:
        """Norm of per-feature costs."""
        return self.cost.combine(costs, axis)

    def distance(self, X0: npt.NDArray[np.float64], P: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
        """Metric distance of each row pair ``(n,)``."""
        return self.cost.distance(X0, P)

    def describe(self) -> dict[str, Any]:
        """What the metric is, for reports (JSON-ready)."""
        def per_feature(a: npt.NDArray[Any]) -> dict[str, float]:
            return {n: float(v) for n, v in zip(self.names, a)}

        return {
            "norm": self.norm.name.lower(),
            "scale": "none" if self.scale is None else self.scale.name.lower(),
            "spread": per_feature(self.spread),
            "cost_up": per_feature(self.up),
            "cost_down": per_feature(self.down),
            "immutable": [n for n, v in zip(self.names, self.immutable) if v],
            "increase_only": [n for n, v in zip(self.names, self.increase_only) if v],
            "decrease_only": [n for n, v in zip(self.names, self.decrease_only) if v],
            "max_changes": self.max_changes,
        }


# -- building a metric ----------------------------------------------------------------------


def _unknown(names: Sequence[str], bad: str, what: str) -> InputDataError:
    near = difflib.get_close_matches(bad, list(names), n=1)
    hint = f"did you mean '{near[0]}'?" if near else f"features: {', '.join(list(names)[:12])}"
    return InputDataError(f"{what}: unknown feature '{bad}'", hint)


def _norm(value: Any) -> Norm:
    norm = Norm.parse(value)
    if norm == Norm.L0:
        raise InputDataError("norm l0 has no unique projection onto a leaf",
                             "use norm l1, l2 or linf, and max_changes to limit how many features change")
    return norm


def _resolve_scale(value: Any, names: Sequence[str]) -> tuple[Scale | None, npt.NDArray[np.float64] | None]:
    """A named scaling, or explicit per-feature spreads (array or mapping)."""
    if value is None:
        return None, None
    if isinstance(value, (Scale, str)):
        s = Scale.parse(value)
        return (None if s == Scale.NONE else s), None
    return None, parse_spreads(value, names)


@dataclass(frozen=True)
class NotApplied:
    """A constraint statement sensitive tests leave out: they project onto the decision surface moving
    each feature within its own rule, so a statement that ties features together, or a plausibility
    requirement, is not applied (the counterfactual MILP applies it)."""

    kind: str
    """``"linear relation"``, ``"implication"`` or ``"plausibility"``."""
    span: SourceSpan | None = None
    """Where the statement is in the constraint file (None for a constraints object built in code)."""

    @property
    def line(self) -> int | None:
        return self.span.line if self.span is not None else None

    @property
    def what(self) -> str:
        return {"plausibility": "a plausibility requirement"}.get(self.kind, f"a{'n' * (self.kind[0] in 'aeiou')} {self.kind}")

    def describe(self) -> str:
        """``adult.lum:10: an implication`` (the statement's place when known)."""
        where = f"{self.span.file or 'line'}:{self.span.line}: " if self.span is not None else ""
        return where + self.what

    def to_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "line": self.line, "file": self.span.file if self.span is not None else None}


def split_for_sensitive(c: Constraints) -> tuple[Constraints, tuple[NotApplied, ...]]:
    """The constraints sensitive tests apply (per-feature rules, norm, scale, target, ``changes <= k``)
    and the statements they do not apply (linear relations, implications, plausibility), in file order."""
    skipped = [NotApplied("linear relation", r.span) for r in c.relations]
    skipped += [NotApplied("implication", i.span) for i in c.implications]
    if c.plausibility is not None:
        skipped.append(NotApplied("plausibility", c.plausibility.span))
    skipped.sort(key=lambda n: (n.line is None, n.line or 0))
    applied = replace(c, relations=(), implications=(), plausibility=None)
    return applied, tuple(skipped)


def _check_supported(c: Constraints) -> None:
    """A metric is built from statements sensitive tests apply; :func:`split_for_sensitive` separates them."""
    _, skipped = split_for_sensitive(c)
    if skipped:
        raise CompileError([Diagnostic(Severity.ERROR, f"{s.what} is not applied by sensitive tests", s.span,
                                       ("lumber.sensitive_tests leaves it out and lists it in result.not_applied; "
                                        "lumber.counterfactual applies it",)) for s in skipped])


def as_constraints(constraints: Any) -> Constraints:
    """A Constraints object from ``None``, a Constraints or a plain mapping (:meth:`Constraints.coerce`)."""
    return Constraints.coerce(constraints)


def used_features(forest: Forest) -> npt.NDArray[np.bool_]:
    used = np.zeros(forest.n_features, dtype=bool)
    used[forest.feature[forest.feature >= 0]] = True
    return used


def build_metric(forest: Forest, constraints: Any = None, *, norm: Any = "l2", scale: Any = None,
                 reference: Any = None, weights: Any = None, frozen: Sequence[str] = (),
                 increase_only: Sequence[str] = (), decrease_only: Sequence[str] = (),
                 max_changes: int | None = None, domains: Domains | None = None) -> Metric:
    """Resolve constraints and keyword options into a :class:`Metric` for ``forest``.

    ``reference`` (rows in the model's feature space) supplies the statistics of
    ``scale="std"``/``"minmax"``; ``scale`` may also be explicit per-feature spreads.
    ``domains`` makes integer and binary features (by the data or the constraint file) move by whole steps.
    """
    schema = forest.schema
    names = tuple(schema.feature_names)
    d = len(names)
    cons = as_constraints(constraints)
    _check_supported(cons)
    for n in (*frozen, *increase_only, *decrease_only):
        if n not in names:
            raise _unknown(names, n, "frozen/increase_only/decrease_only")
    for n in frozen:
        cons = cons.with_rule(replace(cons.rule(n), immutable=True))
    for n in increase_only:
        cons = cons.with_rule(replace(cons.rule(n), direction=Direction.INCREASE))
    for n in decrease_only:
        cons = cons.with_rule(replace(cons.rule(n), direction=Direction.DECREASE))
    for r in cons.rules:
        if r.feature not in names:
            raise _unknown(names, r.feature, "a constraint rule")

    norm, scale, _ = cons.settings(norm, scale, None)
    the_norm = _norm(norm)
    scale_kind, spreads = _resolve_scale(scale, names)

    # kinds and domains
    cat_split = np.zeros(d, dtype=bool)
    cat_split[forest.feature[forest.is_categorical]] = True
    kind = np.zeros(d, dtype=np.int8)
    dlo, dhi = np.full(d, -np.inf), np.full(d, np.inf)
    n_codes = np.zeros(d, dtype=np.int64)
    for i, feat in enumerate(schema.features):
        if feat.kind == FeatureKind.CATEGORICAL or cat_split[i]:
            kind[i] = Kind.CATEGORICAL
            n_codes[i] = _code_count(forest, i, feat.categories)
            dlo[i], dhi[i] = 0.0, float(n_codes[i] - 1)
        elif feat.kind == FeatureKind.BINARY:
            kind[i] = Kind.INTEGER
            dlo[i], dhi[i] = 0.0, 1.0
        elif feat.kind == FeatureKind.ORDINAL:
            kind[i] = Kind.INTEGER
            if feat.categories is not None:
                dlo[i], dhi[i] = 0.0, float(len(feat.categories) - 1)
        elif domains is not None and domains[i].kind in (DomainKind.INTEGER, DomainKind.BINARY):
            kind[i] = Kind.INTEGER
            if domains[i].kind == DomainKind.BINARY:
                dlo[i], dhi[i] = 0.0, 1.0
    categorical = kind == Kind.CATEGORICAL
    used = used_features(forest)

    if scale_kind is not None:
        if reference is None:
            raise InputDataError(f"scale '{scale_kind.name.lower()}' needs reference data",
                                 "pass reference=<training rows> (the statistics of each feature come from them)")
        ref = forest.prepare_input(reference)
        if ref.shape[0] < 2:
            raise InputDataError("reference data needs at least 2 rows to estimate a scale")
        spread = reference_spread(scale_kind, ref, names, used, categorical)
    elif spreads is not None:
        spread = np.where(categorical, 1.0, spreads)
    else:
        spread = np.ones(d)

    w_down, w_up = parse_weights(weights, names)
    immutable = np.zeros(d, dtype=bool)
    inc, dec = np.zeros(d, dtype=bool), np.zeros(d, dtype=bool)
    lower, upper = np.full(d, -np.inf), np.full(d, np.inf)
    lrel, urel = np.zeros(d, dtype=bool), np.zeros(d, dtype=bool)
    allowed: dict[int, npt.NDArray[np.int64]] = {}
    for r in cons.rules:
        i = names.index(r.feature)
        _apply_rule(r, i, categorical[i], immutable, inc, dec, lower, upper, lrel, urel, allowed, w_down, w_up)
    free = np.flatnonzero(((w_down == 0) | (w_up == 0)) & ~immutable)
    w_down, w_up = np.where(immutable & (w_down == 0), 1.0, w_down), np.where(immutable & (w_up == 0), 1.0, w_up)
    if free.size:  # a weight may be 0 (a free move; an immutable feature's never applies, 1 stands in)
        raise InputDataError(f"sensitive tests measure a distance: the weight (or cost) of feature '{names[free[0]]}' "
                             "is 0, which makes every change of it free",
                             "give it a positive weight, make it immutable, or use lumber.counterfactual "
                             "(free changes are allowed there)")
    mc = cons.max_changes if cons.max_changes is not None else max_changes
    if mc is not None and (not isinstance(mc, (int, np.integer)) or mc < 0):
        raise InputDataError(f"max_changes must be a non-negative integer, got {mc!r}")
    cost = ChangeCost(the_norm, w_down=np.where(categorical, w_up, w_down / spread),
                      w_up=np.where(categorical, w_up, w_up / spread), scale=np.ones(d), categorical=categorical,
                      category_rule=schema.category_rule)
    return Metric(
        names=names, input_dtype=schema.input_dtype, cost=cost, scale=scale_kind,
        spread=spread, kind=kind, domain_lo=dlo, domain_hi=dhi, n_codes=n_codes,
        immutable=immutable, increase_only=inc, decrease_only=dec, lower=lower, upper=upper,
        lower_relative=lrel, upper_relative=urel, allowed=allowed, max_changes=None if mc is None else int(mc),
    )


def _code_count(forest: Forest, f: int, categories: tuple[Any, ...] | None) -> int:
    """Category codes a categorical feature may move to: its labels, else the codes its splits name."""
    if categories is not None and len(categories):
        return len(categories)
    nodes = np.flatnonzero(forest.feature == f)
    cmax = -1
    for node in nodes[forest.is_categorical[nodes]]:
        cats = forest.categories_of(int(node))
        if cats.size:
            cmax = max(cmax, int(cats.max()))
    thr = forest.threshold[nodes[~forest.is_categorical[nodes]]]
    thr = thr[np.isfinite(thr)]
    if thr.size:
        cmax = max(cmax, int(np.floor(thr.max())) + 1)
    return max(cmax + 1, 1)


def _apply_rule(r: FeatureRule, i: int, categorical: bool, immutable: npt.NDArray[np.bool_],
                inc: npt.NDArray[np.bool_], dec: npt.NDArray[np.bool_], lower: npt.NDArray[np.float64],
                upper: npt.NDArray[np.float64], lrel: npt.NDArray[np.bool_], urel: npt.NDArray[np.bool_],
                allowed: dict[int, npt.NDArray[np.int64]], w_down: npt.NDArray[np.float64],
                w_up: npt.NDArray[np.float64]) -> None:
    where = f" ({r.span})" if r.span is not None else ""
    immutable[i] |= r.immutable
    if r.direction != Direction.ANY:
        if categorical:
            raise CompileError(f"feature '{r.feature}' is categorical: it has no direction to freeze{where}",
                               "use 'allowed' categories or make it immutable")
        inc[i] |= r.direction == Direction.INCREASE
        dec[i] |= r.direction == Direction.DECREASE
    for bound, arr, rel in ((r.lower, lower, lrel), (r.upper, upper, urel)):
        if bound is None:
            continue
        if categorical:
            raise CompileError(f"feature '{r.feature}' is categorical: bounds do not apply{where}",
                               "use 'allowed' categories instead")
        if not np.isfinite(bound.value):
            raise InputDataError(f"bound of feature '{r.feature}' is {bound.value}: bounds must be finite{where}")
        arr[i] = bound.value
        rel[i] = bound.relative
    if r.allowed is not None:
        if not categorical:
            raise CompileError(f"feature '{r.feature}' is not categorical: 'allowed' values are not supported "
                               f"by sensitive tests{where}", "give lower/upper bounds instead")
        allowed[i] = np.unique(np.asarray(r.allowed, dtype=np.float64)).astype(np.int64)
    for cost, arr in ((r.cost_up, w_up), (r.cost_down, w_down)):
        if cost is None:
            continue
        if not (cost >= 0 and np.isfinite(cost)):  # the rule of lumber.ir.constraints.parse_weights
            raise InputDataError(f"cost of feature '{r.feature}' is {cost}: costs must be finite and at least 0"
                                 f"{where}", "to keep a feature from changing, make it immutable")
        arr[i] = float(cost)


__all__ = ["Kind", "Metric", "build_metric", "as_constraints", "used_features"]
