"""ObliviousEnsemble IR: semantics on hand-built tables, Forest round trips, storage, invariants."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from hypothesis import given

from builders import make_forest
from oblivious_strategies import ensembles, rows
from lumber.ir import ObliviousEnsemble, PostTransform, Schema, Task, ValidationError, default_features
from lumber.ir.oblivious import forest_to_oblivious

def two_trees() -> ObliviousEnsemble:
    """Tree 0: bits (x0 > 0, x1 > 1 or NaN); tree 1: bit (x0 is NaN)."""
    schema = Schema(features=default_features(2), task=Task.REGRESSION, n_outputs=1, base_score=(0.5,))
    return ObliviousEnsemble(schema=schema, depth=np.array([2, 1]), level_feature=np.array([0, 1, 0]),
                             level_threshold=np.array([0.0, 1.0, np.inf]), level_nan_true=np.array([False, True, True]),
                             tree_output=np.array([0, 0]), value=np.array([1.0, 2.0, 4.0, 8.0, 0.0, 16.0])).validate()


def test_hand_built_tables_and_bit_order() -> None:
    e = two_trees()
    X = np.array([[-1, 0], [1, 0], [-1, 2], [1, 2], [-1, np.nan], [np.nan, 0], [np.inf, np.inf]])
    # level 0 (x0 > 0) is bit 0, level 1 (x1 > 1 or NaN) is bit 1; tree 1 holds 16 when x0 is NaN
    np.testing.assert_array_equal(e.apply(X), [[0, 0], [1, 0], [2, 0], [3, 0], [2, 0], [0, 1], [3, 0]])
    np.testing.assert_array_equal(e.evaluate(X), 0.5 + np.array([1, 2, 4, 8, 4, 1 + 16, 8]))
    assert e.level_offset.tolist() == [0, 2, 3] and e.value_offset.tolist() == [0, 4, 6]
    assert e.describe_level(1) == "f1 > 1.0 or missing" and e.describe_level(2) == "f0 is missing"
    np.testing.assert_array_equal(e.table(0)[:, 0], [1, 2, 4, 8])


@given(ensembles())
def test_forest_round_trip_is_exact(e: ObliviousEnsemble) -> None:
    X = rows(e.n_features)
    f = e.to_forest()
    np.testing.assert_array_equal(f.evaluate(X), e.evaluate(X))
    back = forest_to_oblivious(f)
    np.testing.assert_array_equal(back.apply(X), e.apply(X))
    np.testing.assert_array_equal(back.evaluate(X), e.evaluate(X))


@given(ensembles(bins=True, max_trees=6))
def test_select_trees_splits_the_sum(e: ObliviousEnsemble) -> None:
    """Trees picked by index keep their levels, category sets, bin borders and tables: the leaves they
    reach are the source's, and two complementary selections' tree sums add to the source's."""
    X = rows(e.n_features)
    base = np.asarray(e.schema.base_score)
    odd, even = np.arange(1, e.n_trees, 2), np.arange(0, e.n_trees, 2)
    a, b = e.select_trees(odd).validate(), e.select_trees(even).validate()
    np.testing.assert_array_equal(a.apply(X), e.apply(X)[:, odd])
    np.testing.assert_array_equal(b.apply(X), e.apply(X)[:, even])
    if not e.schema.average:
        np.testing.assert_allclose(a.evaluate(X) + b.evaluate(X) - base, e.evaluate(X), rtol=1e-6, atol=1e-6)
    assert e.select_trees([]).n_trees == 0
    with pytest.raises(ValidationError, match="tree index out of range"):
        e.select_trees([e.n_trees])


@given(ensembles(bins=True))
def test_bin_levels_become_exact_forests(e: ObliviousEnsemble) -> None:
    """A tree with bin levels becomes a binary tree that searches each group's borders (NaN
    reaching its code): the forest's margins are the tables' on every value, NaN and infinities."""
    X = rows(e.n_features)
    np.testing.assert_array_equal(e.to_forest().evaluate(X), e.evaluate(X))
    for i in np.flatnonzero(e.bin_level):
        assert e.describe_level(int(i)).startswith(f"bit {int(e.level_code_bit[i])} of ")


def test_bin_level_bits_and_invariants() -> None:
    """Three borders of f0 in two levels: the levels read the count of borders below the value."""
    from lumber.ir import ValidationError

    schema = Schema(features=default_features(1), task=Task.REGRESSION, n_outputs=1, base_score=(0.0,))
    e = ObliviousEnsemble(schema=schema, depth=np.array([2]), level_feature=np.array([0, 0]),
                          level_threshold=np.array([0.0, 1.0]), level_nan_true=np.array([True, False]),
                          tree_output=np.array([0]), value=np.array([10.0, 20.0, 30.0, 40.0]),
                          level_border_offset=np.array([0, 3, 6]), level_border=np.array([0.0, 1.0, 2.0] * 2),
                          level_code_bit=np.array([0, 1])).validate()
    X = np.array([[-1.0], [0.0], [0.5], [1.0], [1.5], [2.0], [3.0], [np.nan], [np.inf], [-np.inf]])
    np.testing.assert_array_equal(e.evaluate(X), [10, 10, 20, 20, 30, 30, 40, 20, 40, 10])
    assert e.describe_level(1) == "bit 1 of f0's bin among (0.0, 1.0, 2.0)"
    assert e.statistics()["bin_levels"] == 2
    with pytest.raises(ValidationError, match="threshold must be its border"):
        e.replace(level_threshold=np.array([0.0, 2.0])).validate()
    with pytest.raises(ValidationError, match="every bit of its code"):
        e.replace(level_code_bit=np.array([0, 0]), level_threshold=np.array([0.0, 0.0])).validate()
    with pytest.raises(ValidationError, match="NaN bits"):
        e.replace(level_nan_true=np.array([True, True]), level_border_offset=np.array([0, 2, 4]),
                  level_border=np.array([0.0, 1.0] * 2)).validate()  # code 3 of two borders
    with pytest.raises(ValidationError, match="strictly increasing"):
        e.replace(level_border=np.array([0.0, 2.0, 1.0] * 2)).validate()


@given(ensembles(bins=True))
def test_save_load_save_is_byte_identical(e: ObliviousEnsemble) -> None:
    from lumber.ir.serialize import from_bytes, to_bytes

    data = to_bytes(e)
    back = from_bytes(data)
    assert isinstance(back, ObliviousEnsemble) and to_bytes(back) == data
    X = rows(e.n_features, 50)
    np.testing.assert_array_equal(back.evaluate(X), e.evaluate(X))


def test_save_and_load_files(tmp_path: Any) -> None:
    e = two_trees()
    e.save(tmp_path / "e.lumber")
    back = ObliviousEnsemble.load(tmp_path / "e.lumber")
    np.testing.assert_array_equal(back.value, e.value)
    make_forest([0.0], ["a"]).save(tmp_path / "f.lumber")
    from lumber.ir import ModelFormatError

    with pytest.raises(ModelFormatError, match="not an ObliviousEnsemble"):
        ObliviousEnsemble.load(tmp_path / "f.lumber")


def test_multi_output_scalar_and_vector_trees_and_average() -> None:
    schema = Schema(features=default_features(1), task=Task.MULTICLASS, n_outputs=2, base_score=(0.0, 1.0),
                    post_transform=PostTransform.SOFTMAX, average=True)
    e = ObliviousEnsemble(schema=schema, depth=np.array([1, 1, 0]), level_feature=np.array([0, 0]),
                          level_threshold=np.array([0.0, 1.0]), level_nan_true=np.array([False, False]),
                          tree_output=np.array([1, -1, 0]), value=np.array([1.0, 2.0, 10.0, 20.0, 30.0, 40.0, 5.0]))
    e.validate()
    X = np.array([[-1.0], [0.5], [2.0]])
    # output 0: vector tree (10 or 30) + constant 5, two trees; output 1: scalar (1 or 2) + vector (20 or 40), two trees
    expected = np.array([[15.0, 22.0], [15.0, 23.0], [35.0, 43.0]]) / 2
    np.testing.assert_array_equal(e.evaluate(X), expected)
    np.testing.assert_allclose(e.predict_proba(X).sum(axis=1), 1.0)
    np.testing.assert_array_equal(e.to_forest().evaluate(X), expected)


def test_not_oblivious_forest_is_refused() -> None:
    f = make_forest([("a", 0.0, ("b", 1.0, 1.0, 2.0), 3.0)], ["a", "b"])
    with pytest.raises(ValidationError, match="tree 0 is not oblivious: its leaves"):
        forest_to_oblivious(f)
    g = make_forest([("a", 0.0, ("b", 1.0, 1.0, 2.0), ("a", 1.0, 3.0, 4.0))], ["a", "b"])
    with pytest.raises(ValidationError, match="test different conditions"):
        forest_to_oblivious(g)


def test_statistics_and_graph() -> None:
    e = two_trees()
    st_ = e.statistics()
    assert st_["trees"] == 2 and st_["trees_by_depth"] == {1: 1, 2: 1} and st_["table_bytes"] == 48
    g = e.to_networkx()
    assert g.number_of_nodes() == 5 and g.number_of_edges() == 3
    assert g.nodes[("level", 0, 1)]["label"] == "f1 > 1.0 or missing"


def _broken(**changes: Any) -> ObliviousEnsemble:
    e = two_trees()
    return e.replace(**changes)


@pytest.mark.parametrize("changes, match", [
    ({"depth": np.array([2, 2])}, "depths sum to 4"),
    ({"level_threshold": np.array([0.0, np.nan, np.inf])}, "threshold is NaN"),
    ({"value": np.zeros(5)}, "value has 5 entries"),
    ({"value": np.array([1.0, np.nan, 0, 0, 0, 0])}, "NaN or infinite"),
    ({"tree_output": np.array([0, 1])}, "tree_output must be -1"),
    ({"level_feature": np.array([0, 5, 0])}, "feature out of range"),
    ({"depth": np.array([30, -27])}, "out of range"),
    ({"level_col": np.zeros(3, dtype=np.int32)}, "all present or all absent"),
])
def test_validate_names_the_broken_invariant(changes: dict[str, Any], match: str) -> None:
    with pytest.raises(ValidationError, match=match):
        _broken(**changes).validate()


def test_float32_thresholds_must_be_float32_values() -> None:
    e = two_trees()
    e32 = e.replace(schema=e.schema.with_(input_dtype="float32"), level_threshold=np.array([0.1, 1.0, np.inf]))
    with pytest.raises(ValidationError, match="not a float32 value"):
        e32.validate()


def test_quantization_consistency_is_checked() -> None:
    from lumber.passes.transforms.quantize import quantize_ensemble

    q = quantize_ensemble(two_trees()).validate()
    assert q.quantized
    assert q.border is not None and q.col_nan_bin is not None and q.col_feature is not None
    assert q.col_feature.tolist() == [0, 0, 1]  # x0's levels disagree about NaN: two columns
    with pytest.raises(ValidationError, match="does not match its threshold"):
        q.replace(border=q.border + 0.5).validate()
    with pytest.raises(ValidationError, match="NaN bin"):
        q.replace(col_nan_bin=np.full_like(q.col_nan_bin, 0)).validate()
