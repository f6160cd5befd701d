"""Targets ``table`` (the oblivious table file) and ``table-c`` (the tables as a C shared library).

Both first make the model's quantized ObliviousEnsemble (:func:`lumber.compiler.tables.to_tables`:
CatBoost's trees directly, anything else by re-composition) and record the
source model's fingerprint, so an artifact of either form checks against the
model it came from. ``table-c`` exports the forest library's C functions, so a
``table-c`` library loads like any ``c`` one.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from lumber.backends.base import fingerprint as ir_fingerprint
from lumber.backends.table_c import TableCEmitOptions, emit_table_source, isa_code
from lumber.ir import CompileError, Forest, ObliviousEnsemble

from lumber.runtime.predictors import CPredictor, Predictor, TablePredictor
from ..tables import to_tables
from .base import Target
from .library import CompilerOptions, build_library, load_library

MAGIC = b"LUMB"


@dataclass(frozen=True, kw_only=True)
class RecomposeOptions:
    """How a forest becomes oblivious tables."""

    max_depth: int | str = "auto"
    """Deepest table when re-composing (``auto``: the cheapest cover's depth by the measured table costs)."""
    strategy: str = "grow"
    """Re-composition strategy (``oblivious`` pass option ``strategy``)."""
    exact: bool = True
    """Refuse a model its library sums in float32 (tables sum in float64)."""
    time_passes: bool = False
    """Print the re-composition passes' timings."""

    def tables(self, ir: Forest | ObliviousEnsemble, stats: dict[str, Any]) -> ObliviousEnsemble:
        return to_tables(ir, max_depth=self.max_depth, strategy=self.strategy, time_passes=self.time_passes,
                         stats=stats, exact=self.exact)


@dataclass(frozen=True, kw_only=True)
class TableOptions(RecomposeOptions):
    engine: str = "auto"
    """``c`` (the table runtime, built once per process), ``numpy``, or ``auto`` (c when a compiler exists)."""
    isa: str = "auto"
    """The C runtime's kernel path: ``auto`` (the widest this CPU runs), ``avx512``, ``avx2`` or ``portable``;
    a path this CPU lacks is a CompileError. Every path gives the same margins bit for bit."""


@dataclass(frozen=True, kw_only=True)
class TableCOptions(RecomposeOptions, CompilerOptions):
    name: str = "model"
    prefix: str = "lumber"
    isa: str = "auto"
    """Kernel path: ``auto`` (the widest the CPU runs, picked when the library loads), ``avx512``, ``avx2``
    or ``portable``; a forced path runs where the CPU has it, else the widest it has (same margins)."""


class TableTarget(Target):
    """Oblivious decision tables in the table file format (docs/table-format.md)."""

    name = "table"
    suffix = ".table"
    what = "oblivious tables"
    Options = TableOptions
    accepts = (Forest, ObliviousEnsemble)

    def compile(self, ir: Forest | ObliviousEnsemble, options: TableOptions, *, path: str | Path | None = None,
                threads: int = 1, fingerprint: str | None = None) -> Predictor:
        isa_code(options.isa)  # an unknown path fails before any work
        if options.engine == "numpy" and options.isa != "auto":
            raise CompileError(f"isa={options.isa!r} picks a path of the C runtime; engine='numpy' has none",
                               "use engine='c' (or 'auto'), or leave isa='auto'")
        fp = fingerprint or ir_fingerprint(ir)
        stats: dict[str, Any] = {}
        ens = options.tables(ir, stats)
        pred = TablePredictor(ens, fp, threads=threads, engine=options.engine, isa=options.isa)
        pred.report = {"tables": stats}
        if path is not None:
            pred.save(path)
        return pred

    def load(self, path: Path, *, threads: int = 1, prefix: str = "lumber") -> Predictor:
        from lumber.backends.table import read_table

        tf = read_table(path)
        return TablePredictor(tf.ensemble, tf.fingerprint, threads=threads)

    def recognizes(self, head: bytes, path: Path) -> bool:
        return head[:4] == MAGIC


class TableCTarget(Target):
    """The oblivious tables as specialized C, built into a library with the ``c`` target's entry points."""

    name = "table-c"
    suffix = ".so"
    what = "C shared library, oblivious form"
    Options = TableCOptions
    accepts = (Forest, ObliviousEnsemble)

    def compile(self, ir: Forest | ObliviousEnsemble, options: TableCOptions, *, path: str | Path | None = None,
                threads: int = 1, fingerprint: str | None = None) -> Predictor:
        isa_code(options.isa)
        fp = fingerprint or ir_fingerprint(ir)
        stats: dict[str, Any] = {}
        ens = options.tables(ir, stats)
        art = emit_table_source(ens, TableCEmitOptions(name=options.name, prefix=options.prefix, source_fingerprint=fp,
                                                       isa=options.isa))
        t0 = time.perf_counter()
        pred = build_library(art, options.build(), prefix=options.prefix, path=path, threads=threads)
        stats["build_seconds"] = time.perf_counter() - t0
        pred.report = {"tables": stats}
        return pred

    def load(self, path: Path, *, threads: int = 1, prefix: str = "lumber") -> CPredictor:
        return load_library(path, threads=threads, prefix=prefix)


__all__ = ["RecomposeOptions", "TableCOptions", "TableCTarget", "TableOptions", "TableTarget"]
