"""One clock for a whole counterfactual query, so ``time_limit`` bounds all of it.

The warm start, the model building and the solve each ask the same
:class:`Deadline` how long is left, and stop (keeping their best point so far)
once it has passed. The clock is injectable so tests can drive it without
sleeping or timing anything.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from typing import Callable

Clock = Callable[[], float]


@dataclass(frozen=True)
class Deadline:
    """The moment ``end`` on ``clock`` (seconds) by which the query must answer."""

    end: float
    clock: Clock = field(default=time.perf_counter, compare=False)

    @classmethod
    def after(cls, seconds: float, clock: Clock | None = None) -> "Deadline":
        c = clock or time.perf_counter
        return cls(c() + seconds if math.isfinite(seconds) else math.inf, c)

    @classmethod
    def never(cls) -> "Deadline":
        return cls(math.inf)

    def remaining(self) -> float:
        return self.end - self.clock()

    def expired(self) -> bool:
        return self.clock() >= self.end

    def share(self, fraction: float) -> "Deadline":
        """A sooner deadline: ``fraction`` of the time left (for a step that must leave time to the next)."""
        now = self.clock()
        if not math.isfinite(self.end):
            return self
        return Deadline(now + max(self.end - now, 0.0) * fraction, self.clock)
