"""Versioned on-disk format shared by every IR type (``.lumber`` files).

A file is a zip archive (stored, fixed timestamps, sorted entries, so the same
IR always gives the same bytes) holding ``header.json`` and one ``.npy`` entry
per array. ``docs/ir.md`` documents it. Writes are atomic.
"""

from __future__ import annotations

import dataclasses
import io
import json
import zipfile
from pathlib import Path
from typing import Any, Callable, TypeVar

import numpy as np

from .atomic import atomic_write_bytes
from .diagnostics import ModelFormatError
from .schema import Schema

FORMAT = "lumber-ir"
VERSION = 1
KINDS = ("forest", "polynomial", "oblivious")
"""The IR types a file may hold. Each class registers itself where it is defined
(``@ir_kind("forest")``), so this module imports none of them (no circle)."""
_CLASSES: dict[str, type] = {}
T = TypeVar("T", bound=type)
_FIXED_TIME = (1980, 1, 1, 0, 0, 0)


def ir_kind(kind: str) -> Callable[[T], T]:
    """Class decorator: files of ``kind`` hold instances of this class."""
    if kind not in KINDS:
        raise ValueError(f"unknown IR kind {kind!r}: add it to serialize.KINDS")

    def register(cls: T) -> T:
        _CLASSES[kind] = cls
        return cls

    return register


def _kind_of(ir: Any) -> str:
    for kind, cls in _CLASSES.items():
        if type(ir) is cls:
            return kind
    raise TypeError(f"cannot save objects of type {type(ir).__name__}")


def _class_of(kind: str) -> Any:
    return _CLASSES[kind]


def to_bytes(ir: Any) -> bytes:
    """Serialize any registered IR dataclass to the deterministic zip format."""
    kind = _kind_of(ir)
    arrays: dict[str, np.ndarray] = {}
    attrs: dict[str, Any] = {}
    schema: dict[str, Any] | None = None
    for f in dataclasses.fields(ir):
        v = getattr(ir, f.name)
        if isinstance(v, np.ndarray):
            arrays[f.name] = v
        elif isinstance(v, Schema):
            schema = v.to_dict()
        elif v is None:
            attrs[f.name] = None
        else:
            attrs[f.name] = v
    header = {
        "format": FORMAT,
        "version": VERSION,
        "kind": kind,
        "schema": schema,
        "attrs": attrs,
        "arrays": {k: {"dtype": str(a.dtype), "shape": list(a.shape)} for k, a in sorted(arrays.items())},
    }
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", compression=zipfile.ZIP_STORED) as zf:
        info = zipfile.ZipInfo("header.json", date_time=_FIXED_TIME)
        zf.writestr(info, json.dumps(header, sort_keys=True, indent=1).encode())
        for name in sorted(arrays):
            ab = io.BytesIO()
            np.lib.format.write_array(ab, np.ascontiguousarray(arrays[name]), allow_pickle=False)
            zf.writestr(zipfile.ZipInfo(f"{name}.npy", date_time=_FIXED_TIME), ab.getvalue())
    return buf.getvalue()


def _starts_like_lumber(data: bytes) -> bool:
    """The first zip entry is ``header.json``: what :func:`to_bytes` writes first."""
    if len(data) < 30 or data[:4] != b"PK\x03\x04":
        return False
    n = int.from_bytes(data[26:28], "little")
    return data[30:30 + n] == b"header.json"


def from_bytes(data: bytes, origin: str = "<bytes>") -> Any:
    """Inverse of :func:`to_bytes`; every problem is a ``ModelFormatError`` naming ``origin``."""
    try:
        zf = zipfile.ZipFile(io.BytesIO(data))
        header = json.loads(zf.read("header.json"))
    except (zipfile.BadZipFile, KeyError, ValueError, OSError) as exc:
        if _starts_like_lumber(data):
            raise ModelFormatError(f"{origin}: truncated or damaged lumber IR file (no complete zip archive)",
                                   "it begins like a file lumber's save() writes but does not end like one; "
                                   "write it again (a copy cut short?)") from None
        raise ModelFormatError(f"{origin}: not a lumber IR file ({exc})",
                               "expected a file written by lumber's save()") from None
    if header.get("format") != FORMAT:
        raise ModelFormatError(f"{origin}: header field 'format' is {header.get('format')!r}, expected {FORMAT!r}")
    if header.get("version") != VERSION:
        raise ModelFormatError(f"{origin}: format version {header.get('version')!r} is not supported",
                               f"this lumber reads version {VERSION}")
    kind = header.get("kind")
    if kind not in KINDS:
        raise ModelFormatError(f"{origin}: unknown IR kind {kind!r}", f"known kinds: {', '.join(KINDS)}")
    cls = _class_of(kind)
    kwargs: dict[str, Any] = {}
    try:
        for name, meta in header["arrays"].items():
            arr = np.lib.format.read_array(io.BytesIO(zf.read(f"{name}.npy")), allow_pickle=False)
            if str(arr.dtype) != meta["dtype"] or list(arr.shape) != meta["shape"]:
                raise ModelFormatError(f"{origin}: array '{name}' does not match its header")
            kwargs[name] = arr
        kwargs.update(header.get("attrs", {}))
        if header.get("schema") is not None:
            kwargs["schema"] = Schema.from_dict(header["schema"])
        for f in dataclasses.fields(cls):
            if isinstance(kwargs.get(f.name), list):
                kwargs[f.name] = tuple(kwargs[f.name])
        ir = cls(**kwargs)
    except ModelFormatError:
        raise
    except (KeyError, ValueError, TypeError, zipfile.BadZipFile, OSError) as exc:
        raise ModelFormatError(f"{origin}: corrupt lumber IR file ({type(exc).__name__}: {exc})") from None
    if hasattr(ir, "validate"):
        ir.validate()
    return ir


def save_ir(ir: Any, path: str | Path) -> None:
    atomic_write_bytes(path, to_bytes(ir))


def load_ir(path: str | Path, expected: type | None = None) -> Any:
    """Any IR from a ``.lumber`` file; with ``expected``, refuse a file holding another kind."""
    p = Path(path)
    try:
        data = p.read_bytes()
    except OSError as exc:
        raise ModelFormatError(f"{path}: cannot read ({exc.strerror})") from None
    ir = from_bytes(data, str(path))
    if expected is not None and not isinstance(ir, expected):
        article = "an" if expected.__name__[0] in "AEIOU" else "a"
        raise ModelFormatError(f"{path}: holds a {type(ir).__name__}, not {article} {expected.__name__}")
    return ir
