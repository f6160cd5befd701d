"""Reading user data files for the CLI (CSV, with an optional row of type codes)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import numpy.typing as npt
import pandas as pd

from lumber.datasets import read_typed_csv
from lumber.ir import Forest, InputDataError


def read_frame(path: str | Path) -> pd.DataFrame:
    """A CSV as a DataFrame (type-code row honoured, categorical labels kept as text)."""
    p = Path(path)
    if not p.exists():
        raise InputDataError(f"{p}: no such file")
    try:
        frame = pd.read_csv(p, keep_default_na=True, na_values=["?"])
    except (pd.errors.ParserError, pd.errors.EmptyDataError, UnicodeDecodeError) as exc:
        raise InputDataError(f"{p}: cannot read as CSV ({exc})", "expected comma-separated values with a header row") from None
    if len(frame) and all(str(v).strip() in ("F", "D", "B", "E", "T") for v in frame.iloc[0]):
        frame = pd.read_csv(p, skiprows=[1], keep_default_na=True, na_values=["?"])
    return frame


def read_rows(path: str | Path, forest: Forest) -> tuple[pd.DataFrame, npt.NDArray[np.float64]]:
    """The CSV and its rows as model input (columns matched by feature name; extras ignored)."""
    frame = read_frame(path)
    try:
        X = forest.prepare_input(frame)
    except InputDataError as exc:
        raise InputDataError([d.__class__(d.severity, f"{path}: {d.message}", d.location, d.notes)
                              for d in exc.diagnostics]) from None
    return frame, X


__all__ = ["read_frame", "read_rows", "read_typed_csv"]
