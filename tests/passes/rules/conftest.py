"""Rule tests: hand-built forests whose CDP, CRP and rule boxes are computed by hand, and a small
real model (LightGBM on the bundled compas data) for smoke tests."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

from builders import make_forest  # noqa: E402
from rules_helpers import classifier  # noqa: E402


@pytest.fixture(scope="session")
def hand() -> dict[str, Any]:
    """Two averaged trees over x0, x1 and six training rows (see test_estimators.py for the arithmetic).

    Tree A: x0 <= 0.5 ? (x1 <= 0.5 ? L1 : L2) : L3.   Tree B: x1 <= 1.5 ? L4 : L5.
    The explained model predicts class 1 iff x1 > 0.5, so the target rows are r1, r2, r4, r5.
    """
    rule_forest = make_forest([("x0", 0.5, ("x1", 0.5, 1.0, 2.0), 3.0), ("x1", 1.5, 4.0, 5.0)], ["x0", "x1"],
                              average=True)
    X = np.array([[0.2, 0.2], [0.3, 0.8], [0.4, 0.9], [0.8, 0.1], [0.9, 2.0], [0.1, 3.0]])
    model = classifier([("x1", 0.5, -5.0, 5.0)], ["x0", "x1"])
    return {"rule_forest": rule_forest, "X": X, "hit": np.array([0, 1, 1, 0, 1, 1], dtype=bool), "model": model,
            "x": np.array([0.2, 0.2])}


@pytest.fixture(scope="session")
def compas_model() -> dict[str, Any]:
    """LightGBM (50 trees, 8 leaves) on a 75/25 split of the bundled compas data."""
    import lightgbm as lgb

    import lumber

    d = lumber.datasets.load("compas")
    Xtr, Xte, ytr, yte = d.split(0.25, seed=0)
    m = lgb.LGBMClassifier(n_estimators=50, num_leaves=8, verbose=-1, random_state=0, n_jobs=1).fit(Xtr, ytr)
    return {"model": m, "Xtr": Xtr, "Xte": Xte, "features": d.features}
