"""Distribution: the one summary of a sample of latencies or sizes (count, mean, p50/p90/p95/p99, max).

Every percentile prefixcache reports comes from :meth:`Distribution.of`: linear
interpolation between the closest ranks (numpy's default ``method="linear"``, also
Hyndman & Fan's definition 7 and Excel's ``PERCENTILE.INC``). Replay's pass summaries
(in-process and ``--server``) and the fleet simulation's router rows all use it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable

import numpy as np


@dataclass(frozen=True, slots=True)
class Distribution:
    """Summary of ``count`` samples in the unit of the samples (seconds for latencies):
    their ``mean``, 50th / 90th / 95th / 99th percentiles (linear interpolation, numpy's
    default) and ``max``. Every figure is None without samples (``count`` 0)."""

    count: int
    mean: float | None
    p50: float | None
    p90: float | None
    p95: float | None
    p99: float | None
    max: float | None

    @classmethod
    def of(cls, values: Iterable[float | None], digits: int | None = 6) -> "Distribution":
        """The distribution of ``values`` (None values are left out), each figure rounded to
        ``digits`` decimals (None = unrounded, as measured). Never raises for an empty input."""
        v = np.asarray([x for x in values if x is not None], dtype=float)
        if not v.size:
            return cls(0, None, None, None, None, None, None)
        q = np.percentile(v, [50, 90, 95, 99])

        def r(x: float) -> float:
            return float(x) if digits is None else round(float(x), digits)
        return cls(int(v.size), r(v.mean()), r(q[0]), r(q[1]), r(q[2]), r(q[3]), r(v.max()))

    def flat(self) -> tuple[float, float, float]:
        """``(p50, p95, p99)`` with 0.0 for a figure without samples: the deprecated flat keys
        (``ttft_p50`` …, ``ttft_p50_s`` …) the summaries keep for one release."""
        return (self.p50 or 0.0, self.p95 or 0.0, self.p99 or 0.0)
