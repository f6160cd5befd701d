"""Exact conversions between the tree IRs: ``to-forest`` and ``as-tables``.

``to-forest`` writes an ObliviousEnsemble as the Forest of complete trees it is
(:meth:`lumber.ir.ObliviousEnsemble.to_forest`: same routing, same leaves), the form every target and
explainer reads. ``as-tables`` reads a Forest whose trees are all oblivious (CatBoost's symmetric trees)
as its tables directly (:func:`lumber.ir.oblivious.forest_to_oblivious`); any other forest is re-composed
by ``polynomial,oblivious``. Both compute their input's margins exactly.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from lumber.ir import CompileError, Forest, ObliviousEnsemble, ValidationError
from lumber.ir.oblivious import forest_to_oblivious

from ..base import PassContext, PassReport, Transform


@dataclass(frozen=True)
class ToForest(Transform[ObliviousEnsemble, Forest]):
    """``to-forest``: oblivious tables as the Forest of complete trees they are (exact)."""

    name: ClassVar[str] = "to-forest"

    def run(self, ir: ObliviousEnsemble, ctx: PassContext) -> Forest:
        forest = ir.to_forest()
        ctx.report(PassReport(self.name, f"{ir.n_trees:,} tables -> {forest.n_trees:,} complete trees, "
                                         f"{forest.n_nodes:,} nodes (exact)",
                              {"trees": forest.n_trees, "nodes": forest.n_nodes}))
        return forest


@dataclass(frozen=True)
class AsTables(Transform[Forest, ObliviousEnsemble]):
    """``as-tables``: a forest of oblivious trees as its tables, directly (exact)."""

    name: ClassVar[str] = "as-tables"

    def run(self, ir: Forest, ctx: PassContext) -> ObliviousEnsemble:
        try:
            ens = forest_to_oblivious(ir)
        except ValidationError as exc:
            raise CompileError(f"pass 'as-tables': {exc.diagnostics[0].message}",
                               "only forests of oblivious trees (CatBoost) convert directly; "
                               "'polynomial,oblivious' re-composes any forest") from None
        ctx.report(PassReport(self.name, f"{ir.n_trees:,} oblivious trees -> {ens.n_trees:,} tables (exact)",
                              {"trees": ens.n_trees}))
        return ens


__all__ = ["AsTables", "ToForest"]
