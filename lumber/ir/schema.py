"""The schema of a model: its features, task and how outputs are formed.

The schema is data, shared by every IR form (Forest, Polynomial,
ObliviousEnsemble) and by the constraint checker. It answers "what does the
model read and what does it return", never "how is it computed".
"""

from __future__ import annotations

import enum
from contextlib import nullcontext
from dataclasses import dataclass, field, replace
from typing import Any, Mapping, Sequence

import numpy as np
import numpy.typing as npt

from .diagnostics import IRLocation, ValidationError


class FeatureKind(enum.IntEnum):
    """How a feature's values are to be read and changed."""

    NUMERICAL = 0
    """Real-valued; ordered."""
    BINARY = 1
    """Takes the values 0 and 1 only."""
    CATEGORICAL = 2
    """Unordered integer codes; ``Feature.categories`` names them when known."""
    ORDINAL = 3
    """Ordered integer levels (discrete numeric); ``Feature.categories`` may name them."""


class Task(enum.IntEnum):
    REGRESSION = 0
    BINARY = 1
    MULTICLASS = 2
    ANOMALY = 3
    """Isolation forests: outputs are mean path lengths."""


class PostTransform(enum.IntEnum):
    """Map from raw margins (``Forest.evaluate``) to what ``predict_proba``/``predict`` return."""

    IDENTITY = 0
    SIGMOID = 1
    """``1 / (1 + exp(-alpha * m))``; alpha is ``Schema.sigmoid_alpha``."""
    SOFTMAX = 2
    EXP = 3
    """Poisson, gamma, tweedie objectives: ``exp(m)``."""
    ISOLATION = 4
    """scikit-learn IsolationForest: ``score_samples = -2 ** (-m / c(max_samples))``."""


class CategoryRule(enum.IntEnum):
    """How a library turns a float input into a category code for a categorical split.

    The code of a finite value is ``trunc(x)`` (toward zero). The rule says which
    values are *invalid* (never members of any category set); an invalid value
    takes the node's ``cat_invalid_left`` branch. NaN always takes the node's
    ``missing_left`` branch.
    """

    LIGHTGBM = 0
    """Invalid iff trunc(x) < 0 or |x| >= 2**31 or x is infinite (-0.5 is category 0)."""
    XGBOOST = 1
    """Invalid iff x < 0 or x >= 2**24 (-0.5 is invalid)."""
    SKLEARN = 2
    """Invalid iff x is not an integer, x < 0 or x >= 2**32. scikit-learn >= 1.4
    HistGradientBoosting maps inputs through an OrdinalEncoder: only the exact known
    category values have a code, so 0.5 or 2.5 is missing, not category 0 or 2."""
    TREELITE = 3
    """Invalid iff x < 0 or x >= 2**32 (gtil: every negative value is invalid)."""


@dataclass(frozen=True)
class Feature:
    """One input column."""

    name: str
    kind: FeatureKind = FeatureKind.NUMERICAL
    categories: tuple[Any, ...] | None = None
    """For categorical/ordinal features: the label of code i is ``categories[i]``."""
    words: tuple[tuple[float, str], ...] | None = None
    """What values mean to people, ``((value, text), ...)``: credit's 0/1 flag ``PAY_0_Pay_delay>=1``
    reads ``1`` as "payment delayed 1+ month". Display only: the kind (a binary flag keeps its order and
    its ``decrease`` rule) and what the model reads are unchanged."""

    def word(self, v: float) -> str | None:
        """The words of value ``v`` (None: none given)."""
        for value, text in self.words or ():
            if value == v:
                return text
        return None

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {"name": self.name, "kind": self.kind.name.lower()}
        if self.categories is not None:
            d["categories"] = [c if isinstance(c, (str, int, float, bool)) else str(c) for c in self.categories]
        if self.words:
            d["words"] = [[v, t] for v, t in self.words]
        return d

    @staticmethod
    def from_dict(d: dict[str, Any]) -> "Feature":
        cats = d.get("categories")
        words = d.get("words")
        return Feature(str(d["name"]), FeatureKind[str(d.get("kind", "numerical")).upper()],
                       tuple(cats) if cats is not None else None,
                       tuple((float(v), str(t)) for v, t in words) if words else None)


@dataclass(frozen=True)
class Cutoff:
    """A user's decision rule for a binary classifier: class 1 iff its score is above ``value``.

    ``on`` is ``"probability"`` (``predict_proba``'s class-1 column) or ``"margin"`` (the raw
    margin ``Forest.evaluate`` returns); ``inclusive`` makes the comparison ``>=``. A bank that
    rejects when P(default) > 0.3 has ``Cutoff(0.3)``.
    """

    value: float
    on: str = "probability"
    inclusive: bool = False

    def __post_init__(self) -> None:
        if self.on not in ("probability", "margin"):
            raise ValueError(f"cutoff on {self.on!r}: expected 'probability' or 'margin'")
        v = float(self.value)
        if not np.isfinite(v) or (self.on == "probability" and not 0.0 < v < 1.0):
            what = "a probability strictly between 0 and 1" if self.on == "probability" else "a finite margin"
            raise ValueError(f"cutoff {self.value!r} is not {what}")
        object.__setattr__(self, "value", v)

    def above(self, score: npt.NDArray[np.float64]) -> npt.NDArray[np.bool_]:
        """Which scores decide class 1."""
        s = np.asarray(score, dtype=np.float64)
        return np.asarray(s >= self.value if self.inclusive else s > self.value, dtype=bool)

    def describe(self, positive: Any = "class 1") -> str:
        """``class 1 when P(class 1) > 0.3``; ``positive``: the positive class as people read it
        (:meth:`Schema.class_text`, e.g. ``default``)."""
        what = f"P({positive})" if self.on == "probability" else f"margin of {positive}"
        return f"{positive} when {what} {'>=' if self.inclusive else '>'} {self.value:g}"

    def to_dict(self) -> dict[str, Any]:
        return {"value": self.value, "on": self.on, "inclusive": self.inclusive}

    @staticmethod
    def from_dict(d: dict[str, Any]) -> "Cutoff":
        return Cutoff(float(d["value"]), str(d.get("on", "probability")), bool(d.get("inclusive", False)))


@dataclass(frozen=True)
class Schema:
    """What a model reads and returns.

    Outputs: ``Forest.evaluate`` returns raw margins of shape ``(n,)`` when
    ``n_outputs == 1`` and ``(n, n_outputs)`` otherwise; ``base_score`` has
    ``n_outputs`` entries and is added after trees are combined.
    """

    features: tuple[Feature, ...]
    task: Task
    n_outputs: int
    base_score: tuple[float, ...]
    post_transform: PostTransform = PostTransform.IDENTITY
    average: bool = False
    """Trees are averaged (random forests) instead of summed (boosting)."""
    input_dtype: str = "float64"
    """``float32`` or ``float64``: inputs are rounded to this type before any comparison."""
    accumulate_dtype: str = "float64"
    """Type the source sums leaf values in (XGBoost: float32), starting from ``base_score``."""
    classes: tuple[Any, ...] | None = None
    """Class labels for classifiers, in output order (binary: negative first)."""
    sigmoid_alpha: float = 1.0
    category_rule: CategoryRule = CategoryRule.LIGHTGBM
    allow_nan: bool = True
    """The source model accepts NaN inputs (and routes them by ``missing_left``)."""
    allow_inf: bool = True
    """The source model accepts infinite inputs."""
    decision: str = "proba"
    """How ``predict`` picks a class: ``proba`` (argmax of probabilities), ``margin`` (argmax of
    margins; binary ``m > 0``: HistGradientBoosting) or ``margin_ge`` (binary ``m >= 0``: GradientBoosting).
    They differ only where rounding in sigmoid/softmax makes probabilities tie."""
    isolation_c: float = 1.0
    """For ``PostTransform.ISOLATION``: ``c(max_samples)``; ``offset`` is in ``isolation_offset``."""
    isolation_offset: float = 0.0
    cutoff: Cutoff | None = None
    """A user's decision rule for a binary classifier (``predict`` and every explanation follow it);
    None: the library's own rule (``decision``)."""
    class_names: tuple[str, ...] | None = None
    """What each class means to people, in output order (credit: ``("paid", "default")``): decisions
    print by these names; ``classes`` stay what ``predict`` returns. None: by their labels."""
    source: dict[str, str] = field(default_factory=dict)
    """Provenance: library, version, model content hash, objective."""

    @property
    def n_features(self) -> int:
        return len(self.features)

    @property
    def feature_names(self) -> list[str]:
        return [f.name for f in self.features]

    @property
    def np_input_dtype(self) -> np.dtype[Any]:
        return np.dtype(self.input_dtype)

    def index(self, name: str) -> int:
        """Column index of a feature by name (raises ``KeyError``)."""
        for i, f in enumerate(self.features):
            if f.name == name:
                return i
        raise KeyError(name)

    def with_(self, **changes: Any) -> "Schema":
        return replace(self, **changes)

    def class_text(self, index: int) -> str:
        """Class ``index`` as people read it: its name when the schema has names, else ``class LABEL``."""
        if self.class_names is not None and 0 <= index < len(self.class_names):
            return self.class_names[index]
        label = self.classes[index] if self.classes is not None and 0 <= index < len(self.classes) else index
        return f"class {label.item() if isinstance(label, np.generic) else label}"

    def named(self, class_names: Sequence[str] | None = None,
              words: "Mapping[str, Sequence[tuple[float, str]]] | None" = None) -> "Schema":
        """This schema with class names and value words (``{feature: ((value, text), ...)}``) for people;
        words given here replace a feature's own for the same value."""
        feats = self.features
        if words:
            unknown = sorted(set(words) - set(self.feature_names))
            if unknown:
                raise ValidationError(f"value words for unknown feature(s): {', '.join(unknown)}",
                                      location=IRLocation(field="schema"))
            out = []
            for f in feats:
                w = words.get(f.name)
                if w:
                    mine = {v: t for v, t in (f.words or ())} | {float(v): str(t) for v, t in w}
                    f = replace(f, words=tuple(sorted(mine.items())))
                out.append(f)
            feats = tuple(out)
        names = tuple(str(n) for n in class_names) if class_names is not None else self.class_names
        s = replace(self, features=feats, class_names=names)
        s.validate()
        return s

    def validate(self) -> None:
        loc = IRLocation(field="schema")
        if self.accumulate_dtype not in ("float32", "float64"):
            raise ValidationError(f"schema.accumulate_dtype must be 'float32' or 'float64', got {self.accumulate_dtype!r}", location=loc)
        if self.input_dtype not in ("float32", "float64"):
            raise ValidationError(f"schema.input_dtype must be 'float32' or 'float64', got {self.input_dtype!r}", location=loc)
        if self.decision not in ("proba", "margin", "margin_ge"):
            raise ValidationError(f"schema.decision must be proba, margin or margin_ge, got {self.decision!r}", location=loc)
        if self.n_outputs < 1:
            raise ValidationError("schema.n_outputs must be at least 1", location=loc)
        if len(self.base_score) != self.n_outputs:
            raise ValidationError(
                f"schema.base_score has {len(self.base_score)} entries for {self.n_outputs} outputs", location=loc)
        if not all(np.isfinite(self.base_score)):
            raise ValidationError("schema.base_score must be finite", location=loc)
        names = [f.name for f in self.features]
        if len(set(names)) != len(names):
            dup = sorted({n for n in names if names.count(n) > 1})
            raise ValidationError(f"duplicate feature names: {', '.join(dup)}", location=loc)
        if self.cutoff is not None and self.task != Task.BINARY:
            raise ValidationError("schema.cutoff needs a binary classifier", location=loc)
        if self.cutoff is not None and self.cutoff.on == "margin" and self.n_outputs != 1:
            raise ValidationError("a margin cutoff needs a binary classifier with one margin", location=loc)
        if self.task in (Task.BINARY, Task.MULTICLASS) and self.classes is not None:
            expected = 2 if self.task == Task.BINARY else self.n_outputs
            if len(self.classes) != expected:
                raise ValidationError(f"schema.classes has {len(self.classes)} labels, expected {expected}", location=loc)
        if self.class_names is not None:
            expected = 2 if self.task == Task.BINARY else self.n_outputs
            if self.task not in (Task.BINARY, Task.MULTICLASS):
                raise ValidationError("class names need a classifier", location=loc)
            if len(self.class_names) != expected:
                raise ValidationError(f"{len(self.class_names)} class names for {expected} classes", location=loc)
            if len(set(self.class_names)) != expected or not all(n.strip() for n in self.class_names):
                raise ValidationError("class names must be distinct and not empty", location=loc)

    # -- transforms of raw margins --------------------------------------------------------

    def transform(self, margin: npt.NDArray[np.float64] | float) -> Any:
        """Apply the post-transform to raw margins (same shape in, same shape out; one margin of a
        single-output link may be a Python float, giving a numpy float64 equal bit for bit to the
        array's element)."""
        m: Any = margin if type(margin) is float else np.asarray(margin, dtype=np.float64)
        pt = self.post_transform
        if pt == PostTransform.IDENTITY:
            return m
        if pt == PostTransform.SIGMOID:
            finite = type(m) is float and -self.sigmoid_alpha * m < 709.0  # exp is finite: nothing to silence
            with nullcontext() if finite else np.errstate(over="ignore"):
                return 1.0 / (1.0 + np.exp(-self.sigmoid_alpha * m))
        if pt == PostTransform.SOFTMAX:
            z = m - m.max(axis=-1, keepdims=True)
            e = np.exp(z)
            return e / e.sum(axis=-1, keepdims=True)
        if pt == PostTransform.EXP:
            return np.exp(m)
        if pt == PostTransform.ISOLATION:
            return -np.power(2.0, -m / self.isolation_c)
        raise ValueError(pt)

    def proba(self, margin: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
        """Class probabilities ``(n, n_classes)`` from raw margins, as ``predict_proba`` returns."""
        if self.task == Task.BINARY and self.n_outputs == 1:
            if type(margin) is np.ndarray and margin.shape == (1,):  # one row: scalars, no stacking
                q = self.transform(float(margin[0]))
                return np.array([[1.0 - q, q]])
            p = self.transform(margin).reshape(-1)
            return np.column_stack([1.0 - p, p])
        p = self.transform(margin)
        return p if p.ndim == 2 else p.reshape(-1, 1)

    def class_index(self, margin: npt.NDArray[np.float64]) -> npt.NDArray[np.int64]:
        """Index (into ``classes``) of the class ``predict`` picks, for classifiers (under ``cutoff``
        when the schema has one)."""
        m = np.asarray(margin, dtype=np.float64)
        if self.cutoff is not None and self.task == Task.BINARY:
            score = self.proba(m)[:, 1] if self.cutoff.on == "probability" else m.reshape(-1)
            return self.cutoff.above(score).astype(np.int64)
        if self.decision != "proba" and self.n_outputs == 1:
            m1 = m.reshape(-1)
            return (m1 >= 0 if self.decision == "margin_ge" else m1 > 0).astype(np.int64)
        if self.decision != "proba":
            return np.argmax(m if m.ndim == 2 else m.reshape(-1, 1), axis=1)
        return self.proba(margin).argmax(axis=1)  # type: ignore[no-any-return]

    def decide(self, margin: npt.NDArray[np.float64]) -> npt.NDArray[Any]:
        """What ``predict`` returns: class labels, regression values or anomaly labels."""
        if self.task in (Task.BINARY, Task.MULTICLASS):
            idx = self.class_index(margin)
            if self.classes is not None:
                return np.asarray(self.classes)[idx]
            return idx
        if self.task == Task.ANOMALY:
            score = self.transform(margin) - self.isolation_offset
            return np.where(score < 0, -1, 1)
        return self.transform(margin)

    # -- (de)serialization ----------------------------------------------------------------

    def to_dict(self) -> dict[str, Any]:
        def plain(v: Any) -> Any:
            if isinstance(v, np.generic):
                return v.item()
            return v

        return {
            "features": [f.to_dict() for f in self.features],
            "task": self.task.name.lower(),
            "n_outputs": self.n_outputs,
            "base_score": [float(b) for b in self.base_score],
            "post_transform": self.post_transform.name.lower(),
            "average": self.average,
            "input_dtype": self.input_dtype,
            "accumulate_dtype": self.accumulate_dtype,
            "classes": None if self.classes is None else [plain(c) for c in self.classes],
            "sigmoid_alpha": self.sigmoid_alpha,
            "category_rule": self.category_rule.name.lower(),
            "allow_nan": self.allow_nan,
            "allow_inf": self.allow_inf,
            "decision": self.decision,
            "isolation_c": self.isolation_c,
            "isolation_offset": self.isolation_offset,
            **({"cutoff": self.cutoff.to_dict()} if self.cutoff is not None else {}),
            **({"class_names": list(self.class_names)} if self.class_names is not None else {}),
            "source": dict(self.source),
        }

    @staticmethod
    def from_dict(d: dict[str, Any]) -> "Schema":
        classes = d.get("classes")
        return Schema(
            features=tuple(Feature.from_dict(f) for f in d["features"]),
            task=Task[d["task"].upper()],
            n_outputs=int(d["n_outputs"]),
            base_score=tuple(float(b) for b in d["base_score"]),
            post_transform=PostTransform[d["post_transform"].upper()],
            average=bool(d["average"]),
            input_dtype=str(d["input_dtype"]),
            accumulate_dtype=str(d.get("accumulate_dtype", "float64")),
            classes=None if classes is None else tuple(classes),
            sigmoid_alpha=float(d.get("sigmoid_alpha", 1.0)),
            category_rule=CategoryRule[str(d.get("category_rule", "lightgbm")).upper()],
            allow_nan=bool(d.get("allow_nan", True)),
            allow_inf=bool(d.get("allow_inf", True)),
            decision=str(d.get("decision", "proba")),
            isolation_c=float(d.get("isolation_c", 1.0)),
            isolation_offset=float(d.get("isolation_offset", 0.0)),
            cutoff=Cutoff.from_dict(d["cutoff"]) if d.get("cutoff") is not None else None,
            class_names=tuple(str(n) for n in d["class_names"]) if d.get("class_names") is not None else None,
            source={str(k): str(v) for k, v in d.get("source", {}).items()},
        )


def default_features(n: int, names: Sequence[str] | None = None) -> tuple[Feature, ...]:
    """Numerical features named ``f0..f{n-1}`` (or by ``names``)."""
    if names is None:
        names = [f"f{i}" for i in range(n)]
    return tuple(Feature(str(nm)) for nm in names)
