"""The ``cascade`` pass: a formula-5 fit of the source's margins in front of the exact forest.

The fitted oblivious tables (:mod:`lumber.passes.transforms.oblivious_fit`) approximate the source's
margins; their decisions can differ only where the table margin ``a`` is close to the decision threshold
0. The *band* ``[lo, hi]`` reaches the farthest validation rows whose decision differs on each side of 0
(times :data:`BAND_SAFETY`), and every row with ``lo <= a <= hi`` is recomputed by the exact forest
(:class:`lumber.ir.cascade.Cascade`). So on the validation rows the cascade decides exactly as the source
does, and most rows never touch the forest. An ``agreement`` below 1 leaves the few disagreements
farthest from the decision outside the band (the widest one alone would set the band for every row: 57%
of Adult's rows). ``lumber.compile_within`` searches prefixes of one fit with the same band
(:mod:`lumber.compiler.tolerance`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar, Literal

import numpy as np
import numpy.typing as npt

from lumber.ir import CompileError, Forest, Task
from lumber.ir.cascade import Band, Cascade, inside_band

from ..base import PassContext, PassReport, Transform
from .oblivious_fit import FitOptions, fit_oblivious
from .quantize import quantize_ensemble

BAND_SAFETY = 1.25
"""The band is this much wider than the widest disagreement seen on validation rows."""


def decision_band(approx: npt.NDArray[np.float64], exact: npt.NDArray[np.float64], *, ge: bool = False,
                  agreement: float = 1.0) -> Band:
    """Narrowest band (each side times :data:`BAND_SAFETY`) outside which ``approx`` decides as ``exact`` on
    these rows but for at most ``floor((1 - agreement) * n)`` of them.

    A row decides class 1 when its margin is > 0 (``margin_ge``: >= 0); rows inside the band go to the
    exact forest, so every listed row whose decision differs falls inside, except the allowed few far from
    the decision (one stray row then no longer sets the band for all). The two sides are set apart
    (errors are not symmetric around the decision); the spare rows go to the side where they narrow
    the band most, counted in rows inside.
    """
    a, e = np.asarray(approx).reshape(-1), np.asarray(exact).reshape(-1)
    differ = ((a >= 0) != (e >= 0)) if ge else ((a > 0) != (e > 0))
    spare = int(np.floor((1.0 - agreement) * a.shape[0] + 1e-9))
    up = np.sort(a[differ & (a > 0)])[::-1] * BAND_SAFETY  # decided 1, should be 0: hi must reach them
    down = np.sort(-a[differ & (a <= 0)])[::-1] * BAND_SAFETY
    side = lambda s, k: float(s[k]) if k < s.shape[0] else 0.0  # noqa: E731
    order = np.sort(a)
    best: tuple[int, float, float] | None = None
    for k_up in range(min(spare, up.shape[0]) + 1):
        hi, lo = side(up, k_up), -side(down, spare - k_up)
        inside = int(np.searchsorted(order, hi, side="right") - np.searchsorted(order, lo, side="left"))
        if best is None or inside < best[0]:
            best = (inside, lo, hi)
    assert best is not None
    eps = 1e-12 * (1.0 + float(np.abs(e).max(initial=0.0)))
    return best[1] - eps, best[2] + eps


def cascade_margins(approx: npt.NDArray[np.float64], exact_of: Any, X: npt.NDArray[Any],
                    band: Band) -> tuple[npt.NDArray[np.float64], float]:
    """The cascade's margins (``exact_of(rows)`` for rows inside the band) and the share of rows sent there."""
    a = np.asarray(approx, dtype=np.float64).reshape(-1).copy()
    inside = inside_band(a, band)
    if inside.any():
        a[inside] = np.asarray(exact_of(X[inside])).reshape(-1)
    return a, float(inside.mean()) if a.size else 0.0


def check_agreement(agreement: Any) -> float:
    """``agreement`` as a share of validation rows in (0, 1], or a CompileError naming it."""
    try:
        a = float(agreement)
    except (TypeError, ValueError):
        raise CompileError(f"agreement must be a number, got {agreement!r}") from None
    if not 0.0 < a <= 1.0:
        raise CompileError(f"agreement must be a share of rows in (0, 1], got {agreement!r}",
                           "e.g. 0.999: at least 99.9% of validation rows decide as the source")
    return a


@dataclass(frozen=True)
class MakeCascade(FitOptions, Transform[Forest, Cascade]):
    """``cascade``: fit oblivious tables on the training rows, set the band on the validation rows (LOSSY
    outside the validation rows; a regressor gets the tables alone)."""

    name: ClassVar[str] = "cascade"
    agreement: float = 1.0
    """Share of validation rows whose decision must stay the source's (binary classifiers)."""
    trees: int | Literal["auto"] = "auto"
    """Tables kept: a prefix of the fit; ``auto``: its formula-5 optimum."""

    def __post_init__(self) -> None:
        self.check()
        check_agreement(self.agreement)
        if self.trees != "auto" and (not isinstance(self.trees, int) or self.trees < 1):
            raise CompileError(f"trees must be a positive integer or 'auto', got {self.trees!r}")

    def run(self, ir: Forest, ctx: PassContext) -> Cascade:
        data = ctx.require(self.pipeline_text(), "X_train", "X_valid",
                           why="the tables are fitted on training rows and the band is set on validation rows")
        schema = ir.schema
        if schema.n_outputs != 1 or schema.task not in (Task.BINARY, Task.REGRESSION):
            raise CompileError(f"a cascade covers binary classifiers and regressors; this model is "
                               f"{schema.task.name.lower()} with {schema.n_outputs} outputs")
        fit = fit_oblivious(ir, ir.prepare_input(data.X_train), self.options_as(FitOptions))
        ens = quantize_ensemble(fit.ensemble(None if self.trees == "auto" else self.trees))
        Xv = ir.prepare_input(data.X_valid)
        exact = np.asarray(ir.evaluate(Xv)).reshape(-1)
        approx = np.asarray(ens.evaluate(Xv)).reshape(-1)
        band = decision_band(approx, exact, ge=schema.decision == "margin_ge", agreement=self.agreement) \
            if schema.task == Task.BINARY else None
        got, share = cascade_margins(approx, ir.evaluate, Xv, band) if band is not None else (approx, 0.0)
        diff = np.abs(got - exact)
        quality: dict[str, Any] = {"validation_rows": int(Xv.shape[0]), "exact_share": share,
                                   "max_abs_margin_change": float(diff.max(initial=0.0)),
                                   "mean_abs_margin_change": float(diff.mean()) if diff.size else 0.0}
        text = f"{ir.n_trees:,} trees -> {ens.n_trees - 1:,} fitted tables"
        if band is not None:
            quality["agreement"] = float(np.mean(schema.class_index(got) == schema.class_index(exact)))
            text += (f" before the exact forest for {100 * share:.1f}% of {Xv.shape[0]:,} validation rows (band "
                     f"[{band[0]:.4g}, {band[1]:.4g}]); decisions agree on {100 * quality['agreement']:.2f}%")
        text += f"; |margin change| max {quality['max_abs_margin_change']:.3g}; LOSSY"
        ctx.report(PassReport(self.name, text, {**fit.report, **quality}))
        return Cascade(ir, ens, band, quality)


__all__ = ["BAND_SAFETY", "Band", "MakeCascade", "cascade_margins", "check_agreement", "decision_band",
           "inside_band"]
