"""Load shapes of a server replay: when each request of a pass is sent.

* ``sequential`` — one request at a time, in the one arrival order;
* ``--concurrency N`` — up to N requests in flight, sent in arrival order;
* ``--rate R`` — Poisson arrivals at R requests/s (exponential gaps, seeded);
* ``--schedule logged [--speedup X]`` — the logged inter-arrival times divided by X.

Whatever the shape, a session's turn k is never sent before turn k−1's response has
come back (it waits; its scheduled time is kept, so the wait shows as queueing delay).
Offsets are seconds from the pass's start.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np

from prefixcache.analyzer.errors import ConfigError

SCHEDULES = ("none", "logged")


@dataclass(frozen=True, slots=True)
class LoadShape:
    """``concurrency``: requests in flight at most (1 = sequential; None = unbounded, only
    with a rate or schedule); ``rate``: Poisson arrivals per second (None = as fast as the
    concurrency allows); ``schedule``: ``none`` or ``logged``; ``speedup``: divides logged
    gaps; ``seed``: the Poisson generator's. Raises ConfigError for nonsense values."""

    concurrency: int | None = 1
    rate: float | None = None
    schedule: str = "none"
    speedup: float = 1.0
    seed: int = 0

    def __post_init__(self) -> None:
        if self.concurrency is not None and self.concurrency < 1:
            raise ConfigError(f"--concurrency {self.concurrency}: must be ≥ 1")
        if self.rate is not None and not self.rate > 0:
            raise ConfigError(f"--rate {self.rate}: must be > 0 requests/s")
        if self.schedule not in SCHEDULES:
            raise ConfigError(f"--schedule {self.schedule}: choose from {', '.join(SCHEDULES)}")
        if self.rate is not None and self.schedule != "none":
            raise ConfigError("--rate and --schedule logged both set send times: give one")
        if not self.speedup > 0:
            raise ConfigError(f"--speedup {self.speedup}: must be > 0")

    @property
    def name(self) -> str:
        """A short description (``sequential``, ``concurrency 4``, ``poisson 2/s``, ``logged ×10``)."""
        parts = []
        if self.rate is not None:
            parts.append(f"poisson {self.rate:g}/s seed {self.seed}")
        if self.schedule == "logged":
            parts.append(f"logged ×{self.speedup:g}")
        if self.concurrency != 1 or not parts:
            parts.append("sequential" if self.concurrency == 1 else
                         "unbounded concurrency" if self.concurrency is None else f"concurrency {self.concurrency}")
        return ", ".join(parts)

    def offsets(self, clocks: Sequence[float]) -> list[float]:
        """Send offsets (seconds from the pass start) for requests whose logical clocks (logged
        seconds, in arrival order) are ``clocks``: all 0 without a rate or schedule."""
        n = len(clocks)
        if self.rate is not None:
            gaps = np.random.default_rng(self.seed).exponential(1.0 / self.rate, n)
            return [0.0] + [float(x) for x in np.cumsum(gaps[1:])] if n else []
        if self.schedule == "logged" and n:
            return [max(0.0, (c - clocks[0]) / self.speedup) for c in clocks]
        return [0.0] * n

    def limit(self) -> int | None:
        """Requests in flight at most: the concurrency (None = unbounded)."""
        return self.concurrency
