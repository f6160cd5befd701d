"""YDF (Yggdrasil Decision Forests) frontend: a GBT or RF model, in memory or a saved directory -> Forest.

Read through YDF's Python tree API (``model.get_tree(t)``: nodes, conditions and
leaf values as Python objects), never YDF's C++ inference. Semantics (YDF 0.16):

* Numerical features are float32 and ``NumericalHigherThanCondition`` holds iff
  ``x >= threshold`` (a float32 value): the IR's ``x <= nextafter32(t, -inf)``
  goes to the negative child. A missing value takes the positive child iff the
  condition's ``missing`` is true.
* Boolean features (``IsTrueCondition``) are 0/1: true iff ``x > 0.5``.
  ``IsMissingInCondition`` holds iff the value is missing (NaN).
* Categorical features are integer codes of the dataspec's dictionary (code 0 is
  YDF's out-of-dictionary item ``<OOD>``); ``CategoricalIsInCondition`` holds for
  the codes in its mask. lumber reads codes (a DataFrame binds labels to codes by
  ``Feature.categories``); a non-integer or negative code is treated as not in the
  mask. Categorical-set, discretized and oblique conditions are refused.
* GBT: margins are ``initial_predictions + sum of tree values`` (trees of one
  iteration feed the classes in turn), then the model's activation (sigmoid,
  softmax or identity). RF: leaf class distributions (one-hot of the top class
  with ``winner_takes_all``) or regression values, averaged over trees.

YDF sums in float32; lumber sums the same float32 leaf values in float32, so
margins agree with ``predict(output_logits)`` to float32 rounding.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Sequence

import numpy as np
import numpy.typing as npt

from lumber.ir import (
    CategoryRule, Feature, FeatureKind, Forest, IRLocation, ModelFormatError, PostTransform, Schema, Task,
    UnsupportedModelError,
)
from lumber.ir.assemble import TreeArrays, concat_trees
from .files import content_hash

LAYOUT = ("header.pb", "data_spec.pb")
"""Files every YDF saved-model directory holds (``model.save(path)``)."""


def is_ydf_dir(path: Path) -> bool:
    return path.is_dir() and all((path / f).is_file() for f in LAYOUT)


def load_ydf_dir(path: str | Path, **options: Any) -> Forest:
    """A directory written by ``model.save(path)`` -> Forest."""
    import ydf

    p = Path(path)
    missing = [f for f in LAYOUT if not (p / f).is_file()]
    if missing:
        raise ModelFormatError(f"{path}: not a YDF model directory (no {', '.join(missing)})")
    try:
        model = ydf.load_model(str(p))
    except Exception as exc:  # YDF raises plain Python errors for unreadable directories
        first = (str(exc).strip().splitlines() or [type(exc).__name__])[0][:300]
        raise ModelFormatError(f"{path}: YDF cannot load the model directory ({first})",
                               "the directory is incomplete or its files are damaged; save the model again") from None
    return from_ydf(model, name=str(path), **options)


def from_ydf(model: Any, *, name: str = "<ydf model>", feature_names: Sequence[str] | None = None) -> Forest:
    """A YDF ``GradientBoostedTreesModel`` or ``RandomForestModel`` -> Forest."""
    import ydf

    kind = type(model).__name__
    if isinstance(model, ydf.GradientBoostedTreesModel):
        gbt = True
    elif isinstance(model, ydf.RandomForestModel):
        gbt = False
    else:
        raise UnsupportedModelError(f"{name}: cannot lower a YDF {kind}",
                                    "accepted: GradientBoostedTreesModel, RandomForestModel")
    task = model.task()
    features, column = _features(model, name)
    if feature_names is not None:
        names = [str(s) for s in feature_names]
        if len(names) != len(features):
            raise ModelFormatError(f"feature_names has {len(names)} names but the model reads {len(features)} features")
        features = tuple(Feature(nm, f.kind, f.categories) for nm, f in zip(names, features))
    classes: tuple[Any, ...] | None = None
    if task == ydf.Task.CLASSIFICATION:
        classes = tuple(model.label_classes())
        K = len(classes)
        if K < 2:
            raise UnsupportedModelError(f"{name}: a classifier with {K} class")
    elif task == ydf.Task.REGRESSION:
        K = 1
    else:
        raise UnsupportedModelError(f"{name}: YDF task {task.name} is not supported",
                                    "accepted: CLASSIFICATION, REGRESSION")
    n_trees = int(model.num_trees())
    if n_trees == 0:
        raise UnsupportedModelError(f"{name}: the model has no trees")
    post = PostTransform.IDENTITY
    base = np.zeros(K)
    if gbt:
        per_iter = int(model.num_trees_per_iteration())
        act = model.activation().name
        acts = {"IDENTITY": PostTransform.IDENTITY, "SIGMOID": PostTransform.SIGMOID,
                "SOFTMAX": PostTransform.SOFTMAX}
        if act not in acts:
            raise UnsupportedModelError(f"{name}: GBT activation {act} is not supported",
                                        f"accepted: {', '.join(acts)}")
        post = acts[act]
        n_out = 1 if (classes is not None and K == 2) else K
        if per_iter != n_out:
            raise UnsupportedModelError(f"{name}: {per_iter} trees per iteration for {n_out} outputs")
        init = np.asarray(model.initial_predictions(), dtype=np.float64).reshape(-1)
        if init.shape[0] != n_out:
            raise ModelFormatError(f"{name}: {init.shape[0]} initial predictions for {n_out} outputs",
                                   location=IRLocation(file=name, field="initial_predictions"))
        base = init.astype(np.float32).astype(np.float64)
        K = n_out
    wta = bool(getattr(model, "winner_takes_all", lambda: False)()) if not gbt else False
    trees = [_lower_tree(model.get_tree(t), t, column, features, name, K=K, gbt=gbt, classes=classes,
                         output=(t % K) if gbt else -1, wta=wta) for t in range(n_trees)]
    cat_used = np.zeros(len(features), dtype=bool)
    for tr in trees:
        if tr.is_categorical is not None:
            cat_used[tr.feature[tr.is_categorical]] = True
    if classes is not None:
        task_ir = Task.BINARY if len(classes) == 2 else Task.MULTICLASS
    else:
        task_ir = Task.REGRESSION
    schema = Schema(
        features=features, task=task_ir, n_outputs=K, base_score=tuple(float(b) for b in base), post_transform=post,
        average=not gbt, input_dtype="float32", accumulate_dtype="float32" if gbt else "float64",
        classes=classes, category_rule=CategoryRule.SKLEARN, allow_nan=True, allow_inf=True,
        decision="margin" if gbt and classes is not None else "proba",
        source={"library": "ydf", "version": str(ydf.__version__), "model_type": kind,
                "objective": f"{task.name.lower()}/{post.name.lower()}",
                "content_hash": content_hash(bytes(model.serialize()))},
    )
    return concat_trees(schema, trees)


def _features(model: Any, name: str) -> tuple[tuple[Feature, ...], dict[int, int]]:
    """lumber features in YDF's input-feature order, and dataspec column -> feature index."""
    import ydf

    spec = model.data_spec()
    out: list[Feature] = []
    column: dict[int, int] = {}
    for j, f in enumerate(model.input_features()):
        column[int(f.column_idx)] = j
        if f.semantic == ydf.Semantic.NUMERICAL:
            out.append(Feature(f.name))
        elif f.semantic == ydf.Semantic.BOOLEAN:
            out.append(Feature(f.name, FeatureKind.BINARY))
        elif f.semantic == ydf.Semantic.CATEGORICAL:
            items = spec.columns[int(f.column_idx)].categorical.items
            size = spec.columns[int(f.column_idx)].categorical.number_of_unique_values
            labels: list[Any] = [None] * size
            for key, v in items.items():
                if 0 <= v.index < size:
                    labels[v.index] = key
            if any(lab is None for lab in labels):  # integerized categorical features have no dictionary
                labels = [str(i) for i in range(size)]
            out.append(Feature(f.name, FeatureKind.CATEGORICAL, tuple(labels)))
        else:
            raise UnsupportedModelError(f"{name}: feature {f.name!r} has semantic {f.semantic.name}",
                                        "accepted: NUMERICAL, CATEGORICAL, BOOLEAN",
                                        location=IRLocation(file=name, field=f.name))
    return tuple(out), column


def _leaf_value(leaf: Any, t: int, node: int, name: str, *, K: int, gbt: bool, classes: Any,
                wta: bool) -> npt.NDArray[np.float64]:
    import ydf

    v = leaf.value
    loc = IRLocation(file=name, tree=t, node=node, field="value")
    if isinstance(v, ydf.tree.RegressionValue):
        out = np.array([float(np.float32(v.value))])
    elif isinstance(v, ydf.tree.ProbabilityValue) and not gbt:
        p = np.asarray(v.probability, dtype=np.float64)
        if p.shape[0] != K:
            raise ModelFormatError(f"{name}: tree {t}, node {node}: {p.shape[0]} class probabilities for {K} classes",
                                   location=loc)
        out = np.eye(K)[int(np.argmax(p))] if wta else p.astype(np.float32).astype(np.float64)
    else:
        raise UnsupportedModelError(f"{name}: tree {t}, node {node}: leaf value {type(v).__name__} is not supported",
                                    location=loc)
    if not np.all(np.isfinite(out)):
        raise ModelFormatError(f"{name}: tree {t}, node {node}: leaf value is not finite", location=loc)
    return out


def _lower_tree(tree: Any, t: int, column: dict[int, int], features: tuple[Feature, ...], name: str, *, K: int,
                gbt: bool, classes: Any, output: int, wta: bool) -> TreeArrays:
    """Preorder walk; each condition becomes ``x <= t`` or a category set with the negative child left."""
    import ydf

    T = ydf.tree
    rows: list[dict[str, Any]] = []
    stack: list[tuple[Any, int, str]] = [(tree.root, -1, "")]
    while stack:
        node, parent, side = stack.pop()
        me = len(rows)
        if parent >= 0:
            rows[parent][side] = me
        row: dict[str, Any] = {"left": -1, "right": -1, "feature": -1, "thr": np.nan, "ml": False, "cat": None,
                               "value": None}
        rows.append(row)
        if isinstance(node, T.Leaf):
            row["value"] = _leaf_value(node, t, me, name, K=K if not gbt else 1, gbt=gbt, classes=classes, wta=wta)
            continue
        cond = node.condition
        loc = IRLocation(file=name, tree=t, node=me, field="condition")
        attr = int(getattr(cond, "attribute", -1))
        if attr not in column:
            raise ModelFormatError(f"{name}: tree {t}, node {me}: condition on column {attr}, which is not an input "
                                   "feature", location=loc)
        f = column[attr]
        kind = features[f].kind
        if isinstance(cond, T.NumericalHigherThanCondition) and kind == FeatureKind.NUMERICAL:
            thr = np.float32(cond.threshold)
            if np.isnan(thr):
                raise ModelFormatError(f"{name}: tree {t}, node {me}: NaN threshold", location=loc)
            row.update(feature=f, thr=float(np.nextafter(thr, np.float32(-np.inf))))
        elif isinstance(cond, T.IsTrueCondition) and kind == FeatureKind.BINARY:
            row.update(feature=f, thr=0.5)
        elif isinstance(cond, T.IsMissingInCondition):
            row.update(feature=f, thr=np.inf)  # every value goes left (negative); NaN right (positive)
            row["ml"] = False
            stack.append((node.pos_child, me, "right"))
            stack.append((node.neg_child, me, "left"))
            continue
        elif isinstance(cond, T.CategoricalIsInCondition) and kind == FeatureKind.CATEGORICAL:
            mask = np.unique(np.asarray(cond.mask, dtype=np.int64))
            if mask.size and (mask[0] < 0 or mask[-1] >= 2**32):
                raise ModelFormatError(f"{name}: tree {t}, node {me}: category codes outside [0, 2**32)", location=loc)
            row.update(feature=f, cat=mask)
        else:
            raise UnsupportedModelError(f"{name}: tree {t}, node {me}: {type(cond).__name__} on a "
                                        f"{kind.name.lower()} feature is not supported",
                                        "accepted: NumericalHigherThan, CategoricalIsIn, IsTrue, IsMissingIn",
                                        location=loc)
        row["ml"] = not bool(cond.missing)  # missing takes the positive (right) child iff cond.missing
        stack.append((node.pos_child, me, "right"))
        stack.append((node.neg_child, me, "left"))
    n = len(rows)
    leaf = np.array([r["left"] < 0 for r in rows])
    is_cat = np.array([r["cat"] is not None for r in rows])
    width = 1 if gbt else K
    value = np.zeros((n, width))
    for i, r in enumerate(rows):
        if r["value"] is not None:
            value[i] = r["value"]
    return TreeArrays(
        left=np.array([r["left"] for r in rows], dtype=np.int64),
        right=np.array([r["right"] for r in rows], dtype=np.int64),
        feature=np.array([r["feature"] for r in rows], dtype=np.int64),
        threshold=np.array([r["thr"] for r in rows], dtype=np.float64),
        missing_left=np.array([r["ml"] for r in rows], dtype=bool) & ~leaf,
        value=value[:, 0] if gbt or K == 1 else value, output=output if gbt else (0 if K == 1 else -1),
        is_categorical=is_cat, categories={i: r["cat"] for i, r in enumerate(rows) if r["cat"] is not None},
        cat_in_set_left=np.zeros(n, dtype=bool), cat_invalid_left=is_cat.copy(),
    )
