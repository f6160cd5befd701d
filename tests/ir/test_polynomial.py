"""The Polynomial IR: semantics of conditions (NaN, float32 rounding), CSR monomials, invariants, storage."""

from __future__ import annotations

import numpy as np
import pytest

from lumber.ir import ConditionKind, ModelFormatError, Polynomial, Schema, Task, ValidationError, default_features
from lumber.ir.polynomial import from_terms
from lumber.ir.serialize import from_bytes, to_bytes

G, M = ConditionKind.GREATER, ConditionKind.MISSING


def schema(n_features: int = 2, n_outputs: int = 1, input_dtype: str = "float64", **kw: object) -> Schema:
    task = Task.MULTICLASS if n_outputs > 1 else Task.REGRESSION
    return Schema(default_features(n_features, [f"x{i}" for i in range(n_features)]), task, n_outputs, (0.0,) * n_outputs, input_dtype=input_dtype, **kw)


def poly(conds: list[tuple[int, int, float, bool]], monomials: list[tuple[list[int], float | list[float]]],
         bias: float | list[float] = 0.0, **kw: object) -> Polynomial:
    """Hand-built polynomial: conditions (feature, kind, threshold, nan_true), monomials (ids, weight)."""
    s = kw.pop("schema", None) or schema(**kw)  # type: ignore[arg-type]
    K = s.n_outputs
    offset = np.cumsum([0] + [len(ids) for ids, _ in monomials])
    return Polynomial(
        schema=s,
        cond_feature=np.array([c[0] for c in conds], dtype=np.int32),
        cond_kind=np.array([c[1] for c in conds], dtype=np.int8),
        cond_threshold=np.array([c[2] for c in conds], dtype=np.float64),
        cond_nan_true=np.array([c[3] for c in conds], dtype=bool),
        mono_offset=offset,
        mono_cond=np.array([i for ids, _ in monomials for i in ids], dtype=np.int32),
        weight=np.array([np.broadcast_to(w, (K,)) for _, w in monomials], dtype=np.float64).reshape(-1, K),
        bias=np.broadcast_to(np.asarray(bias, dtype=np.float64), (K,)).copy(),
    )


# x0 > 0.5 (NaN true), x0 > 2 (NaN false), x1 missing; H = 1 + 2[x0>0.5|nan] - 3[x0>2][x1 nan] + 0.5[x1 nan]
P = poly([(0, G, 0.5, True), (0, G, 2.0, False), (1, M, np.nan, True)],
         [([0], 2.0), ([1, 2], -3.0), ([2], 0.5)], bias=1.0)


def reference(x: np.ndarray) -> float:
    a = np.isnan(x[0]) or x[0] > 0.5
    b = (not np.isnan(x[0])) and x[0] > 2.0
    m = np.isnan(x[1])
    return 1.0 + 2.0 * a - 3.0 * (b and m) + 0.5 * m


def test_evaluate_matches_a_plain_reading_of_the_conditions() -> None:
    P.validate()
    rows = np.array([[0.0, 1.0], [0.5, 1.0], [0.6, np.nan], [2.0, np.nan], [2.5, np.nan], [np.nan, np.nan],
                     [np.nan, 0.0], [np.inf, np.nan], [-np.inf, 3.0]])
    np.testing.assert_array_equal(P.evaluate(rows), [reference(r) for r in rows])
    act = P.active(rows)
    assert act.shape == (len(rows), 3)
    np.testing.assert_allclose(P.support(rows), act.mean(axis=0))
    np.testing.assert_array_equal(P.partial_sum(rows, np.array([1]))[:, 0], -3.0 * act[:, 1])


def test_large_inputs_cross_row_blocks_and_chunks(rng: np.random.Generator) -> None:
    X = rng.uniform(-1, 4, size=(70_000, 2))
    X[rng.random(X.shape) < 0.1] = np.nan
    want = np.array([reference(r) for r in X[:500]])
    got = P.evaluate(X)
    np.testing.assert_array_equal(got[:500], want)
    assert got.shape == (70_000,)


def test_a_row_evaluates_the_same_alone_and_in_any_batch(rng: np.random.Generator) -> None:
    conds = [(f, G, t, False) for f in range(3) for t in (-1.0, 0.0, 0.5, 1.0)]  # condition 4 f + i
    keys = sorted({tuple(sorted(4 * f + int(rng.integers(4)) for f in rng.choice(3, size=rng.integers(1, 4),
                                                                                replace=False))) for _ in range(80)})
    monos = [(list(k), float(rng.normal() * 10.0 ** rng.uniform(-4, 4))) for k in keys]
    p = poly(conds, monos, n_features=3)
    p.validate()
    row = rng.uniform(-2, 2, size=3)
    alone = p.evaluate(row[None, :])[0]
    for n, pos in [(2, 1), (9, 4), (100, 99), (10_000, 5_000)]:
        X = rng.uniform(-2, 2, size=(n, 3))
        X[pos] = row
        assert p.evaluate(X)[pos] == alone


def test_float32_inputs_are_rounded_before_comparing() -> None:
    t = float(np.float32(0.1))  # a float32 value
    p = poly([(0, G, t, False)], [([0], 1.0)], input_dtype="float32", n_features=1)
    just_above = np.nextafter(t, 1.0)  # rounds back to t in float32: the condition fails
    np.testing.assert_array_equal(p.evaluate([[t], [just_above], [0.2]]), [0.0, 0.0, 1.0])
    with pytest.raises(ValidationError, match="not a float32 value"):
        poly([(0, G, 0.1, False)], [([0], 1.0)], input_dtype="float32").validate()


def test_multi_output_shapes() -> None:
    p = poly([(0, G, 0.0, False)], [([0], [1.0, -1.0, 2.0])], bias=[0.5, 0.0, -0.5], n_outputs=3)
    out = p.evaluate([[1.0, 0.0], [-1.0, 0.0]])
    np.testing.assert_array_equal(out, [[1.5, -1.0, 1.5], [0.5, 0.0, -0.5]])
    assert p.predict_proba([[1.0, 0.0]]).shape == (1, 3)


@pytest.mark.parametrize("conds, monos, match", [
    ([(0, G, 1.0, False), (0, G, 0.5, False)], [([0], 1.0)], "sorted"),
    ([(0, G, 1.0, False), (0, G, 1.0, False)], [([0], 1.0)], "sorted"),
    ([(0, G, 1.0, False), (1, G, 1.0, False)], [([1, 0], 1.0)], "increase"),
    ([(0, G, 1.0, False), (0, G, 2.0, False)], [([0, 1], 1.0)], "feature at most once"),
    ([(0, G, 1.0, False)], [([], 1.0)], "at least one condition"),
    ([(0, G, 1.0, False)], [([0], 1.0), ([0], 2.0)], "same conditions"),
    ([(0, G, 1.0, False)], [([3], 1.0)], "out of range"),
    ([(5, G, 1.0, False)], [([0], 1.0)], "feature out of range"),
    ([(0, G, np.inf, False)], [([0], 1.0)], "finite thresholds"),
    ([(0, G, 1.0, False), (0, G, 2.0, True)], [([0], 1.0)], "must not increase"),
    ([(0, G, 1.0, True), (0, M, np.nan, True)], [([0], 1.0)], "MISSING condition"),
    ([(0, M, 1.0, True)], [([0], 1.0)], "threshold NaN"),
    ([(0, G, 1.0, False)], [([0], np.nan)], "finite"),
])
def test_validate_names_the_broken_invariant(conds: list, monos: list, match: str) -> None:
    with pytest.raises(ValidationError, match=match):
        poly(conds, monos).validate()


def test_save_load_is_byte_identical_and_validates(tmp_path) -> None:  # type: ignore[no-untyped-def]
    path = tmp_path / "p.lumber"
    P.save(path)
    q = Polynomial.load(path)
    assert to_bytes(q) == path.read_bytes() == to_bytes(P)
    X = np.array([[0.6, np.nan], [3.0, np.nan]])
    np.testing.assert_array_equal(q.evaluate(X), P.evaluate(X))
    bad = poly([(0, G, 1.0, False)], [([0], 1.0), ([0], 2.0)])
    with pytest.raises(ValidationError, match="same conditions"):
        from_bytes(to_bytes(bad))
    with pytest.raises(ModelFormatError, match="not a lumber IR"):
        from_bytes(b"garbage", "x.lumber")


def test_from_terms_merges_drops_zeros_moves_constant_to_bias_and_sorts() -> None:
    s = schema()
    pad = 3
    ids = np.array([[2, pad], [0, 2], [2, pad], [pad, pad], [1, pad], [0, pad]], dtype=np.int32)
    w = np.array([1.0, 2.0, -1.0, 5.0, 0.0, 4.0])
    p = from_terms(s, np.array([0, 0, 1]), np.array([G, G, G]), np.array([0.0, 1.0, 0.0]), np.zeros(3, bool),
                   ids, w, np.array([1.0]))
    p.validate()
    assert p.bias.tolist() == [6.0]
    assert p.n_conditions == 2  # condition 1 (x0 > 1) had weight 0 only: dropped
    assert [p.describe_monomial(j) for j in range(p.n_monomials)] == ["[4] * [x0 > 0]", "[2] * [x0 > 0] * [x1 > 0]"]


def test_select_keeps_monomials_and_drops_unused_conditions() -> None:
    q = P.select(np.array([True, False, False]))
    q.validate()
    assert q.n_monomials == 1 and q.n_conditions == 1
    assert q.describe_condition(0) == "x0 > 0.5 or missing"
    assert P.select(np.array([], dtype=np.int64)).n_monomials == 0


def test_statistics_and_graph_view() -> None:
    st = P.statistics()
    assert st["monomials_by_degree"] == {1: 2, 2: 1}
    assert st["conditions_per_feature"] == {"x0": 2, "x1": 1}
    assert st["missing_conditions"] == 1 and st["entries"] == 4
    g = P.to_networkx()
    assert g.number_of_nodes() == 6 and g.number_of_edges() == 4
    assert P.describe_condition(2) == "x1 is missing"


def test_nan_input_rejected_when_the_model_rejects_it() -> None:
    from lumber.ir import InputDataError

    p = poly([(0, G, 0.0, False)], [([0], 1.0)], schema=schema(allow_nan=False))
    with pytest.raises(InputDataError, match="NaN"):
        p.evaluate([[np.nan, 0.0]])
