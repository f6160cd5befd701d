"""The build manifest (``manifest.json``): what went in, what came out, what was checked, how long it took.

Unlike the report, the manifest records wall-clock timings and tool versions;
it is the build's log for machines. ``build_key`` hashes every input and the
build file, so a later build with the same key and intact artifacts has
nothing to do.
"""

from __future__ import annotations

import hashlib
import json
import platform
import sys
from importlib import metadata
from pathlib import Path
from typing import Any

from lumber import __version__

from .compile_steps import State, _plain
from .gates import Check

MANIFEST_VERSION = 1
PACKAGES = ("numpy", "scipy", "pandas", "scikit-learn", "lightgbm", "xgboost", "xgboost-cpu", "treelite", "onnx",
            "onnxruntime", "highspy", "joblib")


def versions() -> dict[str, str | None]:
    """Python, platform and the versions of the libraries a build may touch (None: not installed)."""
    out: dict[str, str | None] = {"lumber": __version__, "python": platform.python_version(),
                                  "platform": f"{sys.platform}-{platform.machine()}"}
    for p in PACKAGES:
        try:
            out[p] = metadata.version(p)
        except metadata.PackageNotFoundError:
            out[p] = None
    return out


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def make_manifest(st: State, checks: list[Check], files: list[Path], root: Path, build_key: str,
                  seconds: float) -> dict[str, Any]:
    cfg = st.inp.config
    failed = [c for c in checks if c.failed]
    return _plain({
        "lumber_manifest": MANIFEST_VERSION, "build_key": build_key,
        "status": "failed" if failed else "passed",
        "build_file": {"file": cfg.path.name, "sha256": st.inp.hashes["build_file"]},
        "seed": cfg.seed,
        "inputs": {role: {"file": cfg.relative(p), "sha256": st.inp.hashes[role], "bytes": p.stat().st_size}
                   for role, p in cfg.inputs().items()},
        "versions": versions(),
        "passes": st.passes,
        "targets": st.targets,
        "checks": [c.to_dict() for c in checks],
        "steps": st.steps,
        "artifacts": [{"file": p.relative_to(root).as_posix(), "sha256": sha256(p), "bytes": p.stat().st_size}
                      for p in sorted(files)],
        "seconds": seconds,
    })


def read_manifest(folder: Path) -> dict[str, Any] | None:
    """The manifest of a previous build in ``folder``, or None when there is none (or it is damaged)."""
    p = folder / "manifest.json"
    try:
        doc = json.loads(p.read_text())
    except (OSError, ValueError):
        return None
    return doc if isinstance(doc, dict) and doc.get("lumber_manifest") == MANIFEST_VERSION else None


def intact(folder: Path, manifest: dict[str, Any]) -> bool:
    """Every artifact the manifest lists is present with its recorded hash."""
    for a in manifest.get("artifacts", []):
        p = folder / a["file"]
        if not p.is_file() or p.stat().st_size != a["bytes"] or sha256(p) != a["sha256"]:
            return False
    return True


__all__ = ["MANIFEST_VERSION", "intact", "make_manifest", "read_manifest", "versions"]
