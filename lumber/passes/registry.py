"""Pass names -> pass classes, imported lazily (xDSL's ``get_all_passes``).

A new pass is a new module plus one line here. Names are kebab-case.
"""

from __future__ import annotations

import difflib
import importlib
from typing import Callable

from lumber.ir import CompileError

from .base import Pass

PASSES: dict[str, str] = {
    "polynomial": "lumber.passes.transforms.polynomial:ToPolynomial",
    "prune": "lumber.passes.transforms.prune_monomials:PruneMonomials",
    "prune-refit": "lumber.passes.transforms.prune_refit:PruneRefit",
    "attribution": "lumber.passes.analyses.attribution:Attribution",
    "oblivious": "lumber.passes.transforms.recompose_oblivious:RecomposeOblivious",
    "quantize": "lumber.passes.transforms.quantize:Quantize",
    "fit-oblivious": "lumber.passes.transforms.oblivious_fit:FitOblivious",
    "cascade": "lumber.passes.transforms.cascade:MakeCascade",
    "to-forest": "lumber.passes.transforms.convert:ToForest",
    "as-tables": "lumber.passes.transforms.convert:AsTables",
    "equivalence": "lumber.passes.analyses.equivalence:Equivalence",
    "counterfactual": "lumber.passes.analyses.explainers:Counterfactuals",
    "sensitive-tests": "lumber.passes.analyses.explainers:SensitiveTests",
    "contributions": "lumber.passes.analyses.explainers:RowContributions",
}


def _loader(target: str) -> Callable[[], type[Pass]]:
    def load() -> type[Pass]:
        mod, name = target.split(":")
        cls: type[Pass] = getattr(importlib.import_module(mod), name)
        return cls

    return load


def get_all_passes() -> dict[str, Callable[[], type[Pass]]]:
    """Every registered pass name with a function that imports its class."""
    return {name: _loader(target) for name, target in PASSES.items()}


def known_names() -> list[str]:
    return sorted(PASSES)


def get_pass(name: str) -> type[Pass]:
    """The class registered as ``name``; a CompileError with the known names otherwise."""
    target = PASSES.get(name)
    if target is None:
        close = difflib.get_close_matches(name, PASSES, n=1)
        notes = ([f"did you mean '{close[0]}'?"] if close else []) + [f"known passes: {', '.join(known_names())}"]
        raise CompileError(f"unknown pass '{name}'", *notes)
    return _loader(target)()


__all__ = ["PASSES", "get_all_passes", "get_pass", "known_names"]
