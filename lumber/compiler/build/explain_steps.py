"""Build steps that explain: attribution, per-case analyses, regional rules, plausibility scores.

Each analysis is one cached step calling lumber's public API (through the
batch runner for per-case work, so one failing case is recorded, not fatal).
Results are kept as the JSON the APIs' ``to_dict`` methods give; the report
document is assembled from them in :mod:`lumber.compiler.build.document`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from dataclasses import replace

from lumber.compiler.explain import ExplanationRequest, explanation_request
from lumber.compiler.explain.request import with_decision_rule
from lumber.ir import Constraints, Cutoff, FeatureKind, InputDataError, LumberError, Target, Task
from lumber.ir.decision import check_cutoff, margin_decisions
from lumber.ir.display import Display
from lumber.ir.domains import domains_for
from lumber.passes.analyses.contributions import contributions as _contributions
from lumber.passes.analyses.reasons import principal_reasons
import lumber
from lumber.compiler.api.batch import Task as BatchTask, run_task
from lumber.passes.analyses.rules import coverage

from .cache import digest
from .compile_steps import State, _plain


def _request(st: State) -> ExplanationRequest:
    """The model, the constraint file and the target every analysis aims at (the constraint file's,
    else the build file's), resolved once; the decision rule is ``[explain] threshold`` when set."""
    t = st.inp.config.explain.target
    if not (isinstance(t, tuple) or st.inp.forest.schema.task == Task.REGRESSION):
        t = _class_label(st, t)
    return explanation_request(st.inp.forest, constraints=decision_constraints(st), target=t)


def decision_constraints(st: State) -> Constraints | None:
    """The constraints every analysis receives: with ``[explain] threshold``, their target (the constraint
    file's class, else ``[explain] target``, else any other class) is judged by that cutoff on P(class 1).
    A constraint file's own threshold target must agree with it."""
    cons, thr = st.inp.constraints, st.inp.config.explain.threshold
    if thr is None:
        return cons
    try:
        cutoff = Cutoff(float(thr))
    except ValueError as exc:
        raise InputDataError(f"[explain] threshold: {exc}", "give a probability such as 0.3") from None
    stated = cons.target if cons is not None else None
    if stated is not None and stated.cutoff is not None:
        if stated.cutoff != cutoff:
            raise InputDataError(f"[explain] threshold {thr:g} contradicts the constraint file's target "
                                 f"({stated.describe()})", "give the threshold in one place")
        return cons
    t = st.inp.config.explain.target
    label = (stated.interval or stated.label) if stated is not None else _class_label(st, t)
    target = Target(label=label, cutoff=cutoff)
    check_cutoff(st.inp.forest.schema, cutoff)
    return replace(cons if cons is not None else Constraints(), target=target)


def decision_forest(st: State) -> Any:
    """The model deciding by the build's rule (``[explain] threshold``, or a threshold target)."""
    cons = decision_constraints(st)
    return with_decision_rule(st.inp.forest, cons.target if cons is not None else None)


def _target(st: State) -> Any:
    return _request(st).target


def _class_label(st: State, t: Any) -> Any:
    """A TOML value as the model's class label (``"1"`` -> 1 when the classes are numbers)."""
    classes = st.inp.forest.schema.classes
    if t is None or classes is None:
        return t
    for c in classes:
        if c == t or str(c) == str(t):
            return c
    return t


def _error(exc: BaseException) -> dict[str, str]:
    msg = exc.diagnostics[0].message if isinstance(exc, LumberError) else str(exc)
    return {"type": type(exc).__name__, "message": msg or repr(exc)}


def _analysis_key(st: State, name: str, **extra: Any) -> str:
    inp, cfg = st.inp, st.inp.config
    ex = cfg.explain
    return digest(name, inp.hashes["model"], inp.hashes.get("cases"), inp.hashes.get("train"),
                  inp.hashes.get("validation"), inp.hashes.get("constraints"), cfg.data.max_cases, cfg.seed,
                  ex.norm, ex.scale, ex.time_limit, ex.target, ex.threshold, ex.pi, ex.pi_c, ex.samples, extra,
                  *(() if cfg.data.header else ("no-header",)))


def attribution(st: State) -> None:
    """MonoForest nu(k) over the training rows (else validation, else cases)."""
    inp = st.inp
    rows = inp.reference or inp.table("cases")
    if rows is None:
        st.results["attribution"] = {"error": {"type": "InputDataError", "message": "no data rows to average over"}}
        return

    def compute(files: Path) -> dict[str, Any]:
        try:
            res = lumber.attribution(inp.forest, rows.X)
        except LumberError as exc:
            return {"error": _error(exc)}
        d: dict[str, Any] = res.to_dict(top_conditions=10)
        d["data"] = role
        return _plain(d)

    role = next(r for r in ("train", "validation", "cases") if inp.table(r) is rows)
    key = digest("attribution", inp.hashes["model"], role, inp.hashes.get(role), st.inp.config.data.max_cases,
                 *(() if st.inp.config.data.header else ("no-header",)))
    st.results["attribution"] = st.step("attribution", key, compute).result


def per_case(st: State) -> None:
    """Sensitive tests, counterfactuals and local rules of every case (each a cached step)."""
    inp, cfg = st.inp, st.inp.config
    cases = inp.table("cases")
    if cases is None:
        return
    ex = cfg.explain
    ref = inp.reference
    # without training or validation rows the cases give the domains and statistics, as in `lumber explain`
    # (with none, a whole-dollar CapitalGain was changed to 1e-35)
    R = ref.X if ref is not None else cases.X
    scale = None if ex.scale == "none" else ex.scale
    options: dict[str, dict[str, Any]] = {
        "sensitive": {"norm": "l2" if ex.norm == "l0" else ex.norm, "scale": scale,  # sensitive tests have no l0
                      "time_limit": ex.time_limit},
        "counterfactual": {"norm": ex.norm, "scale": scale, "time_limit": ex.time_limit, "seed": cfg.seed},
        "rules": {"pi": ex.pi, "pi_c": ex.pi_c, "n_samples": ex.samples, "seed": cfg.seed},
    }
    for analysis in ("sensitive", "counterfactual", "rules"):
        if analysis not in ex.analyses:
            continue
        if analysis == "rules" and inp.table("train") is None:
            continue
        reference = inp.table("train").X if analysis == "rules" else R  # type: ignore[union-attr]
        task = BatchTask(analysis, inp.forest, _target(st), decision_constraints(st), reference, options[analysis])

        def compute(files: Path, task: BatchTask = task) -> dict[str, Any]:
            res = run_task(task, cases.X, n_jobs=ex.jobs, progress=st.progress)
            return {"records": _plain(res.records)}

        st.results[analysis] = st.step(analysis, _analysis_key(st, analysis), compute).result["records"]


BACKGROUND_ROWS = 100
"""Training rows (sampled by the build's seed) the per-case contributions are measured against."""


def reasons(st: State) -> None:
    """Each case's principal reasons (``[explain] reasons`` per case), from its exact per-row contributions
    against a sample of the training rows (else the model's node covers)."""
    inp, cfg = st.inp, st.inp.config
    cases = inp.table("cases")
    if cases is None or inp.forest.schema.task.name == "ANOMALY":
        return
    train = inp.table("train")
    R = None
    if train is not None:
        R = train.X
        if len(R) > BACKGROUND_ROWS:
            R = R[np.sort(np.random.default_rng(cfg.seed).choice(len(R), size=BACKGROUND_ROWS, replace=False))]

    def compute(files: Path) -> dict[str, Any]:
        forest = decision_forest(st)
        try:
            c = _contributions(forest, cases.X, R)
        except LumberError as exc:
            return {"error": _error(exc)}
        shown = Display(forest, domains_for(forest, inp.constraints, train.X if train is not None else cases.X))
        decided = margin_decisions(forest.schema, forest.evaluate(cases.X))
        found = principal_reasons(c, cases.X, decided, forest.schema, shown, cfg.explain.reasons)
        return _plain({"method": c.method, "references": c.n_reference, "cases": [
            {**r.to_dict(), "values": dict(zip(c.feature_names, map(float, c.output_values(
                c.values.shape[2] - 1 if c.values.ndim == 3 else 0)[i])))} for i, r in enumerate(found)]})

    key = _analysis_key(st, "reasons", n=cfg.explain.reasons, threshold=cfg.explain.threshold)
    st.results["reasons"] = st.step("reasons", key, compute).result


def regional(st: State) -> None:
    """Regional rules for the configured regions (or two halves of the most important feature) and coverage."""
    inp, cfg = st.inp, st.inp.config
    train = inp.table("train")
    if "rules" not in cfg.explain.analyses or cfg.explain.regions == "none" or train is None:
        return
    regions = _regions(st)
    if not regions:
        st.results["regional"] = {"error": {"type": "InputDataError",
                                            "message": "no numerical feature to split into regions"}}
        return

    def compute(files: Path) -> dict[str, Any]:
        bounds = [{f: ab for f, ab in b} for _, b in regions]
        try:
            rs = lumber.counterfactual_rules(_request(st), train.X, bounds,
                                             options=lumber.RuleOptions(pi=cfg.explain.pi, pi_c=cfg.explain.pi_c,
                                                                        n_samples=0, seed=cfg.seed))
        except LumberError as exc:
            return {"error": _error(exc)}
        results = list(rs)
        out: dict[str, Any] = {"regions": [], "coverage": {}}
        for (name, b), r in zip(regions, results):
            d = r.to_dict()
            d["region_name"] = name
            d["text"] = r.to_text()
            out["regions"].append(d)
        for role in ("cases", "validation", "train"):
            t = inp.table(role)
            if t is not None:
                out["coverage"][role] = coverage(results, inp.forest.prepare_input(t.X), inp.forest.schema)
        for d, (name, b) in zip(out["regions"], regions):
            t = inp.table("cases")
            if t is not None:
                lo, hi = _box(st, b)
                with np.errstate(invalid="ignore"):
                    inside = np.all((t.X >= lo) & (t.X <= hi), axis=1)
                d["cases_in_region"] = int(inside.sum())
        return _plain(out)

    st.results["regional"] = st.step("regional", _analysis_key(st, "regional", regions=regions), compute).result


def _box(st: State, bounds: Any) -> tuple[np.ndarray, np.ndarray]:
    names = st.inp.forest.schema.feature_names
    lo = np.full(len(names), -np.inf)
    hi = np.full(len(names), np.inf)
    for f, (a, b) in bounds:
        j = names.index(f)
        lo[j] = -np.inf if a is None else a
        hi[j] = np.inf if b is None else b
    return lo, hi


def _regions(st: State) -> list[tuple[str, tuple[tuple[str, tuple[float | None, float | None]], ...]]]:
    """Configured regions, or ``auto``: the most important numerical feature split at its training median."""
    regions = st.inp.config.explain.regions
    if isinstance(regions, tuple):
        return list(regions)
    inp = st.inp
    schema = inp.forest.schema
    numeric = [j for j, f in enumerate(schema.features) if f.kind in (FeatureKind.NUMERICAL, FeatureKind.ORDINAL)
               and not inp.forest.is_categorical[inp.forest.feature == j].any()]
    used = np.bincount(inp.forest.feature[inp.forest.feature >= 0], minlength=schema.n_features).astype(float)
    att = st.results.get("attribution", {})
    if "outputs" in att:
        nu = {f["feature"]: abs(f["nu"] or 0.0) for f in att["outputs"][0]["features"]}
        used = np.array([nu.get(n, 0.0) for n in schema.feature_names])
    train = inp.table("train")
    assert train is not None
    for j in sorted(numeric, key=lambda j: (-used[j], j)):
        col = train.X[:, j]
        col = col[np.isfinite(col)]
        if col.size == 0:
            continue
        m = float(np.median(col))
        if not (col > m).any():
            continue
        name = schema.feature_names[j]
        above = float(np.nextafter(m, np.inf))
        return [(f"{name} <= {m:g}", ((name, (None, m)),)), (f"{name} > {m:g}", ((name, (above, None)),))]
    return []


def plausibility(st: State) -> None:
    """Isolation-forest scores (>= 0: inlier) of each case and of the points its explanations propose."""
    inp, cfg = st.inp, st.inp.config
    cases, ref = inp.table("cases"), inp.reference
    if cases is None or ref is None:
        return
    points: dict[str, list[list[float] | None]] = {"case": [list(map(float, x)) for x in cases.X]}
    points.update(_proposed_points(st, len(cases.X)))

    def compute(files: Path) -> dict[str, Any]:
        from sklearn.ensemble import IsolationForest

        R = ref.X
        med = np.nanmedian(np.where(np.isfinite(R), R, np.nan), axis=0)
        med = np.where(np.isnan(med), 0.0, med)
        iso = IsolationForest(random_state=cfg.seed).fit(np.where(np.isnan(R), med, R))
        out: dict[str, Any] = {"method": "isolation-forest", "fitted_on": "train" if ref is inp.table("train")
                               else "validation", "threshold": 0.0, "scores": {}}
        for kind, rows in points.items():
            arr = np.array([[np.nan if v is None else v for v in r] if r is not None else [np.nan] * R.shape[1]
                            for r in rows], dtype=np.float64)
            ok = ~np.all(np.isnan(arr), axis=1)
            scores: list[float | None] = [None] * len(rows)
            if ok.any():
                A = np.where(np.isnan(arr[ok]), med, arr[ok])
                for i, s in zip(np.flatnonzero(ok), iso.decision_function(A)):
                    scores[int(i)] = float(s)
            out["scores"][kind] = scores
        return _plain(out)

    key = digest("plausibility", inp.hashes.get("train"), inp.hashes.get("validation"), cfg.seed, points)
    st.results["plausibility"] = st.step("plausibility", key, compute).result


def _proposed_points(st: State, n: int) -> dict[str, list[list[float] | None]]:
    """Numeric rows of the counterfactual, the sensitive witness and the first rule sample of each case."""
    schema = st.inp.forest.schema
    names = schema.feature_names
    out: dict[str, list[list[float] | None]] = {}
    by_row = {k: {r["row"]: r for r in st.results.get(k, [])} for k in ("counterfactual", "sensitive", "rules")}
    cf, sens, rules = [], [], []
    for i in range(n):
        rec = by_row["counterfactual"].get(i)
        vals = (rec or {}).get("result", {}).get("counterfactual") if rec and rec["status"] == "ok" else None
        cf.append([_code(schema, j, vals.get(nm)) for j, nm in enumerate(names)] if vals else None)
        rec = by_row["sensitive"].get(i)
        pt = rec["result"].get("point") if rec and rec["status"] == "ok" else None
        sens.append([_num(pt.get(nm)) for nm in names] if pt and rec and rec["result"].get("distance") not in (0, 0.0)
                    else None)
        rec = by_row["rules"].get(i)
        smp = rec["result"].get("samples") if rec and rec["status"] == "ok" else None
        rules.append([_num(v) for v in smp[0]["x"]] if smp else None)
    if "counterfactual" in by_row and by_row["counterfactual"]:
        out["counterfactual"] = cf
    if by_row["sensitive"]:
        out["sensitive"] = sens
    if by_row["rules"]:
        out["rule_sample"] = rules
    return out


def _num(v: Any) -> float:
    if v is None:
        return float("nan")
    if isinstance(v, str):
        return float("inf") if v == "inf" else float("-inf") if v == "-inf" else float("nan")
    return float(v)


def _code(schema: Any, j: int, v: Any) -> float:
    """A value from a result's ``{feature: value}`` back to the model's number (category labels -> codes)."""
    f = schema.features[j]
    if isinstance(v, str) and f.categories is not None and v in f.categories:
        return float(list(f.categories).index(v))
    return _num(v) if not isinstance(v, (int, float)) else float(v)


__all__ = ["attribution", "decision_constraints", "decision_forest", "per_case", "plausibility", "reasons", "regional"]
