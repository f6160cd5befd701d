"""Pipeline text: ``polynomial,prune{alpha=auto,tol=0.0005},oblivious{max-depth=8}``.

Grammar (whitespace allowed between tokens)::

    pipeline := pass ("," pass)*
    pass     := NAME ["{" [option ("," option)*] "}"]
    option   := NAME "=" VALUE
    NAME     := [a-z][a-z0-9-]*
    VALUE    := a run of characters other than ",{}=" and whitespace, or "double-quoted"

Parsing is two steps: :func:`parse_pipeline` checks syntax and keeps each
token's column; :func:`build_passes` resolves names against the registry and
converts option values to the types of the pass's dataclass fields. Every
error is a CompileError with the pipeline text, a caret under the offending
token and what would be accepted.
"""

from __future__ import annotations

import difflib
import types
import typing
from dataclasses import dataclass
from typing import Any, Literal, Sequence

from lumber.ir import CompileError, Diagnostic, LumberError, Severity, SourceSpan

from .base import Pass
from .registry import get_pass, known_names

SOURCE = "<pipeline>"


@dataclass(frozen=True)
class OptionSpec:
    key: str
    value: str
    column: int
    """1-based column of the key."""
    value_column: int


@dataclass(frozen=True)
class PassSpec:
    name: str
    column: int
    options: tuple[OptionSpec, ...] = ()


def _error(text: str, col: int, message: str, *notes: str, width: int = 1) -> CompileError:
    span = SourceSpan(SOURCE, 1, col, 1, col + max(1, width))
    return CompileError([Diagnostic(Severity.ERROR, message, span, tuple(notes), source_line=text)])


def _is_name_start(ch: str) -> bool:
    return "a" <= ch <= "z"


def _is_name_char(ch: str) -> bool:
    return "a" <= ch <= "z" or "0" <= ch <= "9" or ch in "-_"


def parse_pipeline(text: str) -> list[PassSpec]:
    """Syntax only: the passes and raw option strings, with columns."""
    if "\n" in text:
        text = " ".join(text.splitlines())
    n = len(text)
    i = 0

    def skip() -> None:
        nonlocal i
        while i < n and text[i].isspace():
            i += 1

    def name(what: str) -> tuple[str, int]:
        nonlocal i
        skip()
        start = i
        if i >= n:
            raise _error(text, i + 1, f"expected a {what} name at the end of the pipeline",
                         f"known passes: {', '.join(known_names())}" if what == "pass" else "options look like key=value")
        if not _is_name_start(text[i]):
            raise _error(text, i + 1, f"expected a {what} name, found {text[i]!r}",
                         "names are lower-case letters, digits and '-', starting with a letter")
        while i < n and _is_name_char(text[i]):
            i += 1
        return text[start:i], start + 1

    def value() -> tuple[str, int]:
        nonlocal i
        skip()
        start = i
        if i < n and text[i] == '"':
            end = text.find('"', i + 1)
            if end < 0:
                raise _error(text, i + 1, "unterminated string", "close it with '\"'")
            i = end + 1
            return text[start + 1:end], start + 1
        while i < n and text[i] not in ",{}=" and not text[i].isspace():
            i += 1
        if i == start:
            found = repr(text[i]) if i < n else "the end of the pipeline"
            raise _error(text, start + 1, f"expected a value after '=', found {found}")
        return text[start:i], start + 1

    passes: list[PassSpec] = []
    skip()
    if i >= n:
        raise _error(text, 1, "empty pipeline", f"known passes: {', '.join(known_names())}")
    while True:
        pname, pcol = name("pass")
        options: list[OptionSpec] = []
        skip()
        if i < n and text[i] == "{":
            open_col = i + 1
            i += 1
            skip()
            if i < n and text[i] == "}":
                i += 1
            else:
                while True:
                    key, kcol = name("option")
                    skip()
                    if i >= n or text[i] != "=":
                        found = repr(text[i]) if i < n else "the end of the pipeline"
                        raise _error(text, i + 1, f"expected '=' after option '{key}', found {found}",
                                     f"write {key}=VALUE")
                    i += 1
                    val, vcol = value()
                    if any(o.key == key for o in options):
                        raise _error(text, kcol, f"option '{key}' given twice for pass '{pname}'", width=len(key))
                    options.append(OptionSpec(key, val, kcol, vcol))
                    skip()
                    if i < n and text[i] == ",":
                        i += 1
                        continue
                    if i < n and text[i] == "}":
                        i += 1
                        break
                    if i >= n:
                        raise _error(text, open_col, f"'{{' of pass '{pname}' is never closed", "add '}'")
                    raise _error(text, i + 1, f"expected ',' or '}}' in the options of '{pname}', found {text[i]!r}")
        passes.append(PassSpec(pname, pcol, tuple(options)))
        skip()
        if i >= n:
            return passes
        if text[i] != ",":
            raise _error(text, i + 1, f"expected ',' between passes, found {text[i]!r}")
        i += 1


# -- option values -------------------------------------------------------------------------------


def _describe(tp: Any) -> str:
    origin = typing.get_origin(tp)
    if origin is Literal:
        return " or ".join(repr(a) for a in typing.get_args(tp))
    if origin in (typing.Union, types.UnionType):
        return " or ".join(_describe(a) for a in typing.get_args(tp) if a is not type(None))
    return {bool: "true or false", int: "an integer", float: "a number", str: "a string"}.get(tp, str(tp))


_TRUE = {"true", "yes", "on", "1"}
_FALSE = {"false", "no", "off", "0"}


def convert_value(raw: str, tp: Any) -> Any:
    """Convert option text to ``tp``; raises ValueError when it does not fit."""
    origin = typing.get_origin(tp)
    if origin is Literal:
        for a in typing.get_args(tp):
            if raw == str(a):
                return a
        raise ValueError(raw)
    if origin in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(tp) if a is not type(None)]
        if raw in ("none", "null") and len(args) < len(typing.get_args(tp)):
            return None
        args.sort(key=lambda a: 0 if typing.get_origin(a) is Literal else 1)  # keywords before numbers
        for a in args:
            try:
                return convert_value(raw, a)
            except ValueError:
                continue
        raise ValueError(raw)
    if tp is bool:
        if raw.lower() in _TRUE:
            return True
        if raw.lower() in _FALSE:
            return False
        raise ValueError(raw)
    if tp is int:
        try:
            return int(raw.replace("_", ""))
        except ValueError:
            f = float(raw)
            if not f.is_integer():
                raise
            return int(f)
    if tp is float:
        return float(raw.replace("_", ""))
    if tp is str:
        return raw
    raise ValueError(raw)


def _instantiate(cls: type[Pass], spec: PassSpec, text: str) -> Pass:
    fields = cls.option_fields()
    hints = typing.get_type_hints(cls)
    kwargs: dict[str, Any] = {}
    for opt in spec.options:
        f = fields.get(opt.key) or fields.get(opt.key.replace("_", "-"))
        if f is None:
            close = difflib.get_close_matches(opt.key, fields, n=1)
            notes = [f"did you mean '{close[0]}'?"] if close else []
            notes.append(f"options of '{spec.name}': {', '.join(fields) or '(none)'}")
            raise _error(text, opt.column, f"pass '{spec.name}' has no option '{opt.key}'", *notes, width=len(opt.key))
        tp = hints.get(f.name, str)
        try:
            kwargs[f.name] = convert_value(opt.value, tp)
        except ValueError:
            raise _error(text, opt.value_column,
                         f"option '{opt.key}' of pass '{spec.name}' expects {_describe(tp)}, got {opt.value!r}",
                         width=len(opt.value)) from None
    try:
        return cls(**kwargs)
    except LumberError as exc:  # an options dataclass checks its values (InputDataError for explainers')
        raise _error(text, spec.column, f"pass '{spec.name}': {exc.diagnostics[0].message}",
                     *exc.diagnostics[0].notes, width=len(spec.name)) from None


def build_passes(pipeline: str | Sequence[Pass | str]) -> list[Pass]:
    """Pass objects from pipeline text, or from a list of Pass objects and/or texts."""
    if not isinstance(pipeline, str):
        out: list[Pass] = []
        for item in pipeline:
            if isinstance(item, Pass):
                out.append(item)
            elif isinstance(item, str):
                out.extend(build_passes(item))
            else:
                raise CompileError(f"pipeline entries must be Pass objects or text, got {type(item).__name__}")
        return out
    passes: list[Pass] = []
    for spec in parse_pipeline(pipeline):
        try:
            cls = get_pass(spec.name)
        except CompileError as exc:
            d = exc.diagnostics[0]
            raise _error(pipeline, spec.column, d.message, *d.notes, width=len(spec.name)) from None
        passes.append(_instantiate(cls, spec, pipeline))
    return passes


def format_pipeline(passes: Sequence[Pass]) -> str:
    """The text that :func:`build_passes` turns back into ``passes``."""
    return ",".join(p.pipeline_text() for p in passes)


__all__ = ["OptionSpec", "PassSpec", "build_passes", "convert_value", "format_pipeline", "parse_pipeline"]

