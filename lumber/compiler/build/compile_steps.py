"""Build steps that make and check artifacts: the pass pipeline, each target, equivalence.

Every step runs through the :class:`~lumber.compiler.build.cache.StepCache`
with a key naming everything it read, so an unchanged input is not rebuilt.
Artifacts are checked where they are made: each target's margins are
compared with the reference evaluator of the IR it was compiled from on every
data row (train, validation and cases), and its speed is measured against the
reference evaluator on the same rows (kept in the cache, so a rebuild from
unchanged inputs reports the same numbers).
"""

from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from lumber.ir import LumberError, SourceSpan, load_ir, save_ir

from lumber.passes.deploy import deployable
import lumber
from lumber.backends.base import fingerprint
from lumber.ir.diagnostics import error
from lumber.passes.base import PassContext, describe_ir
from lumber.passes.quality import make_metric

from ..targets import get_target
from .cache import Entry, StepCache, digest
from .inputs import Inputs
from .validate import locate

EXACT_RTOL = 1e-12
SPEED_ROWS = 10_000


@dataclass
class State:
    """What the steps share: inputs, cache, the IR the targets compile from, and step records."""

    inp: Inputs
    cache: StepCache
    ir: Any = None
    ir_fingerprint: str = ""
    compiled_from: str = "model"
    passes: dict[str, Any] | None = None
    targets: list[dict[str, Any]] = field(default_factory=list)
    artifacts: list[tuple[str, Path]] = field(default_factory=list)
    """(name in the output folder, file in the cache)."""
    results: dict[str, Any] = field(default_factory=dict)
    steps: list[dict[str, Any]] = field(default_factory=list)
    progress: bool = False
    """Show a progress bar on stderr for per-case explanations (``lumber build``/``report`` on a terminal)."""

    def step(self, name: str, key: str, compute: Any) -> Entry:
        t0 = time.perf_counter()
        entry = self.cache.run(name, key, compute)
        self.steps.append({"step": name, "key": key[:16], "cached": entry.cached,
                           "seconds": round(time.perf_counter() - t0, 6)})
        return entry

    def data_hashes(self) -> dict[str, str | None]:
        h = self.inp.hashes
        return {r: h.get(r) for r in ("train", "validation", "cases", "data_header")}


def run_passes(st: State) -> None:
    """The pass pipeline (or none); sets ``st.ir`` to what the targets compile."""
    inp = st.inp
    cfg = inp.config
    if not inp.passes:
        st.ir, st.compiled_from = inp.forest, "model"
        st.ir_fingerprint = fingerprint(inp.forest)
        return
    key = digest("passes", inp.hashes["model"], cfg.compile.passes, st.data_hashes(), cfg.data.label, cfg.seed)
    made: dict[str, Any] = {}

    def compute(files: Path) -> dict[str, Any]:
        data: dict[str, Any] = {}
        train, valid = inp.table("train"), inp.table("validation")
        if train is not None:
            data["train"] = (train.X, train.y)
        if valid is not None:
            data["valid"] = (valid.X, valid.y)
        ctx = PassContext()
        ir = lumber.run(inp.forest, inp.passes, data=data or None, context=ctx)
        save_ir(ir, files / "ir.lumber")
        made["ir"] = ir
        return {"pipeline": cfg.compile.passes, "final": type(ir).__name__, "describe": describe_ir(ir),
                "reports": [{"pass": r.pass_name, "summary": r.summary, "metrics": _plain(r.metrics)}
                            for r in ctx.reports],
                "timings": [{"pass": t.pass_text, "seconds": t.seconds, "ir_in": t.ir_in, "ir_out": t.ir_out}
                            for t in ctx.timings]}

    entry = st.step("passes", key, compute)
    ir = made.get("ir")
    if ir is None:
        ir = load_ir(entry.file("ir.lumber"))
    st.passes = entry.result
    st.artifacts.append(("ir.lumber", entry.file("ir.lumber")))
    # a Polynomial (pruned or not) is compiled as its exact oblivious tables: the artifacts compute
    # what the pipeline produced
    st.ir, st.compiled_from = deployable(ir), "passes"
    st.ir_fingerprint = fingerprint(st.ir)


def _all_rows(inp: Inputs) -> np.ndarray:
    parts = [t.X for t in inp.tables.values()]
    return np.concatenate(parts) if parts else np.zeros((0, inp.forest.n_features))


def _speed_rows(inp: Inputs) -> np.ndarray:
    for role in ("validation", "train", "cases"):
        t = inp.table(role)
        if t is not None:
            X = t.X
            reps = int(np.ceil(1000 / len(X)))
            return np.tile(X, (reps, 1))[:SPEED_ROWS] if reps > 1 else X[:SPEED_ROWS]
    return np.zeros((0, inp.forest.n_features))


def _best_time(fn: Any, X: np.ndarray, budget: float = 0.05) -> float:
    """Seconds per call: the best of 3 rounds, each repeating until ``budget`` seconds pass."""
    best = np.inf
    for _ in range(3):
        n, t0 = 0, time.perf_counter()
        while True:
            fn(X)
            n += 1
            dt = time.perf_counter() - t0
            if dt >= budget:
                break
        best = min(best, dt / n)
    return float(best)


def compare(reference: np.ndarray, got: np.ndarray, schema: Any) -> dict[str, Any]:
    """Margins and decisions of an artifact against the reference evaluator."""
    ref = np.asarray(reference, dtype=np.float64).reshape(len(reference), -1)
    out = np.asarray(got, dtype=np.float64).reshape(len(got), -1)
    n = ref.shape[0]
    if n == 0:
        return {"rows": 0, "exact": True, "max_abs_diff": 0.0, "max_rel_diff": 0.0, "decisions_equal": True,
                "differing_rows": 0, "differing_decisions": 0}
    both_nan = np.isnan(ref) & np.isnan(out)
    diff = np.where(both_nan, 0.0, np.abs(ref - out))
    diff = np.where(np.isnan(diff), np.inf, diff)
    rel = diff / np.maximum(np.abs(ref), 1e-300)
    rel = np.where(diff == 0, 0.0, rel)
    bad_rows = (rel > EXACT_RTOL).any(axis=1)
    shape = (n,) if ref.shape[1] == 1 else ref.shape
    dec_ref = np.asarray(schema.decide(ref.reshape(shape)))
    dec_out = np.asarray(schema.decide(out.reshape(shape)))
    same_dec = np.array([a == b for a, b in zip(dec_ref.tolist(), dec_out.tolist())])
    return {"rows": int(n), "exact": bool(not bad_rows.any() and same_dec.all()), "max_abs_diff": float(diff.max()),
            "max_rel_diff": float(rel.max()), "decisions_equal": bool(same_dec.all()),
            "differing_rows": int((bad_rows | ~same_dec).sum()), "differing_decisions": int((~same_dec).sum())}


def compile_targets(st: State) -> None:
    """Each target: emit, check exactness on every data row, measure speed."""
    inp = st.inp
    cfg = inp.config
    for target in inp.targets:
        key = digest("compile", target, st.ir_fingerprint, cfg.compile.name, cfg.compile.threads, st.data_hashes(),
                     cfg.data.max_cases, *((cfg.compile.tolerance, cfg.compile.agreement, cfg.data.label, cfg.seed)
                                           if tolerant(st, target) else ()))
        fname = cfg.compile.name + get_target(target).suffix
        try:
            entry = st.step(f"compile-{target}", key, lambda files, t=target, f=fname: _compile_one(st, t, files, f))
        except LumberError as exc:
            raise _at_target(st, target, exc) from None
        st.targets.append(entry.result)
        for p in entry.files():
            st.artifacts.append((p.relative_to(entry.folder / "files").as_posix(), p))


def _at_target(st: State, target: str, exc: LumberError) -> LumberError:
    """A backend's refusal, placed at ``[compile] targets`` of the build file and saying what was compiled
    (an ONNX refusal of the pruned polynomial's re-composed trees read ``<model>: error: ...``)."""
    cfg = st.inp.config
    where = None
    line = None
    if cfg.text:
        ln, col, line = locate(cfg.text, "compile", "targets")
        where = SourceSpan(str(cfg.path), ln, col, ln, col + len("targets"))
    what = "the model" if st.compiled_from == "model" else f"the IR the passes '{cfg.compile.passes}' give"
    first = exc.diagnostics[0]
    notes = [*first.notes, f"what was compiled: {what}"]
    if st.compiled_from != "model":
        notes.append(f"drop '{target}' from [compile] targets, or compile the model itself (no [compile] passes)")
    else:
        notes.append(f"drop '{target}' from [compile] targets")
    head = error(f"target '{target}' cannot be built: {first.message}", where, *notes, source_line=line)
    return type(exc)([head, *exc.diagnostics[1:]])


def tolerant(st: State, target: str) -> bool:
    """``[compile] tolerance`` applies to this target (``c``): it may be a lossy form."""
    return target == "c" and st.inp.config.compile.tolerance is not None


def _compile_one(st: State, target: str, files: Path, fname: str) -> dict[str, Any]:
    inp = st.inp
    t0 = time.perf_counter()
    lossy = tolerant(st, target)
    name = {"name": inp.config.compile.name}
    if lossy:
        train, valid = inp.table("train"), inp.table("validation")
        assert train is not None and valid is not None  # inputs.prepare checked
        pred = lumber.compile_within(st.ir, inp.config.compile.tolerance,
                                     {"train": (train.X, train.y), "valid": (valid.X, valid.y)},
                                     agreement=inp.config.compile.agreement, path=files / fname,
                                     threads=inp.config.compile.threads, options=lumber.FastestOptions(**name))
    else:
        Options = get_target(target).Options  # the artifact's name, for the targets whose files carry one
        named = any(f.name == "name" for f in dataclasses.fields(Options))
        train = inp.table("train")
        pred = lumber.compile(st.ir, target=target, path=files / fname, threads=inp.config.compile.threads,
                              options=Options(**name) if named else None,
                              sample=train.X if train is not None else None)  # the C walk is timed on them
    build_seconds = time.perf_counter() - t0
    X = _all_rows(inp)
    exact = compare(st.ir.evaluate(X), pred.predict_raw(X), st.ir.schema)
    result: dict[str, Any] = {"target": target, "file": fname, "fingerprint": getattr(pred, "fingerprint", ""),
                              "compiled_from": st.compiled_from, "exact": exact,
                              "bytes": sum(p.stat().st_size for p in files.rglob("*") if p.is_file()),
                              "build_seconds": build_seconds}
    if lossy:
        result["tolerance"] = _validation_loss(st, pred)
    if st.ir is not inp.forest:
        result["vs_model"] = compare(inp.forest.evaluate(X), pred.predict_raw(X), inp.forest.schema)
    Xs = _speed_rows(inp)
    if get_target(target).artifact_predicts and len(Xs):
        ref = _best_time(inp.forest.evaluate, Xs)
        got = _best_time(pred.predict_raw, Xs)
        result["speed"] = {"rows": int(len(Xs)), "reference_seconds": ref, "seconds": got,
                           "speedup": ref / got if got > 0 else None, "threads": inp.config.compile.threads}
    return result


def _validation_loss(st: State, pred: Any) -> dict[str, Any]:
    """The artifact's loss on the validation rows, recomputed from its own margins (what the gate checks)."""
    valid = st.inp.table("validation")
    assert valid is not None
    schema = st.inp.forest.schema
    metric = make_metric("auto", schema, valid.y)
    ref, got = st.inp.forest.evaluate(valid.X), np.asarray(pred.predict_raw(valid.X)).reshape(-1)
    before, after = metric(ref), metric(got)
    loss = before - after if metric.higher_is_better else ((after - before) / before if before else after - before)
    rep = pred.report.get("tolerance", {})
    chosen = rep.get("chosen", pred.report.get("chosen"))
    form = rep.get("forms", {}).get(chosen, {})
    agree = float(np.mean(schema.class_index(ref) == schema.class_index(got))) \
        if schema.task.name == "BINARY" else None
    return {"tolerance": st.inp.config.compile.tolerance, "agreement_target": st.inp.config.compile.agreement,
            "metric": metric.name, "before": before, "after": after,
            "loss": loss, "agreement": agree, "rows": int(valid.X.shape[0]), "form": chosen,
            "exact_share": form.get("exact_share"), "trees": form.get("trees"),
            "max_abs_margin_change": float(np.abs(got - ref).max(initial=0.0)),
            "mean_abs_margin_change": float(np.abs(got - ref).mean()) if got.size else 0.0}


def check_equivalence(st: State) -> None:
    """Whether the IR the targets compile from computes the model's function (decided symbolically)."""
    inp = st.inp
    if not inp.config.check.equivalence:
        return
    if st.ir is inp.forest:
        st.results["equivalence"] = {"equal": True, "decided": True, "method": "identity",
                                     "reason": "the targets are compiled from the model's own IR"}
        return
    if st.passes is not None and any(r["pass"] in ("prune", "prune-refit") and r["metrics"].get("dropped", 0) > 0
                                     for r in st.passes["reports"]):
        st.results["equivalence"] = {"equal": None, "decided": False, "method": "none",
                                     "reason": "the pipeline prunes (lossy by design)"}
        return
    key = digest("equivalence", inp.hashes["model"], st.ir_fingerprint)

    def compute(files: Path) -> dict[str, Any]:
        try:
            r = lumber.equivalent(inp.forest, st.ir)
        except LumberError as exc:
            return {"equal": None, "decided": False, "method": "polynomial",
                    "reason": f"not decidable: {exc.diagnostics[0].message}"}
        out: dict[str, Any] = {"equal": bool(r.equal), "decided": True, "method": "polynomial", "reason": r.reason}
        if not r.equal and r.counterexample is not None:
            out["counterexample"] = dict(zip(inp.forest.schema.feature_names, _plain(r.counterexample)))
            out["difference"] = _plain(r.difference)
        return out

    st.results["equivalence"] = st.step("equivalence", key, compute).result


def _plain(v: Any) -> Any:
    if isinstance(v, dict):
        return {str(k): _plain(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [_plain(x) for x in v]
    if isinstance(v, np.ndarray):
        return _plain(v.tolist())
    if isinstance(v, np.generic):
        return _plain(v.item())
    if isinstance(v, float) and not np.isfinite(v):
        return None if np.isnan(v) else ("inf" if v > 0 else "-inf")
    return v


__all__ = ["State", "check_equivalence", "compare", "compile_targets", "run_passes", "tolerant"]
