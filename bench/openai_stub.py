"""A minimal OpenAI-compatible server on localhost, for the replay harness bench and tests.

Real HTTP/1.1 (keep-alive, chunked server-sent events) on ``asyncio`` streams, no
framework, so the bench measures the harness rather than a web stack. It imitates the
parts of vLLM replay reads: ``GET /v1/models`` (``owned_by: vllm``), ``GET /metrics``
(``vllm:cache_config_info``, ``vllm:prefix_cache_queries_total`` / ``_hits_total``,
``vllm:prompt_tokens_total``), ``POST /reset_prefix_cache``, and streaming
``/v1/completions`` / ``/v1/chat/completions`` whose usage carries
``prompt_tokens_details.cached_tokens``. Its cache is deliberately simple and
independent of the analyzer: unbounded, block-granular, the longest block-aligned common
prefix with any earlier prompt (registered when it arrives, as vLLM registers a prompt's
blocks at prefill, so a request in flight already serves its prefix) or earlier prompt plus
output but the last token (registered when the answer is sent), capped at n−1 tokens.
Chat prompts are "tokenized" as one token per UTF-8 byte of the messages' JSON.

Faults for tests: ``fail`` = ``{position: "500" | "drop" | "slow"}`` (0-based request
count) answers HTTP 500, drops the stream after the first chunk, or sleeps ``slow_s``.

Run alone: ``python bench/openai_stub.py PORT`` (stops on SIGTERM / Ctrl-C).
"""

from __future__ import annotations

import asyncio
import json
import sys
import threading
from dataclasses import dataclass, field


@dataclass
class StubState:
    """The stub's cache and counters (tokens)."""

    block_size: int = 16
    num_blocks: int = 1000
    max_model_len: int = 1 << 20
    reset_ok: bool = True
    delay_s: float = 0.0
    slow_s: float = 2.0
    fail: dict[int, str] = field(default_factory=dict)
    seen: list[tuple[int, ...]] = field(default_factory=list)
    count: int = 0
    queries: int = 0
    hits: int = 0
    prompt_total: int = 0

    def cached(self, ids: tuple[int, ...]) -> int:
        best = 0
        for old in self.seen:
            n = 0
            for a, b in zip(old, ids):
                if a != b:
                    break
                n += 1
            best = max(best, n)
        cap = min(best, len(ids) - 1)
        return max(0, cap // self.block_size * self.block_size)

    def metrics(self) -> str:
        return (f'vllm:cache_config_info{{block_size="{self.block_size}",enable_prefix_caching="True",'
                f'num_gpu_blocks="{self.num_blocks}",prefix_caching_hash_algo="sha256"}} 1.0\n'
                f"# TYPE vllm:prefix_cache_queries_total counter\nvllm:prefix_cache_queries_total {self.queries}.0\n"
                f"# TYPE vllm:prefix_cache_hits_total counter\nvllm:prefix_cache_hits_total {self.hits}.0\n"
                f"# TYPE vllm:prompt_tokens_total counter\nvllm:prompt_tokens_total {self.prompt_total}.0\n"
                # no queue: every request is served at once (count = requests served, sum 0 s)
                f"# TYPE vllm:request_queue_time_seconds histogram\n"
                f'vllm:request_queue_time_seconds_bucket{{le="+Inf"}} {self.count}.0\n'
                f"vllm:request_queue_time_seconds_sum 0.0\nvllm:request_queue_time_seconds_count {self.count}.0\n")


def _head(status: int, ctype: str, length: int | None) -> bytes:
    reason = {200: "OK", 404: "Not Found", 500: "Internal Server Error"}.get(status, "X")
    size = f"Content-Length: {length}\r\n" if length is not None else "Transfer-Encoding: chunked\r\n"
    return f"HTTP/1.1 {status} {reason}\r\nContent-Type: {ctype}\r\n{size}\r\n".encode()


def _chunk(data: bytes) -> bytes:
    return f"{len(data):x}\r\n".encode() + data + b"\r\n"


class Stub:
    """The server: ``await start(port)`` on 127.0.0.1 (0 = a free port), ``port`` after."""

    def __init__(self, state: StubState | None = None) -> None:
        self.state = state or StubState()
        self.server: asyncio.base_events.Server | None = None
        self.port = 0

    async def start(self, port: int = 0) -> int:
        self.server = await asyncio.start_server(self._conn, "127.0.0.1", port)
        self.port = self.server.sockets[0].getsockname()[1]
        return self.port

    async def _conn(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                line = await reader.readline()
                if not line:
                    return
                method, path, _ = line.decode().split(" ", 2)
                length = 0
                while (h := await reader.readline()) not in (b"\r\n", b"\n", b""):
                    k, _, v = h.decode().partition(":")
                    if k.strip().lower() == "content-length":
                        length = int(v.strip())
                body = await reader.readexactly(length) if length else b""
                if not await self._handle(method, path, body, writer):
                    return
        except (ConnectionError, asyncio.IncompleteReadError, ValueError):
            return
        finally:
            writer.close()

    async def _plain(self, writer: asyncio.StreamWriter, status: int, ctype: str, data: bytes) -> bool:
        writer.write(_head(status, ctype, len(data)) + data)
        await writer.drain()
        return True

    async def _handle(self, method: str, path: str, body: bytes, writer: asyncio.StreamWriter) -> bool:
        s = self.state
        if path == "/v1/models":
            data = {"data": [{"id": "stub", "owned_by": "vllm", "root": None, "max_model_len": s.max_model_len}]}
            return await self._plain(writer, 200, "application/json", json.dumps(data).encode())
        if path == "/metrics":
            return await self._plain(writer, 200, "text/plain", s.metrics().encode())
        if path == "/reset_prefix_cache" and method == "POST":
            if not s.reset_ok:
                return await self._plain(writer, 404, "application/json", b'{"detail":"Not Found"}')
            s.seen.clear()
            return await self._plain(writer, 200, "text/plain", b"")
        if path in ("/v1/completions", "/v1/chat/completions") and method == "POST":
            return await self._complete(json.loads(body), path.endswith("chat/completions"), writer)
        return await self._plain(writer, 404, "application/json", b'{"error":{"message":"no such route"}}')

    async def _complete(self, req: dict, chat: bool, writer: asyncio.StreamWriter) -> bool:
        s = self.state
        n, s.count = s.count, s.count + 1
        fault = s.fail.get(n)
        if fault == "500":
            return await self._plain(writer, 500, "application/json", b'{"error":{"message":"stub failure"}}')
        if chat:
            ids = tuple(json.dumps(req["messages"], sort_keys=True).encode())
        else:
            ids = tuple(int(i) for i in req["prompt"])
        cached = s.cached(ids)
        s.seen.append(ids)  # registered at arrival, as an engine registers a prompt's blocks at prefill
        s.queries, s.hits, s.prompt_total = s.queries + len(ids), s.hits + cached, s.prompt_total + len(ids)
        if s.delay_s or fault == "slow":
            await asyncio.sleep(s.slow_s if fault == "slow" else s.delay_s)
        out = max(1, int(req.get("max_tokens") or 1))
        s.seen.append(ids + tuple(range(7, 7 + out - 1)))
        writer.write(_head(200, "text/event-stream", None))
        for k in range(out):
            piece = {"delta": {"content": "x"}} if chat else {"text": "x"}
            writer.write(_chunk(b"data: " + json.dumps({"choices": [{"index": 0, **piece}]}).encode() + b"\n\n"))
            await writer.drain()
            if fault == "drop":
                return False  # the connection closes mid-stream
        usage = {"prompt_tokens": len(ids), "completion_tokens": out, "total_tokens": len(ids) + out,
                 "prompt_tokens_details": {"cached_tokens": cached}}
        writer.write(_chunk(b"data: " + json.dumps({"choices": [], "usage": usage}).encode() + b"\n\n"))
        writer.write(_chunk(b"data: [DONE]\n\n") + b"0\r\n\r\n")
        await writer.drain()
        return True


class StubThread:
    """The stub in a background thread with its own event loop (for tests): ``url``, ``state``, ``stop()``."""

    def __init__(self, state: StubState | None = None) -> None:
        self.stub = Stub(state)
        self.state = self.stub.state
        self.loop = asyncio.new_event_loop()
        ready = threading.Event()
        self.thread = threading.Thread(target=self._main, args=(ready,), daemon=True)
        self.thread.start()
        ready.wait(10)
        self.url = f"http://127.0.0.1:{self.stub.port}"

    def _main(self, ready: threading.Event) -> None:
        asyncio.set_event_loop(self.loop)
        self.loop.run_until_complete(self.stub.start())
        ready.set()
        self.loop.run_forever()

    def stop(self) -> None:
        async def close() -> None:
            self.stub.server.close()
            tasks = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
            for t in tasks:
                t.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
        asyncio.run_coroutine_threadsafe(close(), self.loop).result(5)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(5)
        self.loop.close()


if __name__ == "__main__":
    async def _main() -> None:
        stub = Stub()
        await stub.start(int(sys.argv[1]) if len(sys.argv) > 1 else 0)
        print(stub.port, flush=True)
        await asyncio.Event().wait()
    try:
        asyncio.run(_main())
    except KeyboardInterrupt:
        pass
