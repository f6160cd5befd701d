"""The report document: every section's content as plain JSON, the only input of the renderers.

The document holds what a reader needs and nothing that varies between runs
of the same inputs (no wall-clock times unless ``[report] timings = true``,
no absolute paths, floats rounded to 12 significant digits), so the HTML,
Markdown and JSON rendered from it are byte-identical for the same inputs
and seed. ``lumber report --render report.json`` re-renders a saved one.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from lumber import __version__
from lumber.runtime.data import case_ids
from lumber.ir import FeatureKind, Forest, Target
from lumber.ir.domains import DomainKind, domains_for
from lumber.passes.analyses.reasons import REASONS_SCHEMA
from lumber.backends.base import fingerprint

from .compile_steps import State
from .explain_steps import _target, decision_forest

DOCUMENT_VERSION = 1
TIMING_KEYS = ("seconds", "solve_seconds", "total_seconds", "build_seconds", "reference_seconds")


def clean(v: Any) -> Any:
    """JSON-ready and run-independent: floats to 12 significant digits, timing keys dropped."""
    if isinstance(v, dict):
        return {str(k): clean(x) for k, x in v.items() if str(k) not in TIMING_KEYS}
    if isinstance(v, (list, tuple)):
        return [clean(x) for x in v]
    if hasattr(v, "item") and not isinstance(v, (str, bytes)):
        v = v.item()
    if isinstance(v, float):
        if not math.isfinite(v):
            return None if math.isnan(v) else ("inf" if v > 0 else "-inf")
        return float(f"{v:.12g}")
    return v


def model_card(st: State) -> dict[str, Any]:
    """Shape, features and provenance of the model."""
    inp = st.inp
    f: Forest = inp.forest
    s = f.schema
    summ = f.summary()
    splits = summ["splits_per_feature"]
    feats = []
    doms = _train_domains(st)
    for i, feat in enumerate(s.features):
        kind = feat.kind.name.lower()
        n_cat = len(feat.categories) if feat.categories is not None and feat.kind == FeatureKind.CATEGORICAL else None
        d: dict[str, Any] = {"name": feat.name, "kind": kind, "categories": n_cat,
                             "splits": int(splits.get(feat.name, 0))}
        if feat.categories is not None:
            d["labels"] = [str(c) for c in feat.categories]
        if feat.words:
            d["words"] = [[v, t] for v, t in feat.words]
        elif doms is not None and doms[i].kind == DomainKind.BINARY and doms[i].labels is None:
            d["values"] = "0/1 (binary, no labels)"  # explanations print 0 and 1: say so
        feats.append(d)
    return {
        "file": inp.config.relative(inp.config.model.path), "sha256": inp.hashes["model"],
        "fingerprint": st.ir_fingerprint if st.ir is f else _fp(f),
        "library": s.source.get("library", ""), "model_type": s.source.get("model_type", ""),
        "task": s.task.name.lower(), "classes": list(s.classes) if s.classes is not None else None,
        **({"class_names": list(s.class_names)} if s.class_names is not None else {}),
        "outputs": s.n_outputs, "post_transform": s.post_transform.name.lower(), "input_dtype": s.input_dtype,
        "shape": {k: summ[k] for k in ("trees", "nodes", "leaves", "max_depth", "mean_leaf_depth", "features",
                                       "features_used", "categorical_splits", "memory_bytes")},
        "features": feats,
    }


def _train_domains(st: State) -> Any:
    """The feature domains the training rows show (None without them): which features are 0/1 flags."""
    train = st.inp.table("train")
    if train is None:
        return None
    return domains_for(st.inp.forest, st.inp.constraints, train.X)


def _fp(f: Forest) -> str:
    return fingerprint(f)


def compile_section(st: State, timings: bool) -> dict[str, Any]:
    targets = []
    for t in st.targets:
        d = {k: v for k, v in t.items() if k != "speed"}
        if timings and "speed" in t:
            d["speedup"] = t["speed"]["speedup"]
            d["speed"] = {"rows": t["speed"]["rows"], "threads": t["speed"]["threads"],
                          "reference_us_per_row": 1e6 * t["speed"]["reference_seconds"] / t["speed"]["rows"],
                          "us_per_row": 1e6 * t["speed"]["seconds"] / t["speed"]["rows"]}
        targets.append(d)
    out: dict[str, Any] = {"passes": st.inp.config.compile.passes, "compiled_from": st.compiled_from,
                           "targets": targets, "timings": timings}
    if st.passes is not None:
        out["final_ir"] = st.passes["describe"]
        out["pass_reports"] = st.passes["reports"]
    if "equivalence" in st.results:
        out["equivalence"] = st.results["equivalence"]
    return out


def _display(schema: Any, j: int, v: float) -> Any:
    f = schema.features[j]
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return None
    if f.word(v) is not None:
        return f.word(v)
    if f.categories is not None and float(v).is_integer() and 0 <= int(v) < len(f.categories):
        return f.categories[int(v)]
    return int(v) if float(v).is_integer() and abs(v) < 2 ** 53 else float(v)


def cases_section(st: State, max_tests: int) -> dict[str, Any]:
    inp = st.inp
    cases = inp.table("cases")
    if cases is None:
        return {"count": 0, "items": [], "note": "no [data] cases file: nothing to explain per case"}
    forest = decision_forest(st)  # the build's decision rule ([explain] threshold or a threshold target)
    schema = forest.schema
    margins = forest.evaluate(cases.X)
    preds = forest.predict(cases.X)
    proba = forest.predict_proba(cases.X) if schema.task.name in ("BINARY", "MULTICLASS") else None
    ids = case_ids(cases.frame, inp.config.data.id, cases.path) if inp.config.data.id else None
    why = {r["row"]: r for r in st.results.get("reasons", {}).get("cases", [])}
    by: dict[str, dict[int, Any]] = {k: {r["row"]: r for r in st.results.get(k, [])}
                                     for k in ("sensitive", "counterfactual", "rules")}
    material = materiality(st)
    plaus = st.results.get("plausibility", {}).get("scores", {})
    items = []
    for i in range(len(cases.X)):
        item: dict[str, Any] = {
            "row": i,
            "values": [[n, _display(schema, j, float(cases.X[i, j]))] for j, n in enumerate(schema.feature_names)],
            "prediction": preds[i], "margin": margins[i] if margins.ndim == 1 else list(margins[i]),
        }
        if schema.class_names is not None:
            item["decision"] = schema.class_text(int(schema.class_index(margins[i:i + 1])[0]))
        if ids is not None:
            item["id"] = ids[i]
        if proba is not None:
            item["probability"] = float(proba[i].max())
            item["probabilities"] = [float(v) for v in proba[i]]
        if i in why:
            item["reasons"] = why[i]["reasons"]
        for key, fn in (("sensitive", _sensitive), ("counterfactual", _counterfactual), ("rule", _rule)):
            src = "rules" if key == "rule" else key
            if src in st.inp.config.explain.analyses and by[src]:
                rec = by[src].get(i)
                item[key] = _failed(rec) if rec is None or rec["status"] != "ok" else fn(rec["result"], max_tests)
        if isinstance(item.get("counterfactual"), dict):
            item["counterfactual"] = _offered(st, item["counterfactual"], material)
        if plaus:
            item["plausibility"] = {k: v[i] for k, v in plaus.items() if i < len(v)}
        items.append(item)
    out: dict[str, Any] = {"count": len(items), "file": inp.config.relative(cases.path),
                           "analyses": [a for a in inp.config.explain.analyses if a != "attribution"],
                           "target": _target_text(st), "items": items,
                           "classes": [str(c) for c in schema.classes] if schema.classes is not None else None,
                           "class_names": list(schema.class_names) if schema.class_names is not None else None,
                           "reasons_per_case": inp.config.explain.reasons,
                           "reasons_method": st.results.get("reasons", {}).get("method"),
                           "reasons_schema": REASONS_SCHEMA, "id_column": inp.config.data.id,
                           "materiality": material, "materiality_share": MATERIALITY_SHARE,
                           "materiality_rows": "train" if inp.table("train") is not None else "cases"}
    if schema.cutoff is not None:
        out["decision_rule"] = {**schema.cutoff.to_dict(), "text": schema.cutoff.describe(schema.class_text(1))}
    sens = [r for r in st.results.get("sensitive", []) if r["status"] == "ok"]
    if sens:
        out["metric"] = {k: sens[0]["result"]["metric"][k] for k in ("norm", "scale", "immutable", "increase_only",
                                                                     "decrease_only", "max_changes")}
        out["sensitive_method"] = sens[0]["result"]["method"]
        skipped = sens[0]["result"].get("not_applied") or []
        if skipped:  # the constraint file's statements the sensitive tests leave out, by line
            path = inp.config.constraints.path
            out["sensitive_not_applied"] = [dict(s, file=inp.config.relative(path) if path else s.get("file"))
                                            for s in skipped]
    return out


MATERIALITY_SHARE = 0.01
"""A numeric change smaller than this share of its feature's standard deviation (over the training rows,
else the cases) is flagged fragile: it moves the case across the model's edge, not its situation."""


def materiality(st: State) -> dict[str, float]:
    """Per numeric feature: the smallest change the report calls material (``MATERIALITY_SHARE`` of its spread)."""
    rows = st.inp.table("train") or st.inp.table("cases")
    if rows is None:
        return {}
    out = {}
    for j, f in enumerate(st.inp.forest.schema.features):
        if f.kind in (FeatureKind.CATEGORICAL, FeatureKind.BINARY):
            continue
        col = rows.X[:, j]
        col = col[np.isfinite(col)]
        if col.size > 1 and float(np.std(col)) > 0:
            out[f.name] = MATERIALITY_SHARE * float(np.std(col))
    return out


def _offered(st: State, cf: dict[str, Any], material: dict[str, float]) -> dict[str, Any]:
    """A counterfactual as the report offers it: each numeric change flagged ``fragile`` below its
    materiality; withheld (never shown as advice) when it changes a feature the constraint file makes
    immutable or leaves the range the training rows show."""
    changes = cf.get("changes") or []
    cons = st.inp.constraints
    immutable = set(cons.immutable_features()) if cons is not None else set()
    train = st.inp.table("train")
    names = st.inp.forest.schema.feature_names
    bad = []
    for ch in changes:
        d = ch.get("delta")
        ch["fragile"] = isinstance(d, (int, float)) and ch["feature"] in material and abs(d) < material[ch["feature"]]
        if ch["feature"] in immutable:
            bad.append(f"{ch['feature']} is immutable in the constraint file")
        elif train is not None and isinstance(ch.get("after"), (int, float)) and ch["feature"] in names:
            col = train.X[:, names.index(ch["feature"])]
            col = col[np.isfinite(col)]
            if col.size and not (col.min() <= float(ch["after"]) <= col.max()):
                bad.append(f"{ch['feature']} = {ch['after']} lies outside the training rows' range")
    if bad:
        return {**cf, "status": "withheld", "changes": [], "withheld": changes,
                "message": "not offered: " + "; ".join(bad)}
    return cf


def _target_text(st: State) -> Any:
    t = _target(st)
    if isinstance(t, Target):
        t = t.interval if t.interval is not None else t.label
    return list(t) if isinstance(t, tuple) else t


def _failed(rec: dict[str, Any] | None) -> dict[str, Any]:
    if rec is None:
        return {"status": "error", "message": "not computed"}
    return {"status": "error", "message": f"{rec['error']['type']}: {rec['error']['message']}"}


def _sensitive(r: dict[str, Any], max_tests: int) -> dict[str, Any]:
    tests = r.get("tests", [])
    reachable = bool(r.get("reachable"))
    status = "ok" if reachable else "unreachable"
    if reachable and r.get("distance") in (0, 0.0):
        status = "at-target"
    return {"status": status, "distance": r.get("distance"), "trace": r.get("trace"), "target": r.get("target"),
            "exact": r.get("exact"), "method": r.get("method"), "verified": r.get("verified"),
            "message": r.get("message", ""), "n_tests": len(tests),
            "tests": [{k: t.get(k) for k in ("feature", "op", "threshold", "value", "new_value", "margin", "categories",
                                             "categories_text", "threshold_text", "value_text", "new_value_text")
                       if k in t} for t in tests[:max_tests]]}


def _counterfactual(r: dict[str, Any], max_tests: int) -> dict[str, Any]:
    return {"status": r.get("status"), "cost": r.get("cost"), "norm": r.get("norm"), "verified": r.get("verified"),
            "gap": r.get("gap"), "prediction": r.get("prediction"), "original_prediction": r.get("original_prediction"),
            "changes": r.get("changes", []), "message": r.get("message", "")}


def _free(rule: dict[str, Any]) -> list[str]:
    """The features of S a rule leaves free, when it has conditions too (with none, its text names them)."""
    return list(rule.get("unconstrained") or []) if rule.get("if") else []


def _rule(r: dict[str, Any], max_tests: int) -> dict[str, Any]:
    rules = [{"text": x.get("text"), "unconstrained": _free(x), "probability": x.get("probability"),
              "plausibility": x.get("plausibility"), "support": x.get("support")} for x in r.get("rules", [])]
    samples = r.get("samples") or []
    sample = None
    if samples:
        s = samples[0]
        sample = {"changes": s.get("changes"), "original_prediction": r.get("prediction"),
                  "prediction": s.get("prediction"), "verified": s.get("verified"),
                  "inlier_score": s.get("inlier_score")}
    return {"status": r.get("status"), "message": r.get("message", ""), "features": r.get("features", []),
            "cdp": r.get("cdp"), "reached_pi": r.get("reached_pi"), "pi": r.get("pi"), "pi_c": r.get("pi_c"),
            "target": r.get("target"), "rules": rules, "sample": sample}


def regional_section(st: State) -> dict[str, Any] | None:
    reg = st.results.get("regional")
    if reg is None:
        return None
    if "error" in reg:
        return {"error": reg["error"]}
    regions = []
    for d in reg["regions"]:
        regions.append({
            "name": d.get("region_name"), "status": d.get("status"), "message": d.get("message", ""),
            "training_rows": d.get("region_training_rows"), "cases_in_region": d.get("cases_in_region"),
            "majority": d.get("prediction"), "target": d.get("target"), "features": d.get("features", []),
            "cdp": d.get("cdp"), "region": [iv.get("text") for iv in d.get("region", [])],
            "rules": [{"text": x.get("text"), "unconstrained": _free(x), "probability": x.get("probability"),
                       "plausibility": x.get("plausibility"), "support": x.get("support")} for x in d.get("rules", [])],
        })
    return {"regions": regions, "coverage": reg.get("coverage", {})}


def constraints_section(st: State) -> dict[str, Any] | None:
    inp = st.inp
    if inp.constraints is None or inp.config.constraints.path is None:
        return None
    c = inp.constraints
    return {"file": inp.config.relative(inp.config.constraints.path), "sha256": inp.hashes.get("constraints"),
            "text": inp.constraints_text, "immutable": c.immutable_features(),
            "max_changes": c.max_changes, "norm": c.norm.name.lower() if c.norm is not None else None,
            "plausibility": c.plausibility.method if c.plausibility is not None else None}


def _requested(cfg: Any, section: str) -> bool:
    """A section whose analysis the build file does not run is left out (rather than shown empty)."""
    ex = cfg.explain
    if section == "attribution":
        return "attribution" in ex.analyses
    if section == "regional":
        return "rules" in ex.analyses and ex.regions != "none"
    return True


def build_document(st: State, checks: list[dict[str, Any]]) -> dict[str, Any]:
    """The report document of a build (see module docstring)."""
    cfg = st.inp.config
    rep = cfg.report
    doc: dict[str, Any] = {
        "lumber_report": DOCUMENT_VERSION, "generator": f"lumber {__version__}",
        "title": rep.title or f"{cfg.model.path.name}: lumber report", "seed": cfg.seed,
        "sections": [s for s in rep.sections if _requested(cfg, s)],
        "inputs": {role: {"file": cfg.relative(p), "sha256": st.inp.hashes[role]} for role, p in cfg.inputs().items()},
        "model": model_card(st), "compile": compile_section(st, rep.timings),
    }
    if "attribution" in rep.sections and "attribution" in st.results:
        doc["attribution"] = st.results["attribution"]
    if "cases" in rep.sections:
        doc["cases"] = cases_section(st, rep.max_tests)
    if "regional" in rep.sections:
        doc["regional"] = regional_section(st)
    if "constraints" in rep.sections:
        doc["constraints"] = constraints_section(st)
    if "checks" in rep.sections:
        doc["checks"] = [{k: c[k] for k in ("name", "passed", "gate", "message")} for c in checks]
    return clean(doc)  # type: ignore[no-any-return]


__all__ = ["DOCUMENT_VERSION", "build_document", "clean"]
