"""``reasons``: the principal reasons of each case's decision, in words.

From a case's per-row contributions (:mod:`.contributions`, exact Shapley
values of the margin), the features that most pushed the decision toward the
outcome the case received: for a binary classifier the largest positive
contributions when it gets class 1 and the largest negative ones when it gets
class 0; for a multiclass model the largest positive contributions to the
margin of the class it gets; for a regressor those pushing the prediction the
way it moved from the base value. Features that pushed the other way are never
reasons. Each reason carries the case's value in words (a category's label;
``yes``/``no`` for a 0/1 feature; ``missing`` for NaN) and, where the case has
a proven counterfactual (optimal and verified on the source model), the change
that would reverse the decision.

JSON documents carry ``"schema": REASONS_SCHEMA``; a change to their fields
changes that version.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Sequence

import numpy as np
import numpy.typing as npt

from lumber.ir import FeatureKind, Schema, Task
from lumber.ir.decision import class_labels, plain
from lumber.ir.display import Display

from .contributions import Contributions

REASONS_SCHEMA = "lumber.reasons/2"
"""Version of the reasons JSON: ``{"schema", "per_case", "cases": [{"row", "id", "decision", "decision_text",
"reasons": [{"feature", "contribution", "value", "value_text"}], "reversal"}]}``; ``decision`` is the label
``predict`` returns, ``decision_text`` the decision as people read it (the class's name, ``default``, when the
schema names the classes; else ``class 1``; a regressor's prediction)."""


@dataclass(frozen=True)
class Reason:
    """One feature that pushed the decision toward the outcome received."""

    feature: str
    contribution: float
    """Its contribution to the margin toward the outcome received (always positive; exact)."""
    value: float
    value_text: str
    """The case's value for people: ``PAY_0_Pay_delay>=1: yes``, ``EDUCATION: University``."""

    def to_dict(self) -> dict[str, Any]:
        v = None if math.isnan(self.value) else self.value
        return {"feature": self.feature, "contribution": self.contribution, "value": v, "value_text": self.value_text}


@dataclass
class CaseReasons:
    """A case's principal reasons, and the change that would reverse its decision when one is proven."""

    row: int
    decision: Any
    reasons: list[Reason]
    id: str | None = None
    reversal: list[dict[str, Any]] | None = None
    """Changes (``feature``, ``before_text``, ``after_text``) of a proven counterfactual; None without one."""
    extra: dict[str, Any] = field(default_factory=dict)
    decision_name: str | None = None
    """The decision as people read it (``default``, ``class 1``); None: the decision itself."""

    def to_dict(self) -> dict[str, Any]:
        return {"row": self.row, "id": self.id, "decision": plain(self.decision), "decision_text": self.decision_text(),
                "reasons": [r.to_dict() for r in self.reasons], "reversal": self.reversal}

    def lines(self) -> list[str]:
        who = f"row {self.row}" + (f" ({self.id})" if self.id else "")
        out = [f"{who}: decided {self.decision_text()}; principal reasons:"]
        out += [f"  {k}. {r.value_text}" for k, r in enumerate(self.reasons, 1)] or ["  (no feature pushed toward it)"]
        if self.reversal:
            out.append("  would change with: " + "; ".join(
                f"{c['feature']} {c['before_text']} -> {c['after_text']}" for c in self.reversal))
        return out

    def decision_text(self) -> str:
        if self.decision_name is not None:
            return self.decision_name
        d = plain(self.decision)
        return format(d, ".6g") if isinstance(d, float) else str(d)


def value_words(schema: Schema, shown: Display, i: int, v: float) -> str:
    """``name: value`` in words: the value's words (``Feature.words``), a category label, yes/no for a 0/1
    feature, ``missing`` for NaN."""
    f = schema.features[i]
    if math.isnan(v):
        return f"{f.name}: missing"
    word = f.word(v)
    if word is not None:
        return f"{f.name}: {word}"
    label = shown.label(i, v)
    if label is not None:
        return f"{f.name}: {label}"
    binary = f.kind == FeatureKind.BINARY or (shown.domains is not None and shown.domains[i].kind.name == "BINARY")
    if binary and v in (0.0, 1.0):
        return f"{f.name}: {'yes' if v == 1.0 else 'no'}"
    return f"{f.name}: {shown.value(i, v)}"


def toward(contrib: Contributions, schema: Schema, decision: npt.NDArray[np.float64]
           ) -> tuple[npt.NDArray[np.float64], list[Any], list[str | None]]:
    """``[n, features]`` contributions signed toward each case's outcome, each outcome's label, and its
    text for people (a classifier's ``Schema.class_text``; None for a regressor)."""
    n = contrib.n_rows
    if schema.task == Task.MULTICLASS:
        k = decision.astype(np.int64)
        vals = contrib.values[np.arange(n), :, k] if contrib.values.ndim == 3 else contrib.values
        labels = class_labels(schema)
        return vals, [labels[int(c)] for c in k], [schema.class_text(int(c)) for c in k]
    if schema.task == Task.BINARY:
        v = contrib.output_values(contrib.values.shape[2] - 1 if contrib.values.ndim == 3 else 0)
        k = decision.astype(np.int64)
        sign = np.where(k == 1, 1.0, -1.0)
        labels = class_labels(schema)
        return v * sign[:, None], [labels[int(c)] for c in k], [schema.class_text(int(c)) for c in k]
    m = contrib.margin if contrib.margin.ndim == 1 else contrib.margin[:, 0]
    base = contrib.output_base(0)
    sign = np.sign(m - base)
    return (contrib.output_values(0) * sign[:, None], [float(schema.transform(np.array([x]))[0]) for x in m],
            [None] * n)


def principal_reasons(contrib: Contributions, X: npt.NDArray[np.float64], decision: npt.NDArray[np.float64],
                      schema: Schema, shown: Display, n: int = 4, rows: Sequence[int] | None = None,
                      ids: Sequence[str] | None = None) -> list[CaseReasons]:
    """At most ``n`` reasons per case, strongest first (ties in column order)."""
    pushed, outcome, names = toward(contrib, schema, decision)
    out = []
    for i in range(contrib.n_rows):
        col = pushed[i]
        order = [j for j in np.lexsort((np.arange(col.shape[0]), -col)) if col[j] > 0][:n]
        reasons = [Reason(contrib.feature_names[j], float(col[j]), float(X[i, j]), value_words(schema, shown, j,
                                                                                                float(X[i, j])))
                   for j in order]
        out.append(CaseReasons(int(rows[i]) if rows is not None else i, outcome[i], reasons,
                               ids[i] if ids is not None else None, decision_name=names[i]))
    return out


def reasons_document(cases: Sequence[CaseReasons], n: int) -> dict[str, Any]:
    return {"schema": REASONS_SCHEMA, "per_case": n, "cases": [c.to_dict() for c in cases]}


__all__ = ["REASONS_SCHEMA", "CaseReasons", "Reason", "principal_reasons", "reasons_document", "toward",
           "value_words"]
