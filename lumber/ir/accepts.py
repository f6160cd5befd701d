"""What lumber's public entry points accept, named once for their signatures.

A trained model comes from libraries lumber does not control (their classes
carry no common base), so :data:`ModelLike` documents the accepted forms
rather than narrowing them; data is anything numpy turns into rows
(``numpy.typing.ArrayLike``: arrays, lists, DataFrames), and a single case may
also be a mapping feature name -> value.
"""

from __future__ import annotations

import os
from typing import Any, Mapping, Union

from numpy.typing import ArrayLike

from .forest import Forest

ModelLike = Union[Forest, str, os.PathLike[str], Any]
"""A fitted model object (scikit-learn, LightGBM, XGBoost, CatBoost, treelite, raw boosters
included), a model file (any format ``lumber.load`` sniffs), or a :class:`~lumber.ir.Forest`."""

CasesLike = Union[ArrayLike, Mapping[str, Any]]
"""One case (1-D row, ``{feature: value}``, a Series) or several (2-D array, DataFrame)."""

__all__ = ["ArrayLike", "CasesLike", "ModelLike"]
