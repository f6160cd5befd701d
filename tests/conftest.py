"""Shared fixtures: bundled real data sets, small and cached so the suite stays fast."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, settings

sys.path.insert(0, str(Path(__file__).resolve().parent))

# `make test` (and CI) is deterministic: the same examples on every machine, so a red CI run
# always reproduces. `make fuzz` explores with fresh random examples, many more of them.
settings.register_profile(
    "default", max_examples=25, deadline=None, derandomize=True,
    suppress_health_check=[HealthCheck.too_slow],
)
settings.register_profile(
    "thorough", max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow],
)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "default"))


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--update-goldens", action="store_true", help="rewrite tests/golden files")


@pytest.fixture(scope="session")
def update_goldens(request: pytest.FixtureRequest) -> bool:
    return bool(request.config.getoption("--update-goldens"))


@pytest.fixture(scope="session")
def c_compiler() -> str:
    """The system C compiler, looked up once per session (``needs_cc`` marks the tests that use it).

    Without one the C tests are skipped on a developer's machine, but fail under ``CI=true``: a CI runner
    without a compiler must not pass every C test by skipping it."""
    from lumber.backends.c import find_compiler
    from lumber.ir import CompileError

    try:
        return str(find_compiler())
    except CompileError as exc:
        if os.environ.get("CI", "").lower() in ("true", "1"):
            pytest.fail(f"CI=true but no C compiler: {exc.diagnostics[0].message}", pytrace=False)
        pytest.skip("no C compiler")


@pytest.fixture
def rng() -> np.random.Generator:
    return np.random.default_rng(0)
