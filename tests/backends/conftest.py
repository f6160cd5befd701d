"""Backend fixtures: many small models compiled into one shared library per session (compiles are slow)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

from c_tools import build_many, needs_cc  # noqa: E402,F401
from lumber.backends.c import CLibrary  # noqa: E402


@pytest.fixture(scope="session")
def case_libs(tmp_path_factory: pytest.TempPathFactory, c_compiler: str) -> dict[str, CLibrary]:
    """Every hand-built case, as tables (``<name>_t``, -O3: binned walks where they apply), as tables walked
    on the values (``<name>_v``, -O1) and as unrolled code (``<name>_u``, -O1)."""
    from cases import CASES

    tmp = tmp_path_factory.mktemp("c")
    libs = build_many([(f"{name}_t", mk(), False) for name, mk in CASES.items()], tmp / "tables.so")
    libs.update(build_many([(f"{name}_u", mk(), True) for name, mk in CASES.items()], tmp / "code.so", opt="-O1"))
    libs.update(build_many([(f"{name}_v", mk(), "values") for name, mk in CASES.items()], tmp / "values.so",
                           opt="-O1"))
    return libs
