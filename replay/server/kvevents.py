"""vLLM's KV-cache events during a server replay (``replay --server URL --kv-events ENDPOINT``).

vLLM publishes what its block pool does when started with ``--kv-events-config`` (vLLM 0.32,
``vllm/distributed/kv_events.py``): a ZeroMQ PUB socket sends ``(topic, seq, payload)``
multipart messages, ``seq`` an 8-byte big-endian batch number, ``payload`` a msgpack array
``[ts, events, data_parallel_rank]`` (``ts``: the engine's ``time.time()`` when the scheduler
step's batch was made). Each event is a map tagged by ``type``:

* ``BlockStored`` — ``block_hashes`` (the engine's, chained), ``parent_block_hash`` (None for
  block 0), ``token_ids`` (the blocks' tokens, ``block_size`` each), ``session_id`` (the
  request's ``session_id`` body field). With ``vllm_xargs.kv_cache_report_mode = "full"`` the
  engine also reports a request's *reused* prefix this way when it schedules it
  (``KVCacheManager.get_computed_blocks``), so every request's scheduling point is in the stream;
* ``BlockRemoved`` — ``block_hashes`` of a block the pool evicted (one event per block copy:
  the pool can hold two copies of one hash);
* ``AllBlocksCleared`` — ``/reset_prefix_cache`` (published with the next step's batch).

:class:`KVEventSubscriber` receives them on a thread (so the receive time is not held up by
the replay's event loop) and keeps each as a :class:`KVEvent` with its batch number, the
engine's timestamp and our ``perf_counter`` at receipt (the clock of the result rows).
Endpoints: ``tcp://HOST:PORT`` connects to a publisher that binds (vLLM's default
``tcp://*:5557``); ``bind:tcp://127.0.0.1:PORT`` binds for a publisher configured to connect
(any endpoint without ``*``), which keeps everything on localhost.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

import orjson

from prefixcache.analyzer.errors import ConfigError

STORED, REMOVED, CLEARED = "stored", "removed", "cleared"
_TYPES = {"BlockStored": STORED, "BlockRemoved": REMOVED, "AllBlocksCleared": CLEARED}


@dataclass(frozen=True, slots=True)
class KVEvent:
    """One block-pool event: ``seq`` (the publisher's batch number) and ``index`` (its place in
    the batch) order the stream; ``ts`` the engine's wall clock of the batch (seconds since the
    epoch); ``t_recv`` our ``perf_counter`` when the batch arrived (seconds, the rows' clock);
    ``type`` ``stored`` / ``removed`` / ``cleared``; ``hashes`` the engine's block hashes;
    ``parent`` the hash before the first (stored; None = block 0); ``tokens`` the stored blocks'
    token ids; ``block_size`` tokens; ``tag`` the request's ``session_id`` (stored; None if unset)."""

    seq: int
    index: int
    ts: float
    t_recv: float
    type: str
    hashes: tuple[int, ...]
    parent: int | None = None
    tokens: tuple[int, ...] = ()
    block_size: int | None = None
    tag: str | None = None

    def to_json(self) -> dict[str, Any]:
        """The event as one JSON object (the ``--out`` side file's lines)."""
        d = {"seq": self.seq, "index": self.index, "ts": self.ts, "t_recv": self.t_recv, "type": self.type,
             "hashes": [str(h) for h in self.hashes]}
        if self.type == STORED:
            d.update(parent=None if self.parent is None else str(self.parent), block_size=self.block_size,
                     tag=self.tag, tokens=list(self.tokens))
        return d


def _hash(h: Any) -> int:
    """An engine block hash as an int (vLLM sends ints, or bytes for a non-int hash function)."""
    return h if isinstance(h, int) else int.from_bytes(bytes(h)[-8:], "big")


def decode(seq: int, payload: bytes, t_recv: float) -> list[KVEvent]:
    """The events of one published batch (``payload`` as vLLM's msgpack encoder writes it).
    Events of other kinds are skipped; ValueError for a payload that is not a batch."""
    import msgpack

    batch = msgpack.unpackb(payload, raw=False, strict_map_key=False)
    if not isinstance(batch, (list, tuple)) or len(batch) < 2 or not isinstance(batch[1], list):
        raise ValueError("not a KV event batch")
    ts, out = float(batch[0]), []
    for i, ev in enumerate(batch[1]):
        kind = _TYPES.get(ev.get("type")) if isinstance(ev, dict) else None
        if kind is None:
            continue
        hashes = tuple(_hash(h) for h in ev.get("block_hashes") or ())
        parent = ev.get("parent_block_hash")
        out.append(KVEvent(seq, i, ts, t_recv, kind, hashes, None if parent is None else _hash(parent),
                           tuple(ev.get("token_ids") or ()), ev.get("block_size"), ev.get("session_id")))
    return out


def parse_endpoint(text: str) -> tuple[str, bool]:
    """``(zmq endpoint, bind?)`` of a ``--kv-events`` value; ConfigError for another form."""
    bind = text.startswith("bind:")
    endpoint = text[5:] if bind else text
    if not endpoint.startswith(("tcp://", "ipc://")) or endpoint.count(":") < (2 if endpoint[:3] == "tcp" else 1):
        raise ConfigError(f"--kv-events {text}: give tcp://HOST:PORT (vLLM binds) or bind:tcp://127.0.0.1:PORT "
                          "(vLLM's --kv-events-config endpoint connects to it)")
    return endpoint, bind


class KVEventSubscriber:
    """Subscribes to a vLLM KV-event publisher on a thread (see the module docstring).

    ``start()`` opens the socket and waits ``settle_s`` seconds for the publisher to join (a
    PUB socket drops what it sends before a subscriber is connected); ``stop()`` ends the
    thread and returns the events in arrival order. ``missing``: batch numbers skipped
    between the first and the last received (a subscriber too slow for the publisher's
    high-water mark); ``errors``: undecodable payloads. Raises ConfigError when the
    endpoint cannot be opened (the port is taken, pyzmq is missing)."""

    def __init__(self, endpoint: str, topic: str = "", settle_s: float = 0.5) -> None:
        self.endpoint, self.bind = parse_endpoint(endpoint)
        self.topic, self.settle_s = topic, settle_s
        self.events: list[KVEvent] = []
        self.batches = 0
        self.missing = 0
        self.errors = 0
        self._last: int | None = None
        self._running = False
        self._thread: threading.Thread | None = None
        self._sock: Any = None

    def start(self) -> "KVEventSubscriber":
        try:
            import zmq
        except ImportError:
            raise ConfigError("--kv-events needs pyzmq and msgpack: pip install 'prefixcache[replay]'") from None
        self._ctx = zmq.Context()
        sock = self._ctx.socket(zmq.SUB)
        sock.setsockopt(zmq.SUBSCRIBE, self.topic.encode())
        sock.setsockopt(zmq.RCVHWM, 0)
        try:
            sock.bind(self.endpoint) if self.bind else sock.connect(self.endpoint)
        except zmq.ZMQError as exc:
            sock.close(linger=0)
            self._ctx.term()
            raise ConfigError(f"--kv-events {self.endpoint}: cannot {'bind' if self.bind else 'connect'} ({exc})") from None
        self._sock, self._running = sock, True
        self._thread = threading.Thread(target=self._loop, name="kv-events", daemon=True)
        self._thread.start()
        time.sleep(self.settle_s)
        return self

    def _loop(self) -> None:
        sock = self._sock
        while self._running:
            if not sock.poll(50):
                continue
            while True:
                try:
                    frames = sock.recv_multipart(flags=1)  # zmq.NOBLOCK
                except Exception:  # zmq.Again: drained
                    break
                self._take(frames, time.perf_counter())

    def _take(self, frames: Sequence[bytes], t_recv: float) -> None:
        if len(frames) != 3:
            self.errors += 1
            return
        seq = int.from_bytes(frames[1], "big", signed=True)
        if self._last is not None and seq > self._last + 1:
            self.missing += seq - self._last - 1
        self._last = seq
        self.batches += 1
        try:
            self.events.extend(decode(seq, frames[2], t_recv))
        except (ValueError, TypeError, KeyError):
            self.errors += 1

    def drain(self, quiet_s: float = 0.3, max_s: float = 3.0) -> None:
        """Wait until no batch arrived for ``quiet_s`` seconds (at most ``max_s``): the engine
        publishes a step's events a moment after the step's responses."""
        end = time.monotonic() + max_s
        seen = self.batches
        quiet_until = time.monotonic() + quiet_s
        while time.monotonic() < end:
            time.sleep(0.05)
            if self.batches != seen:
                seen, quiet_until = self.batches, time.monotonic() + quiet_s
            elif time.monotonic() >= quiet_until:
                return

    def stop(self) -> list[KVEvent]:
        """Stop receiving; the events in arrival order."""
        if self._thread is not None:
            self.drain()
            self._running = False
            self._thread.join(timeout=5)
            self._sock.close(linger=0)
            self._ctx.term()
            self._thread = None
        return self.events


def write_events(path: Path, events: Sequence[KVEvent]) -> None:
    """Write ``events`` as JSON lines to ``path`` (the ``--out`` file's ``.kv-events.jsonl`` side file)."""
    with path.open("wb") as f:
        for e in events:
            f.write(orjson.dumps(e.to_json()) + b"\n")


def events_path(out: Path) -> Path:
    """Where the KV events of a run writing rows to ``out`` go: ``OUT.kv-events.jsonl`` beside it."""
    return out.with_name(out.name + ".kv-events.jsonl")
