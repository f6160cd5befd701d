"""ONNX backend: a Forest as one ``ai.onnx.ml`` tree-ensemble node plus explicit pre/post ops.

Default encoding (``opset=5``): ``TreeEnsemble`` with splits and leaf weights in
the input dtype (double unless the model sums in float32), interior nodes only,
``BRANCH_LEQ`` for thresholds and ``BRANCH_MEMBER`` for category sets (never
``BRANCH_NEQ``), NaN routed by ``nodes_missing_value_tracks_true`` (ORT goes true
iff ``cmp(x, t) or (tracks_true and isnan(x))``). Needs onnxruntime >= 1.21.

Exactness, piece by piece:

* float32-input models fed doubles are rounded to float32 first (``Cast`` twice);
  the float32 variant rounds each threshold *down* (largest float32 <= t), which
  routes every float32 input as the float64 threshold does.
* Category codes: LightGBM truncates toward zero, XGBoost/treelite floor (so -0.5
  is invalid), scikit-learn needs exact integers; the codes are computed on extra
  columns (``Floor``/``Ceil``/``Where`` then ``Concat``) and tested with MEMBER.
  MEMBER cannot tell an invalid value from a non-member, so a node that sends
  them different ways is refused, naming it.
* ``missing_zero`` (LightGBM zero-as-missing) is exact only where the zero band
  ``|x| <= 1e-35`` goes the same way as the comparison; other nodes are refused.
* Sums: ORT adds trees in order starting from 0; a nonzero base score is a leading
  one-leaf tree per output so sums round as the source's (``base_score="add"``
  gives the textbook ``Add`` node instead, not bit-exact). Averages are
  ``aggregate_function=AVERAGE`` when that divides by the true tree count,
  else ``SUM`` followed by ``Div``.
* ``opset=3`` writes the legacy ``TreeEnsembleRegressor`` (double thresholds via
  ``*_as_tensor``) for runtimes older than 1.21; its output is always float32,
  so it is refused unless ``exact=False``; it has no category sets.

Outputs: ``margin`` (raw margins, ``(n, n_outputs)``) and ``output`` (after the
post-transform, as explicit ops: ``1 / (1 + Exp(-alpha * m))`` rather than ORT's
approximate Sigmoid kernel, Softmax, Exp, and ``-2 ** (-m / c)`` for isolation scores).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from lumber.ir import CategoryRule, CompileError, Diagnostic, Forest, IRLocation, PostTransform
from lumber.ir.diagnostics import error
from lumber.ir.forest import ZERO_THRESHOLD
from lumber import __version__
from lumber.ir.interp import trees_per_output

from .base import Artifact, EmitOptions, fingerprint
from .c.layout import round_down_f32

ML_DOMAIN = "ai.onnx.ml"
DEFAULT_OPSET = 21
MODE_LEQ, MODE_LT, MODE_MEMBER = 0, 1, 6
MAX_MEMBERSHIP = 10_000
"""ORT unrolls MEMBER sets into chains of EQ nodes; tens of thousands of members crash it (ORT #25400)."""
CODE_LIMIT = {CategoryRule.LIGHTGBM: 2**31, CategoryRule.XGBOOST: 2**24,
              CategoryRule.SKLEARN: 2**32, CategoryRule.TREELITE: 2**32}
"""Codes at or above these are invalid under each rule, so such set members never match."""


@dataclass(frozen=True, kw_only=True)
class OnnxOptions(EmitOptions):
    """ONNX emission knobs."""

    opset: int = 5
    """``ai.onnx.ml`` opset: 5 (``TreeEnsemble``) or 3 (legacy ``TreeEnsembleRegressor``)."""
    input_dtype: str | None = None
    """``float64`` or ``float32`` input tensor; default: float32 iff the model sums in float32."""
    base_score: str = "exact"
    """``exact``: leading one-leaf trees (bit-exact sums); ``add``: an ``Add`` node after the trees."""
    exact: bool = True
    """Refuse anything whose results would differ from the reference evaluator."""
    onnx_opset: int = DEFAULT_OPSET
    max_membership: int = MAX_MEMBERSHIP
    source_fingerprint: str | None = None
    """Fingerprint recorded in the file (default: the forest's); for a forest that stands for another IR
    (oblivious tables lowered to their exact Forest) the caller passes that IR's."""


def _dtype(forest: Forest, options: OnnxOptions) -> str:
    if options.input_dtype is not None:
        return options.input_dtype
    return "float32" if forest.schema.accumulate_dtype == "float32" else "float64"


def _loc(forest: Forest, node: int) -> IRLocation:
    t = int(forest.node_tree[node])
    return IRLocation(tree=t, node=node - int(forest.tree_offset[t]))


def _zero_band_ok(forest: Forest, node: int) -> bool:
    """A numerical missing_zero node is a plain LEQ node iff the zero band goes its missing way."""
    t, ml = float(forest.threshold[node]), bool(forest.missing_left[node])
    return (ml and t >= ZERO_THRESHOLD) or (not ml and t < -ZERO_THRESHOLD)


def check(forest: Forest, options: OnnxOptions) -> list[Diagnostic]:
    """Every node or setting this encoding cannot reproduce exactly (or at all)."""
    diags: list[Diagnostic] = []
    schema = forest.schema
    dtype = _dtype(forest, options)
    internal = ~forest.is_leaf
    cat_nodes = np.flatnonzero(forest.is_categorical & internal)
    if options.opset not in (3, 5):
        diags.append(error(f"ai.onnx.ml opset {options.opset} is not supported", IRLocation(field="opset"),
                           "use 5 (TreeEnsemble, onnxruntime >= 1.21) or 3 (legacy TreeEnsembleRegressor)"))
        return diags
    if dtype not in ("float32", "float64"):
        diags.append(error(f"input dtype must be float32 or float64, got {dtype!r}", IRLocation(field="input_dtype")))
        return diags
    if options.base_score not in ("exact", "add"):
        diags.append(error(f"base_score must be 'exact' or 'add', got {options.base_score!r}",
                           IRLocation(field="base_score")))
    if options.opset == 3 and dtype == "float32":
        diags.append(error("the legacy opset-3 export reads double input only", IRLocation(field="input_dtype")))
    exact = options.exact
    if exact:
        if options.opset == 3:
            diags.append(error("legacy TreeEnsembleRegressor (opset 3) always returns float32 margins",
                               IRLocation(field="opset"),
                               "use opset 5 (onnxruntime >= 1.21), or pass exact=False (CLI: --inexact) "
                               "to accept float32 outputs"))
        if dtype == "float32" and schema.input_dtype == "float64":
            diags.append(error("float32 input cannot reproduce a model that compares float64 inputs",
                               IRLocation(field="input_dtype"), "use input_dtype='float64'"))
        if dtype == "float32" and schema.accumulate_dtype == "float64":
            diags.append(error("float32 TreeEnsemble sums leaf values in float32, the model sums in float64",
                               IRLocation(field="input_dtype"), "use input_dtype='float64' for exact margins"))
        if dtype == "float64" and schema.accumulate_dtype == "float32":
            diags.append(error("double TreeEnsemble sums leaf values in float64, the model sums in float32",
                               IRLocation(field="input_dtype"), "use input_dtype='float32' for exact margins"))
        if options.base_score == "add" and any(b != 0 for b in schema.base_score):
            diags.append(error("base score as an Add node rounds differently from the model's sum",
                               IRLocation(field="base_score"), "use base_score='exact'"))
    mz = np.flatnonzero(forest.missing_zero & internal & ~forest.is_categorical)
    for node in mz.tolist():
        if not _zero_band_ok(forest, int(node)):
            diags.append(error(
                "zero-as-missing split: values in [-1e-35, 1e-35] take the missing branch, which ONNX cannot "
                "express for this threshold", _loc(forest, int(node)),
                f"threshold {forest.threshold[node]!r}, missing goes {'left' if forest.missing_left[node] else 'right'}"))
    if cat_nodes.size and options.opset == 3:
        t = _loc(forest, int(cat_nodes[0]))
        diags.append(error(f"{cat_nodes.size} categorical split(s): the legacy opset-3 encoding has no set membership",
                           t, "use opset 5"))
        return diags
    if dtype == "float32" and cat_nodes.size:
        big = forest.cat_values >= 2**24
        if big.any():
            node = int(np.searchsorted(forest.cat_offset, np.flatnonzero(big)[0], side="right") - 1)
            diags.append(error("category code >= 2**24 cannot be held exactly by a float32 membership list",
                               _loc(forest, node), "use input_dtype='float64'"))
    total = 0
    for node in cat_nodes.tolist():
        in_left = bool(forest.cat_in_set_left[node])
        nonmember_left = not in_left
        if bool(forest.cat_invalid_left[node]) != nonmember_left:
            diags.append(error(
                f"invalid category values go {'left' if forest.cat_invalid_left[node] else 'right'} but "
                f"non-members go {'left' if nonmember_left else 'right'}; BRANCH_MEMBER cannot tell them apart",
                _loc(forest, node)))
        if forest.missing_zero[node]:
            code0_left = in_left if 0 in forest.categories_of(node) else nonmember_left
            ml = bool(forest.missing_left[node])
            if code0_left != ml or nonmember_left != ml:
                diags.append(error("zero-as-missing categorical split: the zero band would be read as category 0",
                                   _loc(forest, node)))
        size = forest.categories_of(node).shape[0]
        total += size
        if size > options.max_membership:
            diags.append(error(f"category set of {size} members exceeds {options.max_membership}",
                               _loc(forest, node), "onnxruntime crashes on huge BRANCH_MEMBER sets (ORT #25400)"))
    if total > 4 * options.max_membership:
        diags.append(error(f"{total} category set members in all exceed {4 * options.max_membership}",
                           IRLocation(), "onnxruntime crashes on huge BRANCH_MEMBER sets (ORT #25400)"))
    return diags


# -- the tree-ensemble attributes -------------------------------------------------------------

@dataclass
class _Trees:
    """Flattened TreeEnsemble (ml-5) attributes."""

    feature: list[int]
    mode: list[int]
    split: list[float]
    true_id: list[int]
    true_leaf: list[int]
    false_id: list[int]
    false_leaf: list[int]
    tracks_true: list[int]
    roots: list[int]
    leaf_target: list[int]
    leaf_weight: list[float]
    membership: list[float]


def _cat_columns(forest: Forest) -> list[int]:
    """Features read by categorical nodes (they get a column of category codes appended)."""
    if forest.schema.category_rule == CategoryRule.SKLEARN:
        return []
    return sorted({int(f) for f in forest.feature[forest.is_categorical & ~forest.is_leaf]})


def _ml5_trees(forest: Forest, thresholds: npt.NDArray[np.float64], base: list[float] | None) -> _Trees:
    """Interior nodes with global ids; one copy per output for trees with vector leaves."""
    K = forest.n_outputs
    nf = forest.n_features
    cat_col = {f: nf + i for i, f in enumerate(_cat_columns(forest))}
    limit = CODE_LIMIT[forest.schema.category_rule]
    tr = _Trees([], [], [], [], [], [], [], [], [], [], [], [])
    if base is not None:
        for k, b in enumerate(base):
            tr.roots.append(len(tr.feature))
            leaf = len(tr.leaf_weight)
            tr.leaf_target.append(k)
            tr.leaf_weight.append(b)
            tr.feature.append(0); tr.mode.append(MODE_LEQ); tr.split.append(0.0); tr.tracks_true.append(0)
            tr.true_id.append(leaf); tr.false_id.append(leaf); tr.true_leaf.append(1); tr.false_leaf.append(1)
    left, right = forest.left, forest.right
    for t in range(forest.n_trees):
        lo, hi = int(forest.tree_offset[t]), int(forest.tree_offset[t + 1])
        targets = [int(forest.tree_output[t])] if forest.tree_output[t] >= 0 else list(range(K))
        internal = np.flatnonzero(left[lo:hi] >= 0) + lo
        leaves = np.flatnonzero(left[lo:hi] < 0) + lo
        for k in targets:
            n0, l0 = len(tr.feature), len(tr.leaf_weight)
            node_idx = np.full(hi - lo, -1, dtype=np.int64)
            node_idx[internal - lo] = n0 + np.arange(internal.size)
            leaf_idx = np.full(hi - lo, -1, dtype=np.int64)
            leaf_idx[leaves - lo] = l0 + np.arange(leaves.size)
            tr.leaf_target.extend([k] * leaves.size)
            tr.leaf_weight.extend(forest.value[leaves, k].tolist())
            if internal.size == 0:  # a lone leaf: one node whose branches both reach it
                tr.roots.append(n0)
                tr.feature.append(0); tr.mode.append(MODE_LEQ); tr.split.append(0.0); tr.tracks_true.append(0)
                tr.true_id.append(l0); tr.false_id.append(l0); tr.true_leaf.append(1); tr.false_leaf.append(1)
                continue
            tr.roots.append(n0)
            for i in internal.tolist():
                a, b = int(left[i]), int(right[i])
                ml = bool(forest.missing_left[i])
                if forest.is_categorical[i]:
                    f = cat_col.get(int(forest.feature[i]), int(forest.feature[i]))
                    members = forest.categories_of(i)
                    members = members[members < limit]
                    if not forest.cat_in_set_left[i]:
                        a, b = b, a  # true branch = members
                    true_is_left = bool(forest.cat_in_set_left[i])
                    if members.size:
                        tr.mode.append(MODE_MEMBER)
                        tr.split.append(0.0)
                        tr.membership.extend(members.astype(np.float64).tolist() + [np.nan])
                    else:  # x < -inf never holds: everything but NaN takes the false (non-member) branch
                        tr.mode.append(MODE_LT)
                        tr.split.append(-np.inf)
                    tr.tracks_true.append(int(ml == true_is_left))
                else:
                    f = int(forest.feature[i])
                    tr.mode.append(MODE_LEQ)
                    tr.split.append(float(thresholds[i]))
                    tr.tracks_true.append(int(ml))
                tr.feature.append(f)
                for child, ids, flags in ((a, tr.true_id, tr.true_leaf), (b, tr.false_id, tr.false_leaf)):
                    is_leaf = left[child] < 0
                    flags.append(int(is_leaf))
                    ids.append(int(leaf_idx[child - lo] if is_leaf else node_idx[child - lo]))
    return tr


class _Graph:
    """Small helper around onnx.helper: unique names, initializers, nodes."""

    def __init__(self, np_dtype: Any) -> None:
        self.nodes: list[Any] = []
        self.inits: list[Any] = []
        self.np_dtype = np_dtype
        self._n = 0

    def name(self, stem: str) -> str:
        self._n += 1
        return f"{stem}_{self._n}"

    def const(self, stem: str, value: Any, dtype: Any = None) -> str:
        from onnx import numpy_helper

        nm = self.name(stem)
        self.inits.append(numpy_helper.from_array(np.asarray(value, dtype=dtype or self.np_dtype), nm))
        return nm

    def op(self, op_type: str, inputs: list[str], stem: str, domain: str = "", out: str | None = None,
           **attrs: Any) -> str:
        from onnx import helper

        o = out or self.name(stem)
        self.nodes.append(helper.make_node(op_type, inputs, [o], name=self.name(op_type), domain=domain, **attrs))
        return o


def _category_columns(g: _Graph, forest: Forest, x: str) -> str:
    """Append a column of category codes for each categorical feature (Floor, or trunc for LightGBM)."""
    cols = _cat_columns(forest)
    if not cols:
        return x
    idx = g.const("cat_cols", np.array(cols, dtype=np.int64), np.int64)
    xc = g.op("Gather", [x, idx], "cat_x", axis=1)
    if forest.schema.category_rule == CategoryRule.LIGHTGBM:
        zero = g.const("zero", np.array(0.0))
        neg = g.op("Less", [xc, zero], "cat_neg")
        codes = g.op("Where", [neg, g.op("Ceil", [xc], "cat_ceil"), g.op("Floor", [xc], "cat_floor")], "cat_trunc")
    else:
        codes = g.op("Floor", [xc], "cat_floor")
    return g.op("Concat", [x, codes], "x_codes", axis=1)


def _post(g: _Graph, forest: Forest, margin: str) -> str:
    s = forest.schema
    pt = s.post_transform
    if pt == PostTransform.IDENTITY:
        return g.op("Identity", [margin], "output", out="output")
    if pt == PostTransform.SIGMOID:
        # 1 / (1 + exp(-alpha * m)) spelled out: onnxruntime's Sigmoid kernel is an approximation
        # (1.32: 0.1% off at m = -30, exactly 0 below about -37); its Exp is within an ulp.
        neg = (g.op("Neg", [margin], "neg") if s.sigmoid_alpha == 1.0 else
               g.op("Mul", [margin, g.const("minus_alpha", np.array(-s.sigmoid_alpha))], "neg_scaled"))
        one = g.const("one", np.array(1.0))
        den = g.op("Add", [one, g.op("Exp", [neg], "exp")], "den")
        return g.op("Div", [one, den], "output", out="output")
    if pt == PostTransform.SOFTMAX:
        return g.op("Softmax", [margin], "output", out="output", axis=-1)
    if pt == PostTransform.EXP:
        return g.op("Exp", [margin], "output", out="output")
    if pt == PostTransform.ISOLATION:
        e = g.op("Div", [g.op("Neg", [margin], "neg"), g.const("c", np.array(s.isolation_c))], "expo")
        p = g.op("Pow", [g.const("two", np.array(2.0)), e], "pow")
        return g.op("Neg", [p], "output", out="output")
    raise CompileError(f"post-transform {pt.name.lower()} has no ONNX lowering")


def emit_onnx(forest: Forest, options: OnnxOptions | None = None) -> Artifact:
    """The ONNX model for ``forest`` (raises CompileError naming what cannot be expressed)."""
    from onnx import TensorProto, checker, helper

    options = options or OnnxOptions()
    diags = check(forest, options)
    if diags:
        raise CompileError(diags)
    schema = forest.schema
    dtype = _dtype(forest, options)
    single = dtype == "float32"
    np_t = np.float32 if single else np.float64
    elem: int = TensorProto.FLOAT if single else TensorProto.DOUBLE
    K = schema.n_outputs
    g = _Graph(np_t)
    x = "X"
    if schema.input_dtype == "float32" and not single:
        x = g.op("Cast", [g.op("Cast", [x], "x_f32", to=TensorProto.FLOAT)], "x_rounded", to=TensorProto.DOUBLE)
    thresholds = forest.threshold if not single else round_down_f32(forest.threshold).astype(np.float64)
    base = [float(b) for b in np.asarray(schema.base_score, dtype=np_t)]
    nonzero_base = any(b != 0 for b in base)
    counts = None
    if schema.average:
        counts = np.maximum(trees_per_output(forest), 1.0)
    fp = options.source_fingerprint or fingerprint(forest)
    if options.opset == 5:
        xin = _category_columns(g, forest, x)
        lead = base if nonzero_base and options.base_score == "exact" else None
        tr = _ml5_trees(forest, thresholds, lead)
        n_onnx_trees = len(tr.roots)
        average_exact = (counts is not None and lead is None and n_onnx_trees == forest.n_trees
                         and bool(np.all(counts == n_onnx_trees)))
        attrs: dict[str, Any] = dict(
            aggregate_function=0 if average_exact else 1,
            post_transform=0,
            n_targets=K,
            tree_roots=tr.roots,
            nodes_featureids=tr.feature,
            nodes_modes=helper.make_tensor("nodes_modes", TensorProto.UINT8, [len(tr.mode)], tr.mode),
            nodes_splits=_tensor("nodes_splits", np.array(tr.split, dtype=np_t)),
            nodes_truenodeids=tr.true_id,
            nodes_trueleafs=tr.true_leaf,
            nodes_falsenodeids=tr.false_id,
            nodes_falseleafs=tr.false_leaf,
            nodes_missing_value_tracks_true=tr.tracks_true,
            leaf_targetids=tr.leaf_target,
            leaf_weights=_tensor("leaf_weights", np.array(tr.leaf_weight, dtype=np_t)),
        )
        if tr.membership:
            attrs["membership_values"] = _tensor("membership_values", np.array(tr.membership, dtype=np_t))
        summed = g.op("TreeEnsemble", [xin], "tree_sum", domain=ML_DOMAIN, **attrs)
        if counts is not None and not average_exact:
            summed = g.op("Div", [summed, g.const("tree_count", counts)], "average")
        if nonzero_base and lead is None:
            summed = g.op("Add", [summed, g.const("base_score", np.array(base))], "with_base")
        margin = g.op("Identity", [summed], "margin", out="margin")
        out_elem = elem
    else:
        margin, out_elem = _legacy(g, forest, x, thresholds, base, counts)
    _post(g, forest, margin)
    out_shape: list[str | int | None] = ["N", K]
    graph = helper.make_graph(
        g.nodes, f"lumber_{options.name}",
        [helper.make_tensor_value_info("X", elem, ["N", forest.n_features])],
        [helper.make_tensor_value_info("margin", out_elem, out_shape),
         helper.make_tensor_value_info("output", out_elem, out_shape)],
        initializer=g.inits,
    )
    model = helper.make_model(
        graph, producer_name="lumber", producer_version=__version__,
        opset_imports=[helper.make_opsetid("", options.onnx_opset), helper.make_opsetid(ML_DOMAIN, options.opset)],
        doc_string=f"lumber {__version__}: {forest.n_trees} trees, {schema.task.name.lower()}; "
                   f"outputs 'margin' (raw) and 'output' ({schema.post_transform.name.lower()})",
    )
    model.ir_version = min(model.ir_version, 10)
    meta = {"lumber.fingerprint": fp, "lumber.schema": json.dumps(schema.to_dict(), sort_keys=True, default=str),
            "lumber.input_dtype": dtype, "lumber.version": __version__}
    helper.set_model_props(model, meta)
    checker.check_model(model)
    data = model.SerializeToString(deterministic=True)
    return Artifact(target="onnx", files={f"{options.name}.onnx": data}, fingerprint=fp,
                    metadata={"input_dtype": dtype, "opset": options.opset, "fingerprint": fp})


def _tensor(name: str, a: npt.NDArray[Any]) -> Any:
    from onnx import numpy_helper

    return numpy_helper.from_array(a, name)


def _legacy(g: _Graph, forest: Forest, x: str, thresholds: npt.NDArray[np.float64], base: list[float],
            counts: npt.NDArray[np.float64] | None) -> tuple[str, int]:
    """ml-3 TreeEnsembleRegressor: every node listed (leaves as LEAF), local ids, float output."""
    from onnx import TensorProto

    n = forest.n_nodes
    K = forest.n_outputs
    tree = forest.node_tree.astype(np.int64)
    off = forest.tree_offset[:-1][tree]
    local = np.arange(n) - off
    leaf = forest.is_leaf
    modes = np.where(leaf, "LEAF", "BRANCH_LEQ").tolist()
    lc = np.where(leaf, 0, forest.left - off)
    rc = np.where(leaf, 0, forest.right - off)
    vals = np.where(leaf, 0.0, thresholds)
    t_tree, t_node, t_id, t_w = [], [], [], []
    for i in np.flatnonzero(leaf):
        t = int(tree[i])
        ks = [int(forest.tree_output[t])] if forest.tree_output[t] >= 0 else range(K)
        for k in ks:
            t_tree.append(t); t_node.append(int(local[i])); t_id.append(k); t_w.append(float(forest.value[i, k]))
    y = g.op("TreeEnsembleRegressor", [x], "tree_sum", domain=ML_DOMAIN,
             n_targets=K, aggregate_function="SUM", post_transform="NONE",
             nodes_treeids=tree.tolist(), nodes_nodeids=local.tolist(),
             nodes_featureids=np.where(leaf, 0, forest.feature).tolist(), nodes_modes=modes,
             nodes_values_as_tensor=_tensor("nodes_values", vals.astype(np.float64)),
             nodes_truenodeids=lc.tolist(), nodes_falsenodeids=rc.tolist(),
             nodes_missing_value_tracks_true=forest.missing_left.astype(int).tolist(),
             target_treeids=t_tree, target_nodeids=t_node, target_ids=t_id,
             target_weights_as_tensor=_tensor("target_weights", np.array(t_w, dtype=np.float64)),
             base_values_as_tensor=_tensor("base_values", np.array(base, dtype=np.float64)))
    if counts is not None:
        y = g.op("Div", [y, g.const("tree_count", counts.astype(np.float32), np.float32)], "average")
    return g.op("Identity", [y], "margin", out="margin"), TensorProto.FLOAT


__all__ = ["OnnxOptions", "check", "emit_onnx"]
