"""What the report says: the report document (plain JSON) -> blocks, one function per section.

Sections appear in the order the document's ``sections`` lists. Every number
shown comes from the document; nothing is recomputed here, so the renderers
stay pure functions of the document.
"""

from __future__ import annotations

from typing import Any, Callable

from .blocks import (
    Block, Cell, Close, Figure, Grid, Heading, Open, Para, Pre, Rule, Toc, cells, count, num, pct, score, table, verdict,
)
from .svg import bar_chart

TITLES = {"model": "Model card", "attribution": "Global attribution", "cases": "Cases",
          "regional": "Regional rules", "constraints": "Constraints", "checks": "Checks"}
TOP_FEATURES = 15


def layout(doc: dict[str, Any]) -> list[Block]:
    """The blocks of the whole report."""
    order = [s for s in doc.get("sections", list(TITLES)) if s in TITLES]
    out: list[Block] = [Heading(1, str(doc.get("title", "lumber report")), "top"), Para(_subtitle(doc), "meta"),
                        Toc(tuple((s, TITLES[s]) for s in order))]
    for s in order:
        out.append(Open(s))
        out.append(Heading(2, TITLES[s], s))
        out.extend(SECTIONS[s](doc))
        out.append(Close())
    return out


def _subtitle(doc: dict[str, Any]) -> str:
    m = doc.get("model", {})
    checks = doc.get("checks") or []
    failed = [c for c in checks if c.get("gate") and c.get("passed") is False]
    status = ((f"{len(failed)} gated check(s) FAILED: " + "; ".join(str(c.get("message", c.get("name")))
                                                                for c in failed[:3])
               + (f"; ... {len(failed) - 3} more" if len(failed) > 3 else ""))
              if failed else "all gated checks passed") if checks else ""
    parts = [f"{doc.get('generator', 'lumber')}", f"model {m.get('file', '?')} ({m.get('library') or 'model'}, "
             f"{m.get('task', '?')})", f"seed {doc.get('seed', 0)}"]
    return " · ".join(p for p in parts + [status] if p)


# -- model card ------------------------------------------------------------------------------------------

def model_section(doc: dict[str, Any]) -> list[Block]:
    m = doc.get("model", {})
    sh = m.get("shape", {})
    classes = m.get("classes")
    facts = [
        ("file", m.get("file")), ("sha256", str(m.get("sha256", ""))[:16]),
        ("library", " ".join(x for x in (m.get("library"), m.get("model_type")) if x) or "—"),
        ("task", m.get("task")), ("classes", ", ".join(map(str, classes)) if classes else "—"),
        ("outputs", m.get("outputs")), ("output transform", m.get("post_transform")),
        ("input type", m.get("input_dtype")), ("trees", count(sh.get("trees"))), ("nodes", count(sh.get("nodes"))),
        ("leaves", count(sh.get("leaves"))), ("max depth", sh.get("max_depth")),
        ("mean leaf depth", num(sh.get("mean_leaf_depth"), 3)),
        ("features used", f"{sh.get('features_used')} of {sh.get('features')}"),
        ("categorical splits", count(sh.get("categorical_splits"))),
        ("IR memory", f"{(sh.get('memory_bytes') or 0) / 1e6:.2f} MB"),
    ]
    out: list[Block] = [Grid(tuple((k, v if isinstance(v, str) else num(v)) for k, v in facts), "facts",
                              ("property", "value"))]
    feats = m.get("features", [])
    out.append(Heading(3, f"Features ({len(feats)})", "features"))
    out.append(table(("feature", "kind", "categories", "splits"),
                     [(f["name"], f["kind"], _categories(f), count(f["splits"])) for f in feats], "features"))
    out.extend(_compile_blocks(doc.get("compile", {})))
    return out


def _categories(f: dict[str, Any]) -> str:
    """A feature's categories by label (the first 8, then how many in all), a 0/1 flag's note, else their count
    or a dash."""
    labels = f.get("labels")
    if labels:
        shown = ", ".join(map(str, labels[:8]))
        return shown + (f", … ({len(labels)} in all)" if len(labels) > 8 else "")
    if f.get("values"):
        return str(f["values"])  # a 0/1 flag without labels
    return num(f.get("categories"))


def _compile_blocks(c: dict[str, Any]) -> list[Block]:
    out: list[Block] = [Heading(3, "Compile results", "compile")]
    if c.get("passes"):
        src = ("the pipeline's final IR" if c.get("compiled_from") == "passes" else
               "the model itself (the pipeline ends in a Polynomial, which no backend emits)")
        out.append(Para(f"Pass pipeline: {c['passes']} → {c.get('final_ir', '?')}. "
                        f"Targets were compiled from {src}."))
        for r in c.get("pass_reports", []):
            out.append(Para(f"{r['pass']}: {r['summary']}"))
    else:
        out.append(Para("No pass pipeline: targets were compiled from the model's own IR."))
    targets = c.get("targets", [])
    if targets:
        heads = ["target", "file", "bytes", "rows checked", "exact", "max rel. diff"]
        if c.get("timings"):
            heads += ["speed-up", "µs/row"]
        rows = []
        for t in targets:
            e = t.get("exact", {})
            row: list[Any] = [t["target"], t.get("file"), count(t.get("bytes")), count(e.get("rows")),
                              verdict(e.get("exact")), num(e.get("max_rel_diff"), 3)]
            if c.get("timings"):
                sp = t.get("speed")
                row += [f"{t['speedup']:.1f}×" if t.get("speedup") else "—",
                        num(sp["us_per_row"], 3) if sp else "—"]
            rows.append(row)
        out.append(table(heads, rows, "targets"))
        if c.get("timings"):
            sp = next((t["speed"] for t in targets if t.get("speed")), None)
            if sp:
                out.append(Para(f"Speed-ups against lumber's numpy reference evaluator on {count(sp['rows'])} rows, "
                                f"{sp['threads']} thread(s); measured at build time, they vary run to run.", "note"))
        else:
            out.append(Para("Speed-ups are measured at every build and recorded in manifest.json; set "
                            "[report] timings = true to show them here (the report's bytes then vary run to run).",
                            "note"))
    else:
        out.append(Para("No targets compiled."))
    eq = c.get("equivalence")
    if eq:
        state = {True: "equal", False: "NOT equal", None: "not decided"}[eq.get("equal")]
        out.append(Para(f"Equivalence with the model: {state} ({eq.get('reason', '')})."))
    return out


# -- attribution ------------------------------------------------------------------------------------------

def attribution_section(doc: dict[str, Any]) -> list[Block]:
    a = doc.get("attribution")
    if not a:
        return [Para("Not computed.")]
    if "error" in a:
        return [Para(f"Not available: {a['error']['message']}", "warn")]
    out: list[Block] = [Para(f"MonoForest attribution ν(k) over {count(a.get('rows'))} {a.get('data', '')} rows: "
                             "each feature's expected signed contribution to the raw margin (formula (8)); "
                             f"the {TOP_FEATURES} largest by magnitude.")]
    for o in a.get("outputs", []):
        feats = [f for f in o.get("features", []) if f.get("nu")][:TOP_FEATURES]
        labels = [f["feature"] for f in feats]
        values = [float(f["nu"]) for f in feats]
        fallback = table(("feature", "ν"), [(f["feature"], num(f["nu"], 4)) for f in feats])
        title = f"ν(k) for output {o.get('output')} (E[margin] = {num(o.get('expected_margin'), 4)})"
        if feats:
            out.append(Figure(bar_chart(labels, values, title=title, chart_id=f"attribution-{o.get('output')}"),
                              title, fallback))
        else:
            out.append(Para(f"{title}: every feature has ν = 0."))
        conds = o.get("top_conditions", [])[:10]
        if conds:
            out.append(table(("condition", "ν"), [(x["condition"], num(x["nu"], 4)) for x in conds], "conditions",
                             f"Top conditions, output {o.get('output')}"))
    return out


# -- cases --------------------------------------------------------------------------------------------------

def cases_section(doc: dict[str, Any]) -> list[Block]:
    c = doc.get("cases")
    if not c or not c.get("items"):
        return [Para((c or {}).get("note", "No cases."))]
    out: list[Block] = []
    tgt = c.get("target")
    head = f"{c['count']} case(s) from {c.get('file')}; target: {'any other class' if tgt is None else num(tgt)}."
    m = c.get("metric")
    if m:
        head += (f" Distances: {m['norm']} norm, scale {m['scale']}"
                 + (f"; immutable: {', '.join(m['immutable'])}" if m.get("immutable") else "")
                 + (f"; at most {m['max_changes']} changes" if m.get("max_changes") else "") + ".")
    out.append(Para(head))
    skipped = c.get("sensitive_not_applied")
    if skipped:
        where = "; ".join(f"{s['file']} line {s['line']} ({s['kind']})" if s.get("line") else s["kind"]
                          for s in skipped)
        by_cf = " (the counterfactuals apply them)" if "counterfactual" in c.get("analyses", ()) else ""
        out.append(Para(f"Sensitive tests move each feature within its own rule and do not apply {where}{by_cf}: "
                        "their distances and witness points are under the other constraints, and a witness may "
                        "break a statement listed here."))
    dist = [(f"case {it['row']}", it["sensitive"]["distance"]) for it in c["items"]
            if isinstance(it.get("sensitive"), dict) and isinstance(it["sensitive"].get("distance"), (int, float))]
    if dist:
        title = "Distance to the decision surface (sensitive tests)"
        out.append(Figure(bar_chart([d[0] for d in dist], [float(d[1]) for d in dist], title=title,
                                    chart_id="distances"), title,
                          table(("case", "distance"), [(a, num(b)) for a, b in dist])))
    for it in c["items"]:
        out.extend(_case(it))
    return out


def _case(it: dict[str, Any]) -> list[Block]:
    row = it["row"]
    prob = f" (probability {it['probability']:.3f})" if isinstance(it.get("probability"), float) else ""
    out: list[Block] = [Open(f"case-{row}", "case"),
                        Heading(3, f"Case {row}: predicted {num(it.get('prediction'))}{prob}", f"case-{row}")]
    vals = it.get("values", [])  # [feature, value] pairs in the model's feature order
    out.append(Grid(tuple((str(k), num(v, 6)) for k, v in vals), "values", ("feature", "value")))
    if "sensitive" in it:
        out.extend(_sensitive(it["sensitive"]))
    if "counterfactual" in it:
        out.extend(_counterfactual(it["counterfactual"]))
    if "rule" in it:
        out.extend(_local_rule(it["rule"]))
    if it.get("plausibility"):
        out.extend(_plausibility(it["plausibility"]))
    out.append(Close())
    return out


def _sensitive(s: dict[str, Any]) -> list[Block]:
    out: list[Block] = [Heading(4, "Decision path vs sensitive tests")]
    if s.get("status") == "error":
        return out + [Para(f"Sensitive tests failed: {s['message']}", "warn")]
    trace = s.get("trace")
    if s.get("status") == "unreachable":
        return out + [Para(f"Trace: {count(trace)} tests on the decision path. {s.get('message')}", "warn")]
    if s.get("status") == "at-target":
        return out + [Para(f"Trace: {count(trace)} tests on the decision path; {s.get('message') or 'at the target'}.")]
    bound = "" if s.get("exact") else " (an upper bound)"
    ver = "" if s.get("verified") else " — NOT verified on the model"
    out.append(Para(f"Trace: {count(trace)} tests on the decision path; {s.get('n_tests')} of them are sensitive. "
                    f"Distance {num(s.get('distance'))}{bound} to {num(s.get('target'))} "
                    f"({s.get('method')}){ver}."))
    rows = []
    for t in s.get("tests", []):
        cats = t.get("categories_text") or t.get("categories")
        test = (f"{t['feature']} not in {{{', '.join(map(str, cats))}}}" if t.get("categories") is not None
                else f"{t['feature']} {t['op']} {t.get('threshold_text') or num(t.get('threshold'), 6)}")
        rows.append((test, t.get("value_text") or num(t.get("value"), 6),
                     t.get("new_value_text") or num(t.get("new_value"), 6), num(t.get("margin"))))
    if rows:
        out.append(table(("sensitive test (holds now)", "value", "witness", "margin"), rows, "tests"))
    return out


def _counterfactual(cf: dict[str, Any]) -> list[Block]:
    out: list[Block] = [Heading(4, "Optimal counterfactual")]
    st = cf.get("status")
    if st == "error" or cf.get("changes") is None:
        return out + [Para(f"Counterfactual failed: {cf.get('message')}", "warn")]
    if st in ("infeasible", "no_solution"):
        return out + [Para(f"{st}: {cf.get('message') or 'no counterfactual under the constraints'}", "warn")]
    changes = cf.get("changes", [])
    if not changes:
        return out + [Para(f"No change needed: the model already predicts {num(cf.get('prediction'))}.")]
    proof = "proven optimal" if st == "optimal" else f"best found ({st}, gap {num(cf.get('gap'), 3)})"
    ver = "verified on the model" if cf.get("verified") else "NOT verified"
    out.append(Para(f"Prediction {num(cf.get('original_prediction'))} → {num(cf.get('prediction'))} at cost "
                    f"{num(cf.get('cost'))} ({cf.get('norm')}); {proof}; {ver}."))
    out.append(table(("feature", "before", "after", "change"),
                     [(ch["feature"], ch.get("before_text") or num(ch.get("before"), 6),
                       ch.get("after_text") or num(ch.get("after"), 6),
                       "—" if ch.get("delta") is None else f"{ch['delta']:+.6g}") for ch in changes], "changes"))
    return out


def _local_rule(r: dict[str, Any]) -> list[Block]:
    out: list[Block] = [Heading(4, "Local counterfactual rule")]
    st = r.get("status")
    if st == "error":
        return out + [Para(f"Counterfactual rules failed: {r.get('message')}", "warn")]
    if st == "already_target":
        return out + [Para(r.get("message") or "already at the target")]
    if st != "found":
        return out + [Para(f"{st}: {r.get('message')}", "warn")]
    tgt = r.get("target") or {}
    concl = _target_text(tgt)
    s_text = ", ".join(r.get("features", []))
    out.append(Para(f"Features to change S = {{{s_text}}} (CDP {num(r.get('cdp'), 3)}"
                    + (f" ≥ π {num(r.get('pi'))}" if r.get("reached_pi") else f" < π {num(r.get('pi'))}") + ")."))
    for x in r.get("rules", []):
        out.append(Rule(str(x.get("text")), f"{concl} with probability {num(x.get('probability'), 3)}",
                        f"plausibility {num(x.get('plausibility'), 3)}, support {pct(x.get('support'))} of "
                        f"training rows; {_free(x)}every other feature unchanged"))
    smp = r.get("sample")
    if smp:
        # each change is "feature: before → after"; the prediction is a clause of its own, never a third arrow
        ch = "; ".join(f"{c['feature']}: {c.get('before_text') or num(c.get('before'), 6)} → "
                       f"{c.get('after_text') or num(c.get('after'), 6)}"
                       for c in smp.get("changes", [])) or "no change"
        pred = num(smp.get("prediction"))
        if smp.get("original_prediction") is not None:
            pred = f"{num(smp.get('original_prediction'))} → {pred}"
        out.append(Para(f"Sample from the rule: {ch}; prediction {pred} "
                        f"({'verified' if smp.get('verified') else 'NOT verified'}, isolation score "
                        f"{score(smp.get('inlier_score'))})."))
    return out


def _free(rule: dict[str, Any]) -> str:
    """``A, B: any value; `` for the features of S a rule leaves free (none of them is a condition)."""
    free = rule.get("unconstrained") or []
    return f"{', '.join(map(str, free))}: any value; " if free else ""


def _target_text(t: dict[str, Any]) -> str:
    if "interval" in t:
        lo, hi = t["interval"]
        return f"prediction in [{num(lo)}, {num(hi)}]"
    cl = t.get("classes") or []
    return f"prediction = {num(cl[0])}" if len(cl) == 1 else f"prediction in {{{', '.join(map(num, cl))}}}"


def _plausibility(p: dict[str, Any]) -> list[Block]:
    names = {"case": "the case", "counterfactual": "optimal counterfactual", "sensitive": "sensitive-test witness",
             "rule_sample": "rule sample"}
    rows = []
    for k in ("case", "counterfactual", "sensitive", "rule_sample"):
        if k in p:
            v = p[k]
            rows.append((names[k], score(v), Cell("—") if v is None else
                         Cell("inlier", "pass") if v >= 0 else Cell("outlier", "warn")))
    return [Heading(4, "Plausibility"),
            table(("point", "isolation score", "verdict"), rows, "plausibility",
                  "Isolation forest on the training rows: a score ≥ 0 is an inlier.")]


# -- regional, constraints, checks ---------------------------------------------------------------------------

def regional_section(doc: dict[str, Any]) -> list[Block]:
    r = doc.get("regional")
    if not r:
        return [Para("Not computed (needs counterfactual rules and training rows).")]
    if "error" in r:
        return [Para(f"Not available: {r['error']['message']}", "warn")]
    cov = r.get("coverage", {})
    out: list[Block] = [Para("Coverage (share of rows in a region whose rule was found): "
                             + ", ".join(f"{k} {pct(v)}" for k, v in cov.items()) + ".")]
    for g in r.get("regions", []):
        out.append(Heading(3, f"Region {g.get('name')}"))
        where = " AND ".join(g.get("region") or []) or "every case"
        info = (f"IF {where}: {count(g.get('training_rows'))} training rows, mostly {num(g.get('majority'))}"
                + (f"; {g['cases_in_region']} of the cases" if g.get("cases_in_region") is not None else "") + ".")
        out.append(Para(info))
        if g.get("status") != "found":
            out.append(Para(f"{g.get('status')}: {g.get('message')}", "warn"))
            continue
        concl = _target_text(g.get("target") or {})
        for x in g.get("rules", []):
            out.append(Rule(str(x.get("text")), f"{concl} with probability {num(x.get('probability'), 3)}",
                            f"plausibility {num(x.get('plausibility'), 3)}, support {pct(x.get('support'))}; "
                            f"{_free(x)}for every case of the region"))
    return out


def constraints_section(doc: dict[str, Any]) -> list[Block]:
    c = doc.get("constraints")
    if not c:
        return [Para("No constraint file: every feature may change, at unit cost.")]
    out: list[Block] = [Para(f"{c.get('file')} (sha256 {str(c.get('sha256', ''))[:16]})"
                             + (f"; immutable: {', '.join(c['immutable'])}" if c.get("immutable") else "") + ".")]
    out.append(Pre(str(c.get("text", "")).rstrip("\n")))
    return out


def checks_section(doc: dict[str, Any]) -> list[Block]:
    checks = doc.get("checks") or []
    if not checks:
        return [Para("No checks recorded.")]
    rows = [(c["name"], verdict(c.get("passed")), "yes" if c.get("gate") else "no", c.get("message", ""))
            for c in checks]
    return [table(("check", "result", "gates --check", "detail"), rows, "checks")]


SECTIONS: dict[str, Callable[[dict[str, Any]], list[Block]]] = {
    "model": model_section, "attribution": attribution_section, "cases": cases_section,
    "regional": regional_section, "constraints": constraints_section, "checks": checks_section,
}

__all__ = ["SECTIONS", "TITLES", "layout", "cells"]
