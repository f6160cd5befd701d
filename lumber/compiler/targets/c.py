"""Targets ``c`` (a shared library built with the system compiler) and ``c-source`` (the C file only).

The path of ``lumber.compile(model, target="c")``: :meth:`CLibraryTarget.compile`
hashes the forest once, reuses a library already at ``path`` built from the same
model, else :func:`lumber.backends.c.emit_source` prints the C and
:func:`.library.build_library` compiles it (:func:`~lumber.backends.c.build_shared`) and
loads it (:class:`~lumber.backends.c.CLibrary`) under a :class:`CPredictor`.
An ObliviousEnsemble given to ``c`` is compiled by ``table-c`` (same ABI).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from lumber.backends.base import Artifact
from lumber.backends.base import fingerprint as ir_fingerprint
from lumber.backends.c import BuildOptions, CEmitOptions, CLibrary, emit_source
from lumber.ir import Forest, ModelFormatError, ObliviousEnsemble

from lumber.runtime.predictors import CPredictor, CSourcePredictor, Predictor
from ..walks import compile_timed_walk
from .base import Target, project
from .library import CompilerOptions, build_library, is_shared_library, load_library
from .table import RecomposeOptions, TableCOptions, TableCTarget


@dataclass(frozen=True, kw_only=True)
class COptions(CEmitOptions, CompilerOptions):
    """Target ``c``: the C emission knobs (``prefix``, ``unroll``, ``block``, ``walk``, ``name``) plus how to call
    the compiler (``march_native``, ``openmp``, ``cc``)."""


@dataclass(frozen=True, kw_only=True)
class CSourceOptions(CEmitOptions):
    """Target ``c-source``: the C emission knobs only (nothing is compiled)."""


@dataclass(frozen=True, kw_only=True)
class FastestOptions(COptions, RecomposeOptions):
    """``lumber.compile_fastest`` and ``lumber.compile_within``: the forest library's options (:class:`COptions`)
    and how the oblivious form is re-composed (``max_depth``, ``strategy``, ``exact``, ``time_passes``). Both
    forms are libraries with one ABI, so they share ``prefix``, ``name`` and the compiler options."""

    def forest_options(self) -> COptions:
        """The forest library's options."""
        return project(self, COptions, strict=False)

    def table_options(self) -> TableCOptions:
        """The oblivious-table library's options."""
        return project(self, TableCOptions, strict=False)


class CLibraryTarget(Target):
    """A C shared library called through ctypes."""

    name = "c"
    suffix = ".so"
    what = "C shared library"
    Options = COptions
    accepts = (Forest, ObliviousEnsemble)

    def for_ir(self, ir: Any) -> Target:
        if isinstance(ir, ObliviousEnsemble):
            return TableCTarget()
        return super().for_ir(ir)

    def compile(self, ir: Forest, options: COptions, *, path: str | Path | None = None, threads: int = 1,
                fingerprint: str | None = None, sample: Any = None) -> Predictor:
        """``sample`` (user rows, with ``walk="auto"``): the walk is the faster on them (:mod:`..walks`)."""
        fp = fingerprint or ir_fingerprint(ir)
        if path is not None:
            fresh = _fresh_library(path, fp, options.prefix, threads)
            if fresh is not None:
                return fresh
        if sample is not None and options.walk == "auto" and not options.unroll and ir.n_trees > 0:
            def build(art: Artifact) -> CPredictor:
                return build_library(art, options.build(), prefix=options.prefix, path=None, threads=threads)

            return compile_timed_walk(ir, options, sample, build, path=path, fingerprint=fp)
        art = emit_source(ir, options, fp=fp)
        return build_library(art, options.build(), prefix=options.prefix, path=path, threads=threads)

    def load(self, path: Path, *, threads: int = 1, prefix: str = "lumber") -> Predictor:
        return load_library(path, threads=threads, prefix=prefix)

    def recognizes(self, head: bytes, path: Path) -> bool:
        return is_shared_library(head)


class CSourceTarget(Target):
    """C source and header (not built); predictions come from the reference evaluator."""

    name = "c-source"
    suffix = ".c"
    what = "C source + header"
    Options = CSourceOptions
    artifact_predicts = False

    def compile(self, ir: Forest, options: CSourceOptions, *, path: str | Path | None = None, threads: int = 1,
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
    pred = CPredictor(lib, lib.data, threads=threads)
    pred.path = Path(path)
    return pred


__all__ = ["COptions", "CLibraryTarget", "CSourceOptions", "FastestOptions", "CSourceTarget", "build_library",
           "is_shared_library"]
