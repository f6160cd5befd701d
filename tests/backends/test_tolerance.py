"""``lumber.compile_within(model, tolerance, data)``: the cascade library, the forms report, the tolerance
never exceeded on validation rows, and clear errors for bad inputs."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from c_tools import needs_cc

import lumber
from lumber.compiler import tolerance as tolerance_mod
from lumber.ir.cascade import inside_band
from lumber.passes.transforms.cascade import cascade_margins, decision_band
from lumber.ir import CompileError, InputDataError
from lumber.passes.transforms.oblivious_fit import FitOptions
from tests.tolerance_helpers import forest_only

pytestmark = needs_cc
FIT = FitOptions(depth=6, max_trees=60, patience=20, time_budget=30.0)


@pytest.fixture(scope="module")
def adult() -> dict:
    """LightGBM 40 x 8 on 6000 Adult rows with its native categorical splits; train / valid / test."""
    import lightgbm as lgb

    d = lumber.datasets.load("adult")
    cats = [i for i, f in enumerate(d.features) if f.kind.name == "CATEGORICAL"]
    rng = np.random.default_rng(0)
    idx = rng.permutation(len(d.y))[:6000]
    X, y = d.X.to_numpy(dtype=np.float64)[idx], np.asarray(d.y)[idx]
    X[rng.random(X.shape) < 0.02] = np.nan  # missing values on every path
    bst = lgb.train({"objective": "binary", "num_leaves": 8, "learning_rate": 0.2, "verbose": -1, "num_threads": 1,
                     "seed": 0, "max_cat_to_onehot": 1, "min_data_per_group": 5},
                    lgb.Dataset(X[:3000], y[:3000], categorical_feature=cats), 40)
    return {"bst": bst, "forest": lumber.load(bst), "train": (X[:3000], y[:3000]), "valid": (X[3000:4500], y[3000:4500]),
            "test": (X[4500:], y[4500:])}


def _slow_exact(real):  # type: ignore[no-untyped-def]
    """``timed`` with the exact forms 10 s slower: forces a tolerance form (timings are not evidence in tests)."""
    return lambda runners, X: {k: v + (10.0 if k.startswith("exact") else 0.0) for k, v in real(runners, X).items()}


@pytest.fixture(scope="module")
def cascade(adult: dict, tmp_path_factory: pytest.TempPathFactory) -> tuple:
    """``lumber.compile`` with a tolerance where a cascade is chosen; (predictor, path, tolerance)."""
    tol = 0.002
    path = tmp_path_factory.mktemp("cascade") / "c.so"
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(tolerance_mod, "timed", _slow_exact(tolerance_mod.timed))
        mp.setattr(tolerance_mod, "compile_fastest", forest_only)
        pred = lumber.compile_within(adult["forest"], tol, {"train": adult["train"], "valid": adult["valid"]},
                                     path=path, fit=FIT)
    return pred, path, tol


def _forms_ok(report: dict, tol: float) -> None:
    for name, f in report["forms"].items():
        for k in ("loss", "exact_share", "max_abs_margin_change", "mean_abs_margin_change", "ns_per_row", "within"):
            assert k in f, (name, k)
        need = report.get("agreement_target", 1.0)
        assert f["loss_bound"] >= 0.0 if f["kind"] == "exact" else "loss_bound" in f
        assert f["within"] == (max(f["loss"], f["loss_bound"]) <= tol + 1e-15
                               and (f["agreement"] is None or f["agreement"] >= need))
    assert report["forms"][report["chosen"]]["within"]


def test_an_agreement_below_one_narrows_the_band_and_holds_on_validation_rows(adult: dict, cascade: tuple) -> None:
    """``agreement=0.99``: every cascade's band is at most the band that keeps every validation decision, fewer
    rows take the exact path, and the written library decides as the source on at least 99% of validation rows."""
    full = cascade[0].report["tolerance"]
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(tolerance_mod, "timed", _slow_exact(tolerance_mod.timed))
        mp.setattr(tolerance_mod, "compile_fastest", forest_only)
        pred = lumber.compile_within(adult["forest"], cascade[2], {"train": adult["train"], "valid": adult["valid"]},
                                     agreement=0.99, fit=FIT)
    rep = pred.report["tolerance"]
    assert rep["agreement_target"] == 0.99
    _forms_ok(rep, cascade[2])
    for name, f in rep["forms"].items():
        if f["kind"] == "tolerance":
            (lo, hi), (full_lo, full_hi) = f["band"], full["forms"][name]["band"]
            assert full_lo <= lo <= 0.0 <= hi <= full_hi and f["exact_share"] <= full["forms"][name]["exact_share"]
            assert f["agreement"] >= 0.99
    assert any(f["exact_share"] < full["forms"][k]["exact_share"] for k, f in rep["forms"].items()
               if f["kind"] == "tolerance")
    Xv = adult["valid"][0]
    assert np.mean(pred.predict(Xv) == adult["forest"].predict(Xv)) >= 0.99
    assert "agreement >= 0.99" in tolerance_mod.describe_tolerance(pred.report)


def test_the_report_lists_every_form_and_the_chosen_one_is_within(adult: dict, cascade: tuple) -> None:
    """Exact forms (forest, tables) and several tolerance forms are scored on validation rows: loss,
    agreement, exact-path share, |margin change|, speed; the chosen form is within the tolerance."""
    pred, _, tol = cascade
    rep = pred.report["tolerance"]
    assert any(f["kind"] == "exact" for f in rep["forms"].values())
    assert sum(f["kind"] == "tolerance" for f in rep["forms"].values()) >= 2
    assert rep["chosen"].startswith("cascade")
    _forms_ok(rep, tol)
    assert rep["fit"]["trees_grown"] >= 1 and rep["metric"] == "auc"


def test_the_cascade_library_decides_as_the_source_on_validation_rows(adult: dict, cascade: tuple) -> None:
    """The written library (tables + exact forest + wrapper in one .so) loads against the model; its
    decisions equal the source's on every validation row; rows whose margin differs lie outside the band
    (inside it the forest answers exactly); single-row, transformed and batch entry points agree; the
    validation loss recomputed from the library is within the tolerance."""
    from lumber.passes.quality import auc

    _, path, tol = cascade
    lib = lumber.load_compiled(path, adult["forest"])
    meta = lib.library.metadata
    assert meta["form"] == "cascade"
    lo, hi = meta["cascade"]["band"]
    Xv, yv = adult["valid"]
    ev = adult["forest"].evaluate(Xv)
    got = lib.predict_raw(Xv)
    assert np.array_equal(lib.predict(Xv), adult["forest"].predict(Xv))
    moved = np.abs(got - ev) > 1e-12 * (1 + np.abs(ev))
    assert moved.any() and ((got[moved] < lo) | (got[moved] > hi)).all()
    assert auc(yv == 1, ev) - auc(yv == 1, got) <= tol
    np.testing.assert_allclose(lib.library.predict_transformed(np.ascontiguousarray(Xv))[:, 0],
                               1 / (1 + np.exp(-got)), rtol=1e-12)
    rows = np.concatenate([np.flatnonzero(moved)[:20], np.flatnonzero(~moved)[:20]])
    for i in rows:
        np.testing.assert_array_equal(lib.predict_row(Xv[i]), [got[i]])
    f = meta["cascade"]["quality"]
    assert f["agreement"] == 1.0 and f["loss"] <= tol
    assert np.isclose(f["max_abs_margin_change"], np.abs(got - ev).max())
    Xt = adult["test"][0]  # rows neither fitted nor used for the band: near-equal decisions
    assert np.mean(lib.predict(Xt) == adult["forest"].predict(Xt)) > 0.99


def test_the_loss_bound_is_a_paired_bootstrap_quantile_that_narrows_with_more_rows() -> None:
    """``loss_bound``: 0 for the source's own margins; for a lossy scoring at least near its point loss and above
    it at 95%; the bound's excess over the loss shrinks as validation rows grow (the spread of a paired AUC
    difference falls like 1/sqrt(n)); the same seed gives the same bound; resamples keep each class's count
    (a validation set with 3 positives still has an AUC in every resample)."""
    from lumber.ir.schema import Feature, PostTransform, Schema, Task
    from lumber.passes.quality import make_metric

    schema = Schema((Feature("x"),), Task.BINARY, 1, (0.0,), PostTransform.SIGMOID)
    rng = np.random.default_rng(0)

    def case(n: int) -> tuple:
        e = rng.normal(0, 2, n)
        y = (rng.random(n) < 1 / (1 + np.exp(-e))).astype(int)
        return make_metric("auto", schema, y), e, e + rng.normal(0, 0.5, n)

    m, e, g = case(1000)
    assert tolerance_mod.loss_bound(m, e, e) == 0.0
    loss = m(e) - m(g)
    small = tolerance_mod.loss_bound(m, e, g)
    assert small > loss and small == tolerance_mod.loss_bound(m, e, g)
    m4, e4, g4 = case(16000)
    assert tolerance_mod.loss_bound(m4, e4, g4) - (m4(e4) - m4(g4)) < 0.5 * (small - loss)
    y = np.zeros(40, dtype=int)
    y[:3] = 1
    few = make_metric("auc", schema, y)
    assert np.isfinite(tolerance_mod.loss_bound(few, np.linspace(-1, 1, 40), np.linspace(1, -1, 40)))


def test_tree_sizes_offer_short_prefixes_of_long_fits() -> None:
    """A quarter, half and all of the formula-5 optimum, plus 64 and 128 trees when the optimum is longer."""
    assert tolerance_mod.tree_sizes(1000) == [64, 128, 250, 500, 1000]
    assert tolerance_mod.tree_sizes(100) == [25, 50, 64, 100]
    assert tolerance_mod.tree_sizes(60) == [15, 30, 60]
    assert tolerance_mod.tree_sizes(1) == [1] and tolerance_mod.tree_sizes(0) == []


def test_decision_band_covers_every_disagreement() -> None:
    a = np.array([-2.0, -0.3, 0.1, 0.2, 1.0, 3.0])
    e = np.array([-1.5, 0.2, -0.1, 0.4, 0.9, 2.0])
    lo, hi = decision_band(a, e)
    # row 1 (a = -0.3) and row 2 (a = 0.1) disagree: each side reaches its own farthest one, 1.25x
    assert lo == pytest.approx(-0.375) and hi == pytest.approx(0.125)
    got, share = cascade_margins(a, lambda R: e[inside_band(a, (lo, hi))], np.arange(6), (lo, hi))
    assert np.array_equal(got > 0, e > 0) and share == pytest.approx(2 / 6)
    assert max(-decision_band(e, e)[0], decision_band(e, e)[1]) < 1e-9  # no disagreement: nothing needs the forest


def test_decision_band_with_an_agreement_below_one_leaves_the_farthest_disagreements_out() -> None:
    rng = np.random.default_rng(0)
    e = rng.normal(0, 3, 2000)
    a = e + rng.normal(0, 0.3, 2000)
    a[:2] = 5.0 * np.where(e[:2] > 0, -1.0, 1.0)  # two rows far on the wrong side
    full = decision_band(a, e)
    assert max(-full[0], full[1]) == pytest.approx(5.0 * 1.25, rel=1e-9)
    width = lambda b: b[1] - b[0]  # noqa: E731
    for agreement in (0.999, 0.995):
        b = decision_band(a, e, agreement=agreement)
        got, share = cascade_margins(a, lambda R: e[inside_band(a, b)], np.arange(2000), b)
        assert np.mean((got > 0) == (e > 0)) >= agreement
        assert full[0] <= b[0] <= 0 <= b[1] <= full[1] and width(b) < width(full) / 2 and share < 0.5
    assert decision_band(a, e, agreement=0.9994) != decision_band(a, e, agreement=0.999)  # 1.2 rows: one spare


@given(st.integers(0, 10_000), st.sampled_from([1.0, 0.999, 0.99, 0.95]), st.booleans())
@settings(max_examples=40, deadline=None)
def test_decision_band_is_the_narrowest_keeping_the_agreement(seed: int, agreement: float, ge: bool) -> None:
    """Brute force over every split of the spare rows between the two sides: no band that keeps the
    agreement holds fewer rows; inside it the forest answers, so agreement >= the stated share."""
    from lumber.passes.transforms.cascade import BAND_SAFETY

    rng = np.random.default_rng(seed)
    n = int(rng.integers(20, 400))
    e = rng.normal(0, 2, n)
    a = e + rng.standard_t(3, n) * rng.uniform(0.05, 1.0)
    lo, hi = decision_band(a, e, ge=ge, agreement=agreement)
    got = np.where(inside_band(a, (lo, hi)), e, a)
    decide = (lambda m: m >= 0) if ge else (lambda m: m > 0)
    assert np.mean(decide(got) == decide(e)) >= agreement
    differ = decide(a) != decide(e)
    ups, downs = np.sort(a[differ & (a > 0)])[::-1], np.sort(-a[differ & (a <= 0)])[::-1]
    spare = int(np.floor((1 - agreement) * n + 1e-9))
    fewest = min(int(np.sum((a >= -BAND_SAFETY * (downs[spare - k] if spare - k < len(downs) else 0.0))
                            & (a <= BAND_SAFETY * (ups[k] if k < len(ups) else 0.0))))
                 for k in range(spare + 1))
    assert int(inside_band(a, (lo, hi)).sum()) == fewest


def test_regressor_tolerance_is_a_relative_rmse_rise(monkeypatch: pytest.MonkeyPatch) -> None:
    """A regressor's tolerance forms are tables alone (no decision to protect); the chosen one's RMSE on the
    validation rows rises by at most the tolerance."""
    from sklearn.ensemble import GradientBoostingRegressor

    rng = np.random.default_rng(1)
    X = rng.normal(size=(2400, 5))
    y = X[:, 0] * X[:, 1] + np.sin(2 * X[:, 2]) + 0.1 * rng.normal(size=2400)
    m = GradientBoostingRegressor(n_estimators=40, max_depth=3, random_state=0).fit(X[:1200], y[:1200])
    monkeypatch.setattr(tolerance_mod, "timed", _slow_exact(tolerance_mod.timed))

    monkeypatch.setattr(tolerance_mod, "compile_fastest", forest_only)
    tol = 0.05
    pred = lumber.compile_within(m, tol, {"train": (X[:1200], y[:1200]), "valid": (X[1200:1800], y[1200:1800])},
                                 fit=FIT)
    rep = pred.report["tolerance"]
    assert rep["metric"] == "rmse" and rep["chosen"].startswith("tables")
    f = rep["forms"][rep["chosen"]]
    assert f["band"] is None and f["exact_share"] == 0.0 and f["agreement"] is None
    assert pred.library.metadata["form"] == "tolerance-tables"
    Xv, yv = X[1200:1800], y[1200:1800]
    rmse = lambda p: float(np.sqrt(np.mean((p - yv) ** 2)))  # noqa: E731
    assert rmse(pred.predict_raw(Xv)) <= rmse(m.predict(Xv)) * (1 + tol) + 1e-12


@pytest.mark.slow
def test_the_full_search_keeps_a_form_within_the_tolerance(adult: dict, tmp_path) -> None:  # type: ignore[no-untyped-def]
    """The real search (forest, value walk and exact tables beside the tolerance forms, timed): whatever
    wins, its validation loss recomputed from the written file is within the tolerance."""
    from lumber.passes.quality import auc

    tol = 0.002
    path = tmp_path / "m.so"
    pred = lumber.compile_within(adult["bst"], tol, {"train": adult["train"], "valid": adult["valid"]}, path=path,
                                 fit=FIT)
    rep = pred.report["tolerance"]
    assert {"forest", "oblivious"} <= set(rep["exact"]["forms"])
    _forms_ok(rep, tol)
    Xv, yv = adult["valid"]
    ev = adult["bst"].predict(Xv, raw_score=True)
    got = lumber.load_compiled(path, adult["bst"]).predict_raw(Xv)
    assert auc(yv == 1, ev) - auc(yv == 1, got) <= tol
    assert np.array_equal(got > 0, ev > 0)


def test_bad_tolerance_inputs_give_clear_errors(adult: dict) -> None:
    bst, train, valid = adult["bst"], adult["train"], adult["valid"]
    with pytest.raises(CompileError, match=r"data=\{'train'"):
        lumber.compile_within(bst, 0.001, None)  # type: ignore[arg-type]
    with pytest.raises(CompileError, match=r"data\['valid'\]"):
        lumber.compile_within(bst, 0.001, {"train": train})
    with pytest.raises(CompileError, match="no labels"):
        lumber.compile_within(bst, 0.001, {"train": train, "valid": (valid[0], None)})
    with pytest.raises(InputDataError, match="labels"):
        lumber.compile_within(bst, 0.001, {"train": train, "valid": (valid[0], valid[1][:9])})
    with pytest.raises(CompileError, match=">= 0"):
        lumber.compile_within(bst, -1.0, {"train": train, "valid": valid})
    for bad in (0.0, 1.5, "most"):
        with pytest.raises(CompileError, match="agreement must be"):
            lumber.compile_within(bst, 0.01, {"train": train, "valid": valid}, agreement=bad)  # type: ignore[arg-type]
    with pytest.raises(CompileError, match="fit must be a FitOptions, not dict"):
        lumber.compile_within(bst, 0.01, {"train": train, "valid": valid}, fit={"trees": 3})  # type: ignore[arg-type]
    with pytest.raises(CompileError, match="take lumber.FastestOptions, not TableCOptions"):
        lumber.compile_within(bst, 0.01, {"train": train, "valid": valid}, options=lumber.TableCOptions())


def test_multiclass_models_are_refused_with_tolerance() -> None:
    from sklearn.ensemble import GradientBoostingClassifier

    rng = np.random.default_rng(0)
    X = rng.normal(size=(300, 3))
    y = rng.integers(0, 3, 300)
    m = GradientBoostingClassifier(n_estimators=3, max_depth=2).fit(X, y)
    with pytest.raises(CompileError, match="binary classifiers and regressors"):
        lumber.compile_within(m, 0.01, {"train": (X, y), "valid": (X, y)})


def test_the_exact_tables_can_be_left_out_of_the_speed_search() -> None:
    """``skip_tables`` (the tolerance search sets it past EXACT_TABLES_MAX_LEAVES source leaves): the
    oblivious form is reported as not tried, with the reason, and the forest form is kept."""
    from sklearn.ensemble import GradientBoostingRegressor

    from lumber.compiler.speed import compile_fastest

    rng = np.random.default_rng(2)
    X = rng.normal(size=(200, 3))
    forest = lumber.load(GradientBoostingRegressor(n_estimators=3, max_depth=2).fit(X, X[:, 0]))
    pred = compile_fastest(forest, lumber.FastestOptions(walk="values"), skip_tables="too many leaves here", sample=X)
    assert pred.report["forms"]["oblivious"]["status"] == "not tried: too many leaves here"
    assert pred.report["chosen"] == "forest"
    np.testing.assert_allclose(pred.predict_raw(X), forest.evaluate(X), rtol=1e-12)
    assert tolerance_mod.EXACT_TABLES_MAX_LEAVES > 0


class _Form:
    """A stand-in for a scored prefix: its within flag, and the seconds ``timed`` reports for it."""

    def __init__(self, T: int, within: bool, loss: float = 0.001) -> None:
        self.T, self.within, self.loss, self.bound = T, within, loss, loss

    def run(self, X):  # type: ignore[no-untyped-def]
        return ("form", self.T)

    def tables(self, X):  # type: ignore[no-untyped-def]
        return ("tables", self.T)


def _stopper(monkeypatch: pytest.MonkeyPatch, within: dict, form_s: dict, tables_s: dict, exact_s: float,  # type: ignore[no-untyped-def]
             loss: dict | None = None):
    """A PrefixStop whose prefixes and timings are scripted per tree count (timings are not evidence in tests)."""
    def fake_timed(runners, X):  # type: ignore[no-untyped-def]
        out = {}
        for k, fn in runners.items():
            tag = fn(X)
            out[k] = exact_s if tag == "exact" else (form_s if tag[0] == "form" else tables_s)[tag[1]]
        return out

    monkeypatch.setattr(tolerance_mod, "timed", fake_timed)
    monkeypatch.setattr(tolerance_mod, "score_prefix",
                        lambda ens, *a, **k: _Form(ens, within[ens], (loss or {}).get(ens, 0.001)))
    fit = type("Fit", (), {"ensemble": lambda self, T: T})()
    stop = tolerance_mod.PrefixStop(np.zeros((3, 1)), np.zeros(3), None, None, exact=lambda X: "exact",
                                    classifier=True, ge=False, need=1.0, tol=0.001)
    return stop, fit


def test_the_fit_stops_once_longer_prefixes_cannot_be_faster(monkeypatch: pytest.MonkeyPatch) -> None:
    """Checkpoints at 64, 128, 256, ...: the fit goes on while a prefix is faster; it stops after two
    checkpoints without a faster form within the tolerance, or as soon as the next checkpoint's tables alone
    (extrapolated per tree) would be no faster than the best form. Other tree counts never stop it."""
    within = {64: True, 128: True, 256: True, 512: True, 1024: True}
    # credit-like: the exact path dominates; 128 is the fastest, then longer prefixes are slower
    form_s = {64: 0.62, 128: 0.60, 256: 0.64, 512: 0.72, 1024: 0.9}
    tables_s = {64: 0.08, 128: 0.11, 256: 0.17, 512: 0.29, 1024: 0.5}
    stop, fit = _stopper(monkeypatch, within, form_s, tables_s, exact_s=2.0)
    assert all(stop(T, fit) is None for T in (1, 63, 65, 100, 127, 192))
    assert stop(64, fit) is None and stop(128, fit) is None and stop(256, fit) is None
    why = stop(512, fit)
    assert why is not None and "2 checkpoints without a faster form (best: 128 trees)" in why
    assert [c["trees"] for c in stop.log] == [64, 128, 256, 512]
    assert [c["faster"] for c in stop.log] == [True, True, False, False]
    # regressor-like: the tables are the form; the next checkpoint's tables are slower than the best at once
    stop, fit = _stopper(monkeypatch, {64: False, 128: True, 256: True}, {64: 0.12, 128: 0.18, 256: 0.3},
                         {64: 0.12, 128: 0.18, 256: 0.3}, exact_s=2.0)
    assert stop(64, fit) is None
    why = stop(128, fit)
    assert why is not None and "tables of 256 trees alone would be no faster" in why
    # a prefix over the tolerance is never the best, however fast
    stop, fit = _stopper(monkeypatch, {64: False, 128: False, 256: False}, {64: 0.1, 128: 0.1, 256: 0.1},
                         {64: 0.01, 128: 0.02, 256: 0.03}, exact_s=2.0)
    assert stop(64, fit) is None and stop(128, fit) is None  # the first has no loss before it: it may close in
    assert stop(256, fit) is not None
    assert not any(c["faster"] for c in stop.log)
    # ...but while its loss still falls it may reach the tolerance: the fit goes on, until the tables alone
    # of the next checkpoint would be no faster than the exact form
    stop, fit = _stopper(monkeypatch, {64: False, 128: False, 256: False, 512: False},
                         {64: 0.5, 128: 0.6, 256: 0.8, 512: 1.2}, {64: 0.2, 128: 0.4, 256: 0.8, 512: 1.6}, exact_s=2.0,
                         loss={64: 0.004, 128: 0.002, 256: 0.0015, 512: 0.0012})
    assert stop(64, fit) is None and stop(128, fit) is None and stop(256, fit) is None
    why = stop(512, fit)
    assert why is not None and "tables of 1024 trees alone would be no faster than the best form (exact)" in why
    assert [c["closing"] for c in stop.log] == [True, True, True, True]


def test_a_stopped_fit_grows_the_same_trees(adult: dict) -> None:
    """A checkpoint only cuts the sequence short: the trees grown are those of the unstopped fit."""
    from lumber.passes.transforms.oblivious_fit import fit_oblivious

    opts = FitOptions(depth=4, max_trees=12, patience=50, time_budget=30.0)
    X = adult["train"][0][:1500]
    full = fit_oblivious(adult["forest"], X, opts)
    cut = fit_oblivious(adult["forest"], X, opts, checkpoint=lambda T, fit: "enough" if T == 5 else None)
    assert cut.report["stop"] == "enough" and len(cut.levels) == 5 and len(full.levels) == 12
    assert cut.levels == full.levels[:5]
    assert all(np.array_equal(a, b) for a, b in zip(cut.tables, full.tables))
    Xv = adult["valid"][0]
    assert np.array_equal(cut.ensemble(5).evaluate(Xv), full.ensemble(5).evaluate(Xv))
