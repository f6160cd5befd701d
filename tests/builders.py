"""Tiny hand-built forests for before/expected tests.

A tree spec is nested tuples:
    leaf:        1.5  or  [0.2, 0.8]            (a value, or a vector over outputs)
    numerical:   ("x0", 0.5, left, right)        go left iff x0 <= 0.5
    with NaN:    ("x0", 0.5, left, right, True)  NaN goes left (default: right)
    categorical: ("c", {1, 3}, left, right)      categories 1 and 3 go left
"""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from lumber.ir import Feature, FeatureKind, Forest, PostTransform, Schema, Task
from lumber.ir.assemble import TreeArrays, concat_trees
from lumber.ir.schema import CategoryRule


def _lower(spec: Any, names: list[str], K: int) -> TreeArrays:
    left: list[int] = []
    right: list[int] = []
    feat: list[int] = []
    thr: list[float] = []
    miss: list[bool] = []
    val: list[list[float]] = []
    iscat: list[bool] = []
    cats: dict[int, np.ndarray] = {}

    def visit(s: Any) -> int:
        i = len(left)
        left.append(-1); right.append(-1); feat.append(-1); thr.append(np.nan); miss.append(False)
        val.append([0.0] * K); iscat.append(False)
        if isinstance(s, tuple):
            name, test, l, r, *rest = s
            feat[i] = names.index(name)
            if isinstance(test, (set, frozenset)):
                iscat[i] = True
                cats[i] = np.array(sorted(test), dtype=np.int64)
            else:
                thr[i] = float(test)
            miss[i] = bool(rest[0]) if rest else False
            li = visit(l)
            ri = visit(r)
            left[i], right[i] = li, ri
        else:
            v = np.atleast_1d(np.asarray(s, dtype=float))
            val[i] = list(v) if v.shape[0] == K else [float(v[0])] * K
        return i

    visit(spec)
    return TreeArrays(
        left=np.array(left), right=np.array(right), feature=np.array(feat), threshold=np.array(thr),
        missing_left=np.array(miss), value=np.array(val), is_categorical=np.array(iscat), categories=cats,
    )


def make_forest(
    trees: Sequence[Any],
    features: Sequence[str] | Sequence[Feature],
    task: Task = Task.REGRESSION,
    n_outputs: int = 1,
    base_score: Sequence[float] | None = None,
    post_transform: PostTransform = PostTransform.IDENTITY,
    average: bool = False,
    input_dtype: str = "float64",
    classes: Sequence[Any] | None = None,
    category_rule: CategoryRule = CategoryRule.LIGHTGBM,
) -> Forest:
    feats = tuple(f if isinstance(f, Feature) else Feature(f) for f in features)
    names = [f.name for f in feats]
    # a feature used in a categorical split is categorical unless declared otherwise
    schema = Schema(
        features=feats, task=task, n_outputs=n_outputs,
        base_score=tuple(base_score) if base_score is not None else (0.0,) * n_outputs,
        post_transform=post_transform, average=average, input_dtype=input_dtype,
        classes=tuple(classes) if classes is not None else None, category_rule=category_rule,
    )
    return concat_trees(schema, [_lower(t, names, n_outputs) for t in trees])


def categorical(name: str, categories: Sequence[Any] | None = None) -> Feature:
    return Feature(name, FeatureKind.CATEGORICAL, tuple(categories) if categories is not None else None)
