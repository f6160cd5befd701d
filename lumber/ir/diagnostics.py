"""Diagnostics: how lumber reports a user's mistake.

Every user-facing error is a :class:`LumberError` carrying one or more
:class:`Diagnostic` objects. The CLI prints them and exits non-zero; it never
shows a traceback for a ``LumberError``. A diagnostic says what is wrong, where
(a :class:`SourceSpan` in a text file, an :class:`IRLocation` in a model, or a
plain field name) and what would be accepted.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from pathlib import Path
from typing import Sequence, Union


class Severity(enum.IntEnum):
    NOTE = 0
    WARNING = 1
    ERROR = 2


@dataclass(frozen=True)
class SourceSpan:
    """A position in a text file (1-based line and column, end exclusive)."""

    file: str | None
    line: int
    column: int
    end_line: int | None = None
    end_column: int | None = None

    def __str__(self) -> str:
        name = self.file if self.file is not None else "<input>"
        return f"{name}:{self.line}:{self.column}"


@dataclass(frozen=True)
class IRLocation:
    """A place in a model: a tree and a node (local id), or a monomial, or a field."""

    tree: int | None = None
    node: int | None = None
    monomial: int | None = None
    field: str | None = None
    file: str | None = None

    def __str__(self) -> str:
        parts = []
        if self.file:
            parts.append(self.file)
        if self.tree is not None:
            parts.append(f"tree {self.tree}")
        if self.node is not None:
            parts.append(f"node {self.node}")
        if self.monomial is not None:
            parts.append(f"monomial {self.monomial}")
        if self.field:
            parts.append(f"field '{self.field}'")
        return ", ".join(parts) if parts else "<model>"


Location = Union[SourceSpan, IRLocation, None]


@dataclass(frozen=True)
class Diagnostic:
    """One finding: severity, message, where, and optional notes (hints)."""

    severity: Severity
    message: str
    location: Location = None
    notes: tuple[str, ...] = ()
    source_line: str | None = None
    """The text of the offending source line, for caret rendering."""

    def render(self) -> str:
        """Compiler-style text: ``file:line:col: error: message``, source, caret, notes."""
        sev = self.severity.name.lower()
        head = f"{self.location}: {sev}: {self.message}" if self.location else f"{sev}: {self.message}"
        lines = [head]
        loc = self.location
        if isinstance(loc, SourceSpan) and self.source_line is not None:
            src = self.source_line.rstrip("\n")
            lines.append(f"    {src}")
            width = 1
            if loc.end_line == loc.line and loc.end_column is not None:
                width = max(1, loc.end_column - loc.column)
            lines.append("    " + " " * max(0, loc.column - 1) + "^" * width)
        for note in self.notes:
            lines.append(f"  note: {note}")
        return "\n".join(lines)


def error(message: str, location: Location = None, *notes: str, source_line: str | None = None) -> Diagnostic:
    """Shorthand for an error diagnostic."""
    return Diagnostic(Severity.ERROR, message, location, tuple(notes), source_line)


class LumberError(Exception):
    """Base of every user-facing error; carries diagnostics.

    The CLI catches it, prints :meth:`render` on stderr and exits with a
    non-zero code. Raise a subclass so callers can tell kinds apart.
    """

    exit_code = 2

    def __init__(self, message: str | Sequence[Diagnostic], *notes: str, location: Location = None) -> None:
        if isinstance(message, str):
            diags: tuple[Diagnostic, ...] = (error(message, location, *notes),)
        else:
            diags = tuple(message)
        self.diagnostics = diags
        super().__init__(self.render())

    def render(self) -> str:
        return "\n".join(d.render() for d in self.diagnostics)


class ModelFormatError(LumberError):
    """A model file or object is malformed, truncated or inconsistent."""


class UnsupportedModelError(LumberError):
    """A well-formed model uses something lumber does not handle (yet)."""


class InputDataError(LumberError):
    """Data passed for prediction or analysis does not fit the model."""


class CompileError(LumberError):
    """A pass, pipeline, backend or constraint file failed with diagnostics."""


class ValidationError(LumberError):
    """An IR object breaks one of its documented invariants."""


@dataclass
class DiagnosticSink:
    """Collects diagnostics so several errors can be reported at once."""

    items: list[Diagnostic] = field(default_factory=list)

    def add(self, diag: Diagnostic) -> None:
        self.items.append(diag)

    def error(self, message: str, location: Location = None, *notes: str, source_line: str | None = None) -> None:
        self.items.append(error(message, location, *notes, source_line=source_line))

    @property
    def has_errors(self) -> bool:
        return any(d.severity >= Severity.ERROR for d in self.items)

    def raise_if_errors(self, cls: type[LumberError] = CompileError) -> None:
        if self.has_errors:
            raise cls(self.items)


def describe_path(path: str | Path) -> str:
    """How error messages name a file."""
    return str(path)
