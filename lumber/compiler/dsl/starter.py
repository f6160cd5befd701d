"""A starter constraint file for a model: every feature described, nothing constrained.

``lumber init-constraints`` writes it. Each feature gets a comment with its
kind, its categories, the values seen in training data (when given) and the
thresholds the model splits on. What may change is the user's decision, so
no restriction is active; the only statements are the value kinds inferred
from the data (``Age: integer``), which lumber assumes anyway whenever those
rows are the reference, written out so the user sees and can edit them.
"""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np
import pandas as pd

from lumber.ir import Feature, FeatureKind, Forest, Task
from lumber.ir.display import Display
from lumber.ir.domains import DomainKind, Domains

from .names import quote_name
from .printer import number_text


def _num(v: float) -> str:
    if v == int(v) and abs(v) < 1e16:
        return str(int(v))
    return f"{v:.6g}"


def _labels(values: Sequence[Any], limit: int = 12) -> str:
    shown = [str(v) for v in values[:limit]]
    return ", ".join(shown) + (f", ... ({len(values)} in all)" if len(values) > limit else "")


def _splits(forest: Forest, j: int, shown: Display) -> str:
    at = (forest.feature == j)
    num = at & ~forest.is_categorical & (forest.left >= 0)
    cat = at & forest.is_categorical
    parts = []
    if num.any():
        thr = np.unique(forest.threshold[num])
        # thresholds as the explanations print them (LightGBM's zero band 1e-35 read "splits 1e-35 .. 70654.5")
        lo, hi = shown.threshold(j, float(thr[0])), shown.threshold(j, float(thr[-1]))
        parts.append(f"splits {lo} .. {hi} ({len(thr)} thresholds)" if len(thr) > 1 else f"splits at {lo}")
    if cat.any():
        codes = np.unique(np.concatenate([forest.categories_of(int(i)) for i in np.flatnonzero(cat)]))
        parts.append(f"categorical splits on {len(codes)} code{'s' if len(codes) != 1 else ''}")
    return "; ".join(parts) if parts else "not used by the model"


def _observed(f: Feature, col: pd.Series) -> str:
    vals = col.dropna()
    missing = int(col.isna().sum())
    tail = f", {missing} missing" if missing else ""
    if len(vals) == 0:
        return f"data: no values{tail}"
    if pd.api.types.is_numeric_dtype(vals):
        arr = vals.to_numpy(dtype=float)
        uniq = np.unique(arr)
        if f.kind in (FeatureKind.CATEGORICAL, FeatureKind.BINARY) and len(uniq) <= 12:
            return f"data: {{{', '.join(_num(u) for u in uniq)}}}{tail}"
        return f"data: {_num(uniq[0])} .. {_num(uniq[-1])} ({len(uniq)} distinct){tail}"
    uniq_s = sorted({str(v) for v in vals})
    return f"data: {{{_labels(uniq_s)}}}{tail}"


def _kind_lines(domains: Domains) -> list[str]:
    """Active ``Feature: integer`` / ``binary`` statements for kinds the data showed."""
    rows = [d for d in domains.features if d.source == "data"]
    if not rows:
        return []
    width = max(len(quote_name(d.name)) + len(d.kind.value) + 2 for d in rows)
    out = ["", "# Value kinds seen in the data (explanations keep them; by default values also stay in the",
           "# observed range, which a bound here such as `Age: between 16 and 99` replaces):"]
    for d in rows:
        stmt = f"{quote_name(d.name)}: {d.kind.value}"
        seen = f"observed {_num(d.lower)} .. {_num(d.upper)}" if d.kind != DomainKind.BINARY else "observed 0, 1"
        out.append(f"{stmt:<{width}}  # {seen}")
    return out


def starter_text(forest: Forest, model_name: str, frame: pd.DataFrame | None = None,
                 data_name: str | None = None, domains: Domains | None = None) -> str:
    """The commented starter file for ``forest`` (observed values from ``frame`` when given)."""
    schema = forest.schema
    task = schema.task.name.lower()
    classes = ""
    if schema.task in (Task.BINARY, Task.MULTICLASS):
        labels = schema.classes if schema.classes is not None else range(2 if schema.task == Task.BINARY else schema.n_outputs)
        classes = f", classes {_labels(list(labels))}"
    lines = [
        f"# Constraints for {model_name} ({task}{classes}; {schema.n_features} features).",
        "# Written by `lumber init-constraints`. Nothing is constrained yet: every feature may",
        "# change freely at unit cost. Add statements below; the syntax, in brief:",
        "#   immutable A, B                      A and B never change",
        "#   A: increase, between 18 and 90      direction and bounds (A0 is A's original value)",
        "#   A: >= A0 + 2, cost 2                bounds relative to the original, cost per unit",
        "#   A: cost up 1 per 1000, cost down 5  asymmetric costs",
        "#   A: in {x, y}                        allowed categories (labels or codes)",
        "#   A: integer, step 100                whole numbers; changes in steps of 100",
        "#   onehot R = {R_a, R_b, R_c}          one-hot columns: exactly one is 1",
        "#   2*dA - dB <= 5000                   linear relation between changes (dA = A - A0)",
        "#   if A increases then B >= B0 + 2     implication",
        "#   changes <= 3 | norm l1 | scale std | plausible isolation-forest(contamination=0.1)",
        "#   target class 1 | target between 0.2 and 0.5",
        "# Full reference: docs/constraints.md. Check: lumber check FILE --model MODEL",
        "#",
    ]
    source = f"values in {data_name}" if frame is not None else "no data given (--data TRAIN.csv adds observed values)"
    lines.append(f"# Features ({source}):")
    width = max((len(quote_name(f.name)) for f in schema.features), default=0)
    shown = Display(forest, domains)
    for j, f in enumerate(schema.features):
        desc = [f.kind.name.lower()]
        if f.categories:
            desc.append("categories {" + _labels([f"{i}={c}" if str(c) != str(i) else str(c)
                                                  for i, c in enumerate(f.categories)]) + "}")
        if frame is not None:
            desc.append(_observed(f, frame[f.name]) if f.name in frame.columns else "data: column absent")
        desc.append(_splits(forest, j, shown))
        lines.append(f"#   {quote_name(f.name):<{width}}  " + "; ".join(desc))
    if domains is not None:
        lines += _kind_lines(domains)
    return "\n".join(lines) + "\n"


__all__ = ["starter_text", "number_text"]
