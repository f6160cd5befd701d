"""Golden texts of the one printer every explainer and report uses (``lumber.ir.display``).

Thresholds print as the shortest decimal that splits the feature's domain as
the model's threshold does; moved values as the shortest decimal in the same
model cell, in the domain, no farther from the case's value; a case's own
values exactly; category codes as labels.
"""

from __future__ import annotations

import numpy as np

from builders import make_forest
from lumber.ir import Feature, FeatureKind, PostTransform, Task
from lumber.ir.display import Display, number_text, shortest_in
from lumber.ir.domains import infer_domains


def _forest():
    feats = [Feature("Age"), Feature("CapitalGain"), Feature("Job", FeatureKind.CATEGORICAL, ("clerk", "nurse", "pilot")),
             Feature("Score")]
    trees = [("Age", 20.500000000000004, ("CapitalGain", 1e-35, -1.0, ("Score", 0.5460000000000002, 0.5, 1.0)),
              ("CapitalGain", 5036.5, 0.2, ("Score", 7.25, 0.1, 0.3)))]
    return make_forest(trees, feats, task=Task.BINARY, post_transform=PostTransform.SIGMOID)


def test_number_text_is_the_shortest_round_trip() -> None:
    assert [number_text(v) for v in (0.0, 1.0, 20.5, 1e-35, 5036.500000000001, -3.0, float("inf"))] == [
        "0", "1", "20.5", "1e-35", "5036.500000000001", "-3", "inf"]


def test_shortest_decimal_between_two_domain_values() -> None:
    assert shortest_in(20.0, 21.0, closed_low=False) == 20.5
    assert shortest_in(0.0, 1.0, closed_low=False) == 0.5
    assert shortest_in(0.0, 100.0, closed_low=False) == 50.0
    assert shortest_in(2.5, 2.5000000000000004, closed_low=True) == 2.5


def test_thresholds_on_whole_number_features() -> None:
    f = _forest()
    ref = np.array([[17.0, 0.0, 0.0, 0.1], [90.0, 99999.0, 2.0, 0.9]])
    d = Display(f, infer_domains(f.schema, None, ref))
    assert d.threshold(0, 20.500000000000004) == "20.5"
    assert d.threshold(1, 1e-35) == "0.5"
    assert d.threshold(1, 5036.5) == "5036.5"
    assert d.threshold(3, 0.5460000000000002) == "0.546"  # continuous: the shortest decimal of the same cells


def test_thresholds_without_domains_print_the_shortest_decimal_of_the_same_cells() -> None:
    """No reference rows, no constraint file: a float threshold prints as the shortest decimal within 1e-4
    of it that stays between the neighbouring cuts; LightGBM's zero band as 0; short thresholds as they are."""
    d = Display(_forest())
    assert d.threshold(0, 20.500000000000004) == "20.5"
    assert d.threshold(1, 1e-35) == "0"                 # LightGBM's "is zero" split, not 1.0000000180025095e-35
    assert d.threshold(1, 5036.5) == "5036.5"           # already short: kept
    assert d.threshold(3, 7.25) == "7.25"
    assert d.threshold(3, 0.5460000000000002) == "0.546"


def test_a_shortened_threshold_never_reaches_the_neighbouring_cuts() -> None:
    feats = [Feature("a")]
    t, near = 0.4982340186834336, 0.49823403
    f = make_forest([("a", t, ("a", near, 0.0, 1.0), 2.0)], feats, task=Task.BINARY,
                    post_transform=PostTransform.SIGMOID)
    d = Display(f)
    mid = t + (near - t) / 2
    c_t, c_near = float(d.threshold(0, t)), float(d.threshold(0, near))
    # each printed number splits the model's cuts as its threshold does, nearer it than half-way to the other
    assert abs(c_t - t) <= 1e-4 * t and c_t < mid
    assert abs(c_near - near) <= 1e-4 * near and c_near > mid
    assert len(d.threshold(0, t)) < len(repr(t))
    assert Display(make_forest([("a", t, 0.0, 1.0)], feats, task=Task.BINARY,
                               post_transform=PostTransform.SIGMOID)).threshold(0, t) == "0.4982"


def test_float32_thresholds_shorten_too() -> None:
    t = float(np.float32(0.4982340186834336))
    f = make_forest([("a", t, 0.0, 1.0)], [Feature("a")], task=Task.BINARY, post_transform=PostTransform.SIGMOID,
                    input_dtype="float32")
    assert Display(f).threshold(0, t) == "0.4982"


def test_moved_values_shortest_in_the_same_cell_and_no_farther() -> None:
    d = Display(_forest())
    # the solver's 5036.500000000001 is the first float64 above the split 5036.5: nothing shorter lies between
    # the case and it, so the shortest decimal of its cell at most 1e-4 of the change past it is printed
    assert d.value(1, 5036.500000000001, 0.0) == "5037"
    assert d.value(0, 20.500000000000007, 0.0) == "20.501"             # 0.001 past: 5e-5 of the change
    # inside a wide cell (5036.5, inf) a shorter value nearer the case exists
    assert d.value(1, 6000.123456, 0.0) == "6000"
    assert d.value(3, 7.250000000000001, 8.0) == "7.3"                 # (7.25, inf): 7.3 is nearer 8
    assert d.value(3, 7.250000000000001, 0.0) == "7.2501"              # from 0: 7.25 is in the other cell
    assert d.value(3, 7.2499999, 8.0) == "7.25"                        # x <= 7.25 holds at 7.25 itself
    assert d.value(3, 0.61234, 0.2) == "0.6"                           # (0.546, 7.25]: 0.6 is nearer 0.2
    assert d.value(1, 0.3, 0.0) == "0.3"                               # already as short as can be
    assert d.value(1, 0.37, 0.0) == "0.3"                              # (1e-35, 5036.5]: 0.3 stays in the cell
    assert d.value(1, 0.3) == "0.3"                                    # a case's own value: as it is


def test_category_codes_print_as_labels() -> None:
    d = Display(_forest())
    assert d.value(2, 1.0) == "nurse" and d.value(2, 2.0, 1.0) == "pilot"
    assert d.label(0, 3.0) is None
