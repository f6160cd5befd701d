"""Oblivious decision tables as library functions: ``to_tables``, ``compile_table``, ``compile_oblivious_c``.

Thin names over the registry's ``table`` and ``table-c`` targets (what
``lumber.compile(model, target="table")`` and ``target="table-c"`` run), for
callers that want the tables themselves or the re-composition statistics.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, cast

from ..predictors import CPredictor, TablePredictor
from ..tables import to_tables
from ..targets import get_target
from ..targets.base import model_ir


def compile_table(model: Any, *, path: str | Path | None = None, threads: int = 1, max_depth: int | str = "auto",
                  strategy: str = "pack", time_passes: bool = False, exact: bool = True) -> TablePredictor:
    """``lumber.compile(model, target="table")``; ``predictor.report["tables"]`` says how the tables were made."""
    tgt = get_target("table")
    opts = tgt.options({"max_depth": max_depth, "strategy": strategy, "time_passes": time_passes, "exact": exact})
    return cast(TablePredictor, tgt.compile(model_ir(model), opts, path=path, threads=threads))


def compile_oblivious_c(model: Any, *, path: str | Path | None = None, threads: int = 1, prefix: str = "lumber",
                        march_native: bool = False, openmp: bool | None = None, cc: str | None = None,
                        name: str = "model", max_depth: int | str = "auto", strategy: str = "pack",
                        stats: dict[str, Any] | None = None, exact: bool = True) -> CPredictor:
    """``lumber.compile(model, target="table-c")``: the tables as a C library with the forest library's
    entry points; ``stats`` (a dict) receives the table statistics and ``build_seconds``."""
    tgt = get_target("table-c")
    opts = tgt.options({"prefix": prefix, "march_native": march_native, "openmp": openmp, "cc": cc, "name": name,
                        "max_depth": max_depth, "strategy": strategy, "exact": exact})
    pred = cast(CPredictor, tgt.compile(model_ir(model), opts, path=path, threads=threads))
    if stats is not None:
        stats.update(pred.report["tables"])
    return pred


__all__ = ["compile_oblivious_c", "compile_table", "to_tables"]
