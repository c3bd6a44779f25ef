"""An engine's Prometheus ``/metrics`` text, parsed with ``prometheus_client``'s text parser.

A :class:`MetricsSnapshot` keeps every sample as ``name{labels} → value``; the counters
replay reports are summed over label sets (:meth:`MetricsSnapshot.total`), and a pass's
figure is the difference of two snapshots taken before and after it (:func:`delta`).
Hit rates are always a ratio of sums (hits summed over requests / queries summed over
requests), never a mean of per-request ratios (ai-dynamo/dynamo#14903).

The counter names of each engine (vLLM 0.32 ``vllm/v1/metrics/loggers.py``; llama.cpp
``tools/server/server.cpp`` with ``--metrics``; SGLang ``--enable-metrics``) are its
kind's ``counters`` trait (:mod:`prefixcache.replay.server.kinds`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping

from prometheus_client.parser import text_string_to_metric_families

from prefixcache.analyzer.errors import EngineError
from prefixcache.replay.server.kinds import VLLM_TTFT, kind_of

@dataclass(frozen=True, slots=True)
class MetricsSnapshot:
    """Every sample of one ``/metrics`` scrape: ``samples`` maps ``name`` → list of
    ``(labels, value)`` (label dicts as sorted tuples of pairs)."""

    samples: Mapping[str, tuple[tuple[tuple[tuple[str, str], ...], float], ...]]

    def total(self, name: str) -> float | None:
        """The sum of ``name`` over its label sets; None when the engine does not publish it."""
        got = self.samples.get(name)
        return None if got is None else sum(v for _, v in got)

    def labels(self, name: str) -> dict[str, str] | None:
        """The labels of ``name``'s first sample (info metrics such as ``vllm:cache_config_info``)."""
        got = self.samples.get(name)
        return dict(got[0][0]) if got else None

    def buckets(self, name: str) -> list[tuple[float, float]]:
        """A histogram's cumulative ``(le, count)`` buckets summed over label sets, by ``le``."""
        acc: dict[float, float] = {}
        for labels, value in self.samples.get(f"{name}_bucket", ()):
            le = float(dict(labels).get("le", "inf"))
            acc[le] = acc.get(le, 0.0) + value
        return sorted(acc.items())


def parse_metrics(text: str) -> MetricsSnapshot:
    """Parse Prometheus exposition text; EngineError when it is not that format."""
    samples: dict[str, list] = {}
    try:
        for family in text_string_to_metric_families(text):
            for s in family.samples:
                samples.setdefault(s.name, []).append((tuple(sorted(s.labels.items())), float(s.value)))
    except (ValueError, TypeError, IndexError) as exc:
        raise EngineError(f"/metrics is not Prometheus text ({exc})") from None
    return MetricsSnapshot({k: tuple(v) for k, v in samples.items()})


def delta(kind: str, before: MetricsSnapshot | None, after: MetricsSnapshot | None) -> dict[str, int]:
    """The engine's counters of ``kind`` grown between two scrapes (our names → counts);
    counters the engine does not publish are left out, and so is everything without both scrapes."""
    if before is None or after is None:
        return {}
    out: dict[str, int] = {}
    for ours, theirs in kind_of(kind).counters:
        a, b = before.total(theirs), after.total(theirs)
        if a is not None and b is not None:
            out[ours] = int(round(b - a))
    return out


def histogram_delta(before: MetricsSnapshot | None, after: MetricsSnapshot | None,
                    name: str = VLLM_TTFT) -> list[tuple[float, int]]:
    """The ``(le seconds, requests)`` cumulative buckets of a histogram grown between two scrapes."""
    if before is None or after is None:
        return []
    old = dict(before.buckets(name))
    return [(le, int(round(n - old.get(le, 0.0)))) for le, n in after.buckets(name)]


def histogram_quantile(buckets: list[tuple[float, int]], q: float) -> float | None:
    """The ``q`` quantile (0–1) of cumulative buckets, linear inside a bucket (Prometheus'
    ``histogram_quantile``); None without observations."""
    if not buckets or buckets[-1][1] <= 0:
        return None
    rank = q * buckets[-1][1]
    prev_le, prev_n = 0.0, 0
    for le, n in buckets:
        if n >= rank:
            if le == float("inf"):
                return prev_le
            return prev_le + (le - prev_le) * ((rank - prev_n) / (n - prev_n) if n > prev_n else 0.0)
        prev_le, prev_n = le, n
    return prev_le
