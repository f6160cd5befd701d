"""Text -> syntax tree (:mod:`.ast`), with compiler-style syntax errors.

The LALR tables are built once per grammar version and cached in the user's
cache directory (never the package directory, which may be read-only); the
cache is written atomically so concurrent processes never read half a file.
Syntax errors are reported several at a time: after an error the offending
statement is blanked and the file parsed again (at most ``MAX_ERRORS``).
"""

from __future__ import annotations

import hashlib
import os
import sys
import tempfile
from functools import lru_cache
from importlib import resources
from pathlib import Path
from typing import Any, cast

from lark import Lark
from lark.exceptions import UnexpectedInput

from lumber.ir import CompileError, Diagnostic, SourceSpan
from lumber.ir.diagnostics import error

from . import ast as A
from .builder import MAX_DEPTH, STATE, Builder, TooDeep
from .lexicon import CLAUSE_KEYWORDS, KEYWORDS, NAME_RE, STATEMENT_KEYWORDS
from .syntax_errors import syntax_diagnostic

MAX_ERRORS = 20


class ConstraintError(CompileError):
    """A constraint file has syntax or semantic errors (CLI exit code 1)."""

    exit_code = 1


# -- the parser --------------------------------------------------------------------------


def grammar_text() -> str:
    return resources.files(__package__).joinpath("actionability.lark").read_text(encoding="utf-8")


def _cache_dir() -> Path | None:
    """A writable per-user cache directory, or None (then tables are rebuilt each process)."""
    candidates = []
    if os.environ.get("LUMBER_CACHE_DIR"):
        candidates.append(Path(os.environ["LUMBER_CACHE_DIR"]))
    if os.environ.get("XDG_CACHE_HOME"):
        candidates.append(Path(os.environ["XDG_CACHE_HOME"]) / "lumber")
    candidates.append(Path.home() / ".cache" / "lumber")
    candidates.append(Path(tempfile.gettempdir()) / f"lumber-{os.getuid() if hasattr(os, 'getuid') else 'user'}")
    for d in candidates:
        try:
            d.mkdir(parents=True, exist_ok=True)
            if os.access(d, os.W_OK):
                return d
        except OSError:
            continue
    return None


_OPTIONS: dict[str, Any] = dict(parser="lalr", lexer="basic", maybe_placeholders=True)


@lru_cache(maxsize=1)
def parser() -> Lark:
    """The LALR parser building :mod:`.ast` nodes while it parses (tables cached per grammar version)."""
    import io

    import lark

    text = grammar_text()
    key = hashlib.sha256(f"{text}\0{lark.__version__}\0{sys.version_info[:2]}".encode()).hexdigest()[:16]
    cdir = _cache_dir()
    path = cdir / f"dsl-{key}.lark-cache" if cdir is not None else None
    data = None
    if path is not None and path.is_file():
        try:
            data = path.read_bytes()
            return _with_builder(data)
        except Exception:  # a corrupt or foreign cache file: rebuild and overwrite it
            data = None
    buf = io.BytesIO()
    Lark(text, strict=_strict_available(), **_OPTIONS).save(buf)
    data = buf.getvalue()
    if path is not None:
        try:
            fd, tmp = tempfile.mkstemp(prefix=".dsl-", suffix=".tmp", dir=path.parent)
            with os.fdopen(fd, "wb") as fh:
                fh.write(data)
            os.replace(tmp, path)
        except OSError:
            pass
    return _with_builder(data)


def _with_builder(data: bytes) -> Lark:
    import io

    inst = Lark.__new__(Lark)
    return inst._load(io.BytesIO(data), transformer=Builder())  # type: ignore[no-any-return]


def _strict_available() -> bool:
    try:
        import interegular  # noqa: F401  # pyflakes: availability probe
    except ImportError:
        return False
    return True

# -- comments ------------------------------------------------------------------------------


def scan_comments(text: str) -> list[A.Comment]:
    """Every ``# ...`` outside strings and quoted names (for the formatter)."""
    out = []
    for ln, line in enumerate(A.split_lines(text), start=1):
        if "#" not in line:
            continue
        quote = None
        i = 0
        while i < len(line):
            c = line[i]
            if quote:
                if c == "\\":
                    i += 1
                elif c == quote:
                    quote = None
            elif c in "\"`":
                quote = c
            elif c == "#":
                out.append(A.Comment(line[i:].rstrip(), ln, i + 1, not line[:i].strip()))
                break
            i += 1
    return out

def _blank_statement(lines: list[str], line: int) -> bool:
    """Blank the statement around 1-based ``line`` (following backslash continuations)."""
    n = len(lines)
    if not 0 < line <= n:
        return False
    lo = line
    while lo > 1 and lines[lo - 2].rstrip().endswith("\\"):
        lo -= 1
    hi = line
    while hi < n and lines[hi - 1].rstrip().endswith("\\"):
        hi += 1
    changed = any(lines[i].strip() for i in range(lo - 1, hi))
    for i in range(lo - 1, hi):
        lines[i] = ""
    return changed


# -- entry points -----------------------------------------------------------------------------


def decode(data: bytes, file: str | None) -> str:
    """Bytes of a constraint file -> text (UTF-8, optional BOM), or a diagnostic."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        before = data[:exc.start]
        line = before.count(b"\n") + 1
        col = exc.start - (before.rfind(b"\n") + 1) + 1
        raise ConstraintError([error(f"file is not UTF-8 text (byte 0x{data[exc.start]:02x})",
                                     SourceSpan(file, line, col), "save the file as UTF-8")]) from None
    return text[1:] if text.startswith("\ufeff") else text


def parse_text(text: str, file: str | None = None) -> A.Program:
    """Parse one file's text into a :class:`~.ast.Program`; raise :class:`ConstraintError` on syntax errors."""
    if text.startswith("\ufeff"):
        text = text[1:]
    p = parser()
    lines = A.split_lines(text)
    work = list(lines)
    diags: list[Diagnostic] = []
    statements = None
    STATE.file = file
    try:
        while True:
            STATE.depth, STATE.keep = {}, []
            try:
                statements = p.parse("\n".join(work) + "\n")
                break
            except UnexpectedInput as exc:
                diag, line = syntax_diagnostic(exc, "\n".join(work) + "\n", file, lines, p.parse)
                diags.append(diag)
                if len(diags) >= MAX_ERRORS or not _blank_statement(work, line):
                    break
            except TooDeep as exc:
                diags.append(error(f"expression nested too deeply (more than {MAX_DEPTH} levels)", exc.span,
                                   source_line=_line(lines, exc.span.line)))
                if len(diags) >= MAX_ERRORS or not _blank_statement(work, exc.span.line):
                    break
    finally:
        STATE.depth, STATE.keep, STATE.file = {}, [], None
    if diags:
        raise ConstraintError(diags)
    assert statements is not None
    return A.Program(file, text, cast(list[A.Statement], statements), scan_comments(text))


def _line(lines: list[str], ln: int) -> str | None:
    return lines[ln - 1] if 0 < ln <= len(lines) else None


def parse_file(path: str | Path, display: str | None = None) -> A.Program:
    """Read and parse a constraint file (``display`` is the name used in diagnostics)."""
    p = Path(path)
    name = display if display is not None else str(path)
    try:
        if p.exists() and not p.is_file() and not p.is_dir():
            raise ConstraintError(f"{name}: not a regular file")
        data = p.read_bytes()
    except FileNotFoundError:
        raise ConstraintError(f"{name}: no such file") from None
    except IsADirectoryError:
        raise ConstraintError(f"{name}: is a directory, expected a constraint file") from None
    except OSError as exc:
        raise ConstraintError(f"{name}: cannot read ({exc.strerror or exc})") from None
    except ValueError:
        raise ConstraintError(f"{name}: invalid file name") from None
    return parse_text(decode(data, name), name)


__all__ = ["CLAUSE_KEYWORDS", "ConstraintError", "KEYWORDS", "MAX_DEPTH", "NAME_RE", "STATEMENT_KEYWORDS", "decode",
           "grammar_text", "parse_file", "parse_text", "parser", "scan_comments"]
