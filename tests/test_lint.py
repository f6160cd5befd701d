"""Static checks that catch real bugs: undefined names, unused imports, syntax errors (pyflakes rules).

Style is left to review; these rules only flag code that is wrong or dead.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def test_pyflakes_rules_pass_on_package_tests_and_benchmarks() -> None:
    pytest.importorskip("ruff", reason="ruff comes with the test extra: pip install -e '.[test]'")
    r = subprocess.run([sys.executable, "-m", "ruff", "check", "--no-cache", "--select", "F,E9",
                        "--output-format", "concise", "lumber", "tests", "bench"],
                       cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr
