"""Decisions and target sets for counterfactual rules (Amoukou and Brunel).

For a classifier a decision is the class index ``predict`` chooses and the target
set is one or more classes (by default every class but the current one); for a
regressor the decision is the prediction and the target set an interval
``[a, b]``. Both come from :mod:`lumber.passes.targets`, shared by every explainer.
"""

from __future__ import annotations

from typing import Any, Sequence

from lumber.ir import Forest
from lumber.passes.targets import TargetSet, class_labels, decisions, is_classifier, margin_decisions
from lumber.passes.targets import plain as _plain
from lumber.passes.targets import resolve_target as _resolve_target

RuleTarget = TargetSet
"""The target set Y* (:class:`lumber.passes.targets.TargetSet`)."""


def resolve_target(forest: Forest, target: Any, current: float | None) -> RuleTarget:
    """Y* from a user's target (:func:`lumber.passes.targets.resolve_target`, named for messages)."""
    return _resolve_target(forest, target, current, explainer="counterfactual rules")


def describe_decision(forest: Forest, decision: float) -> Any:
    """The user-facing prediction for a decision value (class label or number)."""
    if is_classifier(forest):
        return _plain(class_labels(forest)[int(decision)])
    return float(decision)


def target_labels(targets: Sequence[RuleTarget]) -> list[str]:
    return [t.describe() for t in targets]


__all__ = ["RuleTarget", "class_labels", "decisions", "margin_decisions", "describe_decision", "is_classifier", "resolve_target"]
