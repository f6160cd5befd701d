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
library lives in :data:`ADAPTERS`; generic code never names a library.
"""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import Any, Callable

import numpy as np
import numpy.typing as npt

from lumber.ir import Forest, Schema, Task
from lumber.passes.targets import TargetSet, class_labels

FloatArray = npt.NDArray[np.float64]


class SourcePredictor:
    """``predictor(X)``: what the source model's ``predict`` returns on prepared rows ``X``
    (class labels or values). Picklable, so joblib workers can verify too."""

    def __init__(self, model: Any, schema: Schema) -> None:
        self.model = model
        self.schema = schema
        self.library = type(model).__module__.split(".")[0]

    def __call__(self, X: FloatArray) -> Any:
        adapter = ADAPTERS.get(self.library, _estimator_predict)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return adapter(self, np.asarray(X, dtype=np.float64))

    def meets(self, X: FloatArray, target: TargetSet) -> npt.NDArray[np.bool_]:
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
    dm = xgb.DMatrix(X, feature_names=b.feature_names, feature_types=b.feature_types, enable_categorical=True)
    p = np.asarray(b.predict(dm))
    if sp.schema.task in (Task.BINARY, Task.MULTICLASS) or not hasattr(m, "get_booster"):
        return sp.from_scores(p)
    return p


ADAPTERS: dict[str, Callable[[SourcePredictor, FloatArray], Any]] = {
    "lightgbm": _lightgbm_predict,
    "xgboost": _xgboost_predict,
}
"""Per top-level module of the model's class: how to call its library's predict."""


def source_predictor(model: Any, forest: Forest) -> SourcePredictor | None:
    """The source model's own predict, or None for a Forest, a model file or an object without ``predict``."""
    if isinstance(model, (Forest, str, Path)) or not hasattr(model, "predict"):
        return None
    return SourcePredictor(model, forest.schema)


__all__ = ["ADAPTERS", "SourcePredictor", "source_predictor"]
