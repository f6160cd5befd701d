"""What every compile target is: an options dataclass, a file suffix, ``compile`` and ``load``.

A target joins a backend (which only emits, see :mod:`lumber.backends.base`) to
the predictor that runs its artifact: ``compile`` takes an IR and the target's
own options, emits, builds or writes what the backend produced and returns a
:class:`~lumber.runtime.predictors.Predictor`; ``load`` turns a saved artifact
back into one. ``lumber.compile``, ``lumber compile`` and ``lumber build`` all
reach targets through :mod:`lumber.compiler.targets`, never by name tests.
"""

from __future__ import annotations

from dataclasses import MISSING, fields
from pathlib import Path
from typing import Any, ClassVar

from lumber.ir import CompileError, Forest, ObliviousEnsemble

from lumber.passes.deploy import deployable
from ..frontends import load_any
from lumber.runtime.predictors import Predictor


def model_ir(model: Any) -> Forest | ObliviousEnsemble:
    """The IR a target compiles: a Forest or ObliviousEnsemble as is, a Polynomial (object or ``.lumber``
    file) as its exact oblivious tables, anything else through ``lumber.load``."""
    return deployable(load_any(model))


def field_names(cls: type) -> str:
    return ", ".join(f.name for f in fields(cls))


def non_default(options: Any) -> dict[str, Any]:
    """The fields of the dataclass ``options`` that differ from their defaults."""
    out = {}
    for f in fields(options):
        default = f.default if f.default is not MISSING else (
            f.default_factory() if f.default_factory is not MISSING else MISSING)
        value = getattr(options, f.name)
        if default is MISSING or value != default:
            out[f.name] = value
    return out


def project(options: Any, cls: type, *, strict: bool = True) -> Any:
    """``options`` as the dataclass ``cls``: the fields both share, copied. ``strict``: a field set away from its
    default that ``cls`` lacks is a CompileError (the option would otherwise be dropped unseen)."""
    names = {f.name for f in fields(cls)}
    lost = sorted(set(non_default(options)) - names)
    if strict and lost:
        raise CompileError(f"option{'s' if len(lost) > 1 else ''} {', '.join(lost)} of {type(options).__name__} "
                           f"do{'' if len(lost) > 1 else 'es'} not apply to {cls.__name__}",
                           f"{cls.__name__} fields: {field_names(cls)}")
    return cls(**{f.name: getattr(options, f.name) for f in fields(options) if f.name in names})


class Target:
    """One compile target; subclasses set the class attributes and implement ``compile``/``load``."""

    name: ClassVar[str]
    suffix: ClassVar[str]
    """File suffix of the artifact (``lumber compile`` names its output with it)."""
    what: ClassVar[str]
    """The artifact in a few words, as ``lumber compile`` prints it."""
    Options: ClassVar[type]
    """The options dataclass (re-exported as ``lumber.<Name>``); :meth:`options` checks a given one."""
    accepts: ClassVar[tuple[type, ...]] = (Forest,)
    """IR types this target compiles."""
    artifact_predicts: ClassVar[bool] = True
    """Whether predictions come from the artifact (False: from the reference evaluator, e.g. C source)."""

    def options(self, given: Any = None) -> Any:
        """``given`` when it is this target's options dataclass, its defaults for None; anything else
        (another target's options, a dict) is a CompileError naming the class to pass."""
        if given is None:
            return self.Options()
        if type(given) is self.Options:
            return given
        what = type(given).__name__
        raise CompileError(f"target {self.name!r} takes lumber.{self.Options.__name__}, not {what}",
                           f"pass options=lumber.{self.Options.__name__}(...) (fields: {field_names(self.Options)})")

    def lower(self, ir: Forest | ObliviousEnsemble) -> Forest | ObliviousEnsemble:
        """``ir`` in a form this target holds: oblivious tables become their exact Forest for targets
        that hold forests only (ONNX, numpy, C source)."""
        if isinstance(ir, ObliviousEnsemble) and not isinstance(ir, self.accepts) and Forest in self.accepts:
            return ir.to_forest()
        return ir

    def for_ir(self, ir: Any) -> Target:
        """The target that compiles ``ir`` for this one (itself, unless it hands a form to another)."""
        if isinstance(ir, self.accepts):
            return self
        if isinstance(ir, ObliviousEnsemble):
            raise CompileError(f"target {self.name!r} cannot hold oblivious tables",
                               "use target 'c' (a shared library) or 'table'")
        raise CompileError(f"target {self.name!r} cannot compile a {type(ir).__name__}",
                           f"it compiles: {', '.join(t.__name__ for t in self.accepts)}")

    def compile(self, ir: Any, options: Any, *, path: str | Path | None = None, threads: int = 1,
                fingerprint: str | None = None) -> Predictor:
        """A predictor on the artifact for ``ir``, written to ``path`` when given.

        ``fingerprint``: the IR's fingerprint when the caller already has it (it is hashed once).
        """
        raise NotImplementedError

    def load(self, path: Path, *, threads: int = 1, prefix: str = "lumber") -> Predictor:
        """A predictor for an artifact this target wrote."""
        raise CompileError(f"target {self.name!r} artifacts cannot be loaded as predictors")

    def recognizes(self, head: bytes, path: Path) -> bool:
        """Whether a file starting with ``head`` is this target's artifact (magic bytes first, then suffix)."""
        return False

    def __repr__(self) -> str:
        return f"<target {self.name} ({self.what}, {self.suffix})>"


__all__ = ["Target", "field_names", "model_ir", "non_default", "project"]
