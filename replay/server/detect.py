"""What kind of OpenAI-compatible server is behind a URL, and its prefix-cache configuration.

Detection asks, in order: ``GET /v1/models`` (``owned_by``: ``vllm``, ``llamacpp``,
``sglang``), ``GET /props`` (llama.cpp: ``total_slots``, ``default_generation_settings``),
``GET /get_server_info`` (SGLang: ``page_size``) and ``GET /metrics`` (a ``vllm:`` /
``sglang:`` / ``llamacpp:`` prefix); anything else is ``generic``. The cache facts read:

* vLLM: ``vllm:cache_config_info`` labels ``block_size``, ``num_gpu_blocks``,
  ``prefix_caching_hash_algo``, ``enable_prefix_caching`` (vLLM 0.32 on CPU defaults to
  128-token blocks; one block is vLLM's null block, so the usable capacity is
  ``num_gpu_blocks − 1``);
* llama.cpp: ``total_slots`` and ``n_ctx`` from ``/props`` (slot reuse is token-granular);
* SGLang: ``page_size`` (tokens) from ``/get_server_info``.
"""

from __future__ import annotations

from dataclasses import dataclass

import httpx

from prefixcache.replay.server.metrics import MetricsSnapshot, parse_metrics

KINDS = ("vllm", "llamacpp", "sglang", "generic")


@dataclass(frozen=True, slots=True)
class EngineInfo:
    """A detected server (JSON-ready; part of the replay report).

    ``kind``: one of :data:`KINDS`; ``model``: the served model name requests must name;
    ``root``: where the server loaded it from (a folder, when it says); ``max_context``:
    tokens (None = not published). Cache: ``block_size`` (tokens per KV block / page;
    1 = token-granular), ``num_blocks`` (KV blocks the engine allocated; None = unknown),
    ``hash_algo`` (vLLM's prefix-caching hash), ``prefix_caching`` (False when the engine
    says it is off), ``slots`` (llama.cpp parallel slots). ``metrics``: ``/metrics`` answers.
    ``version``: the engine's version string when published.
    """

    kind: str
    url: str
    model: str
    root: str | None
    max_context: int | None
    block_size: int | None
    num_blocks: int | None
    hash_algo: str | None
    prefix_caching: bool | None
    slots: int | None
    metrics: bool
    version: str | None


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


def _kind(owner: str, props: dict | None, sgl: dict | None, snap: MetricsSnapshot | None) -> str:
    if owner in ("vllm", "llamacpp", "sglang"):
        return owner
    if props is not None and "total_slots" in props:
        return "llamacpp"
    if sgl is not None and "page_size" in sgl:
        return "sglang"
    names = " ".join(snap.samples) if snap is not None else ""
    for kind, prefix in (("vllm", "vllm:"), ("sglang", "sglang:"), ("llamacpp", "llamacpp:")):
        if prefix in names:
            return kind
    return "generic"


def _int(value: object) -> int | None:
    try:
        return int(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
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
    props = await _get_json(client, "/props") if owner in ("", "llamacpp") else None
    sgl = await _get_json(client, "/get_server_info") if owner in ("", "sglang") else None
    snap = await scrape(client)
    kind = _kind(owner, props, sgl, snap)
    info = snap.labels("vllm:cache_config_info") if snap is not None else None
    info = info or {}
    settings = (props or {}).get("default_generation_settings") or {}
    block = _int(info.get("block_size")) if kind == "vllm" else None
    if kind == "sglang":
        block = _int((sgl or {}).get("page_size")) or 1
    if kind == "llamacpp":
        block = 1
    caching = info.get("enable_prefix_caching")
    return EngineInfo(
        kind=kind, url=url, model=model or str(first.get("id") or "default"),
        root=first.get("root") if isinstance(first.get("root"), str) else None,
        max_context=_int(first.get("max_model_len")) or _int(settings.get("n_ctx")) or _int((sgl or {}).get("context_length")),
        block_size=block, num_blocks=_int(info.get("num_gpu_blocks")),
        hash_algo=info.get("prefix_caching_hash_algo"),
        prefix_caching=None if caching is None else caching == "True",
        slots=_int((props or {}).get("total_slots")), metrics=snap is not None,
        version=(props or {}).get("build_info") or (sgl or {}).get("version"),
    )
