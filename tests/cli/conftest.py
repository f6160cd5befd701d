"""A small LightGBM project on disk for CLI tests of user mistakes (seconds to build)."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))  # test modules share helpers (the domain Checker)


@pytest.fixture
def age_hours(tmp_path: Path) -> Path:
    """A folder with ``model.txt`` (4 trees on Age, Hours), ``cases.csv`` (4 rows), ``train.csv`` (300 rows,
    label column ``label``) and ``nolabel.csv`` (the same rows without it)."""
    import lightgbm as lgb

    rng = np.random.default_rng(0)
    X = pd.DataFrame({"Age": rng.integers(17, 90, 300), "Hours": rng.integers(1, 99, 300)}).astype(float)
    y = ((X.Age > 40) & (X.Hours > 35)).astype(int)
    lgb.LGBMClassifier(n_estimators=4, num_leaves=4, verbose=-1, min_child_samples=5).fit(X, y) \
        .booster_.save_model(str(tmp_path / "model.txt"))
    X.iloc[:4].to_csv(tmp_path / "cases.csv", index=False)
    X.assign(label=y).to_csv(tmp_path / "train.csv", index=False)
    X.to_csv(tmp_path / "nolabel.csv", index=False)
    return tmp_path
