"""Every ```python block of docs/serving.md runs as written (after the first, which makes ``pred``, ``rows`` and
``local``), in a folder holding ``model.txt`` and the Parquet folder ``rows/``; each block asserts its results
equal the local ones."""

from __future__ import annotations

import importlib.util
import re
import shutil
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from c_tools import needs_cc

DOC = Path(__file__).resolve().parents[2] / "docs" / "serving.md"
BLOCKS = re.findall(r"```python\n(.*?)```", DOC.read_text(encoding="utf-8"), flags=re.S)
NEEDS = {"pyspark": "the optional extra lumber[spark]", "mlflow": "the optional extra lumber[mlflow]"}


@pytest.fixture(scope="module")
def folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    import lightgbm as lgb

    d = tmp_path_factory.mktemp("serving")
    rng = np.random.default_rng(4)
    X = pd.DataFrame(rng.normal(size=(900, 5)), columns=["age", "income", "debt", "years", "score"])
    X.iloc[::11, 2] = np.nan
    y = (X.age + X.income * X.debt.fillna(0) > 0).astype(int)
    lgb.LGBMClassifier(n_estimators=15, num_leaves=7, verbose=-1).fit(X, y).booster_.save_model(str(d / "model.txt"))
    (d / "rows").mkdir()
    frame = X.assign(id=np.arange(len(X)))[["id", *X.columns]]
    for i in range(3):
        frame.iloc[i * 300:(i + 1) * 300].to_parquet(d / "rows" / f"part-{i}.parquet", index=False)
    return d


def test_blocks_found() -> None:
    assert len(BLOCKS) >= 4


@needs_cc
@pytest.mark.parametrize("index", range(1, len(BLOCKS)))
def test_recipe(folder: Path, index: int, monkeypatch: pytest.MonkeyPatch) -> None:
    for module, extra in NEEDS.items():
        if re.search(rf"^\s*(import|from) {module}\b", BLOCKS[index], flags=re.M):
            if importlib.util.find_spec(module) is None:
                pytest.skip(f"needs {extra}")
    monkeypatch.chdir(folder)
    monkeypatch.setenv("PYSPARK_PYTHON", sys.executable)  # Spark's local Python workers: this interpreter
    shutil.rmtree(folder / "lumber-model", ignore_errors=True)
    namespace: dict[str, object] = {"__name__": "recipe"}
    exec(compile(BLOCKS[0], f"{DOC}:block0", "exec"), namespace)  # noqa: S102
    exec(compile(BLOCKS[index], f"{DOC}:block{index}", "exec"), namespace)  # noqa: S102


def test_readme_recipes_are_the_ones_run_here() -> None:
    """The README's Serve section shows lines of the recipes above, verbatim, so what it shows is what runs."""
    readme = (DOC.parents[1] / "README.md").read_text(encoding="utf-8")
    section = readme.split("## Serve\n", 1)[1].split("\n## ", 1)[0]
    shown = re.findall(r"```py\n(.*?)```", section, flags=re.S)
    assert len(shown) >= 4
    for block in shown:
        assert any(block in recipe for recipe in BLOCKS), block
