"""A running OpenAI-compatible server as a replay engine (``replay --server URL``), on async httpx.

:class:`ServerClient` sends one request and streams its answer
(``stream: true`` with ``stream_options.include_usage``), taking a raw
``time.perf_counter`` reading when it sends, at each streamed chunk that carries output,
and at the end; what it measured is a :class:`ServerReply`. Two ways to send:

* ``tokens`` — ``POST /v1/completions`` with ``prompt`` = our token ids: the engine sees
  exactly the tokens the simulator predicts for;
* ``chat`` — ``POST /v1/chat/completions`` with the logged messages and tools: the engine
  renders them, and its ``usage.prompt_tokens`` is compared with our count.

Cached tokens are read from ``usage.prompt_tokens_details.cached_tokens`` (vLLM with
``--enable-prompt-tokens-details``, llama.cpp, SGLang with ``--enable-cache-report``), else
llama.cpp's ``timings.cache_n``. A failure is never raised: it is a reply with
``status`` = ``error`` and a ``reason`` (HTTP status and message, timeout, dropped stream,
connection refused), so a run records it and goes on (see :mod:`prefixcache.replay.server.passes`).
What differs between engines (reset endpoints, request body keys) is a trait of the
detected kind (:mod:`prefixcache.replay.server.kinds`).
"""

from __future__ import annotations

import asyncio
import ssl
import time
from dataclasses import dataclass
from typing import Any, Sequence

import httpx
import orjson

from prefixcache.analyzer.errors import EngineError
from prefixcache.replay.document import EngineInfo
from prefixcache.replay.server.detect import detect, scrape
from prefixcache.replay.server.kinds import kind_of
from prefixcache.replay.server.metrics import MetricsSnapshot, delta

@dataclass(frozen=True, slots=True)
class ServerReply:
    """What one streamed request did. Times are raw ``perf_counter`` seconds: ``t_send``
    (request about to go out), ``t_first_token`` (first chunk with output; None if none
    came), ``token_times`` (every chunk with output), ``t_end`` (stream closed or failed).
    Tokens: ``prompt_tokens`` / ``cached_tokens`` / ``completion_tokens`` as the engine's
    usage reports them (None when absent). ``status`` ``ok`` or ``error`` with ``reason``."""

    t_send: float
    t_first_token: float | None
    token_times: tuple[float, ...]
    t_end: float
    prompt_tokens: int | None
    cached_tokens: int | None
    completion_tokens: int | None
    output_ids: tuple[int, ...]
    text: str
    status: str
    reason: str = ""
    engine_queue_s: float | None = None


def _queue(usage: dict, chunk: dict) -> float | None:
    """The time the engine says the request waited in its queue (seconds), where it reports one
    per request: SGLang's ``meta_info.queue_time``, ``usage.queue_time`` or ``time_info.queue_time``
    (Cerebras); None elsewhere (vLLM reports it only as a /metrics histogram)."""
    for holder in (chunk.get("meta_info"), usage, chunk.get("time_info")):
        if isinstance(holder, dict) and isinstance(holder.get("queue_time"), (int, float)):
            return float(holder["queue_time"])
    return None


def _cached(usage: dict, chunk: dict) -> int | None:
    details = usage.get("prompt_tokens_details") or {}
    if isinstance(details, dict) and details.get("cached_tokens") is not None:
        return int(details["cached_tokens"])
    timings = chunk.get("timings") or {}
    if isinstance(timings, dict) and timings.get("cache_n") is not None:
        return int(timings["cache_n"])
    meta = chunk.get("meta_info") or {}
    return int(meta["cached_tokens"]) if isinstance(meta, dict) and "cached_tokens" in meta else None


def _piece(choice: dict) -> tuple[str, list[int]]:
    """The output text and token ids one streamed choice carries (completions or chat)."""
    delta = choice.get("delta") or {}
    text = choice.get("text") or delta.get("content") or delta.get("reasoning_content") or ""
    ids = choice.get("token_ids") or []
    return str(text), [int(i) for i in ids] if isinstance(ids, list) else []


class ServerClient:
    """Async client of one server: ``detect``, ``reset``, ``metrics``, ``send`` a request.
    ``api_key`` goes in ``Authorization: Bearer``; ``timeout`` bounds each read (seconds)."""

    def __init__(self, url: str, *, api_key: str | None = None, timeout: float = 300.0,
                 connections: int = 64) -> None:
        self.url = url.rstrip("/")
        self._headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self._timeout = httpx.Timeout(timeout, connect=10.0)
        self._ssl = ssl.create_default_context() if self.url.startswith("https") else False  # loaded once
        self.http = self._client(2)
        # One single-connection client per request slot: httpcore's pool scans every connection
        # on each request, which costs more than the request itself at 64 connections.
        self._slots = connections
        self._free: list[httpx.AsyncClient] = []
        self._all: list[httpx.AsyncClient] = []
        self._wait: asyncio.Semaphore | None = None
        self.info: EngineInfo | None = None

    def _client(self, connections: int) -> httpx.AsyncClient:
        limits = httpx.Limits(max_connections=connections, max_keepalive_connections=connections)
        return httpx.AsyncClient(base_url=self.url, headers=self._headers, limits=limits, timeout=self._timeout,
                                 verify=self._ssl)

    async def _take(self) -> httpx.AsyncClient:
        if self._wait is None:
            self._wait = asyncio.Semaphore(self._slots)
        await self._wait.acquire()
        if not self._free:
            self._all.append(self._client(1))
            return self._all[-1]
        return self._free.pop()

    def _give(self, client: httpx.AsyncClient) -> None:
        self._free.append(client)
        assert self._wait is not None
        self._wait.release()

    async def detect(self, model: str | None = None) -> EngineInfo:
        """Detect the engine (EngineError when nothing answers ``/v1/models``)."""
        try:
            self.info = await detect(self.http, self.url, model)
        except (httpx.HTTPError, ValueError) as exc:
            raise EngineError(f"{self.url}: no OpenAI-compatible server answers GET /v1/models "
                              f"({type(exc).__name__}: {exc})") from None
        return self.info

    async def metrics(self, settle_s: float = 2.0) -> MetricsSnapshot | None:
        """A ``/metrics`` scrape once the cache counters stopped moving (two equal scrapes 0.1 s
        apart, for at most ``settle_s`` seconds): engines publish a finished request's
        statistics a moment after its response. None when the server publishes none."""
        snap = await scrape(self.http)
        waited = 0.0
        while snap is not None and waited < settle_s:
            await asyncio.sleep(0.1)
            waited += 0.1
            again = await scrape(self.http)
            if again is None or not any(delta(self.info.kind if self.info else "", snap, again).values()):
                return again if again is not None else snap
            snap = again
        return snap

    async def reset(self) -> str | None:
        """Empty the engine's prefix cache; None when done, else why it cannot be."""
        kind = kind_of(self.info.kind if self.info else None)
        paths = kind.reset_paths(self.info.slots if self.info else None)
        if not paths:
            return kind.reset_how
        how = kind.reset_how
        for p in paths:
            try:
                r = await self.http.post(p)
            except httpx.HTTPError as exc:
                return f"POST {p} failed ({type(exc).__name__})"
            if r.status_code != 200:
                return f"POST {p} answered {r.status_code}: {how}"
        return None

    def body(self, send: str, prompt: Sequence[int] | dict[str, Any], max_tokens: int,
             tag: str | None = None) -> tuple[str, dict[str, Any]]:
        """The endpoint and JSON body of one request (greedy, ``max_tokens`` output tokens).
        ``tag``: a ``session_id`` vLLM puts on the KV events the request causes, with its reused
        prefix reported when it is scheduled (``vllm_xargs.kv_cache_report_mode = "full"``)."""
        kind = kind_of(self.info.kind if self.info else None)
        body: dict[str, Any] = {"model": self.info.model if self.info else "default", "max_tokens": max_tokens,
                                "temperature": 0, "stream": True, "stream_options": {"include_usage": True},
                                **dict(kind.body)}
        if kind.token_ids is not None and max_tokens > 1:
            body[kind.token_ids] = True
        if tag is not None:
            body["session_id"], body["vllm_xargs"] = tag, {"kv_cache_report_mode": "full"}
        if send == "tokens":
            body["prompt"] = list(prompt)  # type: ignore[arg-type]
            return "/v1/completions", body
        chat = dict(prompt)  # type: ignore[arg-type]
        body["messages"] = chat["messages"]
        if chat.get("tools"):
            # rendered into the prompt, never called: "auto" would need the server's tool parser
            body["tools"], body["tool_choice"] = chat["tools"], "none"
        return "/v1/chat/completions", body

    async def send(self, send: str, prompt: Sequence[int] | dict[str, Any], max_tokens: int = 1,
                   tag: str | None = None) -> ServerReply:
        """Send one request and stream its answer; failures come back as an ``error`` reply.
        ``tag``: see :meth:`body`."""
        path, body = self.body(send, prompt, max_tokens, tag)
        times: list[float] = []
        state: dict[str, Any] = {"usage": {}, "chunk": {}, "ids": [], "text": [], "done": False}
        http = await self._take()
        t_send = time.perf_counter()  # after a connection slot is free: the wait is not the engine's
        try:
            async with http.stream("POST", path, content=orjson.dumps(body),
                                   headers={"Content-Type": "application/json"}) as r:
                if r.status_code != 200:
                    text = (await r.aread()).decode("utf-8", "replace")
                    return self._fail(t_send, times, state, f"HTTP {r.status_code}: {_message(text)}")
                async for line in r.aiter_lines():  # read to the end, so the connection is reused
                    self._line(line, times, state)
        except httpx.TimeoutException:
            return self._fail(t_send, times, state, "timeout")
        except httpx.ConnectError as exc:
            return self._fail(t_send, times, state, f"connection refused ({exc})")
        except (httpx.RemoteProtocolError, httpx.ReadError) as exc:
            return self._fail(t_send, times, state, f"dropped stream ({type(exc).__name__})")
        except httpx.HTTPError as exc:
            return self._fail(t_send, times, state, f"{type(exc).__name__}: {exc}")
        finally:
            self._give(http)
        if not state["done"] and not state["usage"]:
            return self._fail(t_send, times, state, "dropped stream (closed before [DONE])")
        return self._reply(t_send, times, state, "ok", "")

    def _line(self, line: str, times: list[float], state: dict[str, Any]) -> bool:
        """Take one SSE line; True at ``[DONE]``."""
        if not line.startswith("data:"):
            return False
        data = line[5:].strip()
        if data == "[DONE]":
            state["done"] = True
            return True
        try:
            chunk = orjson.loads(data)
        except orjson.JSONDecodeError:
            return False
        now = time.perf_counter()
        if not isinstance(chunk, dict):
            return False
        for choice in chunk.get("choices") or ():
            text, ids = _piece(choice)
            if text or ids:
                times.append(now)
                state["text"].append(text)
                state["ids"].extend(ids)
        if chunk.get("usage"):
            state["usage"], state["chunk"] = chunk["usage"], chunk
        elif chunk.get("timings") or chunk.get("meta_info") or chunk.get("time_info"):
            state["chunk"] = chunk
        return False

    def _reply(self, t_send: float, times: list[float], state: dict[str, Any], status: str, reason: str) -> ServerReply:
        usage = state["usage"] or {}
        chunk = state["chunk"] or {}

        def get(k: str) -> int | None:
            return int(usage[k]) if usage.get(k) is not None else None
        return ServerReply(t_send=t_send, t_first_token=times[0] if times else None, token_times=tuple(times),
                           t_end=time.perf_counter(), prompt_tokens=get("prompt_tokens"),
                           cached_tokens=_cached(usage, chunk) if (usage or chunk) else None,
                           completion_tokens=get("completion_tokens"), output_ids=tuple(state["ids"]),
                           text="".join(state["text"]), status=status, reason=reason,
                           engine_queue_s=_queue(usage, chunk) if (usage or chunk) else None)

    def _fail(self, t_send: float, times: list[float], state: dict[str, Any], reason: str) -> ServerReply:
        return self._reply(t_send, times, state, "error", reason)

    async def aclose(self) -> None:
        for c in [self.http, *self._all]:
            await c.aclose()


def _message(text: str) -> str:
    """The error message of a JSON error body (OpenAI ``{"error": {"message"}}``), else its first line."""
    try:
        body = orjson.loads(text)
        err = body.get("error") if isinstance(body, dict) else None
        msg = err.get("message") if isinstance(err, dict) else (err or body.get("message") or body.get("detail"))
        if msg:
            return str(msg).splitlines()[0][:200]
    except (orjson.JSONDecodeError, AttributeError):
        pass
    return (text.strip().splitlines() or [""])[0][:200]
