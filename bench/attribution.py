"""Benchmark: MonoForest attribution nu(k) on scikit-learn digits, beside SHAP (paper Figure 3).

One LightGBM binary classifier per digit (one-vs-rest, as the paper's MNIST
figure with CatBoost). For each: nu(k) of every pixel (formula (8), signed)
from ``lumber.attribution`` over the training rows, and SHAP's global
importance (mean |SHAP value| from LightGBM's own TreeSHAP, ``predict(pred_contrib=True)``, plus the
signed mean). Heat maps (8 x 8 pixels) are drawn side by side into
``bench/results/attribution_digits.png``; the tables give the rank agreement
of |nu| with mean |SHAP| (Spearman) and the time of each method.

matplotlib is a bench-only extra.

    .venv/bin/python bench/attribution.py [--digits 0,1,2,3,4,5,6,7,8,9] [--runs 3] [--quick] [--dry-run]

Writes ``bench/results/attribution.json``, ``attribution.md`` and ``attribution_digits.png``
(``attribution-quick.*`` and ``attribution-quick_digits.png`` with --quick: digits 0 and 1, one run).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import time
from pathlib import Path
from typing import Any

import numpy as np

import _outputs
import lumber
from lumber.passes.analyses.attribution import attribution
from lumber.passes.transforms.polynomial import forest_to_polynomial

HERE = Path(__file__).resolve().parent
RESULTS = HERE / "results"


def spearman(a: np.ndarray, b: np.ndarray) -> float:
    from scipy.stats import spearmanr

    return float(spearmanr(a, b).statistic)


def run_digit(digit: int, X: np.ndarray, y: np.ndarray, Xte: np.ndarray, yte: np.ndarray, runs: int) -> dict[str, Any]:
    import lightgbm as lgb

    target = (y == digit).astype(int)
    model = lgb.LGBMClassifier(n_estimators=150, num_leaves=8, learning_rate=0.1, min_child_samples=5,
                               verbose=-1, n_jobs=1, random_state=0).fit(X, target)
    acc = float(np.mean((model.predict(Xte) == 1) == (yte == digit)))
    forest = lumber.load(model)
    t_mono, t_shap = [], []
    res = shap_vals = None
    for _ in range(runs):  # interleaved
        t0 = time.perf_counter()
        res = attribution(forest_to_polynomial(forest), X)
        t_mono.append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        shap_vals = model.booster_.predict(X, pred_contrib=True)[:, :-1]  # the last column is the base value
        t_shap.append(time.perf_counter() - t0)
    assert res is not None and shap_vals is not None
    sv = np.asarray(shap_vals)
    sv = sv[-1] if sv.ndim == 3 else sv
    nu = res.nu[:, 0]
    shap_abs = np.abs(sv).mean(axis=0)
    shap_signed = sv.mean(axis=0)
    used = (np.abs(nu) > 0) | (shap_abs > 0)
    return {
        "digit": digit, "test_accuracy": acc, "nu": nu.tolist(), "shap_mean_abs": shap_abs.tolist(),
        "shap_mean": shap_signed.tolist(), "pixels_used": int(used.sum()),
        "spearman_abs_nu_vs_shap": spearman(np.abs(nu[used]), shap_abs[used]),
        "top10_overlap": len(set(np.argsort(-np.abs(nu))[:10]) & set(np.argsort(-shap_abs)[:10])),
        "monoforest_seconds": statistics.median(t_mono), "shap_seconds": statistics.median(t_shap),
        "positive_pixels": int((nu > 0).sum()), "negative_pixels": int((nu < 0).sum()),
    }


def draw(rows: list[dict[str, Any]], mean_images: dict[int, np.ndarray], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(len(rows), 3, figsize=(6.6, 2.1 * len(rows)), squeeze=False)
    for i, r in enumerate(rows):
        nu = np.array(r["nu"]).reshape(8, 8)
        lim = float(np.abs(nu).max()) or 1.0
        panels = [(mean_images[r["digit"]], "gray_r", None, f"digit {r['digit']}: mean image"),
                  (nu, "RdBu_r", (-lim, lim), "MonoForest nu(k) (signed)"),
                  (np.array(r["shap_mean_abs"]).reshape(8, 8), "viridis", None, "SHAP mean |value|")]
        for ax, (img, cmap, lims, title) in zip(axes[i], panels):
            im = ax.imshow(img, cmap=cmap, vmin=lims[0] if lims else None, vmax=lims[1] if lims else None)
            ax.set_title(title, fontsize=8)
            ax.set_xticks([])
            ax.set_yticks([])
            fig.colorbar(im, ax=ax, fraction=0.046, pad=0.04).ax.tick_params(labelsize=6)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main() -> None:
    from sklearn.datasets import load_digits
    from sklearn.model_selection import train_test_split

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--digits", default=None, help="digits, comma-separated (default: all ten; quick: 0,1)")
    ap.add_argument("--runs", type=int, default=None, help="interleaved runs (default 3; quick 1)")
    ap.add_argument("--quick", action="store_true", help="digits 0 and 1, one run, into attribution-quick.*")
    _outputs.add_dry_run(ap)
    args = ap.parse_args()
    args.digits = args.digits or ("0,1" if args.quick else "0,1,2,3,4,5,6,7,8,9")
    args.runs = args.runs or (1 if args.quick else 3)
    name = _outputs.stem("attribution", args.quick)
    png, js, mdp = RESULTS / f"{name}_digits.png", RESULTS / f"{name}.json", RESULTS / f"{name}.md"
    if _outputs.dry_run(args, png, js, mdp):
        return
    X, y = load_digits(return_X_y=True)
    X = X.astype(np.float64)
    Xtr, Xte, ytr, yte = train_test_split(X, y, test_size=0.25, random_state=0, stratify=y)
    digits = [int(d) for d in args.digits.split(",")]
    rows = []
    for d in digits:
        r = run_digit(d, Xtr, ytr, Xte, yte, args.runs)
        rows.append(r)
        print(f"digit {d}: acc {r['test_accuracy']:.3f}, spearman {r['spearman_abs_nu_vs_shap']:.2f}, "
              f"monoforest {r['monoforest_seconds']:.3f} s, shap {r['shap_seconds']:.3f} s", flush=True)
    RESULTS.mkdir(exist_ok=True)
    draw(rows, {d: Xtr[ytr == d].mean(axis=0).reshape(8, 8) for d in digits}, png)
    doc = {"benchmark": "attribution", "dataset": "sklearn digits (8x8)", "rows_train": len(ytr),
           "model": "LightGBM binary one-vs-rest, 150 trees x 8 leaves", "digits": rows}
    js.write_text(json.dumps(doc, indent=2, sort_keys=True) + "\n")

    lines = ["# MonoForest attribution vs SHAP on digits (paper Figure 3)", "",
             f"One-vs-rest LightGBM per digit (150 trees x 8 leaves) on {len(ytr)} training images of scikit-learn "
             "digits; nu(k) over the training rows (signed), SHAP global importance = mean |SHAP value| "
             f"(LightGBM's TreeSHAP, pred_contrib, same rows). Heat maps: `bench/results/{png.name}`. "
             f"Times are medians of {args.runs} interleaved runs (MonoForest includes the polynomial conversion).", "",
             "| digit | test accuracy | pixels +/- (nu) | Spearman(|nu|, mean|SHAP|) | top-10 overlap | "
             "MonoForest s | SHAP s | ratio SHAP/MonoForest |", "|---|---|---|---|---|---|---|---|"]
    for r in rows:
        lines.append(f"| {r['digit']} | {r['test_accuracy']:.3f} | {r['positive_pixels']}/{r['negative_pixels']} | "
                     f"{r['spearman_abs_nu_vs_shap']:.2f} | {r['top10_overlap']}/10 | {r['monoforest_seconds']:.3f} | "
                     f"{r['shap_seconds']:.3f} | {r['shap_seconds'] / r['monoforest_seconds']:.2f} |")
    lines += ["", f"![nu(k) beside SHAP]({png.name})", "",
              "MonoForest's nu(k) is signed: red pixels raise the digit's margin on average, blue pixels lower it "
              "(the paper's point against SHAP's and Model Reliance's unsigned global scores).", "",
              f"Environment: Python {platform.python_version()} ({platform.machine()}, {os.cpu_count()} CPUs, load "
              f"average {os.getloadavg()[0]:.1f} at the end), numpy {np.__version__}, lightgbm "
              f"{__import__('lightgbm').__version__}."]
    md = "\n".join(lines) + "\n"
    mdp.write_text(md)
    print(md)


if __name__ == "__main__":
    main()
