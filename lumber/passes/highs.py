"""A silent HiGHS instance, shared by every pass that solves a MILP (counterfactuals, the
re-composition's set cover): the banner is printed by the first construction in a process, so that
one is made with file descriptor 1 silenced."""

from __future__ import annotations

import contextlib
import os
import sys
import threading
from collections.abc import Iterator

_BANNER_LOCK = threading.Lock()
_BANNER_DONE = False


@contextlib.contextmanager
def quiet_stdout() -> Iterator[None]:
    """Silence C-level writes to stdout (HiGHS's banner, scipy's vendored debug line).

    Works on file descriptor 1 itself, so it also silences the banner when
    ``sys.stdout`` is replaced (pytest's capture, notebooks); C stdio buffers
    are flushed before the descriptor is restored.
    """
    fd = 1
    try:
        sys.stdout.flush()
        saved = os.dup(fd)
    except (AttributeError, OSError, ValueError):
        yield
        return
    devnull = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(devnull, fd)
        yield
    finally:
        _flush_c_stdio()
        os.dup2(saved, fd)
        os.close(saved)
        os.close(devnull)


def _flush_c_stdio() -> None:
    try:
        import ctypes

        ctypes.CDLL(None).fflush(None)
    except (OSError, AttributeError):
        pass


def new_highs():  # type: ignore[no-untyped-def]
    """A silent ``highspy.Highs`` (the banner prints once per process, on first construction)."""
    global _BANNER_DONE
    import highspy

    with _BANNER_LOCK:
        if not _BANNER_DONE:
            with quiet_stdout():
                h = highspy.Highs()
            _BANNER_DONE = True
        else:
            h = highspy.Highs()
    h.setOptionValue("output_flag", False)
    return h
