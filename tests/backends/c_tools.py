"""C-compiler helpers shared by the backend tests (a uniquely named module: several test folders
have a conftest.py, so `from conftest import ...` is ambiguous)."""

from __future__ import annotations

from pathlib import Path
from typing import Sequence

import pytest

from lumber.backends.c import BuildOptions, CLibrary, CEmitOptions, build_shared, emit_source
from lumber.ir import Forest


needs_cc = pytest.mark.usefixtures("c_compiler")
"""The test builds C: the session's ``c_compiler`` fixture (tests/conftest.py) checks for a compiler once."""


def build_many(forests: Sequence[tuple[str, Forest, bool | str]], out: Path, opt: str = "-O3",
               **build: object) -> dict[str, CLibrary]:
    """Compile ``(prefix, forest, unroll)`` models into one library, warning-free under -Wall -Wextra.

    A string in place of ``unroll`` is a table walk (``CEmitOptions.walk``: binned, values or auto).

    ``opt`` overrides the optimisation level: -O1 compiles about twice as fast, for
    the many small libraries of property tests (the -O3 builds cover the same code).
    """
    sources = [emit_source(f, CEmitOptions(prefix=p, unroll=u) if isinstance(u, bool) else
                           CEmitOptions(prefix=p, walk=u)).text() for p, f, u in forests]
    flags = () if opt == "-O3" else (opt,)
    build_shared(sources, out, BuildOptions(warnings_as_errors=True, extra_flags=flags, **build))  # type: ignore[arg-type]
    return {p: CLibrary(out, prefix=p) for p, _, _ in forests}
