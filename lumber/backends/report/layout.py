"""What the report says: the report document (plain JSON) -> blocks, one function per section.

Sections appear in the order the document's ``sections`` lists. Every number
shown comes from the document; nothing is recomputed here, so the renderers
stay pure functions of the document.
"""

from __future__ import annotations

import re
from typing import Any, Callable

from .blocks import (
    Block, Cell, Close, Figure, Glossary, Grid, Heading, Open, Para, Pre, Rule, Toc, cells, count, num, pct, score,
    table, verdict,
)
from .svg import bar_chart

TITLES = {"model": "The model", "attribution": "What drives the model overall", "cases": "Decisions, case by case",
          "regional": "Rules for groups of cases", "constraints": "What may change", "checks": "Checks"}
TOP_FEATURES = 15

GLOSSARY = {
    "margin": "the model's raw score before it becomes a probability (log-odds for LightGBM and XGBoost "
              "classifiers); the decision compares it, or the probability, with the cutoff",
    "decision rule": "how a score becomes a decision: by default the model's own (class 1 above a probability "
                     "of 0.5), or the cutoff this report states",
    "principal reasons": "the features whose values pushed this case's score hardest toward the decision it "
                         "received, strongest first, from its exact per-case contributions",
    "contribution": "how far one feature's value moved this case's margin from the average reference case's; "
                    "a case's contributions add up exactly to its margin minus the average (Shapley values)",
    "counterfactual": "the case with the fewest, smallest changes (weighed by the constraint file's costs) that "
                      "gets another decision; 'proven optimal' means the solver proved no cheaper one exists",
    "cost": "the size of a counterfactual's changes: each change divided by its feature's spread, then "
            "summed (the distance norm)",
    "norm": "how the changes of several features add up to one size: l1 sums them, l2 takes the root of "
            "the summed squares, linf the largest, l0 counts the features changed",
    "fragile": "a change smaller than the feature's materiality: it moves the case across the model's edge, "
               "not its real situation",
    "materiality": "the smallest change the report calls material for a feature: a stated share of the "
                   "feature's spread",
    "verified": "the changed case was run through the original model's own prediction and gets the decision "
                "claimed",
    "sensitive test": "a test on the case's path through the trees that a change of one feature would flip",
    "trace": "the number of tests on the case's path through the trees",
    "witness": "the changed case that shows how near the decision boundary is",
    "CDP": "the share of sampled changes to a set of features that reach the decision sought",
    "CRP": "the share of sampled points inside a rule's conditions that reach the decision sought",
    "π": "the share of sampled changes (CDP) a set of features must reach to be proposed; π_c: the share of "
         "sampled points inside a rule's conditions that must reach the decision sought for the rule to be kept",
    "MILP": "a mixed-integer linear program: the exact optimisation that finds, and proves, the smallest "
            "change or distance",
    "ν(k)": "a feature's average signed contribution over many rows (global attribution): it ranks features "
            "for the model as a whole, never for one case",
    "isolation score": "how typical a point looks among the training rows (an isolation forest); 0 or "
                       "above reads as typical, below 0 as unusual",
    "support": "the share of training rows a rule's conditions hold for",
}
"""Every technical term the report may print, in plain words (shown where the page uses it)."""

STATUS_WORDS = {"no_rule": "no rule found", "no_solution": "no counterfactual found",
                "already_target": "already decided so",
                "time_limit": "time limit reached", "unverified": "not verified"}
"""Status codes of the explainers, as the page prints them."""


def plain_words(text: str) -> str:
    """An explainer's message for people: status codes in words, ``pi_c=0.9`` as ``π_c 0.9``."""
    text = re.sub(r"(?<![\w])pi_c=", "π_c ", text)
    text = re.sub(r"(?<![\w])pi=", "π ", text)
    return re.sub(r"(?<![\w])(" + "|".join(STATUS_WORDS) + r")(?![\w])", lambda m: STATUS_WORDS[m.group(1)], text)


def _summary(message: str) -> str:
    """A check's message without its per-case details (each case's section gives those)."""
    head, sep, _ = message.partition("; case ")
    return plain_words(head) + ("; each case's section says why" if sep else "")


def layout(doc: dict[str, Any]) -> list[Block]:
    """The blocks of the whole report: the header states the decision rule and every failed check; a
    glossary explains each technical term the page uses."""
    order = [s for s in doc.get("sections", list(TITLES)) if s in TITLES]
    out: list[Block] = [Heading(1, str(doc.get("title", "lumber report")), "top"), Para(_subtitle(doc), "meta")]
    out.extend(_status(doc))
    out.append(Toc(tuple((s, TITLES[s]) for s in order)))
    body: list[Block] = []
    for s in order:
        body.append(Open(s))
        body.append(Heading(2, TITLES[s], s))
        body.extend(SECTIONS[s](doc))
        body.append(Close())
    out.extend(body)
    used = _terms_used(out)
    if used:
        out.append(Glossary("Terms used in this report", tuple((t, GLOSSARY[t]) for t in used)))
    return out


def _terms_used(blocks: list[Block]) -> list[str]:
    """Glossary terms the page's text uses, in glossary order."""
    import re

    text = " ".join(str(getattr(b, a, "")) for b in blocks for a in ("text", "condition", "conclusion", "note",
                                                                      "caption"))
    text += " ".join(c.text for b in blocks for row in getattr(b, "rows", ()) for c in row)
    text += " ".join(h for b in blocks for h in getattr(b, "headers", ()))
    text += " ".join(f"{k} {v}" for b in blocks for k, v in getattr(b, "items", ()))
    low = text.lower()
    return [t for t in GLOSSARY if re.search(rf"(?<![\w]){re.escape(t.lower())}", low)]


def _subtitle(doc: dict[str, Any]) -> str:
    m = doc.get("model", {})
    parts = [f"{doc.get('generator', 'lumber')}", f"model {m.get('file', '?')} ({m.get('library') or 'model'}, "
             f"{m.get('task', '?')})", f"seed {doc.get('seed', 0)}"]
    return " · ".join(p for p in parts if p)


def _status(doc: dict[str, Any]) -> list[Block]:
    """The header's verdict: every failed check by name and message (gated or not), never hidden; and the
    decision rule the cases are decided by."""
    out: list[Block] = []
    checks = doc.get("checks") or []
    failed = [c for c in checks if c.get("passed") is False]
    undecided = [c for c in checks if c.get("passed") is None]
    if failed:
        out.append(Para(f"{len(failed)} check(s) FAILED: " + "; ".join(
            f"{c.get('name')} ({'gates --check' if c.get('gate') else 'not gating'}): {_summary(c.get('message', ''))}"
            for c in failed) + ".", "warn"))
    elif checks:
        out.append(Para(f"All {len(checks) - len(undecided)} checks passed"
                        + (f"; {len(undecided)} not decided" if undecided else "") + "."))
    rule = (doc.get("cases") or {}).get("decision_rule")
    if rule:
        out.append(Para(f"Decision rule: {rule.get('text')} (the bank's cutoff, not the model's default)."))
    return out


# -- model card ------------------------------------------------------------------------------------------

def model_section(doc: dict[str, Any]) -> list[Block]:
    m = doc.get("model", {})
    sh = m.get("shape", {})
    classes = m.get("classes")
    facts = [
        ("file", m.get("file")), ("sha256", str(m.get("sha256", ""))[:16]),
        ("library", " ".join(x for x in (m.get("library"), m.get("model_type")) if x) or "—"),
        ("task", m.get("task")), ("classes", _classes(classes, m.get("class_names"))),
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


def _classes(classes: list[Any] | None, names: list[str] | None) -> str:
    """The model's classes, each with its name when the report names them (``0: paid, 1: default``)."""
    if names:
        labels = classes or list(range(len(names)))
        return ", ".join(f"{num(lab)}: {n}" for lab, n in zip(labels, names))
    return ", ".join(map(str, classes)) if classes else "—"


def _categories(f: dict[str, Any]) -> str:
    """A feature's categories by label (the first 8, then how many in all), a 0/1 flag's note, else their count
    or a dash."""
    words = f.get("words")
    if words:  # what a flag's values mean: "0: paid on time; 1: payment delayed 1+ month"
        return "; ".join(f"{num(v)}: {t}" for v, t in words)
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
    out: list[Block] = [Para(f"Global attribution ν(k) over {count(a.get('rows'))} {a.get('data', '')} rows: each "
                             "feature's average signed contribution to the margin, for the model as a whole "
                             "(never a reason for one case: each case's reasons are in its section); "
                             f"the {TOP_FEATURES} largest by magnitude.")]
    for o in a.get("outputs", []):
        feats = [f for f in o.get("features", []) if f.get("nu")][:TOP_FEATURES]
        labels = [f["feature"] for f in feats]
        values = [float(f["nu"]) for f in feats]
        fallback = table(("feature", "ν"), [(f["feature"], num(f["nu"], 4)) for f in feats])
        title = f"ν(k) for output {o.get('output')} (average margin {num(o.get('expected_margin'), 4)})"
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
    names = class_names(doc)
    head = (f"{c['count']} case(s) from {c.get('file')}; decision sought: "
            f"{'another class' if tgt is None else _class(tgt, names)}.")
    if c.get("reasons_per_case"):
        head += (f" Each case lists at most {c['reasons_per_case']} principal reasons.")
    if c.get("materiality"):
        head += (f" A numeric change below {pct(c.get('materiality_share'))} of its feature's standard deviation "
                 f"(over the {c.get('materiality_rows')} rows) is not material: it is flagged fragile.")
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
    dist = [(f"case {it.get('id') or it['row']}", it["sensitive"]["distance"]) for it in c["items"]
            if isinstance(it.get("sensitive"), dict) and isinstance(it["sensitive"].get("distance"), (int, float))]
    if dist:
        title = "How near each case is to another decision (sensitive tests)"
        out.append(Figure(bar_chart([d[0] for d in dist], [float(d[1]) for d in dist], title=title,
                                    chart_id="distances"), title,
                          table(("case", "distance"), [(a, num(b)) for a, b in dist])))
    for it in c["items"]:
        out.extend(_case(it, c.get("classes"), names))
    return out


def class_names(doc: dict[str, Any]) -> dict[str, str]:
    """``{class label as text: its name}`` when the report names the classes (``cases.class_names``), else {}."""
    c = doc.get("cases") or {}
    names = c.get("class_names")
    if not names:
        return {}
    labels = c.get("classes") or [str(i) for i in range(len(names))]
    return {_key(lab): str(n) for lab, n in zip(labels, names)}


def _key(v: Any) -> str:
    """A class label as text: ``1``, ``1.0`` and ``"1"`` alike."""
    if isinstance(v, float) and v.is_integer():
        return str(int(v))
    return str(v)


def _class(v: Any, names: dict[str, str] | None = None) -> str:
    """A decision for people: the class's name when the report names the classes, else ``class LABEL``."""
    if names and _key(v) in names:
        return names[_key(v)]
    return f"class {num(v)}"


def _named(v: Any, names: dict[str, str] | None) -> str:
    """A predicted value: the class's name when the report names the classes, else the value."""
    return names[_key(v)] if names and _key(v) in names else num(v)


def _case(it: dict[str, Any], classes: list[str] | None = None, names: dict[str, str] | None = None) -> list[Block]:
    row = it["row"]
    probs = it.get("probabilities")
    prob = ""
    if isinstance(probs, list) and len(probs) == 2:
        positive = classes[1] if classes else "1"
        prob = f" (probability of {_class(positive, names)}: {pct(probs[1])})"
    elif isinstance(it.get("probability"), float):
        prob = f" (probability {pct(it['probability'])})"
    who = f"Case {it['id']} (row {row})" if it.get("id") else f"Case {row}"
    out: list[Block] = [Open(f"case-{row}", "case"),
                        Heading(3, f"{who}: decided {_class(it.get('prediction'), names)}{prob}", f"case-{row}")]
    if "reasons" in it:
        out.extend(_reasons(it))
    vals = it.get("values", [])  # [feature, value] pairs in the model's feature order
    out.append(Heading(4, "The case's values"))
    out.append(Grid(tuple((str(k), num(v, 6)) for k, v in vals), "values", ("feature", "value")))
    if "sensitive" in it:
        out.extend(_sensitive(it["sensitive"], names))
    if "counterfactual" in it:
        out.extend(_counterfactual(it["counterfactual"], names))
    if "rule" in it:
        out.extend(_local_rule(it["rule"], names))
    if it.get("plausibility"):
        out.extend(_plausibility(it["plausibility"]))
    out.append(Close())
    return out


def _reasons(it: dict[str, Any]) -> list[Block]:
    """Principal reasons in words, and the change that would reverse the decision when one is proven."""
    out: list[Block] = [Heading(4, "Why: principal reasons")]
    reasons = it.get("reasons") or []
    if not reasons:
        return out + [Para("No feature pushed this case toward its decision.")]
    out.append(table(("#", "reason (the case's value)", "contribution toward the decision"),
                     [(str(k), r.get("value_text") or r.get("feature"), num(r.get("contribution"), 3))
                      for k, r in enumerate(reasons, 1)], "reasons"))
    cf = it.get("counterfactual") or {}
    if cf.get("status") == "optimal" and cf.get("verified") and cf.get("changes"):
        ch = "; ".join(f"{c['feature']}: {c.get('before_text') or num(c.get('before'))} → "
                       f"{c.get('after_text') or num(c.get('after'))}" + (" (fragile)" if c.get("fragile") else "")
                       for c in cf["changes"])
        out.append(Para(f"What would reverse the decision: {ch}; proven optimal and verified on the model."))
    return out


def _sensitive(s: dict[str, Any], names: dict[str, str] | None = None) -> list[Block]:
    out: list[Block] = [Heading(4, "How near another decision is (sensitive tests)")]
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
                    f"Distance {num(s.get('distance'))}{bound} to {_class(s.get('target'), names)} "
                    f"({s.get('method')}){ver}."))
    rows = []
    for t in s.get("tests", []):
        cats = t.get("categories_text") or t.get("categories")
        test = (f"{t['feature']} not in {{{', '.join(map(str, cats))}}}" if t.get("categories") is not None
                else f"{t['feature']} {t['op']} {t.get('threshold_text') or num(t.get('threshold'), 6)}")
        rows.append((test, t.get("value_text") or num(t.get("value"), 6),
                     t.get("new_value_text") or num(t.get("new_value"), 6), num(t.get("margin"))))
    if rows:
        out.append(table(("sensitive test (holds now)", "value", "witness", "margin to the test"), rows, "tests"))
    return out


def _counterfactual(cf: dict[str, Any], names: dict[str, str] | None = None) -> list[Block]:
    out: list[Block] = [Heading(4, "Smallest change that changes the decision (counterfactual)")]
    st = cf.get("status")
    if st == "withheld":
        return out + [Para(f"A counterfactual was found but is {cf.get('message')}.", "warn")]
    if st == "error" or cf.get("changes") is None:
        return out + [Para(f"Counterfactual failed: {cf.get('message')}", "warn")]
    if st in ("infeasible", "no_solution"):
        return out + [Para(plain_words(f"{st}: {cf.get('message') or 'no counterfactual under the constraints'}"),
                           "warn")]
    changes = cf.get("changes", [])
    if not changes:
        return out + [Para(f"No change needed: the case is already decided {_class(cf.get('prediction'), names)}.")]
    proof = ("proven optimal" if st == "optimal" else
             f"best found before the time limit, not proven smallest ({st}, gap {num(cf.get('gap'), 3)})")
    ver = "verified on the model" if cf.get("verified") else "NOT verified"
    out.append(Para(f"Decision {_class(cf.get('original_prediction'), names)} → {_class(cf.get('prediction'), names)}; cost "
                    f"{num(cf.get('cost'))} ({cf.get('norm')} norm); {proof}; {ver}."))
    out.append(table(("feature", "before", "after", "change", "note"),
                     [(ch["feature"], ch.get("before_text") or num(ch.get("before"), 6),
                       ch.get("after_text") or num(ch.get("after"), 6),
                       "—" if ch.get("delta") is None else ("+" if ch["delta"] > 0 else "") + num(ch["delta"], 6),
                       Cell("fragile: below materiality", "warn") if ch.get("fragile") else "")
                      for ch in changes], "changes"))
    fragile = [ch["feature"] for ch in changes if ch.get("fragile")]
    if fragile:
        out.append(Para(f"{', '.join(fragile)}: the change is below the feature's materiality, so this "
                        "counterfactual sits on the model's edge rather than describing a material change.", "warn"))
    return out


def _local_rule(r: dict[str, Any], names: dict[str, str] | None = None) -> list[Block]:
    out: list[Block] = [Heading(4, "A rule for changes that reach the decision sought")]
    st = r.get("status")
    if st == "error":
        return out + [Para(f"Counterfactual rules failed: {r.get('message')}", "warn")]
    if st == "already_target":
        return out + [Para(r.get("message") or "already at the target")]
    if st != "found":
        return out + [Para(plain_words(f"{st}: {r.get('message')}"), "warn")]
    tgt = r.get("target") or {}
    concl = _target_text(tgt, names)
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
        pred = _named(smp.get("prediction"), names)
        if smp.get("original_prediction") is not None:
            pred = f"{_named(smp.get('original_prediction'), names)} → {pred}"
        out.append(Para(f"Sample from the rule: {ch}; prediction {pred} "
                        f"({'verified' if smp.get('verified') else 'NOT verified'}, isolation score "
                        f"{score(smp.get('inlier_score'))})."))
    return out


def _free(rule: dict[str, Any]) -> str:
    """``A, B: any value; `` for the features of S a rule leaves free (none of them is a condition)."""
    free = rule.get("unconstrained") or []
    return f"{', '.join(map(str, free))}: any value; " if free else ""


def _target_text(t: dict[str, Any], names: dict[str, str] | None = None) -> str:
    if "interval" in t:
        lo, hi = t["interval"]
        return f"prediction in [{num(lo)}, {num(hi)}]"
    cl = t.get("classes") or []
    return _class(cl[0], names) if len(cl) == 1 else f"a class in {{{', '.join(_class(c, names) for c in cl)}}}"


def _plausibility(p: dict[str, Any]) -> list[Block]:
    names = {"case": "the case", "counterfactual": "optimal counterfactual", "sensitive": "sensitive-test witness",
             "rule_sample": "rule sample"}
    rows = []
    for k in ("case", "counterfactual", "sensitive", "rule_sample"):
        if k in p:
            v = p[k]
            rows.append((names[k], score(v), Cell("—") if v is None else
                         Cell("inlier", "pass") if v >= 0 else Cell("outlier", "warn")))
    return [Heading(4, "Do the proposed points look like real data?"),
            table(("point", "isolation score", "verdict"), rows, "plausibility",
                  "Isolation forest on the training rows: a score ≥ 0 is an inlier.")]


# -- regional, constraints, checks ---------------------------------------------------------------------------

def regional_section(doc: dict[str, Any]) -> list[Block]:
    r = doc.get("regional")
    if not r:
        return [Para("Not computed (needs counterfactual rules and training rows).")]
    if "error" in r:
        return [Para(f"Not available: {r['error']['message']}", "warn")]
    names = class_names(doc)
    cov = r.get("coverage", {})
    out: list[Block] = [Para("Coverage (share of rows in a region whose rule was found): "
                             + ", ".join(f"{k} {pct(v)}" for k, v in cov.items()) + ".")]
    for g in r.get("regions", []):
        out.append(Heading(3, f"Region {g.get('name')}"))
        where = " AND ".join(g.get("region") or []) or "every case"
        info = (f"IF {where}: {count(g.get('training_rows'))} training rows, mostly {_named(g.get('majority'), names)}"
                + (f"; {g['cases_in_region']} of the cases" if g.get("cases_in_region") is not None else "") + ".")
        out.append(Para(info))
        if g.get("status") != "found":
            out.append(Para(plain_words(f"{g.get('status')}: {g.get('message')}"), "warn"))
            continue
        concl = _target_text(g.get("target") or {}, names)
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
    rows = [(c["name"], verdict(c.get("passed")), "yes" if c.get("gate") else "no", plain_words(c.get("message", "")))
            for c in checks]
    failed = [c["name"] for c in checks if c.get("passed") is False]
    lead = Para(f"FAILED: {', '.join(failed)}." if failed else "Every check passed.", "warn" if failed else "")
    return [lead, table(("check", "result", "gates --check", "detail"), rows, "checks")]


SECTIONS: dict[str, Callable[[dict[str, Any]], list[Block]]] = {
    "model": model_section, "attribution": attribution_section, "cases": cases_section,
    "regional": regional_section, "constraints": constraints_section, "checks": checks_section,
}

__all__ = ["SECTIONS", "TITLES", "layout", "cells"]
