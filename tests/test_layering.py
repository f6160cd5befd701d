"""The layering rule, checked on the source: ir <- passes, backends <- runtime <- compiler.

``lumber.ir`` imports nothing else from lumber; ``lumber.passes`` and
``lumber.backends`` import only ``lumber.ir`` (and themselves);
``lumber.datasets`` only ``lumber.ir``; ``lumber.runtime`` (predictors, streaming,
data files, progress) only ``lumber.ir``, ``lumber.backends`` and ``lumber.datasets``.
Only ``lumber.compiler`` may import everything.
"""

from __future__ import annotations

import ast
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parent.parent / "lumber"
ALLOWED = {
    "ir": {"ir"},
    "passes": {"ir", "passes"},
    "backends": {"ir", "backends"},
    "datasets": {"ir", "datasets"},
    "runtime": {"ir", "backends", "datasets", "runtime"},
}


def _imports(path: Path) -> list[tuple[int, str]]:
    tree = ast.parse(path.read_text(), filename=str(path))
    pkg = path.relative_to(ROOT.parent).with_suffix("").parts
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out += [(node.lineno, a.name) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = pkg[: len(pkg) - node.level] if path.name != "__init__.py" else pkg[: len(pkg) - node.level + 1]
                mod = ".".join(base + ((node.module,) if node.module else ()))
            else:
                mod = node.module or ""
            out.append((node.lineno, mod))
    return out


@pytest.mark.parametrize("layer", sorted(ALLOWED))
def test_layer_imports_only_what_it_may(layer: str) -> None:
    bad = []
    for path in sorted((ROOT / layer).rglob("*.py")):
        for line, mod in _imports(path):
            parts = mod.split(".")
            if parts[0] != "lumber":
                continue
            if len(parts) == 1:  # `from lumber import __version__`: the lazy top level is fine
                continue
            if parts[1] not in ALLOWED[layer]:
                bad.append(f"{path.relative_to(ROOT.parent)}:{line} imports {mod}")
    assert not bad, "layering violations:\n" + "\n".join(bad)


# -- no import circles ---------------------------------------------------------------------------

def _module_name(path: Path, top: Path = ROOT.parent) -> str:
    parts = path.relative_to(top).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _type_checking_only(node: ast.If) -> bool:
    t = node.test
    return (isinstance(t, ast.Name) and t.id == "TYPE_CHECKING") or (
        isinstance(t, ast.Attribute) and t.attr == "TYPE_CHECKING")


def lazy_api(top: Path = ROOT.parent) -> dict[str, str]:
    """``lumber.NAME`` -> the module the lazy top level imports for it (``_API`` in lumber/__init__.py)."""
    init = top / "lumber" / "__init__.py"
    if not init.is_file():
        return {}
    for node in ast.walk(ast.parse(init.read_text())):
        if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and node.target.id == "_API":
            api = ast.literal_eval(node.value) if node.value is not None else {}
            return {k: v.split(":")[0] for k, v in api.items()}
    return {}


def _import_targets(path: Path, modules: set[str], top: Path = ROOT.parent,
                    api: dict[str, str] | None = None, type_checking: bool = False) -> list[tuple[int, str]]:
    """Every module ``path`` imports, at module level or inside functions, with the line.

    ``importlib.import_module("x")`` and ``__import__("x")`` with a literal name count too; imports
    under ``if TYPE_CHECKING:`` do not (they never run) unless ``type_checking``. ``from pkg import name`` is an import of
    ``pkg.name`` when that is a module, else of ``pkg``. Bench scripts import each other by bare name.
    A registry (a module that calls ``import_module`` with a computed name) imports every module its
    string constants name (``"lumber.compiler.targets.c:CLibraryTarget"``); ``lumber.compile``
    after ``import lumber`` imports what the lazy top level maps ``compile`` to (``api``).
    """
    me = _module_name(path, top)
    pkg = me.split(".") if path.name == "__init__.py" else me.split(".")[:-1]
    found: list[tuple[int, str]] = []
    tree = ast.parse(path.read_text(), filename=str(path))
    registry = me != "lumber" and any(
        isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr == "import_module"
        and not (n.args and isinstance(n.args[0], ast.Constant)) for n in ast.walk(tree))

    def add(line: int, name: str) -> None:
        if name.split(".")[0] not in ("lumber", "bench") and f"bench.{name}" in modules and me.startswith("bench"):
            name = f"bench.{name}"
        if name in modules and name != me:
            found.append((line, name))

    def visit(node: ast.AST) -> None:
        if isinstance(node, ast.If) and _type_checking_only(node) and not type_checking:
            for child in node.orelse:
                visit(child)
            return
        if isinstance(node, ast.Import):
            for a in node.names:
                add(node.lineno, a.name)
        elif isinstance(node, ast.ImportFrom):
            base = ".".join(pkg[: len(pkg) - node.level + 1] + ([node.module] if node.module else [])) \
                if node.level else (node.module or "")
            for a in node.names:
                add(node.lineno, f"{base}.{a.name}" if f"{base}.{a.name}" in modules else base)
        elif isinstance(node, ast.Call) and node.args and isinstance(node.args[0], ast.Constant) \
                and isinstance(node.args[0].value, str):
            f = node.func
            if (isinstance(f, ast.Name) and f.id == "__import__") or (
                    isinstance(f, ast.Attribute) and f.attr == "import_module"):
                add(node.lineno, node.args[0].value)
        elif registry and isinstance(node, ast.Constant) and isinstance(node.value, str):
            add(node.lineno, node.value.split(":")[0])
        elif isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "lumber" \
                and api and node.attr in api:
            add(node.lineno, api[node.attr])
        for child in ast.iter_child_nodes(node):
            visit(child)

    visit(tree)
    return found


def import_graph(top: Path = ROOT.parent, type_checking: bool = False) -> Any:
    """Modules of ``lumber`` and ``bench`` under ``top`` -> the modules they import (``type_checking``: with
    the imports made for type checkers only)."""
    import networkx as nx

    files = {_module_name(p, top): p for d in ("lumber", "bench") for p in sorted((top / d).rglob("*.py"))}
    api = lazy_api(top)
    g = nx.DiGraph()
    g.add_nodes_from(files)
    for mod, path in files.items():
        for line, target in _import_targets(path, set(files), top, api, type_checking):
            if not g.has_edge(mod, target):
                g.add_edge(mod, target, where=f"{path.relative_to(top)}:{line}")
    return g


def circles(g: Any) -> list[str]:
    import networkx as nx

    out = []
    for scc in nx.strongly_connected_components(g):
        if len(scc) > 1:
            cycle = nx.find_cycle(g.subgraph(scc))
            out.append(" -> ".join(f"{a} ({g.edges[a, b]['where']})" for a, b in cycle) + f" -> {cycle[0][0]}")
    return out


def test_no_import_circles_even_through_function_level_imports() -> None:
    found = circles(import_graph())
    assert not found, "import circles:\n" + "\n".join(found)


def test_no_import_circles_even_for_type_checkers() -> None:
    """An import made only for type checkers (``if TYPE_CHECKING:``) does not run, but a circle through it is
    still two modules that need each other: a protocol (``lumber.ir.decision.Model``) says what is read."""
    found = circles(import_graph(type_checking=True))
    assert not found, "import circles through TYPE_CHECKING imports:\n" + "\n".join(found)


def test_the_circle_check_sees_function_level_and_dynamic_imports(tmp_path: Path) -> None:
    """The checker itself: an import inside a function and a literal import_module are edges."""
    src = tmp_path / "lumber" / "m.py"
    src.parent.mkdir()
    src.write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from lumber import z\n"
                   "def f():\n    from lumber import a\n    import importlib\n    importlib.import_module('lumber.b')\n")
    got = _import_targets(src, {"lumber.m", "lumber.a", "lumber.b", "lumber.z"}, tmp_path)
    assert got == [(5, "lumber.a"), (7, "lumber.b")]
    got = _import_targets(src, {"lumber.m", "lumber.a", "lumber.b", "lumber.z"}, tmp_path, type_checking=True)
    assert got == [(3, "lumber.z"), (5, "lumber.a"), (7, "lumber.b")]
    (tmp_path / "lumber" / "a.py").write_text("def g():\n    from . import m\n")
    (tmp_path / "bench").mkdir()
    (tmp_path / "bench" / "p.py").write_text("import q\n")
    (tmp_path / "bench" / "q.py").write_text("def h():\n    __import__('p')\n")
    found = circles(import_graph(tmp_path))
    assert len(found) == 2 and any("lumber/a.py:2" in c for c in found) and any("bench/q.py:2" in c for c in found)


def test_the_circle_check_sees_registries_and_the_lazy_top_level(tmp_path: Path) -> None:
    """A registry's entries and ``lumber.NAME`` through the lazy top level are edges too, so a target
    that asks its own registry for another target (``from . import get_target``) is a circle."""
    (tmp_path / "lumber" / "reg").mkdir(parents=True)
    (tmp_path / "lumber" / "__init__.py").write_text('_API: dict[str, str] = {"go": "lumber.b:go"}\n')
    (tmp_path / "lumber" / "reg" / "__init__.py").write_text(
        'import importlib\nTABLE = {"a": "lumber.reg.a:A"}\n'
        'def get(n):\n    return importlib.import_module(TABLE[n].split(":")[0])\n')
    (tmp_path / "lumber" / "reg" / "a.py").write_text("def f():\n    from lumber.reg import get\n")
    (tmp_path / "lumber" / "b.py").write_text("def go():\n    pass\n")
    (tmp_path / "lumber" / "c.py").write_text("import lumber\ndef h():\n    return lumber.go()\n")
    g = import_graph(tmp_path)
    assert g.has_edge("lumber.reg", "lumber.reg.a") and g.has_edge("lumber.c", "lumber.b")
    assert not g.has_edge("lumber", "lumber.b"), "the lazy top level imports nothing by itself"
    found = circles(g)
    assert len(found) == 1 and "lumber/reg/a.py:2" in found[0] and "lumber/reg/__init__.py:2" in found[0]


def _function_level_imports(path: Path) -> list[int]:
    """Lines of ``path`` that import a lumber module inside a function (``TYPE_CHECKING`` blocks aside)."""
    out: list[int] = []

    def walk(node: ast.AST, in_function: bool) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.If) and _type_checking_only(child):
                continue
            inner = in_function or isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef))
            if inner and isinstance(child, ast.ImportFrom) and (
                    child.level or (child.module or "").split(".")[0] == "lumber"):
                out.append(child.lineno)
            elif inner and isinstance(child, ast.Import) and any(a.name.split(".")[0] == "lumber" for a in child.names):
                out.append(child.lineno)
            walk(child, inner)

    walk(ast.parse(path.read_text(), filename=str(path)), False)
    return out


def test_the_ir_imports_its_own_modules_at_module_level() -> None:
    """``lumber.ir`` has no circle to dodge (the check above counts function-level imports as edges), so
    none of its modules imports another inside a function: what a module needs, it says at the top."""
    found = [f"{p.relative_to(ROOT.parent)}:{line}" for p in sorted((ROOT / "ir").rglob("*.py"))
             for line in _function_level_imports(p)]
    assert not found, "function-level imports in lumber/ir:\n" + "\n".join(found)


COMMANDS = ROOT / "compiler" / "cli"
"""Every module of the CLI package is imported to build the parser (``lumber --help``, shell completion on
each TAB), so a command loads the work it runs inside ``run``; ``cli/__init__.py`` imports nothing heavy at
its top, so Ctrl-C is caught from the first moment."""
PENDING = {
    "lumber/backends/c/emit.py": 2, "lumber/backends/table_c/__init__.py": 4, "lumber/compiler/api/batch.py": 4,
    "lumber/compiler/api/counterfactual.py": 1, "lumber/compiler/speed.py": 3, "lumber/compiler/tables.py": 8,
    "lumber/compiler/targets/table.py": 1, "lumber/datasets/__init__.py": 1,
    "lumber/passes/analyses/counterfactual/result.py": 1, "lumber/runtime/predictors.py": 4,
}
"""Function-level imports of lumber modules still to move to the top of these modules (at most this many):
nothing needs them there (the circle checks above count them as edges and find no circle)."""


def test_lumber_modules_are_imported_at_module_level() -> None:
    """What a module needs from lumber it imports at its top: no circle needs dodging (see above), and lumber's
    own modules import their optional heavy extras (LightGBM, XGBoost, ONNX, ...) inside functions themselves.
    The CLI commands are the exception (:data:`COMMANDS`), and :data:`PENDING` may only shrink."""
    found: list[str] = []
    for p in sorted(ROOT.rglob("*.py")):
        rel = p.relative_to(ROOT.parent).as_posix()
        lines = _function_level_imports(p)
        if not lines or p.is_relative_to(COMMANDS):
            continue
        if len(lines) > PENDING.get(rel, 0):
            found.append(f"{rel}:{lines[0]} ({len(lines)} function-level imports of lumber modules)")
    assert not found, "import these at the top of the module:\n" + "\n".join(found)
