"""``prune{method=refit}``: eta pruning with the kept weights refitted after every cut.

The paper's rule (:mod:`.prune_monomials`) zeroes low-eta monomials and keeps
every other weight as it was. Dropping ``D`` changes the margin by
``d(x) = sum_{M in D} w_M M(x)``, and the kept monomials can absorb much of
``d``: MonoForest's section 5 names "sparse re-weighting monomials" as the
stronger alternative, and Friedman & Popescu's importance-sampled ensembles
post-process the same way. Here the kept weights (and the bias) are refitted to
the *unpruned polynomial's margins* on the training rows, squared loss:

    min_{v, c}  sum_x || A_K(x) v + c - H(x) ||^2

(``A_K`` the 0/1 indicators of the kept monomials, ``H`` the unpruned margin).
The target is the model itself, not the labels: a label-driven refit fits the
training rows again, and the validation rows the pass checks against are
usually among them. The solve is conjugate gradients on the normal equations
with a Jacobi preconditioner (the column counts), warm-started from the current
weights, a fixed number of iterations (deterministic); the objective can only
go down, and the start is kept if rounding ever says otherwise.

Support selection is a path: drop the ``step`` fraction of remaining monomials
with the lowest eta (recomputed from the refitted weights), refit, repeat.
``alpha=auto`` stops before the first cut whose validation metric leaves
``tol``, then bisects that last step (down to 1% of the kept count) for the
largest cut that stays within tol. ``alpha=<number>`` cuts until every kept
monomial has eta >= alpha; ``reduction=<r>`` cuts to ``floor(n / r)`` monomials.
The result is an exact Polynomial with new weights: its ``evaluate`` is what
the report's metric was computed from.

Size. The design matrix has one nonzero per (row, monomial that holds on it):
a LightGBM 500 x 63 model holds about 3,000 (Adult) to 16,000 (200k x 50
synthetic) monomials per row, so all training rows would pass ``max-nnz``.
The fit then uses a seeded random sample of the training rows that fits the
budget (the report says how many); the target is the model's own margin, which
any row gives, and the validation metric (on all validation rows, evaluated
through the polynomial when their matrix would not fit either) decides where
the path stops, so a sample can cost reduction but never the tolerance.

Registered twice: ``prune-refit`` (this module's pass) and ``prune{method=refit}``
(the same pass reached through ``prune``'s options).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, ClassVar, Literal

import numpy as np
import numpy.typing as npt

from lumber.ir import CompileError, Polynomial
from lumber.ir.polynomial import active_chunks, row_blocks, unpack_rows

from ..base import PassContext, PassReport, Transform
from ..quality import QualityMetric, make_metric
from .prune_options import check_prune_options, prune_report

Array = npt.NDArray[np.float64]


NNZ_BUDGET = 40_000_000
"""Largest design matrix (row x monomial hits) a refit builds: about 500 MB with its copies."""


def design_matrix(poly: Polynomial, X: Any, budget: int = NNZ_BUDGET) -> Any:
    """``(n, n_monomials)`` sparse CSC 0/1 matrix: which monomial holds on which row.

    Raises CompileError once more than ``budget`` hits have been counted.
    """
    import scipy.sparse as sp

    Xp = poly.prepare_input(X)
    blocks = []
    nnz = 0
    for rows, cbits in row_blocks(poly, Xp):
        parts = []
        for _, bits in active_chunks(poly, cbits, np.arange(poly.n_monomials)):
            parts.append(sp.csr_matrix(unpack_rows(bits, rows.stop - rows.start)))
            nnz += parts[-1].nnz
            if nnz > budget:
                raise CompileError(
                    f"prune{{method=refit}}: the monomial design matrix passes {budget:,} nonzeros after "
                    f"{rows.stop:,} of {Xp.shape[0]:,} rows ({poly.n_monomials:,} monomials)",
                    "pass fewer training rows, or use method=eta (no refit)")
        blocks.append(sp.vstack(parts, format="csr").T if parts else
                      sp.csr_matrix((rows.stop - rows.start, 0)))
    if not blocks:
        return sp.csc_matrix((0, poly.n_monomials))
    return sp.vstack(blocks, format="csc").astype(np.float64)


def sampled_design_matrix(poly: Polynomial, X: Any, budget: int = NNZ_BUDGET,
                          seed: int = 0) -> tuple[Any, npt.NDArray[np.int64]]:
    """:func:`design_matrix` of a seeded random sample of ``X``'s rows, as many as fit ``budget``.

    Returns the matrix and the sampled row indices (in the matrix's row order). All rows when they fit.
    """
    import scipy.sparse as sp

    Xp = poly.prepare_input(X)
    n = Xp.shape[0]
    order = np.random.default_rng(seed).permutation(n)
    Xs = Xp[order]
    blocks = []
    nnz = 0
    used = 0
    for rows, cbits in row_blocks(poly, Xs):
        parts = [sp.csr_matrix(unpack_rows(bits, rows.stop - rows.start))
                 for _, bits in active_chunks(poly, cbits, np.arange(poly.n_monomials))]
        block = (sp.vstack(parts, format="csr").T.tocsr() if parts
                 else sp.csr_matrix((rows.stop - rows.start, poly.n_monomials)))
        if nnz + block.nnz > budget:
            per_row = np.diff(block.indptr)
            room = int(np.searchsorted(np.cumsum(per_row), budget - nnz, side="right"))
            if room:
                blocks.append(block[:room])
                used += room
            break
        blocks.append(block)
        nnz += block.nnz
        used = rows.stop
    if not blocks:
        if n:
            raise CompileError(f"prune-refit: a single training row holds more than max-nnz={budget:,} "
                               f"monomial hits ({poly.n_monomials:,} monomials)", "raise max-nnz")
        return sp.csc_matrix((0, poly.n_monomials)), np.zeros(0, dtype=np.int64)
    A = sp.vstack(blocks, format="csc").astype(np.float64)
    return A, order[:used]


def fidelity_loss(A: Any, w: Array, c: Array, target: Array) -> float:
    """Mean over rows of the squared distance between ``A w + c`` and ``target`` (summed over outputs)."""
    r = A @ w + c[None, :] - target
    return float(np.mean(np.sum(r * r, axis=1)))


def refit(A: Any, w0: Array, c0: Array, target: Array, iters: int) -> tuple[Array, Array]:
    """Least-squares weights ``(w, c)`` for ``A w + c ~ target``, from ``(w0, c0)``, ``iters`` PCG steps.

    ``A``: ``(n, k)`` sparse 0/1; ``w0``: ``(k, K)``; ``c0``: ``(K,)``; ``target``: ``(n, K)``.
    Never returns weights with a larger loss than the start.
    """
    n, k = A.shape
    if n == 0 or iters <= 0:
        return w0.copy(), c0.copy()
    if k == 0:  # only the bias is left: the mean margin is its least-squares value
        return w0.copy(), target.mean(axis=0)
    AT = A.T.tocsr()
    diag = np.append(np.asarray(A.sum(axis=0)).ravel(), float(n))
    diag[diag == 0] = 1.0  # a monomial that never holds on these rows: its weight stays put

    def normal(v: Array) -> Array:  # [A 1]^T [A 1] v
        u = A @ v[:-1] + v[-1][None, :]
        return np.vstack([AT @ u, u.sum(axis=0)[None, :]])

    v = np.vstack([w0, c0[None, :]])
    resid = target - (A @ w0 + c0[None, :])
    r = np.vstack([AT @ resid, resid.sum(axis=0)[None, :]])
    z = r / diag[:, None]
    p = z.copy()
    rz = np.sum(r * z, axis=0)
    for _ in range(iters):
        q = normal(p)
        pq = np.sum(p * q, axis=0)
        ok = pq > 0
        if not ok.any():
            break
        a = np.where(ok, rz / np.where(ok, pq, 1.0), 0.0)
        v = v + a[None, :] * p
        r = r - a[None, :] * q
        z = r / diag[:, None]
        rz_new = np.sum(r * z, axis=0)
        if not np.any(rz_new > 1e-30 * np.maximum(np.abs(rz), 1e-300)):
            break
        beta = np.where(rz > 0, rz_new / np.where(rz > 0, rz, 1.0), 0.0)
        p = z + beta[None, :] * p
        rz = rz_new
    w, c = v[:-1], v[-1]
    if fidelity_loss(A, w, c, target) > fidelity_loss(A, w0, c0, target):
        return w0.copy(), c0.copy()
    return w, c


@dataclass
class PathResult:
    """The kept monomials (sorted indices into the input polynomial), their weights and bias, and the path."""

    keep: npt.NDArray[np.int64]
    weight: Array
    bias: Array
    before: float | None
    after: float | None
    eta: Array
    """eta of every kept monomial under its refitted weight (training rows)."""
    steps: list[dict[str, Any]] = field(default_factory=list)
    fit_rows: int = 0
    """Training rows the refits used (a sample when all would pass ``max_nnz``)."""
    train_rows: int = 0


def refit_path(poly: Polynomial, X_train: Any, *, step: float, iters: int, alpha: float | None = None,
               reduction: float | None = None, X_valid: Any = None,
               metric: Callable[[Array], float] | None = None,
               within: Callable[[float, float], bool] | None = None, max_nnz: int = NNZ_BUDGET) -> PathResult:
    """Cut low-eta monomials ``step`` at a time, refitting the kept weights after every cut.

    Stops at the first of: ``alpha`` reached (every kept eta >= alpha), ``reduction`` reached, or
    (``metric`` given with ``within``) the next cut would leave the tolerance; the last case bisects
    the failing step first. ``metric`` maps validation margins ``(n_valid, K)`` to a number.
    The fit uses as many training rows as fit ``max_nnz`` (a seeded sample, see the module docstring).
    """
    m = poly.n_monomials
    A, fit_rows = sampled_design_matrix(poly, X_train, max_nnz)
    n = A.shape[0]
    count = np.asarray(A.sum(axis=0)).ravel()
    target = A @ poly.weight + poly.bias[None, :]
    Av = None
    Xv = None
    if metric is not None:
        try:
            Av = design_matrix(poly, X_valid, max_nnz)
        except CompileError:  # too many hits: price each candidate through the polynomial instead
            Xv = poly.prepare_input(X_valid)

    def score(K: npt.NDArray[np.int64], w: Array, c: Array) -> float:
        assert metric is not None
        if Av is not None:
            return metric(Av[:, K] @ w + c[None, :])
        full = np.zeros_like(poly.weight)
        full[K] = w
        return metric(c[None, :] + poly.replace(weight=full).partial_sum(Xv, K, prepared=True))

    K = np.arange(m)
    w, c = poly.weight.copy(), poly.bias.copy()
    before = score(K, w, c) if metric is not None else None
    after = before
    goal = 0 if reduction is None else int(np.floor(m / reduction)) if np.isfinite(reduction) else 0
    steps: list[dict[str, Any]] = []

    def cut(K: npt.NDArray[np.int64], w: Array, c: Array, n_drop: int) -> tuple[Any, Array, Array]:
        eta = (w ** 2).sum(axis=1) * count[K] / max(n, 1)
        order = np.argsort(eta, kind="stable")
        kept = np.sort(order[n_drop:])
        K2 = K[kept]
        w2, c2 = refit(A[:, K2], w[kept], c, target, iters)
        return K2, w2, c2

    while K.size:
        eta = (w ** 2).sum(axis=1) * count[K] / max(n, 1)
        n_drop = max(1, int(np.floor(K.size * step)))
        if alpha is not None:
            n_drop = min(n_drop, int((eta < alpha).sum()))
        if reduction is not None:
            n_drop = min(n_drop, K.size - goal)
        if n_drop <= 0:
            break
        K2, w2, c2 = cut(K, w, c, n_drop)
        if metric is not None and within is not None:
            val = score(K2, w2, c2)
            assert before is not None
            if not within(val, before):
                lo, hi = 0, n_drop  # lo cut is within tol, hi is not
                while hi - lo > max(1, K.size // 100):
                    mid = (lo + hi) // 2
                    Km, wm, cm = cut(K, w, c, mid)
                    vm = score(Km, wm, cm)
                    if within(vm, before):
                        lo, (K2, w2, c2, val) = mid, (Km, wm, cm, vm)
                    else:
                        hi = mid
                if lo:
                    K, w, c, after = K2, w2, c2, val
                    steps.append({"kept": int(K.size), "metric": val})
                break
            after = val
            steps.append({"kept": int(K2.size), "metric": val})
        K, w, c = K2, w2, c2
    eta = (w ** 2).sum(axis=1) * count[K] / max(n, 1)
    return PathResult(K, w, c, before, after, eta, steps, fit_rows=int(n), train_rows=int(np.shape(X_train)[0]))


@dataclass(frozen=True)
class PruneRefit(Transform[Polynomial, Polynomial]):
    """Eta cuts in steps with the kept weights refitted to the unpruned margins (module docstring)."""

    name: ClassVar[str] = "prune-refit"
    alpha: float | Literal["auto"] = "auto"
    """Cut until every kept eta is at least alpha, or ``auto``: stop before leaving ``tol`` on validation rows."""
    tol: float = 0.0005
    """``auto``: allowed metric loss (absolute for AUC/accuracy, relative for RMSE/log-loss)."""
    metric: Literal["auto", "auc", "accuracy", "logloss", "rmse"] = "auto"
    """``auto``: AUC for binary classifiers, log-loss for multiclass, RMSE for regression."""
    step: float = 0.1
    """Fraction of the remaining monomials cut per path step (0 < step < 1)."""
    iters: int = 20
    """Conjugate-gradient iterations per refit."""
    reduction: float | None = None
    """Keep ``floor(n / reduction)`` monomials instead (needs ``alpha=auto``; ignores tol)."""
    max_nnz: int = NNZ_BUDGET
    """Largest training design matrix (row x monomial hits); more rows are sampled down to it."""

    def __post_init__(self) -> None:
        check_prune_options(alpha=self.alpha, tol=self.tol, metric=self.metric, method="refit", step=self.step,
                            iters=self.iters, reduction=self.reduction)
        if not (isinstance(self.max_nnz, int) and not isinstance(self.max_nnz, bool) and self.max_nnz >= 1):
            raise CompileError(f"max-nnz must be a positive integer, got {self.max_nnz!r}")

    def run(self, ir: Polynomial, ctx: PassContext) -> Polynomial:
        return run_refit(self, ir, ctx, self.pipeline_text())


def run_refit(p: Any, ir: Polynomial, ctx: PassContext, text: str) -> Polynomial:
    """The refit path for ``prune-refit`` and ``prune{method=refit}`` (``p`` holds the options)."""
    data = ctx.require(text, "X_train", why="eta(M) is a mean over training rows")
    auto = p.alpha == "auto" and p.reduction is None
    if auto:
        ctx.require(text, "X_valid", "y_valid", why="alpha=auto is chosen on validation rows")
    metric: QualityMetric | None = None
    Xv = None
    if data.X_valid is not None and data.y_valid is not None:
        metric = make_metric(p.metric, ir.schema, data.y_valid)
        Xv = ir.prepare_input(data.X_valid)
    K1 = ir.n_outputs == 1
    res = refit_path(ir, data.X_train, step=p.step, iters=p.iters,
                     alpha=None if p.alpha == "auto" else float(p.alpha), reduction=p.reduction,
                     X_valid=data.X_valid if auto else None,
                     metric=(lambda m: metric(m[:, 0] if K1 else m)) if auto and metric else None,
                     within=(lambda v, b: metric.within(v, b, p.tol)) if auto and metric else None,
                     max_nnz=getattr(p, "max_nnz", NNZ_BUDGET))
    nonzero = np.flatnonzero((res.weight != 0).any(axis=1))
    out = ir.select(res.keep[nonzero]).replace(weight=res.weight[nonzero], bias=res.bias)
    alpha = float(p.alpha) if p.alpha != "auto" else float("nan")
    before = after = None
    if metric is not None and Xv is not None:
        shape = (lambda m: m[:, 0]) if K1 else (lambda m: m)
        before = metric(shape(ir.bias[None, :] + ir.partial_sum(Xv, None, prepared=True)))
        after = metric(shape(out.bias[None, :] + out.partial_sum(Xv, None, prepared=True)))
    rep = prune_report(p.name, ir, out, alpha, metric, before, after, p.tol,
                       n_valid=None if Xv is None else Xv.shape[0])
    rep.metrics.update(method="refit", path_steps=len(res.steps), fit_rows=res.fit_rows,
                       train_rows=res.train_rows)
    if res.fit_rows < res.train_rows:
        rep = PassReport(rep.pass_name, rep.summary + f"; fitted on a sample of {res.fit_rows:,} of "
                         f"{res.train_rows:,} training rows (max-nnz)", rep.metrics)
    ctx.report(rep)
    return out


__all__ = ["NNZ_BUDGET", "PathResult", "PruneRefit", "design_matrix", "fidelity_loss", "refit", "refit_path",
           "run_refit", "sampled_design_matrix"]
