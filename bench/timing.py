"""The one way the benches time work: CPU seconds of interleaved pairs (or rounds), medians.

Wall clock swings 2–3x between runs of the same bench on a shared machine; CPU seconds of this
process (``time.process_time``: every thread of it) swing far less, and running the compared
sides one after the other in each round (A, B, A, B ...) puts a load change on both alike. A
bench imports it as ``from timing import interleaved`` (``bench/`` is on ``sys.path`` when a
bench runs as a script).
"""

from __future__ import annotations

import statistics
import time
from typing import Callable


def cpu_call(fn: Callable[[], object], clock: Callable[[], float] = time.process_time) -> tuple[float, object]:
    """(CPU seconds of one call of ``fn`` by ``clock``, its result)."""
    t = clock()
    out = fn()
    return clock() - t, out


def interleaved(fns: dict[str, Callable[[], object]], rounds: int, warmup: bool = True,
                clock: Callable[[], float] = time.process_time) -> tuple[dict[str, float], dict[str, object]]:
    """Median CPU seconds of each of ``fns`` (name → callable) over ``rounds`` rounds that call each
    once, in order (after one untimed round of each when ``warmup``: a cold first call lands on no
    side), and each one's last result."""
    times: dict[str, list[float]] = {name: [] for name in fns}
    last: dict[str, object] = {}
    for k in range(rounds + (1 if warmup else 0)):
        for name, fn in fns.items():
            t, last[name] = cpu_call(fn, clock)
            if k or not warmup:
                times[name].append(t)
    return {name: statistics.median(v) for name, v in times.items()}, last
