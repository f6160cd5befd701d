"""A stand-in for the tolerance search's exact step (tests of the tolerance forms, CLI and build gate).

``compile_fastest`` builds and times every exact form (C builds cost seconds); these tests only need the
forest library beside the tolerance forms, so they patch it with :func:`forest_only`.
"""

from __future__ import annotations

from typing import Any


def forest_only(forest: Any, options: Any, *, threads: int = 1, sample: Any = None, sample_source: str = "",
                built: Any = None, path: Any = None, skip_tables: Any = None) -> Any:
    """The exact search cut to the forest library (tests/backends/test_tolerance.py runs the full one, slow)."""
    from lumber.compiler.targets import get_target

    p = get_target("c").compile(forest, options.forest_options(), threads=threads)
    p.report = {"chosen": "forest", "forms": {}}
    if built is not None:
        built["forest"] = p
    return p
