"""Any model as a quantized ObliviousEnsemble: what the ``table`` and ``table-c`` targets compile.

CatBoost's symmetric trees convert directly; anything else is re-composed by
the ``polynomial,oblivious,quantize`` passes (MonoForest re-composition; exact).
The pipeline is built from pass objects (:func:`table_passes`), so every
re-composition option reaches the pass it belongs to.
"""

from __future__ import annotations

import time
from typing import Any

from lumber.ir import CompileError, Forest, LumberError, ObliviousEnsemble
from lumber.passes.base import Pass

MAX_MONOMIALS = 20_000_000
"""Re-composition bounds the expansion (20M terms, about a gigabyte while merging) so a model too
deep for tables fails fast with the polynomial pass's message."""


def table_passes(max_depth: int | str = "auto", strategy: str = "grow") -> list[Pass]:
    """The re-composition pipeline: expand to a polynomial, cover it with oblivious trees, quantize."""
    from lumber.passes.transforms.quantize import Quantize
    from lumber.passes.transforms.recompose_oblivious import RecomposeOblivious
    from lumber.passes.transforms.polynomial import ToPolynomial

    return [ToPolynomial(max_monomials=MAX_MONOMIALS),
            RecomposeOblivious(max_depth=max_depth, strategy=strategy),  # type: ignore[arg-type]
            Quantize()]


def to_tables(model: Any, *, max_depth: int | str = "auto", strategy: str = "grow", time_passes: bool = False,
              stats: dict[str, Any] | None = None, exact: bool = True) -> ObliviousEnsemble:
    """A quantized ObliviousEnsemble computing exactly what ``model`` computes.

    ``stats`` (a dict) receives how the tables were made: ``method`` (``direct`` for a
    forest of oblivious trees, else ``re-composition``), seconds, tree counts and table bytes.
    Tables sum in float64: a model whose library sums leaves in float32 (XGBoost) is refused
    unless ``exact=False``, which accepts the float64 sum of the same leaves.
    """
    from lumber.compiler.api.pipeline import run as run_pipeline
    from lumber.ir.oblivious import forest_to_oblivious
    from lumber.passes.base import PassContext
    from lumber.passes.transforms.quantize import quantize_ensemble

    t0 = time.perf_counter()
    info: dict[str, Any] = stats if stats is not None else {}
    if isinstance(model, (Forest, ObliviousEnsemble)):
        src = model
    else:
        from lumber.compiler.frontends import load

        src = load(model)
    if isinstance(src, ObliviousEnsemble):
        ens = src if src.quantized else quantize_ensemble(src)
        info.update(method="given", seconds=time.perf_counter() - t0, trees_in=ens.n_trees)
        info.update(_table_stats(ens))
        return ens
    forest = src
    info["trees_in"] = forest.n_trees
    if forest.schema.accumulate_dtype != "float64":
        lib = forest.schema.source.get("library", "the source library")
        if exact:
            raise CompileError(
                f"{lib} sums leaf values in {forest.schema.accumulate_dtype}; oblivious tables sum in float64, "
                f"so margins would differ from {lib}'s in the last {forest.schema.accumulate_dtype} bits",
                "pass exact=False (lumber compile --inexact) to accept the float64 sum of the same leaves, "
                "or keep the forest form (target 'c')")
        forest = forest.replace(schema=forest.schema.with_(accumulate_dtype="float64"))
        info["note"] = f"float64 sums of a model that {lib} sums in float32"
    passes = table_passes(max_depth, strategy)  # options are checked before any work
    try:
        ens = quantize_ensemble(forest_to_oblivious(forest))
        info.update(method="direct")
    except LumberError:
        ctx = PassContext()
        ens = run_pipeline(forest, passes, time_passes=time_passes, context=ctx)
        info.update(method="re-composition", pipeline=",".join(p.pipeline_text() for p in passes),
                    passes={t.pass_text: t.seconds for t in ctx.timings},
                    recompose={k: v for r in ctx.reports if r.pass_name == "oblivious" for k, v in r.metrics.items()})
    info["seconds"] = time.perf_counter() - t0
    info.update(_table_stats(ens))
    return ens


def _table_stats(ens: ObliviousEnsemble) -> dict[str, Any]:
    st = ens.statistics()
    return {"trees_out": st["trees"], "max_depth": st["max_depth"], "table_bytes": st["table_bytes"],
            "trees_by_depth": st["trees_by_depth"]}


__all__ = ["MAX_MONOMIALS", "table_passes", "to_tables"]
