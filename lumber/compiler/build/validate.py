"""Read and check a build file: TOML syntax, known keys, value kinds; every error at once.

Errors point at the line of the offending key (``lumber.toml:12:1``) and an
unknown key gets the nearest valid one (``did you mean 'targets'?``). Only
the shape of the file is checked here; whether the files it names exist and
fit the model is :mod:`lumber.compiler.build.inputs`' job.
"""

from __future__ import annotations

import dataclasses
import difflib
import re
import sys
from pathlib import Path
from typing import Any

from lumber.ir import Diagnostic, LumberError, Severity, SourceSpan

from .spec import SECTION_TYPES, TOP_LEVEL, BuildConfig

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised on Python 3.10 only
    import tomli as tomllib


class BuildFileError(LumberError):
    """The build file, or an input it names, is wrong; nothing was built."""


def locate(text: str, section: str, name: str | None = None) -> tuple[int, int, str]:
    """1-based (line, column) and source line of ``[section]`` or of ``name`` inside it.

    A plain line scan (tomllib keeps no positions): table headers switch the
    current section, ``key =`` lines match the key. Falls back to line 1.
    """
    lines = text.splitlines()
    current = ""
    header_at = None
    for i, raw in enumerate(lines):
        line = raw.strip()
        m = re.match(r"\[\[?\s*([^\]]+?)\s*\]\]?", line)
        if m:
            current = m.group(1).strip().strip('"').split(".")[0]
            if current == section and header_at is None:
                header_at = (i + 1, raw.index("[") + 1, raw)
                if name is None:
                    return header_at
            continue
        if name is not None and current == section:
            km = re.match(r'\s*"?([A-Za-z0-9_.-]+)"?\s*=', raw)
            if km and km.group(1).split(".")[0] == name:
                return i + 1, raw.index(km.group(1)) + 1, raw
        if name is not None and section == "" and current == "":
            km = re.match(r'\s*"?([A-Za-z0-9_-]+)"?\s*[.=]', raw)
            if km and km.group(1) == name:
                return i + 1, raw.index(km.group(1)) + 1, raw
    if header_at is not None:
        return header_at
    return 1, 1, lines[0] if lines else ""


class _Checker:
    """Collects diagnostics while converting one build file."""

    def __init__(self, path: Path, text: str) -> None:
        self.path = path
        self.text = text
        self.diags: list[Diagnostic] = []

    def error(self, message: str, section: str, name: str | None, *notes: str) -> None:
        if not self.text:  # a configuration made in memory: no file to point into
            self.diags.append(Diagnostic(Severity.ERROR, message, None, tuple(notes)))
            return
        line, col, src = locate(self.text, section, name)
        width = len(name) if name else 1
        span = SourceSpan(str(self.path), line, col, line, col + width)
        self.diags.append(Diagnostic(Severity.ERROR, message, span, tuple(notes), source_line=src))

    def unknown(self, what: str, name: str, valid: list[str], section: str) -> None:
        close = difflib.get_close_matches(name, valid, n=1, cutoff=0.5)
        notes = [f"did you mean '{close[0]}'?"] if close else []
        notes.append(f"valid {'keys' if section else 'top-level names'}: {', '.join(valid)}")
        where = f" in [{section}]" if section else ""
        if what == "section":  # point at the [header]
            self.error(f"unknown {what} '{name}'", name, None, *notes)
        else:
            self.error(f"unknown {what} '{name}'{where}", section, name, *notes)

    # -- values ------------------------------------------------------------------------------

    def value(self, section: str, name: str, v: Any, meta: dict[str, Any]) -> Any:
        """The converted value, or ``_BAD`` after recording why it is wrong."""
        kind = meta["kind"]
        label = f"'{name}'" + (f" in [{section}]" if section else "")
        if kind == "path":
            if not isinstance(v, str) or not v.strip():
                return self._bad(section, name, f"{label} must be a file path (a string), got {_show(v)}")
            p = Path(v).expanduser()
            return (p if p.is_absolute() else self.path.parent / p).resolve()
        if kind == "str":
            if not isinstance(v, str):
                return self._bad(section, name, f"{label} must be a string, got {_show(v)}")
            return v
        if kind == "bool":
            if not isinstance(v, bool):
                return self._bad(section, name, f"{label} must be true or false, got {_show(v)}")
            return v
        if kind in ("int", "float"):
            ok = isinstance(v, int) if kind == "int" else isinstance(v, (int, float))
            if isinstance(v, bool) or not ok:
                return self._bad(section, name, f"{label} must be {'an integer' if kind == 'int' else 'a number'}, "
                                                f"got {_show(v)}")
            lo = meta.get("minimum")
            if lo is not None and v < lo:
                return self._bad(section, name, f"{label} must be >= {lo:g}, got {v}")
            return float(v) if kind == "float" else int(v)
        if kind == "choice":
            choices = meta["choices"]
            if not isinstance(v, str) or v not in choices:
                return self._bad_choice(section, name, label, v, choices)
            return v
        if kind in ("choices", "targets"):
            items = [v] if isinstance(v, str) else v
            if not isinstance(items, list) or not all(isinstance(s, str) for s in items):
                return self._bad(section, name, f"{label} must be a list of strings, got {_show(v)}")
            choices = meta["choices"]
            for s in items:
                if choices and s not in choices:
                    return self._bad_choice(section, name, label, s, choices)
            if len(set(items)) != len(items):
                return self._bad(section, name, f"{label} lists an entry twice: {items}")
            return tuple(items)
        if kind == "target":
            return self._target(section, name, label, v)
        if kind == "regions":
            return self._regions(section, name, label, v)
        raise AssertionError(kind)  # pragma: no cover - spec and checker disagree

    def _bad(self, section: str, name: str, message: str, *notes: str) -> Any:
        self.error(message, section, name, *notes)
        return _BAD

    def _bad_choice(self, section: str, name: str, label: str, v: Any, choices: tuple[str, ...]) -> Any:
        close = difflib.get_close_matches(str(v), list(choices), n=1, cutoff=0.5) if isinstance(v, str) else []
        notes = ([f"did you mean '{close[0]}'?"] if close else []) + [f"accepted: {', '.join(choices)}"]
        return self._bad(section, name, f"{label}: {_show(v)} is not accepted", *notes)

    def _target(self, section: str, name: str, label: str, v: Any) -> Any:
        if isinstance(v, (str, int, float)) and not isinstance(v, bool):
            return v
        if isinstance(v, list) and len(v) == 2 and all(isinstance(b, (int, float)) and not isinstance(b, bool)
                                                       for b in v) and v[0] <= v[1]:
            return (float(v[0]), float(v[1]))
        return self._bad(section, name, f"{label} must be a class label or an interval [lo, hi], got {_show(v)}")

    def _regions(self, section: str, name: str, label: str, v: Any) -> Any:
        if isinstance(v, str):
            if v in ("auto", "none"):
                return v
            return self._bad(section, name, f"{label}: {_show(v)} is not accepted",
                             "use \"auto\", \"none\" or a list of {name = ..., bounds = {Feature = [lo, hi]}}")
        if not isinstance(v, list):
            return self._bad(section, name, f"{label} must be \"auto\", \"none\" or a list of regions, got {_show(v)}")
        out = []
        for i, r in enumerate(v):
            extra = sorted(set(r) - {"name", "bounds"}) if isinstance(r, dict) else []
            bounds = r.get("bounds") if isinstance(r, dict) else None
            if not isinstance(r, dict) or extra or not isinstance(bounds, dict) or not bounds:
                why = f"unknown key(s) {', '.join(extra)}" if extra else "each region is {name = \"...\", " \
                                                                         "bounds = {Feature = [lo, hi]}}"
                return self._bad(section, name, f"{label}: region {i + 1} is malformed: {why}")
            clean: dict[str, tuple[float | None, float | None]] = {}
            for feat, ab in bounds.items():
                if not (isinstance(ab, list) and len(ab) == 2 and all(
                        isinstance(b, (int, float)) and not isinstance(b, bool) or b == "" for b in ab)):
                    return self._bad(section, name, f"{label}: region {i + 1}: bounds of '{feat}' must be [lo, hi]",
                                     "use \"\" for an open end, e.g. Age = [\"\", 30]")
                clean[str(feat)] = (None if ab[0] == "" else float(ab[0]), None if ab[1] == "" else float(ab[1]))
            out.append((str(r.get("name", f"region {i + 1}")), tuple(sorted(clean.items()))))
        return tuple(out)


class _Bad:
    def __repr__(self) -> str:
        return "<invalid>"


_BAD = _Bad()


def _show(v: Any) -> str:
    if isinstance(v, str):
        return repr(v)
    if isinstance(v, dict):
        return "a table"
    if isinstance(v, list):
        return f"a list {v!r}" if len(repr(v)) < 40 else "a list"
    return repr(v)


def _fields(cls: type) -> dict[str, dataclasses.Field[Any]]:
    return {f.name: f for f in dataclasses.fields(cls)}


def parse_toml(path: Path, text: str) -> dict[str, Any]:
    """TOML text -> dict; a syntax error becomes a BuildFileError at the reported line and column."""
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        msg = str(exc)
        m = re.search(r"\(at line (\d+), column (\d+)\)", msg)
        line, col = (int(m.group(1)), int(m.group(2))) if m else (1, 1)
        lines = text.splitlines()
        src = lines[line - 1] if 0 < line <= len(lines) else ""
        message = re.sub(r"\s*\(at line \d+, column \d+\)", "", msg) or "invalid TOML"
        raise BuildFileError([Diagnostic(Severity.ERROR, f"invalid TOML: {message}",
                                         SourceSpan(str(path), line, col, line, col + 1),
                                         ("the build file is TOML: key = value lines under [section] headers",),
                                         source_line=src)]) from None


def load_build_file(path: str | Path) -> BuildConfig:
    """Read, check and convert a build file; raises one BuildFileError listing every problem."""
    p = Path(path).expanduser().resolve()
    try:
        text = p.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise BuildFileError(f"{path}: no such build file", "create one (see docs/build.md) or pass its path") \
            from None
    except IsADirectoryError:
        raise BuildFileError(f"{path}: is a directory", "pass the build file, e.g. lumber.toml") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise BuildFileError(f"{path}: cannot read ({exc})") from None
    return config_from_dict(parse_toml(p, text), p, text)


def config_from_dict(doc: dict[str, Any], path: Path, text: str = "") -> BuildConfig:
    """A BuildConfig from a parsed TOML document (``text`` locates errors)."""
    chk = _Checker(path, text)
    top_keys = list(TOP_LEVEL) + list(SECTION_TYPES)
    sections: dict[str, Any] = {}
    seed = int(TOP_LEVEL["seed"]["default"])
    for name, v in doc.items():
        if name in SECTION_TYPES:
            if not isinstance(v, dict):
                chk.error(f"'{name}' must be a table ([{name}]), got {_show(v)}", "", name)
            continue
        if name in TOP_LEVEL:
            got = chk.value("", name, v, TOP_LEVEL[name])
            if got is not _BAD:
                seed = got
            continue
        chk.unknown("section" if isinstance(v, dict) else "key", name, top_keys, "")
    for name, cls in SECTION_TYPES.items():
        table = doc.get(name, {})
        table = table if isinstance(table, dict) else {}
        fields = _fields(cls)
        values: dict[str, Any] = {}
        for k, v in table.items():
            f = fields.get(k)
            if f is None:
                chk.unknown("key", k, list(fields), name)
                continue
            got = chk.value(name, k, v, dict(f.metadata))
            if got is not _BAD:
                values[k] = got
        for k, f in fields.items():
            if f.metadata.get("required") and k not in table:
                where = f"[{name}]" if name in doc else f"section [{name}]"
                chk.error(f"missing required key '{k}' in {where}", name, None,
                          f"add: [{name}] {k} = ... ({f.metadata['doc']})")
            elif k not in values and f.metadata.get("kind") == "path" and isinstance(f.default, (str, Path)):
                values[k] = (path.parent / f.default).resolve()
        sections[name] = values
    if chk.diags:
        raise BuildFileError(chk.diags)
    built = {name: SECTION_TYPES[name](**sections[name]) for name in SECTION_TYPES}
    return BuildConfig(path=path, text=text, seed=seed, **built)


def toml_literal(v: Any) -> str:
    """A default as it would be written in the build file (empty when unset)."""
    if v is None:
        return ""
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (str, Path)):
        return '"' + (v.as_posix() if isinstance(v, Path) else v) + '"'
    if isinstance(v, tuple):
        return "[" + ", ".join(toml_literal(x) for x in v) + "]"
    return str(v)


def key_table() -> list[tuple[str, str, str, str]]:
    """(section, key, default, help) of every key, for docs and ``lumber build --keys``."""
    rows = [("", k, toml_literal(m.get("default")), m["doc"]) for k, m in TOP_LEVEL.items()]
    for name, cls in SECTION_TYPES.items():
        for f in dataclasses.fields(cls):
            shown = "(required)" if f.metadata.get("required") else toml_literal(f.default)
            rows.append((name, f.name, shown, str(f.metadata["doc"])))
    return rows


__all__ = ["BuildFileError", "config_from_dict", "key_table", "load_build_file", "locate", "parse_toml",
           "toml_literal"]
