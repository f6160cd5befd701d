"""Small builders shared by the rule tests."""

from __future__ import annotations

from typing import Any

from builders import make_forest
from lumber.ir import Forest, PostTransform, Task


def classifier(trees: list[Any], features: list[Any]) -> Forest:
    """A binary classifier (sigmoid of the summed leaves) over hand-written trees."""
    return make_forest(trees, features, task=Task.BINARY, post_transform=PostTransform.SIGMOID, classes=[0, 1])
