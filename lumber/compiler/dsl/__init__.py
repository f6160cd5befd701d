"""The constraint language: files of actionability constraints -> :class:`lumber.ir.Constraints`.

``parse_constraints("recourse.lum", schema=forest.schema)`` reads, checks and
compiles a file (or a string of statements); errors arrive together in one
:class:`ConstraintError` rendered like a compiler's. The language is described
in docs/constraints.md; the grammar is ``actionability.lark``.
"""

from __future__ import annotations

import dataclasses
import re
import warnings
from pathlib import Path
from typing import Any, Sequence

from lumber.ir import Constraints, Feature, FeatureKind, Forest, Schema

from .check import CheckResult, check_program
from .labels import lookup_code
from .plausibility import PLAUSIBILITY
from .parse import ConstraintError, parse_file, parse_text
from .printer import format_constraints, format_program

_PATHLIKE = re.compile(r"[\w./\\~:-]+\.\w+\Z")


class ConstraintWarning(UserWarning):
    """A constraint statement that has no effect (raised through :mod:`warnings`)."""


def _schema_of(schema: Any) -> Schema | None:
    if schema is None or isinstance(schema, Schema):
        return schema
    inner = getattr(schema, "schema", None)
    if isinstance(inner, Schema):
        return inner
    raise TypeError(f"schema must be a lumber Schema or a model with .schema, not {type(schema).__name__}")


def is_path(source: str | Path) -> bool:
    """Whether ``parse_constraints`` reads ``source`` as a file name (else as constraint text)."""
    if isinstance(source, Path):
        return True
    if "\n" in source or "\0" in source:
        return False
    try:
        if Path(source).is_file():
            return True
    except (OSError, ValueError):  # a name too long for the system is text, not a file
        return False
    return bool(_PATHLIKE.match(source.strip()))


def check_constraints(source: str | Path, schema: Any = None, *, base_dir: str | Path | None = None,
                      file: str | None = None) -> CheckResult:
    """Parse and check a file or text; the result carries the constraints, warnings and counts.

    ``file`` names text input in diagnostics; includes in text are found from
    ``base_dir`` (default: the current directory).
    """
    if is_path(source):
        program = parse_file(source)
    else:
        program = parse_text(str(source), file)
    return check_program(program, _schema_of(schema), base_dir=base_dir)


def parse_constraints(path_or_text: str | Path, schema: Schema | Forest | None = None, *, base_dir: str | Path | None = None
                      ) -> Constraints:
    """Compile a constraint file (a path) or constraint text against a model's schema.

    ``schema`` is a :class:`~lumber.ir.Schema` or a model with ``.schema``
    (a Forest); without it names are not checked and category labels cannot
    be used. Raises :class:`ConstraintError` (a ``CompileError``) with every
    problem found; statements without effect are reported as
    :class:`ConstraintWarning`.
    """
    result = check_constraints(path_or_text, schema, base_dir=base_dir)
    for w in result.warnings:
        warnings.warn(w.render(), ConstraintWarning, stacklevel=2)
    return result.constraints


def refine_schema(schema: Schema, features: Sequence[Feature]) -> Schema:
    """``schema`` with kinds and category labels taken from ``features`` (e.g. a typed training CSV)
    where the model records none: a numerical feature without categories, or categories without labels;
    and the features' value words (``Feature.words``).

    Models from libraries that see only numbers (scikit-learn) cannot know that a column
    holds categories; the data can say so.
    """
    by_name = {f.name: f for f in features}
    out = []
    for f in schema.features:
        d = by_name.get(f.name)
        if d is not None and f.categories is None and (f.kind == FeatureKind.NUMERICAL or d.kind == f.kind):
            f = Feature(f.name, d.kind, d.categories, f.words)
        if d is not None and d.words:  # what values mean to people (display only)
            f = dataclasses.replace(f, words=d.words)
        out.append(f)
    return dataclasses.replace(schema, features=tuple(out))


def format_text(text: str, file: str | None = None) -> str:
    """The canonical formatting of constraint text (comments kept; syntax errors raise)."""
    return format_program(parse_text(text, file))


__all__ = [
    "CheckResult", "ConstraintError", "ConstraintWarning", "PLAUSIBILITY", "check_constraints", "check_program",
    "format_constraints", "format_program", "format_text", "is_path", "lookup_code", "parse_constraints",
    "parse_file", "parse_text", "refine_schema",
]
