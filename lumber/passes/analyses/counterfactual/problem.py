"""Assemble one counterfactual MILP: domains, forests, objective, target, actionability, plausibility.

:class:`Query` is everything that does not change between attempts (the case,
the costs, the constraints); :class:`Problem` is one MILP built from it with a
given target margin, an optional cost bound (every feature's own cost must
stay below the cost of a known solution, which shrinks the domains and
prunes whole subtrees before the solver sees them) and optional no-good
cuts. It maps solver solutions back to feature values and feature values to
complete warm-start assignments.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property
from typing import Any, Callable, Sequence

import numpy as np
import numpy.typing as npt

from lumber.ir import Constraints, FeatureKind, Forest, Norm, Target
from lumber.ir.domains import Domains

from . import actionability
from .deadline import Deadline
from .domain import CategoricalDomain, Domain, FixedDomain, Grid, NumericDomain, grid_for
from .model import LinExpr, MilpModel
from .leafcuts import add_leaf_cuts, prune_reach
from .objective import CaseCost
from .options import CounterfactualOptions
from .plausibility import collapse_uniform
from .reference import Reference
from .targets import add_target_rows, margin_terms, scaled_row
from .trees import ForestEncoding, NodeChoices, classify, encode, path_assignment, reachable, register_cuts

FloatArray = npt.NDArray[np.float64]

CUTOFF_ROW = (Norm.L0,)
"""Norms for which a pruned model also gets the row ``objective <= bound``."""


@dataclass
class Query:
    """A counterfactual question about one case (all values in the model's feature space)."""

    forest: Forest
    x0: FloatArray
    spec: Target
    cost: CaseCost
    constraints: Constraints | None
    lo: FloatArray
    hi: FloatArray
    allowed: dict[int, FloatArray]
    categorical: npt.NDArray[np.bool_]
    """Features modelled as categories (declared categorical, or split by category sets)."""
    cat_codes: dict[int, FloatArray]
    isolation: tuple[Forest, float] | None = None
    """An isolation forest (lowered, averaged path lengths) and the minimum mean path length."""
    domains: Domains | None = None
    """What values a person could give each feature (integer levels, resolutions, one-hot groups)."""
    options: CounterfactualOptions = field(default_factory=CounterfactualOptions)
    """The encoding and search options (``integer_flows``, ``interval_rows``, ``compact_levels``, ...)."""
    reference: Reference | None = None
    """The reference rows, prepared once for every case of a batch."""
    _memo: dict[str, Any] = field(default_factory=dict, repr=False)

    def memo(self, key: str, make: Callable[[], Any]) -> Any:
        """What ``make()`` gives, computed once per query (the source model's prediction on the case)."""
        if key not in self._memo:
            self._memo[key] = make()
        return self._memo[key]

    @cached_property
    def isolation_encoded(self) -> Forest | None:
        """The isolation forest as the MILP encodes it: uniform subtrees collapsed (same scores, fewer splits)."""
        if self.isolation is None:
            return None
        iso = self.isolation[0]
        return self.reference.encoded(iso) if self.reference is not None else collapse_uniform(iso)

    @property
    def names(self) -> list[str]:
        return self.forest.schema.feature_names

    @cached_property
    def _grids(self) -> dict[int, Grid]:
        return {}

    def grid(self, i: int) -> Grid:
        """The values numeric feature ``i`` may take: the schema's kind refined by its domain."""
        g = self._grids.get(i)
        if g is None:
            dom = self.domains[i] if self.domains is not None else None
            feat, x0, kind = self.forest.schema.features[i], float(self.x0[i]), _numeric_kind(self, i)
            fin = self.allowed.get(i)
            if kind == "ordinal" and fin is None and feat.categories is not None and x0.is_integer():
                fin = np.arange(len(feat.categories), dtype=np.float64)
            g = grid_for(kind, self.forest.schema.input_dtype, x0, fin, dom)
            self._grids[i] = g
        return g

    @cached_property
    def cell_cuts(self) -> tuple[FloatArray, FloatArray]:
        return cell_cuts(self)

    def coupled(self) -> set[int]:
        """Features named by relations or implications (they keep their variables)."""
        out: set[int] = set()
        c = self.constraints
        if c is None:
            return out
        names = self.names
        for rel in c.relations:
            out.update(names.index(f) for f, _ in rel.x_terms)
        for imp in c.implications:
            for cond in (imp.condition, *imp.then):
                terms = cond.x_terms if hasattr(cond, "x_terms") else ((cond.feature, 1.0),)
                out.update(names.index(f) for f, _ in terms)
        return out


@dataclass
class _Imp:
    b: int
    s: int


@dataclass
class Problem:
    """One MILP for a :class:`Query`."""

    query: Query
    model: MilpModel
    domains: list[Domain]
    encodings: list[ForestEncoding]
    infeasible: str = ""
    """Why the query is infeasible before solving (empty when a MILP was built)."""
    expired: bool = False
    """The deadline passed while building: the model is incomplete and must not be solved."""
    linf_col: int = -1
    zcols: dict[int, tuple[int, LinExpr]] = field(default_factory=dict)
    """Per changeable feature: its cost column and the cost expression it equals."""
    implications: list[_Imp] = field(default_factory=list)

    @property
    def n_binaries(self) -> int:
        return int(self.model.integer.sum())

    def point(self, sol: FloatArray) -> FloatArray:
        """Feature values of a solver solution."""
        x = self.query.x0.copy()
        for d in self.domains:
            x[d.index] = d.value if isinstance(d, FixedDomain) else d.value_from(sol)
        return x

    def within(self, x: FloatArray) -> bool:
        """Does ``x`` lie in every feature domain (so a warm start can be built from it)?"""
        for d in self.domains:
            v = float(x[d.index])
            if isinstance(d, FixedDomain):
                if not (v == d.value or (np.isnan(v) and np.isnan(d.value))):
                    return False
            elif isinstance(d, CategoricalDomain):
                if int(np.trunc(v)) not in set(d.codes.tolist()):
                    return False
            elif not (d.levels[0] <= v <= d.levels[-1]) or not d.grid.representable(v):
                return False
        return True

    def snapped(self, x: FloatArray) -> FloatArray:
        """``x`` moved to the levels of its cells (compact levels): same routing, cost no higher."""
        x = x.copy()
        for d in self.domains:
            if isinstance(d, NumericDomain):
                x[d.index] = d.snap(float(x[d.index]))
        return x

    def assignment(self, x: FloatArray) -> FloatArray | None:
        """A complete MILP assignment describing ``x``, or None when it is not feasible."""
        if self.infeasible or not self.within(x):
            return None
        x = self.snapped(x)
        v = np.zeros(self.model.n_cols)
        for d in self.domains:
            if isinstance(d, NumericDomain):
                v[d.mu] = d.mu_from_x(float(x[d.index]))
                if d.x_int_col >= 0:
                    v[d.x_int_col] = x[d.index]
            elif isinstance(d, CategoricalDomain):
                v[d.nu] = d.nu_from_x(float(x[d.index]))
        for enc in self.encodings:
            on, lam = path_assignment(enc, x)
            has = enc.y >= 0
            v[enc.y[has]] = on[has]
            v[enc.lam] = lam
        for col, expr in self.zcols.values():
            v[col] = expr.value(v)
        if self.linf_col >= 0:
            v[self.linf_col] = max([float(self.query.cost.feature_costs(x[None, :]).max())]
                                   + [float(v[c]) for c, _ in self.zcols.values()])
        for imp in self.implications:
            v[imp.b] = 1.0
            if imp.s >= 0:
                v[imp.s] = 1.0
        if self.implications:
            for imp in self.implications:  # b = 1 is safe when the consequences hold; try 0 otherwise
                if not self.model.is_feasible(v, tol=1e-6):
                    v[imp.b] = 0.0
        if not self.model.is_feasible(v, tol=1e-6):
            return None
        return v


def _numeric_kind(q: Query, i: int) -> str:
    k = q.forest.schema.features[i].kind
    return {FeatureKind.BINARY: "binary", FeatureKind.ORDINAL: "ordinal"}.get(k, "numerical")


def build_domains(q: Query, lo: FloatArray, hi: FloatArray) -> tuple[list[Domain], str]:
    """Initial domains from bounds (before levels); a message when some feature has no value left."""
    schema = q.forest.schema
    doms: list[Domain] = []
    for i in range(schema.n_features):
        x0 = float(q.x0[i])
        name = schema.features[i].name
        if not np.isfinite(x0):
            doms.append(FixedDomain(i, x0))
            continue
        if q.categorical[i]:
            if x0 < 0:  # not a valid category (e.g. a missing-value code): kept as it is
                doms.append(FixedDomain(i, x0))
                continue
            codes = q.cat_codes[i]
            if i in q.allowed:
                codes = codes[np.isin(codes, q.allowed[i])]
            codes = codes[(codes >= lo[i]) & (codes <= hi[i])]
            x0c = int(np.trunc(x0)) if x0 >= 0 else -1
            if codes.size == 0:
                return doms, f"no allowed category is left for '{name}'"
            if codes.size == 1:
                doms.append(FixedDomain(i, x0 if int(codes[0]) == x0c else float(codes[0])))
            else:
                doms.append(CategoricalDomain(i, codes.astype(np.int64), x0, x0c))
            continue
        g = q.grid(i)
        a = max(float(g.ceil(np.array([lo[i]]))[0]) if np.isfinite(lo[i]) else -np.inf, g.lowest)
        b = min(float(g.down(np.array([hi[i]]))[0]) if np.isfinite(hi[i]) else np.inf, g.highest)
        if not a <= b:
            return doms, f"no value of '{name}' satisfies its bounds [{lo[i]:g}, {hi[i]:g}]"
        if a == b:
            doms.append(FixedDomain(i, x0 if x0 == a else a))
            continue
        doms.append(NumericDomain(i, g, x0, a, b))
    return doms, ""


def _projection(d: Domain) -> FixedDomain:
    """The cheapest value of a feature that no split reads: the original, or the nearest bound."""
    if isinstance(d, FixedDomain):
        return d
    if isinstance(d, CategoricalDomain):
        return FixedDomain(d.index, d.x0 if d.x0_code in set(d.codes.tolist()) else float(d.codes[0]))
    if d.lo <= d.x0 <= d.hi and d.grid.representable(d.x0):
        return FixedDomain(d.index, d.x0)
    return FixedDomain(d.index, d.grid.nearest(min(max(d.x0, d.lo), d.hi), d.lo, d.hi))


def build(q: Query, *, eps: float = 1e-5, tie_eps: float = 0.0, cost_bound: float | None = None,
          nogoods: Sequence[FloatArray] = (), leaf_cuts: bool = True, deadline: Deadline | None = None,
          explained: bool = True) -> Problem:
    """The MILP of ``q``; see the module docstring for ``cost_bound`` and ``nogoods``.

    ``explained=False`` leaves the explained model out (the plausible relaxation: the isolation forest,
    the costs and the constraints alone).

    Past ``deadline`` (checked between stages) it stops and returns a Problem marked ``expired``."""
    expired = deadline.expired if deadline is not None else (lambda: False)
    model = MilpModel()
    lo, hi = q.lo.copy(), q.hi.copy()
    if cost_bound is not None and np.isfinite(cost_bound):
        blo, bhi = q.cost.box(cost_bound)
        lo, hi = np.maximum(lo, blo), np.minimum(hi, bhi)
    doms, why = build_domains(q, lo, hi)
    if why:
        return Problem(q, model, doms, [], infeasible=why)
    forests = ([q.forest] if explained else []) + ([q.isolation_encoded] if q.isolation_encoded is not None else [])
    choices: list[tuple[NodeChoices, npt.NDArray[np.bool_]]] = []
    used = np.zeros(len(doms), dtype=bool)
    for f in forests:
        ch = classify(f, doms)
        reach = reachable(f, ch)
        if cost_bound is not None and np.isfinite(cost_bound) and q.options.prune_leaves:
            reach = prune_reach(f, ch, reach, doms, q.cost, cost_bound)
        internal = reach & (f.left >= 0)
        li, ri = np.maximum(f.left, 0), np.maximum(f.right, 0)
        branching = internal & reach[li] & reach[ri]
        used[f.feature[branching]] = True
        choices.append((ch, reach))
        if expired():
            return Problem(q, model, doms, [], expired=True)
    keep = q.coupled() | {i for i, d in enumerate(doms) if used[i]}
    if nogoods:
        keep |= set(range(len(doms)))
    doms = [d if d.index in keep else _projection(d) for d in doms]
    numeric = [d for d in doms if isinstance(d, NumericDomain)]
    need_change_binaries = q.cost.norm == Norm.L0 or bool(nogoods) or (
        q.constraints is not None and q.constraints.max_changes is not None)
    for d in numeric:
        if need_change_binaries:  # [x > x0] and [x < x0]; l1 / l2 / linf read x0's cell through its level
            a, b = d.change_cuts()
            d.add_cut(a)
            d.add_cut(b)
            d.binary_cuts.update((a, b))
        if nogoods:
            for u in q.cell_cuts:
                if np.isfinite(u[d.index]):
                    d.add_cut(float(u[d.index]))
                    d.binary_cuts.add(float(u[d.index]))
    for f, (ch, reach) in zip(forests, choices):
        internal = reach & (f.left >= 0)
        li, ri = np.maximum(f.left, 0), np.maximum(f.right, 0)
        register_cuts(f, ch, internal & reach[li] & reach[ri], doms)
    names = q.names
    if q.constraints is not None:
        actionability.needed_cuts(q.constraints, names, q.x0, doms)
        _relation_support(q, doms)
    for dom in doms:
        if isinstance(dom, (NumericDomain, CategoricalDomain)):
            dom.finalize(model, compact=q.options.compact_levels)
    if expired():
        return Problem(q, model, doms, [], expired=True)
    integer_flows = q.options.integer_flows and explained and q.isolation is not None
    encs = [encode(f, ch, reach, doms, model, name="y" if f is q.forest else "y-iso", integer_flows=integer_flows,
                   interval_rows=q.options.interval_rows)
            for f, (ch, reach) in zip(forests, choices)]
    prob = Problem(q, model, doms, encs)
    if expired():
        prob.expired = True
        return prob
    prob.linf_col, prob.zcols = q.cost.add_objective(doms, model)
    if cost_bound is not None and np.isfinite(cost_bound) and q.options.prune_leaves and q.cost.norm in CUTOFF_ROW:
        # The pruned model routes exactly every point within the bound, and the bounding point stays in
        # it, so its optimum is the true one without this row. Under l0 the row (a knapsack over the
        # change binaries) still helps the solver; under l1 it slowed credit queries 1.4x (bench).
        model.add_cost_row(q.cost.to_objective(cost_bound) * (1 + 1e-9) + 1e-12 - model.offset)
    if leaf_cuts:
        for f, (ch, _), enc in zip(forests, choices, encs):
            add_leaf_cuts(f, ch, enc, doms, q.cost, prob.zcols, model, deadline)
        if expired():  # no time left to solve (the cuts added so far are valid, the model is not finished)
            prob.expired = True
            return prob
    if explained:
        add_target_rows(encs[0], q.spec, model, eps, tie_eps)
    if q.isolation is not None:
        _isolation_row(encs[-1], q.isolation[1], model)
    if q.constraints is not None:
        n_before = model.n_cols
        actionability.add_rows(q.constraints, names, q.x0, doms, model)
        prob.implications = _implication_cols(model, n_before)
    for pat in nogoods:
        _nogood(q, doms, pat, model)
    if model.infeasible_constant_rows:
        prob.infeasible = f"no point reaches {q.spec.describe()} under the constraints"
    return prob


def _relation_support(q: Query, doms: list[Domain]) -> None:
    """Features in linear relations: integer columns on integer grids, levels beyond the split range."""
    assert q.constraints is not None
    names = q.names
    for rel in list(q.constraints.relations) + [c for imp in q.constraints.implications
                                                 for c in (imp.condition, *imp.then) if hasattr(c, "x_terms")]:
        for f, _ in rel.x_terms:
            d = doms[names.index(f)]
            if not isinstance(d, NumericDomain):
                continue
            d.in_relation = True
            if d.grid.kind == "int":
                d.integer_x = True
            span = max(1.0, abs(d.x0))
            steps = np.asarray(span * 2.0 ** np.arange(0, 11), dtype=np.float64)
            if not np.isfinite(d.lo):
                d.extra_levels.update(float(v) for v in d.grid.down(d.x0 - steps))
            if not np.isfinite(d.hi):
                d.extra_levels.update(float(v) for v in d.grid.ceil(d.x0 + steps))


def _implication_cols(model: MilpModel, start: int) -> list[_Imp]:
    out: list[_Imp] = []
    for j in range(start, model.n_cols):
        g = model.col_group(j)
        if g == "implies":
            out.append(_Imp(j, -1))
        elif g == "implies-side" and out:
            out[-1].s = j
    return out


def _isolation_row(enc: ForestEncoding, delta: float, model: MilpModel) -> None:
    """Mean isolation path length at least ``delta``."""
    scaled_row(model, *margin_terms(enc, 0), delta, np.inf, 0.0)


def cell_cuts(q: Query) -> tuple[FloatArray, FloatArray]:
    """Per numeric feature the nearest split levels around the case: ``(below, above)`` (NaN: none).

    A feature *moves up* when it crosses a split, ``x > above``, and *down* when ``x <= below``;
    diverse counterfactuals differ in these moves, so a change no split sees does not count.
    """
    f = q.forest
    n = f.n_features
    below, above = np.full(n, np.nan), np.full(n, np.nan)
    for i in range(n):
        x0 = float(q.x0[i])
        if q.categorical[i] or not np.isfinite(x0):
            continue
        t = f.threshold[(f.feature == i) & ~f.is_categorical & (f.left >= 0)]
        if t.size == 0:
            continue
        u = q.grid(i).down(t)
        u = u[np.isfinite(u)]
        if (u >= x0).any():
            above[i] = float(u[u >= x0].min())
        if (u < x0).any():
            below[i] = float(u[u < x0].max())
    return below, above


def change_pattern(q: Query, x: FloatArray) -> FloatArray:
    """Per feature: +1 moved up across a split, -1 down across one, 0 otherwise (categorical:
    the new code + 2, or 0). ``x`` may be one point or rows of points.
    """
    below, above = q.cell_cuts
    x0 = q.x0
    same = (x == x0) | (np.isnan(x) & np.isnan(x0))
    with np.errstate(invalid="ignore"):
        up = np.isfinite(above) & (x > above)
        down = np.isfinite(below) & (x <= below)
    pat = np.where(up, 1.0, np.where(down, -1.0, 0.0))
    return np.where(q.categorical & ~same, 2.0 + np.trunc(np.nan_to_num(x)), np.where(q.categorical, 0.0, pat))


def _nogood(q: Query, doms: list[Domain], pat: FloatArray, model: MilpModel) -> None:
    """Exclude every point with the same change pattern (split-crossing moves, new categories)."""
    below, above = q.cell_cuts
    e = LinExpr()
    for d in doms:
        if isinstance(d, FixedDomain):
            continue
        p = float(pat[d.index])
        if isinstance(d, CategoricalDomain):
            same = d.member_expr(np.array([p - 2.0])) if p >= 2 else 1.0 - d.change_expr()
        else:
            i = d.index
            inc = d.gt(float(above[i])) if np.isfinite(above[i]) else LinExpr.constant(0.0)
            dec = 1.0 - d.gt(float(below[i])) if np.isfinite(below[i]) else LinExpr.constant(0.0)
            same = inc if p == 1.0 else dec if p == -1.0 else 1.0 - inc - dec
        e = e + (1.0 - same)
    model.add_expr_row(e, 1.0, np.inf)
