"""treelite frontend: a ``treelite.Model`` (or its ``dump_as_json()`` text) -> Forest.

The target is treelite's own reference predictor, GTIL (``treelite.gtil``), not
the library the model came from: where treelite and LightGBM disagree (LightGBM
``zero_as_missing``, category -0.5), lumber follows gtil. Semantics (treelite 4.x
``src/gtil/predict.cc``):

* Inputs are cast to the model's ``threshold_type`` (float32 or float64) and
  compared with ``comparison_op``. Each op becomes the IR's ``x <= t`` exactly:
  ``<`` uses the next value down in that precision; ``>`` and ``>=`` swap the
  children (node ids are unchanged, only which child the IR calls "left").
* NaN takes ``default_left``; infinities are ordinary values.
* Categorical nodes: a value is a category only if ``0 <= x <= M`` with
  ``M = 2**24`` for float32 inputs and ``2**32 - 1`` for float64, then truncated;
  anything else (every negative, NaN excepted) is "not in the list"
  (``CategoryRule.TREELITE``, ``cat_invalid_left`` = the non-member branch).
  ``category_list_right_child`` says whether listed categories go right.
* Margins: leaf values summed in the threshold precision, averaged per output
  when ``average_tree_output``, plus ``base_scores``. gtil adds ``base_scores``
  last; lumber starts from them, so a non-zero base score makes margins agree
  to rounding (1e-12 relative in float64), not bit for bit.

Node ids are treelite's: ``forest.apply(X) == gtil.predict_leaf(model, X)``.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np
import numpy.typing as npt

from lumber.ir import (
    CategoryRule, Feature, FeatureKind, Forest, IRLocation, ModelFormatError, PostTransform, Schema, Task,
    UnsupportedModelError,
)
from lumber.ir.assemble import TreeArrays, bfs_order, concat_trees, renumber_bfs

from .jsondoc import JsonDoc, parse_json
from .files import content_hash

_TASKS = {"kBinaryClf": Task.BINARY, "kRegressor": Task.REGRESSION, "kMultiClf": Task.MULTICLASS,
          "kLearningToRank": Task.REGRESSION, "kIsolationForest": Task.ANOMALY}
_POST = {"identity": PostTransform.IDENTITY, "identity_multiclass": PostTransform.IDENTITY,
         "sigmoid": PostTransform.SIGMOID, "multiclass_ova": PostTransform.SIGMOID,
         "softmax": PostTransform.SOFTMAX, "exponential": PostTransform.EXP,
         "exponential_standard_ratio": PostTransform.ISOLATION}
_OPS = ("<=", "<", ">", ">=")
MAX_CATEGORY = {"float32": 2**24, "float64": 2**32 - 1}
"""Largest value gtil accepts as a category for each input precision."""


def from_treelite(model: Any, **options: Any) -> Forest:
    """A ``treelite.Model`` -> Forest.

    The node arrays are read through treelite's field accessors (exact binary
    values; ``dump_as_json()`` writes an infinite threshold as an empty value, which
    is not JSON). Options: ``feature_names`` (treelite stores none; default
    ``f0..``), ``raw_output`` (accept post-processors lumber cannot express, with an
    identity transform).
    """
    return _from_object(model, **options)[0]


def from_treelite_json(data: str | bytes, *, name: str = "<treelite JSON>", **options: Any) -> Forest:
    """The text of ``treelite.Model.dump_as_json()`` -> Forest (``name`` labels errors)."""
    return _from_json(data, name, **options)[0]


def treelite_node_ids(model: Any, **options: Any) -> list[npt.NDArray[np.int64]]:
    """Per tree, treelite's node id of each lumber node (identity unless a tree had to be renumbered).

    ``model`` is a ``treelite.Model`` or the text of its ``dump_as_json()``.
    """
    if isinstance(model, (str, bytes)):
        return _from_json(model, options.pop("name", "<treelite JSON>"), **options)[1]
    return _from_object(model, **options)[1]


def _from_json(data: str | bytes, name: str, **options: Any) -> tuple[Forest, list[npt.NDArray[np.int64]]]:
    doc = _Doc(name)
    root = _parse(data, name)
    if not isinstance(root, dict):
        raise doc.fail("<document>", "expected a JSON object from treelite.Model.dump_as_json()")
    trees = doc.get(root, "trees", "", list)
    raw = [_tree_from_json(doc, tree, t) for t, tree in enumerate(trees)]
    blob = data.encode("utf-8") if isinstance(data, str) else data
    return _lower(doc, root, raw, blob, "", **options)


def _from_object(model: Any, **options: Any) -> tuple[Forest, list[npt.NDArray[np.int64]]]:
    import treelite

    if not isinstance(model, treelite.Model):
        raise UnsupportedModelError(f"cannot load an object of type treelite {type(model).__name__}",
                                    "accepted: treelite.Model (e.g. from treelite.frontend or treelite.sklearn)")
    doc = _Doc("<treelite.Model>")
    top = _header_from_accessor(model)
    raw = [_tree_from_accessor(model, t) for t in range(int(model.num_tree))]
    blob = model.serialize_bytes()
    return _lower(doc, top, raw, blob, str(treelite.__version__), **options)


def _parse(data: str | bytes, name: str) -> Any:
    return parse_json(data, name, "a treelite JSON dump",
                      "pass the unmodified output of treelite.Model.dump_as_json() (an empty value "
                      "there is a NaN or infinite number; load the treelite.Model itself instead)")


class _Doc(JsonDoc):
    def int_list(self, parent: Any, key: str, path: str, n: int | None = None) -> npt.NDArray[np.int64]:
        v = self.get(parent, key, path, list)
        if not all(isinstance(x, int) and not isinstance(x, bool) for x in v):
            raise self.fail(f"{path}.{key}" if path else key, "expected an array of integers")
        if n is not None and len(v) != n:
            raise self.fail(f"{path}.{key}" if path else key, f"has {len(v)} entries, expected {n}")
        return np.array(v, dtype=np.int64)


@dataclass(frozen=True)
class _Header:
    dtype: str
    n_features: int
    task: Task
    post: PostTransform
    average: bool
    n_targets: int
    max_class: int
    target_id: npt.NDArray[np.int64]
    class_id: npt.NDArray[np.int64]
    base: npt.NDArray[np.float64]
    sigmoid_alpha: float
    ratio_c: float
    offset: float
    postprocessor: str
    task_type: str

    @property
    def n_outputs(self) -> int:
        return self.n_targets * self.max_class


def _header(doc: _Doc, top: dict[str, Any], n_trees: int, raw_output: bool) -> _Header:
    dtype = doc.get(top, "threshold_type", "", str)
    if dtype not in MAX_CATEGORY:
        raise UnsupportedModelError(f"{doc.name}: threshold_type {dtype!r} is not supported",
                                    "accepted: float32, float64", location=IRLocation(file=doc.name,
                                                                                      field="threshold_type"))
    n_features = doc.get(top, "num_feature", "", int)
    if n_features < 1:
        raise doc.fail("num_feature", f"must be at least 1, found {n_features}")
    task_type = doc.get(top, "task_type", "", str)
    if task_type not in _TASKS:
        raise UnsupportedModelError(f"{doc.name}: task_type {task_type!r} is not supported",
                                    f"accepted: {', '.join(_TASKS)}", location=IRLocation(file=doc.name,
                                                                                          field="task_type"))
    n_targets = doc.get(top, "num_target", "", int)
    if n_targets < 1:
        raise doc.fail("num_target", f"must be at least 1, found {n_targets}")
    num_class = doc.int_list(top, "num_class", "", n_targets)
    if np.any(num_class < 1):
        raise doc.fail("num_class", "every entry must be at least 1")
    max_class = int(num_class.max())
    if n_targets > 1 and max_class > 1:
        raise UnsupportedModelError(f"{doc.name}: {n_targets} targets with up to {max_class} classes each",
                                    "lumber supports several targets or several classes, not both",
                                    location=IRLocation(file=doc.name, field="num_class"))
    if np.any(num_class != max_class):
        raise doc.fail("num_class", "targets with different numbers of classes are not supported")
    target_id = doc.int_list(top, "target_id", "", n_trees)
    class_id = doc.int_list(top, "class_id", "", n_trees)
    if np.any((target_id < -1) | (target_id >= n_targets)):
        t = int(np.flatnonzero((target_id < -1) | (target_id >= n_targets))[0])
        raise doc.fail("target_id", f"tree {t} targets {int(target_id[t])}; the model has {n_targets}", tree=t)
    if np.any((class_id < -1) | (class_id >= max_class)):
        t = int(np.flatnonzero((class_id < -1) | (class_id >= max_class))[0])
        raise doc.fail("class_id", f"tree {t} adds to class {int(class_id[t])}; the model has {max_class}", tree=t)
    base_list = doc.get(top, "base_scores", "", list)
    if not all(isinstance(x, (int, float)) and not isinstance(x, bool) for x in base_list):
        raise doc.fail("base_scores", "expected an array of numbers")
    base = np.array(base_list, dtype=np.float64)
    if base.shape[0] != n_targets * max_class or not np.all(np.isfinite(base)):
        raise doc.fail("base_scores", f"expected {n_targets * max_class} finite numbers, found {base_list!r:.80}")
    post_name = doc.get(top, "postprocessor", "", str)
    if post_name in _POST:
        post = _POST[post_name]
    elif raw_output:
        post = PostTransform.IDENTITY
    else:
        raise UnsupportedModelError(f"{doc.name}: postprocessor {post_name!r} is not one lumber can express",
                                    f"accepted: {', '.join(_POST)}; or pass raw_output=True "
                                    "(evaluate() stays exact, predict() returns raw margins)",
                                    location=IRLocation(file=doc.name, field="postprocessor"))
    alpha = float(doc.get(top, "sigmoid_alpha", "", (int, float))) if "sigmoid_alpha" in top else 1.0
    ratio_c = float(doc.get(top, "ratio_c", "", (int, float))) if "ratio_c" in top else 1.0
    if post == PostTransform.SIGMOID and not (np.isfinite(alpha) and alpha > 0):
        raise doc.fail("sigmoid_alpha", f"must be a positive number, found {alpha!r}")
    if post == PostTransform.ISOLATION and not (np.isfinite(ratio_c) and ratio_c > 0):
        raise doc.fail("ratio_c", f"must be a positive number, found {ratio_c!r}")
    offset = 0.0
    attrs = top.get("attributes")
    if isinstance(attrs, str) and attrs.strip():
        try:
            parsed = json.loads(attrs)
            offset = float(parsed.get("sklearn_iforest_offset", 0.0)) if isinstance(parsed, dict) else 0.0
        except (ValueError, TypeError):
            offset = 0.0
    task = _TASKS[task_type]
    if task == Task.BINARY and n_targets * max_class != 1:
        raise doc.fail("num_class", f"task_type kBinaryClf needs one output, found {n_targets * max_class}")
    if task == Task.MULTICLASS and max_class < 2:
        task = Task.BINARY if post == PostTransform.SIGMOID else Task.REGRESSION
    average = doc.get(top, "average_tree_output", "", bool) if "average_tree_output" in top else False
    return _Header(dtype, n_features, task, post, average, n_targets, max_class, target_id, class_id, base,
                   alpha, ratio_c, offset, post_name, task_type)




# -- readers: treelite's accessor arrays or dump_as_json() nodes -> one array form ----------------

_TYPE_INFO = {2: "float32", 3: "float64"}
_TASK_ENUM = {0: "kBinaryClf", 1: "kRegressor", 2: "kMultiClf", 3: "kLearningToRank", 4: "kIsolationForest"}
LEAF, NUMERICAL, CATEGORICAL = 0, 1, 2
_NODE_TYPES = {"numerical_test_node": NUMERICAL, "categorical_test_node": CATEGORICAL}
_OP_CODES = {"==": 1, "<": 2, "<=": 3, ">": 4, ">=": 5}
_OP_NAMES = {v: k for k, v in _OP_CODES.items()}


@dataclass
class _RawTree:
    """One tree's nodes as arrays indexed by treelite node id; ``field`` names a field for errors."""

    t: int
    json: bool
    node_type: npt.NDArray[np.int64]
    left: npt.NDArray[np.int64]
    right: npt.NDArray[np.int64]
    feature: npt.NDArray[np.int64]
    default_left: npt.NDArray[np.bool_]
    threshold: npt.NDArray[np.float64]
    op: npt.NDArray[np.int64]
    cat_values: npt.NDArray[np.int64]
    cat_begin: npt.NDArray[np.int64]
    cat_end: npt.NDArray[np.int64]
    cat_right: npt.NDArray[np.bool_]
    leaf_value: npt.NDArray[np.float64]
    vec_values: npt.NDArray[np.float64]
    vec_begin: npt.NDArray[np.int64]
    vec_end: npt.NDArray[np.int64]
    count: npt.NDArray[np.float64] | None

    _JSON_KEYS = {"node_type": "node_type", "left": "left_child", "right": "right_child",
                  "feature": "split_feature_id", "threshold": "threshold", "op": "comparison_op",
                  "cat_values": "category_list", "leaf_value": "leaf_value"}
    _ACCESSOR_KEYS = {"node_type": "node_type", "left": "cleft", "right": "cright", "feature": "split_index",
                      "threshold": "threshold", "op": "cmp", "cat_values": "category_list",
                      "leaf_value": "leaf_value"}

    @property
    def n(self) -> int:
        return int(self.node_type.shape[0])

    def field(self, key: str, node: int | None = None) -> str:
        if self.json:
            where = f".nodes[{node}]" if node is not None else ".nodes"
            return f"trees[{self.t}]{where}.{self._JSON_KEYS[key]}"
        return f"trees[{self.t}].{self._ACCESSOR_KEYS[key]}"


def _header_from_accessor(model: Any) -> dict[str, Any]:
    """The header fields in ``dump_as_json()`` form, read through ``get_header_accessor()``."""
    h = model.get_header_accessor()

    def one(name: str) -> Any:
        return np.asarray(h.get_field(name)).reshape(-1)[0].item()

    def many(name: str) -> list[Any]:
        return np.asarray(h.get_field(name)).reshape(-1).tolist()  # type: ignore[no-any-return]

    return {
        "threshold_type": _TYPE_INFO.get(one("threshold_type"), f"type code {one('threshold_type')}"),
        "num_feature": int(one("num_feature")),
        "task_type": _TASK_ENUM.get(one("task_type"), f"task code {one('task_type')}"),
        "average_tree_output": bool(one("average_tree_output")),
        "num_target": int(one("num_target")),
        "num_class": [int(v) for v in many("num_class")],
        "target_id": [int(v) for v in many("target_id")],
        "class_id": [int(v) for v in many("class_id")],
        "postprocessor": str(h.get_field("postprocessor")),
        "sigmoid_alpha": float(one("sigmoid_alpha")),
        "ratio_c": float(one("ratio_c")),
        "base_scores": [float(v) for v in many("base_scores")],
        "attributes": str(h.get_field("attributes")),
    }


def _tree_from_accessor(model: Any, t: int) -> _RawTree:
    a = model.get_tree_accessor(t)

    def get(name: str, dtype: Any) -> npt.NDArray[Any]:
        return np.asarray(a.get_field(name)).reshape(-1).astype(dtype)

    count = None
    for key in ("data_count", "sum_hess"):
        present = get(f"{key}_present", bool)
        if present.size and present.all():
            count = get(key, np.float64)
            break
    return _RawTree(
        t=t, json=False, node_type=get("node_type", np.int64), left=get("cleft", np.int64),
        right=get("cright", np.int64), feature=get("split_index", np.int64), default_left=get("default_left", bool),
        threshold=get("threshold", np.float64), op=get("cmp", np.int64), cat_values=get("category_list", np.int64),
        cat_begin=get("category_list_begin", np.int64), cat_end=get("category_list_end", np.int64),
        cat_right=get("category_list_right_child", bool), leaf_value=get("leaf_value", np.float64),
        vec_values=get("leaf_vector", np.float64), vec_begin=get("leaf_vector_begin", np.int64),
        vec_end=get("leaf_vector_end", np.int64), count=count,
    )


def _tree_from_json(doc: _Doc, tree: Any, t: int) -> _RawTree:
    """Node dicts of one tree -> arrays (per-node Python: this path reads text)."""
    path = f"trees[{t}]"
    nodes = doc.get(tree, "nodes", path, list, tree=t)
    n = len(nodes)
    npath = f"{path}.nodes"
    if n == 0:
        raise doc.fail(npath, "the tree has no nodes", tree=t)
    if "num_nodes" in tree and doc.get(tree, "num_nodes", path, int, tree=t) != n:
        raise doc.fail(f"{path}.num_nodes", f"says {tree['num_nodes']} but {npath} holds {n}", tree=t)
    for i, nd in enumerate(nodes):
        if not isinstance(nd, dict):
            raise doc.fail(f"{npath}[{i}]", "expected an object", tree=t)
    ids = np.array([doc.get(nd, "node_id", f"{npath}[{i}]", int, tree=t) for i, nd in enumerate(nodes)],
                   dtype=np.int64)
    perm = np.argsort(ids, kind="stable")
    if not np.array_equal(ids[perm], np.arange(n)):
        raise doc.fail(npath, f"node_id values must be 0..{n - 1}, each once", tree=t)
    nodes = [nodes[i] for i in perm]
    node_type = np.zeros(n, dtype=np.int64)
    left = np.full(n, -1, dtype=np.int64)
    right = np.full(n, -1, dtype=np.int64)
    feature = np.full(n, -1, dtype=np.int64)
    default_left = np.zeros(n, dtype=bool)
    threshold = np.full(n, np.nan)
    op = np.zeros(n, dtype=np.int64)
    cat_right = np.zeros(n, dtype=bool)
    leaf_value = np.zeros(n)
    cat_parts: list[list[int]] = [[] for _ in range(n)]
    vec_parts: list[list[float]] = [[] for _ in range(n)]

    def get(i: int, key: str, types: type | tuple[type, ...]) -> Any:
        return doc.get(nodes[i], key, f"{npath}[{i}]", types, tree=t, node=i)

    for i, nd in enumerate(nodes):
        if "leaf_value" in nd:
            v = nd["leaf_value"]
            if isinstance(v, list):
                if not v or not all(isinstance(x, (int, float)) and not isinstance(x, bool) for x in v):
                    raise doc.fail(f"{npath}[{i}].leaf_value", "expected numbers", tree=t, node=i)
                vec_parts[i] = v
            else:
                leaf_value[i] = get(i, "leaf_value", (int, float))
            continue
        kind = get(i, "node_type", str)
        if kind not in _NODE_TYPES:
            raise UnsupportedModelError(f"{doc.name}: node type {kind!r} is not supported",
                                        "accepted: numerical_test_node, categorical_test_node",
                                        location=IRLocation(file=doc.name, tree=t, node=i,
                                                            field=f"{npath}[{i}].node_type"))
        node_type[i] = _NODE_TYPES[kind]
        left[i] = get(i, "left_child", int)
        right[i] = get(i, "right_child", int)
        feature[i] = get(i, "split_feature_id", int)
        default_left[i] = get(i, "default_left", bool)
        if node_type[i] == NUMERICAL:
            name = get(i, "comparison_op", str)
            if name not in _OP_CODES:
                raise UnsupportedModelError(f"{doc.name}: comparison_op {name!r} is not supported",
                                            f"accepted: {', '.join(_OPS)}", location=IRLocation(
                                                file=doc.name, tree=t, node=i, field=f"{npath}[{i}].comparison_op"))
            op[i] = _OP_CODES[name]
            threshold[i] = get(i, "threshold", (int, float))
        else:
            cat_right[i] = get(i, "category_list_right_child", bool)
            lst = get(i, "category_list", list)
            if not all(isinstance(c, int) and not isinstance(c, bool) for c in lst):
                raise doc.fail(f"{npath}[{i}].category_list", "expected an array of integers", tree=t, node=i)
            cat_parts[i] = lst
    cat_sizes = np.array([len(c) for c in cat_parts], dtype=np.int64)
    vec_sizes = np.array([len(v) for v in vec_parts], dtype=np.int64)
    cat_end = np.cumsum(cat_sizes)
    vec_end = np.cumsum(vec_sizes)
    count = None
    for key in ("data_count", "sum_hess"):
        vals = [nd.get(key) for nd in nodes]
        if all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in vals):
            count = np.array(vals, dtype=np.float64)
            break
    return _RawTree(
        t=t, json=True, node_type=node_type, left=left, right=right, feature=feature, default_left=default_left,
        threshold=threshold, op=op, cat_values=np.array([c for part in cat_parts for c in part], dtype=np.int64),
        cat_begin=cat_end - cat_sizes, cat_end=cat_end, cat_right=cat_right, leaf_value=leaf_value,
        vec_values=np.array([x for part in vec_parts for x in part], dtype=np.float64),
        vec_begin=vec_end - vec_sizes, vec_end=vec_end, count=count,
    )


# -- lowering -------------------------------------------------------------------------------------


def _lower(doc: _Doc, top: dict[str, Any], raw_trees: list[_RawTree], blob: bytes, version: str, *,
           feature_names: Sequence[str] | None = None,
           raw_output: bool = False) -> tuple[Forest, list[npt.NDArray[np.int64]]]:
    if not raw_trees:
        raise UnsupportedModelError(f"{doc.name}: the model has no trees")
    h = _header(doc, top, len(raw_trees), raw_output)
    lowered = [_lower_tree(doc, h, r) for r in raw_trees]
    tree_arrays = [a for a, _ in lowered]
    K = h.n_outputs
    used_cat = np.zeros(h.n_features, dtype=bool)
    for a in tree_arrays:
        if a.is_categorical is not None:
            used_cat[a.feature[a.is_categorical]] = True
    if feature_names is not None:
        names = [str(s) for s in feature_names]
        if len(names) != h.n_features:
            raise ModelFormatError(f"feature_names has {len(names)} names but the model reads {h.n_features} features")
    else:
        names = [f"f{i}" for i in range(h.n_features)]
    features = tuple(Feature(names[j], FeatureKind.CATEGORICAL if used_cat[j] else FeatureKind.NUMERICAL)
                     for j in range(h.n_features))
    base = h.base.copy()
    if h.average:
        # gtil averages the tree sum, then adds base_scores; the IR averages (base + sum).
        outs = np.array([a.output for a in tree_arrays])
        counts = np.bincount(outs[outs >= 0], minlength=K).astype(np.float64) + float((outs < 0).sum())
        base = base * np.maximum(counts, 1.0)
    schema = Schema(
        features=features, task=h.task, n_outputs=K, base_score=tuple(float(b) for b in base),
        post_transform=h.post, average=h.average, input_dtype=h.dtype, accumulate_dtype=h.dtype,
        sigmoid_alpha=h.sigmoid_alpha, category_rule=CategoryRule.TREELITE, allow_nan=True, allow_inf=True,
        isolation_c=h.ratio_c, isolation_offset=h.offset,
        source={"library": "treelite", "version": version, "objective": f"{h.task_type}/{h.postprocessor}",
                "content_hash": content_hash(blob)},
    )
    return concat_trees(schema, tree_arrays), [ids for _, ids in lowered]


def _tree_output(h: _Header, t: int) -> tuple[int, int]:
    """(output column, or -1 for all; leaf-vector length, 0 for a scalar leaf) of tree ``t``."""
    tg, cl = int(h.target_id[t]), int(h.class_id[t])
    K = h.n_outputs
    if tg >= 0 and cl >= 0:
        return tg * h.max_class + cl, 0
    if tg < 0 and cl < 0:
        return (-1, K) if K > 1 else (0, 1)
    if tg < 0:  # a vector over targets for one class
        return (-1, h.n_targets) if h.max_class == 1 and h.n_targets > 1 else (cl, 1)
    return (-1, h.max_class) if h.n_targets == 1 and h.max_class > 1 else (tg, 1)


def _lower_tree(doc: _Doc, h: _Header, r: _RawTree) -> tuple[TreeArrays, npt.NDArray[np.int64]]:
    """Check one tree's arrays and convert every test to ``x <= t`` in the model's precision."""
    t, n = r.t, r.n

    def first(mask: npt.NDArray[np.bool_]) -> int:
        return int(np.flatnonzero(mask)[0])

    def fail(key: str, mask: npt.NDArray[np.bool_], message: str) -> ModelFormatError:
        i = first(mask)
        return doc.fail(r.field(key, i), message.format(i=i), tree=t, node=i)

    sizes = {k: getattr(r, k).shape[0] for k in ("left", "right", "feature", "default_left", "threshold", "op",
                                                  "cat_begin", "cat_end", "cat_right", "leaf_value", "vec_begin",
                                                  "vec_end")}
    if n == 0 or any(v != n for v in sizes.values()):
        raise doc.fail(f"trees[{t}]", f"node arrays have inconsistent lengths {sizes} for {n} nodes", tree=t)
    bad = ~np.isin(r.node_type, (LEAF, NUMERICAL, CATEGORICAL))
    if bad.any():
        raise fail("node_type", bad, "node {i} has an unknown node type")
    leaf = r.node_type == LEAF
    inner = np.flatnonzero(~leaf)
    for key in ("left", "right"):
        child = getattr(r, key)
        bad = ~leaf & ((child < 0) | (child >= n))
        if bad.any():
            raise fail(key, bad, f"node {{i}} points to child {int(child[first(bad)])}, which does not exist "
                                 f"(tree has {n} nodes)")
    bad = ~leaf & ((r.feature < 0) | (r.feature >= h.n_features))
    if bad.any():
        raise fail("feature", bad, f"node {{i}} splits on feature {int(r.feature[first(bad)])}, outside 0..."
                                   f"{h.n_features - 1} (num_feature={h.n_features})")
    indeg = np.bincount(np.concatenate([r.left[inner], r.right[inner]]), minlength=n)
    if indeg[0] != 0 or np.any(indeg[1:] != 1):
        i = 0 if indeg[0] else 1 + first(indeg[1:] != 1)
        what = "is unreachable" if indeg[i] == 0 else f"is the child of {int(indeg[i])} nodes"
        raise doc.fail(r.field("left", i), f"node {i} {what}: the nodes do not form a tree", tree=t, node=i)

    left, right = r.left.copy(), r.right.copy()
    missing_left = r.default_left.copy()
    threshold = np.full(n, np.nan)
    num = ~leaf & (r.node_type == NUMERICAL)
    bad = num & ~np.isin(r.op, (2, 3, 4, 5))
    if bad.any():
        i = first(bad)
        raise UnsupportedModelError(
            f"{doc.name}: comparison_op {_OP_NAMES.get(int(r.op[i]), int(r.op[i]))!r} is not supported",
            f"accepted: {', '.join(_OPS)}", location=IRLocation(file=doc.name, tree=t, node=i, field=r.field("op", i)))
    bad = num & np.isnan(r.threshold)
    if bad.any():
        raise fail("threshold", bad, "node {i} has a NaN threshold")
    dt = np.dtype(h.dtype)
    with np.errstate(over="ignore"):
        thr = r.threshold.astype(dt)
    strict = num & ((r.op == 2) | (r.op == 5))  # < and >=: next value down in the model's precision
    threshold[num] = np.where(strict, np.nextafter(thr, dt.type(-np.inf)), thr)[num].astype(np.float64)
    swap = np.flatnonzero(num & ((r.op == 4) | (r.op == 5)))  # > and >=: the IR's left is treelite's right
    left[swap], right[swap] = r.right[swap], r.left[swap]
    missing_left[swap] = ~missing_left[swap]

    is_cat = ~leaf & (r.node_type == CATEGORICAL)
    categories: dict[int, npt.NDArray[np.int64]] = {}
    if is_cat.any():
        nc = r.cat_values.shape[0]
        bad = is_cat & ((r.cat_begin < 0) | (r.cat_end < r.cat_begin) | (r.cat_end > nc))
        if bad.any():
            raise fail("cat_values", bad, "node {i}: category list bounds run outside the stored categories")
        limit = MAX_CATEGORY[h.dtype]
        for i in np.flatnonzero(is_cat).tolist():
            arr = np.unique(r.cat_values[r.cat_begin[i]:r.cat_end[i]])
            if arr.size and (arr[0] < 0 or arr[-1] > 2**32 - 1):
                raise doc.fail(r.field("cat_values", int(i)), "categories must lie in [0, 2**32)", tree=t,
                               node=int(i))
            if h.dtype == "float64" and arr.size and arr[-1] == 2**32 - 1:
                raise UnsupportedModelError(
                    f"{doc.name}: category 4294967295 cannot be matched exactly (gtil treats inputs just above it "
                    "as invalid, lumber would truncate them to it)",
                    location=IRLocation(file=doc.name, tree=t, node=int(i), field=r.field("cat_values", int(i))))
            categories[int(i)] = arr[arr <= limit]  # gtil never matches a category above the limit
    in_set_left = is_cat & ~r.cat_right

    out, vec_len = _tree_output(h, t)
    width = max(vec_len, 1)
    vec_sizes = r.vec_end - r.vec_begin
    has_vec = leaf & (vec_sizes > 0)
    bad = has_vec & ((vec_sizes != width) | (r.vec_begin < 0) | (r.vec_end > r.vec_values.shape[0]))
    if bad.any():
        raise fail("leaf_value", bad, f"leaf {{i}} holds {int(vec_sizes[first(bad)])} values, expected {width} "
                                      f"(tree {t} has target_id={int(h.target_id[t])}, class_id={int(h.class_id[t])})")
    if vec_len > 1 and np.any(leaf & ~has_vec):
        raise fail("leaf_value", leaf & ~has_vec, f"leaf {{i}} holds one value, expected {width}")
    value = np.zeros((n, width))
    value[leaf & ~has_vec, 0] = r.leaf_value[leaf & ~has_vec]
    if has_vec.any():
        vi = np.flatnonzero(has_vec)
        value[vi] = r.vec_values[r.vec_begin[vi][:, None] + np.arange(width)[None, :]]
    bad = leaf & ~np.all(np.isfinite(value), axis=1)
    if bad.any():
        raise fail("leaf_value", bad, "leaf {i} has a NaN or infinite value")

    count = r.count if r.count is not None and r.count.shape[0] == n and np.all(np.isfinite(r.count)) else None
    arrays = TreeArrays(
        left=np.where(leaf, -1, left), right=np.where(leaf, -1, right), feature=np.where(leaf, -1, r.feature),
        threshold=threshold, missing_left=missing_left & ~leaf, value=value if out < 0 else value[:, 0], output=out,
        is_categorical=is_cat, categories=categories, cat_in_set_left=in_set_left,
        cat_invalid_left=is_cat & ~in_set_left, count=count,
    )
    order = np.arange(n, dtype=np.int64)
    if np.any(left[inner] <= inner) or np.any(right[inner] <= inner):
        order = bfs_order(arrays.left, arrays.right, leaf)
        arrays = renumber_bfs(arrays)
    return arrays, order
