"""``lumber.contributions(model, rows)``: each feature's exact share of each row's margin.

Shapley values of the model's raw margin (log-odds for a binary LightGBM/XGBoost
classifier), computed exactly from the trees by the ``contributions`` pass
(:class:`~lumber.passes.analyses.explainers.RowContributions`);
:func:`lumber.passes.analyses.contributions.contributions` documents the two games.
With ``reference`` rows they are *interventional* (the row against each
reference row, averaged: the base value is the references' mean margin);
without, *path-dependent* (TreeSHAP: branches weighted by the training covers
the model records). ``base_value + values.sum(axis=1)`` is each row's margin.
"""

from __future__ import annotations

from typing import Sequence

from lumber.compiler.dsl import refine_schema
from lumber.compiler.explain import warn_positional
from lumber.compiler.api.pipeline import as_ir
from lumber.ir import ArrayLike, CompileError, Feature, Forest, ModelLike
from lumber.passes.analyses.contributions import Contributions
from lumber.passes.analyses.explainers import RowContributions
from lumber.passes.base import PassData
from lumber.passes.manager import run_analysis


def contributions(model: ModelLike, rows: ArrayLike, reference: ArrayLike | None = None, *,
                  features: Sequence[Feature] | None = None) -> Contributions:
    """Per-row Shapley values of the margin.

    Parameters
    ----------
    model
        A fitted tree model (scikit-learn, LightGBM, XGBoost, ...), a model file or a
        :class:`~lumber.ir.Forest`.
    rows
        The rows to explain (array or DataFrame with the model's feature columns; NaN is routed as
        the model routes it).
    reference
        Background rows (e.g. a sample of the training data): interventional values against them.
        ``None``: path-dependent values from the model's node covers.
    features
        A feature schema (``lumber.datasets.load("credit").features``) giving kinds and category
        labels the model does not record, so category labels in ``rows`` bind.

    Returns
    -------
    Contributions
        ``.values`` (``[n, n_features]``; ``[n, n_features, n_outputs]`` for several outputs),
        ``.base_value``, ``.margin``, ``.feature_names``; ``base_value + values.sum(axis=1) == margin``.
    """
    forest = as_ir(model)
    if not isinstance(forest, Forest):
        raise CompileError(f"contributions need a tree model, got {type(forest).__name__}",
                           "pass the trained model (or its Forest), not a compiled artifact or polynomial")
    if features is not None:
        forest = forest.replace(schema=refine_schema(forest.schema, features))
    warn_positional(model, forest, rows, "rows")
    analysis = RowContributions(game="path" if reference is None else "interventional")
    return run_analysis(analysis, forest, PassData(cases=rows, X_train=reference))  # type: ignore[no-any-return]


__all__ = ["Contributions", "contributions"]
