"""Oblivious decision tables in the inference benchmark.

Its pieces live in ``bench/inference.py`` (this script imports it; never the reverse):

* the peer ``lumber oblivious C``: the model as oblivious tables (CatBoost models
  directly; LightGBM/XGBoost/scikit-learn through the ``polynomial,oblivious,quantize``
  passes, MonoForest re-composition), emitted as C with the forest library's entry
  points; its re-composition time, tree counts before/after and table sizes;
* model cases: CatBoost 500 trees of depth 6 and 8 (CatBoost's own evaluator is the
  library peer) and a shallow LightGBM model (500 trees x 8 leaves, depth 3).

Run alone it benchmarks the models with speed targets and writes
``bench/results/oblivious.{json,md}`` with the target table (best lumber form =
the faster of lumber C and lumber oblivious C on 1-thread CPU time):

    .venv/bin/python bench/oblivious.py            # LightGBM 500 x 63, shallow LightGBM, CatBoost d6/d8
    .venv/bin/python bench/oblivious.py --quick    # small models

``--recompose`` measures exact re-composition instead, on LightGBM 500 x 63
(max depth 8) on Adult and credit with their native categorical splits and on the
200k x 50 synthetic data: for each strategy and max depth the trees, the cover lower bound, table bytes,
build seconds, max |diff| against LightGBM and ns/row/tree on 1 thread (CPU time),
interleaved with lumber's forest C; with ``--refit`` also ``prune-refit`` and its
tables (test AUC loss, decision agreement, |margin change|). Writes
``bench/results/oblivious-recompose{,-quick}.{json,md}``:

    .venv/bin/python bench/oblivious.py --recompose --refit --reps 5   # the idle-machine run (~10 min)
    .venv/bin/python bench/oblivious.py --recompose --quick            # 100 x 15 models, ~1 min
    .venv/bin/python bench/oblivious.py --recompose --forms grow:10 --reps 3      # grow d10 only, ~6 min
    .venv/bin/python bench/oblivious.py --recompose --models lightgbm-synthetic --forms grow:10:r9 \
        --reps 3 --stem oblivious-recompose-restarts  # grow with restarts=9 (opt-in), ~5 min

``--tolerance`` measures the quality-bounded translation on the same models:
one formula-5 fit per model (``lumber/passes/transforms/oblivious_fit.py``, training rows only), its
prefixes (``lumber.compiler.tolerance.tree_sizes``) each built as a cascade library (tables, and the exact forest for rows near the
decision, in one .so; tables alone for the regressor) beside lumber's forest C: trees, table bytes,
build seconds, ns/row/tree (1 thread, CPU time), and on test rows the AUC loss (relative RMSE rise),
decision agreement, exact-path share and |margin change|, beside the validation loss and its 95%
bootstrap bound (``within``). Writes
``bench/results/oblivious-tolerance{,-quick}.{json,md}``:

    .venv/bin/python bench/oblivious.py --tolerance --reps 3   # the idle-machine run (~7 min)
    .venv/bin/python bench/oblivious.py --tolerance --reps 3 --models lightgbm-credit   # ~3 min
    .venv/bin/python bench/oblivious.py --tolerance --quick    # 100 x 15 models, ~4 min
    .venv/bin/python bench/oblivious.py --tolerance --quick --models lightgbm-credit [--fit-to-budget]

``--real`` is the real-row protocol: LightGBM 500 x 63, XGBoost 500 x depth 8 and CatBoost 500 x
depth 6 on the bundled credit and adult rows (test rows tiled to 100k), lumber's exact tables (default options)
and forest C beside pylignum (compiled and interpreter), lleaves, oneDAL and the source library, all in this
process on one thread: ns/row and ns/row/tree (CPU and wall), exact or max |diff|, build seconds, load before
and after each model. Writes ``bench/results/oblivious-real{,-quick}.{json,md}``:

    .venv/bin/python bench/oblivious.py --real                 # the idle-machine run (~20 min; trains and caches the models first)
    .venv/bin/python bench/oblivious.py --real --quick         # 100-tree models, 20k rows, ~1-2 min
    .venv/bin/python bench/oblivious.py --real --models lightgbm-credit catboost-credit
    .venv/bin/python bench/oblivious.py --real --build-only    # the default tables' build CPU seconds only

``--table-cost`` times one table per row by its depth in the C table runtime on the credit and adult rows
(the re-composition prices its covers by these; ``--save-costs`` writes them to
``lumber/passes/transforms/table_cost.json`` with the command, date, kernel path and load); writes
``bench/results/oblivious-table-cost{,-quick}.{json,md}``:

    .venv/bin/python bench/oblivious.py --table-cost --reps 5 --save-costs   # ~10 min idle

The fit stops once longer prefixes cannot beat the fastest form within the tolerance found
(``lumber.compiler.tolerance.PrefixStop``, as ``lumber.compile`` does: checkpoints at 64, 128, 256, ...
trees; the stop and each checkpoint are in the table's "Fit:" line and the JSON's ``fit.checkpoints``);
``--fit-to-budget`` grows it to its formula-5 stop or time budget as before, for the build-time comparison.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

import _outputs  # noqa: E402
import inference as inf  # noqa: E402

TARGETS = {"lleaves": 1.5, "treelite+tl2cgen": 3.0, "lightgbm predict": 5.0, "catboost predict": 1.0}
"""Speed-up of the best lumber form over each peer with a target (1 thread, 100k rows)."""


# -- the target table -----------------------------------------------------------------------------------


def summary(res: dict[str, Any]) -> dict[str, Any]:
    """Per model: the best lumber form and its speed-up over every peer (1-thread CPU time)."""
    out: dict[str, Any] = {}
    for name, e in res["models"].items():
        peers = {k: v for k, v in e["peers"].items() if v.get("status") == "ok" and v.get("batch_1t_cpu")}
        forms = {k: peers[k]["batch_1t_cpu"] for k in ("lumber C", "lumber oblivious C") if k in peers}
        if not forms:
            continue
        best = min(forms, key=forms.__getitem__)
        row: dict[str, Any] = {"best_form": best, "best_cpu_s": forms[best], "forms_cpu_s": forms, "vs": {}}
        for pname, r in peers.items():
            if pname.startswith("lumber"):
                continue
            ratio = r["batch_1t_cpu"] / forms[best]
            row["vs"][pname] = {"speedup": ratio, "target": TARGETS.get(pname),
                                "met": None if pname not in TARGETS else ratio >= TARGETS[pname]}
        obl = e["peers"].get("lumber oblivious C", {})
        if "tables" in obl:
            row["tables"] = obl["tables"]
            lib = next((v for k, v in peers.items() if k.endswith(" predict")), None)
            if lib is not None and "batch_1t_cpu" in obl:
                row["oblivious_vs_library"] = lib["batch_1t_cpu"] / obl["batch_1t_cpu"]
        row["exact"] = {k: {"max_abs_diff": v.get("max_abs_diff"), "corpus_mismatch": v.get("corpus_mismatch"),
                            "not_bit_exact": v.get("corpus_not_bitexact")}
                        for k, v in e["peers"].items() if k.startswith("lumber")}
        out[name] = row
    return out


def markdown(res: dict[str, Any], summ: dict[str, Any]) -> str:
    lines = ["# Oblivious tables: re-composition and the table evaluator", "",
             "Best lumber form = the faster of `lumber C` (forest tables) and `lumber oblivious C` (oblivious "
             "decision tables) on 1-thread process CPU time for the batch; speed-up = peer CPU time / best "
             "lumber CPU time (targets per peer). The machine is shared (load average "
             f"{res['machine']['loadavg_start'][0]:.1f} -> {res['machine']['loadavg_end'][0]:.1f} on "
             f"{res['machine']['cpus']} CPUs), hence CPU time.", ""]
    lines += ["| model | best form | lumber C cpu s | oblivious C cpu s | peer | peer cpu s | speed-up | target | met |",
              "|---|---|---|---|---|---|---|---|---|"]
    for name, row in summ.items():
        peers = res["models"][name]["peers"]
        for pname, v in row["vs"].items():
            target = "–" if v["target"] is None else f"{v['target']:.1f}x"
            met = "–" if v["met"] is None else ("yes" if v["met"] else "no")
            lines.append(
                f"| {name} | {row['best_form']} | {inf._fmt(row['forms_cpu_s'].get('lumber C'), '.3f')} | "
                f"{inf._fmt(row['forms_cpu_s'].get('lumber oblivious C'), '.3f')} | {pname} | "
                f"{peers[pname]['batch_1t_cpu']:.3f} | {v['speedup']:.2f}x | {target} | {met} |")
    lines += ["", "## Re-composition", "",
              "| model | method | trees before | trees after | max depth | table KiB | tables s | "
              "oblivious vs library predict |", "|---|---|---|---|---|---|---|---|"]
    for name, row in summ.items():
        t = row.get("tables")
        if not t:
            lines.append(f"| {name} | {res['models'][name]['peers'].get('lumber oblivious C', {}).get('status', '–')} "
                         "|  |  |  |  |  |  |")
            continue
        lines.append(f"| {name} | {t.get('method')} | {t.get('trees_in')} | {t.get('trees_out')} | "
                     f"{t.get('max_depth')} | {t.get('table_bytes', 0) / 1024:,.0f} | {t.get('seconds', 0):.1f} | "
                     f"{inf._fmt(row.get('oblivious_vs_library'), '.2f')}x |")
    lines += ["", "## Exactness (vs the library, boundary corpus)", "",
              "| model | form | max abs diff (batch) | corpus mismatch | not bit-exact |", "|---|---|---|---|---|"]
    for name, row in summ.items():
        for form, v in row["exact"].items():
            lines.append(f"| {name} | {form} | {inf._fmt(v['max_abs_diff'], '.3g')} | "
                         f"{'–' if v['corpus_mismatch'] is None else v['corpus_mismatch']} | "
                         f"{'–' if v['not_bit_exact'] is None else v['not_bit_exact']} |")
    lines += ["", "Full per-peer table (compile time, 2 threads, single-row latency): see "
              f"`{'inference-oblivious-quick' if res['mode'] == 'quick' else 'inference-oblivious'}.md`.", ""]
    return "\n".join(lines)


# -- exact re-composition of production-size models ------------------------------------------

RECOMPOSE_FORMS = (("pack", 8), ("grow", 8), ("grow", 10), ("grow", "auto"))
MARCH_NATIVE = True
"""--recompose builds forest C and the table runtime alike with ``-march=native`` (this CPU's vector width
for both: the table runtime's default, ``lumber.COptions(march_native=True)`` for forest C)."""
"""(strategy, max-depth) of the exact oblivious forms measured beside forest C."""


RECOMPOSE_MODELS = ("adult", "credit", "synthetic")
COSTS_FILE = Path(__file__).resolve().parent.parent / "lumber" / "passes" / "transforms" / "table_cost.json"
"""Where ``--table-cost --save-costs`` writes the measured costs (read by the re-composition's depth choice)."""


def recompose_models(quick: bool, names: list[str] | None = None) -> list[dict[str, Any]]:
    """LightGBM 500 x 63 (max depth 8, learning rate 0.05) on Adult and credit with their native
    categorical splits and on the bench's 200k x 50 synthetic data; quick: 100 x 15 (max depth 4);
    ``names``: a subset (``lightgbm-adult``, ``lightgbm-credit``, ``lightgbm-synthetic``)."""
    import lightgbm as lgb

    import lumber
    from sklearn.model_selection import train_test_split

    trees, leaves, depth = (100, 15, 4) if quick else (500, 63, 8)
    out = []
    chosen = [n for n in RECOMPOSE_MODELS if names is None or f"lightgbm-{n}" in names]
    unknown = sorted(set(names or ()) - {f"lightgbm-{n}" for n in RECOMPOSE_MODELS})
    if unknown:
        raise SystemExit(f"--models: {', '.join(unknown)} not among the --recompose models "
                         f"({', '.join(f'lightgbm-{n}' for n in RECOMPOSE_MODELS)})")
    for name in chosen:
        if name == "synthetic":
            X, y = inf.synthetic(20_000 if quick else 200_000, 20 if quick else 50)
            cats: list[int] = []
            objective = "regression"
        else:
            d = lumber.datasets.load(name)
            X, y = d.X.to_numpy(dtype=np.float64), np.asarray(d.y)
            cats = [i for i, f in enumerate(d.features) if f.kind.name == "CATEGORICAL"]
            objective = "binary"
        Xtr, Xrest, ytr, yrest = train_test_split(X, y, test_size=0.4, random_state=0)
        Xva, Xte, yva, yte = train_test_split(Xrest, yrest, test_size=0.5, random_state=0)
        params = {"objective": objective, "num_leaves": leaves, "max_depth": depth, "learning_rate": 0.05,
                  "verbose": -1, "num_threads": 1, "seed": 0, "deterministic": True, "max_cat_to_onehot": 1}
        path = inf.CACHE / f"lgb-{name}-obl-{inf._cache_key(params, trees, cats, X.shape)}.txt"
        if not path.exists():
            inf.CACHE.mkdir(parents=True, exist_ok=True)
            lgb.train(params, lgb.Dataset(Xtr, ytr, categorical_feature=cats), trees).save_model(str(path))
        bst = lgb.Booster(model_file=str(path))
        out.append({"name": f"lightgbm-{name}", "booster": bst, "train": (Xtr, ytr), "valid": (Xva, yva),
                    "test": (Xte, yte), "categorical": len(cats),
                    "notes": f"{objective}, {trees} trees x {leaves} leaves (max depth {depth}), "
                             f"{len(cats)} native categorical features, {len(X):,} rows (60/20/20 split)"})
    return out


def _cpu(fn: Any, X: np.ndarray) -> float:
    t0 = time.process_time()
    fn(X)
    return time.process_time() - t0


def parse_forms(specs: list[str] | None) -> tuple[tuple[Any, ...], ...]:
    """``--forms grow:8 grow:10:nobins grow:10:r9`` as ``(("grow", 8), ("grow", 10, False),
    ("grow", 10, True, 9))`` (``nobins``: every threshold its own level, no bin levels; ``rN``: ``grow``
    with ``restarts=N``); None: :data:`RECOMPOSE_FORMS`."""
    from lumber.passes.transforms.recompose_oblivious import STRATEGIES

    if not specs:
        return RECOMPOSE_FORMS
    out: list[tuple[Any, ...]] = []
    for spec in specs:
        strategy, depth, *rest = spec.split(":") + ([] if ":" in spec else [""])
        bins = "nobins" not in rest
        restarts = [r for r in rest if r != "nobins"]
        if (strategy not in STRATEGIES or not (depth == "auto" or depth.isdigit() and 1 <= int(depth) <= 16)
                or rest.count("nobins") > 1 or len(restarts) > 1
                or (restarts and not (restarts[0][:1] == "r" and restarts[0][1:].isdigit()))):
            raise SystemExit(f"--forms: {spec!r} is not STRATEGY:DEPTH[:nobins][:rN] (strategies "
                             f"{', '.join(STRATEGIES)}; depth 1-16 or auto; rN: N restarts), e.g. grow:10, "
                             f"grow:10:nobins or grow:10:r9")
        d: int | str = depth if depth == "auto" else int(depth)
        if restarts:
            out.append((strategy, d, bins, int(restarts[0][1:])))
        else:
            out.append((strategy, d) if bins else (strategy, d, False))
    return tuple(out)


def recompose_run(quick: bool, reps: int, refit: bool,
                  forms: tuple[tuple[Any, ...], ...] = RECOMPOSE_FORMS,
                  models: list[str] | None = None) -> dict[str, Any]:
    """Every model: forest C and each exact oblivious form (and prune-refit + tables), timed interleaved."""
    import lumber
    from lumber.backends.table_c import TableRuntime
    from lumber.passes.base import PassContext
    from lumber.passes.quality import auc
    from lumber.passes.transforms.quantize import quantize_ensemble
    from lumber.passes.transforms.recompose_oblivious import cover_lower_bound, recompose
    from lumber.passes.transforms.polynomial import expand_forest

    load0 = os.getloadavg()
    res: dict[str, Any] = {"mode": "quick" if quick else "full", "models": {}}
    n_rows = 20_000 if quick else 100_000
    for m in recompose_models(quick, models):
        bst = m["booster"]
        forest = lumber.load(bst)
        rng = np.random.default_rng(0)
        Xte, yte = m["test"]
        Xb = np.ascontiguousarray(Xte[rng.integers(0, len(Xte), n_rows)])
        ref = bst.predict(Xb, raw_score=True)
        entry: dict[str, Any] = {"notes": m["notes"], "trees": forest.n_trees, "forms": {}}
        t0 = time.perf_counter()
        poly, _ = expand_forest(forest)
        entry["polynomial"] = {"seconds": time.perf_counter() - t0, "monomials": poly.n_monomials,
                               "conditions": poly.n_conditions,
                               "category_conditions": int(poly.statistics()["category_conditions"])}
        t0 = time.perf_counter()
        pc = lumber.compile(forest, target="c", options=lumber.COptions(march_native=MARCH_NATIVE))
        runners: dict[str, Any] = {"forest C": lambda X, p=pc: p.predict_raw(X)}
        entry["forms"]["forest C"] = {"build_seconds": time.perf_counter() - t0, "trees": forest.n_trees,
                                      "max_abs_diff": float(np.abs(pc.predict_raw(Xb).reshape(-1) - ref).max())}
        bounds: dict[int, int] = {}
        for strategy, depth, *rest in forms:
            bins = rest[0] if rest else True
            restarts = rest[1] if len(rest) > 1 else 0
            t0 = time.perf_counter()
            c0 = time.process_time()
            ens, st = recompose(poly, max_depth=depth, strategy=strategy, bins=bins, restarts=restarts)
            cpu = time.process_time() - c0
            q = quantize_ensemble(ens)
            rt = TableRuntime(q, march_native=MARCH_NATIVE)
            build = time.perf_counter() - t0 + entry["polynomial"]["seconds"]
            cap = st["max_depth_cap"]  # the chosen depth for auto
            if cap not in bounds:
                bounds[cap] = cover_lower_bound(poly, cap)
            label = (f"tables {strategy} " + (f"auto (d{cap})" if depth == "auto" else f"d{depth}")
                     + ("" if bins else " no bins") + (f" restarts {restarts}" if restarts else ""))
            got = rt.predict_raw(Xb)[:, 0]
            entry["forms"][label] = {"build_seconds": build, "recompose_cpu_seconds": cpu, "trees": ens.n_trees,
                                     "table_bytes": st["table_bytes"],
                                     "bin_levels": int(ens.statistics()["bin_levels"]),
                                     "trees_by_depth": st["trees_by_depth"], "max_depth": st["max_depth"],
                                     "depth_choice": {str(k): v for k, v in st["depth_choice"].items()},
                                     "max_abs_diff": float(np.abs(got - ref).max()),
                                     "lower_bound_trees": int(np.ceil(poly.n_monomials / (1 << cap))),
                                     "cover_bound_trees": bounds[cap]}
            runners[label] = lambda X, r=rt: r.predict_raw(X)
        if refit and m["name"] != "lightgbm-synthetic":
            ctx = PassContext()
            t0 = time.perf_counter()
            pr = lumber.run(poly, "prune-refit{tol=0.0005}", data={"train": m["train"], "valid": m["valid"]},
                            context=ctx)
            ens, st = recompose(pr, max_depth=8, strategy="pack")
            rt = TableRuntime(quantize_ensemble(ens), march_native=MARCH_NATIVE)
            build = time.perf_counter() - t0 + entry["polynomial"]["seconds"]
            got = rt.predict_raw(Xb)[:, 0]
            auc_model, auc_pruned = auc(yte == 1, bst.predict(Xte, raw_score=True)), auc(yte == 1, pr.evaluate(Xte))
            entry["forms"]["prune-refit + tables pack d8"] = {
                "build_seconds": build, "trees": ens.n_trees, "table_bytes": st["table_bytes"],
                "monomials": pr.n_monomials, "report": ctx.reports[-1].render(),
                "test_auc_loss": auc_model - auc_pruned,
                "agreement": float(np.mean((got > 0) == (ref > 0))),
                "max_abs_margin_change": float(np.abs(got - ref).max()),
                "mean_abs_margin_change": float(np.abs(got - ref).mean())}
            runners["prune-refit + tables pack d8"] = lambda X, r=rt: r.predict_raw(X)
        _time_forms(entry["forms"], runners, Xb, reps, n_rows)
        res["models"][m["name"]] = entry
        print(f"[recompose] {m['name']}: " + ", ".join(f"{k} {v['trees']} trees {v['speedup_vs_forest_c']:.2f}x"
                                                     for k, v in entry["forms"].items()), flush=True)
    load1 = os.getloadavg()
    res["machine"] = {"cpus": os.cpu_count(), "loadavg_start": load0, "loadavg_end": load1, "rows": n_rows,
                      "reps": reps, "python": sys.version.split()[0], "march_native": MARCH_NATIVE}
    return res


def _time_forms(forms: dict[str, Any], runners: dict[str, Any], Xb: Any, reps: int, n_rows: int) -> None:
    """Time every runner interleaved (CPU time, median of ``reps``) into its form, with the speed-up over forest C."""
    times: dict[str, list[float]] = {k: [] for k in runners}
    for _ in range(reps):  # interleaved
        for k, fn in runners.items():
            times[k].append(_cpu(fn, Xb))
    for k, ts in times.items():
        med = float(np.median(ts))
        f = forms[k]
        f.update(cpu_s=med, spread_pct=100 * (max(ts) - min(ts)) / med if med else 0.0,
                 ns_row_tree=1e9 * med / n_rows / f["trees"], ns_row=1e9 * med / n_rows)
    base = forms["forest C"]["cpu_s"]
    for f in forms.values():
        f["speedup_vs_forest_c"] = base / f["cpu_s"] if f["cpu_s"] else None


def _run_line(res: dict[str, Any]) -> str:
    """The conditions of a --recompose or --tolerance run: rows, repetitions, load (flagged above the core count)."""
    mach = res["machine"]
    busy = max(mach["loadavg_start"][0], mach["loadavg_end"][0]) > (mach["cpus"] or 1)
    return (f"Mode {res['mode']}; {mach['rows']:,} test rows, 1 thread, process CPU time, median of {mach['reps']} "
            f"interleaved repetitions. Load average {mach['loadavg_start'][0]:.2f} at start and "
            f"{mach['loadavg_end'][0]:.2f} at end on {mach['cpus']} CPUs"
            + (" (**above the core count: the machine was shared, ratios are not evidence**)." if busy else "."))


def recompose_markdown(res: dict[str, Any]) -> str:
    flags = ("Forest C and the tables both built with `-march=native`." if res["machine"].get("march_native")
             else "")
    lines = ["# Exact oblivious re-composition on production-size models", "",
             _run_line(res) + (" " + flags if flags else ""),
             "Build seconds include the polynomial expansion (and the refit); `recompose CPU s` is the "
             "re-composition's process CPU time alone. `auto (dN)`: the depth chosen by the cost model. `lower bound` = monomials / 2^depth "
             "(every table full), which the data rarely allows; `cover bound` = maximal "
             "monomials no two of which fit in one table of that depth (`cover_lower_bound`): every exact form "
             "of that depth needs at least that many trees.", ""]
    for name, e in res["models"].items():
        p = e["polynomial"]
        lines += [f"## {name}", "", f"{e['notes']}; {p['monomials']:,} monomials over {p['conditions']:,} "
                  f"conditions ({p['category_conditions']} category conditions).", "",
                  "| form | trees | lower bound | cover bound | table MiB | build s | recompose CPU s | ns/row/tree "
                  "| ns/row | spread | vs forest C | max abs diff vs LightGBM |",
                  "|---|---|---|---|---|---|---|---|---|---|---|---|"]
        for k, f in e["forms"].items():
            lines.append(
                f"| {k} | {f['trees']:,} | {f.get('lower_bound_trees', '–')} | {f.get('cover_bound_trees', '–')} | "
                f"{f['table_bytes'] / 2**20:.1f} | " if "table_bytes" in f else f"| {k} | {f['trees']:,} | – | – | – | ")
            cpu = f"{f['recompose_cpu_seconds']:.1f}" if "recompose_cpu_seconds" in f else "–"
            lines[-1] += (f"{f['build_seconds']:.1f} | {cpu} | {f['ns_row_tree']:.2f} | {f['ns_row']:.0f} | "
                          f"{f['spread_pct']:.0f}% | {f['speedup_vs_forest_c']:.2f}x | "
                          f"{f.get('max_abs_diff', f.get('max_abs_margin_change', float('nan'))):.3g} |")
        for k, f in e["forms"].items():
            if "test_auc_loss" in f:
                lines += ["", f"{k}: {f['report']}; test AUC loss {f['test_auc_loss']:+.5f}, decision agreement "
                              f"{100 * f['agreement']:.2f}%, |margin change| max {f['max_abs_margin_change']:.3g} "
                              f"mean {f['mean_abs_margin_change']:.3g} (test rows)."]
        lines.append("")
    return "\n".join(lines)


# -- quality-bounded translation: the formula-5 fit behind the exact forest ---------

TOLERANCE = 0.0005
"""Test AUC loss (relative RMSE rise for the regressor) the tolerance forms are built for."""
AGREEMENT = 0.996
"""Share of validation decisions each cascade's band keeps (``lumber.compile_within(..., agreement=)``); the issue's
target is 99.5% on test rows: 0.996 on validation (the band 1.25x the farthest kept disagreement) gave
99.68-99.77% on Adult's test rows and 99.85-99.88% on credit's (100-600 trees), 0.998 99.86-99.97%."""


def tolerance_run(quick: bool, reps: int, models: list[str] | None = None, to_budget: bool = False) -> dict[str, Any]:
    """Every model: lumber forest C and the tolerance forms (a formula-5 fit on the training rows, prefixes of
    it as cascades built into one .so each), timed interleaved on test rows; quality on test rows."""
    import lumber
    from lumber.backends.base import fingerprint
    from lumber.compiler.targets.cascade import build_cascade
    from lumber.ir.cascade import Cascade, inside_band
    from lumber.passes.transforms.cascade import cascade_margins, decision_band
    from lumber.compiler.tolerance import PrefixStop, loss_bound, tree_sizes
    from lumber.passes.quality import auc, make_metric
    from lumber.passes.transforms.oblivious_fit import FitOptions, fit_oblivious
    from lumber.passes.transforms.quantize import quantize_ensemble

    load0 = os.getloadavg()
    res: dict[str, Any] = {"mode": "quick" if quick else "full", "tolerance": TOLERANCE, "agreement": AGREEMENT,
                           "models": {}}
    n_rows = 20_000 if quick else 100_000
    for m in recompose_models(quick):
        if models and m["name"] not in models:
            continue
        bst = m["booster"]
        forest = lumber.load(bst)
        classifier = forest.schema.task.name == "BINARY"
        rng = np.random.default_rng(0)
        (Xtr, _), (Xva, yva), (Xte, yte) = m["train"], m["valid"], m["test"]
        Xb = np.ascontiguousarray(Xte[rng.integers(0, len(Xte), n_rows)])
        entry: dict[str, Any] = {"notes": m["notes"], "trees": forest.n_trees, "forms": {}}
        t0 = time.perf_counter()
        pc = lumber.compile(forest, target="c")
        runners: dict[str, Any] = {"forest C": lambda X, p=pc: p.predict_raw(X)}
        entry["forms"]["forest C"] = {"build_seconds": time.perf_counter() - t0, "trees": forest.n_trees}
        ev, et = pc.predict_raw(Xva), pc.predict_raw(Xte)
        vmetric = make_metric("auto", forest.schema, yva)

        def quality(got: np.ndarray, ref: np.ndarray, y: np.ndarray) -> dict[str, Any]:
            diff = np.abs(got - ref)
            if classifier:
                return {"loss": auc(y == 1, ref) - auc(y == 1, got), "agreement": float(np.mean((got > 0) == (ref > 0))),
                        "max_abs_margin_change": float(diff.max()), "mean_abs_margin_change": float(diff.mean())}
            rmse = lambda p: float(np.sqrt(np.mean((p - y) ** 2)))  # noqa: E731
            return {"loss": rmse(got) / rmse(ref) - 1.0, "agreement": None,
                    "max_abs_margin_change": float(diff.max()), "mean_abs_margin_change": float(diff.mean())}

        # the fit stops once longer prefixes cannot beat the best form (PrefixStop, as lumber.compile does);
        # --fit-to-budget grows it to its formula-5 stop or time budget (the earlier behaviour)
        stopper = None if to_budget else PrefixStop(
            Xva, ev, vmetric, pc.predict_raw, exact=pc.predict_raw, classifier=classifier,
            ge=forest.schema.decision == "margin_ge", need=AGREEMENT, tol=TOLERANCE)
        t0 = time.perf_counter()
        fr = fit_oblivious(forest, Xtr, FitOptions(), margins=lambda R, p=pc: p.predict_raw(R), checkpoint=stopper)
        fit_s = time.perf_counter() - t0
        entry["fit"] = {**fr.report, "checkpoints": [] if stopper is None else stopper.log}
        fp = fingerprint(forest)
        for T in sorted(set(tree_sizes(fr.best_trees)) | {c["trees"] for c in entry["fit"]["checkpoints"]}):
            label = f"{'cascade' if classifier else 'tables'} {T} trees"
            ens = fr.ensemble(T)
            t1 = time.perf_counter()
            q = quantize_ensemble(ens)
            av = ens.evaluate(Xva)
            band = decision_band(av, ev, agreement=AGREEMENT) if classifier else None
            vgot, vshare = cascade_margins(av, pc.predict_raw, Xva, band) if band is not None else (av, 0.0)
            spec = Cascade(forest, q, band, {**quality(vgot, ev, yva), "loss_bound": loss_bound(vmetric, ev, vgot)})
            lib = build_cascade(spec, fp=fp)
            build = fit_s + time.perf_counter() - t1
            got = lib.predict_raw(Xte)
            share = float(np.mean(inside_band(ens.evaluate(Xte), band))) if band is not None else 0.0
            entry["forms"][label] = {"build_seconds": build, "fit_seconds": fit_s, "trees": ens.n_trees,
                                     "table_bytes": int(ens.value.shape[0] * 8),
                                     "band": None if band is None else list(band),
                                     "exact_share_test": share, "exact_share_valid": vshare,
                                     "valid": spec.quality, **quality(got, et, yte)}
            entry["forms"][label]["within"] = bool(max(spec.quality["loss"], spec.quality["loss_bound"]) <= TOLERANCE
                                                   and (spec.quality["agreement"] or 1.0) >= AGREEMENT)
            runners[label] = lambda X, p=lib: p.predict_raw(X)
        _time_forms(entry["forms"], runners, Xb, reps, n_rows)
        res["models"][m["name"]] = entry
        print(f"[tolerance] {m['name']}: " + ", ".join(
            f"{k} {v['speedup_vs_forest_c']:.2f}x loss {v.get('loss', 0):+.5f}" for k, v in entry["forms"].items()),
            flush=True)
    load1 = os.getloadavg()
    res["machine"] = {"cpus": os.cpu_count(), "loadavg_start": load0, "loadavg_end": load1, "rows": n_rows,
                      "reps": reps, "python": sys.version.split()[0]}
    return res


def _checkpoints(fit: dict[str, Any]) -> str:
    """`` Checkpoints (PrefixStop): 64 trees faster, 128 faster, 256 not, ...`` or nothing (--fit-to-budget)."""
    cps = fit.get("checkpoints") or []
    if not cps:
        return " No early stop (--fit-to-budget)." if "checkpoints" in fit else ""
    return (" Checkpoints (lumber.compiler.tolerance.PrefixStop; faster: the fastest form within the tolerance so "
            "far): " + ", ".join(f"{c['trees']} {'faster' if c['faster'] else 'not faster'}" for c in cps) + ".")


def tolerance_markdown(res: dict[str, Any]) -> str:
    lines = ["# Quality-bounded translation (formula 5) behind the exact forest", "",
             _run_line(res),
             "Each tolerance form is a prefix of one formula-5 fit (oblivious depth-8 tables boosted on the "
             "source's margins over the training rows plus jittered copies and mixed rows); a cascade sends rows whose table "
             "margin lies inside the band (on each side of the decision, 1.25 x the widest validation disagreement left once the "
             f"{100 * (1 - res.get('agreement', 1.0)):.1f}% farthest from the decision may differ: `agreement` "
             f"{res.get('agreement', 1.0):g}) to the exact forest, in the same .so. Build seconds = fit + C build. "
             "Loss, agreement, |margin change| and exact-path share are on test rows (used neither by the fit nor "
             f"by the band); `within` = validation loss and its 95% paired-bootstrap upper bound (`valid loss (bound)`, "
             f"lumber.compiler.tolerance.loss_bound) <= {res['tolerance']} (AUC loss, relative RMSE rise for "
             f"the regressor) and validation agreement >= {res.get('agreement', 1.0):g}.", ""]
    for name, e in res["models"].items():
        fit = e.get("fit", {})
        lines += [f"## {name}", "", f"{e['notes']}. Fit: {fit.get('trees_grown')} trees grown, formula-5 optimum "
                  f"{fit.get('best_trees')}, stop: {fit.get('stop')}, {fit.get('seconds', 0):.1f} s "
                  f"({fit.get('rows', 0):,} training rows + {fit.get('jittered_rows', 0):,} jittered + "
                  f"{fit.get('mixed_rows', 0):,} mixed)." + _checkpoints(fit), "",
                  "| form | trees | table MiB | build s | ns/row/tree | ns/row | spread | vs forest C | test loss "
                  "| agreement | exact path | max / mean abs margin change | valid loss (bound) | within |",
                  "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
        for k, f in e["forms"].items():
            tab = f"{f['table_bytes'] / 2**20:.2f}" if "table_bytes" in f else "–"
            agree = f"{100 * f['agreement']:.2f}%" if f.get("agreement") is not None else "–"
            share = f"{100 * f['exact_share_test']:.1f}%" if "exact_share_test" in f else "100%"
            loss = f"{f['loss']:+.5f}" if "loss" in f else "0 (exact)"
            change = (f"{f['max_abs_margin_change']:.3g} / {f['mean_abs_margin_change']:.3g}"
                      if "max_abs_margin_change" in f else "0")
            within = ("yes" if f["within"] else "no") if "within" in f else "exact"
            v = f.get("valid")
            vloss = f"{v['loss']:+.5f} ({v['loss_bound']:+.5f})" if v and "loss_bound" in v else "–"
            lines.append(f"| {k} | {f['trees']:,} | {tab} | {f['build_seconds']:.1f} | {f['ns_row_tree']:.2f} | "
                         f"{f['ns_row']:.0f} | {f['spread_pct']:.0f}% | {f['speedup_vs_forest_c']:.2f}x | {loss} | "
                         f"{agree} | {share} | {change} | {vloss} | {within} |")
        lines.append("")
    return "\n".join(lines)


# -- the real-row protocol --------------------------------------------------------------

REAL_DATASETS = ("credit", "adult")
REAL_LIBRARIES = ("lightgbm", "xgboost", "catboost")


def real_models(quick: bool, names: list[str] | None = None) -> list[dict[str, Any]]:
    """LightGBM 500 x 63 (max depth 8, native categorical splits), XGBoost 500 x depth 8 and CatBoost 500 x
    depth 6 (category codes as numbers) on the bundled credit and adult rows (60/20/20 split, as
    --recompose); quick: 100 trees x 15 leaves / depth 4. ``names``: a subset such as ``lightgbm-credit``.
    Models are cached under the bench's model cache; every peer reads the same saved file."""
    import lightgbm as lgb
    from sklearn.model_selection import train_test_split

    import lumber

    trees = 100 if quick else 500
    out = []
    for ds in REAL_DATASETS:
        d = lumber.datasets.load(ds)
        X, y = d.X.to_numpy(dtype=np.float64), np.asarray(d.y).astype(int)
        cats = [i for i, f in enumerate(d.features) if f.kind.name == "CATEGORICAL"]
        Xtr, Xrest, ytr, yrest = train_test_split(X, y, test_size=0.4, random_state=0)
        _, Xte, _, _ = train_test_split(Xrest, yrest, test_size=0.5, random_state=0)
        for lib in REAL_LIBRARIES:
            name = f"{lib}-{ds}"
            if names is not None and name not in names:
                continue
            inf.CACHE.mkdir(parents=True, exist_ok=True)
            if lib == "lightgbm":
                params = {"objective": "binary", "num_leaves": 15 if quick else 63, "max_depth": 4 if quick else 8,
                          "learning_rate": 0.05, "verbose": -1, "num_threads": 1, "seed": 0, "deterministic": True,
                          "max_cat_to_onehot": 1}
                path = inf.CACHE / f"lgb-{ds}-real-{inf._cache_key(params, trees, cats, X.shape)}.txt"
                if not path.exists():
                    lgb.train(params, lgb.Dataset(Xtr, ytr, categorical_feature=cats), trees).save_model(str(path))
                model: Any = lgb.Booster(model_file=str(path))
                shape = f"{trees} trees x {params['num_leaves']} leaves (max depth {params['max_depth']}), " \
                        f"{len(cats)} native categorical features"
            elif lib == "xgboost":
                import xgboost as xgb

                params = {"objective": "binary:logistic", "max_depth": 4 if quick else 8, "eta": 0.05,
                          "tree_method": "hist", "nthread": 1, "seed": 0}
                path = inf.CACHE / f"xgb-{ds}-real-{inf._cache_key(params, trees, X.shape)}.json"
                if not path.exists():
                    xgb.train(params, xgb.DMatrix(Xtr, ytr), trees).save_model(str(path))
                model = xgb.Booster(model_file=str(path))
                model.set_param({"nthread": 1})
                shape = f"{trees} trees, max depth {params['max_depth']}, category codes as numbers"
            else:
                import catboost

                params = {"iterations": trees, "depth": 4 if quick else 6, "learning_rate": 0.05,
                          "thread_count": 1, "random_seed": 0, "verbose": False}
                path = inf.CACHE / f"cb-{ds}-real-{inf._cache_key(params, X.shape)}.cbm"
                if not path.exists():
                    catboost.CatBoostClassifier(**params).fit(Xtr, ytr).save_model(str(path))
                model = catboost.CatBoostClassifier()
                model.load_model(str(path))
                if not path.with_suffix(".json").exists():
                    model.save_model(str(path.with_suffix(".json")), format="json")
                shape = f"{trees} trees of depth {params['depth']}, category codes as numbers"
            out.append({"name": name, "library": lib, "dataset": ds, "model": model, "path": path, "trees": trees,
                        "test": Xte, "notes": f"{lib} on {ds}: {shape}; {len(Xte):,} test rows"})
    return out


def _source_predict(case: dict[str, Any], space: str) -> Any:
    """The source library's own predictor on one thread, margins (``raw``) or P(class 1) (``proba``)."""
    m, lib = case["model"], case["library"]
    if lib == "lightgbm":
        return lambda X: m.predict(X, raw_score=space == "raw", num_threads=1)
    if lib == "xgboost":
        return lambda X: m.inplace_predict(X, predict_type="margin" if space == "raw" else "value")
    return lambda X: (m.predict(X, prediction_type="RawFormulaVal", thread_count=1) if space == "raw"
                      else m.predict_proba(X, thread_count=1)[:, 1])


def real_peers(case: dict[str, Any], quick: bool) -> dict[str, dict[str, Any]]:
    """Every peer of one model, built once: ``predict`` (rows -> 1-D outputs in ``space``), build wall and
    CPU seconds, its tree count; a peer that cannot be built or is not installed gets a ``status``."""
    import lumber
    from lumber.compiler.targets.table import TableOptions, TableTarget

    lib, path = case["library"], case["path"]
    peers: dict[str, dict[str, Any]] = {}

    def add(name: str, space: str, build: Any, trees: int | None = None) -> None:
        try:
            (fn, info), wall, cpu = inf.timed(build)
        except Exception as exc:  # a peer missing or failing is reported, never fatal
            peers[name] = {"status": f"{type(exc).__name__}: {str(exc).splitlines()[0][:160] if str(exc) else ''}"}
            return
        peers[name] = {"status": "ok", "space": space, "predict": fn, "build_wall_s": wall, "build_cpu_s": cpu,
                       "trees": trees or case["trees"], **info}

    src = lumber.load(case["model"] if lib != "catboost" else str(path))
    exact = lib != "xgboost"  # XGBoost sums in float32; lumber's tables and forest C sum in float64

    def tables() -> Any:
        pred = TableTarget().compile(src, TableOptions(exact=exact))
        st = pred.report["tables"]
        return ((lambda X: pred.predict_raw(X, threads=1)),
                {"trees": st["trees_out"], "isa": getattr(pred._runtime, "isa", "numpy"),
                 "table_bytes": st["table_bytes"], "method": st["method"], "max_depth": st["max_depth"],
                 "depth_choice": {str(k): v for k, v in st.get("recompose", {}).get("depth_choice", {}).items()}})

    add("lumber tables", "raw", tables)
    add("lumber forest C", "raw", lambda: ((lambda X, p=lumber.compile(src, target="c"): p.predict_raw(X, threads=1)), {}))
    add(f"{lib} (source)", "raw", lambda: (_source_predict(case, "raw"), {}))
    lignum_file = str(path.with_suffix(".json")) if lib == "catboost" else str(path)

    def lignum_peer(compiled: bool) -> Any:
        import lignum

        m = lignum.load(lignum_file)
        if compiled:
            m.compile()
        return (lambda X: m.predict(X, raw_score=True, n_jobs=1)), {"compiled": bool(m.uses_compiled)}

    add("pylignum compiled", "raw", lambda: lignum_peer(True))
    add("pylignum interpreter", "raw", lambda: lignum_peer(False))
    if lib == "lightgbm":
        def lleaves_peer() -> Any:
            import lleaves

            m = lleaves.Model(model_file=str(path))
            m.compile()
            return (lambda X: m.predict(X, n_jobs=1)), {}

        add("lleaves", "proba", lleaves_peer)

    def onedal_peer() -> Any:
        import daal4py as d4p

        m = d4p.mb.convert_model(case["model"])
        d4p.daalinit(1)
        return (lambda X: np.asarray(m.predict_proba(X))[:, -1]), {}

    add("oneDAL", "proba", onedal_peer)
    return peers


def real_run(quick: bool, reps: int, names: list[str] | None = None) -> dict[str, Any]:
    """Every model on its test rows tiled to 100k (quick: 20k): each peer's margins (or probabilities)
    against the source library's, then per-row CPU and wall time, interleaved, median of ``reps``."""
    load0 = os.getloadavg()
    n_rows = 20_000 if quick else 100_000
    res: dict[str, Any] = {"mode": "quick" if quick else "full", "models": {}}
    for case in real_models(quick, names):
        Xte = case["test"]
        X = np.ascontiguousarray(np.tile(Xte, (-(-n_rows // len(Xte)), 1))[:n_rows])
        m_load0 = os.getloadavg()
        peers = real_peers(case, quick)
        refs = {sp: np.asarray(_source_predict(case, sp)(X), dtype=np.float64).reshape(-1) for sp in ("raw", "proba")}
        scale = float(np.abs(refs["raw"]).max())
        runners = {}
        for name, p in peers.items():
            if p["status"] != "ok":
                continue
            got = np.asarray(p["predict"](X), dtype=np.float64).reshape(-1)
            diff = np.abs(got - refs[p["space"]])
            p.update(exact=bool(np.array_equal(got, refs[p["space"]])), max_abs_diff=float(np.nanmax(diff)),
                     nan_mismatch=int(np.sum(np.isnan(got) != np.isnan(refs[p["space"]]))))
            runners[name] = p["predict"]
        times: dict[str, list[tuple[float, float]]] = {k: [] for k in runners}
        for _ in range(reps):  # interleaved; process CPU time (clock_gettime: ns resolution) and wall time
            for k, fn in runners.items():
                c0, w0 = time.process_time(), time.perf_counter()
                fn(X)
                times[k].append((time.process_time() - c0, time.perf_counter() - w0))
        for k, ts in times.items():
            cpu = float(np.median([t[0] for t in ts]))
            wall = float(np.median([t[1] for t in ts]))
            p = peers[k]
            p.update(cpu_s=cpu, wall_s=wall, ns_row=1e9 * cpu / n_rows, ns_row_tree=1e9 * cpu / n_rows / p["trees"],
                     ns_row_source_tree=1e9 * cpu / n_rows / case["trees"])
        for p in peers.values():
            p.pop("predict", None)
        res["models"][case["name"]] = {"notes": case["notes"], "trees": case["trees"], "margin_scale": scale,
                                       "loadavg_before": m_load0, "loadavg_after": os.getloadavg(), "peers": peers}
        ok = {k: v for k, v in peers.items() if v["status"] == "ok"}
        print(f"[real] {case['name']}: " + ", ".join(f"{k} {v['ns_row']:.0f} ns/row" for k, v in ok.items()), flush=True)
    res["machine"] = {"cpus": os.cpu_count(), "loadavg_start": load0, "loadavg_end": os.getloadavg(), "rows": n_rows,
                      "reps": reps, "python": sys.version.split()[0]}
    return res


def real_markdown(res: dict[str, Any]) -> str:
    mach = res["machine"]
    lines = ["# Exact oblivious tables on real rows", "",
             f"Mode {res['mode']}; the test rows of each bundled data set tiled to {mach['rows']:,}; every peer in one "
             f"process on 1 thread; process CPU time and wall time, median of {mach['reps']} interleaved runs. "
             f"Load average {mach['loadavg_start'][0]:.2f} at start and {mach['loadavg_end'][0]:.2f} at end on "
             f"{mach['cpus']} CPUs. `diff` is the max |difference| from the source library's own output in the "
             "peer's space (`raw` margins; `proba` for peers that only give probabilities), `rel` the same over the "
             "largest |margin|; ns/row/tree divides by the source model's trees (tables: by their own trees in "
             "brackets). XGBoost sums leaves in float32, lumber in float64 (`exact=False`), hence its 1e-6 diffs.", ""]
    for name, e in res["models"].items():
        lb, la = e["loadavg_before"][0], e["loadavg_after"][0]
        lines += [f"## {name}", "", f"{e['notes']}; margins up to {e['margin_scale']:.3g}; load {lb:.2f} -> {la:.2f}.", "",
                  "| peer | trees | ns/row (CPU) | ns/row (wall) | ns/row/tree | exact | diff | rel | space | "
                  "build s wall (CPU) |",
                  "|---|---|---|---|---|---|---|---|---|---|"]
        for k, p in e["peers"].items():
            if p["status"] != "ok":
                lines.append(f"| {k} | – | – | – | – | – | – | – | – | {p['status']} |")
                continue
            own = f" ({p['ns_row_tree']:.2f})" if p["trees"] != e["trees"] else ""
            lines.append(f"| {k} | {p['trees']:,} | {p['ns_row']:,.0f} | {1e9 * p['wall_s'] / mach['rows']:,.0f} | "
                         f"{p['ns_row_source_tree']:.2f}{own} | {'yes' if p['exact'] else 'no'} | "
                         f"{p['max_abs_diff']:.3g} | "
                         f"{p['max_abs_diff'] / e['margin_scale'] if p['space'] == 'raw' else float('nan'):.2g} | "
                         f"{p['space']} | {p['build_wall_s']:.1f} ({p['build_cpu_s']:.1f}) |")
        lines.append("")
    return "\n".join(lines)


def build_run(quick: bool, names: list[str] | None = None) -> dict[str, Any]:
    """The real-row models' default tables (``lumber.compile(model, "table")``'s re-composition) built one after
    another: process CPU seconds of the build (what the 120 s budget is about; load-independent enough to
    run on a busy machine), tables, depth choice and max |diff| from the source's margins on the test rows."""
    import lumber
    from lumber.compiler.tables import to_tables

    load0 = os.getloadavg()
    res: dict[str, Any] = {"mode": "quick" if quick else "full", "models": {}}
    for case in real_models(quick, names):
        src = lumber.load(case["model"] if case["library"] != "catboost" else str(case["path"]))
        st: dict[str, Any] = {}
        l0, c0 = os.getloadavg(), time.process_time()
        ens = to_tables(src, stats=st, exact=case["library"] != "xgboost")
        cpu = time.process_time() - c0
        ref = np.asarray(_source_predict(case, "raw")(case["test"]), dtype=np.float64).reshape(-1)
        got = ens.evaluate(case["test"]).reshape(-1)
        rc = st.get("recompose", {})
        res["models"][case["name"]] = {
            "notes": case["notes"], "build_cpu_s": cpu, "method": st["method"], "tables": ens.n_trees,
            "trees_by_depth": st["trees_by_depth"], "table_bytes": st["table_bytes"],
            "depth_choice": {str(k): v for k, v in rc.get("depth_choice", {}).items()},
            "max_abs_diff": float(np.abs(got - ref).max()), "margin_scale": float(np.abs(ref).max()),
            "loadavg_before": l0, "loadavg_after": os.getloadavg()}
        print(f"[build] {case['name']}: {ens.n_trees:,} tables in {cpu:.1f} s CPU", flush=True)
    res["machine"] = {"cpus": os.cpu_count(), "loadavg_start": load0, "loadavg_end": os.getloadavg(),
                      "python": sys.version.split()[0]}
    return res


def build_markdown(res: dict[str, Any]) -> str:
    m = res["machine"]
    lines = ["# Exact oblivious tables: the default build", "",
             "`lumber.compile(model, \"table\")`'s tables (default options) for the real-row models, built one "
             f"after another; process CPU seconds of the build; load average {m['loadavg_start'][0]:.1f} -> "
             f"{m['loadavg_end'][0]:.1f} on {m['cpus']} CPUs. diff: max |margin - source margin| on the test rows.",
             "", "| model | build s CPU | tables | by depth | depths priced (trees, ns/row) | diff | scale |",
             "|---|---|---|---|---|---|---|"]
    for name, e in res["models"].items():
        by = ", ".join(f"{c:,} x d{d}" for d, c in sorted(e["trees_by_depth"].items(), key=lambda x: int(x[0])))
        ch = ", ".join(f"d{d}: {int(v['trees']):,}" + (" given up" if v.get("given_up") else
                                                       " over table-mb" if v.get("over_budget") else
                                                       f", {v['cost']:,.0f}") for d, v in e["depth_choice"].items())
        lines.append(f"| {name} | {e['build_cpu_s']:.1f} | {e['tables']:,} | {by} | {ch or e['method']} | "
                     f"{e['max_abs_diff']:.2g} | {e['margin_scale']:.3g} |")
    return "\n".join(lines + [""])


# -- the cost of one table by its depth ------------------------------------------------------------------

COST_DEPTHS = (8, 10, 12, 14)
"""Max depths of the unpolished ``grow`` covers whose tables ``--table-cost`` times, depth by depth."""
COST_MIN_TREES = 64
"""Fewest tables of one depth in a cover for that depth to be timed."""


def table_cost_run(quick: bool, reps: int, names: list[str] | None = None) -> dict[str, Any]:
    """CPU nanoseconds per row of one table by its depth, in the table runtime on real rows: the LightGBM
    500 x 63 credit and adult models (``--real``'s), unpolished ``grow`` covers at :data:`COST_DEPTHS`; for
    every depth with at least :data:`COST_MIN_TREES` tables in a cover, those tables alone and half of them
    (``ObliviousEnsemble.select_trees``), quantized, timed interleaved on the test rows tiled to 100k
    (quick: 20k; median of ``reps``); the marginal cost is the difference over the tables it adds (what
    one more table costs, without the per-row binarization both share)."""
    import lumber
    from lumber.backends.table_c import TableRuntime
    from lumber.passes.transforms.polynomial import expand_forest
    from lumber.passes.transforms.quantize import quantize_ensemble
    from lumber.passes.transforms.recompose_oblivious import recompose

    load0 = os.getloadavg()
    n_rows = 20_000 if quick else 100_000
    res: dict[str, Any] = {"mode": "quick" if quick else "full", "models": {}}
    names = names or [f"lightgbm-{d}" for d in REAL_DATASETS]
    for case in real_models(quick, names):
        if case["library"] != "lightgbm":
            raise SystemExit(f"--table-cost: {case['name']} is not a LightGBM model (lightgbm-credit, lightgbm-adult)")
        Xte = case["test"]
        X = np.ascontiguousarray(np.tile(Xte, (-(-n_rows // len(Xte)), 1))[:n_rows])
        poly, _ = expand_forest(lumber.load(case["model"]))
        entry: dict[str, Any] = {"notes": case["notes"], "covers": {}, "loadavg_before": os.getloadavg()}
        runners: dict[tuple[int, int, str], Any] = {}
        for cap in COST_DEPTHS:
            c0 = time.process_time()
            ens, st = recompose(poly, max_depth=cap, strategy="grow", polish=0)
            entry["covers"][str(cap)] = {"trees": ens.n_trees, "trees_by_depth": st["trees_by_depth"],
                                         "build_cpu_s": time.process_time() - c0}
            for d, count in st["trees_by_depth"].items():
                if count < COST_MIN_TREES:
                    continue
                idx = np.flatnonzero(ens.depth == d)
                for part, sel in (("all", idx), ("half", idx[: idx.shape[0] // 2])):
                    rt = TableRuntime(quantize_ensemble(ens.select_trees(sel)))
                    runners[(cap, int(d), part)] = (rt, int(sel.shape[0]))
                    entry.setdefault("isa", rt.isa)
        times: dict[tuple[int, int, str], list[float]] = {k: [] for k in runners}
        for _ in range(reps):  # interleaved
            for k, (rt, _n) in runners.items():
                times[k].append(_cpu(rt.predict_raw, X))
        rows = []
        for (cap, d, part), (_rt, n) in runners.items():
            if part != "all":
                continue
            t_all, t_half = float(np.median(times[(cap, d, "all")])), float(np.median(times[(cap, d, "half")]))
            n_half = runners[(cap, d, "half")][1]
            rows.append({"cover_depth": cap, "depth": d, "tables": n, "cpu_s": t_all, "half_cpu_s": t_half,
                         "ns_row_table": 1e9 * t_all / n_rows / n,
                         "marginal_ns_row_table": 1e9 * (t_all - t_half) / n_rows / max(n - n_half, 1)})
        entry["tables"] = rows
        entry["loadavg_after"] = os.getloadavg()
        res["models"][case["name"]] = entry
        print(f"[table-cost] {case['name']}: " + ", ".join(
            f"d{r['depth']} (cover {r['cover_depth']}) {r['marginal_ns_row_table']:.2f}" for r in rows), flush=True)
    res["ns_by_depth"] = cost_by_depth(res)
    res["machine"] = {"cpus": os.cpu_count(), "loadavg_start": load0, "loadavg_end": os.getloadavg(), "rows": n_rows,
                      "reps": reps, "python": sys.version.split()[0]}
    return res


def cost_by_depth(res: dict[str, Any]) -> dict[str, float]:
    """Per depth: the median marginal cost over every model and cover that timed it (ns per row and table)."""
    per: dict[int, list[float]] = {}
    for e in res["models"].values():
        for r in e["tables"]:
            per.setdefault(r["depth"], []).append(r["marginal_ns_row_table"])
    return {str(d): float(np.median(v)) for d, v in sorted(per.items())}


def save_costs(res: dict[str, Any], path: Path, command: str) -> None:
    """The measured costs as the re-composition's data (``lumber/passes/transforms/table_cost.json``)."""
    import json
    from datetime import datetime, timezone

    from lumber.ir import atomic_write_text

    isas = sorted({e.get("isa", "?") for e in res["models"].values()})
    doc = {"what": "CPU nanoseconds per row of one more table in the C table runtime, by the table's depth "
                   "(marginal: the time of a cover's tables of one depth minus that of half of them, over the "
                   "tables added), on real rows, one thread",
           "command": command, "date": datetime.now(timezone.utc).strftime("%Y-%m-%d"),
           "models": sorted(res["models"]), "rows": res["machine"]["rows"], "reps": res["machine"]["reps"],
           "isa": ",".join(isas), "loadavg": [res["machine"]["loadavg_start"][0], res["machine"]["loadavg_end"][0]],
           "ns_by_depth": res["ns_by_depth"]}
    atomic_write_text(path, json.dumps(doc, indent=1) + "\n")


def table_cost_markdown(res: dict[str, Any]) -> str:
    m = res["machine"]
    lines = ["# Oblivious tables: the cost of one table by its depth", "",
             "CPU time per row of one more table in the C table runtime (one thread, process CPU time, median of "
             f"{m['reps']}), on {m['rows']:,} test rows (tiled) of each model; load average "
             f"{m['loadavg_start'][0]:.1f} -> {m['loadavg_end'][0]:.1f} on {m['cpus']} CPUs. A cover's tables of "
             "one depth and half of them are timed; marginal = the difference over the tables it adds.", "",
             "| model | cover max depth | depth | tables | ns/row/table (all) | marginal ns/row/table |",
             "|---|---|---|---|---|---|"]
    for name, e in res["models"].items():
        for r in e["tables"]:
            lines.append(f"| {name} | {r['cover_depth']} | {r['depth']} | {r['tables']:,} | "
                         f"{r['ns_row_table']:.2f} | {r['marginal_ns_row_table']:.2f} |")
    lines += ["", "Cost by depth (median marginal): " + ", ".join(
        f"d{d} {v:.2f} ns" for d, v in res["ns_by_depth"].items()), ""]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--reps", type=int, default=None)
    ap.add_argument("--peers", nargs="*", default=["library", "tl2cgen", "lleaves", "lumber-c", "lumber-oblivious"])
    ap.add_argument("--models", nargs="*", default=None,
                    help="models to run (default: lightgbm-synthetic lightgbm-shallow catboost-d6 catboost-d8 "
                         "catboost-d4; with --tolerance or --recompose: lightgbm-adult lightgbm-credit "
                         "lightgbm-synthetic)")
    ap.add_argument("--out", type=Path, default=inf.RESULTS)
    ap.add_argument("--recompose", action="store_true", help="exact re-composition of LightGBM 500 x 63")
    ap.add_argument("--refit", action="store_true", help="with --recompose: prune-refit and its tables too")
    ap.add_argument("--forms", nargs="+", metavar="STRATEGY:DEPTH",
                    help="with --recompose: the exact forms to build, STRATEGY:DEPTH[:nobins][:rN] "
                         "(default: pack:8 grow:8 pack:10 grow:10)")
    ap.add_argument("--tolerance", action="store_true",
                    help="quality-bounded translation (formula 5) and its cascade on LightGBM 500 x 63")
    ap.add_argument("--real", action="store_true",
                    help="the real-row protocol: LightGBM, XGBoost and CatBoost models on credit and adult "
                         "rows, lumber's tables and forest C beside pylignum, lleaves, oneDAL and the source library")
    ap.add_argument("--build-only", action="store_true",
                    help="with --real: only build each model's default tables and record the build's CPU seconds, "
                         "tables and depth choice (writes oblivious-build{,-quick}.*)")
    ap.add_argument("--table-cost", action="store_true",
                    help="the cost of one table per row by its depth on real rows (the re-composition's depth "
                         "choice); with --save-costs also written to lumber/passes/transforms/table_cost.json")
    ap.add_argument("--save-costs", action="store_true",
                    help="with --table-cost: write the measured costs where the re-composition reads them")
    ap.add_argument("--fit-to-budget", action="store_true",
                    help="with --tolerance: no early stop (PrefixStop); the fit runs to its formula-5 stop or "
                         "time budget, as before (writes oblivious-tolerance-budget{,-quick}.*)")
    ap.add_argument("--stem", default=None,
                    help="results file name without suffix (default: oblivious, oblivious-recompose, "
                         "oblivious-tolerance; -quick in quick mode)")
    _outputs.add_dry_run(ap)
    args = ap.parse_args(argv)
    forms = parse_forms(args.forms)
    kind = ("oblivious-tolerance" + ("-budget" if args.fit_to_budget else "") if args.tolerance
            else "oblivious-recompose" if args.recompose
            else ("oblivious-build" if args.build_only else "oblivious-real") if args.real
            else "oblivious-table-cost" if args.table_cost else "oblivious")
    stem = args.stem or _outputs.stem(kind, args.quick)
    if _outputs.dry_run(args, args.out / f"{stem}.json", args.out / f"{stem}.md",
                        *([] if args.recompose or args.tolerance or args.real or args.table_cost
                          else [args.out / f"inference-{stem}.md"])):
        return 0
    if args.table_cost:
        res = table_cost_run(args.quick, args.reps or 5, args.models)
        md = table_cost_markdown(res)
        inf.write_results(args.out, stem, res, md)
        if args.save_costs:
            cmd = "python bench/oblivious.py --table-cost" + (" --quick" if args.quick else "") + (
                f" --reps {args.reps}" if args.reps else "") + (f" --models {' '.join(args.models)}" if args.models else "")
            save_costs(res, COSTS_FILE, cmd)
        print(md)
        return 0
    if args.real and args.build_only:
        res = build_run(args.quick, args.models)
        md = build_markdown(res)
        inf.write_results(args.out, stem, res, md)
        print(md)
        return 0
    if args.real:
        res = real_run(args.quick, args.reps or 3, args.models)
        md = real_markdown(res)
        inf.write_results(args.out, stem, res, md)
        print(md)
        return 0
    if args.tolerance:
        res = tolerance_run(args.quick, args.reps or 3, args.models, to_budget=args.fit_to_budget)
        md = tolerance_markdown(res)
        inf.write_results(args.out, stem, res, md)
        print(md)
        return 0
    if args.recompose:
        res = recompose_run(args.quick, args.reps or 3, args.refit, forms, args.models)
        md = recompose_markdown(res)
        inf.write_results(args.out, stem, res, md)
        print(md)
        return 0
    models = args.models or ["lightgbm-synthetic", "lightgbm-shallow", "catboost-d6", "catboost-d8", "catboost-d4"]
    ns = argparse.Namespace(quick=args.quick, reps=args.reps, models=models, peers=args.peers, out=args.out)
    res = inf.run(ns)
    summ = summary(res)
    res["oblivious_summary"] = summ
    md = markdown(res, summ)
    inf.write_results(args.out, stem, res, md)
    from lumber.ir import atomic_write_text

    atomic_write_text(args.out / f"inference-{stem}.md", inf.markdown(res))
    print(md)
    return 0


if __name__ == "__main__":
    sys.exit(main())
