"""The Forest IR on hand-built trees: semantics, validation, storage."""

from __future__ import annotations

import numpy as np
import pytest

from builders import categorical, make_forest
from lumber.ir import Forest, InputDataError, Task, ValidationError


def test_numerical_routing_and_sum() -> None:
    f = make_forest([("a", 0.5, 1.0, ("b", 2.0, 2.0, 3.0)), ("b", 0.0, 10.0, 20.0)], ["a", "b"])
    X = np.array([[0.5, -1.0], [0.6, 2.0], [0.6, 2.5], [np.nan, np.nan]])
    # NaN goes right by default
    assert f.evaluate(X).tolist() == [11.0, 22.0, 23.0, 23.0]
    assert f.apply(X)[:, 0].tolist() == [1, 3, 4, 4]


def test_missing_left_and_categorical() -> None:
    f = make_forest([("c", {1, 3}, ("a", 0.0, 1.0, 2.0, True), 5.0)], ["a", categorical("c")])
    X = np.array([[np.nan, 1.0], [1.0, 3.9], [0.0, 2.0], [0.0, -0.5], [0.0, np.nan], [0.0, 1e12]])
    # LightGBM rule: 3.9 -> 3 (in set), -0.5 -> 0 (not in set), NaN and 1e12 go right
    assert f.evaluate(X).tolist() == [1.0, 2.0, 5.0, 5.0, 5.0, 5.0]


def test_average_and_multiclass() -> None:
    f = make_forest([("a", 0.0, [1.0, 0.0], [0.0, 1.0]), ("a", 1.0, [1.0, 0.0], [0.5, 0.5])], ["a"],
                    task=Task.MULTICLASS, n_outputs=2, average=True, classes=["x", "y"])
    X = np.array([[-1.0], [0.5], [2.0]])
    np.testing.assert_array_equal(f.evaluate(X), [[1.0, 0.0], [0.5, 0.5], [0.25, 0.75]])
    assert f.predict(X).tolist() == ["x", "x", "y"]


@pytest.mark.parametrize("n_outputs", [1, 2, 3])
def test_zero_rows_give_empty_results_of_the_right_shape(n_outputs: int) -> None:
    """An empty batch is a batch: every entry point answers with zero rows (a CI failure, once)."""
    leaf = [1.0] * n_outputs if n_outputs > 1 else 1.0
    task = Task.MULTICLASS if n_outputs > 1 else Task.BINARY
    f = make_forest([("a", 0.0, leaf, leaf)], ["a"], task=task, n_outputs=n_outputs)
    X = np.zeros((0, 1))
    assert f.evaluate(X).shape[0] == 0
    assert f.apply(X).shape == (0, 1)
    assert f.predict(X).shape == (0,)
    assert f.predict_proba(X).shape == (0, max(n_outputs, 2))
    assert f.schema.class_index(f.evaluate(X)).shape == (0,)


def test_float32_inputs_round_before_compare() -> None:
    t = float(np.float32(1.0)) + 1e-9  # between two float32 values
    f = make_forest([("a", t, 0.0, 1.0)], ["a"], input_dtype="float32")
    x = 1.0 + 2e-9  # rounds to 1.0 in float32, so it goes left
    assert f.evaluate([[x]]).tolist() == [0.0]


def test_wrong_width_is_a_clear_error() -> None:
    f = make_forest([("a", 0.5, 1.0, 2.0)], ["a", "b"])
    with pytest.raises(InputDataError, match="3 columns but the model reads 2"):
        f.evaluate(np.zeros((2, 3)))
    with pytest.raises(InputDataError, match="non-numeric"):
        f.evaluate(np.array([["x", "y"]], dtype=object))


def test_save_load_round_trip_is_byte_identical(tmp_path) -> None:
    f = make_forest([("c", {0, 7}, ("a", 0.1, 1.0, 2.0, True), 5.0)], ["a", categorical("c")])
    p1, p2 = tmp_path / "a.lumber", tmp_path / "b.lumber"
    f.save(p1)
    g = Forest.load(p1)
    g.save(p2)
    assert p1.read_bytes() == p2.read_bytes()
    X = np.array([[0.0, 7.0], [np.nan, 0.0], [1.0, 2.0]])
    np.testing.assert_array_equal(f.evaluate(X), g.evaluate(X))


def test_loading_the_wrong_kind_of_ir_names_both(tmp_path) -> None:
    from lumber.ir import ModelFormatError, Polynomial
    from lumber.passes.transforms.polynomial import forest_to_polynomial

    f = make_forest([("a", 0.5, 1.0, 2.0)], ["a"])
    forest_to_polynomial(f).save(tmp_path / "p.lumber")
    with pytest.raises(ModelFormatError, match=r"p\.lumber: holds a Polynomial, not a Forest"):
        Forest.load(tmp_path / "p.lumber")
    f.save(tmp_path / "f.lumber")
    with pytest.raises(ModelFormatError, match="holds a Forest, not a Polynomial"):
        Polynomial.load(tmp_path / "f.lumber")


def test_validate_catches_broken_structure() -> None:
    f = make_forest([("a", 0.5, 1.0, 2.0)], ["a"])
    bad = f.replace(left=np.array([0, -1, -1], dtype=np.int32))
    with pytest.raises(ValidationError, match="not after its parent"):
        bad.validate()
    bad = f.replace(feature=np.array([3, -1, -1], dtype=np.int32))
    with pytest.raises(ValidationError, match="out of range"):
        bad.validate()


def test_networkx_view() -> None:
    f = make_forest([("a", 0.5, 1.0, 2.0), 3.0], ["a"])
    g = f.to_networkx()
    assert g.number_of_nodes() == 4 and g.number_of_edges() == 2
    assert g.nodes[0]["threshold"] == 0.5
