"""What kind of OpenAI-compatible server is behind a URL, and its prefix-cache configuration.

Detection asks, in order: ``GET /v1/models`` (``owned_by``: ``vllm``, ``llamacpp``,
``sglang``), ``GET /props`` (llama.cpp: ``total_slots``, ``default_generation_settings``),
``GET /get_server_info`` (SGLang: ``page_size``) and ``GET /metrics`` (a ``vllm:`` /
``sglang:`` / ``llamacpp:`` prefix), as :func:`~prefixcache.replay.server.kinds.recognize`
says; anything else is ``generic``. The cache facts read (each kind's traits in
:mod:`prefixcache.replay.server.kinds`):

* vLLM: ``vllm:cache_config_info`` labels ``block_size``, ``num_gpu_blocks``,
  ``prefix_caching_hash_algo``, ``enable_prefix_caching`` (vLLM 0.32 on CPU defaults to
  128-token blocks; one block is vLLM's null block, so the usable capacity is
  ``num_gpu_blocks − 1``);
* llama.cpp: ``total_slots`` and ``n_ctx`` from ``/props`` (slot reuse is token-granular);
* SGLang: ``page_size`` (tokens) from ``/get_server_info``.
"""

from __future__ import annotations

import httpx

from prefixcache.replay.document import EngineInfo
from prefixcache.replay.server.kinds import REGISTRY, as_int, recognize
from prefixcache.replay.server.metrics import MetricsSnapshot, parse_metrics


async def _get_json(client: httpx.AsyncClient, path: str) -> dict | None:
    try:
        r = await client.get(path)
    except httpx.HTTPError:
        return None
    if r.status_code != 200:
        return None
    try:
        body = r.json()
    except ValueError:
        return None
    return body if isinstance(body, dict) else None


async def scrape(client: httpx.AsyncClient) -> MetricsSnapshot | None:
    """One ``/metrics`` scrape, parsed; None when the server publishes none."""
    try:
        r = await client.get("/metrics")
    except httpx.HTTPError:
        return None
    if r.status_code != 200 or not r.text.strip():
        return None
    try:
        return parse_metrics(r.text)
    except Exception:  # a page that is not Prometheus text: no metrics
        return None


async def detect(client: httpx.AsyncClient, url: str, model: str | None = None) -> EngineInfo:
    """Detect the server behind ``client`` (base URL ``url``). ``model`` overrides the
    served model name (default: the first of ``/v1/models``). Never raises for a missing
    endpoint; httpx errors on ``/v1/models`` itself propagate (the server is not there)."""
    r = await client.get("/v1/models")
    r.raise_for_status()
    data = (r.json() or {}).get("data") or [{}]
    first = data[0] if isinstance(data[0], dict) else {}
    owner = str(first.get("owned_by") or "")
    probes = {k.probe[0]: await _get_json(client, k.probe[0]) for k in REGISTRY.values()
              if k.probe is not None and owner in ("", k.name)}
    snap = await scrape(client)
    kind = recognize(owner, probes, " ".join(snap.samples) if snap is not None else "")
    info = (snap.labels("vllm:cache_config_info") if snap is not None else None) or {}
    props, sgl = probes.get("/props") or {}, probes.get("/get_server_info") or {}
    settings = props.get("default_generation_settings") or {}
    caching = info.get("enable_prefix_caching")
    return EngineInfo(
        kind=kind.name, url=url, model=model or str(first.get("id") or "default"),
        root=first.get("root") if isinstance(first.get("root"), str) else None,
        max_context=as_int(first.get("max_model_len")) or as_int(settings.get("n_ctx")) or as_int(sgl.get("context_length")),
        block_size=kind.block_size(info, (probes.get(kind.probe[0]) if kind.probe else None) or {}),
        num_blocks=as_int(info.get("num_gpu_blocks")),
        hash_algo=info.get("prefix_caching_hash_algo"),
        prefix_caching=None if caching is None else caching == "True",
        slots=as_int(props.get("total_slots")), metrics=snap is not None,
        version=props.get("build_info") or sgl.get("version"),
    )
