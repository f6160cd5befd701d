"""LightGBM frontend: a Booster, an ``LGBMModel`` or a model text file -> Forest.

lumber parses the model text itself (:mod:`.lightgbm_text`) and never hands a
file to LightGBM's loader, which crashes the process on truncated or edited
files. Objects are read through ``booster.model_to_string()``.

Node layout per tree: LightGBM's internal nodes ``0 .. L-2`` keep their ids
and leaf ``i`` becomes node ``L-1+i``, so ``forest.apply(X)[:, t] - (L_t - 1)``
equals ``booster.predict(X, pred_leaf=True)[:, t]``.

Split semantics reproduced exactly (LightGBM ``Tree::NumericalDecision`` /
``CategoricalDecision`` on x86-64, double inputs):

* Prediction first replaces every input with ``|x| <= kZeroThreshold`` by 0.0
  (the dense-row reader drops such values). Thresholds in ``[-kZT, kZT)`` are
  therefore rewritten to the equivalent test on the raw input.
* ``missing_type`` None: NaN becomes 0.0, so NaN goes where 0.0 goes.
  Zero: NaN and ``|x| <= kZT`` take ``default_left``. NaN: NaN takes ``default_left``.
* Categorical: ``int(x)`` truncates toward zero (-0.5 is category 0); NaN,
  negative codes, ``|x| >= 2**31`` and infinities go right; members of the
  bitset go left.

Margins are summed in tree order in float64 from 0 (LightGBM folds its initial
score into the first tree), so ``evaluate`` equals ``predict(raw_score=True)``
bit for bit; for ``boosting=rf`` it equals that sum divided by the number of
iterations, which is what LightGBM's ``predict`` transforms.
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
from lumber.ir.forest import ZERO_THRESHOLD

from .lightgbm_text import LightGBMText, parse_lightgbm_text
from .files import content_hash, read_model_bytes

MISSING_NONE, MISSING_ZERO, MISSING_NAN = 0, 1, 2

_IDENTITY_OBJECTIVES = frozenset({
    "regression", "regression_l1", "huber", "fair", "quantile", "mape", "lambdarank", "rank_xendcg", "custom",
})
_EXP_OBJECTIVES = frozenset({"poisson", "gamma", "tweedie"})
ACCEPTED_OBJECTIVES = ("regression, regression_l1, huber, fair, quantile, mape, poisson, gamma, tweedie, binary, "
                       "multiclass, multiclassova, cross_entropy, lambdarank, rank_xendcg, custom")


def load_lightgbm_text(path: str | Path, *, data: bytes | None = None, **options: Any) -> Forest:
    """A LightGBM model text file (``booster.save_model``) -> validated Forest.

    ``data`` is the file's bytes when the caller already read them. Options:
    ``feature_names`` (override the names in the file), ``raw_output`` (see
    :func:`lower_lightgbm`).
    """
    name = str(path)
    if data is None:
        data = read_model_bytes(path, "a LightGBM model text file")
    parsed = parse_lightgbm_text(data, name)
    return lower_lightgbm(parsed, content_hash=content_hash(data), **options)


def from_lightgbm(model: Any, **options: Any) -> Forest:
    """A ``lightgbm.Booster`` or fitted ``LGBMModel`` (classifier, regressor, ranker) -> Forest."""
    import lightgbm

    classes: tuple[Any, ...] | None = None
    if isinstance(model, lightgbm.LGBMModel):
        if not getattr(model, "fitted_", False) and getattr(model, "_Booster", None) is None:
            raise UnsupportedModelError(f"{type(model).__name__} is not fitted", "call fit() before loading it")
        booster = model.booster_
        if isinstance(model, lightgbm.LGBMClassifier):
            classes = tuple(np.asarray(model.classes_).tolist())
        name = f"<{type(model).__name__}>"
    elif isinstance(model, lightgbm.Booster):
        booster = model
        name = "<lightgbm.Booster>"
    else:
        raise UnsupportedModelError(f"cannot load an object of type lightgbm {type(model).__name__}",
                                    "accepted: lightgbm.Booster, LGBMClassifier, LGBMRegressor, LGBMRanker, LGBMModel")
    text = booster.model_to_string()
    data = text.encode("utf-8")
    parsed = parse_lightgbm_text(text, name)
    return lower_lightgbm(parsed, content_hash=content_hash(data), classes=classes, **options)


# -- objective -> task and output transform ----------------------------------------------------


def _objective_schema(m: LightGBMText, raw_output: bool) -> dict[str, Any]:
    """Task, outputs and post-transform of the objective line (e.g. ``binary sigmoid:1``)."""
    K = m.num_tree_per_iteration
    tokens = (m.objective or "custom").split()
    kind, params = tokens[0], {}
    for tok in tokens[1:]:
        key, sep, value = tok.partition(":")
        params[key] = value if sep else "1"
    loc = IRLocation(file=m.name, field="objective")

    def sigmoid_alpha() -> float:
        try:
            alpha = float(params.get("sigmoid", "1"))
        except ValueError:
            raise ModelFormatError(f"objective parameter sigmoid:{params['sigmoid']} is not a number",
                                   location=loc) from None
        if not np.isfinite(alpha) or alpha <= 0:
            raise ModelFormatError(f"objective parameter sigmoid:{alpha} must be positive", location=loc)
        return alpha

    def single_output() -> None:
        if K != 1:
            raise ModelFormatError(f"objective {kind!r} with num_tree_per_iteration={K}, expected 1", location=loc)

    def raw(reason: str) -> dict[str, Any]:
        if raw_output:
            task = Task.MULTICLASS if K > 1 else Task.REGRESSION
            return {"task": task, "post_transform": PostTransform.IDENTITY}
        raise UnsupportedModelError(
            f"objective {m.objective!r} maps raw scores through {reason}, which lumber cannot express",
            "pass raw_output=True to load it anyway (evaluate() stays exact; predict() then returns raw scores)",
            location=loc)

    if "sqrt" in params:
        return raw("sign(x) * x**2 (reg_sqrt=True)")
    if kind == "binary":
        single_output()
        return {"task": Task.BINARY, "post_transform": PostTransform.SIGMOID, "sigmoid_alpha": sigmoid_alpha()}
    if kind in ("multiclass", "multiclassova"):
        if K != m.num_class or K < 2:
            raise ModelFormatError(f"objective {kind!r} with num_class={m.num_class} and num_tree_per_iteration={K}",
                                   "multiclass models grow one tree per class per iteration", location=loc)
        if kind == "multiclass":
            return {"task": Task.MULTICLASS, "post_transform": PostTransform.SOFTMAX}
        return {"task": Task.MULTICLASS, "post_transform": PostTransform.SIGMOID, "sigmoid_alpha": sigmoid_alpha()}
    if kind == "cross_entropy":
        single_output()
        return {"task": Task.REGRESSION, "post_transform": PostTransform.SIGMOID, "sigmoid_alpha": 1.0}
    if kind == "cross_entropy_lambda":
        return raw("log(1 + exp(x))")
    if kind in _EXP_OBJECTIVES:
        single_output()
        return {"task": Task.REGRESSION, "post_transform": PostTransform.EXP}
    if kind in _IDENTITY_OBJECTIVES:
        if kind != "custom":
            single_output()
        return {"task": Task.MULTICLASS if K > 1 else Task.REGRESSION, "post_transform": PostTransform.IDENTITY}
    raise UnsupportedModelError(f"unknown LightGBM objective {m.objective!r}",
                                f"supported objectives: {ACCEPTED_OBJECTIVES}", location=loc)


def _features(m: LightGBMText, categorical_used: npt.NDArray[np.bool_],
              names: Sequence[str] | None) -> tuple[Feature, ...]:
    """Feature names and kinds; pandas category labels when they can be matched to columns."""
    n = m.max_feature_idx + 1
    if names is not None:
        names = [str(s) for s in names]
        if len(names) != n:
            raise ModelFormatError(f"feature_names has {len(names)} names but the model reads {n} features")
    else:
        names = list(m.feature_names)
    infos = m.feature_infos or ["none"] * n
    is_cat = categorical_used.copy()
    for j in m.categorical_feature:  # trained as categorical, even if no split uses it (labels then match)
        if j < n:
            is_cat[j] = True
    for j, info in enumerate(infos):
        if info != "none" and not info.startswith("[") and all(p.lstrip("-").isdigit() for p in info.split(":")):
            is_cat[j] = True
    labels: dict[int, tuple[Any, ...]] = {}
    cat_cols = np.flatnonzero(is_cat)
    if m.pandas_categorical and len(m.pandas_categorical) == cat_cols.shape[0]:
        labels = {int(j): tuple(c) for j, c in zip(cat_cols, m.pandas_categorical)}
    return tuple(Feature(names[j], FeatureKind.CATEGORICAL if is_cat[j] else FeatureKind.NUMERICAL, labels.get(j))
                 for j in range(n))


# -- structure ---------------------------------------------------------------------------------


def _fail(m: LightGBMText, message: str, tree: int, node: int | None, field: str, *notes: str) -> ModelFormatError:
    return ModelFormatError(message, *notes, location=IRLocation(file=m.name, tree=tree, node=node, field=field))


def _renumber_internal(m: LightGBMText, t: int, lo: int, hi: int, left: npt.NDArray[np.int64],
                       right: npt.NDArray[np.int64], arrays: list[npt.NDArray[Any]]) -> None:
    """Reorder tree ``t``'s internal nodes breadth-first (in place) so children follow parents.

    Leaves keep their ids, so ``pred_leaf`` still maps directly. Raises on
    cycles, shared or unreachable internal nodes.
    """
    n_int = hi - lo
    lc, rc = left[lo:hi].copy(), right[lo:hi].copy()
    order: list[int] = []
    seen = np.zeros(n_int, dtype=bool)
    queue = [0]
    seen[0] = True
    while queue:
        i = queue.pop(0)
        order.append(i)
        for c in (lc[i], rc[i]):
            if c >= 0:
                if seen[c]:
                    raise _fail(m, f"node {c} is reached twice", t, int(c), "left_child/right_child",
                                "each node must have exactly one parent")
                seen[c] = True
                queue.append(int(c))
    if len(order) != n_int:
        missing = int(np.flatnonzero(~seen)[0])
        raise _fail(m, f"internal node {missing} is unreachable from the root", t, missing, "left_child/right_child")
    perm = np.asarray(order, dtype=np.int64)
    new_id = np.empty(n_int, dtype=np.int64)
    new_id[perm] = np.arange(n_int)
    left[lo:hi] = np.where(lc[perm] >= 0, new_id[np.maximum(lc[perm], 0)], lc[perm])
    right[lo:hi] = np.where(rc[perm] >= 0, new_id[np.maximum(rc[perm], 0)], rc[perm])
    for a in arrays:
        a[lo:hi] = a[lo:hi][perm]


def _category_sets(m: LightGBMText, node_tree: npt.NDArray[np.int64],
                   cat_idx: npt.NDArray[np.int64]) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]:
    """Sizes and concatenated members of the bitsets of categorical nodes (all trees at once).

    Node ``i`` of tree ``node_tree[i]`` uses bitset ``cat_idx[i]`` of its tree.
    Bits are numbered from the least significant bit of the first word.
    """
    C = m.cat_trees.shape[0]
    nb = m.num_cat[m.cat_trees] + 1
    b_first = np.zeros(C, dtype=np.int64)
    np.cumsum(nb[:-1], out=b_first[1:])
    # absolute word offset at which every bitset starts (the last boundary of each tree is dropped)
    keep = np.ones(m.cat_boundaries.shape[0], dtype=bool)
    keep[b_first + nb - 1] = False
    owner = np.repeat(np.arange(C), nb)
    abs_start = (m.cat_boundaries + m.cat_word_offset[:-1][owner])[keep]
    words = m.cat_threshold.astype("<u4")
    pos = np.flatnonzero(np.unpackbits(words.view(np.uint8), bitorder="little")).astype(np.int64)
    g = np.searchsorted(abs_start, pos // 32, side="right") - 1
    members = pos - 32 * abs_start[g]
    per_g = np.bincount(g, minlength=abs_start.shape[0])
    start_g = np.zeros(abs_start.shape[0], dtype=np.int64)
    np.cumsum(per_g[:-1], out=start_g[1:])
    c_of_tree = np.full(m.n_trees, -1, dtype=np.int64)
    c_of_tree[m.cat_trees] = np.arange(C)
    gid = (b_first - np.arange(C))[c_of_tree[node_tree]] + cat_idx
    sizes = per_g[gid]
    out_start = np.zeros(sizes.shape[0], dtype=np.int64)
    np.cumsum(sizes[:-1], out=out_start[1:])
    total = int(sizes.sum())
    values = members[np.repeat(start_g[gid] - out_start, sizes) + np.arange(total)]
    return sizes, values


def lower_lightgbm(m: LightGBMText, *, content_hash: str = "", classes: Sequence[Any] | None = None,
                   feature_names: Sequence[str] | None = None, raw_output: bool = False) -> Forest:
    """Check a parsed model's structure and build the Forest (vectorized over all nodes).

    ``raw_output=True`` accepts objectives whose output transform lumber cannot
    express (``reg_sqrt``, ``cross_entropy_lambda``) with an identity transform.
    """
    T = m.n_trees
    if T == 0:
        raise UnsupportedModelError(f"{m.name}: the model has no trees", "train at least one boosting round")
    K = m.num_tree_per_iteration
    if T % K:
        raise ModelFormatError(f"{m.name}: {T} trees is not a multiple of num_tree_per_iteration={K}",
                               "the file is truncated or trees were removed")
    out_schema = _objective_schema(m, raw_output)
    L = m.num_leaves
    n_int = L - 1
    I = int(n_int.sum())
    int_start = np.zeros(T + 1, dtype=np.int64)
    np.cumsum(n_int, out=int_start[1:])
    tree_of_int = np.repeat(np.arange(T, dtype=np.int64), n_int)
    local = np.arange(I, dtype=np.int64) - int_start[tree_of_int]
    n_int_of = n_int[tree_of_int]
    L_of = L[tree_of_int]

    def first_bad(mask: npt.NDArray[np.bool_]) -> tuple[int, int]:
        i = int(np.flatnonzero(mask)[0])
        return int(tree_of_int[i]), int(local[i])

    dt = m.decision_type
    bad = (dt < 0) | (dt > 15) | (((dt >> 2) & 3) == 3)
    if bad.any():
        t, i = first_bad(bad)
        raise _fail(m, f"decision_type {int(dt[int_start[t] + i])} is not valid", t, i, "decision_type",
                    "bit 0: categorical, bit 1: default_left, bits 2-3: missing type 0 (None), 1 (Zero) or 2 (NaN)")
    feat = m.split_feature
    bad = (feat < 0) | (feat > m.max_feature_idx)
    if bad.any():
        t, i = first_bad(bad)
        raise _fail(m, f"split_feature {int(feat[int_start[t] + i])} is out of range "
                       f"(max_feature_idx={m.max_feature_idx})", t, i, "split_feature")
    left = m.left_child.copy()
    right = m.right_child.copy()
    for side, child in (("left_child", left), ("right_child", right)):
        bad = np.where(child >= 0, child >= n_int_of, ~child >= L_of)
        if bad.any():
            t, i = first_bad(bad)
            c = int(child[int_start[t] + i])
            what = f"internal node {c}" if c >= 0 else f"leaf {~c}"
            raise _fail(m, f"{side} {c} points to {what}, which does not exist "
                           f"(tree has {int(n_int[t])} internal nodes and {int(L[t])} leaves)", t, i, side)
    threshold = m.threshold.copy()
    split_feature = feat.copy()
    decision = dt.copy()
    internal_count = None if m.internal_count is None else m.internal_count.copy()
    backward = ((left >= 0) & (left <= local)) | ((right >= 0) & (right <= local))
    if backward.any():
        permuted = [threshold, split_feature, decision] + ([internal_count] if internal_count is not None else [])
        for t in np.unique(tree_of_int[backward]):
            _renumber_internal(m, int(t), int(int_start[t]), int(int_start[t + 1]), left, right, permuted)

    # global ids: tree t's internal node i -> off[t] + i, its leaf j -> off[t] + n_int[t] + j
    sizes = 2 * L - 1
    off = np.zeros(T + 1, dtype=np.int64)
    np.cumsum(sizes, out=off[1:])
    n = int(off[-1])
    base = off[:-1][tree_of_int]
    g_int = base + local
    leaf_tree = np.repeat(np.arange(T, dtype=np.int64), L)
    leaf_start = np.zeros(T + 1, dtype=np.int64)
    np.cumsum(L, out=leaf_start[1:])
    g_leaf = off[:-1][leaf_tree] + n_int[leaf_tree] + (np.arange(leaf_start[-1]) - leaf_start[leaf_tree])

    def to_global(child: npt.NDArray[np.int64]) -> npt.NDArray[np.int64]:
        return np.where(child >= 0, base + child, base + n_int_of + ~child)

    gl, gr = to_global(left), to_global(right)
    indeg = np.bincount(np.concatenate([gl, gr]), minlength=n)
    is_root = np.zeros(n, dtype=bool)
    is_root[off[:-1]] = True
    bad_nodes = np.flatnonzero(indeg != np.where(is_root, 0, 1))
    if bad_nodes.size:
        g = int(bad_nodes[0])
        t = int(np.searchsorted(off, g, side="right") - 1)
        loc_id = g - int(off[t])
        what = f"internal node {loc_id}" if loc_id < n_int[t] else f"leaf {loc_id - int(n_int[t])}"
        problem = "is never reached" if indeg[g] == 0 else f"is reached {int(indeg[g])} times"
        raise _fail(m, f"{what} {problem}", t, loc_id if loc_id < n_int[t] else None, "left_child/right_child",
                    "every node except the root must have exactly one parent")

    # splits
    is_cat_int = (decision & 1).astype(bool)
    default_left = ((decision >> 1) & 1).astype(bool)
    missing_type = (decision >> 2) & 3
    num = ~is_cat_int
    if np.any(num & np.isnan(threshold)):
        t, i = first_bad(num & np.isnan(threshold))
        raise _fail(m, "threshold is NaN", t, i, "threshold", "a numerical split needs a number to compare with")
    thr = threshold.copy()
    kzt = ZERO_THRESHOLD
    # LightGBM predicts on x' = 0 if |x| <= kZT else x; rewrite t so that "x <= t" on raw x is the same test
    low = num & (thr >= -kzt) & (thr < 0.0)
    high = num & (thr >= 0.0) & (thr < kzt)
    thr[low] = np.nextafter(-kzt, -np.inf)
    thr[high] = kzt
    missing_left = np.where(missing_type == MISSING_NONE, 0.0 <= threshold, default_left) & num
    missing_zero = num & (missing_type == MISSING_ZERO)

    # categorical bitsets
    cat_sizes = np.zeros(I, dtype=np.int64)
    cat_values = np.zeros(0, dtype=np.int64)
    if is_cat_int.any():
        cat_nodes = np.flatnonzero(is_cat_int)
        raw_idx = threshold[cat_nodes]
        nc = m.num_cat[tree_of_int[cat_nodes]]
        with np.errstate(invalid="ignore"):
            idx = np.where(np.isfinite(raw_idx), raw_idx, -1).astype(np.int64)
        bad = (idx != raw_idx) | (idx < 0) | (idx >= nc)
        if bad.any():
            j = int(np.flatnonzero(bad)[0])
            t, i = int(tree_of_int[cat_nodes[j]]), int(local[cat_nodes[j]])
            raise _fail(m, f"categorical split refers to bitset {float(raw_idx[j])}, expected an integer in "
                           f"[0, num_cat={int(nc[j])})", t, i, "threshold",
                        "for categorical splits 'threshold' indexes cat_boundaries")
        cat_sizes[cat_nodes], cat_values = _category_sets(m, tree_of_int[cat_nodes], idx)
    node_cat_sizes = np.zeros(n, dtype=np.int64)
    node_cat_sizes[g_int] = cat_sizes
    cat_offset = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(node_cat_sizes, out=cat_offset[1:])

    if not np.all(np.isfinite(m.leaf_value)):
        j = int(np.flatnonzero(~np.isfinite(m.leaf_value))[0])
        t = int(leaf_tree[j])
        raise _fail(m, f"leaf {j - int(leaf_start[t])} has value {float(m.leaf_value[j])}, leaf values must be finite",
                    t, None, "leaf_value")

    tree_output = (np.arange(T) % K).astype(np.int32)
    value = np.zeros((n, K), dtype=np.float64)
    value[g_leaf, tree_output[leaf_tree]] = m.leaf_value

    def scatter(dtype: Any, fill: Any, internal: npt.NDArray[Any]) -> npt.NDArray[Any]:
        a = np.full(n, fill, dtype=dtype)
        a[g_int] = internal
        return a

    left_g = scatter(np.int32, -1, gl)
    right_g = scatter(np.int32, -1, gr)
    count = None
    if internal_count is not None and m.leaf_count is not None:
        count = scatter(np.float64, 0.0, internal_count.astype(np.float64))
        count[g_leaf] = m.leaf_count

    used_cat = np.zeros(m.max_feature_idx + 1, dtype=bool)
    used_cat[split_feature[is_cat_int]] = True
    schema = Schema(
        features=_features(m, used_cat, feature_names),
        n_outputs=K,
        base_score=(0.0,) * K,
        average=m.average_output,
        input_dtype="float64",
        accumulate_dtype="float64",
        classes=tuple(classes) if classes is not None else None,
        category_rule=CategoryRule.LIGHTGBM,
        source={"library": "lightgbm", "version": m.version, "objective": m.objective or "",
                "content_hash": content_hash},
        **out_schema,
    )
    forest = Forest(
        schema=schema,
        tree_offset=off,
        tree_output=tree_output,
        left=left_g,
        right=right_g,
        feature=scatter(np.int32, -1, split_feature),
        threshold=scatter(np.float64, np.nan, np.where(num, thr, np.nan)),
        missing_left=scatter(bool, False, missing_left),
        missing_zero=scatter(bool, False, missing_zero),
        is_categorical=scatter(bool, False, is_cat_int),
        cat_offset=cat_offset,
        cat_values=cat_values,
        cat_in_set_left=scatter(bool, False, is_cat_int),
        cat_invalid_left=np.zeros(n, dtype=bool),
        value=value,
        count=count,
    )
    return forest.validate()
