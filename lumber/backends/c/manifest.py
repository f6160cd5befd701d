"""The manifest lumber appends to every shared library it builds, and its verification before loading.

A shared library is code: loading one runs its constructors. lumber therefore
opens only libraries it built itself, and checks that before the dynamic loader
sees a byte. :func:`sign_library` appends, after the library's own bytes::

    library | source_0 | source_1 ... | manifest JSON | footer

where each ``source_i`` is the zlib-compressed C source the library was built
from and the footer is ``<u64 manifest length><32-byte sha256><8-byte magic LUMBSIG1>``;
the sha256 covers everything before the footer. The dynamic loader maps only
the segments the library's headers name, so the trailing bytes change nothing
when it loads. The manifest records the library's size and digest, the models
it holds (their metadata: schema, fingerprint, lumber version, by symbol
prefix) and the platform it was built on.

:func:`verify_library` reads the footer and the manifest, checks the digest,
then the library's own headers (ELF: class, byte order, machine, type, and
that every header table and loadable segment lies inside the file), all in
Python and without mapping anything. A file that is truncated, edited, built
by another tool or for another machine is refused with a message saying which.

The digest detects damage and foreign libraries; it is not a signature with a
key: a library from someone you do not trust is refused only if it is not in
lumber's format. Compare its fingerprint (``load_compiled(path, model)``) or
its sha256 (``lumber inspect --json``) with one you trust.
"""

from __future__ import annotations

import hashlib
import json
import platform
import struct
import sys
import zlib
from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

from lumber.ir import ModelFormatError
from lumber import __version__

MAGIC = b"LUMBSIG1"
FOOTER = struct.Struct("<Q32s8s")
"""Manifest length, sha256 of every byte before the footer, magic."""
FORMAT_VERSION = 1

ELF_MAGIC, PE_MAGIC = b"\x7fELF", b"MZ"
MACH_O_MAGIC = (b"\xcf\xfa\xed\xfe", b"\xca\xfe\xba\xbe")
ELF_MACHINES = {"x86_64": 62, "amd64": 62, "aarch64": 183, "arm64": 183, "ppc64le": 21, "s390x": 22,
                "riscv64": 243, "i386": 3, "i686": 3, "armv7l": 40, "loongarch64": 258}
"""``platform.machine()`` -> ELF ``e_machine``; a machine missing here is not checked."""
ET_DYN, PT_LOAD = 3, 1


class ForeignLibraryError(ModelFormatError):
    """A well-formed lumber library built for another machine or operating system."""


@dataclass(frozen=True)
class LibraryManifest:
    """What a lumber-built library says about itself, read without loading it."""

    library: bytes = field(repr=False)
    """The shared library's own bytes (what the dynamic loader maps)."""
    sha256: str
    """Digest of the signed file up to its footer (library, sources and manifest)."""
    models: dict[str, dict[str, Any]]
    """Metadata of each model in the library, by symbol prefix (empty when the builder gave none)."""
    sources: tuple[bytes, ...] = field(repr=False)
    """The zlib-compressed C sources the library was built from."""
    machine: str
    system: str
    lumber_version: str

    def source_texts(self) -> list[str]:
        """The C sources, decompressed (to rebuild the library where it cannot load)."""
        return [zlib.decompress(s).decode("ascii") for s in self.sources]

    def model(self, prefix: str) -> dict[str, Any] | None:
        return self.models.get(prefix)


def host_format() -> bytes:
    """The first bytes of this operating system's shared libraries."""
    if sys.platform == "darwin":
        return MACH_O_MAGIC[0]
    return PE_MAGIC if sys.platform == "win32" else ELF_MAGIC


def sign_library(library: bytes, *, models: Mapping[str, Mapping[str, Any]] | None = None,
                 sources: Sequence[str] = ()) -> bytes:
    """``library`` with its sources, manifest and footer appended (see the module docstring)."""
    blobs = [zlib.compress(s.encode("ascii"), 6) for s in sources]
    manifest = {
        "format": "lumber-library", "format_version": FORMAT_VERSION,
        "library_size": len(library), "library_sha256": hashlib.sha256(library).hexdigest(),
        "source_sizes": [len(b) for b in blobs], "models": {k: dict(v) for k, v in (models or {}).items()},
        "machine": platform.machine(), "system": platform.system(), "lumber_version": __version__,
    }
    text = json.dumps(manifest, sort_keys=True, default=str).encode()
    body = b"".join([library, *blobs, text])
    return body + FOOTER.pack(len(text), hashlib.sha256(body).digest(), MAGIC)


def verify_library(data: bytes, label: str = "<bytes>", *, binary: bool = True) -> LibraryManifest:
    """The manifest of a signed library, after checking its digest and (with ``binary``) its headers;
    ModelFormatError (ForeignLibraryError for another machine's library) saying what is wrong otherwise."""
    rebuild = "rebuild it with lumber compile MODEL --emit c"
    if len(data) < FOOTER.size or data[-len(MAGIC):] != MAGIC:
        if data[:4] == ELF_MAGIC and _elf_truncated(data):
            raise ModelFormatError(f"{label}: truncated shared library ({len(data):,} bytes; its headers need more)",
                                   rebuild)
        raise ModelFormatError(f"{label}: not a library lumber built (no lumber manifest at its end), or a damaged "
                               "one; lumber does not load libraries it cannot verify", rebuild)
    size, digest, _ = FOOTER.unpack(data[-FOOTER.size:])
    body = data[:-FOOTER.size]
    if size > len(body) or hashlib.sha256(body).digest() != digest:
        raise ModelFormatError(f"{label}: the library does not match its recorded digest (edited or damaged)",
                               rebuild)
    try:
        m = json.loads(body[len(body) - size:].decode())
        lib_size, sizes = int(m["library_size"]), [int(s) for s in m["source_sizes"]]
        models, machine, system = dict(m["models"]), str(m["machine"]), str(m["system"])
        version, lib_digest = str(m["lumber_version"]), str(m["library_sha256"])
    except (ValueError, KeyError, TypeError, UnicodeDecodeError):
        raise ModelFormatError(f"{label}: unreadable lumber manifest", rebuild) from None
    if m.get("format") != "lumber-library" or m.get("format_version") != FORMAT_VERSION:
        raise ModelFormatError(f"{label}: lumber manifest version {m.get('format_version')!r}, this lumber reads "
                               f"{FORMAT_VERSION}", rebuild)
    if lib_size + sum(sizes) + size != len(body) or min([lib_size, *sizes]) < 0:
        raise ModelFormatError(f"{label}: the lumber manifest's sizes do not add up to the file's", rebuild)
    library = body[:lib_size]
    if hashlib.sha256(library).hexdigest() != lib_digest:
        raise ModelFormatError(f"{label}: the library does not match its recorded digest (edited or damaged)",
                               rebuild)
    offsets = [lib_size + sum(sizes[:i]) for i in range(len(sizes) + 1)]
    sources = tuple(body[a:b] for a, b in zip(offsets, offsets[1:]))
    man = LibraryManifest(library=library, sha256=digest.hex(), models=models, sources=sources, machine=machine,
                          system=system, lumber_version=version)
    if binary:
        check_binary(library, label, man)
    return man


def check_binary(library: bytes, label: str, manifest: LibraryManifest | None = None) -> None:
    """The library is this platform's format and its headers lie inside it (ELF: checked field by field)."""
    built = f" (built on {manifest.system} {manifest.machine})" if manifest is not None else ""
    host = host_format()
    if library[:len(host)] != host:
        kind = "ELF" if library[:4] == ELF_MAGIC else "PE" if library[:2] == PE_MAGIC else \
            "Mach-O" if library[:4] in MACH_O_MAGIC else "unknown"
        raise ForeignLibraryError(f"{label}: a {kind} library{built}; this is {platform.system()} "
                                  f"{platform.machine()}", "rebuild it here (lumber rebuilds from the source it "
                                                           "carries when a C compiler is present)")
    if host != ELF_MAGIC:
        return
    problem = _elf_problem(library)
    if problem is not None:
        foreign, text = problem
        raise (ForeignLibraryError if foreign else ModelFormatError)(f"{label}: {text}{built}",
                                                                     "rebuild it with lumber compile")


def _elf_header(data: bytes) -> tuple[str, int, int, int, int, int, int, int, int, int] | None:
    """(byte order, class, type, machine, phoff, shoff, phentsize, phnum, shentsize, shnum), or None if short."""
    if len(data) < 64 or data[4] not in (1, 2) or data[5] not in (1, 2):
        return None
    e = "<" if data[5] == 1 else ">"
    cls = data[4]
    if cls == 2:
        etype, mach = struct.unpack_from(e + "HH", data, 16)
        phoff, shoff = struct.unpack_from(e + "QQ", data, 32)
        phent, phnum, shent, shnum = struct.unpack_from(e + "HHHH", data, 54)
    else:
        etype, mach = struct.unpack_from(e + "HH", data, 16)
        phoff, shoff = struct.unpack_from(e + "II", data, 28)
        phent, phnum, shent, shnum = struct.unpack_from(e + "HHHH", data, 42)
    return e, cls, etype, mach, phoff, shoff, phent, phnum, shent, shnum


def _elf_truncated(data: bytes) -> bool:
    h = _elf_header(data)
    if h is None:
        return True
    _, _, _, _, phoff, shoff, phent, phnum, shent, shnum = h
    return phoff + phent * phnum > len(data) or shoff + shent * shnum > len(data)


def _elf_problem(data: bytes) -> tuple[bool, str] | None:
    """(is it another machine's, what) for an ELF file that must not be loaded here; None when it may."""
    h = _elf_header(data)
    if h is None:
        return False, "not a valid ELF file (header damaged or too short)"
    e, cls, etype, mach, phoff, shoff, phent, phnum, shent, shnum = h
    want_cls = 2 if struct.calcsize("P") == 8 else 1
    if cls != want_cls:
        return True, f"a {32 * cls}-bit library; this Python is {32 * want_cls}-bit"
    if (e == "<") != (sys.byteorder == "little"):
        return True, "a library of the other byte order"
    want = ELF_MACHINES.get(platform.machine().lower())
    if want is not None and mach != want:
        return True, f"a library for ELF machine {mach}; this machine is {platform.machine()} ({want})"
    if etype != ET_DYN:
        return False, f"not a shared library (ELF type {etype})"
    n = len(data)
    if phnum == 0 or phent < (56 if cls == 2 else 32) or phoff + phent * phnum > n or shoff + shent * shnum > n:
        return False, "truncated or damaged ELF headers (a header table lies beyond the end of the file)"
    for i in range(phnum):
        at = phoff + i * phent
        if cls == 2:
            ptype, = struct.unpack_from(e + "I", data, at)
            off, _, _, filesz = struct.unpack_from(e + "QQQQ", data, at + 8)
        else:
            ptype, off, _, _, filesz = struct.unpack_from(e + "IIIII", data, at)
        if ptype == PT_LOAD and off + filesz > n:
            return False, f"truncated or damaged ELF file (segment {i} ends at byte {off + filesz:,} of {n:,})"
    return None


__all__ = ["ForeignLibraryError", "LibraryManifest", "MAGIC", "check_binary", "host_format", "sign_library",
           "verify_library"]
