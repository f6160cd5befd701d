"""XGBoost frontend: a Booster, an ``XGBModel`` or a JSON / UBJSON model file -> Forest.

lumber reads XGBoost's own model document (``booster.save_raw("json")``, or the
file's bytes decoded with :mod:`.ubjson`), checks its structure field by field
and never hands a file to XGBoost's loader. Every problem names the file and the
JSON path, e.g. ``learner.gradient_booster.model.trees[3].split_conditions``.

Semantics reproduced exactly (XGBoost 2.x / 3.x CPU predictor):

* Inputs are float32 and a numerical node sends ``x < split_condition`` left.
  The IR's ``x <= t`` uses ``t`` = the largest float32 below ``split_condition``.
* NaN takes ``default_left``. Infinite inputs are rejected, as XGBoost does
  unless ``missing=inf``.
* Categorical nodes (``split_type == 1``): listed categories go right; a value
  that is not a valid category (``x < 0`` or ``x >= 2**24``, so -0.5 too) goes
  left, as does any other unlisted category (``CategoryRule.XGBOOST``).
* Margins are float32 sums starting at the base margin, trees in order. The
  base margin is ``base_score`` mapped by the objective's ``ProbToMargin``
  (``-logf(1/p - 1)`` for logistic objectives, ``logf(p)`` for log-link ones),
  computed with the C library's ``logf`` like XGBoost itself.
* DART: leaf values are multiplied by ``weight_drop`` in float32, as the
  predictor does; ``gblinear`` and vector-leaf (``multi_output_tree``) models
  are refused.

Node ids are XGBoost's: ``forest.apply(X) == booster.predict(DMatrix(X), pred_leaf=True)``.
Nodes deleted by pruning (``tree_method="exact"``) are dropped; :func:`xgboost_node_ids`
then maps lumber's node ids back to XGBoost's.
"""

from __future__ import annotations

import functools
import math
import re
from pathlib import Path
from typing import Any, Callable, Sequence

import numpy as np
import numpy.typing as npt

from lumber.ir import (
    CategoryRule, Feature, FeatureKind, Forest, IRLocation, ModelFormatError, PostTransform, Schema, Task,
    UnsupportedModelError,
)
from lumber.ir.assemble import TreeArrays, bfs_order, concat_trees

from .jsondoc import JsonDoc, describe, parse_json
from .ubjson import UBJSONError, loads as ubjson_loads
from .files import content_hash, read_model_bytes

DELETED_NODE = 2147483647
"""XGBoost's ``kDeletedNodeMarker`` in ``split_indices`` of nodes removed by pruning."""

KRT_EPS = np.float32(1e-6)
"""XGBoost's ``kRtEps``: logistic ``base_score`` is clamped to ``[kRtEps, 1 - kRtEps]``."""

# objective -> (task, post-transform, how base_score becomes the base margin)
_OBJECTIVES: dict[str, tuple[Task, PostTransform, str]] = {
    "reg:squarederror": (Task.REGRESSION, PostTransform.IDENTITY, "identity"),
    "reg:linear": (Task.REGRESSION, PostTransform.IDENTITY, "identity"),
    "reg:squaredlogerror": (Task.REGRESSION, PostTransform.IDENTITY, "identity"),
    "reg:pseudohubererror": (Task.REGRESSION, PostTransform.IDENTITY, "identity"),
    "reg:absoluteerror": (Task.REGRESSION, PostTransform.IDENTITY, "identity"),
    "reg:quantileerror": (Task.REGRESSION, PostTransform.IDENTITY, "identity"),
    "rank:pairwise": (Task.REGRESSION, PostTransform.IDENTITY, "identity"),
    "rank:ndcg": (Task.REGRESSION, PostTransform.IDENTITY, "identity"),
    "rank:map": (Task.REGRESSION, PostTransform.IDENTITY, "identity"),
    "reg:logistic": (Task.REGRESSION, PostTransform.SIGMOID, "logit"),
    "binary:logistic": (Task.BINARY, PostTransform.SIGMOID, "logit"),
    "binary:logitraw": (Task.BINARY, PostTransform.SIGMOID, "identity"),
    "count:poisson": (Task.REGRESSION, PostTransform.EXP, "log"),
    "reg:gamma": (Task.REGRESSION, PostTransform.EXP, "log"),
    "reg:tweedie": (Task.REGRESSION, PostTransform.EXP, "log"),
    "survival:cox": (Task.REGRESSION, PostTransform.EXP, "log"),
    "survival:aft": (Task.REGRESSION, PostTransform.EXP, "log"),
    "multi:softprob": (Task.MULTICLASS, PostTransform.SOFTMAX, "identity"),
    "multi:softmax": (Task.MULTICLASS, PostTransform.SOFTMAX, "identity"),
}
_RAW_ONLY = {"binary:hinge": "a step function (margin > 0)"}
ACCEPTED_OBJECTIVES = ", ".join(sorted(_OBJECTIVES))

_FEATURE_KINDS = {"q": FeatureKind.NUMERICAL, "float": FeatureKind.NUMERICAL, "int": FeatureKind.ORDINAL,
                  "i": FeatureKind.BINARY, "c": FeatureKind.CATEGORICAL}

TREES = "learner.gradient_booster.model.trees"


# -- entry points ---------------------------------------------------------------------------------


def from_xgboost(model: Any, **options: Any) -> Forest:
    """An ``xgboost.Booster`` or fitted ``XGBModel`` (classifier, regressor, ranker, RF) -> Forest.

    Options: ``feature_names`` (override the model's), ``iteration_range``
    (``(start, stop)`` boosting rounds as in ``Booster.predict``; an ``XGBModel``
    defaults to its ``best_iteration`` like its ``predict``), ``raw_output``
    (accept objectives whose transform lumber cannot express).
    """
    return _from_object(model, **options)[0]


def load_xgboost_file(path: str | Path, *, data: bytes | None = None, **options: Any) -> Forest:
    """An XGBoost JSON or UBJSON model file (``save_model("m.json" | "m.ubj")``) -> Forest.

    ``data`` is the file's bytes when the caller already read them; options as
    for :func:`from_xgboost`.
    """
    return _from_file(path, data=data, **options)[0]


def xgboost_node_ids(model_or_path: Any, **options: Any) -> list[npt.NDArray[np.int64]]:
    """Per tree, XGBoost's node id of each lumber node (identity unless pruning deleted nodes)."""
    if isinstance(model_or_path, (str, Path)):
        return _from_file(model_or_path, **options)[1]
    return _from_object(model_or_path, **options)[1]


def _from_object(model: Any, **options: Any) -> tuple[Forest, list[npt.NDArray[np.int64]]]:
    import xgboost

    if isinstance(model, xgboost.XGBModel):
        try:
            booster = model.get_booster()
        except Exception:  # xgboost raises NotFittedError / XGBoostError depending on version
            raise UnsupportedModelError(f"{type(model).__name__} is not fitted",
                                        "call fit() before loading it") from None
        missing = model.missing
        if missing is not None and not (isinstance(missing, float) and math.isnan(missing)):
            raise UnsupportedModelError(
                f"{type(model).__name__}(missing={missing!r}) treats the value {missing!r} as missing",
                "lumber routes only NaN through default_left; train with missing=nan, "
                "or replace the value by NaN in the data and load model.get_booster()")
        if "iteration_range" not in options:
            best = booster.attributes().get("best_iteration")
            if best is not None:
                options["iteration_range"] = (0, int(best) + 1)
        if "classes" not in options and hasattr(model, "classes_"):
            options["classes"] = tuple(np.asarray(model.classes_).tolist())
        name = f"<{type(model).__name__}>"
    elif isinstance(model, xgboost.Booster):
        booster = model
        name = "<xgboost.Booster>"
    else:
        raise UnsupportedModelError(
            f"cannot load an object of type xgboost {type(model).__name__}",
            "accepted: xgboost.Booster, XGBClassifier, XGBRegressor, XGBRanker, XGBRFClassifier, XGBRFRegressor")
    raw = bytes(booster.save_raw("json"))
    return _lower(_parse_json(raw, name), raw, name, "booster", **options)


def _from_file(path: str | Path, *, data: bytes | None = None,
               **options: Any) -> tuple[Forest, list[npt.NDArray[np.int64]]]:
    name = str(path)
    if data is None:
        data = read_model_bytes(path, "an XGBoost model file")
    head = data.lstrip()[:1]
    if head == b"{" and data.lstrip()[1:2] in (b"L", b"l", b"i", b"U", b"I", b"$", b"#", b"}", b"N"):
        doc, fmt = _parse_ubjson(data, name), "ubjson"
    elif head == b"{":
        doc, fmt = _parse_json(data, name), "json"
    else:
        raise ModelFormatError(f"{name}: not an XGBoost JSON or UBJSON model",
                               "save the model with booster.save_model('model.json') or 'model.ubj'")
    return _lower(doc, data, name, fmt, **options)


def _parse_json(data: bytes, name: str) -> Any:
    return parse_json(data, name, "an XGBoost JSON model",
                      "the file is truncated or garbled; save it again with save_model")


def _parse_ubjson(data: bytes, name: str) -> Any:
    try:
        return ubjson_loads(data)
    except UBJSONError as exc:
        raise ModelFormatError(f"{name}: invalid UBJSON: {exc}",
                               "the file is truncated or garbled; save it again with save_model") from None


# -- reading fields with their JSON path ----------------------------------------------------------


class _Doc(JsonDoc):
    """XGBoost fields: parameters as decimal strings, arrays as JSON lists or UBJSON typed arrays."""

    def int_param(self, parent: dict[str, Any], key: str, path: str, default: int | None = None) -> int:
        """XGBoost stores model parameters as decimal strings."""
        if key not in parent and default is not None:
            return default
        v = self.get(parent, key, path)
        try:
            if isinstance(v, str):
                return int(v.strip())
            if isinstance(v, (int, np.integer)) and not isinstance(v, bool):
                return int(v)
        except ValueError:
            pass
        raise self.fail(f"{path}.{key}", f"expected an integer, found {v!r}")

    def array(self, parent: dict[str, Any], key: str, path: str, kind: str, n: int | None = None,
              tree: int | None = None) -> npt.NDArray[Any]:
        """A numeric array field as int64 (``kind='i'``) or float64 (``kind='f'``), length-checked."""
        full = f"{path}.{key}"
        v = self.get(parent, key, path)
        if isinstance(v, np.ndarray):
            arr = v
        elif isinstance(v, list):
            try:
                arr = np.asarray(v)
            except ValueError:
                raise self.fail(full, "expected a flat array of numbers", tree=tree) from None
            if arr.size == 0:
                arr = arr.astype(np.float64)
        else:
            raise self.fail(full, f"expected an array, found {describe(v)}", tree=tree)
        if arr.ndim != 1 or arr.dtype.kind not in "biuf":
            raise self.fail(full, "expected a flat array of numbers", tree=tree)
        if kind == "i":
            if arr.dtype.kind == "f":
                if not np.all(np.isfinite(arr)) or np.any(arr != np.trunc(arr)):
                    raise self.fail(full, "expected integers", tree=tree)
            out = arr.astype(np.int64)
        else:
            out = arr.astype(np.float64)
        if n is not None and out.shape[0] != n:
            raise self.fail(full, f"has {out.shape[0]} entries, expected {n} (tree_param.num_nodes)", tree=tree)
        return out


def _parse_floats(doc: _Doc, text: Any, path: str) -> npt.NDArray[np.float32]:
    """``base_score`` as XGBoost writes it: ``"5E-1"`` or ``"[2.76E-1,1E0]"``."""
    if isinstance(text, (int, float)) and not isinstance(text, bool):
        parts = [str(text)]
    elif isinstance(text, str):
        parts = [p for p in re.split(r"[\s,]+", text.strip().strip("[]").strip()) if p]
    else:
        raise doc.fail(path, f"expected a number string such as '[5E-1]', found {describe(text)}")
    try:
        vals = np.array([float(p) for p in parts], dtype=np.float64)
    except ValueError:
        raise doc.fail(path, f"expected a number string such as '[5E-1]', found {text!r}") from None
    if vals.size == 0 or not np.all(np.isfinite(vals)):
        raise doc.fail(path, f"expected finite numbers, found {text!r}")
    return vals.astype(np.float32)


# -- base margin ----------------------------------------------------------------------------------


@functools.lru_cache(maxsize=1)
def _c_logf() -> Callable[[float], float] | None:
    """The C library's ``logf`` (what XGBoost calls), or None where it cannot be loaded."""
    import ctypes
    import ctypes.util

    for lib in (ctypes.util.find_library("m"), "libm.so.6", ctypes.util.find_library("c"), "ucrtbase"):
        if not lib:
            continue
        try:
            fn = ctypes.CDLL(lib).logf
        except (OSError, AttributeError):
            continue
        fn.restype = ctypes.c_float
        fn.argtypes = [ctypes.c_float]
        return fn  # type: ignore[no-any-return]
    return None


def logf(x: np.float32) -> np.float32:
    """float32 natural log as XGBoost computes it (C ``logf``; correctly rounded fallback)."""
    fn = _c_logf()
    if fn is not None:
        return np.float32(fn(float(x)))
    return np.float32(math.log(float(x)))


def base_margin(kind: str, base_score: npt.NDArray[np.float32], doc: _Doc, path: str) -> npt.NDArray[np.float32]:
    """XGBoost's ``ProbToMargin`` of each base score, in float32."""
    if kind == "identity":
        return base_score
    out = np.empty_like(base_score)
    for i, p in enumerate(base_score):
        if kind == "logit":
            if not 0.0 < p < 1.0:
                raise doc.fail(path, f"base_score {float(p)!r} must lie in (0, 1) for a logistic objective")
            p = min(max(p, KRT_EPS), np.float32(1) - KRT_EPS)
            out[i] = -logf(np.float32(np.float32(1) / p - np.float32(1)))
        else:
            if not p > 0.0:
                raise doc.fail(path, f"base_score {float(p)!r} must be positive for a log-link objective")
            out[i] = logf(p)
    return out


# -- lowering -------------------------------------------------------------------------------------


def _lower(root: Any, raw: bytes, name: str, fmt: str, *, feature_names: Sequence[str] | None = None,
           iteration_range: tuple[int, int] | None = None, classes: Sequence[Any] | None = None,
           raw_output: bool = False) -> tuple[Forest, list[npt.NDArray[np.int64]]]:
    doc = _Doc(name)
    top = doc.obj(root, "<document>")
    learner = doc.obj(doc.get(top, "learner", ""), "learner")
    version = top.get("version")
    version_text = ".".join(str(int(v)) for v in version) if isinstance(version, (list, np.ndarray)) else ""

    mp_path = "learner.learner_model_param"
    mp = doc.obj(doc.get(learner, "learner_model_param", "learner"), mp_path)
    n_features = doc.int_param(mp, "num_feature", mp_path)
    num_class = doc.int_param(mp, "num_class", mp_path, default=0)
    num_target = doc.int_param(mp, "num_target", mp_path, default=1)
    if n_features < 1:
        raise doc.fail(f"{mp_path}.num_feature", f"must be at least 1, found {n_features}")
    if num_class < 0 or num_target < 1 or (num_class > 1 and num_target > 1):
        raise doc.fail(mp_path, f"num_class={num_class} with num_target={num_target} is not a valid combination")
    K = num_class if num_class > 1 else num_target

    obj_path = "learner.objective"
    objective = doc.obj(doc.get(learner, "objective", "learner"), obj_path)
    obj_name = doc.get(objective, "name", obj_path)
    if not isinstance(obj_name, str):
        raise doc.fail(f"{obj_path}.name", f"expected a string, found {describe(obj_name)}")
    if obj_name in _OBJECTIVES:
        task, post, margin_kind = _OBJECTIVES[obj_name]
    elif obj_name in _RAW_ONLY and raw_output:
        task, post, margin_kind = Task.REGRESSION, PostTransform.IDENTITY, "identity"
    elif obj_name in _RAW_ONLY:
        raise UnsupportedModelError(
            f"objective {obj_name!r} maps margins through {_RAW_ONLY[obj_name]}, which lumber cannot express",
            "pass raw_output=True to load it anyway (evaluate() stays exact; predict() returns raw margins)",
            location=IRLocation(file=name, field=f"{obj_path}.name"))
    else:
        raise UnsupportedModelError(f"objective {obj_name!r} is not supported",
                                    f"supported objectives: {ACCEPTED_OBJECTIVES}",
                                    location=IRLocation(file=name, field=f"{obj_path}.name"))
    if task == Task.MULTICLASS and num_class < 2:
        raise doc.fail(f"{mp_path}.num_class", f"objective {obj_name!r} needs num_class >= 2, found {num_class}")
    if task != Task.MULTICLASS and num_class > 1:
        raise doc.fail(f"{mp_path}.num_class",
                       f"objective {obj_name!r} is not multi-class, found num_class={num_class}")
    if task == Task.BINARY and K != 1:
        raise doc.fail(f"{mp_path}.num_target", f"objective {obj_name!r} has one output, found num_target={K}")

    bs_path = f"{mp_path}.base_score"
    base = _parse_floats(doc, doc.get(mp, "base_score", mp_path), bs_path)
    if base.shape[0] == 1 and K > 1:
        base = np.repeat(base, K)
    if base.shape[0] != K:
        raise doc.fail(bs_path, f"has {base.shape[0]} values for {K} outputs")
    margin = base_margin(margin_kind, base, doc, bs_path)

    # booster
    gb_path = "learner.gradient_booster"
    gb = doc.obj(doc.get(learner, "gradient_booster", "learner"), gb_path)
    gb_name = doc.get(gb, "name", gb_path)
    weights: npt.NDArray[np.float64] | None = None
    if gb_name == "gbtree":
        model = doc.obj(doc.get(gb, "model", gb_path), f"{gb_path}.model")
    elif gb_name == "dart":
        inner = doc.obj(doc.get(gb, "gbtree", gb_path), f"{gb_path}.gbtree")
        model = doc.obj(doc.get(inner, "model", f"{gb_path}.gbtree"), f"{gb_path}.gbtree.model")
        weights = doc.array(gb, "weight_drop", gb_path, "f")
    elif gb_name == "gblinear":
        raise UnsupportedModelError("booster 'gblinear' is a linear model, not a tree ensemble",
                                    "lumber compiles tree boosters: train with booster='gbtree' or 'dart'",
                                    location=IRLocation(file=name, field=f"{gb_path}.name"))
    else:
        raise UnsupportedModelError(f"unknown booster {gb_name!r}", "accepted: gbtree, dart",
                                    location=IRLocation(file=name, field=f"{gb_path}.name"))
    m_path = f"{gb_path}.model" if gb_name == "gbtree" else f"{gb_path}.gbtree.model"
    trees_path = f"{m_path}.trees"
    trees = doc.get(model, "trees", m_path)
    if not isinstance(trees, list):
        raise doc.fail(trees_path, f"expected an array of trees, found {describe(trees)}")
    T = len(trees)
    gp_path = f"{m_path}.gbtree_model_param"
    gp = doc.obj(doc.get(model, "gbtree_model_param", m_path), gp_path)
    num_trees = doc.int_param(gp, "num_trees", gp_path)
    if num_trees != T:
        raise doc.fail(gp_path + ".num_trees", f"says {num_trees} trees but {trees_path} holds {T}",
                       "the file is truncated or was edited")
    if T == 0:
        raise UnsupportedModelError(f"{name}: the model has no trees", "train at least one boosting round")
    tree_info = doc.array(model, "tree_info", m_path, "i")
    if tree_info.shape[0] != T:
        raise doc.fail(f"{m_path}.tree_info", f"has {tree_info.shape[0]} entries for {T} trees")
    if np.any((tree_info < 0) | (tree_info >= K)):
        t = int(np.flatnonzero((tree_info < 0) | (tree_info >= K))[0])
        raise doc.fail(f"{m_path}.tree_info", f"tree {t} adds to output {int(tree_info[t])}, "
                       f"but the model has {K} output(s)", tree=t)
    if weights is not None and weights.shape[0] != T:
        raise doc.fail(f"{gb_path}.weight_drop", f"has {weights.shape[0]} entries for {T} trees")
    if weights is not None and not np.all(np.isfinite(weights)):
        raise doc.fail(f"{gb_path}.weight_drop", "holds a NaN or infinite weight")
    if "iteration_indptr" in model:
        indptr = doc.array(model, "iteration_indptr", m_path, "i")
        if indptr.shape[0] < 2 or indptr[0] != 0 or indptr[-1] != T or np.any(np.diff(indptr) <= 0):
            raise doc.fail(f"{m_path}.iteration_indptr", f"must rise from 0 to the number of trees ({T})")
    else:
        per_iter = doc.int_param(gp, "num_parallel_tree", gp_path, default=1) * max(K, 1)
        if per_iter < 1 or T % per_iter:
            raise doc.fail(gp_path, f"{T} trees is not a multiple of {per_iter} trees per iteration")
        indptr = np.arange(0, T + 1, per_iter, dtype=np.int64)
    first, last = _select_iterations(indptr, iteration_range, name)

    feats = _features(doc, learner, model, n_features, feature_names)
    lowered = [_lower_tree(doc, doc.obj(trees[t], f"{trees_path}[{t}]"), t, f"{trees_path}[{t}]", n_features,
                           int(tree_info[t]) if K > 1 else 0,
                           None if weights is None else np.float32(weights[t]))
               for t in range(first, last)]
    if classes is None and task == Task.BINARY:
        classes = (0, 1)
    elif classes is None and task == Task.MULTICLASS:
        classes = tuple(range(K))
    schema = Schema(
        features=feats, task=task, n_outputs=K, base_score=tuple(float(v) for v in margin),
        post_transform=post, input_dtype="float32", accumulate_dtype="float32",
        classes=None if classes is None else tuple(classes), category_rule=CategoryRule.XGBOOST,
        allow_nan=True, allow_inf=False,
        source={"library": "xgboost", "version": version_text, "objective": obj_name,
                "content_hash": content_hash(raw), "booster": str(gb_name), "format": fmt},
    )
    forest = concat_trees(schema, [tr for tr, _ in lowered])
    return forest, [ids for _, ids in lowered]


def _select_iterations(indptr: npt.NDArray[np.int64], iteration_range: tuple[int, int] | None,
                       name: str) -> tuple[int, int]:
    """Trees ``[first, last)`` of boosting rounds ``[start, stop)``; ``(0, 0)`` means all, as in XGBoost."""
    n_iter = indptr.shape[0] - 1
    if iteration_range is None:
        return 0, int(indptr[-1])
    try:
        start, stop = (int(v) for v in iteration_range)
    except (TypeError, ValueError):
        raise UnsupportedModelError(f"{name}: iteration_range must be a pair of integers, "
                                    f"got {iteration_range!r}") from None
    if stop == 0:
        stop = n_iter
    if not 0 <= start < stop <= n_iter:
        raise UnsupportedModelError(f"{name}: iteration_range ({start}, {stop}) is outside the model's "
                                    f"{n_iter} boosting rounds", f"use 0 <= start < stop <= {n_iter}")
    return int(indptr[start]), int(indptr[stop])


def _features(doc: _Doc, learner: dict[str, Any], model: dict[str, Any], n: int,
              override: Sequence[str] | None) -> tuple[Feature, ...]:
    names = learner.get("feature_names") or []
    types = learner.get("feature_types") or []
    if not isinstance(names, list) or not all(isinstance(s, str) for s in names):
        raise doc.fail("learner.feature_names", "expected an array of strings")
    if not isinstance(types, list) or not all(isinstance(s, str) for s in types):
        raise doc.fail("learner.feature_types", "expected an array of strings")
    if names and len(names) != n:
        raise doc.fail("learner.feature_names", f"has {len(names)} names but num_feature is {n}")
    if types and len(types) != n:
        raise doc.fail("learner.feature_types", f"has {len(types)} types but num_feature is {n}")
    if override is not None:
        names = [str(s) for s in override]
        if len(names) != n:
            raise ModelFormatError(f"feature_names has {len(names)} names but the model reads {n} features")
    if not names:
        names = [f"f{i}" for i in range(n)]
    kinds = []
    for j, ty in enumerate(types or ["q"] * n):
        if ty not in _FEATURE_KINDS:
            raise doc.fail(f"learner.feature_types[{j}]", f"unknown feature type {ty!r}",
                           f"accepted: {', '.join(_FEATURE_KINDS)}")
        kinds.append(_FEATURE_KINDS[ty])
    labels = _category_labels(model, kinds)
    return tuple(Feature(names[j], kinds[j], labels.get(j)) for j in range(n))


def _category_labels(model: dict[str, Any], kinds: list[FeatureKind]) -> dict[int, tuple[Any, ...]]:
    """Training category labels that XGBoost >= 3.1 stores in ``cats`` (pandas input); best effort.

    Labels only help map a DataFrame's categories to codes; routing never
    depends on them, so an encoder lumber cannot read is skipped, not refused.
    """
    cats = model.get("cats")
    if not isinstance(cats, dict) or not isinstance(cats.get("enc"), list):
        return {}
    enc = cats["enc"]
    cat_cols = [j for j, k in enumerate(kinds) if k == FeatureKind.CATEGORICAL]
    out: dict[int, tuple[Any, ...]] = {}
    if len(enc) == len(kinds):
        cols = list(range(len(kinds)))
    elif len(enc) == len(cat_cols):
        cols = cat_cols
    else:
        return {}
    for j, e in zip(cols, enc):
        if kinds[j] != FeatureKind.CATEGORICAL or not isinstance(e, dict):
            continue
        try:
            values = np.asarray(e.get("values", []))
            if "offsets" in e:
                offs = np.asarray(e["offsets"], dtype=np.int64)
                raw = values.astype(np.uint8).tobytes()
                labels: tuple[Any, ...] = tuple(raw[a:b].decode("utf-8") for a, b in zip(offs[:-1], offs[1:]))
            else:
                labels = tuple(values.tolist())
        except (ValueError, TypeError, UnicodeDecodeError):
            continue
        if labels:
            out[j] = labels
    return out


def _lower_tree(doc: _Doc, tree: dict[str, Any], t: int, path: str, n_features: int, output: int,
                weight: np.float32 | None) -> tuple[TreeArrays, npt.NDArray[np.int64]]:
    """One XGBoost tree -> TreeArrays with XGBoost's node ids (deleted nodes dropped)."""
    tp_path = f"{path}.tree_param"
    tp = doc.obj(doc.get(tree, "tree_param", path), tp_path)
    n = doc.int_param(tp, "num_nodes", tp_path)
    if n < 1:
        raise doc.fail(f"{tp_path}.num_nodes", f"must be at least 1, found {n}", tree=t)
    slv = doc.int_param(tp, "size_leaf_vector", tp_path, default=1)
    if slv > 1:
        raise UnsupportedModelError(
            f"{doc.name}: tree {t} has vector leaves (size_leaf_vector={slv}, multi_strategy='multi_output_tree')",
            "lumber supports one output per tree: train with multi_strategy='one_output_per_tree'",
            location=IRLocation(file=doc.name, tree=t, field=f"{tp_path}.size_leaf_vector"))
    left = doc.array(tree, "left_children", path, "i", n, t)
    right = doc.array(tree, "right_children", path, "i", n, t)
    feat = doc.array(tree, "split_indices", path, "i", n, t)
    cond = doc.array(tree, "split_conditions", path, "f", n, t)
    default_left = doc.array(tree, "default_left", path, "i", n, t)
    split_type = doc.array(tree, "split_type", path, "i", n, t) if "split_type" in tree else np.zeros(n, np.int64)

    def first(mask: npt.NDArray[np.bool_]) -> int:
        return int(np.flatnonzero(mask)[0])

    leaf = left == -1
    bad = leaf & (right != -1)
    if bad.any():
        i = first(bad)
        raise doc.fail(f"{path}.right_children", f"node {i} has left child -1 (a leaf) but right child "
                       f"{int(right[i])}", tree=t, node=i)
    for key, child in (("left_children", left), ("right_children", right)):
        bad = ~leaf & ((child < 1) | (child >= n))
        if bad.any():
            i = first(bad)
            raise doc.fail(f"{path}.{key}", f"node {i} points to child {int(child[i])}, outside 1..{n - 1}",
                           tree=t, node=i)
    bad = ~leaf & (left == right)
    if bad.any():
        i = first(bad)
        raise doc.fail(f"{path}.right_children", f"node {i} has the same left and right child", tree=t, node=i)
    indeg = np.bincount(np.concatenate([left[~leaf], right[~leaf]]), minlength=n)
    if indeg[0] != 0 or np.any(indeg > 1):
        i = 0 if indeg[0] else first(indeg > 1)
        raise doc.fail(f"{path}.left_children", f"node {i} is the child of {int(indeg[i])} nodes: "
                       "the arrays do not form a tree", tree=t, node=i)
    order = bfs_order(left, right, leaf)
    reachable = np.zeros(n, dtype=bool)
    reachable[order] = True
    n_deleted = int((~reachable).sum())
    declared = doc.int_param(tp, "num_deleted", tp_path, default=n_deleted)
    if n_deleted != declared or np.any(~reachable & (feat != DELETED_NODE) & ~leaf):
        i = first(~reachable)
        raise doc.fail(f"{path}.left_children", f"node {i} cannot be reached from the root "
                       f"({n_deleted} unreachable nodes, tree_param.num_deleted={declared})", tree=t, node=i)
    internal = ~leaf & reachable
    bad = internal & ((feat < 0) | (feat >= n_features))
    if bad.any():
        i = first(bad)
        raise doc.fail(f"{path}.split_indices", f"node {i} splits on feature {int(feat[i])}, but the model has "
                       f"{n_features} features (learner_model_param.num_feature)", tree=t, node=i)
    bad = internal & ~np.isin(split_type, (0, 1))
    if bad.any():
        i = first(bad)
        raise doc.fail(f"{path}.split_type", f"node {i} has split type {int(split_type[i])}",
                       "accepted: 0 (numerical), 1 (categorical)", tree=t, node=i)
    bad = ~np.isin(default_left, (0, 1))
    if bad.any():
        i = first(bad)
        raise doc.fail(f"{path}.default_left", f"node {i} has {int(default_left[i])}, expected 0 or 1",
                       tree=t, node=i)
    is_cat = internal & (split_type == 1)
    with np.errstate(over="ignore"):
        cond32 = cond.astype(np.float32)
    bad = internal & ~is_cat & np.isnan(cond32)
    if bad.any():
        i = first(bad)
        raise doc.fail(f"{path}.split_conditions", f"node {i} has a NaN split condition", tree=t, node=i)
    bad = leaf & reachable & ~np.isfinite(cond32)
    if bad.any():
        i = first(bad)
        raise doc.fail(f"{path}.split_conditions", f"leaf {i} has value {float(cond[i])!r} (NaN, infinite or "
                       "beyond float32)", tree=t, node=i)
    categories = _categories(doc, tree, path, t, n, is_cat)

    value = np.where(leaf, cond32, np.float32(0))
    if weight is not None:
        value = (value * weight).astype(np.float32)
        if not np.all(np.isfinite(value)):
            raise doc.fail("learner.gradient_booster.weight_drop", f"tree {t}: leaf value times weight overflows",
                           tree=t)
    threshold = np.nextafter(cond32, np.float32(-np.inf)).astype(np.float64)
    count = None
    if "sum_hessian" in tree:
        hess = doc.array(tree, "sum_hessian", path, "f", n, t)
        count = hess if np.all(np.isfinite(hess)) else None

    keep = np.flatnonzero(reachable)
    in_order = bool(np.all(left[internal] > np.flatnonzero(internal)) and
                    np.all(right[internal] > np.flatnonzero(internal)))
    perm = keep if in_order else order
    new_id = np.full(n, -1, dtype=np.int64)
    new_id[perm] = np.arange(perm.shape[0])

    def remap(child: npt.NDArray[np.int64]) -> npt.NDArray[np.int64]:
        c = child[perm]
        return np.where(c >= 0, new_id[np.maximum(c, 0)], -1)

    arrays = TreeArrays(
        left=remap(np.where(leaf, -1, left)), right=remap(np.where(leaf, -1, right)),
        feature=np.where(leaf, -1, feat)[perm], threshold=threshold[perm],
        missing_left=(default_left == 1)[perm], value=value.astype(np.float64)[perm], output=output,
        is_categorical=is_cat[perm], categories={int(new_id[k]): v for k, v in categories.items()},
        cat_in_set_left=np.zeros(perm.shape[0], dtype=bool), cat_invalid_left=is_cat[perm].copy(),
        count=None if count is None else count[perm],
    )
    return arrays, perm.astype(np.int64)


def _categories(doc: _Doc, tree: dict[str, Any], path: str, t: int, n: int,
                is_cat: npt.NDArray[np.bool_]) -> dict[int, npt.NDArray[np.int64]]:
    """Category set of every categorical node, from the CSR fields ``categories*``."""
    keys = ("categories", "categories_nodes", "categories_segments", "categories_sizes")
    if not is_cat.any() and all(len(tree.get(k, [])) == 0 for k in keys):
        return {}
    cats = doc.array(tree, "categories", path, "i", tree=t)
    nodes = doc.array(tree, "categories_nodes", path, "i", tree=t)
    segs = doc.array(tree, "categories_segments", path, "i", tree=t)
    sizes = doc.array(tree, "categories_sizes", path, "i", tree=t)
    if not nodes.shape[0] == segs.shape[0] == sizes.shape[0]:
        raise doc.fail(f"{path}.categories_nodes", f"categories_nodes, categories_segments and categories_sizes "
                       f"have {nodes.shape[0]}, {segs.shape[0]} and {sizes.shape[0]} entries", tree=t)
    bad = (nodes < 0) | (nodes >= n)
    if bad.any():
        raise doc.fail(f"{path}.categories_nodes", f"node {int(nodes[bad][0])} does not exist", tree=t)
    bad = ~is_cat[nodes]
    if bad.any():
        i = int(nodes[bad][0])
        raise doc.fail(f"{path}.categories_nodes", f"node {i} has a category set but split_type is not 1 "
                       "(or it is a leaf)", tree=t, node=i)
    if np.unique(nodes).shape[0] != nodes.shape[0]:
        raise doc.fail(f"{path}.categories_nodes", "a node is listed twice", tree=t)
    bad = (segs < 0) | (sizes < 0) | (segs + sizes > cats.shape[0])
    if bad.any():
        k = int(np.flatnonzero(bad)[0])
        raise doc.fail(f"{path}.categories_segments", f"entry {k} ({int(segs[k])}, size {int(sizes[k])}) runs "
                       f"past the {cats.shape[0]} stored categories", tree=t, node=int(nodes[k]))
    if np.any(cats < 0):
        raise doc.fail(f"{path}.categories", f"category {int(cats[cats < 0][0])} is negative", tree=t)
    out = {int(nd): np.unique(cats[s:s + z]) for nd, s, z in zip(nodes, segs, sizes)}
    for i in np.flatnonzero(is_cat).tolist():
        out.setdefault(int(i), np.zeros(0, dtype=np.int64))
    return out
