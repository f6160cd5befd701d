"""Progress on stderr for work that takes more than a few seconds (batch, build, report, multi-row explain).

One bar per piece of work: tqdm's when it is installed, else a plain one-line bar.
Silent when stderr is not a terminal (logs and pipes stay clean) or when the
command was given ``--quiet``; stdout is never touched, so results stay parseable.
"""

from __future__ import annotations

import sys
import time
from typing import IO, Any


def enabled(quiet: bool = False, stream: IO[str] | None = None) -> bool:
    """Whether a command shows progress: not with ``--quiet``, and only on a terminal."""
    s = stream if stream is not None else sys.stderr
    return not quiet and bool(getattr(s, "isatty", lambda: False)())


class Progress:
    """A progress bar on stderr (tqdm when installed, else a plain one); silent when not a terminal."""

    def __init__(self, total: int, initial: int, enabled: bool | None, desc: str, stream: IO[str] | None = None):
        self.stream = stream if stream is not None else sys.stderr
        self.enabled = bool(self.stream.isatty()) if enabled is None else enabled
        self.total, self.n, self.desc = total, initial, desc
        self.failed = 0
        self._bar: Any = None
        self._last = 0.0
        if not self.enabled:
            return
        try:
            from tqdm import tqdm
        except ImportError:
            self._draw(force=True)
            return
        self._bar = tqdm(total=total, initial=initial, desc=desc, unit="row", file=self.stream, dynamic_ncols=True,
                         smoothing=0.1)

    def update(self, n: int, failed: int = 0) -> None:
        self.n += n
        self.failed += failed
        if self._bar is not None:
            self._bar.update(n)
            if self.failed:
                self._bar.set_postfix(failed=self.failed, refresh=False)
        elif self.enabled:
            self._draw()

    def _draw(self, force: bool = False) -> None:
        now = time.monotonic()
        if not force and now - self._last < 0.2 and self.n < self.total:
            return
        self._last = now
        frac = self.n / self.total if self.total else 1.0
        bar = "#" * int(30 * frac)
        fail = f", {self.failed} failed" if self.failed else ""
        self.stream.write(f"\r{self.desc} [{bar:<30}] {self.n}/{self.total} rows{fail}")
        self.stream.flush()

    def close(self) -> None:
        if self._bar is not None:
            self._bar.close()
        elif self.enabled:
            self._draw(force=True)
            self.stream.write("\n")
            self.stream.flush()

    def __enter__(self) -> "Progress":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
