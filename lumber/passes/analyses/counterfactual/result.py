"""What a counterfactual query returns: the point, its changes, its cost, how sure we are of it."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt

from lumber.ir import FeatureKind, InputDataError, Schema
from lumber.ir.decision import class_index, class_labels
from lumber.ir.display import readable

from .solver import INFEASIBLE, NO_SOLUTION, OPTIMAL, TIME_LIMIT

FloatArray = npt.NDArray[np.float64]


def _label(schema: Schema, i: int, v: float) -> Any:
    """A feature value for people: the category label when the schema names it, else the number."""
    f = schema.features[i]
    if isinstance(v, float) and np.isnan(v):
        return None
    if f.categories is not None and float(v).is_integer() and 0 <= int(v) < len(f.categories):
        return f.categories[int(v)]
    return int(v) if float(v).is_integer() and abs(v) < 2**53 else float(v)


def _plain(v: Any) -> Any:
    if isinstance(v, np.generic):
        return v.item()
    if isinstance(v, float) and not math.isfinite(v):
        return None if math.isnan(v) else ("inf" if v > 0 else "-inf")
    return v


@dataclass(frozen=True)
class Change:
    """One changed feature: its value before and after (labels for named categories)."""

    feature: str
    before: Any
    after: Any
    delta: float | None
    """``after - before`` for numeric features; None for categories."""
    before_text: str = ""
    after_text: str = ""
    """The values for people (:class:`lumber.ir.display.Display`): labels, shortest decimals in the same cell."""

    def to_dict(self) -> dict[str, Any]:
        return {"feature": self.feature, "before": _plain(self.before), "after": _plain(self.after),
                "delta": _plain(self.delta), "before_text": self.before_text or _text(self.before),
                "after_text": self.after_text or _text(self.after)}


def _text(v: Any) -> str:
    from lumber.ir.display import number_text

    return number_text(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else str(v)


@dataclass
class CounterfactualResult:
    """The outcome of one counterfactual query.

    ``status`` is ``"optimal"`` (proven minimal within the MIP gap), ``"time_limit"``
    (feasible and verified but not proven minimal; see ``gap``), ``"infeasible"``
    (no point meets the target under the constraints), or ``"no_solution"`` (the
    time ran out before any point was found). ``x`` is None unless a point was found.
    """

    status: str
    schema: Schema
    x0: FloatArray
    x: FloatArray | None
    target: str
    norm: str
    cost: float = math.inf
    """The norm of the change, computed on the returned point (l2: the root of the sum of squares)."""
    objective: float = math.inf
    """The MILP objective (l2: the sum of squares)."""
    bound: float = math.nan
    """Best proven lower bound on the objective."""
    gap: float = math.nan
    verified: bool = False
    """The model (through its own library when given) predicts the target at ``x``."""
    prediction: Any = None
    original_prediction: Any = None
    violations: list[str] = field(default_factory=list)
    """Constraints ``x`` breaks (always empty for a returned point unless something is wrong)."""
    solve_seconds: float = 0.0
    total_seconds: float = 0.0
    n_variables: int = 0
    n_binaries: int = 0
    n_rows: int = 0
    nnz: int = 0
    epsilon: float = 0.0
    attempts: int = 0
    message: str = ""
    blocking: str = ""
    """For an infeasible query: the one constraint without which a point reaches the target (empty when
    none does alone, or when the query has no constraints)."""
    alternatives: list["CounterfactualResult"] = field(default_factory=list)
    """Further diverse counterfactuals (``k > 1``), each with a different change pattern."""
    display: Any = field(default=None, repr=False, compare=False)
    """The :class:`lumber.ir.display.Display` that prints values for people (None: plain numbers)."""

    @property
    def found(self) -> bool:
        return self.x is not None

    @property
    def optimal(self) -> bool:
        return self.status == OPTIMAL

    @property
    def infeasible(self) -> bool:
        return self.status == INFEASIBLE

    @property
    def timed_out(self) -> bool:
        return self.status in (TIME_LIMIT, NO_SOLUTION)

    @property
    def changes(self) -> list[Change]:
        if self.x is None:
            return []
        out = []
        for i, f in enumerate(self.schema.features):
            a, b = float(self.x0[i]), float(self.x[i])
            if a == b or (np.isnan(a) and np.isnan(b)):
                continue
            cat = f.kind == FeatureKind.CATEGORICAL
            ta, tb = (self.display.value(i, a), self.display.value(i, b, a)) if self.display is not None else ("", "")
            out.append(Change(f.name, _label(self.schema, i, a), _label(self.schema, i, b), None if cat else b - a,
                              ta, tb))
        return out

    @property
    def values(self) -> dict[str, Any]:
        """The counterfactual as ``{feature: value}`` (category labels where known)."""
        if self.x is None:
            return {}
        return {f.name: _label(self.schema, i, float(self.x[i])) for i, f in enumerate(self.schema.features)}

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {
            "status": self.status, "target": self.target, "norm": self.norm, "verified": self.verified,
            "cost": _plain(self.cost), "objective": _plain(self.objective), "bound": _plain(self.bound),
            "gap": _plain(self.gap), "prediction": _plain(self.prediction),
            "original_prediction": _plain(self.original_prediction),
            "changes": [c.to_dict() for c in self.changes],
            "counterfactual": {k: _plain(v) for k, v in self.values.items()} if self.x is not None else None,
            "violations": list(self.violations), "solve_seconds": self.solve_seconds,
            "total_seconds": self.total_seconds,
            "model_size": {"variables": self.n_variables, "binaries": self.n_binaries, "rows": self.n_rows,
                           "nonzeros": self.nnz},
            "epsilon": self.epsilon, "attempts": self.attempts, "message": self.message, "blocking": self.blocking,
        }
        if self.alternatives:
            d["alternatives"] = [a.to_dict() for a in self.alternatives]
        return d

    @staticmethod
    def _decision(label: Any, schema: Schema | None) -> str:
        """A predicted label as people read it: the class's name when the schema names the classes."""
        if schema is not None and schema.class_names is not None and label is not None:
            try:
                return schema.class_text(class_index(class_labels(schema), _plain(label)))
            except InputDataError:
                pass
        return repr(_plain(label))

    def summary(self, schema: Schema | None = None) -> str:
        """One line per change, for the CLI; ``schema``: decisions by class name (``Schema.class_text``)."""
        if self.x is None:
            return f"{self.status}: {self.message or 'no counterfactual'}"
        if not self.changes and self.verified:
            return (f"no change needed: the case already gets {self.target} "
                    f"(prediction {self._decision(self.prediction, schema)})")
        head = (f"{self.status}{'' if self.verified else ' (NOT verified)'}: cost {readable(self.cost)} "
                f"({self.norm}), prediction {self._decision(self.original_prediction, schema)} -> "
                f"{self._decision(self.prediction, schema)}")
        lines = [head] + [f"  {c.feature}: {c.before_text or _text(c.before)} -> {c.after_text or _text(c.after)}"
                          for c in self.changes]
        return "\n".join(lines)
