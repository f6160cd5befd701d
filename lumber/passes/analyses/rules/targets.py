"""Decisions and target sets: what "the prediction is in Y*" means for a model.

For a classifier a decision is the class index (argmax of ``predict_proba``, as
``predict`` chooses) and the target set is one or more classes (by default
every class but the current one). For a regressor the decision is the
prediction and the target set an interval ``[a, b]`` (papers.md section 4).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np
import numpy.typing as npt

from lumber.ir import Forest, InputDataError, Task, UnsupportedModelError

FloatArray = npt.NDArray[np.float64]
BoolArray = npt.NDArray[np.bool_]


def is_classifier(forest: Forest) -> bool:
    return forest.schema.task in (Task.BINARY, Task.MULTICLASS)


def class_labels(forest: Forest) -> tuple[Any, ...]:
    s = forest.schema
    k = 2 if s.task == Task.BINARY else s.n_outputs
    return tuple(s.classes) if s.classes is not None else tuple(range(k))


def decisions(forest: Forest, X: Any) -> FloatArray:
    """Class index per row (classifiers) or the prediction (regressors), from the explained model."""
    s = forest.schema
    if s.task == Task.ANOMALY:
        raise UnsupportedModelError("counterfactual rules explain classifiers and regressors, not anomaly scores")
    margin = forest.evaluate(X)
    if is_classifier(forest):
        return np.argmax(s.proba(margin), axis=1).astype(np.float64)  # type: ignore[no-any-return]
    if forest.n_outputs != 1:
        raise UnsupportedModelError("counterfactual rules on multi-output regression are not supported")
    return np.asarray(s.transform(margin), dtype=np.float64).reshape(-1)


@dataclass(frozen=True)
class RuleTarget:
    """The target set Y*: class indices (with their labels) or a closed interval."""

    classes: tuple[int, ...] | None = None
    labels: tuple[Any, ...] | None = None
    interval: tuple[float, float] | None = None

    def hit(self, decision: FloatArray) -> BoolArray:
        d = np.asarray(decision, dtype=np.float64)
        if self.interval is not None:
            lo, hi = self.interval
            return (d >= lo) & (d <= hi)  # type: ignore[no-any-return]
        assert self.classes is not None
        return np.isin(d, np.asarray(self.classes, dtype=np.float64))

    @property
    def key(self) -> tuple[Any, ...]:
        return (self.classes, self.interval)

    def describe(self) -> str:
        if self.interval is not None:
            lo, hi = self.interval
            return f"prediction in [{lo:g}, {hi:g}]"
        assert self.classes is not None and self.labels is not None
        names = [str(self.labels[c]) for c in self.classes]
        if not names:
            return "no target"
        return f"prediction = {names[0]}" if len(names) == 1 else f"prediction in {{{', '.join(names)}}}"

    def to_dict(self) -> dict[str, Any]:
        if self.interval is not None:
            return {"interval": [float(self.interval[0]), float(self.interval[1])]}
        assert self.classes is not None and self.labels is not None
        return {"classes": [_plain(self.labels[c]) for c in self.classes]}


def _plain(v: Any) -> Any:
    return v.item() if isinstance(v, np.generic) else v


def _class_index(labels: tuple[Any, ...], target: Any) -> int:
    for i, lab in enumerate(labels):
        if lab == target:
            return i
    for i, lab in enumerate(labels):
        if str(lab) == str(target):
            return i
    raise InputDataError(f"target {target!r} is not a class of this model",
                         f"classes: {', '.join(map(str, labels))}")


def resolve_target(forest: Forest, target: Any, current: float | None) -> RuleTarget:
    """Y* from a user's target: a label, labels, ``(a, b)``, a ``lumber.ir.Target`` or None.

    ``None`` means "any other class than ``current``" for a classifier; a
    regressor needs an interval.
    """
    from lumber.ir import Target

    if isinstance(target, Target):
        target = target.interval if target.interval is not None else target.label
    if not is_classifier(forest):
        if target is None:
            raise InputDataError("a regression model needs a target interval for counterfactual rules",
                                 "pass target=(a, b): the rules move the prediction into [a, b]")
        try:
            lo, hi = (float(v) for v in target)
        except (TypeError, ValueError):
            raise InputDataError(f"target {target!r} is not an interval",
                                 "a regression model needs target=(a, b)") from None
        if not lo <= hi:
            raise InputDataError(f"target interval [{lo:g}, {hi:g}] is empty", "give a <= b")
        return RuleTarget(interval=(lo, hi))
    labels = class_labels(forest)
    if target is None:
        if current is None:
            raise InputDataError("no target class given and no current decision to move away from",
                                 f"pass target= one of: {', '.join(map(str, labels))}")
        return RuleTarget(tuple(i for i in range(len(labels)) if i != int(current)), labels)
    if isinstance(target, (list, tuple, set, frozenset)) and not isinstance(target, str):
        idx = tuple(sorted({_class_index(labels, t) for t in target}))
        if not idx:
            raise InputDataError("the target class list is empty")
        return RuleTarget(idx, labels)
    return RuleTarget((_class_index(labels, target),), labels)


def describe_decision(forest: Forest, decision: float) -> Any:
    """The user-facing prediction for a decision value (class label or number)."""
    if is_classifier(forest):
        return _plain(class_labels(forest)[int(decision)])
    return float(decision)


def target_labels(targets: Sequence[RuleTarget]) -> list[str]:
    return [t.describe() for t in targets]


__all__ = ["RuleTarget", "class_labels", "decisions", "describe_decision", "is_classifier", "resolve_target"]
