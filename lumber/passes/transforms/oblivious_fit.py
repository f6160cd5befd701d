"""Quality-bounded translation (the oblivious paper's formula 5): a compact oblivious ensemble fitted to a forest.

Exact re-composition reproduces every monomial of the source polynomial, so a
500 x 63 model needs thousands of tables. Formula 5 trades that for a price:
minimise the squared error to the source margins plus ``lambda`` per tree. This
module solves it greedily, the way CatBoost grows models: gradient boosting of
symmetric trees on the residual ``source margin - current margin``.

* Candidate levels are the source's own conditions: ``x > t`` for every
  threshold ``t`` the forest tests on the feature (with the NaN bit chosen by
  the fit), and for categorical features the forest's own category sets. So
  every table level is a union of source cells and the result compiles to
  tables exactly (the ``quantize`` pass and the table backends unchanged).
* Rows: the training rows, jittered copies moved one cell across a threshold on
  a few features ("samples near thresholds") and mixed rows (a training row with
  some features taken from other training rows), all labelled by the source
  model itself: no labels are needed, the fit sees the borders where the source
  changes, and it sees points the source was not trained on. A boosted forest
  memorises its training rows (credit 500 x 63: training AUC 0.985, test 0.754),
  so its margins there are not the margins new rows get; fitted to training rows
  alone the approximation is 2.5x closer to the source on them than on new rows.
* Split search: one histogram of (table row, feature bin) per level for all
  features at once (``np.bincount``), prefix sums give every threshold's gain.
* Stopping: on a holdout of the fitting rows, the number of trees ``T`` that
  minimises ``MSE(T) / var + lambda * T`` (formula 5 with the error in units
  of the margin variance); growth stops when ``patience`` trees bring less
  than their price, at ``max_trees``, after ``time_budget`` seconds, or when a ``checkpoint`` says
  longer prefixes cannot pay (the tolerance search: they would be no faster than a form it has).

The result is lossy by construction. Callers state a tolerance and check it on
validation rows the fit never saw (:mod:`lumber.compiler.tolerance`). As a pass,
``fit-oblivious{...}`` (options: the :class:`FitOptions` fields) turns a Forest
into the fitted ObliviousEnsemble and reports the fit and, given validation rows,
its |margin change| and decision agreement there.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field, replace
from typing import Any, Callable, ClassVar

import numpy as np
import numpy.typing as npt

from lumber.ir import CompileError, Forest, ObliviousEnsemble, Task
from lumber.ir.interp import category_codes, prepare_input
from lumber.ir.oblivious import INVALID_CODE

from ..base import PassContext, PassReport, Transform
from .polynomial.to_polynomial import canonical_thresholds


@dataclass(frozen=True)
class FitOptions:
    """Knobs of the formula-5 fit (defaults suit 100 x 16 to 500 x 63 boosted models)."""

    depth: int = 8
    """Levels per table (2^depth rows)."""
    max_trees: int = 1500
    learning_rate: float = 0.3
    l2: float = 1.0
    """Ridge on leaf values (CatBoost's l2_leaf_reg): tables rows with few samples stay near 0."""
    tree_price: float = 2e-6
    """``lambda`` of formula 5: the holdout error (relative to the margin variance) one tree must buy."""
    patience: int = 40
    samples: float = 0.5
    """Jittered copies per training row (rows moved one cell across a threshold). Adult and credit 500 x 63 at
    250 trees: 0.5 fits the validation rows as well as 2 (mean |error| 0.41 against 0.43) at half the rows."""
    jitter_features: int = 2
    """Features moved per jittered copy."""
    mixed: float = 3.0
    """Mixed rows per training row: a random training row with a share ``mix_share`` of its features taken from
    other random training rows (each feature from its own row). New points inside the data's range, where the
    source's margins are those of rows it never saw. Credit 500 x 63, 300 trees: 0 -> 3 mixed rows per row cut
    the rows the cascade sends to the forest from 46% to 24% of test rows."""
    mix_share: float = 0.3
    """Share of a mixed row's features replaced (0.2 and 0.5 fitted new rows worse on credit)."""
    rows_per_tree: int = 40_000
    """Rows the split search of one tree reads (a random subset; leaf values use every row)."""
    holdout: float = 0.1
    max_set_columns: int = 48
    """Distinct (feature, category set, NaN bit) levels the ensemble may use: each is a set column the table
    runtime binarizes for every row (a membership test), so past this cap the fit reuses the sets it has.
    Adult 500 x 63, 200 trees: 16 columns 139 ns/row, 48 columns 192 ns/row (forest C: 2,937), and the error
    near the decision 0.35 -> 0.24."""
    boundary: float = 2.0
    """Binary classifiers: weight rows ``1 / (1 + (m / boundary)^2)`` by their source margin ``m`` (0: every row
    weighs 1). Decisions and the cascade band depend on the error near ``m = 0``; far rows matter less, but
    still count for AUC (``boundary=1`` narrowed Adult's band further and cost credit 0.001-0.005 test AUC)."""
    time_budget: float = 90.0
    seed: int = 0

    def check(self) -> None:
        if not 1 <= self.depth <= 12:
            raise CompileError(f"fit depth must be 1..12, got {self.depth}")
        if self.mixed < 0 or self.samples < 0 or not 0.0 <= self.mix_share <= 1.0:
            raise CompileError(f"fit options: samples >= 0, mixed >= 0 and mix_share in [0, 1] "
                               f"(got samples={self.samples}, mixed={self.mixed}, mix_share={self.mix_share})")
        if self.max_set_columns < 0:
            raise CompileError(f"fit max_set_columns must be >= 0, got {self.max_set_columns}")
        if self.max_trees < 1 or self.learning_rate <= 0 or self.l2 < 0 or self.tree_price < 0 or self.boundary < 0:
            raise CompileError("fit options: max_trees >= 1, learning_rate > 0, l2 >= 0, tree_price >= 0, "
                               "boundary >= 0")


@dataclass
class Candidates:
    """The source forest's conditions per feature, as bins of prepared values.

    Numerical feature ``f``: bins ``0..k`` are the cells between its ``k`` sorted
    thresholds (``bin = #{t : x > t}``), bin ``k + 1`` is NaN. Categorical feature:
    bins ``0..m-1`` are the codes its sets name, then *other valid code*, *invalid*, NaN;
    its candidate sets are the forest's sets (member bins as a 0/1 matrix).
    """

    thresholds: dict[int, npt.NDArray[np.float64]] = field(default_factory=dict)
    codes: dict[int, npt.NDArray[np.int64]] = field(default_factory=dict)
    sets: dict[int, npt.NDArray[np.bool_]] = field(default_factory=dict)
    """Categorical feature -> ``(n_sets, n_bins)`` membership (NaN column excluded: the fit picks it)."""
    offset: dict[int, int] = field(default_factory=dict)
    width: dict[int, int] = field(default_factory=dict)
    total: int = 0

    @property
    def features(self) -> list[int]:
        return sorted(self.offset)

    def set_matrix(self, f: int) -> npt.NDArray[np.float64]:
        """``sets[f].T`` as contiguous floats, for histogram products (cached)."""
        cache = self.__dict__.setdefault("_set_matrix", {})
        if f not in cache:
            cache[f] = np.ascontiguousarray(self.sets[f].T, dtype=np.float64)
        return cache[f]


def forest_candidates(forest: Forest) -> Candidates:
    """Every (feature, threshold) and (feature, category set) the forest tests."""
    cand = Candidates()
    internal = np.flatnonzero(forest.left >= 0)
    cat_nodes = internal[forest.is_categorical[internal]]
    num_nodes = internal[~forest.is_categorical[internal]]
    cat_features = set(np.unique(forest.feature[cat_nodes]).tolist())
    for f in sorted(cat_features):
        nodes = cat_nodes[forest.feature[cat_nodes] == f]
        sets: set[tuple[int, ...]] = set()
        for v in nodes.tolist():
            members = forest.categories_of(int(v)).tolist()
            # the bit "goes with the members": invalid values join the set when they take the members' side
            inv_with_members = bool(forest.cat_invalid_left[v]) == bool(forest.cat_in_set_left[v])
            sets.add(tuple(sorted(members + ([INVALID_CODE] if inv_with_members else []))))
        codes = np.array(sorted({c for s in sets for c in s if c != INVALID_CODE}), dtype=np.int64)
        m = codes.shape[0]
        mat = np.zeros((len(sets), m + 2), dtype=bool)  # code bins, other, invalid
        for i, s in enumerate(sorted(sets)):
            for c in s:
                mat[i, m + 1 if c == INVALID_CODE else int(np.searchsorted(codes, c))] = True
        cand.codes[f], cand.sets[f] = codes, mat
        cand.width[f] = m + 3
    for f in np.unique(forest.feature[num_nodes]).tolist():
        if f in cat_features:
            continue  # a feature split both ways: its category sets only
        t = forest.threshold[num_nodes[forest.feature[num_nodes] == f]]
        t = np.unique(canonical_thresholds(t[np.isfinite(t)], forest.schema.input_dtype))
        t = t[np.isfinite(t)]
        if t.size:
            cand.thresholds[f] = t
            cand.width[f] = t.shape[0] + 2
    off = 0
    for f in sorted(cand.width):
        cand.offset[f] = off
        off += cand.width[f]
    cand.total = off
    return cand


def bin_rows(cand: Candidates, Xp: npt.NDArray[np.float64], rule: Any) -> npt.NDArray[np.int32]:
    """``(n, n_candidate_features)`` global bin index (feature offset + bin) of prepared rows."""
    feats = cand.features
    B = np.empty((Xp.shape[0], len(feats)), dtype=np.int32)
    for j, f in enumerate(feats):
        x = Xp[:, f]
        nan = np.isnan(x)
        if f in cand.thresholds:
            t = cand.thresholds[f]
            b = np.searchsorted(t, x, side="left")
            b[nan] = t.shape[0] + 1
        else:
            codes = cand.codes[f]
            m = codes.shape[0]
            c = category_codes(x, rule)
            pos = np.minimum(np.searchsorted(codes, c), max(m - 1, 0))
            known = (codes[pos] == c) if m else np.zeros(c.shape, dtype=bool)
            b = np.where(known, pos, m)
            b[c == INVALID_CODE] = m + 1
            b[nan] = m + 2
        B[:, j] = b + cand.offset[f]
    return B


def _representatives(cand: Candidates, f: int) -> npt.NDArray[np.float64]:
    """A prepared input value inside each non-NaN bin of feature ``f`` (numerical: the cell's upper threshold)."""
    if f in cand.thresholds:
        t = cand.thresholds[f]
        return np.concatenate([t, [t[-1] + max(1.0, abs(t[-1]))]])
    codes = cand.codes[f].astype(np.float64)
    other = (codes.max() + 1.0) if codes.size else 0.0
    return np.concatenate([codes, [other]])


def jittered_rows(cand: Candidates, Xp: npt.NDArray[np.float64], B: npt.NDArray[np.int32], n: int, k: int,
                  rng: np.random.Generator) -> npt.NDArray[np.float64]:
    """``n`` copies of random rows with ``k`` features each moved one cell over a threshold (numerical) or to
    another code (categorical); NaN stays NaN."""
    feats = cand.features
    if n <= 0 or not feats:
        return np.zeros((0, Xp.shape[1]))
    src = rng.integers(0, Xp.shape[0], n)
    Xj = Xp[src].copy()
    for _ in range(k):
        which = rng.integers(0, len(feats), n)
        for j in np.unique(which).tolist():
            f = feats[j]
            rows = np.flatnonzero(which == j)
            b = B[src[rows], j] - cand.offset[f]
            reps = _representatives(cand, f)
            top = reps.shape[0] - 1  # bins 0..top hold values
            live = b <= top
            if f in cand.thresholds:
                nb = b + rng.choice(np.array([-1, 1]), rows.shape[0])
                nb = np.clip(nb, 0, top)
            else:
                nb = rng.integers(0, top + 1, rows.shape[0])
            Xj[rows[live], f] = reps[nb[live]]
    return Xj


def mixed_rows(Xp: npt.NDArray[np.float64], n: int, share: float,
               rng: np.random.Generator) -> npt.NDArray[np.float64]:
    """``n`` random rows of ``Xp``, each feature replaced with probability ``share`` by that feature of another
    random row: combinations of observed values (NaN and category codes included) the source was not fitted on."""
    if n <= 0 or Xp.shape[0] == 0:
        return np.zeros((0, Xp.shape[1]))
    out = Xp[rng.integers(0, Xp.shape[0], n)]
    for f in range(Xp.shape[1]):
        swap = np.flatnonzero(rng.random(n) < share)
        out[swap, f] = Xp[rng.integers(0, Xp.shape[0], swap.shape[0]), f]
    return out


@dataclass
class FitResult:
    """A boosted sequence of oblivious trees; any prefix is a model (``ensemble(T)``)."""

    forest: Forest
    cand: Candidates
    levels: list[list[tuple[int, int, bool]]]
    """Per tree: (feature, threshold index or set index, nan_true) per level."""
    tables: list[npt.NDArray[np.float64]]
    constant: float
    holdout_mse: list[float]
    """Holdout MSE after each tree (index 0: the constant alone)."""
    best_trees: int
    """Trees minimising formula 5 on the holdout."""
    report: dict[str, Any]

    def ensemble(self, n_trees: int | None = None) -> ObliviousEnsemble:
        """The first ``n_trees`` trees (default ``best_trees``) and the constant, as an ObliviousEnsemble."""
        T = self.best_trees if n_trees is None else min(n_trees, len(self.levels))
        schema = replace(self.forest.schema, average=False, accumulate_dtype="float64")
        depth = [0] + [len(lv) for lv in self.levels[:T]]
        feat: list[int] = []
        thr: list[float] = []
        nan_true: list[bool] = []
        set_off = [0]
        set_code: list[int] = []
        for lv in self.levels[:T]:
            for f, j, nt in lv:
                feat.append(f)
                nan_true.append(nt)
                if f in self.cand.thresholds:
                    thr.append(float(self.cand.thresholds[f][j]))
                else:
                    thr.append(float("nan"))
                    codes = self.cand.codes[f]
                    row = self.cand.sets[f][j]
                    members = codes[row[:codes.shape[0]]].tolist()
                    if row[codes.shape[0] + 1]:
                        members = [INVALID_CODE] + members
                    set_code.extend(members)
                set_off.append(len(set_code))
        has_cat = any(np.isnan(thr)) if thr else False
        value = np.concatenate([np.array([self.constant])] + self.tables[:T])
        return ObliviousEnsemble(
            schema=schema, depth=np.array(depth, dtype=np.int32), level_feature=np.array(feat, dtype=np.int32),
            level_threshold=np.array(thr, dtype=np.float64), level_nan_true=np.array(nan_true, dtype=bool),
            tree_output=np.zeros(T + 1, dtype=np.int32), value=value,
            level_set_offset=np.array(set_off, dtype=np.int64) if has_cat else None,
            level_set_code=np.array(set_code, dtype=np.int64) if has_cat else None).validate()


def _split_gains(G: npt.NDArray[np.float64], N: npt.NDArray[np.float64], cand: Candidates, l2: float,
                 has_nan: bool, allowed: dict[int, npt.NDArray[np.bool_]] | None = None
                 ) -> tuple[float, tuple[int, int, bool]]:
    """Best level for the partition histograms ``G`` (residual sums) and ``N`` (counts), ``(P, total_bins)``;
    ``allowed`` (categorical feature -> ``(2, n_sets)`` by NaN bit) restricts the category sets."""
    best = (-np.inf, (-1, -1, False))
    Gt, Nt = G.sum(axis=1, keepdims=True), N.sum(axis=1, keepdims=True)
    base = float((Gt ** 2 / (Nt + l2)).sum())
    cg, cn = np.cumsum(G, axis=1), np.cumsum(N, axis=1)
    for f in cand.features:
        o, w = cand.offset[f], cand.width[f]
        if f in cand.thresholds:
            k = w - 2
            start_g = cg[:, o - 1:o] if o else 0.0
            start_n = cn[:, o - 1:o] if o else 0.0
            lg = cg[:, o:o + k] - start_g  # bins 0..j on the left of threshold j
            ln = cn[:, o:o + k] - start_n
            vg = cg[:, o + k:o + k + 1] - start_g  # all non-NaN bins
            vn = cn[:, o + k:o + k + 1] - start_n
            nan_g, nan_n = G[:, o + k + 1:o + k + 2], N[:, o + k + 1:o + k + 2]
            options = (False, True) if has_nan and bool((nan_n > 0).any()) else (False,)
            for nt in options:
                rg, rn = vg - lg + (nan_g if nt else 0.0), vn - ln + (nan_n if nt else 0.0)
                Lg, Ln = Gt - rg, Nt - rn
                gain = (rg ** 2 / (rn + l2) + Lg ** 2 / (Ln + l2)).sum(axis=0) - base
                j = int(np.argmax(gain))
                if gain[j] > best[0]:
                    best = (float(gain[j]), (f, j, nt))
        else:
            mat = cand.set_matrix(f)  # (w - 1, S)
            hg, hn = np.ascontiguousarray(G[:, o:o + w - 1]), np.ascontiguousarray(N[:, o:o + w - 1])
            nan_g, nan_n = G[:, o + w - 1:o + w], N[:, o + w - 1:o + w]
            options = (False, True) if has_nan and bool((nan_n > 0).any()) else (False,)
            ig, inn = hg @ mat, hn @ mat  # (P, S): in the set
            for nt in options:
                rg, rn = ig + (nan_g if nt else 0.0), inn + (nan_n if nt else 0.0)
                Lg, Ln = Gt - rg, Nt - rn
                gain = (rg ** 2 / (rn + l2) + Lg ** 2 / (Ln + l2)).sum(axis=0) - base
                if allowed is not None:
                    gain = np.where(allowed[f][int(nt)], gain, -np.inf)
                j = int(np.argmax(gain))
                if gain[j] > best[0]:
                    best = (float(gain[j]), (f, j, nt))
    return best


def _level_bit(cand: Candidates, B: npt.NDArray[np.int32], col: int, f: int, j: int,
               nt: bool) -> npt.NDArray[np.bool_]:
    b = B[:, col] - cand.offset[f]
    w = cand.width[f]
    nan = b == w - 1
    if f in cand.thresholds:
        bit = b > j
    else:
        row = cand.sets[f][j]
        bit = row[np.minimum(b, w - 2)]
    return np.where(nan, nt, bit)


Checkpoint = Callable[[int, "FitResult"], "str | None"]
"""Called after each tree with the tree count and the fit so far (``ensemble(T)`` works on it); a reason
string stops the growth there (``report["stop"]``), None goes on."""


def fit_oblivious(forest: Forest, X: Any, options: FitOptions | None = None, *,
                  margins: Callable[[npt.NDArray[np.float64]], npt.NDArray[np.float64]] | None = None,
                  log: Callable[[str], None] | None = None, checkpoint: Checkpoint | None = None) -> FitResult:
    """Boost oblivious trees on ``forest``'s margins over ``X`` (training rows) plus jittered copies.

    ``margins`` computes the source's raw margins of prepared rows (default: the
    reference evaluator; pass a compiled library for speed). ``checkpoint`` may stop the growth early
    (:class:`lumber.compiler.tolerance.PrefixStop`: once longer prefixes cannot be faster); the trees grown
    are the same with or without it, only fewer.
    """
    from threadpoolctl import threadpool_limits

    opt = options or FitOptions()
    opt.check()
    # the split search multiplies small histograms: BLAS threads cost 50x their work on a busy machine
    with threadpool_limits(1, user_api="blas"):
        return _fit(forest, X, opt, margins, log, checkpoint)


def _fit(forest: Forest, X: Any, opt: FitOptions, margins: Callable[[npt.NDArray[np.float64]],
         npt.NDArray[np.float64]] | None, log: Callable[[str], None] | None,
         checkpoint: Checkpoint | None = None) -> FitResult:
    if forest.schema.n_outputs != 1:
        raise CompileError(f"quality-bounded translation supports one-output models (binary classifiers, "
                           f"regressors); this model has {forest.schema.n_outputs} outputs")
    t_start = time.perf_counter()
    rng = np.random.default_rng(opt.seed)
    Xp = prepare_input(forest.schema, X)
    if Xp.shape[0] < 10:
        raise CompileError(f"quality-bounded translation needs training rows; got {Xp.shape[0]}")
    cand = forest_candidates(forest)
    rule = forest.schema.category_rule
    B0 = bin_rows(cand, Xp, rule)
    Xj = jittered_rows(cand, Xp, B0, int(opt.samples * Xp.shape[0]), opt.jitter_features, rng)
    Xm = mixed_rows(Xp, int(opt.mixed * Xp.shape[0]), opt.mix_share, rng)
    Xj = np.concatenate([Xj, Xm]) if Xm.shape[0] else Xj
    Xall = np.concatenate([Xp, Xj]) if Xj.shape[0] else Xp
    B = np.concatenate([B0, bin_rows(cand, Xj, rule)]) if Xj.shape[0] else B0
    evaluate = margins or (lambda R: forest.evaluate(R))
    target = np.asarray(evaluate(Xall), dtype=np.float64).reshape(-1) - float(forest.schema.base_score[0])
    t_label = time.perf_counter() - t_start
    n = Xall.shape[0]
    raw = target + float(forest.schema.base_score[0])
    weight = (1.0 / (1.0 + (raw / opt.boundary) ** 2) if opt.boundary > 0 and forest.schema.task == Task.BINARY
              else np.ones(n))
    hold = rng.random(n) < opt.holdout
    fit_idx, hold_idx = np.flatnonzero(~hold), np.flatnonzero(hold)
    const = float(np.average(target[fit_idx], weights=weight[fit_idx]))
    pred = np.full(n, const)
    wh = weight[hold_idx] / weight[hold_idx].sum()
    var = float(np.sum(wh * (target[hold_idx] - np.sum(wh * target[hold_idx])) ** 2)) or 1.0
    has_nan = bool(np.isnan(Xall).any())
    total = cand.total
    levels: list[list[tuple[int, int, bool]]] = []
    tables: list[npt.NDArray[np.float64]] = []
    hmse = [float(np.sum(wh * (target[hold_idx] - pred[hold_idx]) ** 2))]
    col_of = {f: j for j, f in enumerate(cand.features)}
    best_obj, best_T, stale = hmse[0] / var, 0, 0
    used_sets: set[tuple[int, int, bool]] = set()
    allowed: dict[int, npt.NDArray[np.bool_]] | None = None if opt.max_set_columns > 0 else {
        g: np.zeros((2, m.shape[0]), dtype=bool) for g, m in cand.sets.items()}
    stop = "max_trees"
    if not cand.features:
        stop = "no conditions"
    while cand.features and len(levels) < opt.max_trees:
        if time.perf_counter() - t_start > opt.time_budget:
            stop = "time_budget"
            break
        sub = fit_idx if fit_idx.shape[0] <= opt.rows_per_tree else rng.choice(fit_idx, opt.rows_per_tree,
                                                                                replace=False)
        ws = weight[sub]
        r = (target[sub] - pred[sub]) * ws
        Bs = B[sub]
        part = np.zeros(sub.shape[0], dtype=np.int64)
        lv: list[tuple[int, int, bool]] = []
        for depth in range(opt.depth):
            Pd = 1 << depth
            idx = (part[:, None] * total + Bs).reshape(-1)
            G = np.asarray(np.bincount(idx, weights=np.repeat(r, Bs.shape[1]), minlength=Pd * total),
                           dtype=np.float64).reshape(Pd, total)
            N = np.asarray(np.bincount(idx, weights=np.repeat(ws, Bs.shape[1]), minlength=Pd * total),
                           dtype=np.float64).reshape(Pd, total)
            gain, (f, j, nt) = _split_gains(G, N, cand, opt.l2, has_nan, allowed)
            if f < 0 or gain <= 1e-12:
                break
            lv.append((f, j, nt))
            if f in cand.sets and (f, j, nt) not in used_sets:
                used_sets.add((f, j, nt))
                if len(used_sets) >= opt.max_set_columns:
                    allowed = {g: np.zeros((2, m.shape[0]), dtype=bool) for g, m in cand.sets.items()}
                    for uf, uj, un in used_sets:
                        allowed[uf][int(un), uj] = True
            part |= _level_bit(cand, Bs, col_of[f], f, j, nt).astype(np.int64) << depth
        if not lv:
            stop = "no gain"
            break
        leaf = np.zeros(n, dtype=np.int64)
        for d, (f, j, nt) in enumerate(lv):
            leaf |= _level_bit(cand, B, col_of[f], f, j, nt).astype(np.int64) << d
        Pl = 1 << len(lv)
        res = (target[fit_idx] - pred[fit_idx]) * weight[fit_idx]
        gsum = np.bincount(leaf[fit_idx], weights=res, minlength=Pl)
        cnt = np.bincount(leaf[fit_idx], weights=weight[fit_idx], minlength=Pl)
        table = np.asarray(opt.learning_rate * gsum / (cnt + opt.l2), dtype=np.float64)
        pred += table[leaf]
        levels.append(lv)
        tables.append(table)
        hmse.append(float(np.sum(wh * (target[hold_idx] - pred[hold_idx]) ** 2)))
        obj = hmse[-1] / var + opt.tree_price * len(levels)
        if obj < best_obj:
            best_obj, best_T, stale = obj, len(levels), 0
        else:
            stale += 1
            if stale >= opt.patience:
                stop = "price"
                break
        if log and len(levels) % 100 == 0:
            log(f"  fit: {len(levels)} trees, holdout rmse {np.sqrt(hmse[-1]):.4g}")
        if checkpoint is not None:
            why = checkpoint(len(levels), FitResult(forest, cand, levels, tables, const, hmse, best_T, {}))
            if why:
                stop = why
                break
    seconds = time.perf_counter() - t_start
    report = {"rows": int(Xp.shape[0]), "jittered_rows": int(Xj.shape[0] - Xm.shape[0]),
              "mixed_rows": int(Xm.shape[0]), "holdout_rows": int(hold_idx.shape[0]),
              "candidate_thresholds": int(sum(t.shape[0] for t in cand.thresholds.values())),
              "candidate_sets": int(sum(s.shape[0] for s in cand.sets.values())),
              "set_columns": len(used_sets), "trees_grown": len(levels), "best_trees": best_T, "stop": stop, "depth": opt.depth,
              "tree_price": opt.tree_price, "label_seconds": t_label, "seconds": seconds,
              "holdout_rmse": float(np.sqrt(hmse[best_T])), "margin_std": float(np.sqrt(var))}
    return FitResult(forest, cand, levels, tables, const, hmse,
                     best_T, report)


@dataclass(frozen=True)
class FitOblivious(FitOptions, Transform[Forest, ObliviousEnsemble]):
    """``fit-oblivious``: the formula-5 fit on the training rows, as an ObliviousEnsemble (lossy by request)."""

    name: ClassVar[str] = "fit-oblivious"

    def __post_init__(self) -> None:
        self.check()

    def run(self, ir: Forest, ctx: PassContext) -> ObliviousEnsemble:
        data = ctx.require(self.pipeline_text(), "X_train", why="the fit reads the source's margins on training rows")
        fr = fit_oblivious(ir, data.X_train, self.options_as(FitOptions))
        ens = fr.ensemble()
        r = fr.report
        text = (f"{ir.n_trees:,} trees -> {ens.n_trees - 1:,} fitted oblivious trees of depth <= {r['depth']} "
                f"({r['trees_grown']} grown, stop: {r['stop']}) on {r['rows']:,} training rows + "
                f"{r['jittered_rows']:,} jittered + {r['mixed_rows']:,} mixed; holdout rmse {r['holdout_rmse']:.4g} (margin std "
                f"{r['margin_std']:.4g}); LOSSY")
        metrics = dict(r)
        if data.X_valid is not None:
            ref = ir.evaluate(data.X_valid).reshape(-1)
            got = ens.evaluate(data.X_valid).reshape(-1)
            diff = np.abs(got - ref)
            metrics.update(validation_rows=int(ref.shape[0]), max_abs_margin_change=float(diff.max(initial=0.0)),
                           mean_abs_margin_change=float(diff.mean()) if diff.size else 0.0)
            text += (f"; on {ref.shape[0]:,} validation rows |margin change| max {metrics['max_abs_margin_change']:.3g}"
                     f" mean {metrics['mean_abs_margin_change']:.3g}")
            if ir.schema.task == Task.BINARY:
                agree = float(np.mean(ir.schema.class_index(got) == ir.schema.class_index(ref)))
                metrics["agreement"] = agree
                text += f", decisions agree on {100 * agree:.2f}%"
        ctx.report(PassReport(self.name, text, metrics))
        return ens


__all__ = ["Candidates", "FitOblivious", "FitOptions", "FitResult", "bin_rows", "fit_oblivious", "forest_candidates",
           "jittered_rows", "mixed_rows"]
