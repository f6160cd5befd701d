"""Target ``onnx``: an ``ai.onnx.ml`` TreeEnsemble run by onnxruntime (see :mod:`lumber.backends.onnx`)."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

from lumber.backends.onnx import OnnxOptions, emit_onnx
from lumber.ir import Forest, ModelFormatError, Schema

from lumber.runtime.predictors import OnnxPredictor, Predictor
from .base import Target


class OnnxTarget(Target):
    """The model as ONNX; the file carries the schema and fingerprint as metadata."""

    name = "onnx"
    suffix = ".onnx"
    what = "ONNX model"
    Options = OnnxOptions

    def compile(self, ir: Forest, options: OnnxOptions, *, path: str | Path | None = None, threads: int = 1,
                fingerprint: str | None = None) -> Predictor:
        if fingerprint is not None:
            options = replace(options, source_fingerprint=fingerprint)
        art = emit_onnx(ir, options)
        pred = OnnxPredictor(art.files[art.main], ir.schema, art.fingerprint, str(art.metadata["input_dtype"]),
                             threads=threads)
        if path is not None:
            pred.save(path)
        return pred

    def load(self, path: Path, *, threads: int = 1, prefix: str = "lumber") -> Predictor:
        import onnx

        data = path.read_bytes()
        try:
            m = onnx.load_from_string(data)
        except Exception as exc:  # protobuf decode errors have no common base class
            raise ModelFormatError(
                f"{path}: neither a shared library nor an ONNX model ({type(exc).__name__})") from None
        props = {q.key: q.value for q in m.metadata_props}
        if "lumber.fingerprint" not in props:
            raise ModelFormatError(f"{path}: an ONNX model not produced by lumber (no lumber.fingerprint metadata)")
        schema = Schema.from_dict(json.loads(props["lumber.schema"]))
        return OnnxPredictor(data, schema, props["lumber.fingerprint"], props["lumber.input_dtype"], threads=threads)

    def recognizes(self, head: bytes, path: Path) -> bool:
        return path.suffix == self.suffix


__all__ = ["OnnxTarget"]
