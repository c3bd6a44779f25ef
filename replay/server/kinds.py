"""The server kinds replay knows (vLLM, llama.cpp, SGLang, generic) and their traits: the one place that knows their names.

Everything that differs between engines is a trait of its :class:`ServerKind`:
how it is recognized, how its cache block size and capacity are read, how its prefix
cache is reset, what a request body needs, which ``/metrics`` counters it publishes and
what its usage counts mean. The rest of :mod:`prefixcache.replay.server` reads traits,
never names. Sources: vLLM 0.32 (``vllm/v1/metrics/loggers.py``, ``/reset_prefix_cache``
under ``VLLM_SERVER_DEV_MODE``), llama.cpp ``tools/server/server.cpp`` (``/props``,
``/slots/{id}?action=erase``, ``--metrics``), SGLang (``/get_server_info``,
``/flush_cache``, ``--enable-metrics``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

#: vLLM's TTFT histogram (seconds): ``_sum`` and ``_count`` give the engine's own mean TTFT.
VLLM_TTFT = "vllm:time_to_first_token_seconds"


def as_int(value: object) -> int | None:
    """``int(value)``, None for a value that is not a number (absent, ``null``, text)."""
    try:
        return int(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return None


@dataclass(frozen=True, slots=True)
class ServerKind:
    """What replay knows of one kind of server.

    Recognition: ``name`` (also the ``owned_by`` of ``GET /v1/models``), ``metrics_prefix``
    (the prefix of its ``/metrics`` sample names), ``probe`` (an endpoint only it answers,
    and the key its answer carries). Cache: ``block_size(cache_config, probe)`` reads the
    KV block size in tokens (None = unknown) from ``vllm:cache_config_info``'s labels and
    the probe's answer; ``null_blocks``: blocks of ``num_gpu_blocks`` that never hold a
    prefix (the usable capacity is the rest; None = the capacity is not read).
    Reset: ``reset`` (``POST`` path; ``{id}`` = once per slot; None = none) and
    ``reset_how`` (how to start the server so it answers). Requests: ``body`` (JSON keys
    every request adds), ``token_ids`` (the key asking for output token ids when more than
    one token is generated; None = not needed). Metrics: ``counters`` (our name, its
    sample name; tokens / requests), ``prompt_excludes_cached`` (its prompt-token counter
    leaves cached tokens out), ``ttft_histogram`` (its own TTFT histogram, seconds),
    ``queue_histogram`` (its time-in-queue histogram, seconds: waiting before the scheduler
    took the request).
    ``reuse`` explains a prediction difference its reuse rule causes (None = nothing to say).
    """

    name: str
    metrics_prefix: str | None = None
    probe: tuple[str, str] | None = None
    block_size: Callable[[dict[str, str], dict[str, Any]], int | None] = lambda cfg, probe: None
    null_blocks: int | None = None
    reset: str | None = None
    reset_how: str = ""
    body: tuple[tuple[str, object], ...] = ()
    token_ids: str | None = None
    counters: tuple[tuple[str, str], ...] = ()
    prompt_excludes_cached: bool = False
    ttft_histogram: str | None = None
    queue_histogram: str | None = None
    reuse: str | None = None

    def capacity(self, num_blocks: int | None) -> int | None:
        """The blocks a prefix can use of ``num_blocks`` allocated (None = unknown: unbounded)."""
        return num_blocks - self.null_blocks if self.null_blocks is not None and num_blocks else None

    def reset_paths(self, slots: int | None) -> list[str]:
        """The ``POST`` paths that empty its prefix cache (one per slot with ``{id}``)."""
        if self.reset is None:
            return []
        return [self.reset.format(id=i) for i in range(slots or 1)] if "{id}" in self.reset else [self.reset]


#: Every kind, in detection order (probes, then ``/metrics`` prefixes); ``generic`` is the fallback.
REGISTRY: dict[str, ServerKind] = {k.name: k for k in (
    ServerKind(
        "vllm", metrics_prefix="vllm:", block_size=lambda cfg, probe: as_int(cfg.get("block_size")), null_blocks=1,
        reset="/reset_prefix_cache",
        reset_how="start vLLM with VLLM_SERVER_DEV_MODE=1 (POST /reset_prefix_cache is 404 otherwise)",
        body=(("ignore_eos", True),), token_ids="return_token_ids",
        counters=(("prompt_tokens", "vllm:prompt_tokens_total"),
                  ("prefix_cache_queries", "vllm:prefix_cache_queries_total"),
                  ("prefix_cache_hits", "vllm:prefix_cache_hits_total"),
                  ("requests", "vllm:request_success_total")),
        ttft_histogram=VLLM_TTFT, queue_histogram="vllm:request_queue_time_seconds"),
    ServerKind(
        "llamacpp", metrics_prefix="llamacpp:", probe=("/props", "total_slots"), block_size=lambda cfg, probe: 1,
        reset="/slots/{id}?action=erase",
        reset_how="start llama-server with --slot-save-path DIR (slot erase is 501 otherwise) and --cache-ram 0 "
                  "(its host-RAM prompt cache survives a slot erase)",
        body=(("ignore_eos", True), ("cache_prompt", True)),
        counters=(("prompt_tokens", "llamacpp:prompt_tokens_total"),
                  ("prompt_tokens_cached", "llamacpp:prompt_tokens_cached_total")),
        prompt_excludes_cached=True,
        reuse="llama.cpp reuses one slot's longest common prefix and its host-RAM prompt cache (--cache-ram), "
              "and the slot chosen (-sps) decides"),
    ServerKind(
        "sglang", metrics_prefix="sglang:", probe=("/get_server_info", "page_size"),
        block_size=lambda cfg, probe: as_int(probe.get("page_size")) or 1,
        reset="/flush_cache", reset_how="SGLang answers POST /flush_cache only while no request runs",
        body=(("ignore_eos", True),),
        counters=(("prompt_tokens", "sglang:prompt_tokens_total"), ("cached_tokens", "sglang:cached_tokens_total"))),
    ServerKind("generic", reset_how="a generic OpenAI-compatible server has no cache reset endpoint"),
)}
KINDS = tuple(REGISTRY)
GENERIC = REGISTRY["generic"]


def kind_of(name: str | None) -> ServerKind:
    """The kind named ``name`` (``generic`` for None or a name replay does not know)."""
    return REGISTRY.get(name or "", GENERIC)


def recognize(owner: str, probes: dict[str, dict[str, Any] | None], sample_names: str) -> ServerKind:
    """The kind behind a server: its ``/v1/models`` ``owned_by`` when that names a kind, else
    the kind whose probe endpoint answered with its key, else the first whose ``/metrics``
    prefix appears in ``sample_names``, else ``generic``."""
    if owner in REGISTRY and owner != GENERIC.name:
        return REGISTRY[owner]
    for k in REGISTRY.values():
        if k.probe is not None and k.probe[1] in (probes.get(k.probe[0]) or {}):
            return k
    return next((k for k in REGISTRY.values() if k.metrics_prefix and k.metrics_prefix in sample_names), GENERIC)
