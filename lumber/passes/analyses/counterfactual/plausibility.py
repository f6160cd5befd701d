"""Plausibility through an isolation forest (papers.md section 3, equation 33).

An isolation forest trained on rows of the target class, lowered to a Forest
(scikit-learn's frontend stores ``depth + c(n)`` in each leaf, averaged, with
``PostTransform.ISOLATION``), scores a point by its mean path length: short
paths mean outliers. The MILP encodes it with the same branch variables as the
model (``problem.py``) and requires a mean path length of at least ``delta``;
``delta`` is the ``contamination`` quantile of the training rows' lengths, so
that share of the target class would count as implausible.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt

from lumber.ir import Forest, InputDataError, PostTransform, Task

FloatArray = npt.NDArray[np.float64]


def path_lengths(isolation: Forest, X: Any) -> FloatArray:
    """Mean path length (with the ``c(n)`` leaf correction) of each row."""
    _check(isolation)
    return np.asarray(isolation.evaluate(X), dtype=np.float64).reshape(-1)


def isolation_threshold(isolation: Forest, X_target: Any, contamination: float = 0.1) -> float:
    """``delta`` such that a ``contamination`` share of ``X_target`` has a shorter mean path."""
    if not 0.0 <= contamination < 1.0:
        raise InputDataError(f"contamination must be in [0, 1), got {contamination!r}")
    lengths = path_lengths(isolation, X_target)
    if lengths.size == 0:
        raise InputDataError("no rows of the target class to calibrate the isolation forest on")
    return float(np.quantile(lengths, contamination))


def _check(isolation: Forest) -> None:
    s = isolation.schema
    if s.task != Task.ANOMALY or s.post_transform != PostTransform.ISOLATION or s.n_outputs != 1:
        raise InputDataError("the plausibility model must be a lowered isolation forest",
                             "pass lumber.load(sklearn.ensemble.IsolationForest(...).fit(X_target))")
