"""``prune``: drop monomials by the training statistic eta(M) (MonoForest, section 5).

``eta(M) = mean_x (w_M * prod_{c in M} c(x))^2 = |w_M|^2 * support(M)`` over
training rows (``|w_M|^2`` sums the outputs). Monomials with ``eta < alpha``
go. ``alpha=auto`` picks the largest alpha whose validation metric stays
within ``tol`` of the unpruned model's (see :mod:`lumber.passes.quality`):
monomials are sorted by eta, the metric is priced at cut points (a grid of
``GRID`` cuts over the distinct eta values, then finer grids between the largest
good cut and the next, down to adjacent values), each cut costing only the
monomials it removes. Cuts never split monomials of equal eta, so the answer is
a threshold: the chosen cut is within ``tol`` and the next distinct eta value
is not (or every monomial goes). Ties cost nothing (50 training rows leave
most monomials at eta 0: one value; a grid over the count stalled there). The result is no longer exact: the pass
reports monomials kept and dropped and the metric before and after.

``method=refit`` (:mod:`.prune_refit`, also registered as ``prune-refit``) cuts along the same eta order in steps
and refits the kept weights to the unpruned margins after every cut (options
``step``, ``iters``). ``reduction=<r>`` asks for ``floor(n / r)`` monomials
instead of a threshold: the ``r`` chosen on another model, for instance (with
``method=eta`` the lowest-eta monomials go, ties broken by index). The paper's
rule stays the default: it keeps the model's own weights, needs no solve (under
a second on adult against about 10 s), and refit does not win everywhere
(``bench/results/prune.md``: more reduction on adult and credit, less on compas).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar, Literal

import numpy as np
import numpy.typing as npt

from lumber.ir import Polynomial

from ..base import PassContext, PassReport, Transform
from ..quality import QualityMetric, make_metric
from .prune_options import check_prune_options, prune_report
from .prune_refit import run_refit

GRID = 16
"""Cut points per search level; levels repeat until adjacent cuts are adjacent distinct eta values."""


@dataclass(frozen=True)
class PruneMonomials(Transform[Polynomial, Polynomial]):
    """Drop monomials whose eta(M) on training rows is below alpha."""

    name: ClassVar[str] = "prune"
    alpha: float | Literal["auto"] = "auto"
    """Threshold on eta(M), or ``auto`` to choose it on validation rows."""
    tol: float = 0.0005
    """``auto``: allowed metric loss (absolute for AUC/accuracy, relative for RMSE/log-loss)."""
    metric: Literal["auto", "auc", "accuracy", "logloss", "rmse"] = "auto"
    """``auto``: AUC for binary classifiers, log-loss for multiclass, RMSE for regression."""
    method: Literal["eta", "refit"] = "eta"
    """``eta``: the paper's threshold; ``refit``: eta cuts in steps, kept weights refitted after each."""
    step: float = 0.1
    """``refit``: fraction of the remaining monomials cut per path step (0 < step < 1)."""
    iters: int = 20
    """``refit``: conjugate-gradient iterations per refit."""
    reduction: float | None = None
    """Keep ``floor(n / reduction)`` monomials instead of choosing alpha (needs ``alpha=auto``, ignores tol)."""

    def __post_init__(self) -> None:
        check_prune_options(alpha=self.alpha, tol=self.tol, metric=self.metric, method=self.method, step=self.step,
                            iters=self.iters, reduction=self.reduction)

    def run(self, ir: Polynomial, ctx: PassContext) -> Polynomial:
        text = self.pipeline_text()
        data = ctx.require(text, "X_train", why="eta(M) is a mean over training rows")
        if self.method == "refit":
            return self._run_refit(ir, ctx, data, text)
        if self.reduction is not None:
            return self._run_reduction(ir, ctx, data)
        if self.alpha == "auto":
            ctx.require(text, "X_valid", "y_valid", why="alpha=auto is chosen on validation rows")
        eta = monomial_eta(ir, data.X_train)
        metric = None
        Xv = None
        if data.X_valid is not None and data.y_valid is not None:
            metric = make_metric(self.metric, ir.schema, data.y_valid)
            Xv = ir.prepare_input(data.X_valid)
        before: float | None
        after: float | None
        if self.alpha == "auto":
            assert metric is not None and Xv is not None
            alpha, before, after = choose_alpha(ir, eta, Xv, metric, self.tol)
            keep = eta >= alpha
        else:
            alpha = float(self.alpha)
            keep = eta >= alpha
            before = after = None
            if metric is not None and Xv is not None:
                full = ir.bias[None, :] + ir.partial_sum(Xv, None, prepared=True)
                before = metric(_shape(full, ir))
                after = metric(_shape(full - ir.partial_sum(Xv, np.flatnonzero(~keep), prepared=True), ir))
        out = ir.select(keep)
        ctx.report(prune_report(self.name, ir, out, alpha, metric, before, after, self.tol,
                                n_valid=None if Xv is None else Xv.shape[0]))
        return out

    def _metric(self, ir: Polynomial, data: Any) -> tuple[QualityMetric | None, Any]:
        if data.X_valid is None or data.y_valid is None:
            return None, None
        return make_metric(self.metric, ir.schema, data.y_valid), ir.prepare_input(data.X_valid)

    def _run_reduction(self, ir: Polynomial, ctx: PassContext, data: Any) -> Polynomial:
        """``method=eta, reduction=R``: the ``floor(n / R)`` monomials of largest eta."""
        assert self.reduction is not None
        eta = monomial_eta(ir, data.X_train)
        k = int(np.floor(ir.n_monomials / self.reduction))
        keep = np.sort(np.argsort(-eta, kind="stable")[:k])
        out = ir.select(keep)
        alpha = float(eta[keep].min()) if k else float("inf")
        ctx.report(self._report(ir, out, alpha, *self._metric(ir, data)))
        return out

    def _run_refit(self, ir: Polynomial, ctx: PassContext, data: Any, text: str) -> Polynomial:
        return run_refit(self, ir, ctx, text)

    def _report(self, ir: Polynomial, out: Polynomial, alpha: float, metric: QualityMetric | None, Xv: Any) -> PassReport:
        """Report with the metric of the returned polynomial itself (``evaluate`` on the validation rows)."""
        before = after = None
        if metric is not None and Xv is not None:
            before = metric(_shape(ir.bias[None, :] + ir.partial_sum(Xv, None, prepared=True), ir))
            after = metric(_shape(out.bias[None, :] + out.partial_sum(Xv, None, prepared=True), out))
        rep = prune_report(self.name, ir, out, alpha, metric, before, after, self.tol,
                           n_valid=None if Xv is None else Xv.shape[0])
        rep.metrics["method"] = self.method
        return rep


def monomial_eta(poly: Polynomial, X: Any) -> npt.NDArray[np.float64]:
    """``eta(M) = sum_k w_Mk^2 * (fraction of rows of X where M holds)``."""
    return (poly.weight ** 2).sum(axis=1) * poly.support(X)


def _shape(margin: npt.NDArray[np.float64], poly: Polynomial) -> npt.NDArray[np.float64]:
    return margin[:, 0] if poly.n_outputs == 1 else margin


def choose_alpha(poly: Polynomial, eta: npt.NDArray[np.float64], Xv: npt.NDArray[np.float64],
                 metric: QualityMetric, tol: float) -> tuple[float, float, float]:
    """Largest alpha whose validation metric is within ``tol`` of the unpruned one.

    Returns ``(alpha, metric_before, metric_after)``. ``Xv`` is prepared input.
    """
    n = poly.n_monomials
    order = np.argsort(eta, kind="stable")
    es = eta[order]
    # cut k removes order[:starts[k]]: the cut points are the starts of runs of equal eta (and n), so a cut never
    # splits ties and the search runs over distinct values (50 training rows give most monomials eta 0: one run)
    starts = np.append(np.flatnonzero(np.r_[True, es[1:] != es[:-1]]) if n else np.zeros(0, np.int64), n)
    full = before = None
    best_j, best_val = 0, 0.0
    lo, hi = 0, starts.shape[0] - 1  # positions in starts; lo's cut is within tol
    removed = np.zeros((Xv.shape[0], poly.n_outputs))  # summed contribution of order[:starts[lo]]
    while hi > lo:
        cuts = sorted({int(round(lo + (hi - lo) * i / GRID)) for i in range(1, GRID + 1)} - {lo})
        bounds = [int(starts[lo])] + [int(starts[c]) for c in cuts]
        segs = poly.partial_sums(Xv, [order[a:b] for a, b in zip(bounds[:-1], bounds[1:])], prepared=True)
        if full is None:  # level 0 covers every monomial
            full = poly.bias[None, :] + sum(segs, np.zeros_like(removed))
            before = best_val = metric(_shape(full, poly))
        acc = removed
        good_lo, good_removed = lo, removed
        for c, seg in zip(cuts, segs):
            acc = acc + seg
            val = metric(_shape(full - acc, poly))
            assert before is not None
            if metric.within(val, before, tol):
                best_j, best_val = int(starts[c]), val
                good_lo, good_removed = c, acc
        later = [c for c in cuts if c > good_lo]
        if not later or later[0] == good_lo + 1:  # the next distinct eta value is out of tol (or none): done
            break
        lo, removed, hi = good_lo, good_removed, later[0]
    if before is None:  # no monomials
        before = best_val = metric(_shape(np.broadcast_to(poly.bias, removed.shape), poly))
    alpha = float(es[best_j]) if best_j < n else float(np.nextafter(es[-1], np.inf)) if n else 0.0
    return alpha, before, best_val


__all__ = ["PruneMonomials", "choose_alpha", "monomial_eta", "prune_report"]
