"""Write bench/README.md from bench/results/*.json: one row per claim, its current number and the command.

    python bench/_tables.py            # rewrite bench/README.md (a helper: run_all.py and make bench skip it)
    python bench/_tables.py --check    # exit 1 when bench/README.md is not what the results give

Every number in the README comes from a results file; a claim whose file is missing, or whose file
lacks a field this script reads (a bench script changed its output), shows what is missing instead
of a number, so a stale claim cannot pass for a current one. ``tests/test_docs_history.py`` checks
that bench/README.md equals this script's output.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

BENCH = Path(__file__).resolve().parent
RESULTS = BENCH / "results"
README = BENCH / "README.md"


class Missing(Exception):
    """A results file or a field of it is not there."""


def load(name: str) -> dict[str, Any]:
    path = RESULTS / name
    if not path.exists():
        raise Missing(f"no `results/{name}`")
    data = json.loads(path.read_text(encoding="utf-8"))
    if not isinstance(data, dict):
        raise Missing(f"`results/{name}` is not a JSON object")
    return data


def get(d: Any, *keys: str | int) -> Any:
    """``d[k0][k1]...``, or :class:`Missing` naming the first key that is not there."""
    for k in keys:
        try:
            d = d[k]
        except (KeyError, IndexError, TypeError):
            raise Missing(f"no field `{'.'.join(str(x) for x in keys)}`") from None
    return d


def num(x: float, digits: int = 3) -> str:
    """``x`` with ``digits`` significant digits, thousands separated."""
    if x == 0:
        return "0"
    if abs(x) >= 10 ** digits:
        return f"{x:,.0f}"
    return f"{x:.{digits}g}"


def pct(x: float) -> str:
    p = 100 * x
    return f"{p:.0f}%" if abs(p - round(p)) < 1e-9 else f"{p:.2f}%"


@dataclass(frozen=True)
class Claim:
    what: str
    command: str
    result: Callable[[], str]
    target: str = ""


def run_line(d: dict[str, Any]) -> str:
    """The run's machine and load, as the results file records them."""
    m = d.get("machine")
    load = None
    if isinstance(m, dict):
        start, end = m.get("loadavg_start"), m.get("loadavg_end")
        if start and end:
            load = f"{start[0]:.2f} -> {end[0]:.2f}"
    return load or ""


def recorded(name: str, default: str) -> str:
    """The command a results file says produced it (``command``), else ``default``."""
    try:
        command = load(name).get("command")
    except Missing:
        return default
    return command if isinstance(command, str) and command else default


def merged_command(name: str) -> str:
    """The part commands of a merged results file, then the merge (``bench/rules.py --merge``)."""
    default = "the part commands in bench/rules.py's docstring, then bench/rules.py --merge PARTS"
    try:
        parts = [str(get(p, "command")) for p in get(load(name), "parts")]
    except Missing:
        return default
    stems = [c.split("--stem ", 1)[1].split()[0] for c in parts if "--stem " in c]
    if not parts or len(stems) != len(parts):
        return default
    return "; ".join(parts) + f"; bench/rules.py --merge {','.join(stems)}"


# --- inference: one row per model of an inference-style results file --------------------------------

def ns_row_tree(peer: dict[str, Any], rows: int, trees: int) -> float:
    return float(get(peer, "batch_1t_cpu")) / rows / trees * 1e9


def inference_rows(name: str, command: str) -> list[Claim]:
    try:
        d = load(name)
        models = get(d, "models")
    except Missing as e:
        return [Claim(f"inference ({name})", command, lambda e=e: str(e))]
    out = []
    for model, m in models.items():
        def result(m: dict[str, Any] = m, d: dict[str, Any] = d) -> str:
            rows, trees = int(get(d, "rows")), int(get(m, "trees"))
            peers = get(m, "peers")
            mine = {k: v for k, v in peers.items() if k.startswith("lumber") and "batch_1t_cpu" in v}
            if not mine:
                raise Missing("no lumber form")
            best_name = min(mine, key=lambda k: ns_row_tree(mine[k], rows, trees))
            best = ns_row_tree(mine[best_name], rows, trees)
            me = mine[best_name]
            extra = "".join([
                f", 2 threads {num(float(me['speedup_2t']))}x one" if me.get("speedup_2t") else "",
                f", one row from Python {num(float(me['row_python_us']))} us" if me.get("row_python_us") else "",
                f", one row (1-row 2-D array) p50 {num(float(me['row_p50_us']))} us, p99 "
                f"{num(float(me['row_p99_us']))} us" if me.get("row_p50_us") else "",
                f", compiled in {num(float(me['compile_cpu_s']))} s CPU" if me.get("compile_cpu_s") else ""])
            parts = [f"{best_name} {num(best)} ns/row/tree (1 thread, CPU), "
                     f"{get(me, 'corpus_mismatch')} corpus mismatches{extra}"]
            others = []
            for k, v in peers.items():
                if k.startswith("lumber") or "batch_1t_cpu" not in v:
                    continue
                t = ns_row_tree(v, rows, trees)
                others.append(f"{k} {num(t)} ({num(t / best)}x, {v.get('corpus_mismatch', '?')} mismatches)")
            load = run_line(d)
            return "; ".join(parts + others) + (f" (load average {load})" if load else "")
        note = get(m, "notes") if "notes" in m else model
        out.append(Claim(f"{model}: {note}", command, result))
    return out


# --- oblivious tables: forms against forest C ----------------------------------------------------------

def forms_rows(name: str, command: str, what: str) -> list[Claim]:
    try:
        models = get(load(name), "models")
    except Missing as e:
        return [Claim(what, command, lambda e=e: str(e))]
    out = []
    for model, m in models.items():
        def result(m: dict[str, Any] = m) -> str:
            forms = get(m, "forms")
            parts = []
            for k, f in forms.items():
                if k == "forest C":
                    continue
                bits = [f"{k}: {num(float(get(f, 'trees')), 4)} trees",
                        f"{num(float(get(f, 'speedup_vs_forest_c')))}x forest C per row"]
                if "max_abs_diff" in f:
                    bits.append(f"max diff {float(f['max_abs_diff']):.1e}")
                if "cover_bound_trees" in f:
                    bits.append(f"cover bound {num(float(f['cover_bound_trees']), 4)}")
                if "within" in f:
                    bits.append(f"test loss {float(get(f, 'loss')):+.4f}")
                    if f.get("agreement") is not None:
                        bits.append(f"test agreement {pct(float(f['agreement']))}")
                    if f.get("exact_share_test") is not None:
                        bits.append(f"{pct(float(f['exact_share_test']))} of rows on the exact path")
                    if not f["within"]:
                        bits.append("not within the tolerance")
                bits.append(f"built in {num(float(get(f, 'build_seconds')))} s")
                parts.append(", ".join(bits))
            return "; ".join(parts)
        out.append(Claim(f"{what}, {model}", command, result))
    return out


# --- exact tables on real rows: lumber's forms against the bit-exact peers -------------------------------

def real_rows(name: str, command: str) -> list[Claim]:
    try:
        d = load(name)
        models = get(d, "models")
    except Missing as e:
        return [Claim(f"exact tables on real rows ({name})", command, lambda e=e: str(e))]
    out = []
    for model, m in models.items():
        def result(m: dict[str, Any] = m, d: dict[str, Any] = d) -> str:
            peers = {k: v for k, v in get(m, "peers").items() if v.get("status") == "ok"}
            tables, forest = get(peers, "lumber tables"), get(peers, "lumber forest C")
            t = float(get(tables, "ns_row"))
            exact = "bit-exact" if tables.get("exact") else f"max diff {float(get(tables, 'max_abs_diff')):.1e}"
            build = f", build {num(float(tables['build_cpu_s']))} s CPU" if "build_cpu_s" in tables else ""
            parts = [f"lumber tables {num(t)} ns/row ({num(float(get(tables, 'trees')), 4)} tables{build}, {exact}); "
                     f"lumber forest C {num(float(get(forest, 'ns_row')))} ns/row ({num(t / float(forest['ns_row']))}x)"]
            for k, v in peers.items():
                if k.startswith("lumber"):
                    continue
                mark = "bit-exact" if v.get("exact") else f"diff {float(v.get('max_abs_diff', float('nan'))):.1e}"
                parts.append(f"{k} {num(float(get(v, 'ns_row')))} ({mark}; tables {num(t / float(v['ns_row']))}x)")
            lb, la = get(m, "loadavg_before", 0), get(m, "loadavg_after", 0)
            return "; ".join(parts) + f" (CPU time per row, 1 thread, load average {lb:.2f} -> {la:.2f})"
        out.append(Claim(f"{model}: {get(m, 'notes')}", command, result,
                         "tables <= 1/2 the fastest bit-exact peer and <= 2/3 forest C"))
    return out


def build_result() -> str:
    d = load("oblivious-build.json")
    m = get(d, "machine")
    parts = [f"{k} {num(float(get(v, 'build_cpu_s')))} s ({int(get(v, 'tables')):,} tables)"
             for k, v in get(d, "models").items()]
    return "; ".join(parts) + (f" (process CPU seconds; load average {float(m['loadavg_start'][0]):.2f} -> "
                               f"{float(m['loadavg_end'][0]):.2f})")


def table_cost_result() -> str:
    d = load("oblivious-table-cost.json")
    m = get(d, "machine")
    by = ", ".join(f"d{k} {num(float(v))}" for k, v in get(d, "ns_by_depth").items())
    return (f"ns per row of one more table by depth: {by} (C table runtime, 1 thread, real rows of "
            f"{', '.join(get(d, 'models'))}; load average {float(m['loadavg_start'][0]):.2f} -> "
            f"{float(m['loadavg_end'][0]):.2f})")


def stream_result() -> str:
    d = load("predict-stream.json")
    return (f"{int(get(d, 'rows')):,} rows ({float(get(d, 'csv_bytes')) / 1e9:.2f} GB CSV): peak RSS "
            f"{num(float(get(d, 'peak_rss_mb')))} MB, {num(float(get(d, 'wall_seconds')))} s wall "
            f"(load average {get(d, 'load_before', 0)} -> {get(d, 'load_after', 0)})")


def population_result(name: str) -> Callable[[], str]:
    def result() -> str:
        pop = get(load(name), "population")
        parts = []
        for key, e in pop.items():
            for label in ("none", "constrained"):
                a = e.get(label)
                if not a:
                    continue
                parts.append(f"{key.replace('/', ' ')} {label}: {num(float(get(a, 'rows_per_s')))} rows/s, "
                             f"proven {pct(float(get(a, 'proven')))}, unanswered {pct(float(get(a, 'unanswered')))}")
        return "; ".join(parts)
    return result


# --- the other benches ----------------------------------------------------------------------------------

def load_result() -> str:
    d = load("load.json")
    s = get(d, "seconds_median")
    return (f"lumber {num(get(s, 'lumber'))} s, {num(get(d, 'lumber_memory_ratio_to_file'))}x the file in memory "
            f"(LightGBM {num(get(s, 'lightgbm'))} s, treelite {num(get(s, 'treelite'))} s); "
            f"bit-exact: {get(d, 'lumber_exact_vs_lightgbm_raw_score')}")


def prune_result() -> str:
    d = load("prune.json")
    c = get(d, "conversion")
    parts = [f"polynomial of 500 x 63: {num(float(get(c, 'monomials')), 6)} monomials, "
             f"peak {num(float(get(c, 'peak_memory_mb')))} MB"]
    for ds in get(d, "datasets"):
        refit = get(ds, "refit")
        parts.append(f"{get(ds, 'dataset')} ({get(ds, 'selection')}): paper's rule {num(float(get(ds, 'reduction')))}x "
                     f"fewer monomials, test AUC loss {float(get(ds, 'test_auc_loss')):+.5f}; "
                     f"`prune{{method=refit}}` {num(float(get(refit, 'reduction')))}x, "
                     f"{float(get(refit, 'test_auc_loss')):+.5f}")
    return "; ".join(parts)


def prune_seeds_result() -> str:
    rows = [r for r in get(load("prune-seeds.json"), "rows") if r.get("selection", "best-auc") == "best-auc"]
    if not rows:
        raise Missing("no best-auc rows in `results/prune-seeds.json`")
    paper = [float(get(r, "reduction")) for r in rows]
    refit = [float(get(r, "refit", "reduction")) for r in rows]
    return (f"adult over {len(rows)} splits: paper's rule median {num(statistics.median(paper))}x "
            f"({num(min(paper))}-{num(max(paper))}x), `prune{{method=refit}}` median {num(statistics.median(refit))}x "
            f"({num(min(refit))}-{num(max(refit))}x)")


def sklearn_lower_result() -> str:
    rows = get(load("sklearn_lower.json"), "rows")
    return "; ".join(f"{get(r, 'model')}: lumber {num(float(get(r, 'lumber_s')))} s, treelite "
                     f"{num(float(get(r, 'treelite_s')))} s, output matches: {get(r, 'exact')}" for r in rows)


def attribution_result() -> str:
    d = load("attribution.json")
    digits = get(d, "digits")
    rho = [float(get(x, "spearman_abs_nu_vs_shap")) for x in digits]
    speed = [float(get(x, "shap_seconds")) / float(get(x, "monoforest_seconds")) for x in digits]
    return (f"Spearman {min(rho):.2f}-{max(rho):.2f} with SHAP's mean |value| over {len(digits)} digits; "
            f"{min(speed):.0f}-{max(speed):.0f}x faster than SHAP; signed")


def sensitive_result() -> str:
    t = get(load("sensitive.json"), "throughput", 0)
    return (f"{get(t, 'model')}: {num(float(get(t, 'cases_per_s_cpu')))} cases/s CPU, "
            f"{num(float(get(t, 'cases_per_s_wall')))} wall")


def cf_main_result() -> str:
    main = get(load("counterfactual.json"), "main")
    parts = []
    for ds, v in main.items():
        norms = []
        for norm in ("l0", "l1", "l2"):
            if norm in v:
                s = get(v, norm, "summary")
                norms.append(f"{norm} {num(float(get(s, 'median_s')), 2)} s, {pct(float(get(s, 'optimal')))} optimal")
        parts.append(f"{ds}: " + ", ".join(norms))
    return "; ".join(parts)


def cf_table4_result() -> str:
    t4 = get(load("counterfactual.json"), "table4")
    parts = []
    for ds, v in t4.items():
        if ds == "protocol" or not isinstance(v, dict):
            continue
        for key, label in (("l1/IF", "one thread"), ("l1/IF threads", "threads=2")):
            if key in v:
                s = get(v, key, "summary")
                parts.append(f"{ds} l1 {label}: median {num(float(get(s, 'median_s')))} s, p90 "
                             f"{num(float(get(s, 'p90_s')))} s, {pct(float(get(s, 'optimal')))} proven optimal, "
                             f"{pct(float(get(s, 'plausible')))} plausible")
    return "; ".join(parts)


def deadline_result() -> str:
    s = get(load("deadline.json"), "summary")
    return (f"{get(s, 'queries')} queries: median {num(float(get(s, 'median_wall_seconds')))} s wall, "
            f"max {num(float(get(s, 'max_wall_seconds')))} s; {get(s, 'within_1s')} within 1 s of the limit; "
            f"{get(s, 'with_bound')} with a bound")


def actionability_result() -> str:
    a = get(load("counterfactual-actionability.json"), "actionability")
    parts = []
    for ds, v in a.items():
        bad = []
        for k, r in v.items():
            if isinstance(r, dict) and "summary" in r and k.endswith("/domains"):
                bad.append(float(get(r, "summary", "not_actionable")))
        if not bad:
            raise Missing(f"no `actionability.{ds}.*/domains` runs")
        parts.append(f"{ds}: {pct(max(bad))} not actionable")
    return "; ".join(parts)


def rules_result(name: str) -> Callable[[], str]:
    def result() -> str:
        d = load(name)
        parts = []
        for ds, v in get(d, "datasets").items():
            for cls, c in get(v, "classes").items():
                loc = get(c, "local")
                parts.append(f"{ds} {cls}: accuracy {float(get(loc, 'accuracy')):.2f}, "
                             f"coverage {float(get(loc, 'coverage')):.2f}, "
                             f"plausibility {float(get(loc, 'plausibility_10')):.2f}, "
                             f"stability {float(get(loc, 'stability', 0)):.2f}, "
                             f"sparsity {float(get(loc, 'sparsity')):.1f}")
        for ds, v in (d.get("regression") or {}).items():
            loc = get(v, "local")
            parts.append(f"{ds} regression: accuracy {float(get(loc, 'accuracy')):.2f}, stability "
                         f"{float(get(loc, 'stability', 0)):.2f}")
        return "; ".join(parts)
    return result


def rules_speed_result(name: str) -> Callable[[], str]:
    def result() -> str:
        parts = []
        for ds, v in get(load(name), "speed").items():
            reg = get(v, "regional_seconds")
            loc = get(v, "local_seconds_per_case")
            same = bool(get(v, "same_local")) and bool(get(v, "same_regional"))
            parts.append(f"{ds}: {get(v, 'regions')} regions {num(statistics.median(get(reg, 'fast')), 2)} s "
                         f"(plain path {num(statistics.median(get(reg, 'plain')), 3)} s); local rules "
                         + ", ".join(f"{cls} {num(float(get(c, 'fast')), 2)} s per case" for cls, c in loc.items())
                         + f"; same results on both paths: {same}")
        return "; ".join(parts)
    return result


def dsl_result() -> str:
    d = load("dsl.json")
    rows = get(d, "rows")
    cpu = sum(float(get(r, "median_cpu_s")) for r in rows if r.get("phase") in ("parse", "check"))
    return f"{get(d, 'lines')} lines: parse and check {num(cpu, 2)} s CPU"


def batch_result() -> str:
    d = load("batch.json")
    m = get(d, "median_seconds")
    return (f"{get(d, 'rows')} rows, {get(d, 'workers')} workers: "
            + ", ".join(f"{k} {num(float(v))} s" for k, v in m.items()))


def claims() -> list[tuple[str, list[Claim]]]:
    return [
        ("Loading", [
            Claim("load a 1000-tree x 255-leaf LightGBM model", "bench/load.py", load_result, "< 2 s, < 10x the file"),
            Claim("lower fitted scikit-learn ensembles (adult)", "bench/sklearn_lower.py", sklearn_lower_result),
        ]),
        ("Inference: the C backend against its peers", [
            *inference_rows("inference-quick.json", "bench/inference.py --quick --wait-idle 600"),
        ]),
        ("Oblivious tables", [
            *real_rows("oblivious-real.json", "bench/oblivious.py --real"),
            Claim("the default tables' build (re-composition CPU seconds)", "bench/oblivious.py --real --build-only",
                  build_result, "<= 120 s for 500 x 63"),
            Claim("the cost of one table per row by its depth (the re-composition's depth choice)",
                  "bench/oblivious.py --table-cost --save-costs", table_cost_result),
            *forms_rows("oblivious-recompose.json", "bench/oblivious.py --recompose --forms grow:10 --reps 3",
                        "exact re-composition"),
            *forms_rows("oblivious-recompose-restarts.json",
                        "bench/oblivious.py --recompose --models lightgbm-synthetic --forms grow:10:r9 --reps 3 "
                        "--stem oblivious-recompose-restarts", "re-composition with restarts"),
            *forms_rows("oblivious-tolerance.json", "bench/oblivious.py --tolerance --reps 3",
                        "quality-bounded translation"),
        ]),
        ("Passes", [
            Claim("polynomial conversion and monomial pruning (paper Table 1)", "bench/prune.py", prune_result,
                  "2.5x on adult at <= 0.0005 AUC loss"),
            Claim("monomial pruning over five adult splits", "bench/prune.py --seed-study 0,1,2,3,4",
                  prune_seeds_result, "2.5x at <= 0.0005 AUC loss"),
            Claim("attribution against SHAP on digits", "bench/attribution.py", attribution_result),
        ]),
        ("Explanations", [
            Claim("sensitive tests, 255-leaf tree, 100k cases", "bench/sensitive.py --runs 5 --cases 100000",
                  sensitive_result, "1e5 cases/s"),
            Claim("counterfactuals, OCEAN protocol (RF 100 x depth 5, 20 origins)", "bench/counterfactual.py",
                  cf_main_result, "OCEAN (Gurobi, 4 threads): adult 1.22 s, credit 1.34 s, compas 0.52 s"),
            Claim("isolation-forest plausibility (OCEAN Table 4, 30 s per query)",
                  "bench/counterfactual.py --sections table4 --norms l1 --origins 20 (and --threads 2)",
                  cf_table4_result, "credit median <= 2 s, >= 95% proven (OCEAN: 1.54 s)"),
            Claim("counterfactuals for every rejected row (quick: 20 rows per model, 10 s per query, 2 workers)",
                  "bench/counterfactual.py --population --quick", population_result("counterfactual-quick.json"),
                  ">= 95% proven; adult >= 200 rows/s, credit >= 20 rows/s"),
            Claim("`time_limit` bounds the whole query (credit, RF 200 x 8, time_limit=2)", "bench/deadline.py",
                  deadline_result, "within 1 s of the limit"),
            Claim("actionable counterfactuals (values on the features' domains)",
                  "bench/counterfactual.py --quick --origins 4 --sections actionability", actionability_result, "0%"),
            Claim("counterfactual rules (paper Table 1 protocol)", merged_command("rules.json"),
                  rules_result("rules.json"), "accuracy >= 0.95, stability >= 0.95"),
            Claim("counterfactual rules, speed (adult)",
                  "bench/rules.py --speed --datasets adult --stem rules_speed_adult",
                  rules_speed_result("rules_speed_adult.json"), "8 regions <= 10 s, <= 2 s per case"),
            Claim("counterfactual rules, speed (breast cancer)",
                  "bench/rules.py --speed --datasets bcw --stem rules_speed_bcw",
                  rules_speed_result("rules_speed_bcw.json"), "<= 2 s per case"),
        ]),
        ("Tools", [
            Claim("constraint language, 1,000-line file", "bench/dsl.py", dsl_result, "< 0.5 s"),
            Claim("batch explanation, joblib and Dask", "bench/batch.py", batch_result),
            Claim("`lumber predict` streaming a 10M-row CSV", "bench/predict_stream.py", stream_result, "< 4 GB"),
        ]),
    ]


HEADER = """# Benchmarks

<!-- Generated by `python bench/_tables.py` from bench/results/*.json; do not edit by hand. -->

Every performance claim of lumber, its current number and the command that produces it. Each
script under `bench/` runs the competing tools in one process, interleaved, and writes
`bench/results/NAME.json` (every number, the machine, the load average and the versions) and
`NAME.md` (the full tables). Install the peers with `pip install -e ".[bench]"`; `make bench` runs
every script in quick mode (quick runs write `NAME-quick.*` and never overwrite a full run's files,
`bench/run_all.py --dry-run` lists them). Timings are comparable only within one results file: read
the file for its machine and load. After a run, `python bench/_tables.py` rewrites this page.
"""


def render() -> str:
    lines = [HEADER]
    for section, rows in claims():
        lines += [f"## {section}", "", "| claim | command | result | target |", "| --- | --- | --- | --- |"]
        for c in rows:
            try:
                result = c.result()
            except Missing as e:
                result = f"not measured: {e}"
            except (TypeError, ValueError) as e:  # a field of another type than this script reads
                result = f"not measured: unexpected value in the results file ({e})"
            cell = result.replace("|", "\\|")
            lines.append(f"| {c.what} | `{c.command}` | {cell} | {c.target or '-'} |")
        lines.append("")
    files = sorted(p.name for p in RESULTS.glob("*.md") if "quick" not in p.name)  # make bench rewrites those
    lines += ["## Full tables", "", ", ".join(f"[{f[:-3]}](results/{f})" for f in files), ""]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--check", action="store_true", help="exit 1 when bench/README.md differs from the results")
    args = ap.parse_args(argv)
    text = render()
    if args.check:
        if not README.exists() or README.read_text(encoding="utf-8") != text:
            print("bench/README.md is out of date: run python bench/_tables.py", file=sys.stderr)
            return 1
        return 0
    README.write_text(text, encoding="utf-8")
    print(f"wrote {README}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
