"""Atomic file writes: an artifact is either complete or absent, never half-written.

One rule for every output path of every command: missing parent folders are
created; a path that names an existing directory is an error (never written into).
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from pathlib import Path
from typing import IO, Iterator

from .diagnostics import LumberError


class OutputError(LumberError):
    """An output path cannot be written."""


def _umask() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def prepare_output(target: Path) -> Path:
    """Check an output file path and create its missing parent folders; returns the parent."""
    if target.is_dir():
        raise OutputError(f"{target}: is a directory; an output file is expected here",
                          f"name a file, e.g. {target / ('out' + (target.suffix or ''))}")
    parent = target.parent if str(target.parent) else Path(".")
    blocker = next((p for p in (parent, *parent.parents) if p.exists() and not p.is_dir()), None)
    if blocker is not None:
        raise OutputError(f"{target}: '{blocker}' is a file, not a folder", "choose an output path in a folder")
    try:
        parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise OutputError(f"{target}: cannot create the folder '{parent}' ({exc.strerror})",
                          "choose a writable output path") from None
    return parent


def prepare_output_dir(target: Path) -> Path:
    """Check an output folder path (an existing file there is an error) and create it with its parents."""
    if target.exists() and not target.is_dir():
        raise OutputError(f"{target}: is a file; an output folder is expected here",
                          "name a folder (it is created when missing)")
    blocker = next((p for p in target.parents if p.exists() and not p.is_dir()), None)
    if blocker is not None:
        raise OutputError(f"{target}: '{blocker}' is a file, not a folder", "choose an output folder elsewhere")
    try:
        target.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise OutputError(f"{target}: cannot create the folder ({exc.strerror})",
                          "choose a writable output folder") from None
    return target


@contextlib.contextmanager
def atomic_open(path: str | Path, mode: str = "wb") -> Iterator[IO]:
    """Open a temp file beside ``path``; rename it over ``path`` only if the block succeeds."""
    target = Path(path)
    parent = prepare_output(target)
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=parent)
    except OSError as exc:
        raise OutputError(f"{target}: cannot write here ({exc.strerror})",
                          "choose a writable output path") from None
    try:
        with os.fdopen(fd, mode) as fh:
            yield fh
            fh.flush()
            os.fsync(fh.fileno())
        os.chmod(tmp, 0o666 & ~_umask())
        os.replace(tmp, target)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def atomic_write_bytes(path: str | Path, data: bytes) -> None:
    with atomic_open(path, "wb") as fh:
        fh.write(data)


def atomic_write_text(path: str | Path, text: str) -> None:
    with atomic_open(path, "w") as fh:
        fh.write(text)
