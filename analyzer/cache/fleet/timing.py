"""The load and timing model of a fleet simulation: hardware constants, a replica's
queue, and the fit of those constants from a replay run's measured TTFTs.

One replica serves requests first come, first served:

* **prefill** is compute-bound and runs one request at a time (a single prefill
  server per replica): ``overhead_s + uncached_tokens / prefill_tok_s + restore_s``;
* **decode** runs up to ``concurrency`` requests at once (slots), each at
  ``decode_tok_s`` output tokens per second;
* a request starts its prefill when it has arrived, the prefill server is free and a
  slot is free; TTFT = queue wait + its prefill; its slot is held until decode ends.

The model ignores batching interference (prefill and decode of different requests
never slow each other) and chunked prefill; it is meant to trade hits against queues,
not to predict a given engine to the millisecond. The presets in :data:`HARDWARE`
are round, order-of-magnitude figures for bf16 models on one GPU replica (assumptions,
not measurements); :func:`fit_replay` replaces ``prefill_tok_s`` and ``overhead_s``
by what a real replay measured.
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass, replace
from pathlib import Path


from prefixcache.analyzer.errors import ConfigError, InputError
from prefixcache.analyzer.replay_rows import read_rows


@dataclass(frozen=True, slots=True)
class Hardware:
    """One replica's constants: prefill tokens/s of uncached prompt, a fixed per-request
    overhead (seconds, inside TTFT), decode output tokens/s per request, decode slots,
    and KV bytes per token (for byte-sized tiers). ``name``: the preset, ``+calibrated``
    when fitted. Also the ``hardware`` object of the fleet ``--json`` document."""

    name: str
    prefill_tok_s: float
    overhead_s: float
    decode_tok_s: float
    concurrency: int
    kv_bytes_per_token: int

    def prefill_s(self, tokens: int) -> float:
        """Seconds to prefill ``tokens`` uncached tokens (no overhead)."""
        return tokens / self.prefill_tok_s


#: ``--hardware`` presets (assumed round figures, see the module docstring). KV bytes
#: per token: layers × KV heads × head dim × 2 (K, V) × 2 bytes (bf16).
HARDWARE: dict[str, Hardware] = {h.name: h for h in (
    Hardware("h100-llama3-8b", 12_000.0, 0.015, 80.0, 64, 32 * 8 * 128 * 2 * 2),
    Hardware("a100-llama3-8b", 6_000.0, 0.020, 50.0, 48, 32 * 8 * 128 * 2 * 2),
    Hardware("h200-llama3-70b-tp4", 8_000.0, 0.030, 35.0, 64, 80 * 8 * 128 * 2 * 2),
    Hardware("cpu-smollm2-135m", 2_000.0, 0.010, 40.0, 4, 30 * 3 * 64 * 2 * 2),
)}
DEFAULT_HARDWARE = "h100-llama3-8b"


def hardware(name: str) -> Hardware:
    """The preset ``name``; ConfigError naming the choices for an unknown one."""
    if name not in HARDWARE:
        raise ConfigError(f"unknown --hardware {name!r}; choose one of {', '.join(HARDWARE)}")
    return HARDWARE[name]


@dataclass(frozen=True, slots=True)
class Fit:
    """TTFT = ``overhead_s`` + computed tokens / ``prefill_tok_s``, least squares over
    ``rows`` replay results; errors of the fit (seconds, and relative to the measured
    TTFT) and R²."""

    rows: int
    prefill_tok_s: float
    overhead_s: float
    mean_abs_error_s: float
    mean_rel_error: float
    r2: float

    def apply(self, hw: Hardware) -> Hardware:
        """``hw`` with the fitted prefill rate and overhead."""
        return replace(hw, name=f"{hw.name}+calibrated", prefill_tok_s=self.prefill_tok_s, overhead_s=self.overhead_s)


def _ttft(row: dict) -> float:
    """A replay row's TTFT (seconds): ``ttft_s`` when written, else ``t_first_token − t_start``."""
    if "ttft_s" in row:
        return float(row["ttft_s"])
    return float(row["t_first_token"]) - float(row["t_start"])


def replay_points(path: str | Path) -> list[tuple[int, float]]:
    """``(computed_tokens, ttft_s)`` of every row of a replay results JSONL file
    (``docs/schemas/replay-result.schema.json``: the keys ``computed_tokens`` and
    ``ttft_s`` or ``t_start`` / ``t_first_token``), read by
    :func:`~prefixcache.analyzer.replay_rows.read_rows`: a torn (unterminated) last line
    is dropped as replay's ``--resume`` does; any other bad line raises InputError
    naming the file and line; a missing file raises InputError."""
    return read_rows(path, lambda row: (int(row["computed_tokens"]), _ttft(row)))[0]


def fit_replay(path: str | Path) -> Fit:
    """Fit prefill tok/s and per-request overhead to a replay run's measured TTFTs
    (ordinary least squares of TTFT on computed tokens). InputError when the file has
    fewer than two distinct computed-token counts or TTFT does not grow with them."""
    pts = replay_points(path)
    xs = [x for x, _ in pts]
    if len(set(xs)) < 2:
        raise InputError("calibration needs replay rows with at least two different computed_tokens", str(path))
    n = len(pts)
    mx, my = sum(xs) / n, sum(y for _, y in pts) / n
    sxx = sum((x - mx) ** 2 for x in xs)
    sxy = sum((x - mx) * (y - my) for x, y in pts)
    slope = sxy / sxx
    if slope <= 0:
        raise InputError("TTFT does not grow with computed tokens in these replay rows: nothing to fit", str(path))
    icpt = my - slope * mx
    res = [y - (icpt + slope * x) for x, y in pts]
    ss_tot = sum((y - my) ** 2 for _, y in pts)
    rel = [abs(e) / y for e, (_, y) in zip(res, pts) if y > 0]
    return Fit(n, round(1.0 / slope, 3), round(icpt, 6), round(sum(abs(e) for e in res) / n, 6),
               round(sum(rel) / len(rel), 6) if rel else 0.0,
               round(1.0 - sum(e * e for e in res) / ss_tot, 6) if ss_tot else 1.0)


def calibration_of(path: str | Path) -> tuple[Fit, dict[str, tuple[float, float]]]:
    """What ``--calibrate PATH`` sets: the prefill fit and the measured tier links (``--tiers``
    name → bandwidth bytes/s, latency s). A tier calibration document
    (:mod:`~.fleet.calibration`, ``prefixcache calibrate``) gives both; a replay results JSONL the
    prefill fit only (:func:`fit_replay`). InputError for an unreadable file or a prefill that
    does not grow with length."""
    from prefixcache.analyzer.cache.fleet.calibration import prefill_fit, read_calibration, tier_links

    cal = read_calibration(path)
    if cal is None:
        return fit_replay(path), {}
    f = prefill_fit(cal)
    if f.per_token_s <= 0:
        raise InputError("the calibration's prefill time does not grow with length: nothing to fit", str(path))
    pts = [(m.tokens, m.seconds) for m in cal.measurements if m.curve == "prefill"]
    mae = sum(abs(y - f.seconds(x)) for x, y in pts) / len(pts)
    return Fit(len(pts), round(1.0 / f.per_token_s, 3), round(f.intercept_s, 6), round(mae, 6), f.mean_rel_error,
               f.r2), tier_links(cal)


class ReplicaClock:
    """One replica's queue (see the module docstring). Times in seconds."""

    def __init__(self, hw: Hardware) -> None:
        self.hw = hw
        self.prefill_free = 0.0
        self._slots: list[float] = []          # end times of requests holding a slot
        self._active: list[tuple[float, int]] = []  # (end, blocks) of requests in flight
        self._prefilling: list[tuple[float, int]] = []  # (prefill end, uncached blocks)
        self._sums = [0, 0]  # blocks in _active, in _prefilling
        self.wait_s = 0.0
        self.requests = 0

    def advance(self, now: float) -> None:
        """Drop requests finished by ``now`` from the load figures."""
        for i, heap in enumerate((self._active, self._prefilling)):
            while heap and heap[0][0] <= now:
                self._sums[i] -= heapq.heappop(heap)[1]

    def load(self) -> int:
        """Requests in flight (queued, prefilling or decoding) after :meth:`advance`."""
        return len(self._active)

    def active_blocks(self) -> int:
        """KV blocks of the requests in flight (Dynamo's decode blocks)."""
        return self._sums[0]

    def prefill_blocks(self) -> int:
        """Uncached blocks of requests not done prefilling (Dynamo's active prefill blocks)."""
        return self._sums[1]

    def serve(self, arrival: float, uncached: int, restore_s: float, output_tokens: int, blocks: int,
              block_size: int) -> tuple[float, float]:
        """Queue one request; returns (queue wait, TTFT) in seconds."""
        hw = self.hw
        slot = self._slots[0] if len(self._slots) >= hw.concurrency else 0.0
        start = max(arrival, self.prefill_free, slot)
        prefill = hw.overhead_s + hw.prefill_s(uncached) + restore_s
        self.prefill_free = start + prefill
        end = self.prefill_free + output_tokens / hw.decode_tok_s
        if len(self._slots) >= hw.concurrency:
            heapq.heapreplace(self._slots, end)
        else:
            heapq.heappush(self._slots, end)
        fresh = -(-uncached // block_size)
        heapq.heappush(self._active, (end, blocks))
        heapq.heappush(self._prefilling, (self.prefill_free, fresh))
        self._sums[0] += blocks
        self._sums[1] += fresh
        wait = start - arrival
        self.wait_s += wait
        self.requests += 1
        return wait, wait + prefill
