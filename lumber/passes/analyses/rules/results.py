"""Results of counterfactual rules: dataclasses with ``to_dict()`` (JSON) and ``to_text()`` (IF-THEN).

A local result explains one case: the divergent set S, its CDP, the rules
(disjoint boxes over S, most plausible first) and counterfactual samples drawn
from them. A regional result does the same for a hyper-rectangle of cases.
An empty result is a status with a message, never an exception:

* ``found``: at least one rule reaches ``pi_c``;
* ``no_divergent_set``: no feature set (within the search limits) reaches ``pi``;
* ``no_rule``: S reaches ``pi`` but no box over S reaches ``pi_c``;
* ``already_target``: the case is already in the target set;
* ``empty_region``: no training row lies in the region.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Iterator, Sequence

import numpy as np
import numpy.typing as npt

from lumber.ir import Feature, Target

from .text import condition, spans_domain, value_text

FloatArray = npt.NDArray[np.float64]

FOUND = "found"
NO_DIVERGENT_SET = "no_divergent_set"
NO_RULE = "no_rule"
ALREADY_TARGET = "already_target"
EMPTY_REGION = "empty_region"


def _num(v: float) -> float | None:
    """JSON number; infinite bounds become null."""
    return None if not np.isfinite(v) else float(v)


def _show(v: Any) -> str:
    return f"{v:.6g}" if isinstance(v, float) else str(v)


@dataclass(frozen=True)
class Interval:
    """``lo < x <= hi`` on one feature (``-inf``/``inf`` when open-ended)."""

    feature: Feature
    index: int
    lo: float
    hi: float
    shown: Any = field(default=None, compare=False, repr=False)
    """The request's :class:`lumber.ir.display.Display` (thresholds and labels for people), or None."""

    def contains(self, v: FloatArray) -> npt.NDArray[np.bool_]:
        with np.errstate(invalid="ignore"):
            return (np.asarray(v) > self.lo) & (np.asarray(v) <= self.hi)  # type: ignore[no-any-return]

    @property
    def unconstrained(self) -> bool:
        """The interval spans the feature's whole domain (``any value``): no condition at all."""
        return spans_domain(self.feature, self.lo, self.hi, self.shown, self.index)

    def to_text(self) -> str:
        return condition(self.feature, self.lo, self.hi, self.shown, self.index)

    def to_dict(self) -> dict[str, Any]:
        return {"feature": self.feature.name, "lo": _num(self.lo), "hi": _num(self.hi),
                "text": self.to_text()}


@dataclass(frozen=True)
class Rule:
    """A box over S: IF every interval holds (other features as stated) THEN target with ``probability``."""

    intervals: tuple[Interval, ...]
    probability: float
    """CRP: the Regional RF estimate of P(prediction in Y* | X_S in box, rest fixed)."""
    plausibility: float
    """Projected Forest estimate of P(X_S in box | rest fixed): how common such values are."""
    support: float
    """Share of all training rows whose values on S lie in the box."""
    inliers: float | None = None
    """With an inlier score: the Projected Forest weight of the box's training values whose
    counterfactual point (the case with S set to them) is an inlier reaching the target, as a
    share of all weight (same scale as ``plausibility``). Regional rules: each value's weight is
    scaled by the share of the region's cases (a sample of them) for which its point is one.
    0: annealing inside the box can only return outliers among training values. None when not
    computed (no scorer)."""

    def contains(self, X: FloatArray) -> npt.NDArray[np.bool_]:
        X2 = np.atleast_2d(X)
        out = np.ones(X2.shape[0], dtype=bool)
        for iv in self.intervals:
            out &= iv.contains(X2[:, iv.index])
        return out

    @property
    def lo(self) -> FloatArray:
        return np.array([iv.lo for iv in self.intervals])

    @property
    def hi(self) -> FloatArray:
        return np.array([iv.hi for iv in self.intervals])

    @property
    def unconstrained(self) -> tuple[str, ...]:
        """The features of S the box leaves free (their interval spans the whole domain): they may take any
        value, so they are named as free, never printed as a condition (``Occupation is any value``)."""
        return tuple(iv.feature.name for iv in self.intervals if iv.unconstrained)

    def condition_text(self) -> str:
        """The conditions that constrain something, joined by AND (``any value of A, B`` when none does)."""
        parts = [iv.to_text() for iv in self.intervals if not iv.unconstrained]
        return " AND ".join(parts) if parts else f"any value of {', '.join(self.unconstrained)}"

    def scope_text(self, rest: str) -> str:
        """What holds beside the conditions: the free features of S (when some are constrained), then ``rest``
        (the other features unchanged, or the region's conditions)."""
        free = self.unconstrained
        if not free or len(free) == len(self.intervals):
            return rest
        return f"{', '.join(free)}: any value; {rest}"

    def to_dict(self) -> dict[str, Any]:
        return {"if": [iv.to_dict() for iv in self.intervals if not iv.unconstrained],
                "unconstrained": list(self.unconstrained), "probability": float(self.probability),
                "plausibility": float(self.plausibility), "support": float(self.support),
                "inliers": None if self.inliers is None else float(self.inliers), "text": self.condition_text()}


@dataclass(frozen=True)
class Change:
    feature: str
    before: float
    after: float
    before_text: str = ""
    after_text: str = ""
    """The values for people (category labels); empty: print the numbers."""

    def to_dict(self) -> dict[str, Any]:
        d = {"feature": self.feature, "before": _num(self.before), "after": _num(self.after)}
        if self.before_text or self.after_text:
            d["before_text"], d["after_text"] = self.before_text, self.after_text
        return d


@dataclass(frozen=True)
class CounterfactualSample:
    """A concrete case drawn from a rule (simulated annealing), checked on the explained model."""

    x: FloatArray
    changes: tuple[Change, ...]
    prediction: Any
    verified: bool
    """The explained model (and the source model object, when given) predicts a target decision."""
    inlier_score: float
    """Isolation-forest score (``decision_function``): >= 0 is an inlier."""
    rule: int
    """Index of the rule the sample was drawn from."""
    violations: tuple[str, ...] = ()
    """Constraints the sample breaks (relations, implications), if any."""
    robustness: tuple[tuple[float, float], ...] = ()
    """``(sigma^2, share)``: share of noisy copies that keep the target, Gaussian noise of variance
    sigma^2 on the changed features scaled to [0, 1] by their training range (the paper's
    noisy-response test; ``recourse.ROBUSTNESS_SIGMA2``)."""

    @property
    def inlier(self) -> bool:
        return bool(self.inlier_score >= 0)

    def to_dict(self) -> dict[str, Any]:
        return {"x": [_num(v) for v in self.x], "changes": [c.to_dict() for c in self.changes],
                "prediction": self.prediction, "verified": bool(self.verified),
                "inlier_score": float(self.inlier_score), "inlier": self.inlier, "rule": self.rule,
                "violations": list(self.violations),
                "robustness": [{"sigma2": float(a), "share": float(b)} for a, b in self.robustness]}

    def to_text(self, features: Sequence[Feature], before: Any = None, target: Target | None = None) -> str:
        """``sample: F: a -> b; ...; prediction p -> q [flags]``; the prediction is its own clause (it is
        not a third value of the last feature), from ``before`` (the case's prediction) when known."""
        by = {f.name: f for f in features}
        ch = "; ".join(f"{c.feature}: {value_text(by[c.feature], c.before)} -> {value_text(by[c.feature], c.after)}"
                       for c in self.changes) or "no change"
        pred = _show(self.prediction) if before is None else f"{_show(before)} -> {_show(self.prediction)}"
        if target is not None:  # decisions by class name when the classes are named
            pred = target.decision_text(self.prediction) if before is None else (
                f"{target.decision_text(before)} -> {target.decision_text(self.prediction)}")
        flags = ["verified" if self.verified else "NOT VERIFIED", "inlier" if self.inlier else "outlier"]
        flags.append(f"score {self.inlier_score:.3f}")
        if self.robustness:
            flags.append("keeps the target under noise sigma^2 " + "/".join(f"{a:g}" for a, _ in self.robustness)
                         + ": " + "/".join(f"{b:.2f}" for _, b in self.robustness))
        text = f"sample: {ch}; prediction {pred} [{', '.join(flags)}]"
        if self.violations:
            text += f" (breaks: {'; '.join(self.violations)})"
        return text


@dataclass(frozen=True)
class SearchInfo:
    candidates: tuple[str, ...]
    evaluated: int
    sampled: bool
    best_by_size: tuple[float, ...]
    sets_tried: int = 0

    def to_dict(self) -> dict[str, Any]:
        return {"candidates": list(self.candidates), "subsets_evaluated": self.evaluated,
                "sampled": self.sampled, "best_cdp_by_size": [float(v) for v in self.best_by_size],
                "sets_tried": self.sets_tried}


@dataclass
class CounterfactualRule:
    """Local (``region is None``) or regional counterfactual rule result."""

    status: str
    message: str
    target: Target
    features: tuple[str, ...]
    """S: the features the rules move (the minimal divergent explanation)."""
    cdp: float
    pi: float
    pi_c: float
    reached_pi: bool = False
    """S is a divergent set (CDP >= pi); False when the rules use the best set short of pi."""
    rules: tuple[Rule, ...] = ()
    samples: tuple[CounterfactualSample, ...] = ()
    search: SearchInfo | None = None
    schema_features: tuple[Feature, ...] = ()
    x: FloatArray | None = None
    """The case explained (local rules)."""
    prediction: Any = None
    """The model's prediction for the case (local) or the region's majority decision (regional)."""
    region: tuple[Interval, ...] | None = None
    """The region's bounded intervals (regional rules)."""
    region_rows: int = 0
    """Training rows in the region (regional rules)."""
    row: int | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def found(self) -> bool:
        return self.status == FOUND

    @property
    def rule(self) -> Rule | None:
        """The most plausible rule, if any."""
        return self.rules[0] if self.rules else None

    @property
    def sparsity(self) -> int:
        return len(self.features)

    @property
    def is_regional(self) -> bool:
        return self.region is not None

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {
            "kind": "regional" if self.is_regional else "local", "status": self.status, "message": self.message,
            "target": self.target.to_dict(), "prediction": self.prediction, "features": list(self.features),
            "cdp": float(self.cdp), "reached_pi": bool(self.reached_pi), "pi": self.pi, "pi_c": self.pi_c,
            "rules": [r.to_dict() for r in self.rules],
            "samples": [s.to_dict() for s in self.samples],
            "search": self.search.to_dict() if self.search is not None else None,
        }
        if self.row is not None:
            d["row"] = int(self.row)
        if self.x is not None:
            d["x"] = [_num(v) for v in self.x]
        if self.region is not None:
            d["region"] = [iv.to_dict() for iv in self.region]
            d["region_training_rows"] = int(self.region_rows)
        d.update(self.extra)
        return d

    def to_text(self) -> str:
        who = (f"row {self.row}" if self.row is not None else "case") if not self.is_regional else "region"
        lines = []
        if self.is_regional:
            reg = " AND ".join(iv.to_text() for iv in self.region or ()) or "every case"
            lines.append(f"region IF {reg} ({self.region_rows} training rows, mostly {self.prediction}); "
                         f"target {self.target.describe()}")
        else:
            lines.append(f"{who}: predicted {self.target.decision_text(self.prediction)}; "
                         f"target {self.target.describe()}")
        if not self.found:
            lines.append(f"  {self.status}: {self.message}")
            return "\n".join(lines)
        if self.reached_pi:
            lines.append(f"  divergent set S = {{{', '.join(self.features)}}} (CDP {self.cdp:.3f} >= pi {self.pi:g})")
        else:
            lines.append(f"  feature set S = {{{', '.join(self.features)}}} (CDP {self.cdp:.3f} < pi {self.pi:g}: "
                         "no set reaches pi; the rules below still reach pi_c)")
        rest = "the rest of the region's conditions" if self.is_regional else "every other feature unchanged"
        for i, r in enumerate(self.rules):
            lines.append(f"  rule {i + 1}: IF {r.condition_text()} ({r.scope_text(rest)})")
            inl = "" if r.inliers is None else f", plausible points {r.inliers:.3f}"
            lines.append(f"          THEN {self.target.describe()} with probability {r.probability:.3f} "
                         f"(plausibility {r.plausibility:.3f}{inl}, support {100 * r.support:.1f}% of training rows)")
        for s in self.samples:
            lines.append(f"  {s.to_text(self.schema_features, None if self.is_regional else self.prediction, self.target)}")
        return "\n".join(lines)


@dataclass
class RuleSet:
    """Results for many cases or regions, in order."""

    results: list[CounterfactualRule]
    info: dict[str, Any] = field(default_factory=dict)

    def __len__(self) -> int:
        return len(self.results)

    def __iter__(self) -> Iterator[CounterfactualRule]:
        return iter(self.results)

    def __getitem__(self, i: int) -> CounterfactualRule:
        return self.results[i]

    def summary(self) -> dict[str, Any]:
        n = len(self.results)
        found = [r for r in self.results if r.found]
        by_status: dict[str, int] = {}
        for r in self.results:
            by_status[r.status] = by_status.get(r.status, 0) + 1
        samples = [s for r in found for s in r.samples[:1]]
        return {
            "n": n, "found": len(found), "by_status": by_status,
            "mean_sparsity": float(np.mean([r.sparsity for r in found])) if found else None,
            "verified_samples": sum(s.verified for s in samples), "inlier_samples": sum(s.inlier for s in samples),
            "samples": len(samples),
        }

    def to_dict(self) -> dict[str, Any]:
        return {"summary": self.summary(), "info": dict(self.info), "results": [r.to_dict() for r in self.results]}

    def to_text(self) -> str:
        s = self.summary()
        head = f"counterfactual rules: {s['found']} of {s['n']} found"
        if s["samples"]:
            head += (f"; samples verified {s['verified_samples']}/{s['samples']}, "
                     f"inliers {s['inlier_samples']}/{s['samples']}")
        return "\n".join([head] + [r.to_text() for r in self.results])


__all__ = [
    "ALREADY_TARGET", "EMPTY_REGION", "FOUND", "NO_DIVERGENT_SET", "NO_RULE", "Change", "CounterfactualRule",
    "CounterfactualSample", "Interval", "Rule", "RuleSet", "SearchInfo",
]
