"""Progress on stderr for work that takes more than a few seconds (batch, build, report, multi-row explain).

One bar per piece of work on a terminal: tqdm's when it is installed, else a plain
one-line bar. When stderr is not a terminal (CI, a log file) the same work logs a
line every :data:`LOG_EVERY` seconds -- rows done, rows per second, time left --
and a last line when it ends, so a run shorter than that stays silent. Nothing
with ``--quiet``; stdout is never touched, so results stay parseable.
"""

from __future__ import annotations

import sys
import time
from typing import IO, Any, Callable


LOG_EVERY = 30.0
"""Seconds between progress lines when stderr is not a terminal."""


def enabled(quiet: bool = False, stream: IO[str] | None = None) -> bool:
    """Whether a command reports progress: always, unless ``--quiet`` (a bar on a terminal, else log lines)."""
    return not quiet


def _is_tty(stream: IO[str]) -> bool:
    return bool(getattr(stream, "isatty", lambda: False)())


class Progress:
    """A progress bar on stderr (tqdm when installed, else a plain one), or timed log lines when stderr is
    not a terminal. ``enabled=None``: a bar on a terminal only; ``clock`` is what the log lines time."""

    def __init__(self, total: int, initial: int, enabled: bool | None, desc: str, stream: IO[str] | None = None,
                 clock: Callable[[], float] = time.monotonic):
        self.stream = stream if stream is not None else sys.stderr
        self.enabled = _is_tty(self.stream) if enabled is None else enabled
        self.total, self.n, self.desc = total, initial, desc
        self.failed = 0
        self._bar: Any = None
        self._last = 0.0
        self.clock = clock
        self._log = self.enabled and not _is_tty(self.stream)
        self._t0, self._n0, self._logged = clock(), initial, False
        if not self.enabled or self._log:
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
        elif self._log:
            self._line()
        elif self.enabled:
            self._draw()

    def _line(self, last: bool = False) -> None:
        """One log line (``desc: 40/200 rows, 0.52 rows/s, about 5m08s left``) when :data:`LOG_EVERY` seconds
        have passed since the last (or since the start), and at the end when a line was logged before."""
        now = self.clock()
        if not (now - (self._last if self._logged else self._t0) >= LOG_EVERY or (last and self._logged)):
            return
        self._last, self._logged = now, True
        done, secs = self.n - self._n0, max(now - self._t0, 1e-9)
        rate = done / secs
        left = ""
        if not last and rate > 0 and self.total > self.n:
            left = f", about {_duration((self.total - self.n) / rate)} left"
        fail = f", {self.failed} failed" if self.failed else ""
        end = f" in {_duration(secs)}" if last else ""
        self.stream.write(f"{self.desc}: {self.n}/{self.total} rows{fail}, {rate:.2f} rows/s{left}{end}\n")
        self.stream.flush()

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
        elif self._log:
            self._line(last=True)
        elif self.enabled:
            self._draw(force=True)
            self.stream.write("\n")
            self.stream.flush()

    def __enter__(self) -> "Progress":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _duration(seconds: float) -> str:
    s = int(round(seconds))
    return f"{s // 3600}h{s % 3600 // 60:02d}m" if s >= 3600 else f"{s // 60}m{s % 60:02d}s" if s >= 60 else f"{s}s"
