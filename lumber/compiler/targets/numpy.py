"""Target ``numpy``: the reference evaluator itself (no compiler needed); its artifact is the ``.lumber`` IR file."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from lumber.ir import Forest, ModelFormatError, load_ir

from lumber.runtime.predictors import NumpyPredictor, Predictor
from .base import Target

ZIP = b"PK\x03\x04"


@dataclass(frozen=True, kw_only=True)
class NumpyOptions:
    """The reference evaluator has no knobs."""


class NumpyTarget(Target):
    """``Forest.evaluate`` behind the predictor interface."""

    name = "numpy"
    suffix = ".lumber"
    what = "lumber IR (reference evaluator)"
    Options = NumpyOptions
    artifact_predicts = False

    def compile(self, ir: Forest, options: NumpyOptions, *, path: str | Path | None = None, threads: int = 1,
                fingerprint: str | None = None) -> Predictor:
        pred = NumpyPredictor(ir, fingerprint)
        if path is not None:
            pred.save(path)
        return pred

    def load(self, path: Path, *, threads: int = 1, prefix: str = "lumber") -> Predictor:
        ir = load_ir(path)
        if not isinstance(ir, Forest):
            raise ModelFormatError(f"{path}: holds a {type(ir).__name__}, not a Forest the reference evaluator runs",
                                   "compile it first: lumber compile FILE --emit c (or table)")
        return NumpyPredictor(ir)

    def recognizes(self, head: bytes, path: Path) -> bool:
        return head[:4] == ZIP


__all__ = ["NumpyOptions", "NumpyTarget"]
