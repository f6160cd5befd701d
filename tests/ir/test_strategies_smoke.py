"""The random-forest strategy yields valid forests whose evaluation agrees with a per-row walk."""

from __future__ import annotations

import numpy as np
from hypothesis import given

from lumber.ir.forest import ZERO_THRESHOLD
from lumber.ir.interp import category_codes
from strategies import boundary_rows, forests


def _walk(forest, x):  # plain per-row reference, independent of the vectorized traversal
    out = np.array(forest.schema.base_score, dtype=forest.schema.accumulate_dtype)
    for t in range(forest.n_trees):
        n = int(forest.tree_offset[t])
        while forest.left[n] >= 0:
            v = x[forest.feature[n]]
            if np.isnan(v) or (forest.missing_zero[n] and abs(v) <= ZERO_THRESHOLD):
                go = forest.missing_left[n]
            elif forest.is_categorical[n]:
                c = int(category_codes(np.array([v]), forest.schema.category_rule)[0])
                if c < 0:
                    go = forest.cat_invalid_left[n]
                else:
                    member = c in set(forest.categories_of(n).tolist())
                    go = member == forest.cat_in_set_left[n]
            else:
                go = v <= forest.threshold[n]
            n = forest.left[n] if go else forest.right[n]
        k = forest.tree_output[t]
        if k >= 0:
            out[k] += forest.value[n, k].astype(out.dtype)
        else:
            out += forest.value[n].astype(out.dtype)
    out = out.astype(np.float64)
    if forest.schema.average:
        from lumber.ir.interp import trees_per_output
        out = out / np.maximum(trees_per_output(forest), 1)
    return out


@given(forests())
def test_vectorized_evaluate_matches_row_walk(forest) -> None:
    forest.validate()
    X = forest.prepare_input(boundary_rows(forest, n_random=8))
    got = forest.evaluate(X).reshape(len(X), -1)
    want = np.stack([_walk(forest, x) for x in X])
    np.testing.assert_array_equal(got, want)
