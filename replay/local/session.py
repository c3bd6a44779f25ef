"""One in-process replay run: ingest → prepare → passes → :class:`~prefixcache.replay.document.ReplayReport`.

:func:`open_local` (reached through :func:`prefixcache.replay.open_replay` when
``options.server`` is None) reads the logs, loads the engine (the in-process HF engine
unless one is given: any :class:`~prefixcache.replay.local.engine.Engine` plugs in),
prepares the prompts with the engine's tokenizer, resolves ``--capacity`` into blocks and
checks a resumed results file, all before any request runs; the returned
:class:`LocalSession` knows how many requests it will run (for a progress bar) and
``run()`` replays them and returns a :class:`~prefixcache.replay.document.ReplayOutcome`
whose ``report`` is the ``--json`` document.
"""

from __future__ import annotations

import sys
from dataclasses import replace
from pathlib import PurePath
from typing import IO, Callable, Sequence

from prefixcache.analyzer.cache.base import DEFAULT_BLOCK_SIZE
from prefixcache.analyzer.cache.capacity import Capacity
from prefixcache.analyzer.cache.simulate.sweeps import unique_blocks
from prefixcache.analyzer.errors import ConfigError
from prefixcache.analyzer.ingest import Ingest
from prefixcache.analyzer.model import Request, Skipped
from prefixcache.analyzer.prepare import Preparer
from prefixcache.analyzer.render import fold_warnings
from prefixcache.analyzer.replay_rows import LocalRow
from prefixcache.replay.context import ContextLimit, fit_passes
from prefixcache.replay.document import ReplayOutcome, ReplayReport, summarize
from prefixcache.replay.local.engine import Engine
from prefixcache.replay.local.passes import Replay, ReplayConfig, sim_requests
from prefixcache.replay.options import ReplayOptions, missing_extra
from prefixcache.replay.prompts import Prompt, replayable
from prefixcache.replay.results import ResultWriter, resumed, run_key


def replay_config(options: ReplayOptions) -> ReplayConfig:
    """The passes' cache and verification settings of ``options`` (block size default
    :data:`~prefixcache.analyzer.cache.base.DEFAULT_BLOCK_SIZE`; capacity not yet
    resolved). ConfigError for an unknown policy or verification mode."""
    return ReplayConfig(passes=options.passes, block_size=options.block_size or DEFAULT_BLOCK_SIZE,
                        policy=options.policy, max_new_tokens=options.max_new_tokens, verify=options.verify,
                        verify_every=options.verify_every, tol=options.tol, repeat=options.repeat)


def capacity_blocks(capacity: Capacity | None, block_size: int, kv_bytes_per_token: int,
                    prompts: Sequence[Prompt]) -> int | None:
    """``--capacity`` in blocks of ``block_size`` tokens (None = unbounded): bytes are
    divided by ``kv_bytes_per_token`` (the engine's, bytes) × ``block_size``; ``N%`` is of
    the distinct full blocks (chained block hashes) of ``prompts`` — the original prompts
    as replayed, i.e. after ``--max-prompt-tokens``. Raises ConfigError below one block."""
    if capacity is None:
        return None
    unique = unique_blocks(sim_requests(prompts), block_size) if capacity.unit == "%" else 0
    blocks = capacity.blocks(block_size, unique, kv_bytes_per_token)
    if blocks < 1:
        raise ConfigError(f"--capacity {capacity.text}: {blocks} blocks of {block_size} tokens "
                          f"({kv_bytes_per_token:,} KV bytes per token, {unique:,} distinct blocks); "
                          "a cache needs at least one")
    return blocks


def build_report(engine: Engine, config: ReplayConfig, prompts: dict[str, list[Prompt]],
                 rows: Sequence[LocalRow], *, run: str, template: str,
                 max_prompt_tokens: int | None, skipped_records: int, interrupted: bool) -> ReplayReport:
    """The summary of a run that replayed ``prompts`` (``original`` and, when the canonical
    pass ran, ``canonical``) with ``config`` (its ``capacity_blocks`` already resolved)
    and produced ``rows`` on ``engine``. Warnings name the model's own chat template the
    way the analyzer does (``template <tokenizer folder>:chat_template``): they are renamed
    "the model's own chat template"."""
    orig = prompts["original"]
    every = (w for ps in prompts.values() for p in ps for w in p.warnings)
    own = f"template {PurePath(engine.tokenizer).name}:chat_template"
    return ReplayReport(
        model=engine.name, device=engine.device, dtype=engine.dtype, block_size=config.block_size,
        policy=config.policy, requests=len(orig), run=run, template=template, repeat=config.repeat,
        capacity_blocks=config.capacity_blocks, max_prompt_tokens=max_prompt_tokens,
        truncated_prompts=sum(p.truncated for p in orig),
        truncated_canonical_prompts=sum(p.truncated for p in prompts.get("canonical", [])),
        dropped_hidden_prefixes=sum(1 for p in orig if p.dropped_opaque),
        skipped_records=skipped_records,
        warnings=tuple(w.replace(own, "the model's own chat template") for w in fold_warnings(every)),
        passes=tuple(summarize(rows, config.passes)), interrupted=interrupted,
    )


class LocalSession:
    """An in-process run ready to go (see :func:`open_local`): ``total`` requests to run."""

    def __init__(self, options: ReplayOptions, engine: Engine, replay: Replay, ingest: Ingest,
                 notes: tuple[str, ...], done: bool, too_long: tuple[Skipped, ...] = ()) -> None:
        self.options, self.engine, self.replay, self.ingest = options, engine, replay, ingest
        self._notes, self._append = notes, done
        self.skipped = ingest.summary.skipped + too_long  # unreadable records, then prompts past the context
        self.total = replay.total()

    def run(self, on_request: Callable[[str], None] | None = None) -> ReplayOutcome:
        """Warm the engine up, run every pass (``on_request(pass name)`` after each request),
        streaming rows to ``options.out``. Ctrl-C stops the run: the outcome covers the
        requests that finished and says it was interrupted."""
        writer = ResultWriter(self.options.out, LocalRow, append=self._append)  # a torn last line is cut first
        interrupted = False
        try:
            self.replay.warmup()
            self.replay.run((lambda name, _r: on_request(name)) if on_request else None, writer)
        except KeyboardInterrupt:
            interrupted = True
        finally:
            writer.close()
        report = build_report(self.engine, self.replay.config, self.replay.prompts, self.replay.results,
                              run=self.replay.run_id, template=self.options.template,
                              max_prompt_tokens=self.options.max_prompt_tokens,
                              skipped_records=len(self.skipped), interrupted=interrupted)
        return ReplayOutcome(report, tuple(self.replay.results), self._notes + self.engine.notes(),
                             self.ingest.summary.files, self.skipped, self.options.out)


def load_engine(options: ReplayOptions) -> Engine:
    """The in-process HF engine for ``options.model`` / ``device`` / ``dtype`` (EngineError
    for a model that is missing or cannot be loaded; ConfigError without torch/transformers)."""
    try:
        from prefixcache.replay.local.hf import HFEngine, load_model
    except ImportError as exc:
        raise missing_extra(exc, "replay (in-process)") or exc from None

    return HFEngine(load_model(options.model, device=options.device, dtype=options.dtype))


def _prompts(requests: list[Request], options: ReplayOptions, config: ReplayConfig, engine: Engine
             ) -> tuple[dict[str, list[Prompt]], str, list[Skipped]]:
    """Original (and, for the canonical pass, canonicalized) prompts in the engine's token
    ids, a note on how they were rendered and tokenized, and the requests skipped because
    their prompt exceeds the engine's context (ConfigError when none is left)."""
    spec = "tokenizer" if options.template == "model" else options.template
    limit = ContextLimit(engine.max_context, config.max_new_tokens, bool(options.max_prompt_tokens))
    preparer = Preparer(template=spec, tokenizer=engine.tokenizer)
    prompts, _, skipped = fit_passes(requests, lambda: Preparer(template=spec, tokenizer=engine.tokenizer), limit,
                                     options.max_prompt_tokens, "canonical" in config.passes, preparer)
    how = "the model's own chat template" if options.template == "model" else f"template {options.template}"
    pipes = [preparer.pipeline(m) for m in preparer.notes]
    exact = all(p.renderer.exact and p.tokenizer.exact for p in pipes)
    note = (f"prompts rendered with {how} and tokenized with {engine.name}'s tokenizer "
            f"(token counts {'exact' if exact else 'approximate'})")
    return prompts, note, skipped


def open_local(paths: Sequence[str], options: ReplayOptions, *, engine: Engine | None = None,
               stdin: IO[bytes] | None = None) -> LocalSession:
    """Read ``paths`` (``-`` = ``stdin``), load the engine (``engine``, else
    :func:`load_engine`), prepare the prompts, resolve the capacity and check a resumed
    ``options.out``; nothing runs yet. Raises ConfigError / InputError / EngineError."""
    base = replay_config(options)
    ingest = Ingest(list(paths), format=options.input_format,
                    stdin=stdin if stdin is not None else (sys.stdin.buffer if "-" in paths else None),
                    require_requests=True)
    requests = replayable(ingest, options.max_requests)
    out = options.out
    done = resumed(out, options.resume, LocalRow)
    engine = engine if engine is not None else load_engine(options)
    prompts, note, too_long = _prompts(requests, options, base, engine)
    config = replace(base, capacity_blocks=capacity_blocks(options.capacity, base.block_size,
                                                           engine.kv_bytes_per_token, prompts["original"]))
    run = run_key(model=engine.model_id, dtype=engine.dtype, device=engine.device_kind, block_size=config.block_size,
                  capacity=config.capacity_blocks, policy=config.policy,
                  template="tokenizer" if options.template == "model" else options.template,
                  tokenizer=engine.model_id, max_prompt_tokens=options.max_prompt_tokens,
                  max_new_tokens=config.max_new_tokens)
    replay = Replay(engine, config, prompts, done, run=run, results_file=str(out) if out is not None else "")
    return LocalSession(options, engine, replay, ingest, (note,), bool(done), tuple(too_long))
