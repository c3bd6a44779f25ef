"""Render and tokenize on several workers: ``--executor local`` (serial, the default) or ``ray[:ADDRESS]``.

What may run apart and what may not:

* **reading** stays in this process: session ids are assigned on the fly across files
  (``ingest/sessions.py``), so the files are read in order, as always;
* **rendering and tokenizing** depend only on a request's own session (the renderer's and the
  incremental tokenizer's memories are per session; a global memo is verified by digest), so
  sessions are spread over the workers, each session always to the same one (a stable hash of
  its id), in chunks of :data:`CHUNK` requests;
* **the hidden prefix sized from usage** is shared by the sessions of one key (the first call
  with usage decides), so :meth:`Preparer.finish` runs here, in input order.

What comes back is compact: each request as the change from its session's previous rendering
(:mod:`.wire`), rebuilt here; it grows with the log, not with the sum of the prompts (sending every
full rendering back cost the driver more in unpickling than the workers took off it).

The result is the serial stream, request for request: the ids equal ``tokenizer.encode`` of the
same text whatever the worker (the incremental tokenizer's guarantee), and the order is the input
order. With Ray, each worker is an actor holding one :class:`Preparer` (the package is imported
there once, from the same installation: a cluster's nodes need ``prefixcache`` installed, see
docs/commands/lint.md). ``ray`` alone starts Ray on this machine's cores (or joins the cluster
named by ``RAY_ADDRESS``); ``ray:ADDRESS`` joins that cluster (``ray:auto``, ``ray:HOST:6379``).
"""

from __future__ import annotations

import os
import zlib
from collections import deque
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Iterator, TypeVar

from prefixcache.analyzer.errors import ConfigError
from prefixcache.analyzer.model import Request
from prefixcache.analyzer.prepare.prepared import Prepared, Preparer, usage_only
from prefixcache.analyzer.prepare.wire import Decoder, Encoder

T = TypeVar("T")

#: Requests sent to the workers at a time.
CHUNK = 512
#: Chunks sent ahead of the one this process finishes (the workers render and tokenize them meanwhile, so
#: reading, finishing and linting here overlap the workers' work); memory: ``IN_FLIGHT + 1`` chunks' prompts.
IN_FLIGHT = 2


@dataclass(frozen=True, slots=True)
class Executor:
    """Where render and tokenize run: ``kind`` ``local`` (serial, here) or ``ray``; ``address`` the
    Ray cluster to join (None: ``RAY_ADDRESS`` or a new local Ray); ``workers`` the number of
    actors (None: one per CPU Ray reports)."""

    kind: str = "local"
    address: str | None = None
    workers: int | None = None

    @property
    def parallel(self) -> bool:
        return self.kind != "local"


def parse_executor(spec: str, workers: int | None = None) -> Executor:
    """``local``, ``ray`` or ``ray:ADDRESS`` as an :class:`Executor`. Raises :class:`ConfigError`
    naming the flag for anything else, and when Ray is not installed (``pip install 'prefixcache[ray]'``)."""
    kind, _, address = (spec or "local").partition(":")
    if kind not in ("local", "ray") or (kind == "local" and address):
        raise ConfigError(f"--executor {spec}: expected local, ray or ray:ADDRESS")
    if workers is not None and workers < 1:
        raise ConfigError(f"--workers {workers}: must be at least 1")
    if kind == "ray":
        try:
            import ray  # noqa: F401
        except ImportError:
            raise ConfigError(f"--executor {spec}: Ray is not installed (pip install 'prefixcache[ray]')") from None
    return Executor(kind, address or None, workers)


class _Actor:
    """A Ray actor's body: one Preparer, fed the requests of its sessions in input order."""

    def __init__(self, template: str, tokenizer: str, env: dict[str, str | None]) -> None:
        for key, value in env.items():  # the caller's limits (PREFIXCACHE_*) hold on the worker too
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
        self.preparer = Preparer(template, tokenizer)
        self.encoder = Encoder()

    def run(self, requests: list[Request]) -> list[Any]:
        """``(rendered, tokens)`` per request as :class:`~.wire.Encoder` items (what changed since the
        session's previous request), or the exception its render raised (an input error belongs to that
        request, and is raised here, in order, as the serial run would)."""
        out: list[Any] = []
        for r in requests:
            try:
                out.append(self.preparer.render_tokenize(r))
            except Exception as exc:  # noqa: BLE001 - raised again by the caller at this request
                out.append(exc)
        return self.encoder.encode(requests, out)


def _worker_env() -> dict[str, str | None]:
    from prefixcache.analyzer.limits import LIMITS

    keys = [lim.env for lim in LIMITS.values()] + ["TIKTOKEN_CACHE_DIR", "HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE"]
    return {k: os.environ.get(k) for k in keys}


def connect(executor: Executor) -> bool:
    """Join the Ray of a parallel ``executor`` (its address; else ``RAY_ADDRESS``; else a new Ray on
    this machine's cores, without a dashboard) unless this process is already connected. Returns
    whether this call started the connection (then the caller ends it with ``ray.shutdown()``)."""
    import ray

    if ray.is_initialized():
        return False
    kwargs: dict[str, Any] = {"address": executor.address} if executor.address else {}
    if not executor.address and not os.environ.get("RAY_ADDRESS"):  # a Ray of our own: no dashboard
        kwargs["include_dashboard"] = False
    ray.init(log_to_driver=False, logging_level="ERROR", configure_logging=False, **kwargs)
    return True


def open_pool(executor: Executor, template: str, tokenizer: str) -> "RayPool | None":
    """The actors of a parallel ``executor`` (None for ``local``); close it when done (a ``with`` block)."""
    return RayPool(executor, template, tokenizer) if executor.parallel else None


class RayPool:
    """Ray actors preparing the sessions given to them (see the module docstring). ``close`` ends
    the actors, and Ray itself when this pool started it."""

    def __init__(self, executor: Executor, template: str, tokenizer: str) -> None:
        import ray

        self._started = connect(executor)
        n = executor.workers or max(1, int(ray.cluster_resources().get("CPU", 1)))
        remote = ray.remote(num_cpus=1)(_Actor)
        env = _worker_env()
        self.actors = [remote.remote(template, tokenizer, env) for _ in range(n)]
        self.decoder = Decoder()  # the actors' sessions are disjoint: one decoder for all of them

    def submit(self, chunk: list[Request]) -> list[tuple[list[int], Any]]:
        """Send ``render_tokenize`` of every request of ``chunk`` to the actors, each session to its
        actor (an actor runs its calls in the order they were sent); the handle for :meth:`collect`."""
        n = len(self.actors)
        shards: list[list[int]] = [[] for _ in range(n)]
        for i, r in enumerate(chunk):
            shards[zlib.crc32(r.session.encode("utf-8", "surrogatepass")) % n].append(i)
        return [(idx, self.actors[k].run.remote([chunk[i] for i in idx])) for k, idx in enumerate(shards) if idx]

    def collect(self, futures: list[tuple[list[int], Any]]) -> list[Any]:
        """The results of a :meth:`submit`, in the chunk's order (waits for them)."""
        import ray

        out: list[Any] = [None] * sum(len(idx) for idx, _ in futures)
        for idx, fut in futures:
            for i, res in zip(idx, self.decoder.decode(ray.get(fut))):
                out[i] = res
        return out

    def run(self, chunk: list[Request]) -> list[Any]:
        """``render_tokenize`` of every request of ``chunk``, in order, each session on its actor."""
        return self.collect(self.submit(chunk))

    def __enter__(self) -> "RayPool":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        import ray

        for a in self.actors:
            ray.kill(a)
        self.actors = []
        if self._started:
            ray.shutdown()


def prepare_stream(items: Iterable[tuple[T, Request | None]], current: Callable[[], Preparer], pool: RayPool | None
                   ) -> Iterator[tuple[T, Prepared | None]]:
    """``(tag, current().prepare(request))`` for each ``(tag, request)`` of ``items``, in order; a
    ``None`` request passes through as ``(tag, None)`` (a barrier: the chunk before it is finished
    first; ``current`` gives the preparer of the moment, which a caller may replace there). Without ``pool`` each request is prepared here as it comes; with one, chunks of
    :data:`CHUNK` go to its actors, up to :data:`IN_FLIGHT` ahead of the one finished here, and come back in order. A request's error (its template rejects
    it) is raised at that request."""
    if pool is None:
        for tag, request in items:
            yield tag, None if request is None else current().prepare(request)
        return
    pending: list[tuple[T, Request]] = []
    inflight: deque[tuple[list[tuple[T, Request]], Any]] = deque()

    def submit() -> None:
        text = [r for _, r in pending if r.trace is None and not usage_only(r)]
        inflight.append((list(pending), pool.submit(text) if text else None))
        pending.clear()

    def drain_one() -> Iterator[tuple[T, Prepared]]:
        batch, handle = inflight.popleft()
        preparer = current()
        results = iter(pool.collect(handle)) if handle is not None else iter(())
        for tag, r in batch:
            if r.trace is not None or usage_only(r):
                yield tag, Prepared(r, None, None)
                continue
            res = next(results)
            if isinstance(res, Exception):
                raise res
            preparer.pipeline(r.model)  # the notes of what was chosen, as the serial run keeps them
            yield tag, preparer.finish(r, *res)

    for tag, request in items:
        if request is None:
            if pending:
                submit()
            while inflight:
                yield from drain_one()
            yield tag, None
            continue
        pending.append((tag, request))
        if len(pending) >= CHUNK:
            submit()
            while len(inflight) > IN_FLIGHT:  # the workers render the next chunks while this process finishes one
                yield from drain_one()
    if pending:
        submit()
    while inflight:
        yield from drain_one()
