"""KV tiers below the GPU cache: ``--tiers gpu=16GiB,cpu=128GiB,disk=1TiB``.

Grammar: comma-separated ``NAME=SIZE[@BANDWIDTH][+LATENCY]``, fastest first. SIZE is a
``--capacity`` spec (``16GiB``, ``2Mtok``, ``4000blocks``, ``5%``); BANDWIDTH bytes per
second (``25GB/s``, ``3GiB/s``); LATENCY seconds per restore (``20us``, ``1ms``, ``0.1s``).
The first tier is the replica's GPU cache (its size is the replica's capacity; no
bandwidth). Names ``cpu`` and ``disk`` have default links (:data:`LINKS`, assumed:
host memory over PCIe 5 ×16 at a practical 50 GB/s and 20 µs; NVMe at 5 GB/s and
100 µs); any other name must give its bandwidth.

Blocks evicted from a tier demote to the next one (LRU in each lower tier; evicted
from the last, they are gone). A request's prefix continuing past its GPU hit into
lower tiers is restored only when that costs less than recomputing it
(:func:`restore_cost`): restore = Σ per tier (bytes / bandwidth + latency), against
tokens / prefill tok/s; at equal cost it is recomputed. Of a run that crosses tiers,
the leading part that saves the most is restored (:func:`plan_restore`), the rest
recomputed. Restored blocks are copied
up (the lower copies stay). Source of the rule: issue 13; inference-sim#1699 (a reload
billed as recompute) is what "counted as a hit with a cost" avoids.
"""

from __future__ import annotations

import re
from collections import OrderedDict
from dataclasses import dataclass
from typing import Mapping, Sequence

from prefixcache.analyzer.cache.capacity import Capacity, parse_capacity
from prefixcache.analyzer.errors import ConfigError

#: Default (bandwidth bytes/s, latency s) of the named lower tiers (assumptions).
LINKS = {"cpu": (50e9, 20e-6), "disk": (5e9, 100e-6)}
_BW = {"b/s": 1, "kb/s": 1e3, "mb/s": 1e6, "gb/s": 1e9, "tb/s": 1e12, "kib/s": 2**10, "mib/s": 2**20,
       "gib/s": 2**30, "tib/s": 2**40}
_LAT = {"s": 1.0, "ms": 1e-3, "us": 1e-6, "µs": 1e-6, "ns": 1e-9}
_NUM = re.compile(r"^\s*([0-9]*\.?[0-9]+)\s*([A-Za-zµ/]+)\s*$")


@dataclass(frozen=True, slots=True)
class TierSpec:
    """One tier: name, size (a parsed capacity), link bandwidth (bytes/s; None for the
    GPU tier) and per-restore latency (seconds)."""

    name: str
    size: Capacity
    bandwidth: float | None
    latency_s: float


def _unit(text: str, table: dict[str, float], what: str, item: str) -> float:
    m = _NUM.match(text)
    if not m or m.group(2).lower() not in table:
        raise ConfigError(f"--tiers {item}: bad {what} {text!r}; use e.g. {'25GB/s' if what == 'bandwidth' else '20us'}")
    return float(m.group(1)) * table[m.group(2).lower()]


def parse_tiers(text: str, links: Mapping[str, tuple[float, float]] | None = None) -> tuple[TierSpec, ...]:
    """Parse ``--tiers`` (module docstring); ``links``: measured (bandwidth bytes/s, latency s)
    by tier name that replace :data:`LINKS` for tiers giving no bandwidth or latency of their own
    (``--calibrate``, :mod:`.calibration`). ConfigError naming the bad item."""
    known = {**LINKS, **(links or {})}
    out = []
    for item in (t.strip() for t in text.split(",")):
        if not item:
            continue
        name, eq, rest = item.partition("=")
        if not eq or not name.strip():
            raise ConfigError(f"--tiers {item}: use NAME=SIZE[@BANDWIDTH][+LATENCY], e.g. cpu=128GiB@25GB/s")
        rest, _, lat = rest.partition("+")
        size, _, bw = rest.partition("@")
        name = name.strip().lower()
        default = known.get(name)
        if out and not bw and default is None:
            raise ConfigError(f"--tiers {item}: tier {name!r} needs a bandwidth (NAME=SIZE@25GB/s)")
        bandwidth = _unit(bw, _BW, "bandwidth", item) if bw else (default[0] if default and out else None)
        latency = _unit(lat, _LAT, "latency", item) if lat else (default[1] if default and out else 0.0)
        if bandwidth is not None and bandwidth <= 0:
            raise ConfigError(f"--tiers {item}: bandwidth must be positive")
        out.append(TierSpec(name, parse_capacity(size), bandwidth, latency))
    if len(out) < 1:
        raise ConfigError("--tiers: empty; use e.g. gpu=16GiB,cpu=128GiB,disk=1TiB")
    if len({t.name for t in out}) != len(out):
        raise ConfigError(f"--tiers {text}: a tier is named twice")
    return tuple(out)


class LowerTiers:
    """The tiers below the GPU of one replica: an LRU of block hashes each, with
    capacity in blocks (``caps``); :meth:`demote` takes what the tier above evicted."""

    def __init__(self, specs: Sequence[TierSpec], caps: Sequence[int]) -> None:
        self.specs = tuple(specs)
        self.caps = tuple(caps)
        self.tiers: list[OrderedDict[int, None]] = [OrderedDict() for _ in specs]

    def where(self, h: int) -> int:
        """Index of the lower tier holding block ``h`` (fastest first), −1 if none."""
        for i, t in enumerate(self.tiers):
            if h in t:
                return i
        return -1

    def run(self, chain: Sequence[int], start: int, limit: int) -> list[int]:
        """Tier index of each block of ``chain[start:limit]`` held below the GPU, up to the
        first block held nowhere."""
        out = []
        for h in chain[start:limit]:
            i = self.where(h)
            if i < 0:
                break
            out.append(i)
        return out

    def touch(self, chain: Sequence[int], tiers: Sequence[int], start: int) -> None:
        """Mark restored blocks as recently used in their tiers."""
        for k, i in enumerate(tiers):
            self.tiers[i].move_to_end(chain[start + k])

    def demote(self, blocks: Sequence[int], level: int = 0) -> None:
        """Put ``blocks`` (evicted from the tier above ``level``) into tier ``level``,
        cascading its own LRU evictions down; the last tier's evictions are dropped."""
        if level >= len(self.tiers) or not blocks:
            return
        tier, cap = self.tiers[level], self.caps[level]
        for h in blocks:
            tier[h] = None
            tier.move_to_end(h)
        over = []
        while len(tier) > cap:
            over.append(tier.popitem(last=False)[0])
        self.demote(over, level + 1)


def plan_restore(tiers: Sequence[int], specs: Sequence[TierSpec], block_bytes: int,
                 recompute_s: float) -> tuple[int, float]:
    """How many leading blocks of a lower-tier run to restore: the prefix whose restore
    (:func:`restore_cost`) saves the most against recomputing it (``recompute_s`` a
    block), only when it saves something (at equal cost: recompute). Returns (blocks,
    restore seconds); (0, 0.0) when recomputing is as fast."""
    best, best_s, best_gain = 0, 0.0, 0.0
    cost, seen = 0.0, set()
    for j, i in enumerate(tiers, 1):
        spec = specs[i]
        cost += block_bytes / (spec.bandwidth or float("inf")) + (0.0 if i in seen else spec.latency_s)
        seen.add(i)
        gain = j * recompute_s - cost
        if gain > best_gain:
            best, best_s, best_gain = j, cost, gain
    return best, best_s


def restore_cost(tiers: Sequence[int], specs: Sequence[TierSpec], block_bytes: int) -> float:
    """Seconds to restore blocks held in lower tiers ``tiers`` (one index per block):
    per tier used, its blocks' bytes / bandwidth + its latency."""
    s = 0.0
    for i in sorted(set(tiers)):
        n = sum(1 for t in tiers if t == i)
        spec = specs[i]
        s += n * block_bytes / (spec.bandwidth or float("inf")) + spec.latency_s
    return s
