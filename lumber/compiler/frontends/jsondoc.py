"""Reading JSON model documents with errors that point at the field.

The XGBoost, treelite and CatBoost frontends read nested JSON; a malformed
file must fail with the JSON path of the offending field, the tree and node
when known, and what would have been accepted, never with a ``KeyError``.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import numpy as np

from lumber.ir import IRLocation, ModelFormatError

Types = type | tuple[type, ...]

_TYPE_NAMES = {int: "an integer", float: "a number", bool: "true/false", str: "a string", list: "an array",
               dict: "an object"}


def as_types(t: Types) -> tuple[type, ...]:
    return t if isinstance(t, tuple) else (t,)


def type_names(t: Types) -> str:
    """``(int, float)`` -> ``"an integer or a number"``, for messages."""
    return " or ".join(_TYPE_NAMES.get(x, x.__name__) for x in as_types(t))


def describe(v: Any) -> str:
    """A short description of a found value, for messages."""
    if isinstance(v, dict):
        return "an object"
    if isinstance(v, (list, np.ndarray)):
        return "an array"
    if isinstance(v, str):
        return f"the string {v[:40]!r}"
    return f"{type(v).__name__} {v!r:.60}"


def parse_json(data: str | bytes, name: str, what: str, hint: str) -> Any:
    """Decode a JSON model file; ``what`` names the expected format, ``hint`` says how to get a good one."""
    try:
        return json.loads(data)
    except UnicodeDecodeError:
        raise ModelFormatError(f"{name}: not UTF-8 text, so not {what}") from None
    except json.JSONDecodeError as exc:
        raise ModelFormatError(f"{name}: invalid JSON at line {exc.lineno}, column {exc.colno}: {exc.msg}",
                               hint) from None
    except RecursionError:
        raise ModelFormatError(f"{name}: JSON nested too deeply") from None


@dataclass(frozen=True)
class JsonDoc:
    """Where errors point: the file (or object) name; methods read fields by JSON path."""

    name: str

    def fail(self, path: str, message: str, *notes: str, tree: int | None = None,
             node: int | None = None) -> ModelFormatError:
        # the message starts with the path, so the location names only file, tree and node
        return ModelFormatError(f"{path}: {message}", *notes, location=IRLocation(file=self.name, tree=tree, node=node))

    def obj(self, value: Any, path: str, tree: int | None = None) -> dict[str, Any]:
        if not isinstance(value, dict):
            raise self.fail(path or "<root>", f"expected an object, found {describe(value)}", tree=tree)
        return value

    def get(self, parent: Any, key: str, path: str, types: Types | None = None, tree: int | None = None,
            node: int | None = None) -> Any:
        """``parent[key]``, checked to be of ``types`` when given (``bool`` is not taken for a number)."""
        full = f"{path}.{key}" if path else key
        if not isinstance(parent, dict):
            raise self.fail(path or "<root>", f"expected an object, found {describe(parent)}", tree=tree, node=node)
        if key not in parent:
            raise self.fail(full, "missing field", tree=tree, node=node)
        v = parent[key]
        if types is not None and (not isinstance(v, types) or (isinstance(v, bool) and bool not in as_types(types))):
            raise self.fail(full, f"expected {type_names(types)}, found {describe(v)}", tree=tree, node=node)
        return v
