"""The decision sought: class-score rows for classifiers, an interval row for regressors.

Scores are the IR's raw margins ``m_k`` (``Forest.evaluate``): a sum of leaf
values plus ``base_score`` for boosting, divided by the tree count for averaged
forests (random-forest class fractions). Every post-transform lumber knows is
increasing per output (softmax preserves the order), so the predicted class is
the first argmax of ``m`` -- or, with a single output, class 1 iff ``m`` is
above the transform's inverse at 0.5 (``>= 0`` or ``> 0`` for ``Schema.decision``
``margin_ge`` / ``margin``), or at the user's cutoff (``Schema.cutoff``: a
probability or a margin) when the schema carries one. The margin ``eps`` is relative to the
largest coefficient of the row; ties a library resolves in the target's favour
are allowed first (``eps = 0``) and made strict only if verification fails.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from lumber.ir import Forest, PostTransform, Schema, Target, UnsupportedModelError
from lumber.ir.interp import trees_per_output

from .model import LinExpr, MilpModel
from .trees import ForestEncoding

FloatArray = npt.NDArray[np.float64]

MARGIN_FLOOR = 1e-6
"""Scores below ``eps * 1e-6`` are noise for every library's float arithmetic: the margin never drops below it."""


def target_specs(targets: Target) -> list[Target]:
    """One MILP target per acceptable class (or the interval) of a resolved target
    (:func:`lumber.ir.resolve_target`); several mean "any of these" (the best one wins)."""
    return targets.each()


def _inverse(pt: PostTransform, p: float, alpha: float) -> float:
    """Margin at which the post-transform reaches ``p``."""
    if pt == PostTransform.IDENTITY:
        return p
    if pt == PostTransform.SIGMOID:
        if p <= 0.0:
            return -np.inf
        if p >= 1.0:
            return np.inf
        return float(np.log(p / (1.0 - p)) / alpha)
    if pt == PostTransform.EXP:
        return float(np.log(p)) if p > 0 else -np.inf
    raise UnsupportedModelError(f"post-transform {pt.name.lower()} has no counterfactual target form")


def decision_threshold(s: Schema) -> float:
    """The margin where a single-output classifier switches to class 1 (the schema's ``cutoff``, else
    ``Schema.decision``)."""
    if s.cutoff is not None:
        c = s.cutoff
        return c.value if c.on == "margin" else _inverse(s.post_transform, c.value, s.sigmoid_alpha)
    if getattr(s, "decision", "proba") in ("margin", "margin_ge"):
        return 0.0
    return _inverse(s.post_transform, 0.5, s.sigmoid_alpha)


def ties_go_up(s: Schema) -> bool:
    """A margin exactly at :func:`decision_threshold` decides class 1 (``>=``), else class 0 (``>``)."""
    return s.cutoff.inclusive if s.cutoff is not None else s.decision == "margin_ge"


def margin_terms(enc: ForestEncoding, k: int) -> tuple[npt.NDArray[np.int64], FloatArray, float, npt.NDArray[np.int64]]:
    """Columns, coefficients, constant and tree of each term of margin ``m_k`` over the encoded flows."""
    f = enc.forest
    leaves, cols = enc.leaf_terms()
    div = trees_per_output(f)[k] if f.schema.average else 1.0
    div = max(div, 1.0)
    fixed = enc.fixed_leaf[enc.fixed_leaf >= 0]
    const = (f.schema.base_score[k] + float(f.value[fixed, k].sum())) / div
    return cols, f.value[leaves, k] / div, const, f.node_tree[leaves].astype(np.int64)


def add_target_rows(enc: ForestEncoding, spec: Target, model: MilpModel, eps: float, tie_eps: float) -> None:
    """Rows forcing the encoded forest to meet ``spec`` with relative margin ``eps``."""
    s = enc.forest.schema
    if spec.kind == "interval":
        assert spec.interval is not None
        lo = _inverse(s.post_transform, spec.interval[0], s.sigmoid_alpha) if np.isfinite(spec.interval[0]) else -np.inf
        hi = _inverse(s.post_transform, spec.interval[1], s.sigmoid_alpha) if np.isfinite(spec.interval[1]) else np.inf
        scaled_row(model, *margin_terms(enc, 0), lo, hi, tie_eps)
        return
    if s.n_outputs == 1:
        theta = decision_threshold(s)
        up_ties = ties_go_up(s)  # class 1 iff m >= theta; otherwise iff m > theta
        if spec.index == 1:
            scaled_row(model, *margin_terms(enc, 0), theta, np.inf, tie_eps if up_ties else eps)
        else:
            scaled_row(model, *margin_terms(enc, 0), -np.inf, theta, eps if up_ties else tie_eps)
        return
    if s.cutoff is not None:  # a binary classifier with one score per class: P(class 1) against the cutoff
        _two_output_cutoff_row(enc, spec, model, eps, tie_eps)
        return
    c = spec.index
    assert c is not None, "one class per MILP target (Target.each)"
    cols, ks, bs, trees = margin_terms(enc, c)
    for o in range(s.n_outputs):
        if o != c:
            _, ko, bo, _ = margin_terms(enc, o)
            scaled_row(model, cols, ks - ko, bs - bo, trees, 0.0, np.inf, eps if o < c else tie_eps)


def _two_output_cutoff_row(enc: ForestEncoding, spec: Target, model: MilpModel, eps: float, tie_eps: float) -> None:
    """The cutoff row of a two-output binary classifier: ``m_1`` (class fractions, identity) or
    ``m_1 - m_0`` (softmax) against the cutoff's margin."""
    s = enc.forest.schema
    assert s.cutoff is not None
    cols, k1, b1, trees = margin_terms(enc, 1)
    if s.post_transform == PostTransform.IDENTITY and s.cutoff.on == "probability":
        coef, const, theta = k1, b1, s.cutoff.value
    elif s.post_transform == PostTransform.SOFTMAX and s.cutoff.on == "probability":
        _, k0, b0, _ = margin_terms(enc, 0)
        coef, const, theta = k1 - k0, b1 - b0, _inverse(PostTransform.SIGMOID, s.cutoff.value, 1.0)
    else:
        raise UnsupportedModelError(f"a {s.cutoff.on} cutoff on a {s.post_transform.name.lower()} model with one "
                                    "score per class has no counterfactual target form")
    up_ties = s.cutoff.inclusive
    if spec.index == 1:
        scaled_row(model, cols, coef, const, trees, theta, np.inf, tie_eps if up_ties else eps)
    else:
        scaled_row(model, cols, coef, const, trees, -np.inf, theta, eps if up_ties else tie_eps)


def scaled_row(model: MilpModel, cols: npt.NDArray[np.int64], coef: FloatArray, const: float,
               trees: npt.NDArray[np.int64], lo: float, hi: float, eps: float) -> None:
    """``lo + eps*S <= const + coef @ y <= hi - eps*S``, divided by ``S = max|coef|``.

    A row no choice of leaves can meet (one leaf per tree) marks the model infeasible
    instead of reaching the solver with bounds it would read as infinite.
    """
    S = float(np.abs(coef).max()) if coef.size else 0.0
    m = eps * max(S, MARGIN_FLOOR)
    lo2 = lo + m if np.isfinite(lo) else -np.inf
    hi2 = hi - m if np.isfinite(hi) else np.inf
    if coef.size:
        starts = np.flatnonzero(np.r_[True, trees[1:] != trees[:-1]])
        amax = const + float(np.maximum.reduceat(coef, starts).sum())
        amin = const + float(np.minimum.reduceat(coef, starts).sum())
    else:
        amax = amin = const
    if S == 0.0:  # a constant score
        model.infeasible_constant_rows += 0 if lo2 <= const <= hi2 else 1
        return
    if amax < lo2 or amin > hi2:
        model.infeasible_constant_rows += 1
        return
    if amin >= lo2 and amax <= hi2:
        return
    model.add_expr_row(LinExpr(0.0, [int(c) for c in cols], [float(v) for v in coef / S]),
                       (lo2 - const) / S, (hi2 - const) / S)


def forest_meets(forest: Forest, spec: Target, X: FloatArray) -> npt.NDArray[np.bool_]:
    """Target check through the IR's reference semantics."""
    return spec.satisfied(forest.schema.decide(forest.evaluate(X)))
