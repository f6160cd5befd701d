"""Targets ``c`` (a shared library built with the system compiler) and ``c-source`` (the C file only).

The path of ``lumber.compile(model, target="c")``: :meth:`CLibraryTarget.compile`
hashes the forest once, reuses a library already at ``path`` built from the same
model, else :func:`lumber.backends.c.emit_source` prints the C,
:func:`~lumber.backends.c.build_shared` compiles it and
:class:`~lumber.backends.c.CLibrary` loads it under a :class:`CPredictor`.
An ObliviousEnsemble given to ``c`` is compiled by ``table-c`` (same ABI).
"""

from __future__ import annotations

import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from lumber.backends.base import Artifact
from lumber.backends.base import fingerprint as ir_fingerprint
from lumber.backends.c import BuildOptions, CLibrary, COptions, build_shared, emit_source
from lumber.ir import Forest, ModelFormatError, ObliviousEnsemble, atomic_write_bytes

from ..predictors import CPredictor, CSourcePredictor, Predictor
from .base import Target

ELF, PE = b"\x7fELF", b"MZ"
MACH_O = (b"\xcf\xfa\xed\xfe", b"\xca\xfe\xba\xbe")


@dataclass(frozen=True, kw_only=True)
class CLibraryOptions(COptions):
    """C emission knobs plus how to call the compiler."""

    march_native: bool = False
    """Tune for this CPU (the library may then not run on older CPUs)."""
    openmp: bool | None = None
    """Use OpenMP threads; None: when the compiler supports -fopenmp."""
    cc: str | None = None
    """Compiler command; default: $CC, then cc, gcc, clang."""

    def build(self) -> BuildOptions:
        return BuildOptions(cc=self.cc, march_native=self.march_native, openmp=self.openmp)


def build_library(art: Artifact, build: BuildOptions, *, prefix: str, path: str | Path | None,
                  threads: int) -> CPredictor:
    """Compile emitted C into a shared library (written atomically to ``path`` when given) and load it."""
    with tempfile.TemporaryDirectory(prefix="lumber-build-") as tmp:
        so = Path(tmp, "model.so")
        build_shared(art.text(), so, build)
        data = so.read_bytes()
        lib = CLibrary(so, prefix=prefix)
    pred = CPredictor(lib, data, threads=threads, source=art)
    if path is not None:
        atomic_write_bytes(path, data)
        pred.path = Path(path)
    return pred


def is_shared_library(head: bytes) -> bool:
    return head[:4] == ELF or head[:2] == PE or head[:4] in MACH_O


class CLibraryTarget(Target):
    """A C shared library called through ctypes."""

    name = "c"
    suffix = ".so"
    what = "C shared library"
    Options = CLibraryOptions
    accepts = (Forest, ObliviousEnsemble)

    def for_ir(self, ir: Any) -> Target:
        if isinstance(ir, ObliviousEnsemble):
            from . import get_target

            return get_target("table-c")
        return super().for_ir(ir)

    def compile(self, ir: Forest, options: CLibraryOptions, *, path: str | Path | None = None, threads: int = 1,
                fingerprint: str | None = None) -> Predictor:
        fp = fingerprint or ir_fingerprint(ir)
        if path is not None:
            fresh = _fresh_library(path, fp, options.prefix, threads)
            if fresh is not None:
                return fresh
        art = emit_source(ir, options, fp=fp)
        return build_library(art, options.build(), prefix=options.prefix, path=path, threads=threads)

    def load(self, path: Path, *, threads: int = 1, prefix: str = "lumber") -> Predictor:
        return CPredictor(CLibrary(path, prefix=prefix), path.read_bytes(), threads=threads)

    def recognizes(self, head: bytes, path: Path) -> bool:
        return is_shared_library(head)


class CSourceTarget(Target):
    """C source and header (not built); predictions come from the reference evaluator."""

    name = "c-source"
    suffix = ".c"
    what = "C source + header"
    Options = COptions
    artifact_predicts = False

    def compile(self, ir: Forest, options: COptions, *, path: str | Path | None = None, threads: int = 1,
                fingerprint: str | None = None) -> Predictor:
        pred = CSourcePredictor(ir, emit_source(ir, options, fp=fingerprint))
        if path is not None:
            pred.save(path)
        return pred

    def load(self, path: Path, *, threads: int = 1, prefix: str = "lumber") -> Predictor:
        """Build the source into a library (the C file is self-contained; the header is for C callers)."""
        art = Artifact(target="c-source", files={path.name: path.read_bytes()}, fingerprint="")
        return build_library(art, BuildOptions(), prefix=prefix, path=None, threads=threads)

    def recognizes(self, head: bytes, path: Path) -> bool:
        return path.suffix == self.suffix


def _fresh_library(path: str | Path, fp: str, prefix: str, threads: int) -> CPredictor | None:
    """The library already at ``path`` if it was built from this very model (same fingerprint)."""
    if not Path(path).is_file():
        return None
    try:
        lib = CLibrary(path, prefix=prefix)
    except ModelFormatError:
        return None
    if lib.fingerprint != fp:
        return None
    pred = CPredictor(lib, Path(path).read_bytes(), threads=threads)
    pred.path = Path(path)
    return pred


__all__ = ["CLibraryOptions", "CLibraryTarget", "CSourceTarget", "build_library", "is_shared_library"]
