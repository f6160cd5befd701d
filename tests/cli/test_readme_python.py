"""Every ```python block of the README runs, top to bottom in one namespace, in the folder
``lumber datasets export adult tour`` writes, and what it shows matches in shape.

A block's shown output is either the ``` block right after it (compared line by line:
the same number of lines, each starting with the same word) or a ``# value`` comment
line right after an expression (the expression's value and the shown literal have the
same type and, for tuples and lists, the same length). Numbers differ where a block
trains on the tour's 10-tree model, so values are not compared.

The reference card under "Python API" uses placeholder names (``model``, ``X``,
``x`` ...); :data:`PLACEHOLDERS` binds them to the tour's files, as its comments say.
"""

from __future__ import annotations

import ast
import contextlib
import io
import re
import warnings
from pathlib import Path
from typing import Any

import pytest

README = Path(__file__).resolve().parents[2] / "README.md"

PLACEHOLDERS = """
import pandas as pd
import lumber
_train, _valid = pd.read_csv("train.csv"), pd.read_csv("valid.csv")
model = model_a = model_or_path = "model.txt"
X, y = _train.drop(columns="Class"), _train["Class"].to_numpy()
Xv, yv = _valid.drop(columns="Class"), _valid["Class"].to_numpy()
X_train = _train.drop(columns="Class")
x = pd.read_csv("cases.csv").iloc[0]
model_b = lumber.run(model, "polynomial")
"""
"""What the Python API card's names stand for: the tour's model, its rows and one case."""


def blocks() -> list[tuple[int, str, list[str] | None]]:
    """(line, code, the output block shown right after it or None) for each ```python block."""
    lines = README.read_text(encoding="utf-8").splitlines()
    out: list[tuple[int, str, list[str] | None]] = []
    i = 0
    while i < len(lines):
        if lines[i].strip() != "```python":
            i += 1
            continue
        start = i + 1
        j = start
        while lines[j].strip() != "```":
            j += 1
        code = "\n".join(lines[start:j])
        k = j + 1
        while k < len(lines) and not lines[k].strip():
            k += 1
        shown = None
        if k < len(lines) and lines[k].strip() == "```" and k == j + 1 or (
                k < len(lines) and lines[k].strip() == "```" and all(not s.strip() for s in lines[j + 1:k])):
            m = k + 1
            while lines[m].strip() != "```":
                m += 1
            shown = lines[k + 1:m]
            j = m
        out.append((start + 1, code, shown))
        i = j + 1
    return out


def _literal(comment: str) -> Any:
    """The value a ``# ...`` line shows: the longest leading part that is a Python literal."""
    text = comment.lstrip("#").strip()
    parts = re.split(r"(\s{2,})", text)
    for n in range(len(parts), 0, -1):
        try:
            return ast.literal_eval("".join(parts[:n]).strip())
        except (ValueError, SyntaxError):
            continue
    raise AssertionError(f"shown value {comment!r} is not a Python literal")


def _same_shape(got: Any, want: Any) -> bool:
    if isinstance(want, (tuple, list)):
        return (isinstance(got, (tuple, list)) and len(got) == len(want)
                and all(_same_shape(g, w) for g, w in zip(got, want)))
    if isinstance(want, dict):
        return isinstance(got, dict)
    if isinstance(want, bool):
        return isinstance(got, bool)
    if isinstance(want, (int, float)):
        return isinstance(got, (int, float)) and not isinstance(got, bool)
    return isinstance(got, type(want))


def _word(line: str) -> str:
    return line.split()[0] if line.split() else ""


def run_block(code: str, ns: dict[str, Any], where: str) -> str:
    """Run ``code`` statement by statement in ``ns``; check ``# value`` lines; return what it printed."""
    tree = ast.parse(code)
    src = code.splitlines()
    printed = io.StringIO()  # what a terminal shows: stdout and stderr (pass timing goes to stderr)
    with contextlib.redirect_stdout(printed), contextlib.redirect_stderr(printed), \
            warnings.catch_warnings(record=True):  # warnings are not part of the shown output
        for stmt in tree.body:
            nxt = stmt.end_lineno or stmt.lineno
            shown = src[nxt] if nxt < len(src) and src[nxt].lstrip().startswith("# ") else None
            if isinstance(stmt, ast.Expr) and shown is not None:
                got = eval(compile(ast.Expression(stmt.value), where, "eval"), ns)  # noqa: S307 - the README's code
                want = _literal(shown)
                assert _same_shape(got, want), f"{where}:{stmt.lineno}: got {got!r}, the README shows {shown.strip()}"
            else:
                exec(compile(ast.Module([stmt], []), where, "exec"), ns)  # noqa: S102 - the README's code
    return printed.getvalue()


def test_readme_python_blocks_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from lumber.compiler.cli import main

    found = blocks()
    assert len(found) >= 3
    monkeypatch.chdir(tmp_path)
    assert main(["datasets", "export", "adult", "tour", "--trees", "10", "--leaves", "8"]) == 0
    monkeypatch.chdir(tmp_path / "tour")
    ns: dict[str, Any] = {"__name__": "readme"}
    for line, code, shown in found:
        where = f"README.md:{line}"
        if "model_or_path" in code:
            exec(PLACEHOLDERS, ns)  # noqa: S102
        out = run_block(code, ns, where).splitlines()
        if shown is not None:
            assert len(out) == len(shown), f"{where}: printed {len(out)} lines, the README shows {len(shown)}:\n" \
                                           + "\n".join(out)
            for g, w in zip(out, shown):
                assert _word(g) == _word(w), f"{where}:\n  got  {g}\n  want {w}"
