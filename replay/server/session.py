"""One replay through a server as a library call: ingest → detect → prepare → passes → report.

``open_server_replay(paths, options)`` reads the logs, detects the engine behind
``options.url``, prepares the prompts with the served model's tokenizer (``--tokenizer``,
else the folder the server says it loaded), configures the prediction from the engine's
cache configuration (block size; capacity = vLLM's ``num_gpu_blocks − 1``) unless
``--block-size`` / ``--capacity`` are given, and checks a resumed results file — all
before any request is sent. :meth:`ServerSession.run` replays and returns a
:class:`ServerOutcome` whose ``report`` is the ``--json`` document.
"""

from __future__ import annotations

import asyncio
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Callable, Sequence

from prefixcache.analyzer.cache.capacity import Capacity
from prefixcache.analyzer.errors import ConfigError, InputError
from prefixcache.analyzer.ingest import Ingest
from prefixcache.analyzer.model import Request, Skipped
from prefixcache.analyzer.prepare import Preparer
from prefixcache.replay.context import ContextLimit, fit_passes
from prefixcache.replay.server.detect import EngineInfo
from prefixcache.replay.server.client import ServerClient
from prefixcache.replay.server.load import LoadShape
from prefixcache.replay.local.session import _requests
from prefixcache.replay.local.passes import PASSES, Prompt, at_least_one, run_key
from prefixcache.replay.server.passes import ServedItem, ServedRun
from prefixcache.replay.server.results import ServedResult, ServedWriter, load_served
from prefixcache.replay.server.document import ServerReport, build_server_report

SENDS = ("tokens", "chat")


@dataclass(frozen=True, slots=True)
class ServerOptions:
    """A server replay's flags, typed. ``url``: the server's base URL; ``api_key``: sent as a
    bearer token; ``model``: the served model name (None = the server's first); ``send``:
    ``tokens`` or ``chat``; ``tokenizer``: ours (None = the folder the server loaded);
    ``template``: ``model`` (the tokenizer's chat template) or a ``--template`` spec;
    ``block_size`` / ``capacity``: override the engine's cache configuration for the
    prediction; ``timeout``: seconds per read; ``retries``: resends of a failed request.
    Raises ConfigError for nonsense values before any work."""

    url: str
    api_key: str | None = field(default=None, repr=False)  # never shown in a repr, error or log
    model: str | None = None
    send: str = "tokens"
    tokenizer: str | None = None
    template: str = "model"
    input_format: str = "auto"
    passes: tuple[str, ...] = PASSES
    shape: LoadShape = field(default_factory=LoadShape)
    block_size: int | None = None
    capacity: Capacity | None = None
    max_new_tokens: int = 1
    max_requests: int | None = None
    max_prompt_tokens: int | None = None
    timeout: float = 300.0
    retries: int = 0
    out: Path | None = None
    resume: bool = False

    def __post_init__(self) -> None:
        if self.send not in SENDS:
            raise ConfigError(f"--send {self.send}: choose from {', '.join(SENDS)}")
        bad = [p for p in self.passes if p not in PASSES]
        if bad or not self.passes or len(set(self.passes)) < len(self.passes):
            raise ConfigError(f"--pass {','.join(self.passes)}: give each of {', '.join(PASSES)} at most once")
        at_least_one(("--max-requests", self.max_requests), ("--max-prompt-tokens", self.max_prompt_tokens),
                     ("--block-size", self.block_size), ("--max-new-tokens", self.max_new_tokens))
        if self.retries < 0 or not self.timeout > 0:
            raise ConfigError("--retries must be ≥ 0 and --timeout > 0")
        if self.resume and self.out is None:
            raise ConfigError("--resume needs --out (the results file to continue)")
        if self.send == "chat" and self.max_prompt_tokens:
            raise ConfigError("--max-prompt-tokens truncates token ids: it needs --send tokens")
        if not self.url.startswith(("http://", "https://")):
            raise ConfigError(f"--server {self.url}: give an http:// or https:// URL")


@dataclass(frozen=True, slots=True)
class ServerOutcome:
    """A finished (or stopped / interrupted) server replay: the ``report``, every row (this
    run's and the resumed file's), ``notes`` (one line each), input ``files`` read, the
    ``skipped`` input records and the results file ``out``."""

    report: ServerReport
    rows: tuple[ServedResult, ...]
    notes: tuple[str, ...]
    files: int
    skipped: tuple[Skipped, ...]
    out: Path | None


def _tokenizer(options: ServerOptions, info: EngineInfo) -> str:
    if options.tokenizer:
        return options.tokenizer
    if info.root and (Path(info.root) / "tokenizer.json").exists() or info.root and (Path(info.root) / "tokenizer_config.json").exists():
        return info.root
    raise ConfigError(f"{info.url} serves {info.model} from {info.root or 'an unknown place'}: give --tokenizer "
                      "(the served model's tokenizer, a folder or an HF id in the local cache)")


def _items(requests: list[Request], options: ServerOptions, tokenizer: str, info: EngineInfo
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
    """A server replay ready to go (see :func:`open_server_replay`): ``total`` requests to send."""

    def __init__(self, options: ServerOptions, info: EngineInfo, items: dict[str, list[ServedItem]],
                 ingest: Ingest, done: list[ServedResult], block_size: int, capacity: int | None, run: str,
                 notes: tuple[str, ...], too_long: tuple[Skipped, ...] = ()) -> None:
        self.options, self.info, self.items, self.ingest = options, info, items, ingest
        self.skipped = ingest.summary.skipped + too_long  # unreadable records, then prompts past the context
        self.done, self.block_size, self.capacity, self.run_id, self.notes = done, block_size, capacity, run, notes
        self.total = sum(len(items["canonical" if p == "canonical" else "original"]) for p in options.passes)

    def run(self, on_request: Callable[[str], None] | None = None) -> ServerOutcome:
        """Send every pass, streaming rows to ``options.out``; Ctrl-C stops the run and the
        outcome covers what finished."""
        o = self.options
        writer = ServedWriter(o.out, append=bool(self.done))
        interrupted = False
        holder: dict[str, ServedRun] = {}
        try:
            asyncio.run(self._go(holder, writer, on_request))
        except (KeyboardInterrupt, asyncio.CancelledError):
            interrupted = True
        finally:
            writer.close()
        served = holder.get("run")
        rows = served.rows if served else self.done
        report = build_server_report(self.info, send=o.send, load=o.shape.name, block_size=self.block_size,
                                     capacity_blocks=self.capacity, requests=len(self.items["original"]),
                                     run=self.run_id, rows=rows, states=served.states if served else [],
                                     stopped=served.stopped if served else None, interrupted=interrupted)
        return ServerOutcome(report, tuple(rows), self.notes, self.ingest.summary.files, self.skipped, o.out)

    async def _go(self, holder: dict, writer: ServedWriter, on_request: Callable[[str], None] | None) -> None:
        o = self.options
        client = ServerClient(o.url, api_key=o.api_key, timeout=o.timeout,
                              connections=max(8, o.shape.concurrency or 64))
        client.info = self.info
        try:
            served = holder["run"] = ServedRun(
                client, self.info, self.items, passes=o.passes, send=o.send, shape=o.shape,
                block_size=self.block_size, capacity_blocks=self.capacity, max_new_tokens=o.max_new_tokens,
                retries=o.retries, run=self.run_id, done=self.done, write=writer.write, on_request=on_request)
            await served.run()
        finally:
            await client.aclose()


async def _detect(options: ServerOptions) -> EngineInfo:
    client = ServerClient(options.url, api_key=options.api_key, timeout=min(options.timeout, 30.0))
    try:
        return await client.detect(options.model)
    finally:
        await client.aclose()


def open_server_replay(paths: Sequence[str], options: ServerOptions, *,
                       stdin: IO[bytes] | None = None) -> ServerSession:
    """Read ``paths``, detect the server, prepare prompts, configure the prediction and check a
    resumed ``options.out``; nothing is sent yet. Raises ConfigError / InputError / EngineError."""
    ingest = Ingest(list(paths), format=options.input_format,
                    stdin=stdin if stdin is not None else (sys.stdin.buffer if "-" in paths else None))
    requests = _requests(ingest, options.max_requests)
    info = asyncio.run(_detect(options))
    tokenizer = _tokenizer(options, info)
    items, too_long = _items(requests, options, tokenizer, info)
    block = options.block_size or info.block_size or 16
    capacity = None
    if options.capacity is not None:
        if options.capacity.unit not in ("blocks", "tokens"):
            raise ConfigError(f"--capacity {options.capacity.text}: with --server give blocks or tokens")
        capacity = options.capacity.blocks(block, 0)
    elif info.kind == "vllm" and info.num_blocks:
        capacity = info.num_blocks - 1  # vLLM keeps one null block
    run = run_key(server=f"{info.kind}:{info.model}", send=options.send, block_size=block, capacity=capacity,
                  template=options.template, tokenizer=tokenizer, max_prompt_tokens=options.max_prompt_tokens,
                  max_new_tokens=options.max_new_tokens)
    done = load_served(options.out) if options.resume and options.out and options.out.exists() else []
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
    return ServerSession(options, info, items, ingest, done, block, capacity, run, notes, tuple(too_long))


__all__ = ["SENDS", "ServerOptions", "ServerOutcome", "ServerSession", "open_server_replay", "Prompt"]
