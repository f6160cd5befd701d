"""The ``table`` backend: oblivious decision tables in a versioned binary file, and a numpy evaluator.

The file (``docs/table-format.md``) is a 64-byte header, a JSON metadata block
(schema, fingerprint) and the arrays of a quantized :class:`ObliviousEnsemble`,
little-endian and 8-byte aligned, with a CRC-32 over everything after the
header. It holds exactly the arrays the C evaluator reads
(:mod:`lumber.backends.table_c`), so loading is a few ``np.frombuffer`` calls,
and decoding gives the ensemble back array for array.

:class:`TableEvaluator` is the numpy evaluator of that form: it binarizes
every column once (``searchsorted`` on the borders) and then works on bins
only, as the C evaluator does; it sums in the same order, so both agree bit
for bit with ``ObliviousEnsemble.evaluate``.
"""

from __future__ import annotations

import json
import struct
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from lumber.ir import (
    CompileError, Diagnostic, IRLocation, ModelFormatError, ObliviousEnsemble, Schema, atomic_write_bytes,
)
from lumber.ir.diagnostics import error
from lumber.ir.interp import category_codes, prepare_input
from lumber import __version__

from .base import EmitOptions, fingerprint

MAGIC = b"LUMBTAB\0"
VERSION = 1
HEADER = struct.Struct("<8sIIIIIIQQQII")
"""magic, version, flags, n_features, n_outputs, n_trees, n_cols, n_borders, n_levels, n_values, meta_len, crc32."""
FLAG_FLOAT32 = 1
FLAG_BIN16 = 2
FLAG_AVERAGE = 4
FLAG_CATEGORY = 8
"""Set columns (category levels): a ``col_invalid_bin`` section follows ``value``."""
FLAG_BIN_LEVELS = 16
"""Bin levels: ``level_code_offset``, ``level_code_bin`` and ``level_code_bit`` sections come last."""
SUFFIX = ".table"


@dataclass(frozen=True, kw_only=True)
class TableOptions(EmitOptions):
    """Table emission knobs."""

    source_fingerprint: str | None = None
    """Fingerprint of the model the tables were compiled from (default: the ensemble's own)."""


def _sections(ens: ObliviousEnsemble) -> list[tuple[str, npt.NDArray[Any]]]:
    """The arrays of the file, in order, with their on-disk dtypes."""
    assert ens.col_feature is not None and ens.col_nan_bin is not None and ens.border_offset is not None
    assert ens.border is not None and ens.level_col is not None and ens.level_bin is not None
    K = ens.n_outputs
    div = np.maximum(ens.trees_per_output(), 1.0) if ens.schema.average else np.ones(K)
    return [
        ("base", np.asarray(ens.schema.base_score, dtype="<f8")),
        ("divisor", np.asarray(div, dtype="<f8")),
        ("col_feature", ens.col_feature.astype("<i4")),
        ("col_nan_bin", ens.col_nan_bin.astype("<i4")),
        ("border_offset", ens.border_offset.astype("<i8")),
        ("border", ens.border.astype("<f8")),
        ("depth", ens.depth.astype("<i4")),
        ("tree_output", ens.tree_output.astype("<i4")),
        ("level_col", ens.level_col.astype("<i4")),
        ("level_bin", ens.level_bin.astype("<i4")),
        ("value", ens.value.astype("<f8")),
    ] + ([("col_invalid_bin", ens.col_invalid_bin.astype("<i4"))] if ens.col_invalid_bin is not None else []) + (
        [("level_code_offset", ens.level_border_offset.astype("<i8")), ("level_code_bin", ens.level_code_bin.astype("<i4")),
         ("level_code_bit", ens.level_code_bit.astype("<i4"))]
        if ens.has_bin_levels and ens.level_border_offset is not None and ens.level_code_bin is not None
        and ens.level_code_bit is not None else [])


def _pad(n: int) -> int:
    return -n % 8


def check(ens: ObliviousEnsemble) -> list[Diagnostic]:
    """What the table format cannot hold (empty when it can)."""
    diags = []
    if not ens.quantized:
        diags.append(error("the ensemble has no bins", IRLocation(field="level_col"),
                           "run the 'quantize' pass first (lumber.compile(..., target='table') does)"))
    if ens.schema.accumulate_dtype != "float64":
        diags.append(error(f"tables sum in float64; this model sums in {ens.schema.accumulate_dtype}",
                           IRLocation(field="schema.accumulate_dtype")))
    if ens.border_offset is not None and ens.border_offset.shape[0] > 1 and int(np.diff(ens.border_offset).max()) > 65535:
        diags.append(error("a column has more than 65535 borders (bins must fit 16 bits)", IRLocation(field="border")))
    if ens.n_trees >= 2**31 or ens.n_features >= 2**31:
        diags.append(error("too many trees or features for 32-bit counts", IRLocation()))
    return diags


def encode_table(ens: ObliviousEnsemble, *, source_fingerprint: str | None = None) -> bytes:
    """The table file's bytes (deterministic: the same ensemble gives the same bytes)."""
    diags = check(ens)
    if diags:
        raise CompileError(diags)
    fp = source_fingerprint or fingerprint(ens)
    meta = {"format": "lumber-table", "fingerprint": fp, "generator": f"lumber {__version__}",
            "schema": ens.schema.to_dict(), "statistics": ens.statistics()}
    meta_bytes = json.dumps(meta, sort_keys=True, default=str).encode()
    body = bytearray(meta_bytes + b"\0" * _pad(len(meta_bytes)))
    for _, arr in _sections(ens):
        raw = np.ascontiguousarray(arr).tobytes()
        body += raw + b"\0" * _pad(len(raw))
    assert ens.border_offset is not None
    bin16 = ens.border_offset.shape[0] > 1 and int(np.diff(ens.border_offset).max()) > 255
    flags = (FLAG_FLOAT32 if ens.schema.input_dtype == "float32" else 0) | (FLAG_BIN16 if bin16 else 0) | (
        FLAG_AVERAGE if ens.schema.average else 0) | (FLAG_CATEGORY if ens.col_invalid_bin is not None else 0) | (
        FLAG_BIN_LEVELS if ens.has_bin_levels else 0)
    assert ens.col_feature is not None and ens.border is not None
    header = HEADER.pack(MAGIC, VERSION, flags, ens.n_features, ens.n_outputs, ens.n_trees,
                         ens.col_feature.shape[0], ens.border.shape[0], ens.n_levels, ens.value.shape[0],
                         len(meta_bytes), zlib.crc32(body))
    return header + bytes(body)


@dataclass(frozen=True)
class TableFile:
    """A decoded table file: the ensemble and its metadata."""

    ensemble: ObliviousEnsemble
    fingerprint: str
    meta: dict[str, Any]
    flags: int


def decode_table(data: bytes, origin: str = "<bytes>") -> TableFile:
    """Inverse of :func:`encode_table`; every problem is a ``ModelFormatError`` naming ``origin``."""

    def fail(msg: str, *notes: str) -> ModelFormatError:
        return ModelFormatError(f"{origin}: {msg}", *notes)

    if len(data) < HEADER.size or data[:8] != MAGIC:
        raise fail("not a lumber table file (bad magic)", "expected a file written by lumber compile --emit table")
    (_, version, flags, F, K, T, C, NB, L, V, meta_len, crc) = HEADER.unpack_from(data)
    if version != VERSION:
        raise fail(f"table format version {version} is not supported", f"this lumber reads version {VERSION}")
    body = memoryview(data)[HEADER.size:]
    if zlib.crc32(body) != crc:
        raise fail("checksum mismatch: the file is truncated or corrupt", "write it again with lumber compile")
    sizes = [("meta", meta_len, None), ("base", K, "<f8"), ("divisor", K, "<f8"), ("col_feature", C, "<i4"),
             ("col_nan_bin", C, "<i4"), ("border_offset", C + 1, "<i8"), ("border", NB, "<f8"),
             ("depth", T, "<i4"), ("tree_output", T, "<i4"), ("level_col", L, "<i4"), ("level_bin", L, "<i4"),
             ("value", V, "<f8")] + ([("col_invalid_bin", C, "<i4")] if flags & FLAG_CATEGORY else []) + (
        [("level_code_offset", L + 1, "<i8"), ("level_code_bin", -1, "<i4"), ("level_code_bit", L, "<i4")]
        if flags & FLAG_BIN_LEVELS else [])
    arrays: dict[str, npt.NDArray[Any]] = {}
    pos = 0
    for name, count, dtype in sizes:
        if count < 0:  # the code bins: as many as the offsets say
            lco = arrays["level_code_offset"]
            count = int(lco[-1]) if lco.size and lco[-1] >= 0 and lco[-1] <= len(body) else -1
            if count < 0:
                raise fail("bin level offsets out of range")
        nbytes = count if dtype is None else count * np.dtype(dtype).itemsize
        if pos + nbytes > len(body):
            raise fail(f"section '{name}' runs past the end of the file")
        if dtype is None:
            try:
                meta = json.loads(bytes(body[pos:pos + nbytes]))
            except ValueError:
                raise fail("metadata block is not valid JSON") from None
        else:
            arrays[name] = np.frombuffer(body, dtype=dtype, count=count, offset=pos).astype(dtype[1:])
        pos += nbytes + _pad(nbytes)
    if pos != len(body):
        raise fail(f"{len(body) - pos} unexpected bytes after the last section")
    try:
        schema = Schema.from_dict(meta["schema"])
        fp = str(meta["fingerprint"])
    except (KeyError, TypeError, ValueError) as exc:
        raise fail(f"metadata block lacks a valid schema or fingerprint ({exc})") from None
    if schema.n_features != F or schema.n_outputs != K:
        raise fail("header counts do not match the schema")
    lc, lb, off = arrays["level_col"], arrays["level_bin"], arrays["border_offset"]
    if L and (lc.min() < 0 or lc.max() >= C):
        raise fail("level column out of range")
    if C and (off.min() < 0 or off.max() > NB or np.any(np.diff(off) < 0)):
        raise fail("border offsets out of range")
    inv = arrays.get("col_invalid_bin")
    set_level = inv[lc] >= 0 if inv is not None and L else np.zeros(L, dtype=bool)
    at = off[lc] + lb if L else np.zeros(0, dtype=np.int64)
    if L and (np.any(lb < 0) or np.any(at[~set_level] >= NB) or np.any(lb[set_level] != 0)):
        raise fail("level bin out of range")
    try:
        thr = np.where(set_level, np.nan, arrays["border"][np.minimum(at, max(NB - 1, 0))] if NB else np.nan)
        sets = _level_sets(lc, set_level, off, arrays["border"], inv) if set_level.any() else {}
        nan_true = arrays["col_nan_bin"][lc] > lb if L else np.zeros(0, dtype=bool)
        if flags & FLAG_BIN_LEVELS:
            sets.update(_bin_levels(arrays, lc, nan_true))
        ens = ObliviousEnsemble(
            schema=schema, depth=arrays["depth"], level_feature=arrays["col_feature"][lc] if L else np.zeros(0),
            level_threshold=thr if L else np.zeros(0),
            level_nan_true=nan_true,
            tree_output=arrays["tree_output"], value=arrays["value"], col_feature=arrays["col_feature"],
            col_nan_bin=arrays["col_nan_bin"], border_offset=off, border=arrays["border"], level_col=lc,
            level_bin=lb, col_invalid_bin=inv, **sets,
        ).validate()
    except ModelFormatError:
        raise
    except Exception as exc:  # ValidationError and shape errors of a corrupt file
        raise fail(f"invalid tables ({exc})") from None
    return TableFile(ens, fp, meta, int(flags))


def _level_sets(lc: npt.NDArray[Any], set_level: npt.NDArray[np.bool_], off: npt.NDArray[Any],
                border: npt.NDArray[Any], inv: npt.NDArray[Any]) -> dict[str, npt.NDArray[np.int64]]:
    """The category set of every level from its set column (codes, then -1 first when invalid is in)."""
    sets = []
    for i in range(lc.shape[0]):
        if not set_level[i]:
            sets.append(np.zeros(0, dtype=np.int64))
            continue
        c = int(lc[i])
        codes = border[off[c]:off[c + 1]].astype(np.int64)
        sets.append(np.concatenate([[-1], codes]) if inv[c] == 1 else codes)
    size = np.array([a.shape[0] for a in sets], dtype=np.int64)
    offset = np.zeros(lc.shape[0] + 1, dtype=np.int64)
    np.cumsum(size, out=offset[1:])
    return {"level_set_offset": offset, "level_set_code": np.concatenate(sets)}


def _bin_levels(arrays: dict[str, npt.NDArray[Any]], lc: npt.NDArray[Any],
                nan_true: npt.NDArray[np.bool_]) -> dict[str, npt.NDArray[Any]]:
    """The bin level arrays from the code sections: borders are the column borders at the code bins,
    a NaN bit is the bit of the count of code bins below the column's NaN bin (writes ``nan_true``)."""
    lco, cb, bit = arrays["level_code_offset"], arrays["level_code_bin"], arrays["level_code_bit"]
    off, border, nan_bin = arrays["border_offset"], arrays["border"], arrays["col_nan_bin"]
    L = lc.shape[0]
    if lco.shape != (L + 1,) or lco[0] != 0 or np.any(np.diff(lco) < 0) or bit.shape != (L,):
        raise ValueError("bin level offsets out of range")
    size = np.diff(lco)
    rank = np.repeat(np.arange(L), size)
    col = lc[rank]
    width = off[col + 1] - off[col]
    if np.any((cb < 0) | (cb >= width)) or np.any((bit < 0) | (bit > 30)):
        raise ValueError("bin level code bins out of range")
    is_bin = size > 0
    if is_bin.any():
        below = np.add.reduceat((nan_bin[col] > cb).astype(np.int64), lco[:-1][is_bin])
        nan_true[is_bin] = (below >> bit[is_bin].astype(np.int64)) & 1 == 1
    return {"level_border_offset": lco, "level_border": border[off[col] + cb], "level_code_bit": bit,
            "level_code_bin": cb}


def write_table(ens: ObliviousEnsemble, path: str | Path, *, source_fingerprint: str | None = None) -> Path:
    """Write the table file atomically."""
    atomic_write_bytes(path, encode_table(ens, source_fingerprint=source_fingerprint))
    return Path(path)


def read_table(path: str | Path) -> TableFile:
    try:
        data = Path(path).read_bytes()
    except FileNotFoundError:
        raise ModelFormatError(f"{path}: no such file") from None
    except OSError as exc:
        raise ModelFormatError(f"{path}: cannot read ({exc.strerror})") from None
    return decode_table(data, str(path))


class TableEvaluator:
    """Numpy evaluator of quantized tables: bins once per row and column, then integer work only."""

    BLOCK_ENTRIES = 1 << 21

    def __init__(self, ens: ObliviousEnsemble) -> None:
        diags = check(ens)
        if diags:
            raise CompileError(diags)
        self.ens = ens
        self.schema = ens.schema

    def bins(self, Xp: npt.NDArray[np.float64]) -> npt.NDArray[np.int64]:
        """``(n, n_cols)`` bin of every column (NaN: the column's NaN bin)."""
        e = self.ens
        assert e.col_feature is not None and e.border_offset is not None and e.border is not None
        assert e.col_nan_bin is not None
        out = np.empty((Xp.shape[0], e.col_feature.shape[0]), dtype=np.int64)
        inv = e.col_invalid_bin
        for c in range(e.col_feature.shape[0]):
            x = Xp[:, e.col_feature[c]]
            b = e.border[e.border_offset[c]:e.border_offset[c + 1]]
            if inv is not None and inv[c] >= 0:  # set column: member 1, valid non-member 0
                codes = category_codes(x, self.schema.category_rule)
                binned = np.where(codes < 0, inv[c], np.isin(codes, b.astype(np.int64)))
            else:
                binned = np.searchsorted(b, x, side="left")
            out[:, c] = np.where(np.isnan(x), e.col_nan_bin[c], binned)
        return out

    def leaves(self, Xp: npt.NDArray[np.float64]) -> npt.NDArray[np.int64]:
        e = self.ens
        assert e.level_col is not None and e.level_bin is not None
        col_bins = self.bins(Xp)[:, e.level_col]
        bits = (col_bins > e.level_bin[None, :]).astype(np.int64)
        if e.has_bin_levels:  # bit j of #{code bins below the column's bin}
            assert e.level_border_offset is not None and e.level_code_bin is not None and e.level_code_bit is not None
            bl = np.flatnonzero(e.bin_level)
            off = e.level_border_offset
            rank = np.repeat(np.arange(e.n_levels), np.diff(off))
            above = (col_bins[:, rank] > e.level_code_bin[None, :]).astype(np.int64)
            code = np.add.reduceat(above, off[bl], axis=1)
            bits[:, bl] = (code >> e.level_code_bit[bl][None, :].astype(np.int64)) & 1
        bits <<= e.level_position[None, :]
        out = np.zeros((Xp.shape[0], e.n_trees), dtype=np.int64)
        live = np.flatnonzero(e.depth > 0)
        if live.size:
            out[:, live] = np.add.reduceat(bits, e.level_offset[live], axis=1)
        return out

    def apply(self, X: Any) -> npt.NDArray[np.int64]:
        return self.leaves(prepare_input(self.schema, X))

    def predict_raw(self, X: Any) -> npt.NDArray[np.float64]:
        """Raw margins, ``(n,)`` or ``(n, n_outputs)``, summed tree by tree from the base score."""
        e = self.ens
        Xp = prepare_input(self.schema, X)
        n, K, T = Xp.shape[0], e.n_outputs, e.n_trees
        out = np.empty((n, K))
        step = max(1, self.BLOCK_ENTRIES // max(e.n_levels + T * K, 1))
        base = np.asarray(self.schema.base_score, dtype=np.float64)
        for r0 in range(0, n, step):
            leaf = self.leaves(Xp[r0:r0 + step])
            pos = e.value_offset[:-1][None, :] + leaf * e.table_width[None, :]
            terms = np.zeros((leaf.shape[0], T + 1, K))
            terms[:, 0, :] = base
            for k in range(K):
                feeds = (e.tree_output == k) | (e.tree_output < 0)
                col = np.where(e.tree_output >= 0, 0, k)
                # -0.0, the additive identity, for trees of other outputs: the C runtime skips them
                terms[:, 1:, k] = np.where(feeds[None, :], e.value[pos + col[None, :]], -0.0)
            out[r0:r0 + leaf.shape[0]] = np.cumsum(terms, axis=1)[:, -1, :]
        if self.schema.average:
            out = out / np.maximum(e.trees_per_output(), 1.0)[None, :]
        return out[:, 0] if K == 1 else out


__all__ = ["FLAG_AVERAGE", "FLAG_BIN16", "FLAG_BIN_LEVELS", "FLAG_CATEGORY", "FLAG_FLOAT32", "HEADER", "MAGIC", "VERSION", "TableEvaluator",
           "TableFile", "TableOptions", "check", "decode_table", "encode_table", "read_table", "write_table"]
