"""What lumber's public entry points accept, named once for their signatures.

A trained model comes from libraries lumber does not control (their classes
carry no common base), so :data:`ModelLike` documents the accepted forms
rather than narrowing them; data is anything numpy turns into rows
(``numpy.typing.ArrayLike``: arrays, lists, DataFrames), and a single case may
also be a mapping feature name -> value.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any, Hashable, Mapping, Sequence, Union

from numpy.typing import ArrayLike

from .forest import Forest

if TYPE_CHECKING:
    from .decision import Target

ModelLike = Union[Forest, str, os.PathLike[str], Any]
"""A fitted model object (scikit-learn, LightGBM, XGBoost, CatBoost, treelite, raw boosters
included), a model file (any format ``lumber.load`` sniffs), or a :class:`~lumber.ir.Forest`."""

CasesLike = Union[ArrayLike, Mapping[str, Any]]
"""One case (1-D row, ``{feature: value}``, a Series) or several (2-D array, DataFrame)."""

TargetLike = Union["Target", Hashable, Sequence[Any], None]
"""What an explanation aims at: a class label (or several labels), ``(lo, hi)`` for a regressor,
a :class:`~lumber.ir.Target`, or None (any class but the current one)."""

WeightsLike = Union[float, ArrayLike, Mapping[str, Union[float, tuple[float, float]]], tuple[ArrayLike, ArrayLike], None]
"""Cost weights of moving each feature: one number, one per feature, ``{feature: w}`` or
``{feature: (w_down, w_up)}``, or ``(w_down, w_up)`` arrays; None weighs every feature 1."""

__all__ = ["ArrayLike", "CasesLike", "ModelLike", "TargetLike", "WeightsLike"]
