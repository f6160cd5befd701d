"""The layering rule of STYLE.md, checked on the source: ir <- passes, backends <- compiler.

``lumber.ir`` imports nothing else from lumber; ``lumber.passes`` and
``lumber.backends`` import only ``lumber.ir`` (and themselves);
``lumber.datasets`` only ``lumber.ir``. Only ``lumber.compiler`` may import
everything.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent / "lumber"
ALLOWED = {
    "ir": {"ir"},
    "passes": {"ir", "passes"},
    "backends": {"ir", "backends"},
    "datasets": {"ir", "datasets"},
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
