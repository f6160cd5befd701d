"""Compiled artifacts as inputs: ``predict`` and ``inspect`` take a ``.so``, a table file or lumber's ``.onnx``.

An artifact records the fingerprint of the model it was compiled from and the
model's schema, so it can predict a CSV (columns bound by name, as for models)
and say where it came from. Model files still load through the frontends.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any


def compiled_artifact(path: str | Path) -> Any | None:
    """The predictor of a compiled artifact at ``path``, or None when the file is a model (or not lumber's)."""
    from lumber.compiler.frontends import read_model_bytes
    from lumber.compiler.targets import load_artifact
    from lumber.compiler.targets.c import is_shared_library
    from lumber.ir import LumberError

    p = Path(path)
    head = read_model_bytes(p)[:8]
    if is_shared_library(head) or head[:4] == b"LUMB":
        return load_artifact(p)
    if p.suffix == ".onnx" or head[:1] == b"\x08":  # ONNX: protobuf, field 1 (ir_version) first
        try:
            art = load_artifact(p)
        except LumberError:
            return None  # an ONNX model not written by lumber: a model for the ONNX frontend
        _check_onnx_graph(p)
        return art
    return None


def _check_onnx_graph(path: Path) -> None:
    """An edited lumber ``.onnx`` (a feature or child out of range) must fail here, naming the file, not
    inside onnxruntime at prediction time: the ONNX frontend reads the graph and reports damage."""
    from lumber.compiler.frontends.onnx import load_onnx_file
    from lumber.ir import UnsupportedModelError

    try:
        load_onnx_file(path)
    except UnsupportedModelError:
        pass  # well formed, only beyond what the frontend reads back: onnxruntime runs it


def model_or_artifact(path: str | Path) -> Any:
    """A compiled artifact's predictor, else the model file as IR: a ``.lumber`` file's own IR (Forest,
    Polynomial or ObliviousEnsemble, each with its reference evaluator), any other model as a Forest."""
    from lumber.compiler.frontends import load_any

    art = compiled_artifact(path)
    return art if art is not None else load_any(path)


def describe_library(path: str | Path, prefix: str = "lumber") -> dict[str, Any]:
    """What ``inspect`` says about a shared library, read from its manifest: the library is verified
    (digest, headers) and never loaded, so a library for another machine is described too."""
    from lumber.backends.c.loader import read_library
    from lumber.backends.c.manifest import check_binary, verify_library
    from lumber.ir import ModelFormatError, Schema

    p = Path(path)
    man = verify_library(read_library(p), str(p), binary=False)
    meta = man.model(prefix)
    if meta is None and len(man.models) == 1:
        meta = next(iter(man.models.values()))
    if meta is None:
        raise ModelFormatError(f"{p}: its manifest records no model with symbol prefix '{prefix}'",
                               f"prefixes recorded: {', '.join(man.models) or 'none'}")
    try:
        check_binary(man.library, str(p), man)
        loads = "yes"
    except ModelFormatError as exc:
        loads = f"no: {exc.diagnostics[0].message}"
    d = describe(p, "table-c" if meta.get("form") == "oblivious" else "c", str(meta["fingerprint"]),
                 Schema.from_dict(meta["schema"]))
    d.update(sha256=man.sha256, lumber_version=man.lumber_version, built_on=f"{man.system} {man.machine}",
             loads_here=loads, sources=len(man.sources))
    return d


def describe(path: str | Path, target: str, fingerprint: str, schema: Any) -> dict[str, Any]:
    """What ``inspect`` says about an artifact: its kind, the model it came from, its inputs and outputs."""
    from lumber.compiler.targets import TARGETS, get_target

    return {  # the target registry owns what each artifact is (Target.what)
        "artifact": get_target(target).what if target in TARGETS else target, "target": target,
        "fingerprint": fingerprint, "source": dict(schema.source), "task": schema.task.name.lower(),
        "outputs": schema.n_outputs, "features": schema.n_features, "feature_names": list(schema.feature_names),
        "input_dtype": schema.input_dtype, "bytes": Path(path).stat().st_size,
        "classes": [str(c) for c in schema.classes] if schema.classes is not None else None,
    }
