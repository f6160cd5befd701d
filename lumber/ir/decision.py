"""The decision an explanation seeks, and the rule that decides: one :class:`Target` for every explainer.

A classifier's decision is the index of the class ``predict`` picks
(:meth:`Schema.class_index`, which follows the library's tie rule, or the
user's :class:`~lumber.ir.Cutoff` when the schema carries one); a regressor's
is its prediction. A target is one or more classes (by default every class but
the case's own), a closed interval ``[lo, hi]`` of the prediction, or a
threshold on a binary classifier's probability or margin
(``target probability of class 1 <= 0.3``): the threshold is both the decision
rule (class 1 iff P(class 1) > 0.3) and the side of it sought.

Counterfactuals, sensitive tests, counterfactual rules, reports and gates all
resolve a user's target with :func:`resolve_target` (a label, several labels,
``(lo, hi)``, a :class:`Target` or None) and check the source model's answers
with :meth:`Target.satisfied`.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any, Protocol

import numpy as np
import numpy.typing as npt

from .diagnostics import InputDataError, UnsupportedModelError
from .schema import Cutoff, Schema, Task

FloatArray = npt.NDArray[np.float64]
BoolArray = npt.NDArray[np.bool_]


class Model(Protocol):
    """What the decision helpers read of a model (a :class:`~lumber.ir.Forest`): its schema and margins."""

    @property
    def schema(self) -> Schema: ...

    def evaluate(self, X: Any) -> FloatArray: ...


def _schema(model: "Model | Schema") -> Schema:
    return model if isinstance(model, Schema) else model.schema


def is_classifier(model: "Model | Schema") -> bool:
    return _schema(model).task in (Task.BINARY, Task.MULTICLASS)


def class_labels(model: "Model | Schema") -> tuple[Any, ...]:
    """The class labels in output order (class indices when the model records none)."""
    s = _schema(model)
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


def decisions(forest: Model, X: Any) -> FloatArray:
    """Decision per row of ``X`` (see :func:`margin_decisions`)."""
    return margin_decisions(forest.schema, forest.evaluate(X))


def plain(v: Any) -> Any:
    """A numpy scalar as the Python value (labels for JSON and messages)."""
    return v.item() if isinstance(v, np.generic) else v


def _same_label(p: Any, label: Any) -> bool:
    return bool(p == label or str(p) == str(label))


@dataclass(frozen=True)
class Target:
    """The decision sought.

    As a user states it: ``label`` (a class label, or a tuple of labels meaning "any of these"),
    ``interval`` (a regressor's prediction in ``[lo, hi]``), or a threshold: ``cutoff`` on class
    ``label``'s probability or margin, sought ``below`` it (``score <= value``; ``<`` when the cutoff
    is inclusive) or above it (``below=False``: ``score > value``; ``>=``), as in
    ``target probability of class 1 <= 0.3``. A ``cutoff`` with ``below=None`` is only the decision
    rule: ``label`` is then the class sought under it (None: the case's other class). ``None``
    everywhere: any class but the case's own, by the model's own rule.

    Resolved for a model (:func:`resolve_target`): ``classes`` are the class indices sought and
    ``labels`` the model's class labels; ``label`` is then the class sought when there is one, and
    ``cutoff`` the decision rule every check follows (the schema's, :meth:`apply`).
    """

    label: Any = None
    interval: tuple[float, float] | None = None
    cutoff: Cutoff | None = None
    below: bool | None = None
    classes: tuple[int, ...] | None = None
    labels: tuple[Any, ...] | None = None
    names: tuple[str, ...] | None = None
    """What the classes mean to people (``Schema.class_names``), when the schema names them."""

    # -- the user's forms -----------------------------------------------------------------

    @staticmethod
    def threshold(value: float, *, on: str = "probability", below: bool = True, label: Any = 1,
                  inclusive: bool = False) -> "Target":
        """``P(class label) <= value`` (``below``) or ``> value``; ``inclusive`` makes them ``<`` and ``>=``."""
        return Target(label=label, cutoff=Cutoff(value, on, inclusive), below=below)

    @property
    def resolved(self) -> bool:
        return self.classes is not None or self.interval is not None

    # -- one resolved target --------------------------------------------------------------

    @property
    def kind(self) -> str:
        """``"class"`` or ``"interval"``."""
        return "interval" if self.interval is not None else "class"

    @property
    def index(self) -> int | None:
        """The one class index sought (None: an interval, or any of several classes)."""
        return self.classes[0] if self.classes is not None and len(self.classes) == 1 else None

    def each(self) -> list["Target"]:
        """One target per acceptable class (or the interval): several mean "any of these"."""
        if self.interval is not None or self.classes is None:
            return [self]
        assert self.labels is not None
        return [replace(self, classes=(c,), label=self.labels[c]) for c in self.classes]

    def hit(self, decision: FloatArray) -> BoolArray:
        """Which decisions (:func:`decisions`: class indices or predictions) are sought."""
        d = np.asarray(decision, dtype=np.float64)
        if self.interval is not None:
            lo, hi = self.interval
            return np.asarray((d >= lo) & (d <= hi), dtype=bool)
        assert self.classes is not None, "resolve the target first"
        return np.isin(d, np.asarray(self.classes, dtype=np.float64))

    def satisfied(self, predictions: Any) -> BoolArray:
        """Which outputs of ``predict`` (labels or values; under the target's cutoff, as
        :class:`~lumber.compiler.explain.SourcePredictor` and ``Forest.predict`` give them) are sought."""
        p = np.asarray(predictions).reshape(-1)
        if self.interval is not None:
            lo, hi = self.interval
            v = p.astype(np.float64)
            return np.asarray((v >= lo) & (v <= hi), dtype=bool)
        assert self.classes is not None and self.labels is not None, "resolve the target first"
        wanted = [self.labels[c] for c in self.classes]
        try:  # each distinct output decided once (a batch holds few labels)
            values, inverse = np.unique(p, return_inverse=True)
        except TypeError:  # outputs of mixed types: one at a time
            values, inverse = p, np.arange(p.shape[0])
        hit = np.array([any(_same_label(v, lab) for lab in wanted) for v in values.tolist()], dtype=bool)
        return hit[inverse.reshape(-1)] if hit.size else np.zeros(p.shape[0], dtype=bool)

    @property
    def key(self) -> tuple[Any, ...]:
        return (self.classes, self.interval, self.cutoff)

    def describe(self) -> str:
        if self.interval is not None:
            lo, hi = self.interval
            return f"prediction in [{lo:g}, {hi:g}]"
        if self.classes is None:
            return self._stated()
        assert self.labels is not None
        names = [self.class_text(c) for c in self.classes]
        if not names:
            return "no target"
        listed = names if self.names is not None else [str(plain(self.labels[c])) for c in self.classes]
        text = names[0] if len(names) == 1 else f"a class in {{{', '.join(listed)}}}"
        return text + (f" ({self._rule()})" if self.cutoff is not None else "")

    def class_text(self, index: int) -> str:
        """Class ``index`` as people read it: its name, else ``class LABEL``."""
        if self.names is not None:
            return self.names[index]
        return f"class {plain(self.labels[index]) if self.labels is not None else index}"

    def decision_text(self, label: Any) -> str:
        """A predicted class label as people read it: its name when the classes are named, else the label."""
        if self.names is not None and self.labels is not None and label is not None:
            for i, lab in enumerate(self.labels):
                if _same_label(plain(label), lab):
                    return self.names[i]
        v = plain(label)
        return format(v, ".6g") if isinstance(v, float) and not v.is_integer() else str(
            int(v) if isinstance(v, float) else v)

    def _rule(self) -> str:
        assert self.cutoff is not None
        c = self.cutoff
        score = "P({})" if c.on == "probability" else "margin of {}"
        pos = self.class_text(1) if self.labels is not None and len(self.labels) == 2 else "class 1"
        sought = self.classes is not None and self.classes == (1,)
        op = (">=" if c.inclusive else ">") if sought else ("<" if c.inclusive else "<=")
        return f"{score.format(pos)} {op} {c.value:g}"

    def _stated(self) -> str:
        if self.cutoff is not None and self.below is not None:
            c = self.cutoff
            score = "P(class {})" if c.on == "probability" else "margin of class {}"
            op = ("<" if c.inclusive else "<=") if self.below else (">=" if c.inclusive else ">")
            return f"{score.format(self.label)} {op} {c.value:g}"
        text = "any other class" if self.label is None else f"class {self.label}"
        return text + (f" ({self.cutoff.describe()})" if self.cutoff is not None else "")

    def to_dict(self) -> dict[str, Any]:
        if self.interval is not None:
            return {"interval": [float(self.interval[0]), float(self.interval[1])]}
        out: dict[str, Any] = {}
        if self.classes is not None and self.labels is not None:
            out["classes"] = [plain(self.labels[c]) for c in self.classes]
        if self.cutoff is not None:
            out["cutoff"] = self.cutoff.to_dict()
        return out

    def apply(self, schema: Schema) -> Schema:
        """``schema`` deciding by this target's cutoff (unchanged without one)."""
        if self.cutoff is None or schema.cutoff == self.cutoff:
            return schema
        return replace(schema, cutoff=self.cutoff)


def class_indices(schema: Schema, y: Any) -> npt.NDArray[np.int64]:
    """Output index of each label in ``y`` (:func:`class_index` per distinct label; integer indices
    0..K-1 when the model records no class labels)."""
    y = np.asarray(y).reshape(-1)
    if schema.classes is not None:
        distinct, inverse = np.unique(y, return_inverse=True)
        return np.array([class_index(tuple(schema.classes), plain(v)) for v in distinct], dtype=np.int64)[inverse]
    n_classes = 2 if schema.task == Task.BINARY else schema.n_outputs
    if y.dtype == bool:
        return y.astype(np.int64)
    yi = y.astype(np.int64)
    if not np.all(yi == y) or yi.min(initial=0) < 0 or yi.max(initial=0) >= n_classes:
        raise InputDataError(f"labels must be class indices 0..{n_classes - 1} (the model records no class labels)")
    return yi


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


def with_cutoff(schema: Schema, threshold: "float | Cutoff | None") -> Schema:
    """``schema`` deciding by a user's threshold: a number is a cutoff on P(class 1) (class 1 iff above
    it), a :class:`Cutoff` says which score; None keeps the schema's own rule."""
    if threshold is None:
        return schema
    if isinstance(threshold, Cutoff):
        cutoff = threshold
    else:
        try:
            cutoff = Cutoff(float(threshold))
        except (TypeError, ValueError) as exc:
            raise InputDataError(f"threshold {threshold!r} is not a probability strictly between 0 and 1",
                                 f"{exc}; pass a number such as 0.3, or lumber.ir.Cutoff(-0.8, on='margin')") from None
    check_cutoff(schema, cutoff)
    return replace(schema, cutoff=cutoff)


def check_cutoff(schema: Schema, cutoff: Cutoff, label: Any = None) -> None:
    """A cutoff needs a binary classifier; a threshold (``label``: the class whose score it compares)
    is stated on its positive class (class 1)."""
    if schema.task != Task.BINARY:
        raise InputDataError(f"a threshold on the {cutoff.on} needs a binary classifier; this model's task is "
                             f"{schema.task.name.lower()}",
                             "for a multiclass model name the class sought (`target class 2`)"
                             if schema.task == Task.MULTICLASS else "give a class or an interval target instead")
    if cutoff.on == "margin" and schema.n_outputs != 1:
        raise InputDataError("a margin threshold needs a model with one margin; this one has one output per class",
                             "state the threshold on the probability")
    labels = class_labels(schema)
    if label is not None and class_index(labels, label) != 1:
        raise InputDataError(f"a threshold is stated on the positive class {labels[1]!r}, not {label!r}",
                             f"write it on class {labels[1]}: `probability of class {labels[1]} >= ...` means "
                             f"`probability of class {label} <= 1 - ...`")


def resolve_target(model: "Model | Schema", target: Any, current: float | None = None, *,
                   explainer: str = "explanations") -> Target:
    """The target sought, resolved for a model: a label, labels, ``(lo, hi)``, a :class:`Target` or None.

    ``None`` means "any class but ``current``" (a class index) for a classifier; a regressor
    needs an interval. A threshold target needs a binary classifier; ``current`` is then judged
    by its cutoff (pass decisions of the schema :meth:`Target.apply` gives). ``explainer`` names the
    caller in messages.
    """
    s = _schema(model)
    cutoff = None
    if isinstance(target, Target):
        if target.resolved and target.interval is None:
            return target
        cutoff, below = target.cutoff, target.below
        if cutoff is not None:
            check_cutoff(s, cutoff, target.label if below is not None else None)
        target = target.interval if target.interval is not None else target.label
        if cutoff is not None and below is not None:
            target = class_labels(s)[0 if below else 1]
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
        return Target(interval=(lo, hi))
    if s.task not in (Task.BINARY, Task.MULTICLASS):
        raise UnsupportedModelError(f"{explainer} need a classifier or a regressor, not a {s.task.name.lower()} model")
    labels = class_labels(s)
    cutoff = cutoff if cutoff is not None else s.cutoff
    if target is None:
        if current is None:
            raise InputDataError("no target class given and no current decision to move away from",
                                 f"pass target= one of: {', '.join(map(str, labels))}")
        idx = tuple(i for i in range(len(labels)) if i != int(current))
    elif isinstance(target, (list, tuple, set, frozenset)):
        idx = tuple(sorted({class_index(labels, t) for t in target}))
        if not idx:
            raise InputDataError("the target class list is empty")
    else:
        idx = (class_index(labels, target),)
    return Target(label=labels[idx[0]] if len(idx) == 1 else tuple(labels[i] for i in idx),
                  cutoff=cutoff, classes=idx, labels=labels, names=s.class_names)


__all__ = ["Target", "check_cutoff", "with_cutoff", "class_index", "class_indices", "class_labels", "decisions", "is_classifier",
           "margin_decisions", "plain", "resolve_target"]
