"""``attribution``: MonoForest global feature attribution nu(k), formula (8).

``nu(k) = sum_i E_x[ I{x_k > b_ki} * sum_{M without k} w_{M + c_ki} prod_{c in M} c(x) ]``.
Every monomial names each feature at most once, so the inner product is
just monomial ``M + c_ki`` holding on ``x``:

    nu(c) = sum_{M contains c} w_M * support(M)        (per condition)
    nu(k) = sum_{c on feature k} nu(c)                  (per feature)

per output column, signed. A monomial of degree d counts fully towards each
of its d features, as in the paper. ``MISSING`` conditions (explicit NaN
mode) count towards their feature. Supports come from the condition bitsets
of :class:`~lumber.ir.Polynomial`, so the cost is one AND per monomial entry
and row word.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar, Literal

import numpy as np
import numpy.typing as npt

from lumber.ir import Forest, Polynomial, Task
from lumber.ir.display import Display
from lumber.ir.domains import infer_domains
from lumber.ir.polynomial import ConditionKind

from ..base import Analysis, PassContext


@dataclass(frozen=True, eq=False)
class AttributionResult:
    """Signed nu per feature and per condition, one column per model output."""

    feature_names: tuple[str, ...]
    output_names: tuple[str, ...]
    nu: npt.NDArray[np.float64]
    """``[n_features, n_outputs]``."""
    condition_nu: npt.NDArray[np.float64]
    """``[n_conditions, n_outputs]``, conditions as in ``conditions``."""
    conditions: tuple[str, ...]
    """Text of each condition (``age > 30.5``, ``age is missing``)."""
    condition_feature: npt.NDArray[np.int32]
    expected_margin: npt.NDArray[np.float64]
    """``E_x[H(x)] = bias + sum_M w_M support(M)`` over the same rows."""
    n_rows: int

    def ranking(self, output: int = 0) -> list[tuple[str, float]]:
        """Features by decreasing |nu| for one output."""
        col = self.nu[:, output]
        order = np.lexsort((np.arange(col.shape[0]), -np.abs(col)))
        return [(self.feature_names[i], float(col[i])) for i in order]

    def to_dict(self, top_conditions: int = 20) -> dict[str, Any]:
        outs = []
        for k, name in enumerate(self.output_names):
            cond = self.condition_nu[:, k]
            corder = np.lexsort((np.arange(cond.shape[0]), -np.abs(cond)))[:top_conditions]
            outs.append({
                "output": name,
                "expected_margin": float(self.expected_margin[k]),
                "features": [{"feature": f, "nu": v} for f, v in self.ranking(k)],
                "top_conditions": [{"condition": self.conditions[i], "nu": float(cond[i])} for i in corder],
            })
        return {"method": "monoforest-nu", "scope": "global", "rows": self.n_rows, "outputs": outs}

    def format_text(self, top: int = 15) -> str:
        lines = [f"global attribution (MonoForest nu(k)) over all {self.n_rows:,} rows together (signed): not a "
                 "per-row reason; per-row values: --contributions"]
        for k, name in enumerate(self.output_names):
            ranked = [r for r in self.ranking(k) if r[1] != 0.0][:top]
            width = max([len(f) for f, _ in ranked] + [7])
            lines.append(f"output {name}: E[margin] = {self.expected_margin[k]:.6g}")
            lines += [f"  {f:<{width}}  {v:+.6g}" for f, v in ranked]
        return "\n".join(lines)


def output_names(model: Polynomial | Forest) -> tuple[str, ...]:
    """Each output's name for reports: its class (the positive class of a binary model), else ``output<k>``."""
    s = model.schema
    if s.task == Task.MULTICLASS:
        return tuple(str(c) for c in s.classes) if s.classes is not None else tuple(map(str, range(s.n_outputs)))
    if s.task == Task.BINARY and s.n_outputs == 1:
        return (str(s.classes[1]) if s.classes is not None else "1",)
    return tuple(f"output{k}" for k in range(s.n_outputs)) if s.n_outputs > 1 else ("output",)


def condition_texts(poly: Polynomial, rows: npt.NDArray[np.float64]) -> tuple[str, ...]:
    """Each condition for people: thresholds as the shortest decimal splitting the rows' domains alike
    (``EducationNumber > 8.5``, not ``8.500000000000002``); other conditions as the polynomial says."""
    shown = Display(poly, infer_domains(poly.schema, None, rows if rows.shape[0] else None))  # type: ignore[arg-type]
    out = []
    for c in range(poly.n_conditions):
        if poly.cond_kind[c] != ConditionKind.GREATER:
            out.append(poly.describe_condition(c))
            continue
        i = int(poly.cond_feature[c])
        text = f"{poly.schema.features[i].name} > {shown.threshold(i, float(poly.cond_threshold[c]))}"
        out.append(text + " or missing" if poly.cond_nan_true[c] else text)
    return tuple(out)


def attribution(poly: Polynomial, X: Any) -> AttributionResult:
    """nu per feature and condition over the rows ``X`` (array or DataFrame)."""
    Xp = poly.prepare_input(X)
    support = poly.support(Xp) if Xp.shape[0] else np.zeros(poly.n_monomials)
    contrib = poly.weight * support[:, None]  # E[w_M * M(x)], [n_monomials, K]
    K = poly.n_outputs
    per_entry = contrib[poly.mono_of_entry]
    cond_nu = np.stack([np.bincount(poly.mono_cond, weights=per_entry[:, k], minlength=poly.n_conditions)
                        for k in range(K)], axis=1).astype(np.float64)
    nu = np.stack([np.bincount(poly.cond_feature, weights=cond_nu[:, k], minlength=poly.n_features)
                   for k in range(K)], axis=1).astype(np.float64)
    return AttributionResult(
        feature_names=tuple(poly.schema.feature_names), output_names=output_names(poly), nu=nu,
        condition_nu=cond_nu, conditions=condition_texts(poly, Xp),
        condition_feature=poly.cond_feature.copy(), expected_margin=poly.bias + contrib.sum(axis=0),
        n_rows=int(Xp.shape[0]),
    )


@dataclass(frozen=True)
class Attribution(Analysis[Polynomial, AttributionResult]):
    """nu(k) of every feature over the training (or validation) rows; the IR passes through."""

    name: ClassVar[str] = "attribution"
    rows: Literal["train", "valid"] = "train"
    """Which rows of the pipeline data to average over."""

    def compute(self, ir: Polynomial, ctx: PassContext) -> AttributionResult:
        field = "X_train" if self.rows == "train" else "X_valid"
        data = ctx.require(self.pipeline_text(), field, why="nu(k) is a mean over data rows")
        return attribution(ir, getattr(data, field))


__all__ = ["Attribution", "AttributionResult", "attribution", "output_names"]
