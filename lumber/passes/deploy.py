"""Every IR is deployable: the forms a target, ``lumber predict`` or ``lumber.load`` can use.

A pass pipeline may end in any IR. Targets compile Forests and ObliviousEnsembles;
a Polynomial (``polynomial``, ``prune``, ``prune-refit``) is turned into one
first, exactly: re-composition into oblivious trees (the ``oblivious`` pass
with its defaults) computes the polynomial's function, so the artifact
computes what the pipeline produced. An ObliviousEnsemble goes to a target that
only holds forests (ONNX, numpy, C source) as its exact Forest of complete trees
(:meth:`~lumber.ir.ObliviousEnsemble.to_forest`).
"""

from __future__ import annotations

from lumber.ir import CompileError, Forest, ObliviousEnsemble, Polynomial
from lumber.passes.transforms.recompose_oblivious import DEFAULT_MAX_DEPTH, recompose

MAX_TABLE_DEPTH = 16
"""Deepest table a Polynomial is re-composed into when deployed (65,536 rows)."""

AnyIR = Forest | Polynomial | ObliviousEnsemble


def tables_of(poly: Polynomial) -> ObliviousEnsemble:
    """The polynomial as oblivious tables, exactly (``oblivious`` with its defaults: strategy pack)."""
    if poly.max_degree > MAX_TABLE_DEPTH:
        raise CompileError(
            f"the polynomial has monomials of {poly.max_degree} conditions: as oblivious tables they need "
            f"2^{poly.max_degree} rows each (at most 2^{MAX_TABLE_DEPTH} are made when deploying)",
            "prune it first (prune / prune-refit), or compile the model's Forest")
    ens, _ = recompose(poly, max_depth=max(DEFAULT_MAX_DEPTH, poly.max_degree))
    return ens


def deployable(ir: AnyIR) -> Forest | ObliviousEnsemble:
    """A form targets compile: Forests and ObliviousEnsembles as they are, a Polynomial as exact tables."""
    if isinstance(ir, Polynomial):
        return tables_of(ir)
    return ir


def as_forest(ir: AnyIR) -> Forest:
    """The IR as an exactly equal Forest (the form explanations and ``lumber.load`` hand out)."""
    d = deployable(ir)
    return d if isinstance(d, Forest) else d.to_forest()


__all__ = ["AnyIR", "MAX_TABLE_DEPTH", "as_forest", "deployable", "tables_of"]
