"""Pass tests: put this folder on sys.path (for ``passhelp``) and share small real data sets."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))


@pytest.fixture(scope="session")
def adult_split() -> tuple[np.ndarray, ...]:
    """A 6000-row slice of the bundled adult data: train / valid / test, as float arrays."""
    import lumber

    d = lumber.datasets.load("adult")
    rng = np.random.default_rng(0)
    idx = rng.permutation(len(d.y))[:6000]
    X = d.X.to_numpy(dtype=np.float64)[idx]
    y = d.y[idx]
    return X[:3000], y[:3000], X[3000:4500], y[3000:4500], X[4500:], y[4500:]
