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
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt

from lumber.ir import CompileError, Polynomial
from lumber.ir.polynomial import active_chunks, row_blocks, unpack_rows

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


def refit_path(poly: Polynomial, X_train: Any, *, step: float, iters: int, alpha: float | None = None,
               reduction: float | None = None, X_valid: Any = None,
               metric: Callable[[Array], float] | None = None,
               within: Callable[[float, float], bool] | None = None) -> PathResult:
    """Cut low-eta monomials ``step`` at a time, refitting the kept weights after every cut.

    Stops at the first of: ``alpha`` reached (every kept eta >= alpha), ``reduction`` reached, or
    (``metric`` given with ``within``) the next cut would leave the tolerance; the last case bisects
    the failing step first. ``metric`` maps validation margins ``(n_valid, K)`` to a number.
    """
    m = poly.n_monomials
    A = design_matrix(poly, X_train)
    n = A.shape[0]
    count = np.asarray(A.sum(axis=0)).ravel()
    target = A @ poly.weight + poly.bias[None, :]
    Av = design_matrix(poly, X_valid) if metric is not None else None

    def score(K: npt.NDArray[np.int64], w: Array, c: Array) -> float:
        assert Av is not None and metric is not None
        return metric(Av[:, K] @ w + c[None, :])

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
    return PathResult(K, w, c, before, after, eta, steps)


__all__ = ["PathResult", "design_matrix", "fidelity_loss", "refit", "refit_path"]
