"""The conversions and the cascade as registered passes: pipeline text in, exact (or banded) IR out."""

from __future__ import annotations

import numpy as np
import pytest

import lumber
from lumber.ir import CompileError, Forest, ObliviousEnsemble, ValidationError
from lumber.ir.cascade import Cascade
from lumber.passes.base import PassContext
from lumber.passes.pipeline_text import build_passes, format_pipeline
from lumber.passes.transforms.cascade import MakeCascade


@pytest.fixture(scope="module")
def binary() -> tuple[Forest, np.ndarray, np.ndarray]:
    from sklearn.datasets import make_classification
    from sklearn.ensemble import GradientBoostingClassifier

    X, y = make_classification(1500, 6, random_state=0)
    m = GradientBoostingClassifier(n_estimators=25, max_depth=3, random_state=0).fit(X[:800], y[:800])
    return lumber.load(m), X, y


def test_to_forest_is_exact(binary: tuple[Forest, np.ndarray, np.ndarray]) -> None:
    forest, X, _ = binary
    ens = lumber.run(forest, "polynomial,oblivious")
    assert isinstance(ens, ObliviousEnsemble)
    ctx = PassContext()
    back = lumber.run(ens, "to-forest", context=ctx)
    assert isinstance(back, Forest) and np.array_equal(back.evaluate(X), ens.evaluate(X))
    assert ctx.reports[0].pass_name == "to-forest" and "exact" in ctx.reports[0].summary


def test_as_tables_reads_symmetric_trees_exactly() -> None:
    catboost = pytest.importorskip("catboost", reason="CatBoost is an optional extra")
    from sklearn.datasets import make_classification

    X, y = make_classification(500, 5, random_state=0)
    forest = lumber.load(catboost.CatBoostClassifier(iterations=10, depth=3, verbose=0).fit(X, y))
    ens = lumber.run(forest, "as-tables")
    assert isinstance(ens, ObliviousEnsemble) and np.array_equal(ens.evaluate(X), forest.evaluate(X))
    assert np.array_equal(lumber.run(ens, "to-forest").evaluate(X), forest.evaluate(X))


def test_as_tables_refuses_a_forest_that_is_not_oblivious(binary: tuple[Forest, np.ndarray, np.ndarray]) -> None:
    forest, _, _ = binary
    with pytest.raises(CompileError, match="as-tables.*not oblivious") as e:
        lumber.run(forest, "as-tables")
    assert "polynomial,oblivious" in str(e.value)


def test_the_manager_suggests_a_registered_conversion(binary: tuple[Forest, np.ndarray, np.ndarray]) -> None:
    forest, _, _ = binary
    with pytest.raises(CompileError, match="add .*'as-tables'.* before it"):
        lumber.run(forest, "quantize")


def test_cascade_pass_from_pipeline_text(binary: tuple[Forest, np.ndarray, np.ndarray]) -> None:
    forest, X, y = binary
    passes = build_passes("cascade{depth=4,max-trees=30,agreement=0.99,trees=20}")
    assert passes == [MakeCascade(depth=4, max_trees=30, agreement=0.99, trees=20)]
    assert build_passes(format_pipeline(passes)) == passes
    ctx = PassContext()
    data = {"train": (X[:800], y[:800]), "valid": (X[800:1200], y[800:1200])}
    c = lumber.run(forest, passes, data=data, context=ctx)
    assert isinstance(c, Cascade) and c.band is not None and c.band[0] <= 0.0 <= c.band[1]
    assert c.tables.quantized and c.tables.n_trees <= 21  # 20 fitted tables and the constant
    Xv = X[800:1200]
    got, ref = c.evaluate(Xv), forest.evaluate(Xv).reshape(-1)
    agree = np.mean((got > 0) == (ref > 0))
    assert agree >= 0.99 and c.quality["agreement"] == agree
    inside = (c.tables.evaluate(Xv).reshape(-1) >= c.band[0]) & (c.tables.evaluate(Xv).reshape(-1) <= c.band[1])
    assert np.array_equal(got[inside], ref[inside]), "rows inside the band take the exact forest"
    assert ctx.reports[-1].pass_name == "cascade" and "LOSSY" in ctx.reports[-1].summary


def test_cascade_needs_both_row_sets_and_checks_its_options(binary: tuple[Forest, np.ndarray, np.ndarray]) -> None:
    forest, X, y = binary
    with pytest.raises(CompileError, match="needs X_valid"):
        lumber.run(forest, "cascade{max-trees=5}", data={"train": (X[:800], y[:800])})
    with pytest.raises(CompileError, match="agreement must be a share"):
        build_passes("cascade{agreement=1.5}")
    with pytest.raises(CompileError, match="trees must be a positive integer"):
        MakeCascade(trees=0)


def test_a_cascade_validates_its_parts(binary: tuple[Forest, np.ndarray, np.ndarray]) -> None:
    forest, X, y = binary
    c = lumber.run(forest, "cascade{depth=3,max-trees=8}", data={"train": (X[:800], y[:800]),
                                                                   "valid": (X[800:1200], y[800:1200])})
    with pytest.raises(ValidationError, match="band must contain 0"):
        Cascade(c.forest, c.tables, (0.5, 1.0)).validate()


@pytest.mark.usefixtures("c_compiler")
def test_a_cascade_compiles_to_one_c_library(binary: tuple[Forest, np.ndarray, np.ndarray], tmp_path) -> None:
    forest, X, y = binary
    c = lumber.run(forest, "cascade{depth=4,max-trees=20}", data={"train": (X[:800], y[:800]),
                                                                    "valid": (X[800:1200], y[800:1200])})
    pred = lumber.compile(c, "c", path=tmp_path / "c.so")
    assert np.array_equal(pred.predict_raw(X[1200:]).reshape(-1), c.evaluate(X[1200:]))
    again = lumber.load_compiled(tmp_path / "c.so", forest)
    assert np.array_equal(again.predict_raw(X[1200:]).reshape(-1), c.evaluate(X[1200:]))
    assert again.library.metadata["cascade"]["exact_trees"] == forest.n_trees
    with pytest.raises(CompileError, match="compiles to target 'c'"):
        lumber.compile(c, "onnx")


@pytest.mark.usefixtures("c_compiler")
def test_lumber_compile_emits_a_cascade_pipeline_as_a_c_library(tmp_path, capsys) -> None:  # type: ignore[no-untyped-def]
    import pandas as pd
    from sklearn.datasets import make_classification
    from sklearn.ensemble import GradientBoostingClassifier

    from lumber.compiler.cli import main

    X, y = make_classification(900, 4, random_state=3)
    cols = [f"f{i}" for i in range(4)]
    frame = pd.DataFrame(X, columns=cols).assign(label=y)
    frame[:500].to_csv(tmp_path / "train.csv", index=False)
    frame[500:].to_csv(tmp_path / "valid.csv", index=False)
    forest = lumber.load(GradientBoostingClassifier(n_estimators=8, max_depth=2, random_state=0).fit(X[:500], y[:500]))
    forest.save(tmp_path / "m.lumber")
    args = [str(tmp_path / "m.lumber"), "--passes", "cascade{depth=3,max-trees=6}", "--train",
            str(tmp_path / "train.csv"), "--valid", str(tmp_path / "valid.csv"), "--label", "label"]
    assert main(["compile", *args]) != 0
    assert "a pipeline ending in 'cascade' compiles to a C library" in capsys.readouterr().err
    assert main(["compile", *args, "--emit", "c", "-o", str(tmp_path / "c.so")]) == 0
    assert "cascade: 6 fitted tables before 8 trees" in capsys.readouterr().out
    pred = lumber.load_compiled(tmp_path / "c.so", forest)
    c = lumber.run(forest, "cascade{depth=3,max-trees=6}", data={"train": (frame[cols][:500], y[:500]),
                                                                  "valid": (frame[cols][500:], y[500:])})
    assert np.array_equal(pred.predict_raw(X).reshape(-1), c.evaluate(X))
