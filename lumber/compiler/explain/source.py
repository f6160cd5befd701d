"""The source library's own ``predict``: every explanation is re-checked on the model itself.

lumber lowers a model to a :class:`~lumber.ir.Forest` and explains the Forest;
a point is only reported as verified when the library that trained the model
agrees. :class:`SourcePredictor` calls that library the way its ``predict``
reads the model's own numbers: scikit-learn style estimators get a DataFrame
when they were fitted on named columns; XGBoost gets a ``DMatrix`` with the
booster's feature types (category codes stay codes); LightGBM gets the numeric
codes it stores. Raw boosters (``lightgbm.Booster``, ``xgboost.Booster``)
return probabilities or values, which :meth:`SourcePredictor.from_scores` turns
into what the scikit-learn wrapper's ``predict`` would return. One adapter per
library lives in :data:`ADAPTERS`; generic code never names a library. When the
schema carries the user's :class:`~lumber.ir.Cutoff`, the predictor decides by
it: the library's own class-1 probability (``predict_proba``) or raw margin
(:data:`SCORES`) against the cutoff.
"""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import Any, Callable

import numpy as np
import numpy.typing as npt

from lumber.ir import Forest, Schema, Target, Task
from lumber.ir.decision import class_labels

FloatArray = npt.NDArray[np.float64]


class SourcePredictor:
    """``predictor(X)``: what the source model's ``predict`` returns on prepared rows ``X``
    (class labels or values). Picklable, so joblib workers can verify too."""

    def __init__(self, model: Any, schema: Schema) -> None:
        self.model = model
        self.schema = schema
        self.library = type(model).__module__.split(".")[0]

    def __call__(self, X: FloatArray) -> Any:
        cutoff = self.schema.cutoff
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            X = np.asarray(X, dtype=np.float64)
            if cutoff is not None and self.schema.task == Task.BINARY:
                score = np.asarray(SCORES.get(self.library, _estimator_scores)(self, X, cutoff.on), dtype=np.float64)
                score = score[:, -1] if score.ndim == 2 else score.reshape(-1)
                return np.asarray(class_labels(self.schema), dtype=object)[cutoff.above(score).astype(np.int64)]
            return ADAPTERS.get(self.library, _estimator_predict)(self, X)

    def meets(self, X: FloatArray, target: Target) -> npt.NDArray[np.bool_]:
        """Which rows the source model puts in ``target``."""
        return target.satisfied(self(X))

    def from_scores(self, p: FloatArray) -> Any:
        """Booster outputs (probabilities or values) -> what ``predict`` of the sklearn wrapper returns."""
        s = self.schema
        if s.task not in (Task.BINARY, Task.MULTICLASS):
            return p.reshape(-1)
        idx = (p.reshape(-1) > 0.5).astype(np.int64) if p.ndim == 1 or p.shape[1] == 1 else np.argmax(p, axis=1)
        return np.asarray(class_labels(s), dtype=object)[idx]


def _estimator_predict(sp: SourcePredictor, X: FloatArray) -> Any:
    """scikit-learn style: a DataFrame with the fitted column names, else the array."""
    m = sp.model
    names = getattr(m, "feature_names_in_", None)
    if names is not None:
        import pandas as pd

        return np.asarray(m.predict(pd.DataFrame(X, columns=list(names))))
    return np.asarray(m.predict(X))


def _frame(sp: SourcePredictor, X: FloatArray) -> Any:
    names = getattr(sp.model, "feature_names_in_", None)
    if names is not None:
        import pandas as pd

        return pd.DataFrame(X, columns=list(names))
    return X


def _estimator_scores(sp: SourcePredictor, X: FloatArray, on: str) -> Any:
    """scikit-learn style: ``predict_proba``, or ``decision_function`` for the margin."""
    m = sp.model
    if on == "probability":
        return m.predict_proba(_frame(sp, X))
    return m.decision_function(_frame(sp, X))


def _lightgbm_scores(sp: SourcePredictor, X: FloatArray, on: str) -> Any:
    m = sp.model
    if on == "margin":
        return m.predict(X, raw_score=True)
    return m.predict(X) if not hasattr(m, "predict_proba") else m.predict_proba(X)


def _xgboost_scores(sp: SourcePredictor, X: FloatArray, on: str) -> Any:
    import xgboost as xgb

    m = sp.model
    b = m.get_booster() if hasattr(m, "get_booster") else m
    dm = xgb.DMatrix(X, feature_names=b.feature_names, feature_types=b.feature_types, enable_categorical=True,
                     nthread=1)  # (the default starts every core's threads: 3 ms of CPU per call, 0.2 ms with one)
    return b.predict(dm, output_margin=on == "margin")


def _lightgbm_predict(sp: SourcePredictor, X: FloatArray) -> Any:
    """LightGBM reads category codes as numbers: pass the array (a DataFrame would be re-coded)."""
    m = sp.model
    if not hasattr(m, "classes_") and hasattr(m, "num_trees"):  # a raw Booster: probabilities or values
        return sp.from_scores(np.asarray(m.predict(X)))
    return np.asarray(m.predict(X))


def _xgboost_predict(sp: SourcePredictor, X: FloatArray) -> Any:
    """XGBoost: a DMatrix with the booster's feature types, so categorical columns stay codes."""
    import xgboost as xgb

    m = sp.model
    b = m.get_booster() if hasattr(m, "get_booster") else m
    dm = xgb.DMatrix(X, feature_names=b.feature_names, feature_types=b.feature_types, enable_categorical=True,
                     nthread=1)  # (the default starts every core's threads: 3 ms of CPU per call, 0.2 ms with one)
    p = np.asarray(b.predict(dm))
    if sp.schema.task in (Task.BINARY, Task.MULTICLASS) or not hasattr(m, "get_booster"):
        return sp.from_scores(p)
    return p


ADAPTERS: dict[str, Callable[[SourcePredictor, FloatArray], Any]] = {
    "lightgbm": _lightgbm_predict,
    "xgboost": _xgboost_predict,
}
"""Per top-level module of the model's class: how to call its library's predict."""

SCORES: dict[str, Callable[[SourcePredictor, FloatArray, str], Any]] = {
    "lightgbm": _lightgbm_scores,
    "xgboost": _xgboost_scores,
}
"""Per library: the class-1 probability (``"probability"``) or raw margin (``"margin"``) a cutoff compares."""


def source_predictor(model: Any, forest: Forest) -> SourcePredictor | None:
    """The source model's own predict, or None for a Forest, a model file or an object without ``predict``."""
    if isinstance(model, (Forest, str, Path)) or not hasattr(model, "predict"):
        return None
    return SourcePredictor(model, forest.schema)


__all__ = ["ADAPTERS", "SCORES", "SourcePredictor", "source_predictor"]
