"""ONNX frontend: a graph holding one ``ai.onnx.ml`` tree-ensemble node -> Forest.

Reads ``TreeEnsembleRegressor`` / ``TreeEnsembleClassifier`` (ml opsets 1-3,
strings for modes and transforms, every node listed with leaves as ``LEAF``)
and ``TreeEnsemble`` (ml opset 5: interior nodes and leaves in separate arrays,
global ids, ``BRANCH_MEMBER`` sets). The target is onnxruntime's CPU kernel
(>= 1.21), not ``onnx.reference`` (which differs on NaN with ``BRANCH_NEQ`` and
on category 0 in membership sets):

* The tree node's input type ``T`` (float or double) is the precision of every
  comparison and of the sums: thresholds and weights are cast to ``T``.
  Inputs are rounded to float32 when the graph input is float or a ``Cast`` to
  float lies on the way to the tree node (``schema.input_dtype``).
* Every mode becomes the IR's ``x <= t`` exactly: ``LT`` uses the next value
  down in ``T``, ``GT``/``GTE`` swap the children; ``EQ``, ``NEQ`` and
  ``MEMBER`` on a feature tested only by them, with non-negative integer
  values, become category sets (``CategoryRule.SKLEARN``: only exact integers
  match); ``EQ``/``NEQ`` elsewhere become two threshold nodes (the false
  subtree copied). NaN goes to the true branch iff
  ``nodes_missing_value_tracks_true`` (``NEQ``: always, as onnxruntime does).
* Sums start at 0 and add trees in order; ``base_values`` are added last, so
  they become a final one-leaf tree (bit-exact). ``AVERAGE`` divides by the
  number of trees. ``MIN``/``MAX`` aggregation, ``PROBIT`` and
  ``SOFTMAX_ZERO`` have no IR form and are refused.
* Classifiers follow onnxruntime's binary conventions: one score ``s`` per
  leaf (class 0) with ``LOGISTIC`` is a sigmoid binary model; with ``NONE``
  and non-negative weights the probabilities are ``[1 - s, s]``. (With
  ``LOGISTIC`` and non-negative weights onnxruntime's label output is
  ``s > 0.5`` while its probabilities are ``sigmoid(s)``; lumber's ``predict``
  follows the probabilities.) Forms whose result depends on the row (a class
  or target some rows never score, with a base value) or that onnxruntime
  computes oddly (two ``base_values`` for a binary model) are refused, naming
  the field.

Files written by lumber's own ONNX backend (``lumber.schema`` metadata) read
back with their feature names, classes, category codes and post-transform: the
graph's ``Div``/``Add`` and post-processing nodes are checked against the
metadata, never trusted blindly. Other graphs may only pass the tree outputs
through ``Identity``, ``Cast`` and ``ZipMap``.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence

import numpy as np
import numpy.typing as npt

from lumber.ir import (
    CategoryRule, Feature, FeatureKind, Forest, IRLocation, ModelFormatError, PostTransform, Schema, Task,
    UnsupportedModelError,
)
from lumber.ir.assemble import TreeArrays, concat_trees
from lumber.ir.interp import trees_per_output
from .files import content_hash, read_model_bytes

ML_DOMAIN = "ai.onnx.ml"
TREE_OPS = ("TreeEnsembleRegressor", "TreeEnsembleClassifier", "TreeEnsemble")
LEQ, LT, GTE, GT, EQ, NEQ, MEMBER, LEAF = range(8)
_LEGACY_MODES = {"BRANCH_LEQ": LEQ, "BRANCH_LT": LT, "BRANCH_GTE": GTE, "BRANCH_GT": GT, "BRANCH_EQ": EQ,
                 "BRANCH_NEQ": NEQ, "LEAF": LEAF}
_MODE_NAMES = {v: k for k, v in _LEGACY_MODES.items()} | {MEMBER: "BRANCH_MEMBER"}
_AGGREGATES = ("AVERAGE", "SUM", "MIN", "MAX")
"""ml-5 codes in order (0 AVERAGE, 1 SUM, ...); the legacy ops spell them as strings."""
_POSTS = ("NONE", "SOFTMAX", "LOGISTIC", "SOFTMAX_ZERO", "PROBIT")
_PASS_THROUGH = ("Identity", "Cast", "ZipMap")
"""Ops allowed after the tree node in foreign graphs: they do not change the scores."""
MAX_CODE = 2**32
MAX_EXPANSION = 8
"""An EQ/NEQ expansion may grow a tree to at most this many times its source nodes (plus 1000)."""
_FLOAT, _DOUBLE = 1, 11


def load_onnx_file(path: str | Path, *, data: bytes | None = None, **options: Any) -> Forest:
    """An ``.onnx`` file -> Forest (``data``: its bytes when already read)."""
    blob = data if data is not None else read_model_bytes(path, "an ONNX model file")
    return from_onnx(blob, name=str(path), **options)


def from_onnx(model: Any, *, name: str = "<onnx model>", feature_names: Sequence[str] | None = None,
              raw_output: bool = False) -> Forest:
    """An ONNX ``ModelProto`` or its serialized bytes -> Forest.

    ``feature_names`` names the input columns (default: lumber's metadata, else
    ``f0..``); ``raw_output`` accepts classifier score conventions that are not
    probabilities, with an identity transform (``evaluate`` stays exact).
    """
    import onnx

    if isinstance(model, (bytes, bytearray, memoryview)):
        blob = bytes(model)
        try:
            proto = onnx.load_from_string(blob)
        except Exception as exc:  # protobuf's DecodeError and friends: the file is not a ModelProto
            raise ModelFormatError(f"{name}: not a valid ONNX model ({type(exc).__name__}: {exc})",
                                   "the file is truncated or is not an ONNX protobuf") from None
    elif isinstance(model, onnx.ModelProto):
        proto, blob = model, model.SerializeToString()
    else:
        raise UnsupportedModelError(f"{name}: expected an onnx.ModelProto or its bytes, got {type(model).__name__}")
    _check_text(proto, name)
    return _Reader(name, proto, blob).forest(feature_names, raw_output)


def _type_name(code: int) -> str:
    import onnx

    try:
        return str(onnx.TensorProto.DataType.Name(code)).lower()
    except ValueError:
        return f"unknown type {code}"


def _check_text(proto: Any, name: str) -> None:
    """protobuf hands back bytes for string fields that are not UTF-8 (an edited file): refuse those here."""
    g = proto.graph
    fields: list[tuple[str, Any]] = [("producer_name", proto.producer_name), ("graph.name", g.name)]
    fields += [(f"opset_import[{i}].domain", o.domain) for i, o in enumerate(proto.opset_import)]
    fields += [(f"metadata_props[{i}]", v) for i, p in enumerate(proto.metadata_props) for v in (p.key, p.value)]
    for what, items in (("input", g.input), ("output", g.output), ("initializer", g.initializer)):
        fields += [(f"graph.{what}[{i}].name", v.name) for i, v in enumerate(items)]
    for i, nd in enumerate(g.node):
        fields += [(f"graph.node[{i}]", v) for v in (nd.op_type, nd.name, nd.domain, *nd.input, *nd.output)]
        fields += [(f"graph.node[{i}].attribute", a.name) for a in nd.attribute]
    for where, v in fields:
        if not isinstance(v, str):
            raise ModelFormatError(f"{name}: {where} is not UTF-8 text", "the file is damaged",
                                   location=IRLocation(file=name, field=where))


# -- reading attributes with errors that name the node and field ------------------------------------------


@dataclass
class _Attrs:
    """Attributes of one node by name; every accessor checks the type and names the field on failure."""

    file: str
    node: Any
    by_name: dict[str, Any] = field(init=False)

    def __post_init__(self) -> None:
        self.by_name = {a.name: a for a in self.node.attribute}

    def fail(self, key: str, message: str, *notes: str, tree: int | None = None,
             node: int | None = None) -> ModelFormatError:
        return ModelFormatError(f"{self.file}: {self.node.op_type} '{self.node.name}': {key}: {message}", *notes,
                                location=IRLocation(file=self.file, field=key, tree=tree, node=node))

    def has(self, key: str) -> bool:
        return key in self.by_name

    def _get(self, key: str, kind: int, what: str) -> Any:
        import onnx

        a = self.by_name[key]
        if a.type != kind:
            try:
                found = str(onnx.AttributeProto.AttributeType.Name(a.type)).lower()
            except ValueError:
                found = f"unknown ({a.type})"
            raise self.fail(key, f"expected {what}, found an attribute of type {found}")
        return a

    def ints(self, key: str, default: Sequence[int] | None = None) -> npt.NDArray[np.int64]:
        import onnx

        if key not in self.by_name:
            if default is None:
                raise self.fail(key, "missing attribute")
            return np.asarray(default, dtype=np.int64)
        return np.asarray(self._get(key, onnx.AttributeProto.INTS, "a list of integers").ints, dtype=np.int64)

    def integer(self, key: str, default: int) -> int:
        import onnx

        if key not in self.by_name:
            return default
        return int(self._get(key, onnx.AttributeProto.INT, "an integer").i)

    def string(self, key: str, default: str) -> str:
        import onnx

        if key not in self.by_name:
            return default
        return self._text(key, self._get(key, onnx.AttributeProto.STRING, "a string").s)

    def strings(self, key: str, default: Sequence[str] | None = None) -> list[str]:
        import onnx

        if key not in self.by_name:
            if default is None:
                raise self.fail(key, "missing attribute")
            return list(default)
        return [self._text(key, s) for s in self._get(key, onnx.AttributeProto.STRINGS, "a list of strings").strings]

    def _text(self, key: str, s: bytes) -> str:
        try:
            return s.decode("utf-8")
        except UnicodeDecodeError:
            raise self.fail(key, "not UTF-8 text") from None

    def numbers(self, key: str, required: bool = True) -> npt.NDArray[np.float64] | None:
        """``key`` (floats) or ``key_as_tensor`` (a double tensor; ml-5 names hold tensors directly)."""
        import onnx

        tkey = key if key.startswith(("nodes_splits", "leaf_weights", "membership_values")) else f"{key}_as_tensor"
        if tkey != key and key in self.by_name and tkey in self.by_name:
            raise self.fail(key, f"both {key} and {tkey} are set; onnxruntime accepts one")
        if tkey in self.by_name:
            t = self._get(tkey, onnx.AttributeProto.TENSOR, "a tensor").t
            if t.data_type not in (_FLOAT, _DOUBLE):
                found = _type_name(t.data_type)
                raise self.fail(tkey, f"expected a float or double tensor, found {found}")
            try:
                return np.asarray(onnx.numpy_helper.to_array(t), dtype=np.float64).reshape(-1)
            except Exception as exc:  # a tensor whose raw bytes do not match its declared shape
                raise self.fail(tkey, f"unreadable tensor ({exc})") from None
        if key in self.by_name and tkey != key:
            return np.asarray(self._get(key, onnx.AttributeProto.FLOATS, "a list of floats").floats,
                              dtype=np.float64)
        if required:
            raise self.fail(key, "missing attribute")
        return None

    def modes5(self) -> npt.NDArray[np.int64]:
        """ml-5 ``nodes_modes``: a uint8 tensor of mode codes."""
        import onnx

        t = self._get("nodes_modes", onnx.AttributeProto.TENSOR, "a tensor") if self.has("nodes_modes") else None
        if t is None:
            raise self.fail("nodes_modes", "missing attribute")
        try:
            return np.asarray(onnx.numpy_helper.to_array(t.t), dtype=np.int64).reshape(-1)
        except Exception as exc:
            raise self.fail("nodes_modes", f"unreadable tensor ({exc})") from None


# -- the ensemble as arrays, whatever op held it ---------------------------------------------------------


@dataclass
class _Ensemble:
    """One tree-ensemble node: vertices (interior nodes and leaves) and their links.

    Vertex ``v`` is interior iff ``mode[v] != LEAF``; ``true``/``false`` are vertex
    indices; ``weights`` lists ``(vertex, target, weight)`` per leaf entry.
    ``label`` names a vertex in errors (tree, source node id, field).
    """

    op: str
    mode: npt.NDArray[np.int64]
    feature: npt.NDArray[np.int64]
    value: npt.NDArray[np.float64]
    true: npt.NDArray[np.int64]
    false: npt.NDArray[np.int64]
    tracks_true: npt.NDArray[np.bool_]
    members: dict[int, npt.NDArray[np.float64]]
    roots: list[int]
    leaf_vertex: npt.NDArray[np.int64]
    leaf_target: npt.NDArray[np.int64]
    leaf_weight: npt.NDArray[np.float64]
    source_id: npt.NDArray[np.int64]
    n_outputs: int
    aggregate: str
    post: str
    base: npt.NDArray[np.float64]
    classes: tuple[Any, ...] | None
    target_field: str


def _legacy(a: _Attrs, op: str) -> _Ensemble:
    """TreeEnsembleRegressor/Classifier: every node listed once, ids local to (or shared by) trees."""
    treeids = a.ints("nodes_treeids")
    n = treeids.shape[0]
    if n == 0:
        raise a.fail("nodes_treeids", "the ensemble has no nodes")
    nodeids = a.ints("nodes_nodeids")
    featureids = a.ints("nodes_featureids")
    modes = a.strings("nodes_modes")
    values = a.numbers("nodes_values")
    trueids = a.ints("nodes_truenodeids")
    falseids = a.ints("nodes_falsenodeids")
    tracks = a.ints("nodes_missing_value_tracks_true", [0] * n)
    for key, arr in (("nodes_nodeids", nodeids), ("nodes_featureids", featureids), ("nodes_modes", modes),
                     ("nodes_values", values), ("nodes_truenodeids", trueids), ("nodes_falsenodeids", falseids),
                     ("nodes_missing_value_tracks_true", tracks)):
        if len(arr) != n:  # type: ignore[arg-type]
            raise a.fail(key, f"has {len(arr)} entries, nodes_treeids has {n}")  # type: ignore[arg-type]
    mode = np.empty(n, dtype=np.int64)
    for i, m in enumerate(modes):
        if m not in _LEGACY_MODES:
            raise UnsupportedModelError(
                f"{a.file}: {op} '{a.node.name}': nodes_modes[{i}] is {m!r}",
                f"accepted: {', '.join(_LEGACY_MODES)}", location=IRLocation(file=a.file, field="nodes_modes"))
        mode[i] = _LEGACY_MODES[m]
    index: dict[tuple[int, int], int] = {}
    for i, node_key in enumerate(zip(treeids.tolist(), nodeids.tolist())):
        if node_key in index:
            raise a.fail("nodes_nodeids",
                         f"tree {node_key[0]} lists node {node_key[1]} twice (entries {index[node_key]} and {i})")
        index[node_key] = i

    def resolve(ids: npt.NDArray[np.int64], key: str) -> npt.NDArray[np.int64]:
        out = np.full(n, -1, dtype=np.int64)
        for i in np.flatnonzero(mode != LEAF):
            j = index.get((int(treeids[i]), int(ids[i])))
            if j is None:
                raise a.fail(key, f"entry {i}: node {int(nodeids[i])} of tree {int(treeids[i])} points to node "
                                  f"{int(ids[i])}, which the tree does not have")
            out[i] = j
        return out

    true, false = resolve(trueids, "nodes_truenodeids"), resolve(falseids, "nodes_falsenodeids")
    # roots: the nodes no node of their tree points to, in order of first appearance of each tree id
    pointed = np.zeros(n, dtype=bool)
    inner = mode != LEAF
    pointed[true[inner]] = True
    pointed[false[inner]] = True
    roots: list[int] = []
    seen: dict[int, int] = {}
    for i in np.flatnonzero(~pointed).tolist():
        tid = int(treeids[i])
        if tid in seen:
            raise a.fail("nodes_truenodeids", f"tree {tid} has two roots (nodes {int(nodeids[seen[tid]])} and "
                                              f"{int(nodeids[i])}); its nodes do not form one tree")
        seen[tid] = int(i)
        roots.append(int(i))
    order = {t: k for k, t in enumerate(dict.fromkeys(treeids.tolist()))}
    if len(roots) != len(order):
        missing = sorted(set(order) - set(seen))
        raise a.fail("nodes_truenodeids", f"tree {missing[0]} has no root: its nodes form a cycle")
    roots.sort(key=lambda r: order[int(treeids[r])])

    classifier = op == "TreeEnsembleClassifier"
    prefix = "class" if classifier else "target"
    wtree = a.ints(f"{prefix}_treeids")
    wnode = a.ints(f"{prefix}_nodeids")
    wid = a.ints(f"{prefix}_ids")
    wval = a.numbers(f"{prefix}_weights")
    for key, arr in ((f"{prefix}_nodeids", wnode), (f"{prefix}_ids", wid), (f"{prefix}_weights", wval)):
        if len(arr) != len(wtree):  # type: ignore[arg-type]
            raise a.fail(key, f"has {len(arr)} entries, {prefix}_treeids has {len(wtree)}")  # type: ignore[arg-type]
    leaf_vertex = np.empty(len(wtree), dtype=np.int64)
    for k, node_key in enumerate(zip(wtree.tolist(), wnode.tolist())):
        j = index.get(node_key)
        if j is None or mode[j] != LEAF:
            what = "does not exist" if j is None else f"is a {_MODE_NAMES[int(mode[j])]} node, not a LEAF"
            raise a.fail(f"{prefix}_nodeids", f"entry {k}: node {node_key[1]} of tree {node_key[0]} {what}")
        leaf_vertex[k] = j
    classes: tuple[Any, ...] | None = None
    if classifier:
        if a.has("classlabels_int64s") and a.has("classlabels_strings"):
            raise a.fail("classlabels_int64s", "both classlabels_int64s and classlabels_strings are set")
        if a.has("classlabels_strings"):
            classes = tuple(a.strings("classlabels_strings"))
        else:
            classes = tuple(int(c) for c in a.ints("classlabels_int64s"))
        if len(classes) < 2:
            raise a.fail("classlabels_int64s", f"a classifier needs at least 2 class labels, found {len(classes)}")
        n_outputs = len(classes)
    else:
        n_outputs = a.integer("n_targets", 1)
        if n_outputs < 1:
            raise a.fail("n_targets", f"must be at least 1, found {n_outputs}")
    base = a.numbers("base_values", required=False)
    return _Ensemble(
        op=op, mode=mode, feature=featureids, value=values, true=true, false=false,  # type: ignore[arg-type]
        tracks_true=tracks != 0, members={}, roots=roots, leaf_vertex=leaf_vertex, leaf_target=wid,
        leaf_weight=wval, source_id=nodeids, n_outputs=n_outputs,  # type: ignore[arg-type]
        aggregate="SUM" if classifier else a.string("aggregate_function", "SUM"),
        post=a.string("post_transform", "NONE"), base=np.zeros(0) if base is None else base,
        classes=classes, target_field=f"{prefix}_ids",
    )


def _ml5(a: _Attrs) -> _Ensemble:
    """TreeEnsemble (ml-5): interior nodes then leaves as one vertex list (leaf j is vertex n + j)."""
    featureids = a.ints("nodes_featureids")
    n = featureids.shape[0]
    modes = a.modes5()
    splits = a.numbers("nodes_splits")
    trueids, falseids = a.ints("nodes_truenodeids"), a.ints("nodes_falsenodeids")
    trueleaf = a.ints("nodes_trueleafs", [0] * n)
    falseleaf = a.ints("nodes_falseleafs", [0] * n)
    tracks = a.ints("nodes_missing_value_tracks_true", [0] * n)
    targets = a.ints("leaf_targetids")
    weights = a.numbers("leaf_weights")
    m = targets.shape[0]
    for key, arr in (("nodes_modes", modes), ("nodes_splits", splits), ("nodes_truenodeids", trueids),
                     ("nodes_falsenodeids", falseids), ("nodes_trueleafs", trueleaf),
                     ("nodes_falseleafs", falseleaf), ("nodes_missing_value_tracks_true", tracks)):
        if len(arr) != n:  # type: ignore[arg-type]
            raise a.fail(key, f"has {len(arr)} entries, nodes_featureids has {n}")  # type: ignore[arg-type]
    if len(weights) != m:  # type: ignore[arg-type]
        raise a.fail("leaf_weights", f"has {len(weights)} entries, leaf_targetids has {m}")  # type: ignore[arg-type]
    bad = np.flatnonzero((modes < 0) | (modes > MEMBER))
    if bad.size:
        raise UnsupportedModelError(f"{a.file}: TreeEnsemble '{a.node.name}': nodes_modes[{int(bad[0])}] is "
                                    f"{int(modes[bad[0]])}", "accepted: 0..6 (BRANCH_LEQ..BRANCH_MEMBER)",
                                    location=IRLocation(file=a.file, field="nodes_modes"))
    mode = np.concatenate([modes, np.full(m, LEAF, dtype=np.int64)])

    def link(ids: npt.NDArray[np.int64], leaf: npt.NDArray[np.int64], key: str) -> npt.NDArray[np.int64]:
        lim = np.where(leaf != 0, m, n)
        bad = np.flatnonzero((ids < 0) | (ids >= lim))
        if bad.size:
            i = int(bad[0])
            what = "leaf" if leaf[i] else "node"
            raise a.fail(key, f"node {i} points to {what} {int(ids[i])}, outside 0..{int(lim[i]) - 1}", node=i)
        return np.concatenate([np.where(leaf != 0, n + ids, ids), np.full(m, -1, dtype=np.int64)])

    true = link(trueids, trueleaf, "nodes_truenodeids")
    false = link(falseids, falseleaf, "nodes_falsenodeids")
    roots = a.ints("tree_roots")
    bad = np.flatnonzero((roots < 0) | (roots >= n))
    if roots.size == 0 or bad.size:
        raise a.fail("tree_roots", "no trees" if roots.size == 0 else
                     f"tree {int(bad[0])} starts at node {int(roots[bad[0]])}, outside 0..{n - 1}", tree=None)
    members: dict[int, npt.NDArray[np.float64]] = {}
    mem_nodes = np.flatnonzero(modes == MEMBER)
    if mem_nodes.size:
        mv = a.numbers("membership_values")
        assert mv is not None
        ends = np.flatnonzero(np.isnan(mv))
        if ends.shape[0] < mem_nodes.shape[0]:
            raise a.fail("membership_values", f"{ends.shape[0]} NaN-terminated sets for {mem_nodes.shape[0]} "
                                              "BRANCH_MEMBER nodes")
        start = 0
        for i, end in zip(mem_nodes.tolist(), ends.tolist()):
            members[i] = mv[start:end]
            start = end + 1
    n_outputs = a.integer("n_targets", 0)
    if n_outputs < 1:
        raise a.fail("n_targets", f"must be at least 1, found {n_outputs}")
    agg = a.integer("aggregate_function", 1)
    post = a.integer("post_transform", 0)
    if not 0 <= agg < len(_AGGREGATES):
        raise a.fail("aggregate_function", f"{agg} is not an aggregate code (0 AVERAGE, 1 SUM, 2 MIN, 3 MAX)")
    if not 0 <= post < len(_POSTS):
        raise a.fail("post_transform", f"{post} is not a transform code (0 NONE .. 4 PROBIT)")
    return _Ensemble(
        op="TreeEnsemble", mode=mode, feature=np.concatenate([featureids, np.full(m, -1, dtype=np.int64)]),
        value=np.concatenate([splits, np.full(m, np.nan)]), true=true, false=false,  # type: ignore[list-item]
        tracks_true=np.concatenate([tracks != 0, np.zeros(m, dtype=bool)]), members=members,
        roots=[int(r) for r in roots], leaf_vertex=n + np.arange(m, dtype=np.int64), leaf_target=targets,
        leaf_weight=weights, source_id=np.concatenate([np.arange(n), np.arange(m)]),  # type: ignore[arg-type]
        n_outputs=n_outputs, aggregate=_AGGREGATES[agg], post=_POSTS[post], base=np.zeros(0), classes=None,
        target_field="leaf_targetids",
    )


# -- the graph around the tree node -------------------------------------------------------------------------


@dataclass
class _Input:
    """How the tree node's input relates to the graph input."""

    n_features: int | None
    rounds_to_float32: bool
    tree_dtype: str
    code_columns: list[int]
    """Feature behind each appended category-code column (lumber's own files)."""
    code_rule: CategoryRule | None


class _Reader:
    def __init__(self, name: str, proto: Any, blob: bytes) -> None:
        self.name, self.proto, self.blob = name, proto, blob
        self.graph = proto.graph
        self.producer = {o: nd for nd in self.graph.node for o in nd.output}
        self.consumers: dict[str, list[Any]] = {}
        for nd in self.graph.node:
            for i in nd.input:
                self.consumers.setdefault(i, []).append(nd)
        self.inits = {t.name: t for t in self.graph.initializer}
        self.meta = {p.key: p.value for p in proto.metadata_props}

    def fail(self, message: str, *notes: str, key: str | None = None) -> ModelFormatError:
        return ModelFormatError(f"{self.name}: {message}", *notes, location=IRLocation(file=self.name, field=key))

    def refuse(self, message: str, *notes: str, key: str | None = None) -> UnsupportedModelError:
        return UnsupportedModelError(f"{self.name}: {message}", *notes, location=IRLocation(file=self.name, field=key))

    def const(self, tensor_name: str) -> npt.NDArray[np.float64] | None:
        import onnx

        t = self.inits.get(tensor_name)
        if t is None:
            return None
        try:
            return np.asarray(onnx.numpy_helper.to_array(t), dtype=np.float64)
        except Exception as exc:
            raise self.fail(f"initializer '{tensor_name}' is unreadable ({exc})", key=tensor_name) from None

    # ---------------------------------------------------------------------------------------------

    def tree_node(self) -> Any:
        nodes = [nd for nd in self.graph.node if nd.op_type in TREE_OPS and nd.domain == ML_DOMAIN]
        if not nodes:
            ops = sorted({nd.op_type for nd in self.graph.node})
            raise self.refuse("the graph holds no ai.onnx.ml tree-ensemble node"
                              + (f" (its ops: {', '.join(ops[:12])})" if ops else " (it has no nodes)"),
                              f"accepted: {', '.join(TREE_OPS)}", key="graph.node")
        if len(nodes) > 1:
            raise self.refuse(f"the graph holds {len(nodes)} tree-ensemble nodes; lumber reads one",
                              key="graph.node")
        return nodes[0]

    def graph_input(self) -> Any:
        inputs = [i for i in self.graph.input if i.name not in self.inits]
        if len(inputs) != 1:
            raise self.refuse(f"the graph has {len(inputs)} inputs; lumber reads graphs with one feature matrix",
                              key="graph.input")
        return inputs[0]

    def input_path(self, tree: Any) -> _Input:
        gin = self.graph_input()
        tt = gin.type.tensor_type
        if not gin.type.HasField("tensor_type") or tt.elem_type not in (_FLOAT, _DOUBLE):
            found = _type_name(tt.elem_type) if gin.type.HasField("tensor_type") else "not a tensor"
            raise self.refuse(f"graph input '{gin.name}' is {found}", "accepted: float or double tensors",
                              key="graph.input")
        dims = list(tt.shape.dim)
        if tt.HasField("shape") and len(dims) != 2:
            raise self.refuse(f"graph input '{gin.name}' has {len(dims)} dimensions; expected [N, n_features]",
                              key="graph.input")
        width = dims[1].dim_value if len(dims) == 2 and dims[1].HasField("dim_value") else None
        if not tree.input:
            raise self.fail(f"{tree.op_type} '{tree.name}' has no input", key="input")
        name = tree.input[0]
        rounds = tt.elem_type == _FLOAT
        tree_dtype: str | None = None
        codes: list[int] = []
        rule: CategoryRule | None = None
        for _ in range(len(self.graph.node) + 1):
            if name == gin.name:
                break
            prod = self.producer.get(name)
            if prod is None:
                raise self.fail(f"tensor '{name}' read by the tree ensemble is produced by no node", key=name)
            if prod.op_type == "Identity":
                name = prod.input[0]
            elif prod.op_type == "Cast":
                to = _Attrs(self.name, prod).integer("to", 0)
                if to not in (_FLOAT, _DOUBLE):
                    raise self.refuse(f"Cast '{prod.name}' before the tree ensemble converts to type {to}",
                                      "accepted: float or double", key="to")
                rounds |= to == _FLOAT
                tree_dtype = tree_dtype or ("float32" if to == _FLOAT else "float64")
                name = prod.input[0]
            elif prod.op_type == "Concat" and not codes:
                name, codes, rule = self.code_columns(prod)
            else:
                raise self.refuse(f"the tree ensemble reads the output of {prod.op_type} '{prod.name}'",
                                  "lumber reads graphs whose tree ensemble reads the graph input directly "
                                  "(through Identity or Cast only)", key=prod.name)
        else:
            raise self.fail("the nodes before the tree ensemble form a cycle", key="graph.node")
        if tree_dtype is None:
            tree_dtype = "float32" if tt.elem_type == _FLOAT else "float64"
        return _Input(width, rounds, tree_dtype, codes, rule)

    def code_columns(self, concat: Any) -> tuple[str, list[int], CategoryRule]:
        """lumber's category-code columns: ``Concat(x, trunc-or-floor(Gather(x, cols)))``."""
        def producer(name: str, op: str) -> Any:
            p = self.producer.get(name)
            if p is None or p.op_type != op:
                raise self.refuse(f"Concat '{concat.name}' before the tree ensemble is not lumber's category-code "
                                  "pattern", "lumber reads graphs whose tree ensemble reads the graph input "
                                  "directly (through Identity or Cast only)", key=concat.name)
            return p

        if len(concat.input) != 2 or _Attrs(self.name, concat).integer("axis", 0) != 1:
            producer("", "")
        x, codes = concat.input
        last = self.producer.get(codes)
        if last is not None and last.op_type == "Where":
            less = producer(last.input[0], "Less")
            gathered = less.input[0]
            if producer(last.input[1], "Ceil").input[0] != gathered or \
                    producer(last.input[2], "Floor").input[0] != gathered:
                producer("", "")
            rule = CategoryRule.LIGHTGBM
        else:
            gathered = producer(codes, "Floor").input[0]
            rule = CategoryRule.TREELITE
        gather = producer(gathered, "Gather")
        idx = self.const(gather.input[1]) if len(gather.input) == 2 else None
        if gather.input[0] != x or idx is None or _Attrs(self.name, gather).integer("axis", 0) != 1:
            producer("", "")
        assert idx is not None
        return x, [int(c) for c in idx.reshape(-1)], rule

    # ---------------------------------------------------------------------------------------------

    def lumber_schema(self) -> Schema | None:
        if self.proto.producer_name != "lumber" or "lumber.schema" not in self.meta:
            return None
        try:
            return Schema.from_dict(json.loads(self.meta["lumber.schema"]))
        except (ValueError, KeyError, TypeError, AttributeError) as exc:
            raise self.fail(f"metadata lumber.schema is unreadable ({type(exc).__name__}: {exc})",
                            key="lumber.schema") from None

    def output_chain(self, tree: Any, own: Schema | None) -> tuple[npt.NDArray[np.float64] | None,
                                                                    npt.NDArray[np.float64] | None]:
        """(divisor, added constant) between the tree node and lumber's 'margin'; foreign graphs: (None, None)."""
        if own is None:
            seen: set[str] = set()
            todo = list(tree.output)
            while todo:
                t = todo.pop()
                for c in self.consumers.get(t, []):
                    if c.op_type not in _PASS_THROUGH:
                        raise self.refuse(f"{c.op_type} '{c.name}' computes on the tree ensemble's output",
                                          f"lumber reads graphs where only {', '.join(_PASS_THROUGH)} follow it",
                                          key=c.name)
                    if c.name not in seen:
                        seen.add(c.name)
                        todo.extend(c.output)
            return None, None
        name = tree.output[0]
        div = add = None
        for op in ("Div", "Add"):
            nxt = self.consumers.get(name, [])
            if len(nxt) == 1 and nxt[0].op_type == op and len(nxt[0].input) == 2:
                c = self.const(nxt[0].input[1])
                if c is None:
                    raise self.fail(f"{op} '{nxt[0].name}' after the tree ensemble has no constant operand",
                                    key=nxt[0].name)
                div, add = (c, add) if op == "Div" else (div, c)
                name = nxt[0].output[0]
        nxt = self.consumers.get(name, [])
        if name != "margin" and not (len(nxt) == 1 and nxt[0].op_type == "Identity" and nxt[0].output[0] == "margin"):
            raise self.fail("the tree ensemble's output does not reach lumber's 'margin' output as lumber writes it",
                            key="margin")
        self.check_post(own)
        return div, add

    def check_post(self, own: Schema) -> None:
        """The ops from 'margin' to 'output' must compute the metadata's post-transform."""
        ops: list[Any] = []
        todo = ["margin"]
        while todo:
            for c in self.consumers.get(todo.pop(), []):
                ops.append(c)
                if c.output[0] != "output":
                    todo.extend(c.output)
        kinds = sorted(c.op_type for c in ops)
        pt = own.post_transform
        expected = {PostTransform.IDENTITY: [["Identity"]],
                    PostTransform.SIGMOID: [["Add", "Div", "Exp", "Neg"], ["Add", "Div", "Exp", "Mul"]],
                    PostTransform.SOFTMAX: [["Softmax"]], PostTransform.EXP: [["Exp"]],
                    PostTransform.ISOLATION: [["Div", "Neg", "Neg", "Pow"]]}[pt]
        if kinds not in expected:
            raise self.fail(f"metadata lumber.schema says post_transform {pt.name.lower()}, but the graph computes "
                            f"'output' with {', '.join(kinds) or 'nothing'}", key="lumber.schema")
        for c in ops:
            k = self.const(c.input[1]) if len(c.input) == 2 else None
            if c.op_type == "Mul" and k is not None and float(k.reshape(-1)[0]) != -own.sigmoid_alpha:
                raise self.fail(f"Mul '{c.name}' scales by {float(k.reshape(-1)[0])!r}, metadata sigmoid_alpha is "
                                f"{own.sigmoid_alpha!r}", key="lumber.schema")
            if c.op_type == "Div" and pt == PostTransform.ISOLATION and k is not None and \
                    float(k.reshape(-1)[0]) != own.isolation_c:
                raise self.fail(f"Div '{c.name}' divides by {float(k.reshape(-1)[0])!r}, metadata isolation_c is "
                                f"{own.isolation_c!r}", key="lumber.schema")

    # ---------------------------------------------------------------------------------------------

    def forest(self, feature_names: Sequence[str] | None, raw_output: bool) -> Forest:
        tree = self.tree_node()
        attrs = _Attrs(self.name, tree)
        ens = _ml5(attrs) if tree.op_type == "TreeEnsemble" else _legacy(attrs, tree.op_type)
        inp = self.input_path(tree)
        own = self.lumber_schema()
        div, add = self.output_chain(tree, own)
        return _lower(self, attrs, ens, inp, own, div, add, feature_names, raw_output)


# -- lowering -------------------------------------------------------------------------------------------------


@dataclass
class _Out:
    """How scores become the Forest's outputs and schema fields."""

    n_outputs: int
    column: npt.NDArray[np.int64]
    """Output column of each ONNX target id (-1: dropped)."""
    task: Task
    post: PostTransform
    decision: str
    base: npt.NDArray[np.float64]
    classes: tuple[Any, ...] | None


def _outputs(r: _Reader, a: _Attrs, e: _Ensemble, raw_output: bool) -> _Out:
    """onnxruntime's conventions for how targets, classes, base values and transforms combine."""
    K = e.n_outputs
    bad = np.flatnonzero((e.leaf_target < 0) | (e.leaf_target >= K))
    if bad.size:
        raise a.fail(e.target_field, f"entry {int(bad[0])} targets {int(e.leaf_target[bad[0]])}; the ensemble has "
                                     f"{K} {'classes' if e.classes else 'targets'}")
    if e.aggregate in ("MIN", "MAX"):
        raise UnsupportedModelError(f"{r.name}: aggregate_function {e.aggregate}: a minimum or maximum over trees "
                                    "is not a sum, which the IR cannot express", "accepted: SUM, AVERAGE",
                                    location=IRLocation(file=r.name, field="aggregate_function"))
    if e.aggregate not in ("SUM", "AVERAGE"):
        raise a.fail("aggregate_function", f"{e.aggregate!r} is not one of {', '.join(_AGGREGATES)}")
    if e.post not in _POSTS:
        raise a.fail("post_transform", f"{e.post!r} is not one of {', '.join(_POSTS)}")
    if e.post in ("PROBIT", "SOFTMAX_ZERO"):
        raise UnsupportedModelError(f"{r.name}: post_transform {e.post} has no IR form",
                                    "accepted: NONE, LOGISTIC, SOFTMAX",
                                    location=IRLocation(file=r.name, field="post_transform"))
    base = e.base
    if e.classes is None:  # regressor or ml-5 TreeEnsemble
        if base.size not in (0, K):
            raise a.fail("base_values", f"has {base.size} entries for {K} targets (onnxruntime ignores them "
                                        "unless there is one per target)")
        for c in np.flatnonzero(base != 0).tolist():
            if not _some_tree_scores_every_leaf(e, int(c), e.leaf_vertex):
                raise UnsupportedModelError(f"{r.name}: base_values[{int(c)}] is added only on rows some leaf scores "
                                            f"target {int(c)} for, and no tree scores it on every leaf",
                                            location=IRLocation(file=r.name, field="base_values"))
        if e.post != "NONE":
            raise UnsupportedModelError(f"{r.name}: post_transform {e.post} on a regressor: onnxruntime applies it "
                                        "to several targets but not to one", "accepted: NONE",
                                        location=IRLocation(file=r.name, field="post_transform"))
        return _Out(K, np.arange(K), Task.REGRESSION, PostTransform.IDENTITY, "proba",
                    base if base.size else np.zeros(K), None)
    used = np.unique(e.leaf_target)
    weights_nonneg = bool(np.all(e.leaf_weight >= 0))
    post = {"NONE": PostTransform.IDENTITY, "LOGISTIC": PostTransform.SIGMOID, "SOFTMAX": PostTransform.SOFTMAX}
    if K == 2 and used.tolist() == [1]:
        raise UnsupportedModelError(f"{r.name}: every weight scores class 1 and none class 0; onnxruntime then "
                                    "returns a constant 0.5", "write binary scores with class id 0",
                                    location=IRLocation(file=r.name, field="class_ids"))
    if K == 2 and used.tolist() == [0]:  # onnxruntime's binary case: one score s per row
        if base.size not in (0, 1):
            raise a.fail("base_values", f"has {base.size} entries; onnxruntime's binary classifier (class id 0 "
                                        "only) reads 0 or 1")
        b = base if base.size else np.zeros(1)
        if e.post == "LOGISTIC":  # onnxruntime: [1 - sigmoid(s), sigmoid(s)]
            return _Out(1, np.array([0, -1]), Task.BINARY, PostTransform.SIGMOID, "margin", b, e.classes)
        if e.post == "NONE" and weights_nonneg:  # onnxruntime: [1 - s, s]
            return _Out(1, np.array([0, -1]), Task.BINARY, PostTransform.IDENTITY, "proba", b, e.classes)
        if raw_output:
            return _Out(1, np.array([0, -1]), Task.BINARY, PostTransform.IDENTITY, "margin", b, e.classes)
        raise UnsupportedModelError(f"{r.name}: a binary classifier (one score s, class id 0) with "
                                    f"{'signed weights and ' if not weights_nonneg else ''}post_transform {e.post}: "
                                    "onnxruntime returns scores such as (-s, s), not probabilities",
                                    "pass raw_output=True to read the score s as the margin",
                                    location=IRLocation(file=r.name, field="post_transform"))
    # every class needs a score on every row, else onnxruntime's result depends on the row
    leaf_of = e.leaf_vertex
    for c in range(K):
        if not _some_tree_scores_every_leaf(e, c, leaf_of):
            raise UnsupportedModelError(f"{r.name}: class {c} is not scored by every leaf of any tree; onnxruntime "
                                        "then treats rows that never score it differently",
                                        location=IRLocation(file=r.name, field="class_ids"))
    if K == 2 and base.size == 2:
        raise a.fail("base_values", "two entries for a binary classifier: onnxruntime then replaces class 1's "
                                    "score by base_values[1] + class 0's score")
    if base.size not in (0, K) and not (K == 2 and base.size == 1):
        raise a.fail("base_values", f"has {base.size} entries for {K} classes")
    b = np.zeros(K)
    b[:base.size] = base
    task = Task.BINARY if K == 2 else Task.MULTICLASS
    return _Out(K, np.arange(K), task, post[e.post], "proba", b, e.classes)


def _some_tree_scores_every_leaf(e: _Ensemble, c: int, leaf_of: npt.NDArray[np.int64]) -> bool:
    scored = set(leaf_of[e.leaf_target == c].tolist())
    for root in e.roots:
        stack, ok = [root], True
        while stack and ok:
            v = stack.pop()
            if e.mode[v] == LEAF:
                ok = v in scored
            else:
                stack.extend((int(e.true[v]), int(e.false[v])))
        if ok:
            return True
    return False


def _prev(t: float, dtype: np.dtype[Any]) -> float:
    """The largest value of ``dtype`` below ``t`` (``x < t`` iff ``x <= _prev(t)``)."""
    v = dtype.type(t)
    return float(np.nextafter(v, dtype.type(-np.inf)))


def _round_down_f32(t: float) -> float:
    """Largest float32 <= t: a float32 input x has ``x <= t`` iff ``x <= _round_down_f32(t)``."""
    with np.errstate(over="ignore"):
        v = np.float32(t)
    if float(v) > t:
        v = np.nextafter(v, np.float32(-np.inf))
    return float(v)


def _is_code(v: npt.NDArray[np.float64]) -> bool:
    return bool(np.all(np.isfinite(v) & (v >= 0) & (v < MAX_CODE) & (v == np.floor(v))))


def _lower(r: _Reader, a: _Attrs, e: _Ensemble, inp: _Input, own: Schema | None,
           div: npt.NDArray[np.float64] | None, add: npt.NDArray[np.float64] | None,
           feature_names: Sequence[str] | None, raw_output: bool) -> Forest:
    out = _outputs(r, a, e, raw_output)
    K = out.n_outputs
    T = np.dtype(inp.tree_dtype)
    with np.errstate(over="ignore"):
        value = e.value.astype(T).astype(np.float64)  # thresholds as the kernel holds them
        weight = e.leaf_weight.astype(T).astype(np.float64)
    if not np.all(np.isfinite(weight)):
        k = int(np.flatnonzero(~np.isfinite(weight))[0])
        raise a.fail(e.target_field.replace("_ids", "_weights").replace("targetids", "weights"),
                     f"entry {k} is {e.leaf_weight[k]!r} in {inp.tree_dtype}; leaf weights must be finite")
    inner = e.mode != LEAF
    n_raw = inp.n_features
    n_codes = len(inp.code_columns)
    if n_raw is None:
        used = e.feature[inner]
        n_raw = int(used.max()) + 1 - n_codes if used.size else 1
        if own is not None:
            n_raw = own.n_features
    width = n_raw + n_codes
    bad = np.flatnonzero(inner & ((e.feature < 0) | (e.feature >= width)))
    if bad.size:
        v = int(bad[0])
        raise a.fail("nodes_featureids", f"node {int(e.source_id[v])} reads feature {int(e.feature[v])}, outside "
                                         f"0..{width - 1}", node=int(e.source_id[v]))
    bad_cols = [c for c in inp.code_columns if not 0 <= c < n_raw]
    if bad_cols:
        raise r.fail(f"category-code column reads feature {bad_cols[0]}, outside 0..{n_raw - 1}", key="Gather")
    bad = np.flatnonzero(inner & (e.mode != MEMBER) & np.isnan(value))
    if bad.size:
        v = int(bad[0])
        raise a.fail("nodes_values" if e.op != "TreeEnsemble" else "nodes_splits",
                     f"node {int(e.source_id[v])} has a NaN threshold", node=int(e.source_id[v]))
    # features read only by EQ/NEQ/MEMBER with integer values become categorical
    is_code_col = inner & (e.feature >= n_raw)
    raw_feature = e.feature.copy()
    raw_feature[is_code_col] = np.asarray(inp.code_columns, dtype=np.int64)[e.feature[is_code_col] - n_raw]
    set_like = inner & np.isin(e.mode, (EQ, NEQ, MEMBER))
    cat_feature = np.zeros(n_raw, dtype=bool)
    for f in np.unique(e.feature[set_like & ~is_code_col]):
        nodes = np.flatnonzero(inner & (e.feature == f))
        ok = bool(np.all(set_like[nodes]))
        for v in nodes.tolist():
            vals = e.members.get(int(v)) if e.mode[v] == MEMBER else value[v:v + 1]
            ok = ok and vals is not None and _is_code(vals)
        cat_feature[int(f)] = ok
    if np.any(is_code_col & ~np.isin(e.mode, (MEMBER, LT))):
        v = int(np.flatnonzero(is_code_col & ~np.isin(e.mode, (MEMBER, LT)))[0])
        raise r.refuse(f"node {int(e.source_id[v])} tests a category-code column with "
                       f"{_MODE_NAMES[int(e.mode[v])]}; lumber writes only BRANCH_MEMBER there", key="nodes_modes")
    rule = inp.code_rule
    if rule is not None and own is not None and own.category_rule in (CategoryRule.XGBOOST, CategoryRule.TREELITE) \
            and rule == CategoryRule.TREELITE:
        rule = own.category_rule
    if cat_feature.any():
        if rule is not None:
            raise r.refuse("the graph mixes category-code columns with exact-value category tests",
                           key="nodes_modes")
        rule = CategoryRule.SKLEARN

    # leaf vectors
    leaf_value: dict[int, npt.NDArray[np.float64]] = {}
    leaf_cols: dict[int, tuple[int, ...]] = {}
    seen: set[tuple[int, int]] = set()
    for k in range(e.leaf_vertex.shape[0]):
        v, c = int(e.leaf_vertex[k]), int(out.column[int(e.leaf_target[k])])
        if (v, c) in seen:
            raise r.refuse(f"leaf {int(e.source_id[v])} lists target {int(e.leaf_target[k])} twice; onnxruntime adds "
                           "the weights one by one, which a single leaf value cannot reproduce",
                           key=e.target_field)
        seen.add((v, c))
        if c < 0:
            continue
        leaf_value.setdefault(v, np.zeros(K))[c] = weight[k]
        leaf_cols[v] = leaf_cols.get(v, ()) + (c,)
    all_vector = e.aggregate == "AVERAGE"

    builder = _TreeBuilder(e, value, T, inp.rounds_to_float32, n_raw, raw_feature, cat_feature, rule, leaf_value,
                           leaf_cols, K, all_vector, a)
    trees = [builder.build(t, root) for t, root in enumerate(e.roots)]
    base = np.asarray(out.base, dtype=np.float64).astype(T).astype(np.float64)
    base_score = np.zeros(K)
    if e.aggregate == "SUM":
        # leading one-leaf trees (lumber's exact base score) start the sum: fold them into base_score
        lead = 0
        folded: set[int] = set()
        while lead < len(trees) and trees[lead].n_nodes == 1 and trees[lead].output >= 0 \
                and trees[lead].output not in folded:
            folded.add(trees[lead].output)
            lead += 1
        if lead == len(trees):
            lead = 0  # every tree is a constant: keep them as trees
        for tr in trees[:lead]:
            base_score[tr.output] = float(np.asarray(tr.value).reshape(-1)[0 if K == 1 else tr.output])
        trees = trees[lead:]
    average = e.aggregate == "AVERAGE"
    if np.any(base != 0):
        if average:  # onnxruntime: sum / n_trees + base; the IR divides (base + sum): agree to rounding
            base_score = base_score + base * len(trees)
        else:  # added after the trees: a last one-leaf tree rounds the same way
            trees.append(_constant_tree(base, K))
    if div is not None:
        probe = concat_trees(_plain_schema(max(n_raw, 1), K), trees, validate=False)
        counts = trees_per_output(probe)
        if div.reshape(-1).shape[0] not in (1, K) or not np.array_equal(np.broadcast_to(div.reshape(-1), (K,)),
                                                                        counts):
            raise r.fail(f"the graph divides the tree sum by {div.reshape(-1).tolist()!r:.80}, not by the number of "
                         f"trees per output {counts.tolist()!r:.80}", key="lumber.schema")
        average = True
    if add is not None:
        extra = np.broadcast_to(add.reshape(-1), (K,)).astype(np.float64)
        if average:
            probe = concat_trees(_plain_schema(max(n_raw, 1), K), trees, validate=False)
            base_score = base_score + extra * trees_per_output(probe)
        else:
            trees.append(_constant_tree(extra, K))
    schema = _schema(r, e, inp, own, out, n_raw, cat_feature, rule, base_score, average, feature_names)
    return concat_trees(schema, trees)


def _plain_schema(n_features: int, K: int) -> Schema:
    return Schema(features=tuple(Feature(f"f{i}") for i in range(n_features)), task=Task.REGRESSION, n_outputs=K,
                  base_score=(0.0,) * K)


def _constant_tree(values: npt.NDArray[np.float64], K: int) -> TreeArrays:
    one = np.array([-1], dtype=np.int64)
    if K == 1:
        return TreeArrays(left=one, right=one, feature=one, threshold=np.array([np.nan]),
                          missing_left=np.zeros(1, dtype=bool), value=np.asarray(values, dtype=np.float64)[:1],
                          output=0)
    return TreeArrays(left=one, right=one, feature=one, threshold=np.array([np.nan]),
                      missing_left=np.zeros(1, dtype=bool), value=np.asarray(values, dtype=np.float64).reshape(1, K))


def _schema(r: _Reader, e: _Ensemble, inp: _Input, own: Schema | None, out: _Out, n_raw: int,
            cat_feature: npt.NDArray[np.bool_], rule: CategoryRule | None, base_score: npt.NDArray[np.float64],
            average: bool, feature_names: Sequence[str] | None) -> Schema:
    input_dtype = "float32" if inp.rounds_to_float32 else "float64"
    accumulate = inp.tree_dtype
    cat_used = cat_feature.copy()
    for c in inp.code_columns:
        cat_used[c] = True
    if own is not None:
        if own.n_features != n_raw:
            raise r.fail(f"metadata lumber.schema lists {own.n_features} features, the graph reads {n_raw}",
                         key="lumber.schema")
        if own.n_outputs != out.n_outputs:
            raise r.fail(f"metadata lumber.schema has {own.n_outputs} outputs, the tree ensemble {out.n_outputs}",
                         key="lumber.schema")
        features = own.features
        if feature_names is not None:
            features = tuple(Feature(str(nm), f.kind, f.categories) for nm, f in zip(feature_names, features))
        return own.with_(features=features, base_score=tuple(float(b) for b in base_score), average=average,
                         input_dtype=input_dtype, accumulate_dtype=accumulate,
                         category_rule=rule if rule is not None else own.category_rule)
    if feature_names is not None:
        names = [str(s) for s in feature_names]
        if len(names) != n_raw:
            raise ModelFormatError(f"feature_names has {len(names)} names but the model reads {n_raw} features")
    else:
        names = [f"f{i}" for i in range(n_raw)]
    features = tuple(Feature(names[j], FeatureKind.CATEGORICAL if cat_used[j] else FeatureKind.NUMERICAL)
                     for j in range(n_raw))
    producer = " ".join(x for x in (r.proto.producer_name, r.proto.producer_version) if x)
    return Schema(
        features=features, task=out.task, n_outputs=out.n_outputs, base_score=tuple(float(b) for b in base_score),
        post_transform=out.post, average=average, input_dtype=input_dtype, accumulate_dtype=accumulate,
        classes=out.classes, category_rule=rule if rule is not None else CategoryRule.SKLEARN, allow_nan=True,
        allow_inf=True, decision=out.decision,
        source={"library": "onnx", "version": producer or "unknown", "model_type": e.op,
                "objective": f"{e.aggregate.lower()}/{e.post.lower()}", "content_hash": content_hash(r.blob)},
    )


class _TreeBuilder:
    """One ONNX tree -> TreeArrays in preorder, each mode rewritten as the IR's ``x <= t``."""

    def __init__(self, e: _Ensemble, value: npt.NDArray[np.float64], T: np.dtype[Any], rounds32: bool, n_raw: int,
                 raw_feature: npt.NDArray[np.int64], cat_feature: npt.NDArray[np.bool_], rule: CategoryRule | None,
                 leaf_value: dict[int, npt.NDArray[np.float64]], leaf_cols: dict[int, tuple[int, ...]], K: int,
                 all_vector: bool, a: _Attrs) -> None:
        self.e, self.value, self.T, self.rounds32, self.n_raw = e, value, T, rounds32, n_raw
        self.raw_feature, self.cat_feature, self.rule = raw_feature, cat_feature, rule
        self.leaf_value, self.leaf_cols, self.K, self.all_vector, self.a = leaf_value, leaf_cols, K, all_vector, a

    def thr(self, t: float) -> float:
        return _round_down_f32(t) if self.rounds32 else t

    def build(self, t: int, root: int) -> TreeArrays:
        e = self.e
        rows: list[dict[str, Any]] = []
        limit = 1000 + MAX_EXPANSION * self._size(root)
        stack: list[tuple[Any, int, str]] = [(("v", root), -1, "")]
        while stack:
            item, parent, side = stack.pop()
            me = len(rows)
            if me > limit:
                raise self.a.fail("nodes_truenodeids", f"tree {t} does not form a tree (a cycle, or subtrees shared "
                                                      "too often to copy)", tree=t)
            if parent >= 0:
                rows[parent][side] = me
            row: dict[str, Any] = {"left": -1, "right": -1, "feature": -1, "threshold": np.nan, "ml": False,
                                   "cat": None, "in_left": False, "inv_left": False, "value": None, "cols": ()}
            rows.append(row)
            if item[0] == "b":  # second half of a numeric EQ/NEQ: x <= t ? T : F
                _, f, tval, tv, fv, ml = item
                row.update(feature=f, threshold=self.thr(tval), ml=ml)
                stack.append((("v", fv), me, "right"))
                stack.append((("v", tv), me, "left"))
                continue
            v = item[1]
            m = int(e.mode[v])
            if m == LEAF:
                row.update(value=self.leaf_value.get(v, np.zeros(self.K)), cols=self.leaf_cols.get(v, ()))
                continue
            tv, fv = int(e.true[v]), int(e.false[v])
            if e.op == "TreeEnsemble" and tv == fv and e.mode[tv] == LEAF and parent < 0 and not stack:
                # ml-5 spelling of a one-leaf tree
                row.update(value=self.leaf_value.get(tv, np.zeros(self.K)), cols=self.leaf_cols.get(tv, ()))
                continue
            f = int(self.raw_feature[v])
            tt = bool(e.tracks_true[v])
            s = float(self.value[v])
            left, right = tv, fv
            if m in (LEQ, LT, GT, GTE):
                if np.isinf(s) and s < 0 and m in (LT, GTE) and not int(e.feature[v]) >= self.n_raw:
                    raise UnsupportedModelError(
                        f"{self.a.file}: tree {t}, node {int(e.source_id[v])}: {_MODE_NAMES[m]} against -inf "
                        "('never' / 'always') has no x <= t form", location=IRLocation(
                            file=self.a.file, tree=t, node=int(e.source_id[v]), field="nodes_modes"))
                if int(e.feature[v]) >= self.n_raw:  # lumber's empty category set: x < -inf never holds
                    row.update(feature=f, cat=np.zeros(0, dtype=np.int64), in_left=True, inv_left=False, ml=tt)
                else:
                    thr = s if m in (LEQ, GT) else _prev(s, self.T)
                    swap = m in (GT, GTE)
                    row.update(feature=f, threshold=self.thr(thr), ml=tt != swap)
                    if swap:
                        left, right = fv, tv
            elif m == MEMBER or self.cat_feature[f] or int(e.feature[v]) >= self.n_raw:
                vals = e.members.get(v) if m == MEMBER else self.value[v:v + 1]
                if vals is None or not _is_code(vals):
                    raise UnsupportedModelError(
                        f"{self.a.file}: tree {t}, node {int(e.source_id[v])}: BRANCH_MEMBER with values other than "
                        "non-negative integers, or on a feature also split by thresholds", "lumber reads category "
                        "sets of integer codes on features tested only by EQ/NEQ/MEMBER",
                        location=IRLocation(file=self.a.file, tree=t, node=int(e.source_id[v]),
                                            field="membership_values"))
                cats = np.unique(vals.astype(np.int64))
                if m == NEQ:  # members go false; NaN and everything else true (onnxruntime: NaN != t holds)
                    row.update(feature=f, cat=cats, in_left=False, inv_left=True, ml=True)
                else:
                    row.update(feature=f, cat=cats, in_left=True, inv_left=False, ml=tt)
            else:  # numeric EQ / NEQ: x <= prev(t) ? A-left : (x <= t ? B-left : B-right), one subtree copied
                if m == EQ:  # equal only in (prev(t), t]; NaN reaches T through B when tracked
                    a_left, b_left, b_right, a_ml = fv, tv, fv, not tt
                else:  # NEQ: true below and above t; NaN always true (onnxruntime: NaN != t)
                    a_left, b_left, b_right, a_ml = tv, fv, tv, True
                row.update(feature=f, threshold=self.thr(_prev(s, self.T)), ml=a_ml)
                stack.append((("b", f, s, b_left, b_right, True), me, "right"))
                stack.append((("v", a_left), me, "left"))
                continue
            stack.append((("v", right), me, "right"))
            stack.append((("v", left), me, "left"))
        return self._arrays(rows)

    def _size(self, root: int) -> int:
        e = self.e
        seen = {root}
        stack = [root]
        while stack and len(seen) < 10**7:
            v = stack.pop()
            if e.mode[v] != LEAF:
                for c in (int(e.true[v]), int(e.false[v])):
                    if c not in seen:
                        seen.add(c)
                        stack.append(c)
        return len(seen)

    def _arrays(self, rows: list[dict[str, Any]]) -> TreeArrays:
        n = len(rows)
        K = self.K
        value = np.zeros((n, K))
        for i, rw in enumerate(rows):
            if rw["value"] is not None:
                value[i] = rw["value"]
        leaf = np.array([rw["left"] < 0 for rw in rows])
        is_cat = np.array([rw["cat"] is not None for rw in rows])
        output = -1
        listed = {c for rw in rows for c in rw["cols"]}
        if K == 1:
            output = 0
        elif not self.all_vector and len(listed) <= 1:  # every leaf scores one column (or none): a scalar tree
            output = min(listed) if listed else 0
        return TreeArrays(
            left=np.array([rw["left"] for rw in rows], dtype=np.int64),
            right=np.array([rw["right"] for rw in rows], dtype=np.int64),
            feature=np.array([rw["feature"] for rw in rows], dtype=np.int64),
            threshold=np.array([rw["threshold"] for rw in rows], dtype=np.float64),
            missing_left=np.array([rw["ml"] for rw in rows], dtype=bool) & ~leaf,
            value=value if output < 0 else value[:, output], output=output,
            is_categorical=is_cat, categories={i: rw["cat"] for i, rw in enumerate(rows) if rw["cat"] is not None},
            cat_in_set_left=np.array([rw["in_left"] for rw in rows], dtype=bool) & is_cat,
            cat_invalid_left=np.array([rw["inv_left"] for rw in rows], dtype=bool) & is_cat,
        )
