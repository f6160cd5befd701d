"""Scoring files of any size: CSV and Parquet (a path, or ``-`` for standard input) in chunks.

:func:`predict_file` reads ``chunk_rows`` rows at a time, binds them to the
model's features by column name (once, from the header), predicts and writes
each chunk before reading the next, so memory stays bounded whatever the row
count. ``lumber predict`` is this function.

CSV is split into blocks of whole lines; each block's shape is checked with
numpy (the fields of every line are counted at once; a block holding a quote
character is counted by the csv module), then parsed by pandas' C reader. A
row wider or narrower than the header is an error naming its line. Parquet is
read with pyarrow's ``iter_batches``, only the model's columns. Gzip-compressed
CSV is read as its text; a Parquet file on standard input is spooled to a
temporary file first (Parquet keeps its index at the end).
"""

from __future__ import annotations

import copy
import csv
import gzip
import io
import json
import os
import shutil
import sys
import tempfile
import zlib
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any, Iterator, Sequence

import numpy as np
import numpy.typing as npt
import pandas as pd

from lumber.ir import Cutoff, InputDataError, Task, ValidationError, atomic_open
from lumber.ir.binding import TYPE_CODES, _error, _looks_like_data, bind, check_unique, suggest
from lumber.ir.decision import with_cutoff
from lumber.ir.interp import prepare_input


PARQUET_MAGIC, GZIP_MAGIC = b"PAR1", b"\x1f\x8b"
FORMATS = ("csv", "jsonl", "parquet")
NA_VALUES = ["?"]
"""Read as missing, besides pandas' defaults (empty, NA, NaN, ...), as :func:`lumber.ir.binding.read_csv` does."""


@dataclass(frozen=True, kw_only=True)
class StreamOptions:
    """How :func:`predict_file` reads, predicts and writes."""

    chunk_rows: int = 262_144
    """Rows read, predicted and written at a time (memory is proportional to it, not to the file)."""
    threads: int = 1
    """Threads inside this process for each chunk's prediction (compiled artifacts)."""
    header: bool = True
    """False: the CSV has no header row; its columns are the model's features in order."""
    raw: bool = False
    """Write only raw margins (no probabilities or decisions)."""
    output_format: str | None = None
    """csv, jsonl or parquet; None: from the output's suffix, else csv."""
    progress: bool | None = None
    """Rows scored, on stderr; None: when stderr is a terminal (as :class:`lumber.runtime.progress.Progress`)."""
    cutoff: Cutoff | None = None
    """A binary classifier's decision rule (``--threshold``); None: the model's own."""
    id_column: str | None = None
    """A column of the input naming each row (``--id``): written first in every output row."""
    class_names: tuple[str, ...] | None = None
    """What the classes mean to people, in output order (``--class-names``): a ``decision`` column names each
    row's class; None: the schema's own names, if any."""

    def __post_init__(self) -> None:
        if int(self.chunk_rows) < 1:
            raise InputDataError(f"chunk_rows must be at least 1, got {self.chunk_rows}")
        if int(self.threads) < 1:
            raise InputDataError(f"threads must be at least 1, got {self.threads}")
        if self.output_format is not None and self.output_format not in FORMATS:
            raise InputDataError(f"unknown output format {self.output_format!r}", f"formats: {', '.join(FORMATS)}")


def output_format(output: str | Path | None, options: StreamOptions) -> str:
    """The format written: the option, else the output's suffix (.jsonl, .parquet, .pq), else csv."""
    fmt = options.output_format
    if fmt is None:
        suffix = Path(output).suffix.lower() if output not in (None, "-") else ""
        fmt = {".jsonl": "jsonl", ".parquet": "parquet", ".pq": "parquet"}.get(suffix, "csv")
    if fmt == "parquet":
        if output in (None, "-"):
            raise InputDataError("parquet output is a binary file: give -o PATH.parquet")
        _pyarrow("parquet output")
    return fmt


def _pyarrow(what: str) -> Any:
    try:
        import pyarrow.parquet as pq
    except ImportError:
        raise InputDataError(f"{what} needs pyarrow, which is not installed",
                             "pip install pyarrow (or lumber[parquet]), or use CSV") from None
    return pq


def predict_file(model: Any, source: str | Path | IO[bytes], output: str | Path | IO[str] | None = None, *,
                 options: StreamOptions | None = None) -> int:
    """Predict every row of a CSV or Parquet file, chunk by chunk; returns the number of rows.

    Parameters
    ----------
    model : Predictor, Forest or other IR with ``evaluate``
        What predicts (``lumber.load_compiled``, ``lumber.compile``, ``lumber.load``).
    source : path, ``"-"`` or binary file object
        CSV (optionally gzip-compressed) with a header row naming the model's features (extra
        columns are ignored, order is free), or Parquet (by suffix or magic bytes). ``"-"``: stdin.
    output : path, ``"-"``, text file object or None
        Where the predictions go, written atomically to a path; None or ``"-"``: stdout.
        Columns: the ID column (``options.id_column``), ``raw`` (``raw_k`` per output),
        ``proba_<class>`` and ``prediction`` (under ``options.cutoff`` when given).
    options : StreamOptions
        Chunk size, threads, format, header, progress.
    """
    options = options or StreamOptions()
    fmt = output_format(output if not hasattr(output, "write") else None, options)
    model = _with_threads(model, options.threads)
    schema = model.schema
    rule = with_cutoff(schema, options.cutoff)
    if options.class_names is not None:
        try:
            rule = rule.named(options.class_names)
        except ValidationError as exc:
            raise InputDataError(f"--class-names: {exc.diagnostics[0].message}",
                                 "give one name per class, in output order: --class-names paid,default") from None
    with ExitStack() as stack:
        fh, label, size = stack.enter_context(_open_source(source))
        chunks = _parquet_chunks(fh, label, schema, options) if fh.peek(4)[:4] == PARQUET_MAGIC or \
            str(label).lower().endswith((".parquet", ".pq")) else _csv_chunks(fh, label, schema, options)
        tty = bool(getattr(sys.stderr, "isatty", lambda: False)())
        show = tty if options.progress is None else options.progress
        writer = stack.enter_context(_writer(output, fmt))
        n = read = 0
        for X, ids, consumed in chunks:
            frame = prediction_frame(model, X, options.raw, rule)
            if ids is not None:
                frame.insert(0, str(options.id_column), ids)
            writer(frame)
            n, read = n + len(X), read + consumed
            if show:  # one line redrawn on a terminal, a line per chunk in a log
                done = f" ({100 * read / size:.0f}% of the file)" if size else ""
                sys.stderr.write(f"\rscoring {label}: {n:,} rows{done}" if tty else
                                 f"scoring {label}: {n:,} rows{done}\n")
                sys.stderr.flush()
        if show and tty:
            sys.stderr.write("\n")
        if n == 0:
            raise InputDataError(f"{label}: has no rows")
    return n


def _with_threads(model: Any, threads: int) -> Any:
    if threads > 1 and hasattr(model, "threads"):
        model = copy.copy(model)
        model.threads = threads
    return model


@contextmanager
def _open_source(source: str | Path | IO[bytes]) -> Iterator[tuple[Any, str, int | None]]:
    """(a buffered binary stream, its label, its size in bytes when known); gzip read as its text."""
    owned = False
    raw: Any
    if not isinstance(source, (str, Path)):
        raw, label, size = source, str(getattr(source, "name", "<stream>")), None
    elif str(source) == "-":
        raw, label, size = sys.stdin.buffer, "<stdin>", None
    else:
        p = Path(source)
        try:
            raw, label, size, owned = p.open("rb"), str(p), p.stat().st_size, True
        except FileNotFoundError:
            raise InputDataError(f"{p}: no such file") from None
        except IsADirectoryError:
            raise InputDataError(f"{p}: is a directory, expected a CSV or Parquet file") from None
        except OSError as exc:
            raise InputDataError(f"{p}: cannot read ({exc.strerror})") from None
    fh: Any = raw if isinstance(raw, io.BufferedReader) else io.BufferedReader(raw)
    try:
        if fh.peek(2)[:2] == GZIP_MAGIC:
            fh = io.BufferedReader(gzip.GzipFile(fileobj=fh))  # type: ignore[arg-type]
            size = None
        yield fh, label, size
    except (gzip.BadGzipFile, EOFError, zlib.error) as exc:
        raise _error(label, 1, f"damaged gzip file ({exc})",
                     "re-compress the CSV, or pass it uncompressed") from None
    finally:
        if owned:
            raw.close()


# -- CSV ---------------------------------------------------------------------------------------------------------


ACCEPTED = "expected a header row naming the model's features, then one row per case"


def _header(fh: io.BufferedReader, label: str) -> tuple[list[str], int, int]:
    """The header's column names, its length in bytes and its line (blank lines before it are skipped)."""
    number = 0
    while True:
        line = fh.readline()
        number += 1
        if not line:
            raise _error(label, 1, "file is empty", ACCEPTED)
        if line.strip():
            break
    text = _decode(line, label, number).lstrip("\ufeff")
    head = [c.strip() for c in next(csv.reader([text]))]
    for i, c in enumerate(head):
        if not c:
            raise _error(label, number, f"column {i + 1} of the header has no name", ACCEPTED)
    if _looks_like_data(head):
        raise _error(label, number, "the first line looks like data, not a header row naming the features",
                     "pass --no-header to take the columns by position, in the model's feature order "
                     "(Python: pass a numpy array)", ACCEPTED)
    return head, len(line), number


def _decode(data: bytes, label: str, first_line: int) -> str:
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = first_line + data[:exc.start].count(b"\n")
        raise _error(label, line, f"not UTF-8 text (byte {data[exc.start]:#04x})", "save the CSV as UTF-8") from None


def _lines(fh: io.BufferedReader, chunk_rows: int, line_bytes: int) -> Iterator[tuple[bytes, int]]:
    """Blocks of at most ``chunk_rows`` whole lines, with the bytes each consumed."""
    carry = b""
    want = max(1 << 16, chunk_rows * max(line_bytes, 16))
    while True:
        data = fh.read(want)
        buf = carry + data if carry else data
        if not data:
            if buf.strip():
                yield (buf if buf.endswith(b"\n") else buf + b"\n"), len(buf)
            return
        nl = np.flatnonzero(np.frombuffer(buf, dtype=np.uint8) == 10)
        if nl.size == 0:
            carry = buf
            continue
        cut = int(nl[min(chunk_rows, nl.size) - 1]) + 1
        while True:
            yield buf[:cut], cut
            buf = buf[cut:]
            nl = nl[nl >= cut] - cut
            if nl.size < chunk_rows:
                break
            cut = int(nl[chunk_rows - 1]) + 1
        carry = buf


def _field_counts(block: bytes) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.bool_]]:
    """Fields on each line of ``block`` (whole lines) and which lines are blank, counted with numpy."""
    a = np.frombuffer(block, dtype=np.uint8)
    nl = np.flatnonzero(a == 10)
    commas = np.cumsum(a == 44)
    per_line = np.diff(np.concatenate([[0], commas[nl]])) + 1
    starts = np.concatenate([[0], nl[:-1] + 1])
    length = nl - starts - (a[np.maximum(nl - 1, 0)] == 13)
    return per_line, length <= 0


def _check_widths(block: bytes, width: int, label: str, first_line: int, what: str) -> None:
    _decode(block, label, first_line)  # UTF-8, else the line of the first bad byte
    if b'"' in block:  # quoted fields may hold commas and newlines: the csv module counts them
        line = first_line
        reader = csv.reader(io.StringIO(_decode(block, label, first_line), newline=""))
        for rec in reader:
            if rec and len(rec) != width and (len(rec) > 1 or rec[0].strip()):
                raise _width_error(label, line, len(rec), width, what)
            line = first_line + reader.line_num
        return
    counts, blank = _field_counts(block)
    bad = np.flatnonzero((counts != width) & ~blank)
    if bad.size:
        i = int(bad[0])
        raise _width_error(label, first_line + i, int(counts[i]), width, what)


def _width_error(label: str, line: int, got: int, width: int, what: str) -> InputDataError:
    return _error(label, line, f"row has {got} field{'s' if got != 1 else ''}, {what} {width}")


def _id_index(columns: Sequence[str], column: str | None, label: str) -> int | None:
    """Where the ``--id`` column is (None without one); a missing one is an error naming the columns."""
    if column is None:
        return None
    if column not in columns:
        near = suggest(column, list(columns))
        raise InputDataError(f"{label}: no ID column '{column}'",
                             f"did you mean '{near}'?" if near else f"columns: {', '.join(list(columns)[:12])}")
    return list(columns).index(column)


def _id_text(v: Any) -> str:
    if v is None or (isinstance(v, float) and v != v):
        return ""
    return str(int(v)) if isinstance(v, float) and v.is_integer() else str(v)


def _csv_chunks(fh: io.BufferedReader, label: str, schema: Any, options: StreamOptions
                ) -> Iterator[tuple[npt.NDArray[np.float64], list[str] | None, int]]:
    names = list(schema.feature_names)
    if options.header:
        columns, used, head_line = _header(fh, label)
        check_unique(columns, label)
        id_at = _id_index(columns, options.id_column, label)
        idx = bind(names, columns, source=label, ignore=[str(options.id_column)] if id_at is not None else [])
        what = "the header has"
        line = head_line + 1
    else:
        if options.id_column is not None:
            raise InputDataError(f"{label}: --id names a column, which needs a header row")
        id_at = None
        columns, used, idx, line, head_line = names, 0, list(range(len(names))), 1, 1
        what = f"the model reads (with --no-header, columns are the features in order: {', '.join(names[:6])}" \
               f"{' ...' if len(names) > 6 else ''})"
    width = len(columns)
    first, rows, pending, held = True, 0, b"", 0
    for part, size in _lines(fh, options.chunk_rows, max(used, 2 * width)):
        block, consumed = pending + part, held + size
        if block.count(b'"') % 2:  # a quoted field runs on past this block: read on
            pending, held = block, consumed
            continue
        pending, held = b"", 0
        _check_widths(block, width, label, line, what)
        if first and options.header:
            first = False
            end = block.find(b"\n") + 1
            row = _decode(block[:end], label, line).strip().split(",")
            if len(row) == width and all(c.strip() in TYPE_CODES for c in row):  # a type-code row
                block, line, consumed = block[end:], line + 1, consumed
                if not block.strip():
                    continue
        start = line
        line += block.count(b"\n")
        X, ids = _parse(block, label, start, schema, columns, idx, id_at)
        rows += len(X)
        yield X, ids, consumed
    if pending:
        raise _error(label, line, "a quoted field is never closed")
    if rows == 0:
        raise _error(label, head_line, "has a header but no rows" if options.header else "file is empty", ACCEPTED)


def _parse(block: bytes, label: str, start: int, schema: Any, columns: Sequence[str],
           idx: list[int], id_at: int | None = None) -> tuple[npt.NDArray[np.float64], list[str] | None]:
    try:
        frame = pd.read_csv(io.BytesIO(block), header=None, names=[str(i) for i in range(len(columns))],
                            usecols=sorted(set(idx) | ({id_at} if id_at is not None else set())),
                            keep_default_na=True, na_values=NA_VALUES, skip_blank_lines=True, encoding="utf-8",
                            dtype={str(id_at): str} if id_at is not None else None)
    except UnicodeDecodeError as exc:
        raise InputDataError(f"{label}: not UTF-8 text near line {start} ({exc.reason})",
                             "save the CSV as UTF-8") from None
    except (pd.errors.ParserError, ValueError) as exc:
        raise InputDataError(f"{label}: cannot read lines {start}.. as CSV ({exc})") from None
    ids = [_id_text(v) for v in frame[str(id_at)].tolist()] if id_at is not None else None
    bound = frame[[str(i) for i in idx]]
    bound.columns = list(schema.feature_names)
    try:
        return prepare_input(schema, bound), ids
    except InputDataError as exc:
        raise InputDataError([d.__class__(d.severity, f"{label} (rows from line {start}): {d.message}", d.location,
                                          d.notes) for d in exc.diagnostics]) from None


# -- Parquet -----------------------------------------------------------------------------------------------------


def _parquet_chunks(fh: io.BufferedReader, label: str, schema: Any, options: StreamOptions
                    ) -> Iterator[tuple[npt.NDArray[np.float64], list[str] | None, int]]:
    pq = _pyarrow(f"{label}: Parquet input")
    with ExitStack() as stack:
        src: Any = fh
        if not fh.seekable() or fh is sys.stdin.buffer:
            spool = stack.enter_context(tempfile.TemporaryFile(prefix="lumber-stdin-", suffix=".parquet"))
            shutil.copyfileobj(fh, spool, 1 << 20)
            spool.seek(0)
            src = spool
        try:
            pf = pq.ParquetFile(src)
        except Exception as exc:  # pyarrow raises ArrowInvalid and OSError subclasses
            raise InputDataError(f"{label}: not a readable Parquet file ({exc})") from None
        columns = list(pf.schema_arrow.names)
        id_at = _id_index(columns, options.id_column, label)
        idx = bind(list(schema.feature_names), columns, source=label,
                   ignore=[str(options.id_column)] if id_at is not None else [])
        wanted = [columns[i] for i in idx]
        read = list(dict.fromkeys(wanted + ([columns[id_at]] if id_at is not None else [])))
        total = max(pf.metadata.num_rows, 1)
        size = os.fstat(src.fileno()).st_size if hasattr(src, "fileno") else 0
        seen = reported = 0
        for batch in pf.iter_batches(batch_size=options.chunk_rows, columns=read):
            whole = batch.to_pandas()
            ids = [_id_text(v) for v in whole[columns[id_at]].tolist()] if id_at is not None else None
            frame = whole[wanted]
            frame.columns = list(schema.feature_names)
            try:
                X = prepare_input(schema, frame)
            except InputDataError as exc:
                raise InputDataError([d.__class__(d.severity, f"{label}: {d.message}", d.location, d.notes)
                                      for d in exc.diagnostics]) from None
            seen += len(frame)
            share = size * seen // total  # the file's bytes in proportion to the rows read
            yield X, ids, share - reported
            reported = share


# -- output ------------------------------------------------------------------------------------------------------


def prediction_frame(model: Any, X: Any, raw: bool = False, schema: Any = None) -> pd.DataFrame:
    """``raw`` (``raw_k`` per output), ``proba_<class>`` (classifiers) and ``prediction`` for the rows ``X``;
    ``schema``: the model's with a user's decision rule (default: the model's own)."""
    schema = schema if schema is not None else model.schema
    margin = model.evaluate(X) if hasattr(model, "evaluate") else model.predict_raw(X)
    m2 = np.asarray(margin).reshape(len(X), -1)
    out: dict[str, Any] = {}
    for k in range(m2.shape[1]):
        out["raw" if m2.shape[1] == 1 else f"raw_{k}"] = m2[:, k]
    if not raw:
        if schema.task in (Task.BINARY, Task.MULTICLASS):
            proba = schema.proba(margin)
            labels = schema.classes if schema.classes is not None else range(proba.shape[1])
            for k, lab in enumerate(labels):
                out[f"proba_{lab}"] = proba[:, k]
        out["prediction"] = schema.decide(margin)
        if schema.class_names is not None:
            out["decision"] = np.asarray(schema.class_names, dtype=object)[schema.class_index(margin)]
    return pd.DataFrame(out)


def csv_text(frame: pd.DataFrame, *, header: bool = True) -> str:
    """``frame`` as CSV: floats as the shortest text that reads back to the same double (Python's ``repr``),
    missing values empty. Columns of text that needs quoting go through pandas' writer."""
    cols: list[list[str]] = []
    for c in frame.columns:
        v = frame[c].to_numpy()
        if v.dtype.kind == "f":
            text = [repr(x) for x in v.tolist()]
            if np.isnan(v).any():
                text = ["" if t == "nan" else t for t in text]
        else:
            text = [str(x) for x in v.tolist()]
            if any(any(ch in t for ch in ',"\n\r') for t in text):
                return frame.to_csv(index=False, header=header)
        cols.append(text)
    if len(cols) == 1 and "" in cols[0]:  # an empty line would read as no row at all
        return frame.to_csv(index=False, header=header)
    names = io.StringIO()
    csv.writer(names, lineterminator="\n").writerow([str(c) for c in frame.columns])
    body = "\n".join(map(",".join, zip(*cols)))
    return (names.getvalue() if header else "") + body + ("\n" if body else "")


@contextmanager
def _writer(output: str | Path | IO[str] | None, fmt: str) -> Iterator[Any]:
    """A function writing one chunk's predictions; the file appears (atomically) only when all are written."""
    with ExitStack() as stack:
        if fmt == "parquet":
            fh: Any = stack.enter_context(atomic_open(output, "wb"))  # type: ignore[arg-type]
        elif output is None or output == "-":
            fh = sys.stdout
        elif hasattr(output, "write"):
            fh = output
        else:
            fh = stack.enter_context(atomic_open(output, "w"))
        state: dict[str, Any] = {"first": True, "parquet": None}

        def write(frame: pd.DataFrame) -> None:
            if fmt == "parquet":
                import pyarrow as pa

                table = pa.Table.from_pandas(frame, preserve_index=False)
                if state["parquet"] is None:
                    state["parquet"] = _pyarrow("parquet output").ParquetWriter(fh, table.schema)
                state["parquet"].write_table(table)
            elif fmt == "jsonl":
                fh.write("".join(json.dumps(r) + "\n" for r in frame.to_dict(orient="records")))
            else:
                fh.write(csv_text(frame, header=state["first"]))
            state["first"] = False

        yield write
        if state["parquet"] is not None:
            state["parquet"].close()
        elif fmt == "parquet":
            raise InputDataError("no rows to write")
        fh.flush()


__all__ = ["FORMATS", "StreamOptions", "csv_text", "output_format", "predict_file", "prediction_frame"]
