"""Binding user data to a model's features: by name, strictly; by position only on request.

A wrong binding gives wrong numbers with no error, so every entry point (every
CLI command, the build, the Python API) reads CSV files and matches columns
here. Columns bind by feature name; extra columns are ignored and said once; a
missing, misspelt or duplicated name is an error naming it and the closest
column. Columns are taken by position only when the data carries no names: a
numpy array, a DataFrame with integer column labels, a CSV read with
``header=False`` (``--no-header``), or a model that itself records none
(``f0, f1, ...``). Malformed CSV files (empty, header only, ragged rows, bad
encoding) are errors with the line number.
"""

from __future__ import annotations

import csv
import difflib
import io
import re
import warnings
from pathlib import Path
from typing import Any, Iterable, Sequence

from .diagnostics import InputDataError, SourceSpan

DEFAULT_NAME = re.compile(r"(f|Column_|feature_|x)(\d+)\Z")
"""Names libraries give features when the model was fitted without names."""

TYPE_CODES = frozenset({"F", "D", "B", "E", "T"})
"""A CSV's optional second header row of per-column type codes (the bundled data sets have one)."""


class ColumnsIgnoredWarning(UserWarning):
    """Data had columns the model does not read (they were ignored)."""


class PositionalBindingWarning(UserWarning):
    """Columns were taken by position: the model records no feature names, or the data (an array) has none."""


def model_is_unnamed(names: Sequence[str]) -> bool:
    """The model records library default names (``f0, f1, ...`` in order): it knows no real names."""
    for i, n in enumerate(names):
        m = DEFAULT_NAME.match(n)
        if m is None or int(m.group(2)) != i:
            return False
    return True


def columns_are_unnamed(columns: Sequence[Any]) -> bool:
    """Integer column labels 0..k-1 (``pd.DataFrame(array)``) carry no names."""
    return all(isinstance(c, int) and not isinstance(c, bool) and c == i for i, c in enumerate(columns))


def _where(source: str | None) -> str:
    return f"{source}: " if source else ""


def _error(source: str | None, line: int, message: str, *notes: str) -> InputDataError:
    """An error at ``source:line`` (rendered ``file:line:1: error: ...``), or unlocated without a source."""
    return InputDataError(message, *notes, location=SourceSpan(source, line, 1) if source else None)


def suggest(name: str, candidates: Sequence[str]) -> str | None:
    """The column a missing feature name most likely meant (case and spacing first, then difflib)."""
    key = name.strip().casefold()
    for c in candidates:
        if c.strip().casefold() == key:
            return c
    close = difflib.get_close_matches(name, list(candidates), n=1, cutoff=0.6)
    if close:
        return close[0]
    close = difflib.get_close_matches(key, [c.casefold() for c in candidates], n=1, cutoff=0.6)
    return next((c for c in candidates if c.casefold() == close[0]), None) if close else None


def _looks_like_data(columns: Sequence[str]) -> bool:
    """A header whose cells are all numbers is probably the first data row."""
    def number(s: str) -> bool:
        try:
            float(s)
            return True
        except ValueError:
            return False

    return bool(columns) and all(number(str(c)) for c in columns)


def check_unique(columns: Sequence[str], source: str | None = None) -> None:
    """Duplicated column names are an error (which copy holds the feature is unknowable)."""
    seen: dict[str, int] = {}
    for i, c in enumerate(columns):
        if c in seen:
            raise _error(source, 1, f"column '{c}' appears more than once (columns {seen[c] + 1} and {i + 1})",
                         "each feature must be exactly one column: rename or drop the copies")
        seen[c] = i


def bind(names: Sequence[str], columns: Sequence[Any], *, source: str | None = None,
         ignore: Iterable[str] = ()) -> list[int]:
    """Position in ``columns`` of each of the model's features ``names``, or an :class:`InputDataError`.

    ``ignore`` lists columns known not to be features (a label): they are neither
    bound nor reported as extra.
    """
    n = len(names)
    if columns_are_unnamed(columns):
        if len(columns) != n:
            raise _error(source, 1, f"data has {len(columns)} columns but the model reads {n} features",
                         _expected(names))
        return list(range(n))
    cols = [str(c) for c in columns]
    check_unique(cols, source)
    skip = set(ignore)
    pos = {c: i for i, c in enumerate(cols)}
    missing = [m for m in names if m not in pos]
    if not missing:
        wanted = set(names)
        extra = [c for c in cols if c not in wanted and c not in skip]
        if extra:
            shown = ", ".join(extra[:8]) + (f" and {len(extra) - 8} more" if len(extra) > 8 else "")
            warnings.warn(f"{_where(source)}ignoring {len(extra)} column{'s' if len(extra) != 1 else ''} the model "
                          f"does not read: {shown}", ColumnsIgnoredWarning, stacklevel=2)
        return [pos[m] for m in names]
    features = [i for i, c in enumerate(cols) if c not in skip]
    if model_is_unnamed(names) and len(features) == n:
        warnings.warn(f"{_where(source)}the model records no feature names ({names[0]}..{names[-1]}): "
                      f"taking the {n} columns by position", PositionalBindingWarning, stacklevel=2)
        return features
    unmatched = [c for c in cols if c not in set(names) and c not in skip]
    notes = []
    for m in missing[:8]:
        close = suggest(m, unmatched)
        notes.append(f"'{m}': no such column" + (f"; did you mean '{close}'?" if close else ""))
    if len(missing) > 8:
        notes.append(f"... and {len(missing) - 8} more")
    if _looks_like_data(cols):
        notes.append("the first line looks like data, not a header: pass --no-header to take the columns by "
                     "position in the model's order (Python: pass a numpy array)")
    notes.append(_expected(names))
    raise _error(source, 1, f"{len(missing)} of the model's {n} features {'has' if len(missing) == 1 else 'have'} no column: "
                 + ", ".join(f"'{m}'" for m in missing[:5]) + (" ..." if len(missing) > 5 else ""), *notes)


def warn_if_positional(names: Sequence[str], data: Any, what: str = "data") -> None:
    """Say so when ``data`` carries no column names (an array, a list) but the model records real ones:
    its columns are then taken by position, right only if they are in the model's order. A DataFrame,
    Series or dict binds by name and says nothing."""
    if data is None or isinstance(data, dict) or hasattr(data, "columns") or hasattr(data, "index"):
        return
    if not names or model_is_unnamed(names):
        return
    shown = ", ".join(names[:6]) + (", ..." if len(names) > 6 else "")
    warnings.warn(f"{what} has no column names: its columns are taken by position as the model's features "
                  f"({shown}); pass a DataFrame with named columns to bind them by name (to take arrays by "
                  "position on purpose: warnings.simplefilter('ignore', lumber.ir.binding.PositionalBindingWarning))",
                  PositionalBindingWarning, stacklevel=4)


def label_notes(label: str | None, columns: Sequence[Any], features: Sequence[str]) -> list[str]:
    """What to say when a file has no label column ``label`` (or none was named): the closest column that
    is not a feature (a label is never one: 'Class' once suggested the feature 'WorkClass' beside a column
    'label'), and the file's columns."""
    cols = [str(c) for c in columns]
    others = [c for c in cols if c not in set(features)]
    close = suggest(label, others) if label else None
    if close is not None:
        notes = [f"did you mean '{close}'?"]
    elif len(others) == 1:
        notes = [f"the one column that is not a feature is '{others[0]}': is that the label?"]
    elif not others:
        notes = ["every column is one of the model's features: the file holds no label column"]
    else:
        notes = [f"columns that are not features: {', '.join(others[:8])}"]
    return notes + [f"columns: {', '.join(cols[:15])}{' ...' if len(cols) > 15 else ''}"]


def _expected(names: Sequence[str]) -> str:
    return f"the model reads: {', '.join(names[:15])}{' ...' if len(names) > 15 else ''}"


def bind_frame(names: Sequence[str], frame: Any, *, source: str | None = None, ignore: Iterable[str] = ()) -> Any:
    """The DataFrame's feature columns in the model's order, named as the model names them."""
    idx = bind(names, list(frame.columns), source=source, ignore=ignore)
    out = frame.iloc[:, idx]
    out.columns = list(names)
    return out


# -- CSV files ---------------------------------------------------------------------------------------------------


def _decode(data: bytes, label: str) -> str:
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = data[:exc.start].count(b"\n") + 1
        raise _error(label, line, f"not UTF-8 text (byte {data[exc.start]:#04x})", "save the CSV as UTF-8") from None


def _gunzipped(data: bytes, label: str) -> bytes:
    """A gzip-compressed CSV (``train.csv.gz``, as the bundled data sets ship) read as its text would be."""
    if data[:2] != b"\x1f\x8b":
        return data
    import gzip
    import zlib

    try:
        return gzip.decompress(data)
    except (OSError, EOFError, zlib.error) as exc:
        raise _error(label, 1, f"damaged gzip file ({exc})", "re-compress the CSV, or pass it uncompressed") from None


def _records(text: str, label: str) -> list[tuple[int, list[str]]]:
    """Non-blank CSV records with the line each starts on."""
    out = []
    reader = csv.reader(io.StringIO(text, newline=""))
    start = 1
    try:
        for rec in reader:
            if rec and any(cell.strip() for cell in rec) or len(rec) > 1:
                out.append((start, rec))
            start = reader.line_num + 1
    except csv.Error as exc:
        raise _error(label, reader.line_num, f"cannot read as CSV ({exc})") from None
    return out


def checked_csv_text(path: str | Path, *, header: bool = True, names: Sequence[str] | None = None) -> str:
    """A CSV file's text once its shape is checked: not empty, a named header with unique names
    and at least one row, every row as wide as the header (errors carry the line number)."""
    p = Path(path)
    label = str(path)
    try:
        data = p.read_bytes()
    except FileNotFoundError:
        raise InputDataError(f"{label}: no such file") from None
    except IsADirectoryError:
        raise InputDataError(f"{label}: is a directory, expected a CSV file") from None
    except OSError as exc:
        raise InputDataError(f"{label}: cannot read ({exc.strerror})") from None
    text = _decode(_gunzipped(data, label), label)
    records = _records(text, label)
    accepted = ("expected a header row naming the model's features, then one row per case"
                if header else "expected one row per case, one column per feature in the model's order")
    if not records:
        raise _error(label, 1, "file is empty", accepted)
    if header:
        head_line, head = records[0]
        width = len(head)
        for i, c in enumerate(head):
            if not c.strip():
                raise _error(label, head_line, f"column {i + 1} of the header has no name", accepted)
        if _looks_like_data(head):
            raise _error(label, head_line, "the first line looks like data, not a header row naming the features",
                         "pass --no-header to take the columns by position, in the model's feature order "
                         "(Python: pass a numpy array)", accepted)
        check_unique([c.strip() for c in head], label)
        body = records[1:]
        if body and all(c.strip() in TYPE_CODES for c in body[0][1]):
            body = body[1:]
        if not body:
            raise _error(label, head_line, "has a header but no rows", accepted)
        what = "the header has"
    else:
        if names is None:
            raise ValueError("read_csv(header=False) needs names")
        width = len(names)
        body = records
        what = f"the model reads (with --no-header, columns are the features in order: {', '.join(names[:6])}" \
               f"{' ...' if len(names) > 6 else ''})"
    for line, rec in body:
        if len(rec) != width:
            raise _error(label, line, f"row has {len(rec)} field{'s' if len(rec) != 1 else ''}, {what} {width}")
    return text


def read_csv(path: str | Path, *, header: bool = True, names: Sequence[str] | None = None,
             na_values: Sequence[str] = ("?",)) -> Any:
    """A CSV file as a DataFrame, its shape checked first (:func:`checked_csv_text`).

    With ``header=False`` the file has no header row and ``names`` name its columns
    (the model's features, in order). A second header row of type codes is skipped.
    """
    import pandas as pd

    label = str(path)
    text = checked_csv_text(path, header=header, names=names)
    accepted = "expected comma-separated values"
    try:
        if header:
            frame = pd.read_csv(io.StringIO(text), keep_default_na=True, na_values=list(na_values),
                                skipinitialspace=False)
            frame.columns = [c.strip() for c in map(str, frame.columns)]
            if len(frame) and all(str(v).strip() in TYPE_CODES for v in frame.iloc[0]):
                frame = pd.read_csv(io.StringIO(text), skiprows=[1], keep_default_na=True, na_values=list(na_values))
                frame.columns = [c.strip() for c in map(str, frame.columns)]
        else:
            frame = pd.read_csv(io.StringIO(text), header=None, names=list(names or ()), keep_default_na=True,
                                na_values=list(na_values))
    except (pd.errors.ParserError, pd.errors.EmptyDataError, ValueError) as exc:
        raise InputDataError(f"{label}: cannot read as CSV ({exc})", accepted) from None
    return frame


__all__ = ["ColumnsIgnoredWarning", "DEFAULT_NAME", "PositionalBindingWarning", "bind", "bind_frame",
           "label_notes", "warn_if_positional",
           "check_unique", "checked_csv_text", "columns_are_unnamed", "suggest", "model_is_unnamed", "read_csv"]
