"""Model-quality metrics on raw margins, for passes that trade size against quality.

``auc`` (binary), ``accuracy`` and ``logloss`` (classifiers), ``rmse``
(regression, on the post-transformed prediction). Each metric knows whether
larger is better and how a tolerance applies: an absolute drop for AUC and
accuracy, a relative rise for RMSE and log-loss (their scale is the target's).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np
import numpy.typing as npt

from lumber.ir import CompileError, Schema, Task
from lumber.ir.decision import class_indices

METRICS = ("auc", "accuracy", "logloss", "rmse")


@dataclass(frozen=True)
class QualityMetric:
    name: str
    higher_is_better: bool
    fn: Callable[[npt.NDArray[np.float64]], float]
    rows: Callable[[npt.NDArray[np.int64]], "QualityMetric"] | None = field(default=None, compare=False)
    """The same metric on a subset (or a resample) of the labelled rows, by index (bootstrap bounds)."""
    strata: npt.NDArray[np.int64] | None = field(default=None, compare=False)
    """Class index of each labelled row (classifiers): resamples keep each class's count."""

    def within(self, value: float, reference: float, tol: float) -> bool:
        """``value`` is at most ``tol`` worse than ``reference``."""
        if self.higher_is_better:
            return value >= reference - tol
        return value <= reference * (1.0 + tol) + 1e-15

    def __call__(self, margin: npt.NDArray[np.float64]) -> float:
        return self.fn(margin)


def auc(y: npt.NDArray[np.bool_], score: npt.NDArray[np.float64]) -> float:
    """Area under the ROC curve (ties count one half), by ranks."""
    from scipy.stats import rankdata

    pos = int(y.sum())
    neg = y.shape[0] - pos
    r = rankdata(score)
    return float((r[y].sum() - pos * (pos + 1) / 2) / (pos * neg))


def make_metric(name: str, schema: Schema, y: Any) -> QualityMetric:
    """The metric ``name`` (or ``auto``: AUC for binary, log-loss for multiclass, RMSE otherwise)
    bound to the labels ``y``."""
    if name == "auto":
        name = {Task.BINARY: "auc", Task.MULTICLASS: "logloss"}.get(schema.task, "rmse")
    if name not in METRICS:
        raise CompileError(f"unknown metric '{name}'", f"known metrics: auto, {', '.join(METRICS)}")
    classifier = schema.task in (Task.BINARY, Task.MULTICLASS)
    if name in ("auc", "accuracy", "logloss") and not classifier:
        raise CompileError(f"metric '{name}' needs a classifier; this model is {schema.task.name.lower()}",
                           "use metric=rmse")
    if name == "auc" and schema.task != Task.BINARY:
        raise CompileError("metric 'auc' needs a binary classifier", "use metric=logloss or metric=accuracy")
    if name == "rmse":
        yt = np.asarray(y, dtype=np.float64).reshape(-1)
    else:
        yi = class_indices(schema, y)
        if name == "auc" and (yi.all() or not yi.any()):
            raise CompileError("validation labels hold a single class; AUC needs both")

    def bound(idx: npt.NDArray[np.int64] | None) -> QualityMetric:
        """The metric on the labelled rows ``idx`` (None: all of them); margins passed to it are of those rows."""
        if name == "rmse":
            t = yt if idx is None else yt[idx]
            return QualityMetric("rmse", False, lambda m: float(np.sqrt(np.mean((schema.transform(m).reshape(-1) - t) ** 2))),
                                 rows=bound)
        c = yi if idx is None else yi[idx]
        if name == "auc":
            yb = c == 1
            return QualityMetric("auc", True, lambda m: auc(yb, np.asarray(m).reshape(-1)), rows=bound, strata=c)
        if name == "accuracy":
            return QualityMetric("accuracy", True, lambda m: float(np.mean(np.argmax(schema.proba(m), axis=1) == c)),
                                 rows=bound, strata=c)

        def logloss(m: npt.NDArray[np.float64]) -> float:
            p = schema.proba(m)[np.arange(c.shape[0]), c]
            return float(-np.mean(np.log(np.clip(p, 1e-15, 1.0))))

        return QualityMetric("logloss", False, logloss, rows=bound, strata=c)

    return bound(None)


__all__ = ["METRICS", "QualityMetric", "auc", "make_metric"]
