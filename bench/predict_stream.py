"""Streaming ``lumber predict``: peak memory and wall time on a generated CSV of many rows.

Generates a CSV of ``--rows`` rows of 8 normal features (written in blocks, never whole in
memory), compiles a LightGBM binary model (30 trees, 31 leaves) to a C library, and runs
``lumber predict MODEL.so DATA.csv -o OUT.csv --quiet`` in a child process; its peak
resident memory comes from ``getrusage(RUSAGE_CHILDREN)``. The claim it checks: memory
is bounded by the chunk size, not by the file (10M rows under 4 GB). The load average
is recorded before and after; wall time under load is not evidence of speed.

    .venv/bin/python bench/predict_stream.py              # 10M rows (about 1 GB of CSV)
    .venv/bin/python bench/predict_stream.py --quick      # 500k rows
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

import _outputs

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "bench" / "results"


def _csv(path: Path, rows: int) -> None:
    rng = np.random.default_rng(0)
    with path.open("w") as fh:
        fh.write(",".join(f"f{i}" for i in range(8)) + "\n")
        for start in range(0, rows, 500_000):
            np.savetxt(fh, rng.normal(size=(min(500_000, rows - start), 8)), fmt="%.9g", delimiter=",")


def _model(folder: Path) -> Path:
    import lightgbm as lgb
    import pandas as pd

    import lumber

    rng = np.random.default_rng(1)
    X = pd.DataFrame(rng.normal(size=(5000, 8)), columns=[f"f{i}" for i in range(8)])
    y = (X.f0 + X.f1 * X.f2 > 0).astype(int)
    lgb.LGBMClassifier(n_estimators=30, verbose=-1).fit(X, y).booster_.save_model(str(folder / "m.txt"))
    lumber.compile(folder / "m.txt", target="c", path=folder / "m.so")
    return folder / "m.so"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=10_000_000)
    ap.add_argument("--quick", action="store_true", help="500k rows")
    ap.add_argument("--chunk-rows", type=int, default=None, help="lumber predict --chunk-rows (default: its own)")
    _outputs.add_dry_run(ap)
    args = ap.parse_args()
    rows = 500_000 if args.quick else args.rows
    name = _outputs.stem("predict-stream", args.quick)
    if _outputs.dry_run(args, RESULTS / f"{name}.json", RESULTS / f"{name}.md"):
        return 0
    with tempfile.TemporaryDirectory(prefix="lumber-bench-stream-") as tmp:
        folder = Path(tmp)
        data = folder / "rows.csv"
        _csv(data, rows)
        so = _model(folder)
        cmd = [sys.executable, "-m", "lumber", "predict", str(so), str(data), "-o", str(folder / "out.csv"), "--quiet"]
        if args.chunk_rows:
            cmd += ["--chunk-rows", str(args.chunk_rows)]
        load_before = os.getloadavg()
        t0 = time.perf_counter()
        subprocess.run(cmd, check=True, env=dict(os.environ, PYTHONPATH=str(ROOT)))
        seconds = time.perf_counter() - t0
        load_after = os.getloadavg()
        peak_kb = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
        written = sum(1 for _ in (folder / "out.csv").open()) - 1
        size = data.stat().st_size
    if written != rows:
        raise SystemExit(f"wrote {written} predictions for {rows} rows")
    res = {"rows": rows, "csv_bytes": size, "peak_rss_mb": round(peak_kb / 1024, 1), "wall_seconds": round(seconds, 1),
           "load_before": [round(x, 2) for x in load_before], "load_after": [round(x, 2) for x in load_after],
           "cores": os.cpu_count(), "command": "lumber predict MODEL.so DATA.csv -o OUT.csv --quiet"}
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / f"{name}.json").write_text(json.dumps(res, indent=2) + "\n")
    (RESULTS / f"{name}.md").write_text(
        f"| rows | CSV | peak RSS | wall | load before / after ({res['cores']} cores) |\n|---|---|---|---|---|\n"
        f"| {rows:,} | {size / 1e9:.2f} GB | {res['peak_rss_mb']:,} MB | {seconds:.0f} s | "
        f"{load_before[0]:.2f} / {load_after[0]:.2f} |\n\n`{res['command']}` (bench/predict_stream.py)\n")
    print(json.dumps(res))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
