"""Backend fixtures: many small models compiled into one shared library per session (compiles are slow)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Sequence

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

from lumber.backends.c import BuildOptions, CLibrary, COptions, build_shared, emit_source, find_compiler  # noqa: E402
from lumber.ir import CompileError, Forest  # noqa: E402


def have_compiler() -> bool:
    try:
        find_compiler()
    except CompileError:
        return False
    return True


needs_cc = pytest.mark.skipif(not have_compiler(), reason="no C compiler")


def build_many(forests: Sequence[tuple[str, Forest, bool]], out: Path, opt: str = "-O3",
               **build: object) -> dict[str, CLibrary]:
    """Compile ``(prefix, forest, unroll)`` models into one library, warning-free under -Wall -Wextra.

    ``opt`` overrides the optimisation level: -O1 compiles about twice as fast, for
    the many small libraries of property tests (the -O3 builds cover the same code).
    """
    sources = [emit_source(f, COptions(prefix=p, unroll=u)).text() for p, f, u in forests]
    flags = () if opt == "-O3" else (opt,)
    build_shared(sources, out, BuildOptions(warnings_as_errors=True, extra_flags=flags, **build))  # type: ignore[arg-type]
    return {p: CLibrary(out, prefix=p) for p, _, _ in forests}


@pytest.fixture(scope="session")
def case_libs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, CLibrary]:
    """Every hand-built case, as tables (``<name>_t``, -O3) and as unrolled code (``<name>_u``, -O1)."""
    if not have_compiler():
        pytest.skip("no C compiler")
    from cases import CASES

    tmp = tmp_path_factory.mktemp("c")
    libs = build_many([(f"{name}_t", mk(), False) for name, mk in CASES.items()], tmp / "tables.so")
    libs.update(build_many([(f"{name}_u", mk(), True) for name, mk in CASES.items()], tmp / "code.so", opt="-O1"))
    return libs
