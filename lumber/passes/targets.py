"""The decision an explanation seeks, resolved one way for every explainer.

A classifier's decision is the index of the class ``predict`` picks
(:meth:`~lumber.ir.Schema.class_index`, which follows the library's tie rule);
a regressor's is its prediction. A target set is one or more classes (by
default every class but the case's own) or a closed interval ``[lo, hi]`` of
the prediction. Counterfactuals, sensitive tests and counterfactual rules all
resolve a user's target here (a label, several labels, ``(lo, hi)``, a
:class:`lumber.ir.Target` or None) and check the source model's answers with
:meth:`TargetSet.satisfied`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from lumber.ir import Forest, InputDataError, Schema, Task, UnsupportedModelError

FloatArray = npt.NDArray[np.float64]
BoolArray = npt.NDArray[np.bool_]


def is_classifier(model: Forest | Schema) -> bool:
    s = model.schema if isinstance(model, Forest) else model
    return s.task in (Task.BINARY, Task.MULTICLASS)


def class_labels(model: Forest | Schema) -> tuple[Any, ...]:
    """The class labels in output order (class indices when the model records none)."""
    s = model.schema if isinstance(model, Forest) else model
    k = 2 if s.task == Task.BINARY else s.n_outputs
    return tuple(s.classes) if s.classes is not None else tuple(range(k))


def margin_decisions(schema: Schema, margins: FloatArray) -> FloatArray:
    """Class index (classifiers) or prediction (regressors) of raw margins, as ``predict`` decides."""
    if schema.task == Task.ANOMALY:
        raise UnsupportedModelError("explanations need a classifier or a regressor, not anomaly scores",
                                    "an isolation forest has no decision surface between classes")
    if schema.task in (Task.BINARY, Task.MULTICLASS):
        return schema.class_index(margins).astype(np.float64)
    if schema.n_outputs != 1:
        raise UnsupportedModelError("explanations of multi-output regression are not supported")
    return np.asarray(schema.transform(margins), dtype=np.float64).reshape(-1)


def decisions(forest: Forest, X: Any) -> FloatArray:
    """Decision per row of ``X`` (see :func:`margin_decisions`)."""
    return margin_decisions(forest.schema, forest.evaluate(X))


def plain(v: Any) -> Any:
    """A numpy scalar as the Python value (labels for JSON and messages)."""
    return v.item() if isinstance(v, np.generic) else v


def _same_label(p: Any, label: Any) -> bool:
    return bool(p == label or str(p) == str(label))


@dataclass(frozen=True)
class TargetSet:
    """The decisions sought: class indices (with the model's labels) or a closed interval."""

    classes: tuple[int, ...] | None = None
    labels: tuple[Any, ...] | None = None
    interval: tuple[float, float] | None = None

    def hit(self, decision: FloatArray) -> BoolArray:
        """Which decisions (:func:`decisions`) are in the set."""
        d = np.asarray(decision, dtype=np.float64)
        if self.interval is not None:
            lo, hi = self.interval
            return np.asarray((d >= lo) & (d <= hi), dtype=bool)
        assert self.classes is not None
        return np.isin(d, np.asarray(self.classes, dtype=np.float64))

    def satisfied(self, predictions: Any) -> BoolArray:
        """Which outputs of the source model's ``predict`` (labels or values) are in the set."""
        p = np.asarray(predictions).reshape(-1)
        if self.interval is not None:
            lo, hi = self.interval
            v = p.astype(np.float64)
            return np.asarray((v >= lo) & (v <= hi), dtype=bool)
        assert self.classes is not None and self.labels is not None
        wanted = [self.labels[c] for c in self.classes]
        return np.array([any(_same_label(v, lab) for lab in wanted) for v in p.tolist()], dtype=bool)

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
        return {"classes": [plain(self.labels[c]) for c in self.classes]}


def class_index(labels: tuple[Any, ...], target: Any) -> int:
    """Index of a class label: an exact match first, then one by text (``"1"`` finds ``1``)."""
    for i, lab in enumerate(labels):
        if lab == target:
            return i
    for i, lab in enumerate(labels):
        if str(lab) == str(target):
            return i
    raise InputDataError(f"target {target!r} is not a class of this model",
                         f"classes: {', '.join(map(str, labels))}")


def resolve_target(model: Forest | Schema, target: Any, current: float | None = None, *,
                   explainer: str = "explanations") -> TargetSet:
    """Y* from a user's target: a label, labels, ``(lo, hi)``, a :class:`lumber.ir.Target` or None.

    ``None`` means "any class but ``current``" (a class index) for a classifier; a regressor
    needs an interval. ``explainer`` names the caller in messages.
    """
    s = model.schema if isinstance(model, Forest) else model
    if target is not None and hasattr(target, "label") and hasattr(target, "interval"):
        target = target.interval if target.interval is not None else target.label
    if s.task == Task.REGRESSION:
        if target is None:
            raise InputDataError(f"a regression model needs a target interval for {explainer}",
                                 "pass target=(lo, hi): the decision explained is 'prediction in [lo, hi]'")
        if isinstance(target, str):
            target = (target,)
        try:
            lo, hi = (float(v) for v in target)
        except (TypeError, ValueError):
            raise InputDataError(f"target {target!r} is not an interval",
                                 "a regression model needs target=(lo, hi), e.g. target=(0.5, inf)") from None
        if not lo <= hi:
            raise InputDataError(f"target interval [{lo:g}, {hi:g}] is empty", "give lo <= hi")
        return TargetSet(interval=(lo, hi))
    if s.task not in (Task.BINARY, Task.MULTICLASS):
        raise UnsupportedModelError(f"{explainer} need a classifier or a regressor, not a {s.task.name.lower()} model")
    labels = class_labels(s)
    if target is None:
        if current is None:
            raise InputDataError("no target class given and no current decision to move away from",
                                 f"pass target= one of: {', '.join(map(str, labels))}")
        return TargetSet(tuple(i for i in range(len(labels)) if i != int(current)), labels)
    if isinstance(target, (list, tuple, set, frozenset)):
        idx = tuple(sorted({class_index(labels, t) for t in target}))
        if not idx:
            raise InputDataError("the target class list is empty")
        return TargetSet(idx, labels)
    return TargetSet((class_index(labels, target),), labels)


__all__ = ["TargetSet", "class_index", "class_labels", "decisions", "is_classifier", "margin_decisions", "plain",
           "resolve_target"]
