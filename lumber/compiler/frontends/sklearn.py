"""scikit-learn frontend: lower fitted tree estimators to a Forest, bit for bit.

Each estimator is lowered so that ``Forest.evaluate`` reproduces the model's own
raw output and summation order:

- DecisionTree*/RandomForest*/ExtraTrees*: leaves hold ``tree_.value`` (class
  fractions for classifiers); forests are averaged after summing tree by tree
  from zero, as ``predict_proba``/``predict`` do. Inputs are compared as float32.
- GradientBoosting*: leaves hold ``learning_rate * value`` (``predict_stages``
  computes that product before adding it), accumulated per output from the
  ``init_`` raw prediction. NaN is rejected, as scikit-learn rejects it.
- HistGradientBoosting*: the predictors' leaves are summed from
  ``_baseline_prediction`` in float64. Categorical splits are expressed on the
  model's input values (before its OrdinalEncoder) with ``CategoryRule.SKLEARN``;
  unknown, negative, non-integer and NaN values follow the missing direction.
  Infinity is accepted only by models without categorical features.
- AdaBoostClassifier (SAMME over decision trees): a leaf holds the vote its tree
  casts, ``w`` for the class the leaf predicts and ``-w / (K - 1)`` for the others,
  divided by the sum of the estimator weights; binary margins are
  ``decision_function`` (sigmoid gives ``predict_proba``), multiclass margins are
  ``decision_function / (K - 1)`` (softmax gives ``predict_proba``). Equal to rounding
  (the division moves from the sum to each vote). SAMME.R and AdaBoostRegressor
  (a weighted median of the trees, not a sum) are refused.
- IsolationForest: a leaf holds ``depth + c(n_samples_in_leaf) - 1`` (root depth
  1, as ``compute_node_depths``), trees are averaged and ``PostTransform.ISOLATION``
  maps mean path lengths to ``score_samples``.

Node ids are scikit-learn's own, so ``forest.apply(X)[:, t]`` equals the
estimator's ``apply``.
"""

from __future__ import annotations

import hashlib
import warnings
from typing import Any, Sequence

import numpy as np
import numpy.typing as npt

from lumber.ir import (
    CategoryRule, Feature, FeatureKind, Forest, InputDataError, ModelFormatError, PostTransform, Schema, Task,
    UnsupportedModelError,
)
from lumber.ir.assemble import TreeArrays, concat_trees

SUPPORTED = (
    "DecisionTreeClassifier", "DecisionTreeRegressor", "ExtraTreeClassifier", "ExtraTreeRegressor",
    "RandomForestClassifier", "RandomForestRegressor", "ExtraTreesClassifier", "ExtraTreesRegressor",
    "GradientBoostingClassifier", "GradientBoostingRegressor",
    "HistGradientBoostingClassifier", "HistGradientBoostingRegressor", "IsolationForest",
    "AdaBoostClassifier (SAMME, over decision trees)",
)

_LINKS = {  # sklearn._loss link class -> (post transform, sigmoid alpha)
    "IdentityLink": (PostTransform.IDENTITY, 1.0),
    "LogLink": (PostTransform.EXP, 1.0),
    "LogitLink": (PostTransform.SIGMOID, 1.0),
    "HalfLogitLink": (PostTransform.SIGMOID, 2.0),
    "MultinomialLogit": (PostTransform.SOFTMAX, 1.0),
}


class _Digest:
    """Content hash of the source arrays, each prefixed by its dtype and shape.

    Equals ``content_hash(b"".join(parts))`` (sha256), fed incrementally so big
    forests are never copied into one bytes object.
    """

    def __init__(self, model: Any) -> None:
        self._sha = hashlib.sha256(type(model).__name__.encode())

    def add(self, *items: Any) -> None:
        for item in items:
            a = np.ascontiguousarray(item)
            if a.dtype == object:
                a = np.asarray([str(v) for v in a.reshape(-1)], dtype=str)
            self._sha.update(f"{a.dtype.str}{a.shape}".encode())
            self._sha.update(a.reshape(-1).view(np.uint8).data if a.size else b"")

    def hexdigest(self) -> str:
        return self._sha.hexdigest()


# -- entry point --------------------------------------------------------------------------


def from_sklearn(model: Any, *, feature_names: Sequence[str] | None = None) -> Forest:
    """A fitted scikit-learn tree estimator -> a validated :class:`~lumber.ir.Forest`.

    ``feature_names`` overrides ``feature_names_in_`` (one name per input column).
    """
    from sklearn import ensemble as E
    from sklearn import tree as T

    lowerers: list[tuple[tuple[type, ...], Any]] = [
        ((T.DecisionTreeClassifier, T.DecisionTreeRegressor), _lower_single_tree),
        ((E.RandomForestClassifier, E.RandomForestRegressor, E.ExtraTreesClassifier, E.ExtraTreesRegressor),
         _lower_random_forest),
        ((E.GradientBoostingClassifier, E.GradientBoostingRegressor), _lower_gradient_boosting),
        ((E.HistGradientBoostingClassifier, E.HistGradientBoostingRegressor), _lower_hist_gradient_boosting),
        ((E.IsolationForest,), _lower_isolation_forest),
        ((E.AdaBoostClassifier,), _lower_adaboost),
        ((E.AdaBoostRegressor,), _refuse_adaboost_regressor),
    ]
    for classes, lower in lowerers:
        if isinstance(model, classes):
            _check_fitted(model)
            names = _feature_names(model, feature_names)
            digest = _Digest(model)
            forest: Forest = lower(model, names, digest)
            return forest
    raise _unsupported(model)


def _unsupported(model: Any) -> UnsupportedModelError:
    name = type(model).__name__
    what = f"{type(model).__module__}.{name}"
    if name == "Pipeline" or hasattr(model, "steps"):
        last = type(model.steps[-1][1]).__name__ if getattr(model, "steps", None) else "?"
        return UnsupportedModelError(
            f"cannot lower a {what}: only the tree model itself can be lowered (last step: {last})",
            "pass the final estimator (pipeline[-1]) and apply the earlier steps to the data yourself "
            "(pipeline[:-1].transform(X))",
            f"supported estimators: {', '.join(SUPPORTED)}")
    return UnsupportedModelError(f"cannot lower a {what}", f"supported estimators: {', '.join(SUPPORTED)}")


def _check_fitted(model: Any) -> None:
    from sklearn.exceptions import NotFittedError
    from sklearn.utils.validation import check_is_fitted

    try:
        check_is_fitted(model)
    except NotFittedError:
        raise ModelFormatError(f"{type(model).__name__} is not fitted",
                               "call fit() on the estimator before lowering it") from None
    if not hasattr(model, "n_features_in_"):
        raise ModelFormatError(f"{type(model).__name__} has no n_features_in_: it was not fitted by "
                               "scikit-learn >= 1.0")


def _feature_names(model: Any, override: Sequence[str] | None) -> list[str]:
    n = int(model.n_features_in_)
    if override is not None:
        names = [str(s) for s in override]
        if len(names) != n:
            raise InputDataError(f"feature_names has {len(names)} names but the model reads {n} features",
                                 "pass one name per input column, in column order")
    elif hasattr(model, "feature_names_in_"):
        names = [str(s) for s in model.feature_names_in_]
    else:
        names = [f"f{i}" for i in range(n)]
    dup = sorted({s for s in names if names.count(s) > 1})
    if dup:
        raise InputDataError(f"duplicate feature names: {', '.join(dup[:5])}", "feature names must be unique")
    return names


def _schema(model: Any, names: list[str], digest: _Digest, *, features: tuple[Feature, ...] | None = None,
            **fields: Any) -> Schema:
    import sklearn

    objective = getattr(model, "loss", None) or getattr(model, "criterion", None) or ""
    source = {"library": "scikit-learn", "version": sklearn.__version__, "model_type": type(model).__name__,
              "content_hash": digest.hexdigest(), "objective": str(objective)}
    feats = features if features is not None else tuple(Feature(s) for s in names)
    return Schema(features=feats, source=source, **fields)


def _classes(model: Any) -> tuple[Any, ...]:
    classes = tuple(np.asarray(model.classes_).tolist())
    if len(classes) < 2:
        raise UnsupportedModelError(f"{type(model).__name__} was fitted on a single class {classes!r}",
                                    "a one-class classifier predicts a constant; fit on at least two classes")
    return classes


# -- scikit-learn Tree objects ---------------------------------------------------------------


def _lower_tree(tree: Any, value: npt.NDArray[np.float64], t: int, *, output: int = -1,
                feature_map: npt.NDArray[np.int64] | None = None) -> TreeArrays:
    """One ``sklearn.tree._tree.Tree`` with its own node ids (children follow parents)."""
    left = np.asarray(tree.children_left, dtype=np.int64)
    right = np.asarray(tree.children_right, dtype=np.int64)
    n = left.shape[0]
    internal = left >= 0
    ids = np.arange(n)
    bad = internal & ((left <= ids) | (right <= ids) | (left >= n) | (right >= n))
    if bad.any():
        raise ModelFormatError(f"tree {t}, node {int(np.flatnonzero(bad)[0])}: child ids do not follow the parent",
                               "the estimator's tree_ arrays are inconsistent")
    feature = np.where(internal, np.asarray(tree.feature, dtype=np.int64), -1)
    if feature_map is not None:
        feature = np.where(internal, feature_map[np.maximum(feature, 0)], -1)
    return TreeArrays(
        left=np.where(internal, left, -1), right=np.where(internal, right, -1), feature=feature,
        threshold=np.where(internal, np.asarray(tree.threshold, dtype=np.float64), np.nan),
        missing_left=np.asarray(tree.missing_go_to_left, dtype=bool) & internal,
        value=value, output=output, count=np.asarray(tree.weighted_n_node_samples, dtype=np.float64),
    )


def _tree_digest(digest: _Digest, tree: Any) -> None:
    digest.add(tree.children_left, tree.children_right, tree.feature, tree.threshold,
               tree.missing_go_to_left, tree.value)


def _allow_nan(estimator: Any) -> bool:
    """Whether the tree estimator's ``predict`` accepts NaN (and routes it by ``missing_go_to_left``)."""
    support = getattr(estimator, "_support_missing_values", None)
    return bool(support(np.zeros((1, 1), dtype=np.float32))) if support is not None else False


def _tree_task(model: Any) -> dict[str, Any]:
    """Task fields of a DecisionTree*/forest; rejects multi-output classifiers."""
    from sklearn.base import is_classifier

    if is_classifier(model):
        if int(model.n_outputs_) != 1:
            raise UnsupportedModelError(
                f"{type(model).__name__} has {model.n_outputs_} outputs: multi-output classifiers are not supported",
                "fit one classifier per target column")
        classes = _classes(model)
        return {"task": Task.BINARY if len(classes) == 2 else Task.MULTICLASS, "n_outputs": len(classes),
                "classes": classes}
    return {"task": Task.REGRESSION, "n_outputs": int(model.n_outputs_)}


def _tree_values(tree: Any, fields: dict[str, Any]) -> npt.NDArray[np.float64]:
    value = np.asarray(tree.value, dtype=np.float64)
    if fields["task"] == Task.REGRESSION:
        return value[:, :, 0]
    return value[:, 0, : fields["n_outputs"]]


def _lower_single_tree(model: Any, names: list[str], digest: _Digest) -> Forest:
    fields = _tree_task(model)
    tree = model.tree_
    _tree_digest(digest, tree)
    if "classes" in fields:
        digest.add(np.asarray(model.classes_))
    schema = _schema(model, names, digest, base_score=(0.0,) * fields["n_outputs"], input_dtype="float32",
                     allow_nan=_allow_nan(model), allow_inf=False, **fields)
    return concat_trees(schema, [_lower_tree(tree, _tree_values(tree, fields), 0)])


def _lower_random_forest(model: Any, names: list[str], digest: _Digest) -> Forest:
    fields = _tree_task(model)
    trees = []
    for t, est in enumerate(model.estimators_):
        _tree_digest(digest, est.tree_)
        trees.append(_lower_tree(est.tree_, _tree_values(est.tree_, fields), t))
    if "classes" in fields:
        digest.add(np.asarray(model.classes_))
    schema = _schema(model, names, digest, base_score=(0.0,) * fields["n_outputs"], average=True,
                     input_dtype="float32", allow_nan=_allow_nan(model.estimators_[0]), allow_inf=False,
                     **fields)
    return concat_trees(schema, trees)


# -- AdaBoost -----------------------------------------------------------------------------------


def _lower_adaboost(model: Any, names: list[str], digest: _Digest) -> Forest:
    """SAMME: ``decision_function = sum_t vote_t / sum(w)`` with ``vote_t = w_t`` on the tree's class."""
    from sklearn.tree import DecisionTreeClassifier, ExtraTreeClassifier

    algorithm = getattr(model, "algorithm", "SAMME")
    if algorithm not in ("SAMME", "deprecated"):
        raise UnsupportedModelError(f"AdaBoostClassifier(algorithm={algorithm!r}) is not supported",
                                    "SAMME.R was removed in scikit-learn 1.6; refit with algorithm='SAMME'")
    classes = _classes(model)
    K = len(classes)
    weights = np.asarray(model.estimator_weights_, dtype=np.float64)
    total = float(weights.sum())
    if not (np.isfinite(total) and total > 0):
        raise ModelFormatError(f"AdaBoostClassifier: estimator_weights_ sum to {total!r}",
                               "the boosting stopped before any useful estimator; refit")
    trees = []
    for t, est in enumerate(model.estimators_):
        if not isinstance(est, (DecisionTreeClassifier, ExtraTreeClassifier)):
            raise UnsupportedModelError(f"AdaBoostClassifier: estimator {t} is a {type(est).__name__}",
                                        "lumber lowers AdaBoost over DecisionTreeClassifier/ExtraTreeClassifier")
        if not np.array_equal(np.asarray(est.classes_), np.asarray(model.classes_)):
            raise ModelFormatError(f"AdaBoostClassifier: estimator {t} knows classes {est.classes_.tolist()!r:.60}, "
                                   f"the ensemble {model.classes_.tolist()!r:.60}")
        tree = est.tree_
        _tree_digest(digest, tree)
        w = float(weights[t])
        picked = np.argmax(np.asarray(tree.value, dtype=np.float64)[:, 0, :K], axis=1)  # as est.predict
        vote = np.where(np.arange(K)[None, :] == picked[:, None], w, -1 / (K - 1) * w)
        if K == 2:  # decision_function: -col0 + col1, both divided by sum(w)
            trees.append(_lower_tree(tree, 2 * vote[:, 1] / total, t, output=0))
        else:
            trees.append(_lower_tree(tree, vote / total / (K - 1), t))
    digest.add(weights, np.asarray(model.classes_))
    fields: dict[str, Any] = dict(task=Task.BINARY if K == 2 else Task.MULTICLASS, n_outputs=1 if K == 2 else K,
                                  classes=classes, decision="margin",
                                  post_transform=PostTransform.SIGMOID if K == 2 else PostTransform.SOFTMAX)
    schema = _schema(model, names, digest, base_score=(0.0,) * fields["n_outputs"], input_dtype="float32",
                     allow_nan=False, allow_inf=False, **fields)
    return concat_trees(schema, trees)


def _refuse_adaboost_regressor(model: Any, names: list[str], digest: _Digest) -> Forest:
    raise UnsupportedModelError(
        "AdaBoostRegressor predicts the weighted median of its trees' predictions, not a sum of leaf values",
        "lumber's IR adds tree outputs; a median is not such a sum, so it cannot be expressed exactly "
        "(GradientBoostingRegressor or HistGradientBoostingRegressor boost additively)")


# -- gradient boosting ------------------------------------------------------------------------


def _link_fields(model: Any) -> dict[str, Any]:
    link = type(model._loss.link).__name__
    if link not in _LINKS:
        raise UnsupportedModelError(f"{type(model).__name__}: loss {model.loss!r} uses link {link}, "
                                    "which lumber cannot express",
                                    f"supported links: {', '.join(sorted(_LINKS))}")
    post, alpha = _LINKS[link]
    return {"post_transform": post, "sigmoid_alpha": alpha}


def _classifier_fields(model: Any, K: int) -> dict[str, Any]:
    from sklearn.base import is_classifier

    if not is_classifier(model):
        return {"task": Task.REGRESSION}
    classes = _classes(model)
    return {"task": Task.BINARY if K == 1 else Task.MULTICLASS, "classes": classes}


def _gb_init_raw(model: Any) -> npt.NDArray[np.float64]:
    """The constant raw prediction of ``init_`` (what ``_raw_predict_init`` returns for every row)."""
    from sklearn.dummy import DummyClassifier, DummyRegressor

    init = model.init_
    constant = isinstance(init, str) and init == "zero"
    constant |= isinstance(init, DummyRegressor)
    constant |= isinstance(init, DummyClassifier) and init.strategy != "stratified"
    if not constant:
        raise UnsupportedModelError(
            f"{type(model).__name__}: init estimator {type(init).__name__} gives a prediction that depends on "
            "the input, which a Forest cannot hold",
            "refit with init=None (the constant prior) or init='zero'")
    X0 = np.zeros((1, int(model.n_features_in_)), dtype=np.float32)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        raw = np.asarray(model._raw_predict_init(X0), dtype=np.float64)
    return raw[0]


def _lower_gradient_boosting(model: Any, names: list[str], digest: _Digest) -> Forest:
    stages = model.estimators_
    K = int(stages.shape[1])
    scale = float(model.learning_rate)
    base = _gb_init_raw(model)
    digest.add(np.float64(scale), base)
    trees = []
    for i in range(stages.shape[0]):
        for k in range(K):
            tree = stages[i, k].tree_
            _tree_digest(digest, tree)
            # predict_stages adds ``scale * value[leaf]``: the same product, rounded once
            value = scale * np.asarray(tree.value, dtype=np.float64)[:, 0, 0]
            trees.append(_lower_tree(tree, value, i * K + k, output=k))
    fields = _classifier_fields(model, K)
    if "classes" in fields:
        digest.add(np.asarray(model.classes_))
    schema = _schema(model, names, digest, n_outputs=K, base_score=tuple(float(b) for b in base),
                     input_dtype="float32", allow_nan=False, allow_inf=False,
                     decision="margin_ge" if "classes" in fields else "proba", **_link_fields(model), **fields)
    return concat_trees(schema, trees)


# -- histogram gradient boosting ----------------------------------------------------------------


def _bits(bitsets: npt.NDArray[np.uint32]) -> npt.NDArray[np.bool_]:
    """``(m, 8)`` uint32 bitsets -> ``(m, 256)`` membership (bit j of word w is code 32*w + j)."""
    b = np.ascontiguousarray(bitsets, dtype="<u4").view(np.uint8)
    return np.unpackbits(b, axis=1, bitorder="little").astype(bool)


def _category_values(model: Any, name: str, cats: npt.NDArray[Any]) -> tuple[npt.NDArray[np.int64], Feature]:
    """Code -> input value of one encoded feature, and its Feature.

    Numeric categories must be non-negative integers (they are matched exactly);
    text categories become labels and the input carries their codes.
    """
    cats = np.asarray(cats)
    if cats.size and cats.dtype == object:
        isnull = np.array([v is None or (isinstance(v, float) and np.isnan(v)) for v in cats])
        cats = cats[~isnull]
    elif cats.size and cats.dtype.kind == "f":
        cats = cats[~np.isnan(cats)]
    if cats.dtype.kind in "biuf" or (cats.dtype == object and all(
            isinstance(v, (int, float, np.number)) and not isinstance(v, bool) for v in cats)):
        v = cats.astype(np.float64)
        ok = np.isfinite(v) & (v >= 0) & (v < 2.0**32) & (np.trunc(v) == v)
        if not ok.all():
            bad = ", ".join(repr(x) for x in cats[~ok][:5].tolist())
            raise UnsupportedModelError(
                f"{type(model).__name__}: categorical feature '{name}' has categories that are not "
                f"non-negative integers ({bad})",
                "lumber matches numeric categories as integer codes: encode them as 0, 1, 2, ... or as text")
        return v.astype(np.int64), Feature(name, FeatureKind.CATEGORICAL)
    labels = tuple(str(c) if not isinstance(c, (str, int, float, bool)) else c for c in cats.tolist())
    return np.arange(len(labels), dtype=np.int64), Feature(name, FeatureKind.CATEGORICAL, labels)


def _hgb_layout(model: Any, names: list[str]) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64],
                                                       list[Feature]]:
    """Input column of each predictor feature, the code -> input value table (``(n, 256)``, -1 where
    undefined; all -1 for features without an encoder), and the features."""
    n = int(model.n_features_in_)
    column_of = np.arange(n, dtype=np.int64)
    features = [Feature(s) for s in names]
    values = np.full((n, 256), -1, dtype=np.int64)
    pre = getattr(model, "_preprocessor", None)
    if pre is None:
        return column_of, values, features
    # the ColumnTransformer puts the encoded categorical columns first
    for tname, _, cols in pre.transformers_:
        if tname == "remainder" or tname not in pre.output_indices_:
            continue
        cols = np.asarray(cols)
        idx = np.flatnonzero(cols) if cols.dtype == bool else cols.astype(np.int64)
        sl = pre.output_indices_[tname]
        column_of[sl] = idx
    enc = pre.named_transformers_["encoder"]
    start = pre.output_indices_["encoder"].start
    for k, cats in enumerate(enc.categories_):
        r = start + k
        col = int(column_of[r])
        table, features[col] = _category_values(model, names[col], cats)
        if table.shape[0] > 256:
            raise ModelFormatError(f"{type(model).__name__}: feature '{names[col]}' has {table.shape[0]} "
                                   "categories; HistGradientBoosting allows at most 255")
        values[r, : table.shape[0]] = table
    return column_of, values, features


def _lower_predictor(pred: Any, t: int, k: int, column_of: npt.NDArray[np.int64],
                     values: npt.NDArray[np.int64], known: npt.NDArray[np.bool_],
                     f_idx_map: npt.NDArray[np.int64]) -> TreeArrays:
    nodes = pred.nodes
    n = nodes.shape[0]
    leaf = nodes["is_leaf"].astype(bool)
    internal = ~leaf
    left = np.where(internal, nodes["left"].astype(np.int64), -1)
    right = np.where(internal, nodes["right"].astype(np.int64), -1)
    ids = np.arange(n)
    bad = internal & ((left <= ids) | (right <= ids) | (left >= n) | (right >= n))
    if bad.any():
        raise ModelFormatError(f"predictor {t}, node {int(np.flatnonzero(bad)[0])}: child ids do not follow "
                               "the parent", "the estimator's _predictors arrays are inconsistent")
    fr = nodes["feature_idx"].astype(np.int64)
    missing_left = nodes["missing_go_to_left"].astype(bool) & internal
    is_cat = nodes["is_categorical"].astype(bool) & internal
    categories: dict[int, npt.NDArray[np.int64]] = {}
    cat_nodes = np.flatnonzero(is_cat)
    if cat_nodes.size:
        cf = fr[cat_nodes]
        if not (values[cf] >= 0).any(axis=1).all():
            raise UnsupportedModelError(f"predictor {t}: categorical split without the model's category encoder",
                                        "refit the model with this scikit-learn version")
        in_left = _bits(pred.raw_left_cat_bitsets[nodes["bitset_idx"][cat_nodes]])
        seen = known[f_idx_map[cf]]
        mleft = missing_left[cat_nodes]
        # left iff in the left set; else right iff a known category; else the missing side.
        # Missing-left: the set {known \ left} goes right. Missing-right: the left set goes left.
        members = np.where(mleft[:, None], seen & ~in_left, in_left)
        rows, codes = np.nonzero(members)  # row-major: each node's codes in ascending order
        mapped = values[cf[rows], codes]
        if (mapped < 0).any():
            j = int(np.flatnonzero(mapped < 0)[0])
            raise ModelFormatError(f"predictor {t}, node {int(cat_nodes[rows[j]])}: category code {int(codes[j])} "
                                   "is not a known category of its feature")
        parts = np.split(mapped, np.cumsum(members.sum(axis=1))[:-1])
        categories = dict(zip(cat_nodes.tolist(), parts))
    return TreeArrays(
        left=left, right=right, feature=np.where(internal, column_of[np.where(internal, fr, 0)], -1),
        threshold=np.where(internal & ~is_cat, nodes["num_threshold"].astype(np.float64), np.nan),
        missing_left=missing_left, value=np.where(leaf, nodes["value"].astype(np.float64), 0.0), output=k,
        is_categorical=is_cat, categories=categories, cat_in_set_left=is_cat & ~missing_left,
        cat_invalid_left=is_cat & missing_left, count=nodes["count"].astype(np.float64),
    )


def _lower_hist_gradient_boosting(model: Any, names: list[str], digest: _Digest) -> Forest:
    column_of, values, features = _hgb_layout(model, names)
    K = int(model.n_trees_per_iteration_)
    base = np.asarray(model._baseline_prediction, dtype=np.float64).reshape(-1)
    if base.shape[0] != K:
        raise ModelFormatError(f"{type(model).__name__}: _baseline_prediction has {base.shape[0]} entries "
                               f"for {K} trees per iteration")
    known = np.zeros((0, 256), dtype=bool)
    f_idx_map = np.zeros(0, dtype=np.int64)
    # sklearn accepts infinity in numerical columns but its OrdinalEncoder rejects it in categorical ones;
    # the schema has one flag, so a model with categorical features refuses infinity everywhere.
    encoded = bool((values >= 0).any())
    if encoded:
        known_bits, fmap = model._bin_mapper.make_known_categories_bitsets()
        known, f_idx_map = _bits(known_bits), np.asarray(fmap, dtype=np.int64)
    digest.add(base, column_of, known, values)
    trees = []
    for i, stage in enumerate(model._predictors):
        if len(stage) != K:
            raise ModelFormatError(f"{type(model).__name__}: iteration {i} has {len(stage)} predictors, expected {K}")
        for k, pred in enumerate(stage):
            digest.add(pred.nodes, pred.raw_left_cat_bitsets)
            trees.append(_lower_predictor(pred, i * K + k, k, column_of, values, known, f_idx_map))
    fields = _classifier_fields(model, K)
    if "classes" in fields:
        digest.add(np.asarray(model.classes_))
    schema = _schema(model, names, digest, features=tuple(features), n_outputs=K,
                     base_score=tuple(float(b) for b in base), input_dtype="float64",
                     category_rule=CategoryRule.SKLEARN, allow_nan=True, allow_inf=not encoded,
                     decision="margin" if "classes" in fields else "proba", **_link_fields(model), **fields)
    return concat_trees(schema, trees)


# -- isolation forest ---------------------------------------------------------------------------


def _lower_isolation_forest(model: Any, names: list[str], digest: _Digest) -> Forest:
    from sklearn.ensemble._iforest import _average_path_length

    n_features = int(model.n_features_in_)
    max_samples = int(getattr(model, "_max_samples", model.max_samples_))
    c = float(_average_path_length([max_samples])[0])
    if not c > 0:
        raise UnsupportedModelError(f"IsolationForest with max_samples_={max_samples} isolates nothing "
                                    "(c(max_samples) = 0)", "refit with max_samples >= 2")
    subsample = int(model._max_features) != n_features  # as _compute_chunked_score_samples decides
    depths = getattr(model, "_decision_path_lengths", None)
    avg_len = getattr(model, "_average_path_length_per_tree", None)
    trees = []
    for t, (est, feats) in enumerate(zip(model.estimators_, model.estimators_features_)):
        tree = est.tree_
        d = depths[t] if depths is not None else tree.compute_node_depths()
        a = avg_len[t] if avg_len is not None else _average_path_length(tree.n_node_samples)
        # _parallel_compute_tree_depths adds ``depth + avg_path_length - 1.0`` per tree
        value = (np.asarray(d, dtype=np.float64) + np.asarray(a, dtype=np.float64)) - 1.0
        fmap = np.asarray(feats, dtype=np.int64) if subsample else None
        _tree_digest(digest, tree)
        digest.add(value, np.asarray(feats, dtype=np.int64))
        trees.append(_lower_tree(tree, value, t, feature_map=fmap))
    offset = float(model.offset_)
    digest.add(np.float64(c), np.float64(offset))
    schema = _schema(model, names, digest, task=Task.ANOMALY, n_outputs=1, base_score=(0.0,), average=True,
                     post_transform=PostTransform.ISOLATION, isolation_c=c, isolation_offset=offset,
                     input_dtype="float32", allow_nan=True, allow_inf=True)
    return concat_trees(schema, trees)
