"""Replay through a running server (``replay --server URL``): passes, load shapes, faults.

:class:`ServedRun` sends every pass's requests through a
:class:`~prefixcache.replay.server.client.ServerClient` in the load shape asked for
(:mod:`prefixcache.replay.server.load`; sessions side by side, each session's turns in order,
by :mod:`prefixcache.replay.server.schedule`), predicts each request's cached tokens from our model of
the detected engine (:mod:`prefixcache.replay.server.predict`), and streams one
:class:`~prefixcache.analyzer.replay_rows.ServerRow` per request to the results file as it
finishes. Passes:

* ``cold`` — the engine's prefix cache is reset before every request (sequential), so
  every request is computed in full and predicted 0; when the engine offers no reset the
  pass is refused (its summary says why and how to start the server so it can);
* ``warm`` / ``canonical`` — reset once, then the original / canonicalized prompts in the
  load shape; without a reset the pass still runs, marked ``reset: false``.

``/metrics`` is scraped before and after each pass; the counters' growth is that pass's.
A failed request (HTTP error, timeout, dropped stream) is a row with its reason; a refused
connection means the server is gone, so no more requests are sent and the run stops
cleanly. ``retries`` resends failed requests that many times (never by default).
"""

from __future__ import annotations

import asyncio
import os
import time
from dataclasses import dataclass
from typing import Any, Callable, Sequence

from prefixcache.analyzer.replay_rows import ServerRow
from prefixcache.replay.document import EngineInfo
from prefixcache.replay.prompts import Prompt
from prefixcache.replay.server.client import ServerClient, ServerReply
from prefixcache.replay.server.ledger import tag_of
from prefixcache.replay.server.load import LoadShape
from prefixcache.replay.server.metrics import MetricsSnapshot
from prefixcache.replay.server.predict import make_predictor
from prefixcache.replay.server.schedule import Scheduler

RETRYABLE = ("timeout", "connection refused", "dropped stream", "HTTP 5", "HTTP 429")

#: This process's clock, named on every row it records (``ServerRow.epoch``): times of rows
#: recorded by another process (the run a ``--resume`` finishes) are not on this clock.
EPOCH = f"{os.getpid()}-{time.time_ns()}"


@dataclass(frozen=True, slots=True)
class ServedItem:
    """One request to send: our ``prompt`` (token ids, clock, provenance) and, for ``--send
    chat``, the OpenAI chat ``body`` (``messages``, ``tools``)."""

    prompt: Prompt
    body: dict[str, Any] | None


@dataclass(frozen=True, slots=True)
class PassState:
    """What a pass did besides its rows: ``reset`` (the cache was emptied: before every
    request in ``cold``, once at the start otherwise; None = not tried), ``refused`` (why
    the pass did not run), the ``/metrics`` scrapes around it, its wall time (seconds) and
    the predictor's evicted blocks; ``unsent``: requests not sent (``--duration`` ran out,
    or the server went away)."""

    name: str
    reset: bool | None
    refused: str | None
    before: MetricsSnapshot | None
    after: MetricsSnapshot | None
    wall_s: float
    evicted_blocks: int
    unsent: int = 0


class ServedRun:
    """Runs ``passes`` over ``items`` (``{"original": [...], "canonical": [...]}``) on ``client``.

    ``done``: rows of an interrupted run (``--resume``): a cold request done is not sent
    again; a cache pass sends its done requests again without recording them, to rebuild
    the same cache state. ``write(row)`` is called as each row is made."""

    def __init__(self, client: ServerClient, info: EngineInfo, items: dict[str, list[ServedItem]], *,
                 passes: Sequence[str], send: str, shape: LoadShape, block_size: int,
                 capacity_blocks: int | None, max_new_tokens: int = 1, retries: int = 0, run: str = "",
                 done: Sequence[ServerRow] = (), write: Callable[[ServerRow], None] = lambda r: None,
                 on_request: Callable[[str], None] | None = None) -> None:
        self.client, self.info, self.items = client, info, items
        self.passes, self.send, self.shape = tuple(passes), send, shape
        self.block_size, self.capacity_blocks = block_size, capacity_blocks
        self.max_new_tokens, self.retries, self.run_id = max_new_tokens, retries, run
        self.write, self.on_request = write, on_request
        self.rows: list[ServerRow] = list(done)
        self._done = {(r.pass_name, r.position) for r in done if r.ok}
        self.states: list[PassState] = []
        self.stopped: str | None = None
        self.tags = False  # tag each request for the engine's KV events (ledger.tag_of)
        self._pass_name = ""
        self._position: dict[int, int] = {}
        self._scheduler: Scheduler | None = None

    async def run(self) -> None:
        """Every pass in order; stops early (``stopped``) when the server goes away."""
        for name in self.passes:
            if self.stopped:
                break
            await self._pass(name)

    async def _pass(self, name: str) -> None:
        items = self.items["canonical" if name == "canonical" else "original"]
        self._pass_name, self._position = name, {id(it): i for i, it in enumerate(items)}
        before = await self.client.metrics()
        t0 = time.perf_counter()
        if name == "cold":
            refused = await self.client.reset()
            if refused is not None:
                self.states.append(PassState(name, False, f"no cache reset: {refused}", before, before, 0.0, 0))
                return
            try:
                await self._cold(items)
            except asyncio.CancelledError:
                self.states.append(PassState(name, True, None, None, None, time.perf_counter() - t0, 0))
                raise
            reset: bool | None = True
        else:
            reset = (await self.client.reset()) is None
            try:
                evicted, unsent = await self._cached_pass(name, items)
            except asyncio.CancelledError:  # Ctrl-C: the summary still covers what finished
                self.states.append(PassState(name, reset, None, None, None, time.perf_counter() - t0, 0))
                raise
        after = await self.client.metrics()
        self.states.append(PassState(name, reset, None, before, after, time.perf_counter() - t0,
                                     0 if name == "cold" else evicted, 0 if name == "cold" else unsent))

    async def _cold(self, items: list[ServedItem]) -> None:
        for pos, item in enumerate(items):
            if self.stopped:
                return
            if ("cold", pos) in self._done:
                continue
            if pos and (why := await self.client.reset()) is not None:
                self.stopped = f"cold pass: the cache reset stopped working ({why})"
                return
            now = time.perf_counter()
            reply, attempts = await self._send(item)
            self._record("cold", pos, item, reply, 0, now, 0, attempts)

    async def _cached_pass(self, name: str, items: list[ServedItem]) -> tuple[int, int]:
        """Send ``items`` in the load shape (:class:`~prefixcache.replay.server.schedule.Scheduler`);
        returns the blocks the predictor evicted and the requests not sent (``--duration``)."""
        predictor = make_predictor(self.info.kind, self.block_size, self.capacity_blocks, self.info.slots)
        offsets = self.shape.offsets([it.prompt.now for it in items])
        scheduler = Scheduler([it.prompt.session for it in items], offsets, self.shape)
        self._scheduler = scheduler

        async def launch(pos: int, scheduled: float, in_flight: int, warm: bool) -> None:
            item = items[pos]
            predicted, handle = predictor.send(item.prompt.ids)
            reply, attempts = await self._send(item)
            predictor.done(handle, item.prompt.ids, reply.output_ids[: self.max_new_tokens])
            if (name, pos) not in self._done:
                self._record(name, pos, item, reply, predicted, scheduled, in_flight, attempts, warm)
            elif self.on_request:
                self.on_request(name)

        unsent = await scheduler.run(launch)
        self._scheduler = None
        return predictor.evicted, unsent

    async def _send(self, item: ServedItem) -> tuple[ServerReply, int]:
        prompt: Any = item.body if self.send == "chat" else item.prompt.ids
        tag = tag_of(self._pass_name, self._position[id(item)]) if self.tags else None
        attempt = 0
        while True:
            attempt += 1
            reply = await self.client.send(self.send, prompt, self.max_new_tokens, tag)
            if reply.status == "ok" or attempt > self.retries or not reply.reason.startswith(RETRYABLE):
                return reply, attempt
            await asyncio.sleep(min(8.0, 0.25 * 2 ** attempt))

    def _record(self, name: str, pos: int, item: ServedItem, reply: ServerReply, predicted: int | None,
                scheduled: float, in_flight: int, attempts: int, warmup: bool = False) -> None:
        p = item.prompt
        row = ServerRow(
            pass_name=name, position=pos, session=p.session, request_index=p.request_index, source=p.source,
            record=p.record, send=self.send, prompt_tokens=len(p.ids), engine_prompt_tokens=reply.prompt_tokens,
            cached_tokens=reply.cached_tokens, predicted_cached=predicted, completion_tokens=reply.completion_tokens,
            t_scheduled=scheduled, t_send=reply.t_send, t_first_token=reply.t_first_token,
            token_times=reply.token_times, t_end=reply.t_end, in_flight=in_flight, status=reply.status,
            reason=reply.reason, attempts=attempts, run=self.run_id, warmup=warmup,
            engine_queue_s=reply.engine_queue_s, epoch=EPOCH)
        self.rows.append(row)
        self.write(row)
        if reply.status != "ok" and reply.reason.startswith("connection refused"):
            self.stopped = f"the server stopped answering ({reply.reason})"
            if self._scheduler is not None:
                self._scheduler.stop()
        if self.on_request:
            self.on_request(name)
