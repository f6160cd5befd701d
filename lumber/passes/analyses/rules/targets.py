"""Decisions and target sets for counterfactual rules (Amoukou and Brunel).

For a classifier a decision is the class index ``predict`` chooses and the target
set is one or more classes (by default every class but the current one); for a
regressor the decision is the prediction and the target set an interval
``[a, b]``. Both are :class:`lumber.ir.Target`, the one target type of every explainer.
"""

from __future__ import annotations

from typing import Any, Sequence

from lumber.ir import Forest, Target
from lumber.ir.decision import class_labels, decisions, is_classifier, margin_decisions
from lumber.ir.decision import plain as _plain
from lumber.ir.decision import resolve_target as _resolve_target


def resolve_target(forest: Forest, target: Any, current: float | None) -> Target:
    """Y* from a user's target (:func:`lumber.ir.resolve_target`, named for messages)."""
    return _resolve_target(forest, target, current, explainer="counterfactual rules")


def describe_decision(forest: Forest, decision: float) -> Any:
    """The user-facing prediction for a decision value (class label or number)."""
    if is_classifier(forest):
        return _plain(class_labels(forest)[int(decision)])
    return float(decision)


def target_labels(targets: Sequence[Target]) -> list[str]:
    return [t.describe() for t in targets]


__all__ = ["class_labels", "decisions", "margin_decisions", "describe_decision", "is_classifier", "resolve_target"]
