"""lumber: a compiler for trained tree ensembles.

The public API is imported lazily so ``import lumber`` stays fast and optional
pieces load only when used. See README.md for a tour.
"""

from __future__ import annotations

import importlib
from typing import Any

__version__ = "0.1.0"

_API: dict[str, str] = {
    "load": "lumber.compiler.frontends:load",
    "run": "lumber.compiler.api.pipeline:run",
    "equivalent": "lumber.compiler.api.equivalence:equivalent",
    "compile": "lumber.compiler.api.compile:compile",
    "compile_fastest": "lumber.compiler.api.compile:compile_fastest",
    "compile_within": "lumber.compiler.api.compile:compile_within",
    "load_compiled": "lumber.compiler.api.compile:load_compiled",
    "predict_file": "lumber.runtime.stream:predict_file",
    "StreamOptions": "lumber.runtime.stream:StreamOptions",
    "COptions": "lumber.compiler.targets.c:COptions",
    "CSourceOptions": "lumber.compiler.targets.c:CSourceOptions",
    "FastestOptions": "lumber.compiler.targets.c:FastestOptions",
    "NumpyOptions": "lumber.compiler.targets.numpy:NumpyOptions",
    "OnnxOptions": "lumber.backends.onnx:OnnxOptions",
    "TableOptions": "lumber.compiler.targets.table:TableOptions",
    "TableCOptions": "lumber.compiler.targets.table:TableCOptions",
    "FitOptions": "lumber.passes.transforms.oblivious_fit:FitOptions",
    "parse_constraints": "lumber.compiler.dsl:parse_constraints",
    "sensitive_tests": "lumber.compiler.api.sensitive:sensitive_tests",
    "SensitiveOptions": "lumber.passes.analyses.sensitive:SensitiveOptions",
    "counterfactual": "lumber.compiler.api.counterfactual:counterfactual",
    "CounterfactualOptions": "lumber.passes.analyses.counterfactual.options:CounterfactualOptions",
    "counterfactual_rules": "lumber.compiler.api.rules:counterfactual_rules",
    "RuleOptions": "lumber.passes.analyses.rules:RuleOptions",
    "attribution": "lumber.compiler.api.attribution:attribution",
    "contributions": "lumber.compiler.api.contributions:contributions",
    "Contributions": "lumber.passes.analyses.contributions:Contributions",
    "explanation_request": "lumber.compiler.explain:explanation_request",
    "Forest": "lumber.ir:Forest",
    "Schema": "lumber.ir:Schema",
    "Constraints": "lumber.ir:Constraints",
    "Target": "lumber.ir:Target",
    "Cutoff": "lumber.ir:Cutoff",
    "LumberError": "lumber.ir:LumberError",
    "datasets": "lumber.datasets",
}

__all__ = sorted(_API)


def __getattr__(name: str) -> Any:
    target = _API.get(name)
    if target is None:
        raise AttributeError(f"module 'lumber' has no attribute {name!r}")
    mod, _, attr = target.partition(":")
    module = importlib.import_module(mod)
    value = getattr(module, attr) if attr else module
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(list(globals()) + list(_API))
