"""Reading user data files for the CLI and the build: CSV bound to a model's features by name.

The rules live in :mod:`lumber.ir.binding` (one place for every entry point);
this module adds the file name to every message.
"""

from __future__ import annotations

import difflib
from pathlib import Path
from typing import Any, Sequence

import numpy as np
import numpy.typing as npt
import pandas as pd

from lumber.datasets import read_typed_csv
from lumber.ir import InputDataError
from lumber.ir.binding import bind_frame, label_notes, read_csv
from lumber.ir.interp import prepare_input


def read_frame(path: str | Path, *, header: bool = True, names: Sequence[str] | None = None) -> pd.DataFrame:
    """A CSV as a DataFrame (type-code row skipped, categorical labels kept as text).

    ``header=False`` (``--no-header``): the file has no header row; ``names`` name
    its columns in order.
    """
    return read_csv(path, header=header, names=names)  # type: ignore[no-any-return]


def read_rows(path: str | Path, model: Any, *, header: bool = True, label: str | None = None,
              features_only: bool = False, ignore: Sequence[str] = ()) -> tuple[pd.DataFrame, npt.NDArray[np.float64]]:
    """The CSV and its rows as model input, columns bound by feature name (extras ignored and said once).

    ``label`` names a column that is not a feature (it is not reported as extra); so do ``ignore``
    (an ID column, which :func:`case_ids` reads), when the file has them.
    With ``header=False`` the columns are the model's features in order. The frame
    returned is the whole file, or with ``features_only`` its feature columns in
    the model's order (ready to pass on without being bound again).
    """
    names = model.schema.feature_names
    frame = read_frame(path, header=header, names=names)
    if label is not None and header and label not in frame.columns:
        raise InputDataError(f"{path}: no label column '{label}'", *label_notes(label, frame.columns, names))
    try:
        bound = bind_frame(names, frame, source=str(path), ignore=([label] if label else []) + list(ignore))
        X = prepare_input(model.schema, bound)  # a model, or a compiled artifact's predictor
    except InputDataError as exc:
        raise InputDataError([d if d.location is not None else d.__class__(d.severity, f"{path}: {d.message}",
                                                                           d.location, d.notes)
                              for d in exc.diagnostics]) from None
    return (bound if features_only else frame), X


def case_ids(frame: pd.DataFrame, column: str, path: str | Path = "data") -> list[str]:
    """The ``--id`` column of a data file, as text (one per row); a missing column is an error."""
    if column not in frame.columns:
        near = difflib.get_close_matches(column, [str(c) for c in frame.columns], n=1)
        raise InputDataError(f"{path}: no ID column '{column}'",
                             f"did you mean '{near[0]}'?" if near else
                             f"columns: {', '.join(map(str, list(frame.columns)[:12]))}")
    col = frame[column]
    return ["" if pd.isna(v) else (str(int(v)) if isinstance(v, float) and v.is_integer() else str(v))
            for v in col.tolist()]


def csv_text(frame: pd.DataFrame) -> str:
    """A frame as CSV for people to read: a float column holding whole numbers only prints them as
    integers (``Age`` 62, not 62.0); reading the file back gives the same values."""
    out = frame.copy()
    for c in out.columns:
        col = out[c]
        if col.dtype.kind != "f":
            continue
        v = col.to_numpy(dtype=np.float64)
        known = v[~np.isnan(v)]
        whole = np.isfinite(known).all() and (np.abs(known) < 2.0**53).all() and (known == np.trunc(known)).all()
        if known.size and whole:
            out[c] = col.astype("Int64")
    return out.to_csv(index=False)


__all__ = ["case_ids", "csv_text", "read_frame", "read_rows", "read_typed_csv"]
