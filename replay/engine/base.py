"""The replay engine protocol: prefill a prompt (token ids), greedily decode, time it.

An engine runs one request at a time. It may hold a KV prefix cache
(:class:`prefixcache.replay.kv.KVPrefixCache`) that decides, with the analyzer's
cache index, which leading tokens are served from cache; the engine then computes
only the rest (the prefill suffix). Every timing is a raw ``time.perf_counter``
reading in seconds (:class:`prefixcache.replay.results.RequestTiming`), so results
and summaries derive TTFT and percentiles from one source.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol, Sequence

import numpy as np

from prefixcache.replay.results import RequestTiming


@dataclass(frozen=True, slots=True)
class Generation(RequestTiming):
    """What one request did in the engine.

    Token counts are tokens; the raw ``perf_counter`` timestamps (seconds) and the
    TTFT / prefill / lookup times derived from them come from
    :class:`prefixcache.replay.results.RequestTiming`.

    ``first_logits`` is the next-token logit vector after the prompt, float32, shape
    ``(vocab,)``; ``output_ids`` the greedy tokens (``max_new_tokens`` of them);
    ``kv_bytes`` the KV bytes the prefix cache holds after this request (0 without one);
    ``ttft_samples`` the TTFT of each repeated prefill (seconds; the timestamps are the
    median run's, and ``t_end`` is its first token plus the decode time).
    """

    prompt_tokens: int
    cached_tokens: int
    computed_tokens: int
    output_ids: tuple[int, ...]
    first_logits: np.ndarray
    kv_bytes: int = 0
    ttft_samples: tuple[float, ...] = ()


class Engine(Protocol):
    """A local model that replays prompts given as token ids.

    ``name`` names the model; ``max_context`` is its context length in tokens;
    ``kv_bytes_per_token`` the KV cache size of one token (bytes, all layers).
    ``generate`` raises :class:`prefixcache.analyzer.errors.EngineError` for a
    prompt longer than the context or an out-of-memory failure.
    """

    name: str
    max_context: int
    kv_bytes_per_token: int

    def generate(
        self,
        ids: Sequence[int],
        *,
        max_new_tokens: int = 1,
        cache: object | None = None,
        now: float = 0.0,
        repeat: int = 1,
    ) -> Generation:
        """Prefill ``ids`` (reusing ``cache`` when given), decode greedily, time it."""
        ...
