"""What every compile target is: an options dataclass, a file suffix, ``compile`` and ``load``.

A target joins a backend (which only emits, see :mod:`lumber.backends.base`) to
the predictor that runs its artifact: ``compile`` takes an IR and the target's
own options, emits, builds or writes what the backend produced and returns a
:class:`~lumber.compiler.predictors.Predictor`; ``load`` turns a saved artifact
back into one. ``lumber.compile``, ``lumber compile`` and ``lumber build`` all
reach targets through :mod:`lumber.compiler.targets`, never by name tests.
"""

from __future__ import annotations

from dataclasses import fields
from pathlib import Path
from typing import Any, ClassVar, Mapping

from lumber.ir import CompileError, Forest, ObliviousEnsemble

from ..deploy import deployable
from ..frontends import load_any
from ..predictors import Predictor


def model_ir(model: Any) -> Forest | ObliviousEnsemble:
    """The IR a target compiles: a Forest or ObliviousEnsemble as is, a Polynomial (object or ``.lumber``
    file) as its exact oblivious tables, anything else through ``lumber.load``."""
    return deployable(load_any(model))


class Target:
    """One compile target; subclasses set the class attributes and implement ``compile``/``load``."""

    name: ClassVar[str]
    suffix: ClassVar[str]
    """File suffix of the artifact (``lumber compile`` names its output with it)."""
    what: ClassVar[str]
    """The artifact in a few words, as ``lumber compile`` prints it."""
    Options: ClassVar[type]
    """The options dataclass; :meth:`options` fills it from keyword arguments."""
    accepts: ClassVar[tuple[type, ...]] = (Forest,)
    """IR types this target compiles."""
    artifact_predicts: ClassVar[bool] = True
    """Whether predictions come from the artifact (False: from the reference evaluator, e.g. C source)."""

    def options(self, values: Mapping[str, Any] | None = None) -> Any:
        """The target's options from ``values``; keys that belong to other targets are ignored."""
        names = {f.name for f in fields(self.Options)}
        return self.Options(**{k: v for k, v in (values or {}).items() if k in names})

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


__all__ = ["Target", "model_ir"]
