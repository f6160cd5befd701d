"""A small Universal Binary JSON (UBJSON, Draft 12) decoder for XGBoost ``.ubj`` model files.

Why our own: the one PyPI decoder (py-ubjson) is unmaintained since 2020 and
turns typed arrays into Python lists. XGBoost writes every node array as an
optimised *typed* container (``[$d#L<n>`` ...), which this decoder returns as a
read-only big-endian numpy view, so a 100 MB model decodes in milliseconds.

Decoding never trusts a length or count it reads: each one is checked against
the bytes left, and every problem raises :class:`UBJSONError` with the byte offset.
"""

from __future__ import annotations

import struct
from typing import Any

import numpy as np

MAX_DEPTH = 64
"""Nesting limit (XGBoost models nest about 8 levels); stops stack exhaustion on hostile input."""

_NUMERIC: dict[bytes, str] = {
    b"i": ">i1", b"U": ">u1", b"I": ">i2", b"l": ">i4", b"L": ">i8", b"d": ">f4", b"D": ">f8",
}


_SCALAR: dict[bytes, struct.Struct] = {
    m: struct.Struct(">" + c) for m, c in zip(_NUMERIC, ("b", "B", "h", "i", "q", "f", "d"))
}
"""The same types for single values (``struct`` is several times faster than numpy per scalar)."""


class UBJSONError(ValueError):
    """Malformed UBJSON; ``offset`` is where decoding stopped."""

    def __init__(self, message: str, offset: int) -> None:
        super().__init__(f"{message} (at byte {offset})")
        self.offset = offset


class _Decoder:
    def __init__(self, data: bytes) -> None:
        self.data = memoryview(data)
        self.pos = 0
        self.n = len(data)

    def _take(self, size: int) -> memoryview:
        if size < 0 or self.pos + size > self.n:
            raise UBJSONError(f"unexpected end of data (needs {size} more bytes)", self.pos)
        out = self.data[self.pos:self.pos + size]
        self.pos += size
        return out

    def _marker(self) -> bytes:
        while True:
            m = bytes(self._take(1))
            if m != b"N":  # no-op padding
                return m

    def _number(self, marker: bytes) -> int | float:
        fmt = _SCALAR[marker]
        return fmt.unpack(self._take(fmt.size))[0]  # type: ignore[no-any-return]

    def _length(self) -> int:
        start = self.pos
        m = self._marker()
        if m not in _NUMERIC or m in (b"d", b"D"):
            raise UBJSONError(f"expected an integer length, found marker {m!r}", start)
        v = int(self._number(m))
        if v < 0:
            raise UBJSONError(f"negative length {v}", start)
        return v

    def _string(self) -> str:
        start = self.pos
        size = self._length()
        raw = bytes(self._take(size))
        try:
            return raw.decode("utf-8")
        except UnicodeDecodeError:
            raise UBJSONError("string is not valid UTF-8", start) from None

    def value(self, depth: int = 0, marker: bytes | None = None) -> Any:
        start = self.pos
        m = self._marker() if marker is None else marker
        if m in _NUMERIC:
            return self._number(m)
        if m == b"S":
            return self._string()
        if m == b"[":
            return self._array(depth + 1)
        if m == b"{":
            return self._object(depth + 1)
        if m == b"T":
            return True
        if m == b"F":
            return False
        if m == b"Z":
            return None
        if m == b"C":
            return bytes(self._take(1)).decode("latin-1")
        if m == b"H":
            text = self._string()
            try:
                return int(text) if text.lstrip("-").isdigit() else float(text)
            except ValueError:
                raise UBJSONError(f"bad high-precision number {text!r}", start) from None
        raise UBJSONError(f"unknown type marker {m!r}", start)

    def _container_header(self) -> tuple[bytes | None, int | None]:
        """Optional ``$type`` and ``#count`` of an optimised container."""
        typ: bytes | None = None
        count: int | None = None
        if self.pos < self.n and self.data[self.pos:self.pos + 1] == b"$":
            self.pos += 1
            typ = bytes(self._take(1))
            if self.pos >= self.n or self.data[self.pos:self.pos + 1] != b"#":
                raise UBJSONError("typed container without a count", self.pos)
        if self.pos < self.n and self.data[self.pos:self.pos + 1] == b"#":
            self.pos += 1
            count = self._length()
        return typ, count

    def _array(self, depth: int) -> Any:
        if depth > MAX_DEPTH:
            raise UBJSONError("containers nested too deeply", self.pos)
        typ, count = self._container_header()
        if typ is not None and count is not None and typ in _NUMERIC:
            dt = np.dtype(_NUMERIC[typ])
            raw = self._take(count * dt.itemsize)
            arr = np.frombuffer(raw, dtype=dt)
            return arr
        out: list[Any] = []
        if count is not None:
            if count > self.n - self.pos:
                raise UBJSONError(f"array count {count} exceeds the data left", self.pos)
            for _ in range(count):
                out.append(self.value(depth, typ))
            return out
        while True:
            if self.pos >= self.n:
                raise UBJSONError("unterminated array", self.pos)
            if self.data[self.pos:self.pos + 1] == b"]":
                self.pos += 1
                return out
            out.append(self.value(depth))

    def _object(self, depth: int) -> dict[str, Any]:
        if depth > MAX_DEPTH:
            raise UBJSONError("containers nested too deeply", self.pos)
        typ, count = self._container_header()
        out: dict[str, Any] = {}
        if count is not None:
            if count > self.n - self.pos:
                raise UBJSONError(f"object count {count} exceeds the data left", self.pos)
            for _ in range(count):
                key = self._string()
                out[key] = self.value(depth, typ)
            return out
        while True:
            if self.pos >= self.n:
                raise UBJSONError("unterminated object", self.pos)
            if self.data[self.pos:self.pos + 1] == b"}":
                self.pos += 1
                return out
            key = self._string()
            out[key] = self.value(depth)


def loads(data: bytes) -> Any:
    """Decode one UBJSON value; typed numeric arrays come back as numpy arrays."""
    dec = _Decoder(data)
    value = dec.value()
    while dec.pos < dec.n and dec.data[dec.pos:dec.pos + 1] in (b"N", b"\x00", b" ", b"\n"):
        dec.pos += 1
    if dec.pos != dec.n:
        raise UBJSONError(f"{dec.n - dec.pos} trailing bytes after the value", dec.pos)
    return value
