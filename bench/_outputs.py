"""Result files of the bench scripts, named in one place so a quick run never overwrites a full one.

Every script takes ``--quick`` (small sizes, what ``make bench`` and ``run_all.py``
pass) and ``--dry-run`` (print the files this run would write, then stop), and
names its files with :func:`stem`: ``NAME.json`` for a full run,
``NAME-quick.json`` for a quick one.
"""

from __future__ import annotations

import argparse
from pathlib import Path

RESULTS = Path(__file__).resolve().parent / "results"


def stem(name: str, quick: bool) -> str:
    """The file stem of result ``name``: quick runs get their own (``-quick``)."""
    return f"{name}-quick" if quick else name


def add_dry_run(ap: argparse.ArgumentParser) -> None:
    ap.add_argument("--dry-run", action="store_true", help="print the files this run would write and stop")


def dry_run(args: argparse.Namespace, *paths: Path | str) -> bool:
    """With ``--dry-run``: print ``paths`` (the files the run writes) and return True (the caller stops).

    Either way, every path's folder must exist: a run is refused before its work (as lumber's CLI refuses
    an output in a missing folder) rather than ending in a traceback when it writes."""
    missing = sorted({str(Path(p).parent) for p in paths if not Path(p).parent.is_dir()})
    if missing:
        raise SystemExit(f"error: the folder {', '.join(repr(m) for m in missing)} does not exist "
                         f"(create it first: mkdir -p {' '.join(missing)})")
    if not getattr(args, "dry_run", False):
        return False
    for p in paths:
        print(p)
    return True
