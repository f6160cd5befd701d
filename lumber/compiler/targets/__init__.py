"""Target names -> target objects, imported lazily (as :mod:`lumber.passes.registry` does for passes).

A target owns its options dataclass, its file suffix, how it compiles an IR
into a predictor and how it loads its artifact again (see :mod:`.base`).
A new target is a new module plus one line here. ``lumber.compile``,
``lumber compile`` and ``lumber build`` read this registry, and
:func:`load_artifact` loads any artifact a target wrote (recognized by its
first bytes, so a renamed file still loads).
"""

from __future__ import annotations

import difflib
import importlib
from functools import cache
from pathlib import Path
from typing import Any

from lumber.backends.base import fingerprint
from lumber.ir import CompileError, ModelFormatError

from lumber.runtime.predictors import Predictor
from .base import Target, model_ir

TARGETS: dict[str, str] = {
    "c": "lumber.compiler.targets.c:CLibraryTarget",
    "c-source": "lumber.compiler.targets.c:CSourceTarget",
    "onnx": "lumber.compiler.targets.onnx:OnnxTarget",
    "numpy": "lumber.compiler.targets.numpy:NumpyTarget",
    "table": "lumber.compiler.targets.table:TableTarget",
    "table-c": "lumber.compiler.targets.table:TableCTarget",
}
LOAD_ORDER = ("table", "numpy", "c", "c-source")
"""Targets asked in turn whether they recognize a file; ONNX (protobuf, no magic bytes) is the last resort."""


def known_targets() -> tuple[str, ...]:
    return tuple(TARGETS)


@cache
def _instance(spec: str) -> Target:
    mod, name = spec.split(":")
    cls: type[Target] = getattr(importlib.import_module(mod), name)
    return cls()


def get_target(name: str) -> Target:
    """The target registered as ``name``; a CompileError listing the known targets otherwise."""
    spec = TARGETS.get(name)
    if spec is None:
        close = difflib.get_close_matches(name, TARGETS, n=1)
        raise CompileError(f"unknown target {name!r}", *([f"did you mean '{close[0]}'?"] if close else []),
                           f"targets: {', '.join(TARGETS)}")
    return _instance(spec)


def target_for_path(path: str | Path) -> Target:
    """The target whose artifact ``path`` is (magic bytes first; ONNX when nothing else claims it)."""
    p = Path(path)
    try:
        with p.open("rb") as fh:
            head = fh.read(8)
    except FileNotFoundError:
        raise ModelFormatError(f"{p}: no such file") from None
    except OSError as exc:
        raise ModelFormatError(f"{p}: cannot read ({exc.strerror})") from None
    for name in LOAD_ORDER:
        target = get_target(name)
        if target.recognizes(head, p):
            return target
    return get_target("onnx")


def load_artifact(path: str | Path, model: Any = None, *, prefix: str = "lumber", threads: int = 1) -> Predictor:
    """A predictor for any saved artifact (``.so``, ``.onnx``, ``.table``, ``.lumber``, ``.c``).

    With ``model``, the artifact's recorded fingerprint must match the model's,
    else a ``CompileError`` says the artifact is stale.
    """
    p = Path(path)
    pred = target_for_path(p).load(p, threads=threads, prefix=prefix)
    pred.path = p
    if model is not None:
        expected = fingerprint(model_ir(model))
        if expected != pred.fingerprint:
            raise CompileError(
                f"{p}: stale artifact: built from model {pred.fingerprint[:12]}, the given model is {expected[:12]}",
                "recompile it (lumber compile MODEL --emit ... -o PATH)")
    return pred


__all__ = ["LOAD_ORDER", "TARGETS", "Target", "get_target", "known_targets", "load_artifact", "target_for_path"]
