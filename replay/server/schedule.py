"""The scheduler of a server replay pass: sessions side by side, each session's turns in order.

A turn is *ready* when the response of its session's previous turn is back (plus the
think time of a closed loop) and its due time (:meth:`LoadShape.offsets
<prefixcache.replay.server.load.LoadShape.offsets>`) has come. While fewer than the
shape's limit are in flight, the ready turn earliest in arrival order is sent next — so
at ``--concurrency N`` with at least N sessions, N requests are in flight whenever N turns
are ready, and no turn waits behind another session's. Under ``--users N`` at most N
sessions are open at once; a user takes the next unstarted session when its own ends.

One dispatcher coroutine sends (``asyncio`` tasks, one per request in flight) and sleeps
until the next due time or the next response, whichever comes first. For each request
it reports the moment the turn became ready (``scheduled``; the send − scheduled gap is
the client-side queueing), the other requests in flight at the send, and whether the
send falls in the warm-up. Turns made ready by the same wake-up go out in one round, in
the same event-loop turn (microseconds apart), so each counts the whole round as in
flight beside it: the engine receives them together, and their order inside the round
is the loop's, not the load's.
"""

from __future__ import annotations

import asyncio
import heapq
import time
from collections import deque
from typing import Awaitable, Callable, Sequence

from prefixcache.replay.server.load import LoadShape

#: ``launch(position, scheduled, in_flight, warmup)``: send one request and return when its
#: response is back. ``scheduled`` is a ``perf_counter`` reading (seconds), ``in_flight`` the
#: other requests of the pass in flight at the send (its dispatch round included).
Launch = Callable[[int, float, int, bool], Awaitable[None]]


class Scheduler:
    """Runs the requests of one pass: ``sessions[i]`` is request i's session (arrival order),
    ``offsets[i]`` its due offset (seconds from the start). :meth:`run` returns the number of
    requests not sent (stopped by ``duration`` or ``stop()``). Raises nothing itself."""

    def __init__(self, sessions: Sequence[str], offsets: Sequence[float], shape: LoadShape) -> None:
        self.shape = shape
        self.offsets = list(offsets)
        self.n = len(sessions)
        self.next_of: dict[int, int] = {}
        self.firsts: list[int] = []
        last: dict[str, int] = {}
        for pos, s in enumerate(sessions):
            if s in last:
                self.next_of[last[s]] = pos
            else:
                self.firsts.append(pos)
            last[s] = pos
        self.stopped = False
        self.sent = 0
        self._wake = asyncio.Event()

    def stop(self) -> None:
        """Send no more requests (those in flight finish)."""
        self.stopped = True
        self._wake.set()

    async def run(self, launch: Launch) -> int:
        """Send every request through ``launch`` in the shape; the count not sent."""
        shape = self.shape
        limit = shape.limit() or max(1, self.n)
        t0 = time.perf_counter()
        deadline = None if shape.duration is None else t0 + shape.duration
        warm_until = t0 + shape.warmup.seconds
        timers: list[tuple[float, int]] = []  # (due perf_counter, position) of turns not ready yet
        ready: list[int] = []  # positions, earliest in arrival order first
        due: dict[int, float] = {}
        waiting = deque(self.firsts) if shape.users is not None else deque()
        if shape.users is None:
            for p in self.firsts:
                heapq.heappush(timers, (t0 + self.offsets[p], p))
        open_sessions = 0
        in_flight = 0
        tasks: set[asyncio.Task] = set()

        async def one(pos: int, scheduled: float, others: int, warm: bool) -> None:
            nonlocal in_flight, open_sessions
            try:
                await launch(pos, scheduled, others, warm)
            finally:
                in_flight -= 1
                nxt = self.next_of.get(pos)
                if nxt is not None:
                    heapq.heappush(timers, (max(t0 + self.offsets[nxt], time.perf_counter() + shape.think_time), nxt))
                elif shape.users is not None:
                    open_sessions -= 1
                self._wake.set()

        while True:
            now = time.perf_counter()
            if deadline is not None and now >= deadline:
                self.stopped = True
            if not self.stopped:
                while shape.users is not None and open_sessions < shape.users and waiting:
                    open_sessions += 1
                    heapq.heappush(timers, (now, waiting.popleft()))
                while timers and timers[0][0] <= now:
                    t, p = heapq.heappop(timers)
                    due[p] = t
                    heapq.heappush(ready, p)
                batch = []
                while ready and in_flight < limit:
                    p = heapq.heappop(ready)
                    batch.append((p, self.sent < shape.warmup.requests or now < warm_until))
                    self.sent += 1
                    in_flight += 1
                for p, warm in batch:  # a round goes out together: each has the whole round beside it
                    task = asyncio.create_task(one(p, due.pop(p), in_flight - 1, warm))
                    tasks.add(task)
                    task.add_done_callback(tasks.discard)
            if in_flight == 0 and (self.stopped or not (timers or ready or waiting)):
                break
            wait = None
            if not self.stopped and timers and in_flight < limit:
                wait = max(0.0, timers[0][0] - time.perf_counter())
            if deadline is not None and not self.stopped:
                left = max(0.0, deadline - time.perf_counter())
                wait = left if wait is None else min(wait, left)
            self._wake.clear()
            if wait is None:
                await self._wake.wait()
            elif wait > 0:
                try:
                    await asyncio.wait_for(self._wake.wait(), wait)
                except asyncio.TimeoutError:
                    pass
        if tasks:  # only after a cancel: in_flight is 0 otherwise
            await asyncio.gather(*tasks, return_exceptions=True)
        return self.n - self.sent
