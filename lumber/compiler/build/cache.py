"""The incremental cache: each build step's result and files, keyed by a hash of everything it read.

A step's key is the sha256 of its name, lumber's version and the hashes and
options it depends on (input files, the upstream IR's fingerprint, the seed).
An entry is a folder ``<step>-<key>`` holding ``result.json`` and the step's
files; it is written into a temp folder and renamed, so a crash never leaves
half an entry. After a successful build, entries the build did not use are
removed, so the cache holds one build's worth of results.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from lumber import __version__


def digest(*parts: Any) -> str:
    """sha256 of parts as canonical JSON (sorted keys; unknown objects by ``str``)."""
    text = json.dumps([__version__, *parts], sort_keys=True, default=str, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()


@dataclass
class Entry:
    """A step's result (JSON-ready dict) and the folder holding its files."""

    result: dict[str, Any]
    folder: Path
    cached: bool

    def file(self, name: str) -> Path:
        return self.folder / "files" / name

    def files(self) -> list[Path]:
        root = self.folder / "files"
        return sorted(p for p in root.rglob("*") if p.is_file()) if root.exists() else []


@dataclass
class StepCache:
    """Step results under ``root``; ``enabled=False`` recomputes everything (``--force``) but still stores."""

    root: Path
    enabled: bool = True
    used: set[str] = field(default_factory=set)

    def run(self, step: str, key: str, compute: Callable[[Path], dict[str, Any]]) -> Entry:
        """The cached entry for (step, key), or ``compute(files_dir)`` stored as a new one.

        ``compute`` writes its files into the folder it is given and returns the JSON result.
        """
        name = f"{_safe(step)}-{key[:32]}"
        self.used.add(name)
        folder = self.root / name
        result_file = folder / "result.json"
        if self.enabled and result_file.is_file():
            try:
                return Entry(json.loads(result_file.read_text()), folder, True)
            except (OSError, json.JSONDecodeError):
                pass  # a damaged entry is recomputed
        self.root.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(prefix=f".{name}.", dir=self.root))
        try:
            (tmp / "files").mkdir()
            result = compute(tmp / "files")
            (tmp / "result.json").write_text(json.dumps(result, sort_keys=True, indent=1, default=str))
            if folder.exists():
                shutil.rmtree(folder)
            os.replace(tmp, folder)
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)
            raise
        return Entry(result, folder, False)

    def prune(self) -> int:
        """Remove entries this build did not use; returns how many."""
        if not self.root.exists():
            return 0
        gone = 0
        for p in self.root.iterdir():
            if p.is_dir() and p.name not in self.used:
                shutil.rmtree(p, ignore_errors=True)
                gone += 1
        return gone


def _safe(step: str) -> str:
    return "".join(c if c.isalnum() or c in "-_" else "_" for c in step)


__all__ = ["Entry", "StepCache", "digest"]
