"""What ``prune`` and ``prune-refit`` share: their option checks and their report.

Kept apart so ``prune{method=refit}`` (:mod:`.prune_monomials`) can delegate to
:mod:`.prune_refit` without either importing the other back.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from lumber.ir import CompileError, Polynomial

from ..base import PassReport
from ..quality import METRICS, QualityMetric


def check_prune_options(*, alpha: Any, tol: Any, metric: str, method: str, step: Any, iters: Any,
                        reduction: Any) -> None:
    """Refuse option values no pruning accepts (a CompileError naming the option)."""
    if alpha != "auto" and not (isinstance(alpha, (int, float)) and alpha >= 0):
        raise CompileError(f"alpha must be a non-negative number or 'auto', got {alpha!r}")
    if not tol >= 0:
        raise CompileError(f"tol must be non-negative, got {tol!r}")
    if metric != "auto" and metric not in METRICS:
        raise CompileError(f"unknown metric '{metric}'", f"known metrics: auto, {', '.join(METRICS)}")
    if method not in ("eta", "refit"):
        raise CompileError(f"unknown method '{method}'", "known methods: eta (the paper's), refit")
    if not (isinstance(step, (int, float)) and 0 < step < 1):
        raise CompileError(f"step must be a fraction in (0, 1), got {step!r}")
    if not (isinstance(iters, int) and not isinstance(iters, bool) and iters >= 1):
        raise CompileError(f"iters must be a positive integer, got {iters!r}")
    if reduction is not None:
        if not (isinstance(reduction, (int, float)) and reduction >= 1):
            raise CompileError(f"reduction must be a number >= 1 (monomials before / after), "
                               f"got {reduction!r}")
        if alpha != "auto":
            raise CompileError("give alpha or reduction, not both", "reduction=R keeps floor(n / R) monomials")


def prune_report(name: str, before_ir: Polynomial, after_ir: Polynomial, alpha: float, metric: QualityMetric | None,
                 before: float | None, after: float | None, tol: float, n_valid: int | None) -> PassReport:
    kept, total = after_ir.n_monomials, before_ir.n_monomials
    ratio = total / kept if kept else float("inf")
    text = f"kept {kept:,} of {total:,} monomials (dropped {total - kept:,}; {ratio:.2f}x fewer)"
    text += f", alpha={alpha:.4g}" if np.isfinite(alpha) else ", refit path" if np.isnan(alpha) else ""
    metrics: dict[str, Any] = {"kept": kept, "dropped": total - kept, "monomials_before": total,
                               "reduction": ratio, "alpha": None if np.isnan(alpha) else alpha,
                               "conditions_before": before_ir.n_conditions, "conditions_after": after_ir.n_conditions}
    if metric is not None and before is not None and after is not None:
        text += f"; validation {metric.name} {before:.6f} -> {after:.6f} on {n_valid:,} rows (tol {tol:g})"
        metrics.update(metric=metric.name, metric_before=before, metric_after=after, tol=tol, validation_rows=n_valid)
    return PassReport(name, text, metrics)


__all__ = ["check_prune_options", "prune_report"]
