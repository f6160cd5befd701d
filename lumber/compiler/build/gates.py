"""Every check a build makes, and which of them ``--check`` turns into a failed build.

A check has ``passed`` True, False, or None (not applicable, e.g. the
equivalence of a deliberately lossy pipeline); ``gate`` says whether a False
fails ``lumber build --check``. Messages are deterministic (no timings) so
they can sit in the report.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from .compile_steps import State

INFEASIBLE = {"counterfactual": ("infeasible", "no_solution"), "rules": ("no_divergent_set", "no_rule",
                                                                         "empty_region")}


@dataclass
class Check:
    name: str
    passed: bool | None
    gate: bool
    message: str
    details: dict[str, Any] = field(default_factory=dict)

    @property
    def failed(self) -> bool:
        return self.gate and self.passed is False

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _rows(n: int) -> str:
    return f"{n:,} row{'s' if n != 1 else ''}"


def _exact_message(target: str, e: dict[str, Any], src: str) -> str:
    if e["exact"]:
        return (f"{target}: margins and decisions equal {src}'s on every data row ({_rows(e['rows'])}, "
                f"max relative difference {e['max_rel_diff']:.3g})")
    return (f"{target}: {e['differing_rows']:,} of {_rows(e['rows'])} differ from {src} "
            f"(max relative difference {e['max_rel_diff']:.3g}"
            f"{'' if e['decisions_equal'] else ', decisions differ'}); the artifact is not exact")


def exactness(st: State) -> list[Check]:
    """Each artifact against the IR it was compiled from and, for a lossless pipeline, against the model.

    After a lossy pipeline (pruning) the comparison with the model is reported, not gated: the
    prune gate bounds that loss."""
    out = []
    gate = st.inp.config.check.exact
    lossy = bool(lossy_passes(st))
    for t in st.targets:
        e, vm = t["exact"], t.get("vs_model")
        if "tolerance" in t:  # a lossy form by request: the tolerance gate bounds it
            continue
        if vm is None:
            msg = _exact_message(t["target"], e, "the model")
            out.append(Check(f"exact[{t['target']}]", bool(e["exact"]), gate, msg, e))
            continue
        if not e["exact"]:
            out.append(Check(f"exact[{t['target']}]", False, gate,
                             _exact_message(t["target"], e, "the pipeline's IR"), e))
        elif not lossy:
            out.append(Check(f"exact[{t['target']}]", bool(vm["exact"]), gate,
                             _exact_message(t["target"], vm, "the model") + " (compiled from the pipeline's IR)", vm))
        else:
            out.append(Check(f"exact[{t['target']}]", True, gate, _exact_message(t["target"], e, "the pipeline's IR"),
                             e))
            same = vm["rows"] - vm.get("differing_decisions", 0)
            out.append(Check(f"agreement[{t['target']}]", bool(vm["decisions_equal"]), False,
                             f"{t['target']} (pruned): decisions equal the model's on {same:,} of {_rows(vm['rows'])} "
                             f"(max relative margin difference {vm['max_rel_diff']:.3g})", vm))
    return out


def lossy_passes(st: State) -> list[dict[str, Any]]:
    """Prune reports that dropped monomials (the pipeline no longer computes the model's function)."""
    if st.passes is None:
        return []
    return [r for r in st.passes["reports"] if r["pass"] in ("prune", "prune-refit")
            and r["metrics"].get("dropped", 0) > 0]


def equivalence(st: State) -> list[Check]:
    cfg = st.inp.config
    if not cfg.check.equivalence or "equivalence" not in st.results:
        return []
    r = st.results["equivalence"]
    lossy = lossy_passes(st)
    if st.compiled_from == "passes" and lossy:
        return [Check("equivalence", None, False, "not applicable: the pipeline prunes (lossy by design); "
                                                  "the prune gate bounds the loss", r)]
    if r["equal"] is None:
        return [Check("equivalence", None, False, f"{r['reason']}; exactness on data is checked instead", r)]
    if r["equal"]:
        return [Check("equivalence", True, True, f"the compiled IR equals the model ({r['method']}: {r['reason']})",
                      r)]
    return [Check("equivalence", False, True, f"the compiled IR is NOT equivalent to the model: {r['reason']}", r)]


def _loss(m: dict[str, Any]) -> float:
    before, after = float(m["metric_before"]), float(m["metric_after"])
    if m["metric"] in ("auc", "accuracy"):
        return before - after
    return (after - before) / before if before else after - before


def pruning(st: State) -> list[Check]:
    if st.passes is None:
        return []
    out = []
    prunes = [r for r in st.passes["reports"] if r["pass"] in ("prune", "prune-refit")]
    for i, r in enumerate(prunes):
        m = r["metrics"]
        name = f"prune[{i}]" if len(prunes) > 1 else "prune"
        if "metric_before" not in m:
            out.append(Check(name, None, False, f"{r['summary']}; no validation rows to measure the loss", m))
            continue
        tol = st.inp.config.check.prune_tolerance
        tol = float(m.get("tol", 0.0)) if tol is None else tol
        loss = _loss(m)
        rel = "" if m["metric"] in ("auc", "accuracy") else " (relative)"
        ok = loss <= tol + 1e-12
        msg = (f"validation {m['metric']} {m['metric_before']:.6f} -> {m['metric_after']:.6f}: loss {loss:.3g}{rel} "
               f"{'within' if ok else 'EXCEEDS'} tolerance {tol:g}; kept {m['kept']:,} of "
               f"{m['monomials_before']:,} monomials")
        out.append(Check(name, ok, True, msg, dict(m, loss=loss, tolerance=tol)))
    return out


def tolerance(st: State) -> list[Check]:
    """``[compile] tolerance``: the artifact's validation loss (recomputed from its margins) within the tolerance,
    and its decisions the model's on at least ``[compile] agreement`` of the validation rows."""
    out = []
    for t in st.targets:
        r = t.get("tolerance")
        if r is None:
            continue
        tol = float(r["tolerance"])
        need = float(r.get("agreement_target", 1.0))
        agree_ok = r.get("agreement") is None or r["agreement"] >= need
        ok = r["loss"] <= tol + 1e-12 and agree_ok
        rel = " (relative)" if r["metric"] == "rmse" else ""
        agree = (f", decisions agree on {100 * r['agreement']:.2f}%"
                 + ("" if agree_ok else f" (BELOW the required {100 * need:.2f}%)")) if r.get("agreement") is not None else ""
        share = f", {100 * r['exact_share']:.1f}% of rows on the exact path" if r.get("exact_share") is not None else ""
        msg = (f"{t['target']} ({r['form']}): validation {r['metric']} {r['before']:.6f} -> {r['after']:.6f} on "
               f"{_rows(r['rows'])}: loss {r['loss']:.3g}{rel} {'within' if r['loss'] <= tol + 1e-12 else 'EXCEEDS'} tolerance {tol:g}"
               f"{agree}{share}; |margin change| max {r['max_abs_margin_change']:.3g}, "
               f"mean {r['mean_abs_margin_change']:.3g}")
        out.append(Check(f"tolerance[{t['target']}]", ok, True, msg, r))
    return out


ANALYSIS_WORDS = {"sensitive": "sensitive tests", "counterfactual": "counterfactuals", "rules": "rules"}


def _failure(analysis: str, rec: dict[str, Any]) -> str:
    """Why an analysis failed for a case (an error, or a result the model does not confirm); empty if it did not."""
    if rec["status"] != "ok":
        return f"{rec['error']['type']}: {rec['error']['message']}"
    res = rec["result"]
    if analysis == "sensitive" and res.get("reachable") and not res.get("verified"):
        return "the witness point is NOT verified on the model"
    if analysis == "counterfactual" and res.get("status") == "unverified":
        return res.get("message") or "the counterfactual is NOT verified on the model"
    return ""


def analysis_failures(st: State) -> list[Check]:
    """An analysis that failed for any case (an error, an unverified answer) fails the build: always gated."""
    out = []
    for analysis in ("sensitive", "counterfactual", "rules"):
        recs = st.results.get(analysis)
        if recs is None:
            continue
        bad = [(rec["row"], why) for rec in recs if (why := _failure(analysis, rec))]
        n = len(recs)
        word = ANALYSIS_WORDS[analysis]
        if bad:
            msg = f"{word} failed on {len(bad)} of {n} cases: " + "; ".join(f"case {r}: {w}" for r, w in bad[:3])
            msg += f"; ... {len(bad) - 3} more" if len(bad) > 3 else ""
        else:
            msg = f"{word} ran on every case ({n})"
        out.append(Check(f"analysis[{analysis}]", not bad, True, msg, {"cases": n, "failed": len(bad)}))
    return out


def explanations(st: State) -> list[Check]:
    cfg = st.inp.config
    out = []
    for analysis in ("sensitive", "counterfactual", "rules"):
        recs = st.results.get(analysis)
        if recs is None:
            continue
        bad: list[str] = []
        for rec in recs:
            row = rec["row"]
            if rec["status"] != "ok":
                continue  # counted by analysis_failures
            res = rec["result"]
            if analysis == "sensitive" and not res.get("reachable"):
                bad.append(f"case {row}: {res.get('message') or 'no decision change reachable'}")
            elif res.get("status") in INFEASIBLE.get(analysis, ()):
                bad.append(f"case {row}: {res['status']}: {res.get('message', '')}".rstrip(": "))
        required = analysis in cfg.check.require
        n = len(recs)
        if bad:
            msg = f"{analysis}: {len(bad)} of {n} cases have no explanation; " + "; ".join(bad[:3])
            msg += f"; ... {len(bad) - 3} more" if len(bad) > 3 else ""
        elif any(rec["status"] != "ok" for rec in recs):
            ran = sum(rec["status"] == "ok" for rec in recs)
            msg = f"{analysis}: every case that ran ({ran} of {n}) has an explanation"
        else:
            msg = f"{analysis}: every case ({n}) has an explanation"
        out.append(Check(f"explanations[{analysis}]", not bad, required, msg, {"cases": n, "missing": len(bad)}))
    return out


def all_checks(st: State) -> list[Check]:
    return exactness(st) + equivalence(st) + pruning(st) + tolerance(st) + analysis_failures(st) + explanations(st)


__all__ = ["Check", "all_checks", "analysis_failures", "equivalence", "exactness", "explanations", "lossy_passes",
           "pruning", "tolerance"]
