"""The type checker: mypy, configured in pyproject.toml ([tool.mypy]), must pass on lumber/ir, lumber/passes
and lumber/compiler (the files it lists)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_mypy_passes_on_ir_passes_and_compiler() -> None:
    r = subprocess.run([sys.executable, "-m", "mypy", "--no-error-summary"], cwd=ROOT, capture_output=True,
                       text=True, timeout=300)
    assert "No module named mypy" not in r.stderr, "mypy comes with the test extra: pip install -e '.[test]'"
    assert r.returncode == 0, r.stdout + r.stderr
