"""What every backend shares: emit options, the artifact (files in memory), the IR fingerprint.

A backend only emits; anything that changes the model is a pass. Each backend
has a ``check(ir, options)`` that plays the role of a conversion target: it
names each part of the IR the backend cannot express exactly, so the caller
can refuse before emitting. Emitting is pure (no disk, no compiler); writing,
building and loading are the compile targets' job
(:mod:`lumber.compiler.targets`), so artifacts stay reproducible byte for byte.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping

from lumber.ir import CompileError, Diagnostic, atomic_write_bytes
from lumber.ir.serialize import to_bytes

@dataclass(frozen=True, kw_only=True)
class EmitOptions:
    """Options every backend understands; a backend subclasses it for its own knobs."""

    name: str = "model"
    """Base name of emitted files and, where the format has one, of the exported symbols."""


@dataclass(frozen=True)
class Artifact:
    """Emitted files (relative name -> bytes) and what a loader needs to know about them.

    ``fingerprint`` identifies the IR the files were emitted from (see
    :func:`fingerprint`); loaders compare it to detect stale artifacts.
    """

    target: str
    files: Mapping[str, bytes]
    fingerprint: str
    metadata: Mapping[str, Any] = field(default_factory=dict)

    @property
    def main(self) -> str:
        """Name of the principal file (the first one emitted)."""
        return next(iter(self.files))

    def text(self, name: str | None = None) -> str:
        return self.files[name or self.main].decode()

    def write(self, path: str | Path) -> list[Path]:
        """Write the principal file to ``path`` and the others beside it (same stem), atomically each."""
        target = Path(path)
        written = []
        main_suffix = Path(self.main).suffix
        for name, data in self.files.items():
            suffix = Path(name).suffix
            out = target if name == self.main else target.with_name(
                (target.stem if target.suffix == main_suffix else target.name) + suffix)
            atomic_write_bytes(out, data)
            written.append(out)
        return written


def fingerprint(ir: Any) -> str:
    """Content hash of an IR object: its source model's hash (if recorded) and its own bytes.

    Two artifacts with equal fingerprints were emitted from the same model;
    a loader given the model recomputes it to refuse a stale artifact.
    """
    h = hashlib.sha256()
    schema = getattr(ir, "schema", None)
    source = getattr(schema, "source", None) or {}
    h.update(str(source.get("content_hash", source.get("hash", ""))).encode())
    h.update(b"\0")
    h.update(hashlib.sha256(to_bytes(ir)).digest())
    return h.hexdigest()


def raise_on(diags: list[Diagnostic]) -> None:
    """Refuse to emit when ``check`` found something inexpressible."""
    if diags:
        raise CompileError(diags)


__all__ = ["Artifact", "EmitOptions", "fingerprint", "raise_on"]
