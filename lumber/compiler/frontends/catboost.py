"""CatBoost frontend: symmetric trees straight into an ObliviousEnsemble (or a Forest).

CatBoost's default trees are oblivious: level ``d`` of a tree sets bit ``d``
of the leaf index when ``float32(x) > border`` (a NaN sets it only when the
feature's ``nan_value_treatment`` is ``AsTrue``, i.e. ``nan_mode=Max``); the
margin is ``scale * sum_t leaf_values[t][idx] + bias`` with the trees summed
in order from 0. That is the ObliviousEnsemble IR as is: base score 0, the
trees, then a constant tree holding the bias, so margins equal CatBoost's bit
for bit when ``scale == 1`` (a scale is folded into the leaves: equal to
about 1e-16 relative). Non-symmetric trees (``grow_policy`` Depthwise or
Lossguide) become a Forest. The JSON export is the format of record; model
objects and ``.cbm`` files go through it. Categorical, text and embedding
features are refused.
"""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any, Sequence

import numpy as np
import numpy.typing as npt

from lumber.ir import (
    Feature, Forest, IRLocation, ModelFormatError, ObliviousEnsemble, PostTransform, Schema, Task,
    UnsupportedModelError,
)
from lumber.ir.assemble import TreeArrays, concat_trees

from .jsondoc import JsonDoc, parse_json
from .files import content_hash, read_model_bytes

REGRESSION_LOSSES = frozenset({
    "RMSE", "MAE", "Quantile", "MAPE", "Huber", "Expectile", "LogLinQuantile", "Lq", "LogCosh", "MultiQuantile",
    "YetiRank", "YetiRankPairwise", "PairLogit", "PairLogitPairwise", "QueryRMSE", "QuerySoftMax",
    "StochasticRank", "LambdaMart", "StochasticFilter", "GroupQuantile",
})
"""Objectives whose prediction is the raw margin."""
_TASKS: dict[str, tuple[Task, PostTransform]] = {
    "Logloss": (Task.BINARY, PostTransform.SIGMOID),
    "CrossEntropy": (Task.BINARY, PostTransform.SIGMOID),
    "MultiClass": (Task.MULTICLASS, PostTransform.SOFTMAX),
    "MultiClassOneVsAll": (Task.MULTICLASS, PostTransform.SIGMOID),
    "Poisson": (Task.REGRESSION, PostTransform.EXP),
    "Tweedie": (Task.REGRESSION, PostTransform.EXP),
    "MultiRMSE": (Task.REGRESSION, PostTransform.IDENTITY),
}


# -- entry points ---------------------------------------------------------------------------------


def from_catboost(model: Any, **options: Any) -> Forest:
    """A fitted ``catboost.CatBoost`` (regressor, classifier, ranker) -> Forest.

    Options: ``feature_names`` (override the model's). Symmetric models become
    complete binary trees; :func:`catboost_to_oblivious` keeps them as tables.
    """
    return _as_forest(lower_catboost_model(model, **options))


def catboost_to_oblivious(model_or_path: Any, **options: Any) -> ObliviousEnsemble:
    """A symmetric CatBoost model (object, JSON export or ``.cbm`` file) -> ObliviousEnsemble."""
    if isinstance(model_or_path, (str, Path)):
        ir = lower_catboost_file(model_or_path, **options)
    else:
        ir = lower_catboost_model(model_or_path, **options)
    if not isinstance(ir, ObliviousEnsemble):
        raise UnsupportedModelError(
            "this CatBoost model has non-symmetric trees (grow_policy Depthwise or Lossguide)",
            "load it as a Forest with lumber.load, or re-compose it with the 'polynomial,oblivious' passes")
    return ir


def load_catboost_file(path: str | Path, *, data: bytes | None = None, **options: Any) -> Forest:
    """A CatBoost JSON export (``save_model(f, format="json")``) or ``.cbm`` file -> Forest."""
    return _as_forest(lower_catboost_file(path, data=data, **options))


def lower_catboost_model(model: Any, **options: Any) -> ObliviousEnsemble | Forest:
    """A CatBoost model object in its natural form (tables when symmetric)."""
    try:
        import catboost
    except ImportError:  # pragma: no cover - the object came from catboost
        raise UnsupportedModelError("loading a CatBoost model object needs the catboost package") from None
    if not isinstance(model, catboost.CatBoost):
        raise UnsupportedModelError(f"cannot load an object of type catboost {type(model).__name__}",
                                    "accepted: CatBoost, CatBoostRegressor, CatBoostClassifier, CatBoostRanker")
    if not model.is_fitted():
        raise UnsupportedModelError(f"{type(model).__name__} is not fitted", "call fit() before loading it")
    with tempfile.TemporaryDirectory(prefix="lumber-catboost-") as tmp:
        out = Path(tmp, "model.json")
        model.save_model(str(out), format="json")
        raw = out.read_bytes()
    if "classes" not in options and getattr(model, "classes_", None) is not None and len(model.classes_):
        options["classes"] = tuple(np.asarray(model.classes_).tolist())
    return parse_catboost_json(raw, f"<{type(model).__name__}>", **options)


def lower_catboost_file(path: str | Path, *, data: bytes | None = None, **options: Any) -> ObliviousEnsemble | Forest:
    """A JSON export or ``.cbm`` file in its natural form."""
    name = str(path)
    if data is None:
        data = read_model_bytes(path, "a CatBoost JSON export or .cbm file")
    if data[:4] == b"CBM1":
        try:
            import catboost
        except ImportError:
            raise UnsupportedModelError(f"{name}: reading CatBoost's binary .cbm format needs the catboost package",
                                        "pip install catboost, or export the model with "
                                        "model.save_model('model.json', format='json')") from None
        model = catboost.CatBoost()
        try:
            model.load_model(name, format="cbm")
        except Exception as exc:  # CatBoostError has no stable base class across versions
            raise ModelFormatError(f"{name}: catboost cannot read this .cbm file ({exc})") from None
        return lower_catboost_model(model, **options)
    return parse_catboost_json(data, name, **options)


def _as_forest(ir: ObliviousEnsemble | Forest) -> Forest:
    return ir.to_forest() if isinstance(ir, ObliviousEnsemble) else ir


# -- parsing ---------------------------------------------------------------------------------------


class _Doc(JsonDoc):
    def floats(self, v: Any, path: str, tree: int | None = None) -> npt.NDArray[np.float64]:
        if not isinstance(v, list) or not all(isinstance(x, (int, float)) and not isinstance(x, bool) for x in v):
            raise self.fail(path, "expected an array of numbers", tree=tree)
        arr = np.asarray(v, dtype=np.float64)
        if not np.all(np.isfinite(arr)):
            raise self.fail(path, "holds NaN or infinite values", tree=tree)
        return arr


def float32_border(b: float) -> float:
    """The largest float32 <= ``b``: ``float32(x) > b`` iff ``float32(x) > that`` (CatBoost compares in float32)."""
    f = np.float32(b)
    if float(f) > b:
        f = np.nextafter(f, np.float32(-np.inf))
    return float(f)


def parse_catboost_json(raw: bytes, name: str, *, feature_names: Sequence[str] | None = None,
                        classes: Sequence[Any] | None = None) -> ObliviousEnsemble | Forest:
    """A CatBoost JSON export (bytes) -> ObliviousEnsemble (symmetric trees) or Forest."""
    root = parse_json(raw, name, "a CatBoost JSON model",
                      "the file is truncated or garbled; export it again with save_model(f, format='json')")
    doc = _Doc(name)
    if not isinstance(root, dict):
        raise doc.fail("<root>", "expected an object (a CatBoost JSON export)")
    info = doc.get(root, "features_info", "", dict)
    for kind in ("categorical_features", "text_features", "embedding_features"):
        feats = info.get(kind) or []
        if feats:
            label = kind.split("_")[0]
            first = feats[0].get("feature_id") or f"#{feats[0].get('flat_feature_index', '?')}"
            raise UnsupportedModelError(
                f"{name}: the model has {len(feats)} {label} feature(s) (first: '{first}'); "
                f"lumber reads CatBoost models with float features only",
                "encode the feature as numbers before training, or keep using CatBoost's predictor")
    floats = doc.get(info, "float_features", "features_info", list)
    flat: list[int] = []
    nan_true: list[bool] = []
    ids: list[str] = []
    for i, f in enumerate(floats):
        path = f"features_info.float_features[{i}]"
        flat.append(int(doc.get(f, "flat_feature_index", path, int)))
        treat = str(f.get("nan_value_treatment", "AsIs"))
        if treat not in ("AsIs", "AsFalse", "AsTrue"):
            raise doc.fail(f"{path}.nan_value_treatment", f"unknown value {treat!r}", "expected AsIs, AsFalse or AsTrue")
        nan_true.append(treat == "AsTrue")
        ids.append(str(f.get("feature_id") or ""))
    n_features = max(flat) + 1 if flat else 0
    names = [f"f{j}" for j in range(n_features)]
    if all(ids) and len(set(ids)) == len(ids):
        for j, nm in zip(flat, ids):
            names[j] = nm
    if feature_names is not None:
        if len(feature_names) != n_features:
            raise UnsupportedModelError(f"feature_names has {len(feature_names)} names, the model reads {n_features}")
        names = [str(n) for n in feature_names]
    params = root.get("model_info", {}).get("params", {}) if isinstance(root.get("model_info"), dict) else {}
    loss = str((params.get("loss_function") or {}).get("type", "RMSE"))
    sb = doc.get(root, "scale_and_bias", "", list)
    if len(sb) != 2:
        raise doc.fail("scale_and_bias", "expected [scale, [bias, ...]]")
    scale = float(sb[0])
    bias = doc.floats(sb[1] if isinstance(sb[1], list) else [sb[1]], "scale_and_bias[1]")
    K = int(bias.shape[0])
    if K < 1:
        raise doc.fail("scale_and_bias[1]", "expected at least one bias value")
    if loss in _TASKS:
        task, post = _TASKS[loss]
    elif loss in REGRESSION_LOSSES:
        task, post = Task.REGRESSION, PostTransform.IDENTITY
    else:
        raise UnsupportedModelError(f"{name}: CatBoost loss function {loss!r} is not supported",
                                    f"supported: {', '.join(sorted(set(_TASKS) | REGRESSION_LOSSES))}")
    if task == Task.BINARY and K != 1:
        raise doc.fail("scale_and_bias", f"a {loss} model has one output, found {K}")
    if task == Task.REGRESSION and K != 1 and loss != "MultiRMSE":
        raise UnsupportedModelError(f"{name}: {loss} model with {K} outputs is not supported")
    if classes is None and task in (Task.BINARY, Task.MULTICLASS):
        cn = (params.get("data_processing_options") or {}).get("class_names") or []
        expected = 2 if task == Task.BINARY else K
        classes = tuple(cn) if len(cn) == expected else None
    classes = tuple(classes) if classes is not None and task in (Task.BINARY, Task.MULTICLASS) else None
    source = {"library": "catboost", "objective": loss, "content_hash": content_hash(raw),
              "version": _release(root), "format": "json"}
    schema = Schema(
        features=tuple(Feature(n) for n in names), task=task, n_outputs=K, base_score=(0.0,) * K,
        post_transform=post, input_dtype="float32", accumulate_dtype="float64", classes=classes,
        decision="proba", source=source,
    )
    feature_of = np.asarray(flat, dtype=np.int64)
    nan_of = np.asarray(nan_true, dtype=bool)
    if "oblivious_trees" in root:
        trees = doc.get(root, "oblivious_trees", "", list)
        return _oblivious(doc, trees, schema, feature_of, nan_of, scale, bias)
    if "trees" in root:
        trees = doc.get(root, "trees", "", list)
        return _non_symmetric(doc, trees, schema, feature_of, nan_of, scale, bias)
    raise doc.fail("<root>", "no 'oblivious_trees' or 'trees' field", "is this a CatBoost JSON export?")


def _release(root: dict[str, Any]) -> str:
    text = str((root.get("model_info") or {}).get("catboost_version_info", ""))
    marker = "CatBoost release "
    if marker in text:
        return text.split(marker, 1)[1].split(" ", 1)[0].rstrip(".")
    return ""


def _split(doc: _Doc, s: Any, path: str, t: int, feature_of: npt.NDArray[np.int64],
           nan_of: npt.NDArray[np.bool_]) -> tuple[int, float, bool]:
    kind = doc.get(s, "split_type", path, str, tree=t)
    if kind != "FloatFeature":
        raise UnsupportedModelError(f"{doc.name}: {path}: split type {kind!r} is not supported",
                                    "lumber reads float-feature splits only", location=IRLocation(tree=t))
    fi = doc.get(s, "float_feature_index", path, int, tree=t)
    if not 0 <= fi < feature_of.shape[0]:
        raise doc.fail(f"{path}.float_feature_index", f"{fi} is out of range ({feature_of.shape[0]} float features)",
                       tree=t)
    border = doc.get(s, "border", path, (int, float), tree=t)
    if not np.isfinite(border):
        raise doc.fail(f"{path}.border", "is not finite", tree=t)
    return int(feature_of[fi]), float32_border(float(border)), bool(nan_of[fi])


def _oblivious(doc: _Doc, trees: list[Any], schema: Schema, feature_of: npt.NDArray[np.int64],
               nan_of: npt.NDArray[np.bool_], scale: float, bias: npt.NDArray[np.float64]) -> ObliviousEnsemble:
    K = schema.n_outputs
    depth, feat, thr, nan, values = [], [], [], [], []
    for t, tree in enumerate(trees):
        path = f"oblivious_trees[{t}]"
        splits = doc.get(tree, "splits", path, list, tree=t)
        for l, s in enumerate(splits):
            f, b, n = _split(doc, s, f"{path}.splits[{l}]", t, feature_of, nan_of)
            feat.append(f)
            thr.append(b)
            nan.append(n)
        lv = doc.floats(doc.get(tree, "leaf_values", path, list, tree=t), f"{path}.leaf_values", tree=t)
        if lv.shape[0] != K << len(splits):
            raise doc.fail(f"{path}.leaf_values", f"has {lv.shape[0]} values, expected {K << len(splits)} "
                           f"(2^{len(splits)} leaves x {K} outputs)", tree=t)
        depth.append(len(splits))
        values.append(lv * scale if scale != 1.0 else lv)
    tout = [0 if K == 1 else -1] * len(trees)
    if np.any(bias != 0):
        depth.append(0)
        tout.append(0 if K == 1 else -1)
        values.append(bias)
    return ObliviousEnsemble(
        schema=schema, depth=np.asarray(depth, dtype=np.int32), level_feature=np.asarray(feat, dtype=np.int32),
        level_threshold=np.asarray(thr, dtype=np.float64), level_nan_true=np.asarray(nan, dtype=bool),
        tree_output=np.asarray(tout, dtype=np.int32), value=np.concatenate(values) if values else np.zeros(0),
    ).validate()


def _non_symmetric(doc: _Doc, trees: list[Any], schema: Schema, feature_of: npt.NDArray[np.int64],
                   nan_of: npt.NDArray[np.bool_], scale: float, bias: npt.NDArray[np.float64]) -> Forest:
    """Nested ``{"split", "left", "right"}`` / ``{"value"}`` nodes; ``right`` is ``x > border``."""
    K = schema.n_outputs
    out: list[TreeArrays] = []
    for t, tree in enumerate(trees):
        left: list[int] = []
        right: list[int] = []
        feat: list[int] = []
        thr: list[float] = []
        ml: list[bool] = []
        val: list[npt.NDArray[np.float64]] = []
        queue: list[tuple[Any, str, int, bool]] = [(tree, f"trees[{t}]", -1, False)]
        while queue:  # breadth-first, so children follow their parent
            node, path, parent, is_right = queue.pop(0)
            i = len(left)
            if parent >= 0:
                (right if is_right else left)[parent] = i
            left.append(-1)
            right.append(-1)
            if isinstance(node, dict) and "split" in node:
                f, b, n = _split(doc, node["split"], f"{path}.split", t, feature_of, nan_of)
                feat.append(f)
                thr.append(b)
                ml.append(not n)
                val.append(np.zeros(K))
                queue.append((doc.get(node, "left", path, dict, tree=t), f"{path}.left", i, False))
                queue.append((doc.get(node, "right", path, dict, tree=t), f"{path}.right", i, True))
            else:
                v = doc.get(node, "value", path, (int, float, list), tree=t)
                arr = doc.floats(v if isinstance(v, list) else [v], f"{path}.value", tree=t)
                if arr.shape[0] != K:
                    raise doc.fail(f"{path}.value", f"has {arr.shape[0]} values, expected {K}", tree=t)
                feat.append(-1)
                thr.append(np.nan)
                ml.append(False)
                val.append(arr * scale if scale != 1.0 else arr)
        value = np.asarray(val)
        out.append(TreeArrays(left=np.asarray(left), right=np.asarray(right), feature=np.asarray(feat),
                              threshold=np.asarray(thr), missing_left=np.asarray(ml),
                              value=value[:, 0] if K == 1 else value, output=0 if K == 1 else -1))
    if np.any(bias != 0):
        out.append(TreeArrays(left=np.array([-1]), right=np.array([-1]), feature=np.array([-1]),
                              threshold=np.array([np.nan]), missing_left=np.array([False]),
                              value=bias[:1] if K == 1 else bias[None, :], output=0 if K == 1 else -1))
    return concat_trees(schema, out)


__all__ = ["catboost_to_oblivious", "float32_border", "from_catboost", "load_catboost_file",
           "lower_catboost_file", "lower_catboost_model", "parse_catboost_json"]
