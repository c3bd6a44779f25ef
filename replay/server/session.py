"""One replay through a server: ingest → detect → prepare → passes → :class:`~prefixcache.replay.document.ServerReport`.

:func:`open_server` (reached through :func:`prefixcache.replay.open_replay` when
``options.server`` is a URL) reads the logs, detects the engine behind it, prepares the
prompts with the served model's tokenizer (``--tokenizer``, else the folder the server
says it loaded), configures the prediction from the engine's cache configuration (block
size; capacity from its kind's traits, e.g. vLLM's ``num_gpu_blocks − 1``) unless
``--block-size`` / ``--capacity`` are given, and checks a resumed results file — all
before any request is sent. :meth:`ServerSession.run` replays and returns a
:class:`~prefixcache.replay.document.ReplayOutcome` whose ``report`` is the ``--json`` document.
"""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path
from typing import IO, Callable, Sequence

from prefixcache.analyzer.cache.base import DEFAULT_BLOCK_SIZE
from prefixcache.analyzer.errors import ConfigError, InputError
from prefixcache.analyzer.ingest import Ingest
from prefixcache.analyzer.model import Request, Skipped
from prefixcache.analyzer.prepare import Preparer
from prefixcache.analyzer.replay_rows import ServerRow
from prefixcache.analyzer.serving import parse_slo
from prefixcache.replay.context import ContextLimit, fit_passes
from prefixcache.replay.document import EngineInfo, KVEventsReport, ReplayOutcome
from prefixcache.replay.options import ReplayOptions
from prefixcache.replay.prompts import replayable
from prefixcache.replay.results import ResultWriter, resumed, run_key
from prefixcache.replay.server.client import ServerClient
from prefixcache.replay.server.kinds import kind_of
from prefixcache.replay.server.kvevents import KVEventSubscriber, events_path, parse_endpoint, write_events
from prefixcache.replay.server.ledger import kv_report
from prefixcache.replay.server.load import LoadShape, Warmup
from prefixcache.replay.server.passes import ServedItem, ServedRun
from prefixcache.replay.server.summary import build_server_report


def load_shape(options: ReplayOptions) -> LoadShape:
    """The load shape of ``options`` (concurrency 1 unless given; unbounded with a rate, a
    logged schedule or users). ConfigError for nonsense values."""
    timed = options.rate is not None or options.schedule != "none" or options.users is not None
    return LoadShape(concurrency=options.concurrency or (None if timed else 1), rate=options.rate,
                     schedule=options.schedule, time_scale=options.time_scale, seed=options.seed,
                     burstiness=options.burstiness, users=options.users, think_time=options.think_time,
                     warmup=Warmup.parse(options.warmup), duration=options.duration)


def _tokenizer(options: ReplayOptions, info: EngineInfo) -> str:
    if options.tokenizer:
        return options.tokenizer
    if info.root and any((Path(info.root) / f).exists() for f in ("tokenizer.json", "tokenizer_config.json")):
        return info.root
    raise ConfigError(f"{info.url} serves {info.model} from {info.root or 'an unknown place'}: give --tokenizer "
                      "(the served model's tokenizer, a folder or an HF id in the local cache)")


def _items(requests: list[Request], options: ReplayOptions, tokenizer: str, info: EngineInfo
           ) -> tuple[dict[str, list[ServedItem]], list[Skipped]]:
    """Our prompts (token ids) and, for ``--send chat``, their OpenAI chat bodies; and the
    requests skipped because their prompt exceeds the context the server reports."""
    from prefixcache.analyzer.canonical.writers import openai_body

    spec = "tokenizer" if options.template == "model" else options.template
    limit = ContextLimit(info.max_context, options.max_new_tokens, bool(options.max_prompt_tokens))
    prompts, sources, skipped = fit_passes(requests, lambda: Preparer(template=spec, tokenizer=tokenizer), limit,
                                           options.max_prompt_tokens, "canonical" in options.passes)
    out: dict[str, list[ServedItem]] = {}
    for key, reqs in sources.items():
        by_key = {(r.provenance.source, r.provenance.record, r.session, r.index): r for r in reqs}
        out[key] = [ServedItem(p, _chat(by_key[(p.source, p.record, p.session, p.request_index)], openai_body)
                               if options.send == "chat" else None) for p in prompts[key]]
    return out, skipped


def _chat(request: Request, openai_body: Callable) -> dict:
    body = openai_body(request, None, False)
    return {"messages": body["messages"], "tools": body.get("tools")}


class ServerSession:
    """A server replay ready to go (see :func:`open_server`): ``total`` requests to send."""

    def __init__(self, options: ReplayOptions, shape: LoadShape, info: EngineInfo, items: dict[str, list[ServedItem]],
                 ingest: Ingest, done: list[ServerRow], block_size: int, capacity: int | None, run: str,
                 notes: tuple[str, ...], too_long: tuple[Skipped, ...] = ()) -> None:
        self.options, self.shape, self.info, self.items, self.ingest = options, shape, info, items, ingest
        self.skipped = ingest.summary.skipped + too_long  # unreadable records, then prompts past the context
        self.done, self.block_size, self.capacity, self.run_id, self.notes = done, block_size, capacity, run, notes
        self.total = sum(len(items["canonical" if p == "canonical" else "original"]) for p in options.passes)

    def run(self, on_request: Callable[[str], None] | None = None) -> ReplayOutcome:
        """Send every pass, streaming rows to ``options.out``; Ctrl-C stops the run and the
        outcome covers what finished."""
        o = self.options
        writer = ResultWriter(o.out, ServerRow, append=bool(self.done))
        try:
            sub = KVEventSubscriber(o.kv_events).start() if o.kv_events else None
        except BaseException:
            writer.close()
            raise
        interrupted = False
        holder: dict[str, ServedRun] = {}
        try:
            asyncio.run(self._go(holder, writer, on_request, sub is not None))
        except (KeyboardInterrupt, asyncio.CancelledError):
            interrupted = True
        finally:
            writer.close()
            if sub is not None:
                sub.stop()
        served = holder.get("run")
        rows = served.rows if served else self.done
        kv, facts = self._kv(sub, rows) if sub is not None else (None, None)
        report = build_server_report(self.info, send=o.send, load=self.shape.name, block_size=self.block_size,
                                     capacity_blocks=self.capacity, requests=len(self.items["original"]),
                                     run=self.run_id, rows=rows, states=served.states if served else [],
                                     stopped=served.stopped if served else None, interrupted=interrupted,
                                     slo=parse_slo(o.slo), kv_events=kv, facts=facts)
        return ReplayOutcome(report, tuple(rows), self.notes, self.ingest.summary.files, self.skipped, o.out)

    def _kv(self, sub: KVEventSubscriber, rows: Sequence[ServerRow]) -> tuple[KVEventsReport, dict]:
        """The KV-event report (events written beside ``--out``) and the facts behind differences."""
        o = self.options
        file = None
        if o.out is not None:
            path = events_path(Path(o.out))
            write_events(path, sub.events)
            file = str(path)
        ids = {(p, i): it.prompt.ids for p in o.passes
               for i, it in enumerate(self.items["canonical" if p == "canonical" else "original"])}
        block = self.info.block_size or self.block_size  # the engine's blocks, whatever the prediction uses
        return kv_report(o.kv_events or "", sub, rows, ids, block, self.capacity, file)

    async def _go(self, holder: dict, writer: ResultWriter, on_request: Callable[[str], None] | None,
                  tags: bool = False) -> None:
        o = self.options
        client = ServerClient(o.server or "", api_key=o.api_key, timeout=o.timeout,
                              connections=max(8, self.shape.limit() or 256))
        client.info = self.info
        try:
            served = holder["run"] = ServedRun(
                client, self.info, self.items, passes=o.passes, send=o.send, shape=self.shape,
                block_size=self.block_size, capacity_blocks=self.capacity, max_new_tokens=o.max_new_tokens,
                retries=o.retries, run=self.run_id, done=self.done, write=writer.write, on_request=on_request)
            served.tags = tags
            await served.run()
        finally:
            await client.aclose()


async def _detect(options: ReplayOptions) -> EngineInfo:
    client = ServerClient(options.server or "", api_key=options.api_key, timeout=min(options.timeout, 30.0))
    try:
        return await client.detect(options.model)
    finally:
        await client.aclose()


def open_server(paths: Sequence[str], options: ReplayOptions, *, stdin: IO[bytes] | None = None) -> ServerSession:
    """Read ``paths``, detect the server at ``options.server``, prepare prompts, configure the
    prediction and check a resumed ``options.out``; nothing is sent yet. Raises
    ConfigError / InputError / EngineError."""
    shape = load_shape(options)
    if options.kv_events is not None:
        parse_endpoint(options.kv_events)  # ConfigError for a malformed endpoint, before anything is read
    ingest = Ingest(list(paths), format=options.input_format,
                    stdin=stdin if stdin is not None else (sys.stdin.buffer if "-" in paths else None),
                    require_requests=True)
    requests = replayable(ingest, options.max_requests)
    shape.check_input(len(requests), len({r.session for r in requests}))  # before the server is asked
    info = asyncio.run(_detect(options))
    tokenizer = _tokenizer(options, info)
    items, too_long = _items(requests, options, tokenizer, info)
    block = options.block_size or info.block_size or DEFAULT_BLOCK_SIZE
    if options.capacity is not None:
        capacity = options.capacity.blocks(block, 0)
    else:
        capacity = kind_of(info.kind).capacity(info.num_blocks)
    run = run_key(server=f"{info.kind}:{info.model}", send=options.send, block_size=block, capacity=capacity,
                  template=options.template, tokenizer=tokenizer, max_prompt_tokens=options.max_prompt_tokens,
                  max_new_tokens=options.max_new_tokens)
    done = resumed(options.out, options.resume, ServerRow)
    other = sorted({r.run for r in done if r.run != run})
    if other:
        raise ConfigError(f"--resume: {options.out} holds results of another run ({', '.join(other)}; this run is "
                          f"{run}); rerun with the same settings, or write to another --out")
    for r in done:
        src = items["canonical" if r.pass_name == "canonical" else "original"]
        if r.position >= len(src) or len(src[r.position].prompt.ids) != r.prompt_tokens:
            raise InputError(f"--resume: results are from different prompts ({r.pass_name} #{r.position})",
                             str(options.out))
    notes = (f"engine {info.kind} at {info.url}: model {info.model}, block size {info.block_size}, "
             f"{info.num_blocks} KV blocks; prediction with {block}-token blocks, capacity "
             f"{'unbounded' if capacity is None else f'{capacity} blocks'}; tokenizer {tokenizer}",)
    sent = items["original"]  # prompts past the server's context are skipped: check what is sent
    notes += shape.check_input(len(sent), len({it.prompt.session for it in sent}))
    untimed = sum(r.timestamp is None for r in requests)
    if shape.schedule == "logged" and untimed:
        notes += (f"--schedule logged: {untimed:,} of {len(requests):,} request(s) have no logged time; their clock is "
                  f"their position in the log, so they are due {shape.time_scale:g} s apart",)
    return ServerSession(options, shape, info, items, ingest, done, block, capacity, run, notes, tuple(too_long))
