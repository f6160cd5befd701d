"""Shared C libraries behind the ``c`` and ``table-c`` targets: how to call the compiler, building
a library, loading one, and telling one by its first bytes.

Both targets export the C functions of :mod:`lumber.backends.c` (one ABI), so one loader
serves both and a ``table-c`` artifact loads like any ``c`` one.
"""

from __future__ import annotations

import tempfile
from dataclasses import dataclass
from pathlib import Path

from lumber.backends.base import Artifact
from lumber.backends.c import BuildOptions, CLibrary, build_shared
from lumber.ir import atomic_write_bytes

from lumber.runtime.predictors import CPredictor, open_library

ELF, PE = b"\x7fELF", b"MZ"
MACH_O = (b"\xcf\xfa\xed\xfe", b"\xca\xfe\xba\xbe")


@dataclass(frozen=True, kw_only=True)
class CompilerOptions:
    """How to call the system C compiler."""

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
    """Compile emitted C into a signed shared library (written atomically to ``path`` when given) and load it.

    The library carries its source, digest and the model's metadata (see :mod:`lumber.backends.c.manifest`).
    """
    with tempfile.TemporaryDirectory(prefix="lumber-build-") as tmp:
        so = Path(tmp, "model.so")
        build_shared(art.text(), so, build, models={prefix: art.metadata})
        lib = CLibrary(so, prefix=prefix)
    data = lib.data
    pred = CPredictor(lib, data, threads=threads, source=art)
    if path is not None:
        atomic_write_bytes(path, data)
        pred.path = Path(path)
    return pred


def load_library(path: Path, *, threads: int = 1, prefix: str = "lumber") -> CPredictor:
    """A predictor on a library either target wrote, verified before it is loaded (see :class:`CLibrary`)
    and rebuilt from its source where it cannot load (:func:`~lumber.runtime.predictors.open_library`)."""
    lib = open_library(str(path), prefix)
    return CPredictor(lib, lib.data, threads=threads)


def is_shared_library(head: bytes) -> bool:
    return head[:4] == ELF or head[:2] == PE or head[:4] in MACH_O


__all__ = ["CompilerOptions", "build_library", "is_shared_library", "load_library"]
