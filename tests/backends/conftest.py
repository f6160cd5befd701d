"""Backend fixtures: many small models compiled into one shared library per session (compiles are slow)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

from c_tools import build_many, needs_cc  # noqa: E402,F401
from lumber.backends.c import CLibrary  # noqa: E402
from lumber.ir import Forest  # noqa: E402


def _binnable(f: Forest) -> bool:
    from lumber.backends.c.layout import bin_tables, layout

    return bin_tables(f, layout(f)) is not None


@pytest.fixture(scope="session")
def case_libs(tmp_path_factory: pytest.TempPathFactory, c_compiler: str) -> dict[str, CLibrary]:
    """Every hand-built case, as tables (``<name>_t``, -O3: binned walks where they apply), as tables walked
    on the values (``<name>_v``, -O1), as unrolled code (``<name>_u``, -O1) and, where the thresholds bin,
    as the code walk on binned rows (``<name>_c``, -O1)."""
    from cases import CASES

    tmp = tmp_path_factory.mktemp("c")
    libs = build_many([(f"{name}_t", mk(), False) for name, mk in CASES.items()], tmp / "tables.so")
    libs.update(build_many([(f"{name}_u", mk(), True) for name, mk in CASES.items()], tmp / "code.so", opt="-O1"))
    libs.update(build_many([(f"{name}_v", mk(), "values") for name, mk in CASES.items()], tmp / "values.so",
                           opt="-O1"))
    libs.update(build_many([(f"{name}_c", f, "code") for name, f in ((n, mk()) for n, mk in CASES.items())
                            if _binnable(f)], tmp / "walkcode.so", opt="-O1"))
    return libs
