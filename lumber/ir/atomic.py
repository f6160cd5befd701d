"""Atomic file writes: an artifact is either complete or absent, never half-written.

One rule for every output path of every command and of the Python API: the folder
an output file goes into must exist (a missing one is an error naming it, as
``cp`` or ``gcc -o`` do: a typo in a path never scatters new folders); an output
*folder* (``report -o DIR``, ``build -o DIR``, ``demo --keep DIR``, ``datasets
export ... DIR``) is created when missing, inside an existing folder; a path that
names an existing directory where a file is expected (or a file where a folder
is) is an error, never written into. Files are written to a temp file in the
same folder and renamed over the target, so a reader never sees half a file.
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


def existing_parent(target: Path, what: str = "an output path") -> Path:
    """The folder ``target`` goes into, which must exist (see the module docstring); an OutputError if not."""
    parent = target.parent if str(target.parent) else Path(".")
    blocker = next((p for p in (parent, *parent.parents) if p.exists() and not p.is_dir()), None)
    if blocker is not None:
        raise OutputError(f"{target}: '{blocker}' is a file, not a folder", f"choose {what} in a folder")
    if not parent.is_dir():
        raise OutputError(f"{target}: the folder '{parent}' does not exist",
                          f"create it first (mkdir -p {parent}) or choose {what} in an existing folder")
    return parent


def prepare_output(target: Path) -> Path:
    """Check an output file path (its folder exists, it is not a directory); returns the folder."""
    if target.is_dir():
        raise OutputError(f"{target}: is a directory; an output file is expected here",
                          f"name a file, e.g. {target / ('out' + (target.suffix or ''))}")
    return existing_parent(target)


def check_output_dir(target: Path) -> Path:
    """Check an output folder path without creating it: an existing folder, or a new one in an existing folder."""
    if target.exists() and not target.is_dir():
        raise OutputError(f"{target}: is a file; an output folder is expected here",
                          "name a folder (it is created when missing, inside an existing folder)")
    existing_parent(target, "an output folder")
    return target


def prepare_output_dir(target: Path) -> Path:
    """Check an output folder path (:func:`check_output_dir`) and create it when missing."""
    check_output_dir(target)
    try:
        target.mkdir(exist_ok=True)
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
