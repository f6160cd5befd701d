"""The passes as the spine: every registered pass is documented, and the analyses take their options as
dataclass fields, never as module-level switches."""

from __future__ import annotations

import ast
import re
from pathlib import Path

from lumber.passes.registry import known_names

ROOT = Path(__file__).resolve().parent.parent


def test_every_registered_pass_is_in_the_reference_table() -> None:
    text = (ROOT / "docs" / "passes.md").read_text()
    section = text.split("## The registered passes", 1)[1].split("\n## ", 1)[0]
    rows = set(re.findall(r"^\| `([a-z][a-z0-9-]*)` \|", section, flags=re.M))
    assert set(known_names()) == rows, (f"registered, not in docs/passes.md: {sorted(set(known_names()) - rows)}; "
                                        f"in the table, not registered: {sorted(rows - set(known_names()))}")


def _module_switches(path: Path) -> list[str]:
    """Module-level names bound to True or False (an on/off switch a test or a bench would flip)."""
    out = []
    for node in ast.parse(path.read_text()).body:
        value = node.value if isinstance(node, (ast.Assign, ast.AnnAssign)) else None
        if isinstance(value, ast.Constant) and isinstance(value.value, bool):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]  # type: ignore[union-attr]
            out += [f"{path.relative_to(ROOT)}:{node.lineno} {ast.unparse(t)}" for t in targets]
    return out


def test_no_module_level_switches_in_the_analyses() -> None:
    found = [s for p in sorted((ROOT / "lumber" / "passes" / "analyses").rglob("*.py")) for s in _module_switches(p)]
    assert not found, "options are dataclass fields, not module-level switches:\n" + "\n".join(found)


def test_the_switch_check_sees_a_switch(tmp_path: Path) -> None:
    (tmp_path / "m.py").write_text("FLIP_SPLIT = True\nLIMIT = 3\nflag: bool = False\n")
    global ROOT
    saved, ROOT = ROOT, tmp_path
    try:
        assert _module_switches(tmp_path / "m.py") == ["m.py:1 FLIP_SPLIT", "m.py:3 flag"]
    finally:
        ROOT = saved
