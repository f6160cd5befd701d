"""Run every benchmark script in bench/, in quick mode where the script has one (``make bench``).

    .venv/bin/python bench/run_all.py [--full] [--only inference,prune] [--list] [--dry-run]

Each script runs in its own process, one after another (never in parallel: they
time things), and writes its own JSON + markdown results under bench/results/.
Every script has a quick mode whose files are its own (``NAME-quick.*``, see
``bench/_outputs.py``), so ``make bench`` never overwrites full results;
``--dry-run`` lists the files each script would write. The exit code is
non-zero when any script failed; a summary line per script says how long it took.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent


def scripts() -> list[Path]:
    return sorted(p for p in HERE.glob("*.py") if p.name != Path(__file__).name and not p.name.startswith("_"))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--full", action="store_true", help="full size: no --quick (long: hours)")
    ap.add_argument("--only", help="comma-separated script names (without .py)")
    ap.add_argument("--list", action="store_true", help="print the scripts and their command lines, run nothing")
    ap.add_argument("--dry-run", action="store_true", help="run each script with --dry-run: list the files it writes")
    args = ap.parse_args(argv)
    chosen = scripts()
    if args.only:
        wanted = {s.strip() for s in args.only.split(",") if s.strip()}
        unknown = wanted - {p.stem for p in chosen}
        if unknown:
            ap.error(f"unknown benchmark(s): {', '.join(sorted(unknown))}; known: {', '.join(p.stem for p in chosen)}")
        chosen = [p for p in chosen if p.stem in wanted]
    failed = []
    for path in chosen:
        cmd = [sys.executable, str(path)] + ([] if args.full else ["--quick"]) + (["--dry-run"] if args.dry_run else [])
        shown = " ".join([Path(cmd[0]).name, *cmd[1:]])
        if args.list:
            print(shown)
            continue
        print(f"== {shown}", flush=True)
        t0 = time.perf_counter()
        rc = subprocess.call(cmd, cwd=HERE.parent)
        print(f"== {path.stem}: {'ok' if rc == 0 else f'FAILED (exit {rc})'} in {time.perf_counter() - t0:.0f} s",
              flush=True)
        if rc != 0:
            failed.append(path.stem)
    if failed:
        print(f"failed: {', '.join(failed)}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
