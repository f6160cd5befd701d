"""Results of the sensitive-tests analysis: arrays for machines, per-case objects for people.

The analysis fills a :class:`SensitiveResult` with arrays (distances, witness
points, chosen leaves); the per-case :class:`CaseSensitivity` objects and
their sensitive tests are built on access, so a batch of 100k cases costs no
Python objects until someone looks at them.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from typing import Any, Iterator, Sequence, overload

import numpy as np
import numpy.typing as npt

from lumber.ir import Forest
from lumber.ir.display import readable

from .metrics import Metric

UNREACHABLE = "no class change reachable under these constraints"


@dataclass(frozen=True)
class SensitiveTest:
    """One test the case must cross for the decision to change.

    ``op`` and ``threshold`` state the test as the case satisfies it now (the paper's
    convention: "Age <= 28.5"); ``new_value`` is where the witness point puts the
    feature. ``margin`` is the metric distance from the case to the test's boundary
    (for a categorical test, the cost of changing category).
    """

    feature: str
    index: int
    op: str
    threshold: float | None
    direction: str
    value: float
    new_value: float
    margin: float
    categories: tuple[int, ...] | None = None
    """Categorical tests: the codes the new value must take (the leaf's allowed set)."""
    tree: int = -1
    node: int = -1
    """Local node id of the test in ``tree`` (-1 when not tied to one node)."""
    threshold_text: str = ""
    value_text: str = ""
    new_value_text: str = ""
    """For people (:class:`lumber.ir.display.Display`): the shortest decimals that mean the same to the
    model, category labels; empty when no display was attached (plain numbers are printed)."""
    categories_text: tuple[str, ...] | None = None
    """Categorical tests: the labels of ``categories`` (None: no display attached)."""

    def texts(self) -> tuple[str, str, str]:
        """``(threshold, value, new value)`` as printed."""
        thr = self.threshold_text or ("?" if self.threshold is None else _num(self.threshold))
        return thr, self.value_text or _num(self.value), self.new_value_text or _num(self.new_value)

    def __str__(self) -> str:
        thr, a, b = self.texts()
        if self.categories is not None:
            cats = self.categories_text if self.categories_text is not None else tuple(map(str, self.categories))
            return f"{self.feature} not in {{{', '.join(cats)}}} ({a} -> {b}, margin {readable(self.margin)})"
        return f"{self.feature} {self.op} {thr} ({a} -> {b}, margin {readable(self.margin)})"

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {
            "feature": self.feature, "op": self.op, "threshold": self.threshold, "direction": self.direction,
            "value": _plain(self.value), "new_value": _plain(self.new_value), "margin": _plain(self.margin),
        }
        if self.threshold_text or self.value_text or self.new_value_text:
            d["threshold_text"], d["value_text"], d["new_value_text"] = self.texts()
        if self.categories is not None:
            d["categories"] = list(self.categories)
            if self.categories_text is not None:
                d["categories_text"] = list(self.categories_text)
        if self.tree >= 0:
            d["tree"], d["node"] = self.tree, self.node
        return d


def _across(t: SensitiveTest) -> SensitiveTest:
    """A witness moved to ``x <= threshold`` prints no higher than the printed threshold (which lies in the
    threshold's own cell, so it routes as the witness does): ``a > 0.4982 (0.6 -> 0.4982)``, never
    ``(0.6 -> 0.49823)``."""
    if t.op != ">" or t.threshold is None or t.categories is not None or not (t.new_value <= t.threshold):
        return t
    try:
        shown_thr, shown_new = float(t.threshold_text), float(t.new_value_text)
    except ValueError:
        return t
    return replace(t, new_value_text=t.threshold_text) if shown_new > shown_thr else t


@dataclass(frozen=True)
class ClassChange:
    """The nearest point of one other class (multiclass models)."""

    label: Any
    distance: float
    point: npt.NDArray[np.float64] | None
    tests: tuple[SensitiveTest, ...]
    reachable: bool

    def to_dict(self, names: Sequence[str]) -> dict[str, Any]:
        return {"label": _plain(self.label), "distance": _plain(self.distance), "reachable": self.reachable,
                "point": None if self.point is None else {n: _plain(v) for n, v in zip(names, self.point)},
                "tests": [t.to_dict() for t in self.tests]}


@dataclass(frozen=True)
class CaseSensitivity:
    """Where one case sits relative to the decision surface."""

    row: int
    prediction: Any
    trace: int
    """Tests on the case's root-to-leaf path (summed over trees for an ensemble)."""
    distance: float
    """Metric distance to the nearest decision change (``inf`` when unreachable)."""
    tests: tuple[SensitiveTest, ...]
    """Sensitive tests, most sensitive (largest margin) first."""
    point: npt.NDArray[np.float64] | None
    """Witness: a point at ``distance`` whose decision differs, verified on the model."""
    target: Any
    """Decision at ``point`` (class label, or ``in``/``out`` of a regression interval)."""
    reachable: bool
    exact: bool
    method: str
    verified: bool
    per_class: dict[Any, ClassChange] = field(default_factory=dict)
    message: str = ""

    def to_dict(self, names: Sequence[str]) -> dict[str, Any]:
        return {
            "row": self.row, "prediction": _plain(self.prediction), "trace": self.trace,
            "distance": _plain(self.distance), "reachable": self.reachable, "target": _plain(self.target),
            "exact": self.exact, "method": self.method, "verified": self.verified, "message": self.message,
            "tests": [t.to_dict() for t in self.tests],
            "point": None if self.point is None else {n: _plain(v) for n, v in zip(names, self.point)},
            "per_class": [c.to_dict(names) for c in self.per_class.values()],
        }


@dataclass(eq=False)
class SensitiveResult(Sequence[CaseSensitivity]):
    """Sensitive tests of a batch of cases (arrays; per-case objects on access).

    X, point : float64[n, d]
        Cases (as the model sees them) and witness points (rows of unreachable cases are NaN).
    distance : float64[n]
        Distance to the nearest decision change; ``inf`` when unreachable.
    group, target_group : int64[n]
        Decision index of the case and at the witness (-1 when unreachable).
    leaf : int64[n]
        Single trees: global id of the leaf projected onto (-1 otherwise).
    trace : int32[n]
    group_distance : float64[n, G]; group_point : float64[n, G, d] or None
        Nearest change to each decision (0 and the case itself for its own).
    """

    forest: Forest
    metric: Metric
    X: npt.NDArray[np.float64]
    distance: npt.NDArray[np.float64]
    point: npt.NDArray[np.float64]
    group: npt.NDArray[np.int64]
    target_group: npt.NDArray[np.int64]
    leaf: npt.NDArray[np.int64]
    trace: npt.NDArray[np.int32]
    verified: npt.NDArray[np.bool_]
    exact: bool
    method: str
    group_labels: tuple[Any, ...]
    group_distance: npt.NDArray[np.float64] | None = None
    group_point: npt.NDArray[np.float64] | None = None
    group_leaf: npt.NDArray[np.int64] | None = None
    rows: npt.NDArray[np.int64] | None = None
    messages: dict[int, str] = field(default_factory=dict)
    tests_of: Any = None
    """Callable ``(x, p, leaf) -> tuple[SensitiveTest, ...]`` set by the analysis."""
    predictions: npt.NDArray[Any] | None = None
    case_exact: npt.NDArray[np.bool_] | None = None
    """Per case: the distance is proven minimal (the MILP may stop at its time limit for some cases)."""
    display: Any = None
    """A :class:`lumber.ir.display.Display`: tests print their thresholds and values for people."""
    not_applied: tuple[Any, ...] = ()
    """Constraint statements the tests leave out (:class:`~lumber.passes.analyses.metrics.NotApplied`:
    linear relations, implications, plausibility): distances and witnesses are those under the other
    constraints, and a witness may break a statement listed here."""

    @property
    def reachable(self) -> npt.NDArray[np.bool_]:
        return self.target_group >= 0

    @staticmethod
    def concat(parts: Sequence[SensitiveResult]) -> SensitiveResult:
        """One result holding the cases of ``parts`` in order (a batch explained in chunks)."""
        first = parts[0]
        if len(parts) == 1:
            return first
        offsets = np.cumsum([0] + [len(p) for p in parts])

        def cat(name: str) -> Any:
            vals = [getattr(p, name) for p in parts]
            return None if any(v is None for v in vals) else np.concatenate(vals)

        arrays = {n: cat(n) for n in ("X", "distance", "point", "group", "target_group", "leaf", "trace", "verified",
                                      "group_distance", "group_point", "group_leaf", "rows", "predictions")}
        case_exact = None
        if any(p.case_exact is not None for p in parts):
            case_exact = np.concatenate([p.case_exact if p.case_exact is not None else np.full(len(p), p.exact)
                                         for p in parts])
        methods = sorted({p.method for p in parts})
        return replace(first, **arrays, case_exact=case_exact, exact=all(p.exact for p in parts),
                       method=methods[0] if len(methods) == 1 else "+".join(methods),
                       messages={int(i) + int(o): m for p, o in zip(parts, offsets) for i, m in p.messages.items()})

    def __repr__(self) -> str:
        reach = int(self.reachable.sum())
        skipped = f", not applied: {'; '.join(n.describe() for n in self.not_applied)}" if self.not_applied else ""
        return (f"<SensitiveResult {len(self)} cases, method={self.method!r}, exact={self.exact}, "
                f"{reach} reachable, {int(self.verified.sum())} verified{skipped}>")

    def __len__(self) -> int:
        return int(self.X.shape[0])

    @overload
    def __getitem__(self, i: int) -> CaseSensitivity: ...

    @overload
    def __getitem__(self, i: slice) -> list[CaseSensitivity]: ...

    def __getitem__(self, i: int | slice) -> CaseSensitivity | list[CaseSensitivity]:
        if isinstance(i, slice):
            return [self[j] for j in range(*i.indices(len(self)))]
        if i < 0:
            i += len(self)
        if not 0 <= i < len(self):
            raise IndexError(i)
        return self._case(i)

    def __iter__(self) -> Iterator[CaseSensitivity]:
        return (self._case(i) for i in range(len(self)))

    def _shown(self, tests: tuple[SensitiveTest, ...]) -> tuple[SensitiveTest, ...]:
        d = self.display
        if d is None:
            return tests
        shown = tuple(replace(t, threshold_text="" if t.threshold is None else d.threshold(t.index, t.threshold),
                              value_text=d.value(t.index, t.value),
                              new_value_text=d.value(t.index, t.new_value, t.value),
                              categories_text=None if t.categories is None else tuple(
                                  d.value(t.index, float(c)) for c in t.categories),
                              margin=self._domain_margin(t)) for t in tests)
        return tuple(sorted(map(_across, shown), key=lambda t: (-t.margin, t.index)))

    def _domain_margin(self, t: SensitiveTest) -> float:
        """The cost of the smallest change in the feature's domain that crosses ``t`` (one dollar past
        ``CapitalGain <= 1e-35`` for a whole-dollar feature, not the distance to ``1e-35``)."""
        doms = getattr(self.display, "domains", None)
        if doms is None or t.categories is not None or t.threshold is None or t.op not in ("<=", ">"):
            return t.margin
        dom = doms[t.index]
        step = dom.resolution
        if step <= 0 or not (math.isfinite(t.value) and math.isfinite(t.threshold)):
            return t.margin
        o = dom.origin(t.value)
        k = math.floor((t.threshold - o) / step)
        nearest = o + (k + 1) * step if t.op == "<=" else o + k * step  # first domain value past the test
        up = t.op == "<="
        w = float(self.metric.up[t.index] if up else self.metric.down[t.index])
        return abs(nearest - t.value) * w

    def _case(self, i: int) -> CaseSensitivity:
        ok = bool(self.target_group[i] >= 0)
        x = self.X[i]
        p = self.point[i] if ok else None
        tests = self._shown(self.tests_of(x, p, int(self.leaf[i]))) if ok else ()
        per_class: dict[Any, ClassChange] = {}
        if self.group_distance is not None and self.group_point is not None and len(self.group_labels) > 2:
            for g, label in enumerate(self.group_labels):
                if g == self.group[i]:
                    continue
                dist = float(self.group_distance[i, g])
                reach = bool(np.isfinite(dist))
                gp = self.group_point[i, g] if reach else None
                gl = int(self.group_leaf[i, g]) if self.group_leaf is not None else -1
                per_class[label] = ClassChange(label, dist, gp, self._shown(self.tests_of(x, gp, gl)) if reach else (),
                                               reach)
        pred = self.predictions[i] if self.predictions is not None else self.group_labels[int(self.group[i])]
        return CaseSensitivity(
            row=int(self.rows[i]) if self.rows is not None else i, prediction=_plain(pred),
            trace=int(self.trace[i]), distance=float(self.distance[i]), tests=tests, point=p,
            target=self.group_labels[int(self.target_group[i])] if ok else None, reachable=ok,
            exact=self.exact if self.case_exact is None else bool(self.case_exact[i]), method=self.method,
            verified=bool(self.verified[i]), per_class=per_class,
            message=self.messages.get(i, "" if ok else UNREACHABLE))

    def to_json(self) -> dict[str, Any]:
        """JSON-ready dict: metric, method and one entry per case."""
        names = self.metric.names
        return {"method": self.method, "exact": self.exact, "metric": self.metric.describe(),
                "not_applied": [n.to_dict() for n in self.not_applied], "cases": [c.to_dict(names) for c in self]}


def _plain(v: Any) -> Any:
    if isinstance(v, np.generic):
        v = v.item()
    if isinstance(v, float) and not np.isfinite(v):
        return None if np.isnan(v) else ("inf" if v > 0 else "-inf")
    return v


def _num(v: float) -> str:
    if isinstance(v, float) and v.is_integer() and abs(v) < 1e15:
        return str(int(v))
    return f"{v:.6g}"


__all__ = ["SensitiveTest", "ClassChange", "CaseSensitivity", "SensitiveResult", "UNREACHABLE"]
