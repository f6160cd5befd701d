"""ONNX backend: checked with onnx.checker, run with onnxruntime, compared with the reference exactly."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings

from cases import CASES, ONNX_REFUSED, corpus
from strategies import forests

from lumber.backends.onnx import OnnxOptions, check, emit_onnx
from lumber.runtime.predictors import OnnxPredictor, as_rows
from lumber.ir import CategoryRule, CompileError, Forest

import onnx

GOLDEN = Path(__file__).resolve().parents[1] / "golden" / "onnx"


def run(forest: Forest, X: np.ndarray, **options: object) -> dict[str, np.ndarray]:
    art = emit_onnx(forest, OnnxOptions(**options))  # type: ignore[arg-type]
    onnx.checker.check_model(onnx.load_from_string(art.files[art.main]), full_check=True)
    pred = OnnxPredictor(art.files[art.main], forest.schema, art.fingerprint, str(art.metadata["input_dtype"]))
    return pred.run(X)


def assert_exact(forest: Forest, X: np.ndarray, **options: object) -> None:
    out = run(forest, X, **options)
    ref = forest.evaluate(X).reshape(len(X), -1)
    got = out["margin"].astype(np.float64)
    bad = np.flatnonzero((got != ref).any(axis=1))
    assert bad.size == 0, f"rows {bad[:5]}: {X[bad[:3]]} got {got[bad[:3]]} expected {ref[bad[:3]]}"
    want = forest.schema.transform(forest.evaluate(X)).reshape(len(X), -1)
    rtol = 1e-6 if out["output"].dtype == np.float32 else 1e-12  # ORT's Sigmoid is a few ulps off numpy's
    np.testing.assert_allclose(out["output"], want, rtol=rtol, atol=1e-300)


@pytest.mark.parametrize("case", sorted(CASES))
def test_case_matches_reference(case: str) -> None:
    forest = CASES[case]()
    if case in ONNX_REFUSED:
        with pytest.raises(CompileError, match=ONNX_REFUSED[case]) as info:
            emit_onnx(forest)
        assert re.search(r"tree \d+, node \d+", str(info.value)), "the refusal must name the node"
        return
    assert_exact(forest, corpus(forest))


def expressible(forest: Forest) -> Forest:
    """The forest with what ONNX refuses taken out: no zero-as-missing, invalid categories with non-members."""
    return forest.replace(missing_zero=np.zeros_like(forest.missing_zero),
                          cat_invalid_left=forest.is_categorical & ~forest.cat_in_set_left).validate()


@settings(max_examples=40)
@given(forests(max_trees=6, max_depth=5))
def test_random_forests_match_reference_or_are_refused(forest: Forest) -> None:
    diags = check(forest, OnnxOptions())
    if diags:
        with pytest.raises(CompileError):
            emit_onnx(forest)
        forest = expressible(forest)
    assert_exact(forest, corpus(forest))


def test_lightgbm_category_values_match_lightgbm_not_treelite() -> None:
    """-0.5 is category 0 and 2.7 is category 2 for LightGBM; both stay exact through Ceil/Floor columns."""
    forest = CASES["categorical_lightgbm"]()
    X = np.array([[0.0, -0.5], [0.0, -0.999], [0.0, 2.7], [0.0, -1.0], [0.0, 2.0**31], [0.0, np.inf], [0.0, 5.99]])
    assert_exact(forest, X)
    assert (forest.apply(X[:1]) == forest.apply(np.array([[0.0, 0.0]]))).all()


def test_float32_variant_rounds_thresholds_down() -> None:
    """A float32-schema model with float32 sums runs on float32 input with round-down thresholds, exactly."""
    forest = CASES["categorical_xgboost"]()
    art = emit_onnx(forest)
    assert art.metadata["input_dtype"] == "float32"
    X = corpus(forest)
    assert_exact(forest, X)
    rows = as_rows(forest.schema, X, np.dtype(np.float32))
    assert rows.dtype == np.float32


def test_float32_inputs_on_a_float64_sum_model_need_exact_false() -> None:
    forest = CASES["float32_average"]()
    with pytest.raises(CompileError, match="sums leaf values in float32"):
        emit_onnx(forest, OnnxOptions(input_dtype="float32"))
    X = corpus(forest)
    out = run(forest, X, input_dtype="float32", exact=False)
    np.testing.assert_allclose(out["margin"], forest.evaluate(X), rtol=1e-6)
    assert_exact(forest, X)  # the default double variant casts inputs through float32 and is exact


def test_float32_variant_refused_for_float64_comparisons() -> None:
    with pytest.raises(CompileError, match="cannot reproduce a model that compares float64 inputs"):
        emit_onnx(CASES["numeric_nan"](), OnnxOptions(input_dtype="float32"))


def test_base_score_as_add_node() -> None:
    forest = CASES["multiclass"]()
    with pytest.raises(CompileError, match="base score as an Add node"):
        emit_onnx(forest, OnnxOptions(base_score="add"))
    art = emit_onnx(forest, OnnxOptions(base_score="add", exact=False))
    ops = [n.op_type for n in onnx.load_from_string(art.files[art.main]).graph.node]
    assert "Add" in ops
    X = corpus(forest)
    np.testing.assert_allclose(run(forest, X, base_score="add", exact=False)["margin"], forest.evaluate(X),
                               rtol=1e-15, atol=1e-15)


def test_averaging_uses_average_only_when_exact() -> None:
    def agg(forest: Forest) -> int:
        art = emit_onnx(forest)
        node = next(n for n in onnx.load_from_string(art.files[art.main]).graph.node if n.op_type == "TreeEnsemble")
        return next(a.i for a in node.attribute if a.name == "aggregate_function")

    assert agg(CASES["isolation"]()) == 0  # one output, every tree counts: AVERAGE
    assert agg(CASES["float32_average"]()) == 1  # vector leaves become one tree per output: SUM + Div


def test_legacy_opset3() -> None:
    forest = CASES["float32_average"]()
    with pytest.raises(CompileError, match="always returns float32"):
        emit_onnx(forest, OnnxOptions(opset=3))
    art = emit_onnx(forest, OnnxOptions(opset=3, exact=False))
    m = onnx.load_from_string(art.files[art.main])
    assert [n.op_type for n in m.graph.node if n.domain == "ai.onnx.ml"] == ["TreeEnsembleRegressor"]
    X = corpus(forest)
    out = run(forest, X, opset=3, exact=False)
    assert out["margin"].dtype == np.float32
    np.testing.assert_allclose(out["margin"], forest.evaluate(X), rtol=1e-6)
    with pytest.raises(CompileError, match="legacy opset-3 encoding has no set membership"):
        emit_onnx(CASES["categorical_lightgbm"](), OnnxOptions(opset=3, exact=False))


def test_huge_membership_sets_are_refused() -> None:
    forest = CASES["sparse_categories"]()
    with pytest.raises(CompileError, match="ORT #25400"):
        emit_onnx(forest, OnnxOptions(max_membership=3))


def test_category_codes_beyond_float32_are_refused_in_float32() -> None:
    forest = CASES["sparse_categories"]()
    f32 = forest.replace(schema=forest.schema.with_(input_dtype="float32", accumulate_dtype="float32",
                                                    category_rule=CategoryRule.LIGHTGBM))
    with pytest.raises(CompileError, match=r"category code >= 2\*\*24"):
        emit_onnx(f32)


def test_never_emits_neq_and_golden(update_goldens: bool) -> None:
    forest = CASES["categorical_xgboost"]()
    art = emit_onnx(forest, OnnxOptions(name="tiny"))
    assert art.files == emit_onnx(forest, OnnxOptions(name="tiny")).files  # deterministic bytes
    model = onnx.load_from_string(art.files["tiny.onnx"])
    node = next(n for n in model.graph.node if n.op_type == "TreeEnsemble")
    modes = onnx.numpy_helper.to_array(next(a.t for a in node.attribute if a.name == "nodes_modes"))
    assert 5 not in modes.tolist() and 6 in modes.tolist()
    text = onnx.printer.to_text(model.graph)
    golden = GOLDEN / "tiny.txt"
    if update_goldens:
        golden.parent.mkdir(parents=True, exist_ok=True)
        golden.write_text(text)
    assert text == golden.read_text(), "ONNX graph changed: review and rerun with --update-goldens"


def test_unknown_options_are_refused() -> None:
    forest = CASES["numeric_nan"]()
    with pytest.raises(CompileError, match="opset 4 is not supported"):
        emit_onnx(forest, OnnxOptions(opset=4))
    with pytest.raises(CompileError, match="base_score must be"):
        emit_onnx(forest, OnnxOptions(base_score="bias"))
