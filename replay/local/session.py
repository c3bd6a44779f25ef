"""One replay run as a library call: ingest → prepare → passes → :class:`ReplayReport`.

``open_replay(paths, options)`` reads the logs, loads the engine (the in-process HF
engine unless one is given: any :class:`~prefixcache.replay.local.engine.Engine` plugs
in), prepares the prompts with the engine's tokenizer, resolves ``--capacity`` into
blocks and checks a resumed results file, all before any request runs; the returned
:class:`ReplaySession` knows how many requests it will run (for a progress bar) and
``run()`` replays them and returns a :class:`ReplayOutcome` whose ``report`` is the
``--json`` document.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import IO, Callable, Sequence

from prefixcache.analyzer.cache.simulate.sweeps import unique_blocks
from prefixcache.analyzer.cache.capacity import Capacity
from prefixcache.analyzer.errors import ConfigError
from prefixcache.analyzer.ingest import Ingest
from prefixcache.analyzer.model import Request, Skipped
from prefixcache.analyzer.prepare import Preparer, usage_only
from prefixcache.replay.context import ContextLimit, fit_passes
from prefixcache.replay.local.engine import Engine
from prefixcache.replay.local.document import ReplayReport, build_report
from prefixcache.replay.local.results import RequestResult, ResultWriter, load_results
from prefixcache.replay.local.passes import Prompt, Replay, ReplayConfig, at_least_one, run_key, sim_requests


@dataclass(frozen=True, slots=True)
class ReplayOptions:
    """What one replay run is asked to do (the ``replay`` command's flags, typed).

    Engine: ``model`` (None = the built-in SmolLM2; a folder, a ``.gguf`` file, an HF id
    in the local cache), ``device`` (``auto``, ``cpu``, ``cuda``, ``cuda:N``), ``dtype``.
    Inputs: ``input_format`` (log reader, ``auto`` = detect), ``max_requests`` (the first
    N replayable requests). Prompts: ``template`` (``model`` = the model's own chat
    template, else any ``--template`` spec), ``max_prompt_tokens`` (tokens; truncated from
    the end, prefix kept). ``config``: passes, cache and verification settings (its
    ``capacity_blocks`` is ignored: ``capacity`` is resolved into it, see
    :func:`capacity_blocks`). ``out``: the per-request JSONL; ``resume`` continues it.
    Raises ConfigError for counts below 1, a capacity of 0, or ``resume`` without ``out``.
    """

    model: str | None = None
    device: str = "auto"
    dtype: str = "float32"
    input_format: str = "auto"
    template: str = "model"
    max_requests: int | None = None
    max_prompt_tokens: int | None = None
    capacity: Capacity | None = None
    config: ReplayConfig = field(default_factory=ReplayConfig)
    out: Path | None = None
    resume: bool = False

    def __post_init__(self) -> None:
        at_least_one(("--max-requests", self.max_requests), ("--max-prompt-tokens", self.max_prompt_tokens))
        if self.resume and self.out is None:
            raise ConfigError("--resume needs --out (the results file to continue)")
        cap = self.capacity
        if cap is not None and (cap.value <= 0 or (cap.unit in ("blocks", "tokens")
                                                   and cap.blocks(self.config.block_size, 0) < 1)):
            raise ConfigError(f"--capacity {cap.text}: less than one block of {self.config.block_size} tokens")


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


@dataclass(frozen=True, slots=True)
class ReplayOutcome:
    """A finished (or interrupted) run: the ``report`` (the ``--json`` document), every
    result of this run and the resumed file (``results``), ``notes`` on how prompts were
    rendered and on the engine (one line each), the input ``files`` read, the ``skipped``
    input records, and the results file ``out`` (None when not written)."""

    report: ReplayReport
    results: tuple[RequestResult, ...]
    notes: tuple[str, ...]
    files: int
    skipped: tuple[Skipped, ...]
    out: Path | None

    @property
    def disagreements(self) -> tuple[RequestResult, ...]:
        """Results that fail verification, or whose cached tokens differ from the simulator's."""
        return tuple(r for r in self.results if r.mismatch or
                     (r.predicted_cached is not None and r.predicted_cached != r.cached_tokens))


class ReplaySession:
    """A run ready to go (see :func:`open_replay`): ``total`` requests to run."""

    def __init__(self, options: ReplayOptions, engine: Engine, replay: Replay, ingest: Ingest,
                 notes: tuple[str, ...], done: bool, too_long: tuple[Skipped, ...] = ()) -> None:
        self.options, self.engine, self.replay, self.ingest = options, engine, replay, ingest
        self._notes, self._append = notes, done
        self.skipped = ingest.summary.skipped + too_long  # unreadable records, then prompts past the context
        self.total = replay.total()

    def run(self, on_request: Callable[[str], None] | None = None) -> ReplayOutcome:
        """Warm the engine up, run every pass (``on_request(pass name)`` after each request),
        streaming results to ``options.out``. Ctrl-C stops the run: the outcome covers the
        requests that finished and says it was interrupted."""
        writer = ResultWriter(self.options.out, append=self._append)  # appending: a torn last line is cut first
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
    for a model that is missing or cannot be loaded)."""
    from prefixcache.replay.local.hf import HFEngine, load_model

    return HFEngine(load_model(options.model, device=options.device, dtype=options.dtype))


def _requests(ingest: Ingest, max_requests: int | None) -> list[Request]:
    """The requests with prompt text (the first ``max_requests``); ConfigError when there are
    none: block-hash traces and usage-only logs (prompts not logged) carry no prompt."""
    reqs = [r for r in ingest if r.trace is None and not usage_only(r)]
    if not reqs:
        skipped = ingest.summary.skipped
        first = (f"; {len(skipped)} record(s) skipped, first {skipped[0].source}:{skipped[0].record}: "
                 f"{skipped[0].reason}" if skipped else "")
        raise ConfigError("no replayable requests: replay needs logs with prompt text (block-hash traces and "
                          f"usage-only logs, whose prompts were not logged, carry none){first}")
    return reqs[:max_requests] if max_requests else reqs


def _prompts(requests: list[Request], options: ReplayOptions, engine: Engine
             ) -> tuple[dict[str, list[Prompt]], str, list[Skipped]]:
    """Original (and, for the canonical pass, canonicalized) prompts in the engine's token
    ids, a note on how they were rendered and tokenized, and the requests skipped because
    their prompt exceeds the engine's context (ConfigError when none is left)."""
    spec = "tokenizer" if options.template == "model" else options.template
    limit = ContextLimit(engine.max_context, options.config.max_new_tokens, bool(options.max_prompt_tokens))
    preparer = Preparer(template=spec, tokenizer=engine.tokenizer)
    prompts, _, skipped = fit_passes(requests, lambda: Preparer(template=spec, tokenizer=engine.tokenizer), limit,
                                  options.max_prompt_tokens, "canonical" in options.config.passes, preparer)
    how = "the model's own chat template" if options.template == "model" else f"template {options.template}"
    pipes = [preparer.pipeline(m) for m in preparer.notes]
    exact = all(p.renderer.exact and p.tokenizer.exact for p in pipes)
    note = (f"prompts rendered with {how} and tokenized with {engine.name}'s tokenizer "
            f"(token counts {'exact' if exact else 'approximate'})")
    return prompts, note, skipped


def open_replay(paths: Sequence[str], options: ReplayOptions, *, engine: Engine | None = None,
                stdin: IO[bytes] | None = None) -> ReplaySession:
    """Read ``paths`` (``-`` = ``stdin``), load the engine (``engine``, else
    :func:`load_engine`), prepare the prompts, resolve the capacity and check a resumed
    ``options.out``; nothing runs yet. Raises ConfigError / InputError / EngineError."""
    ingest = Ingest(list(paths), format=options.input_format,
                    stdin=stdin if stdin is not None else (sys.stdin.buffer if "-" in paths else None))
    requests = _requests(ingest, options.max_requests)
    out = options.out
    done = load_results(out) if options.resume and out is not None and out.exists() else []
    engine = engine if engine is not None else load_engine(options)
    prompts, note, too_long = _prompts(requests, options, engine)
    base = options.config
    config = replace(base, capacity_blocks=capacity_blocks(options.capacity, base.block_size,
                                                           engine.kv_bytes_per_token, prompts["original"]))
    run = run_key(model=engine.model_id, dtype=engine.dtype, device=engine.device_kind, block_size=config.block_size,
                  capacity=config.capacity_blocks, policy=config.policy,
                  template="tokenizer" if options.template == "model" else options.template,
                  tokenizer=engine.model_id, max_prompt_tokens=options.max_prompt_tokens,
                  max_new_tokens=config.max_new_tokens)
    replay = Replay(engine, config, prompts, done, run=run, results_file=str(out) if out is not None else "")
    return ReplaySession(options, engine, replay, ingest, (note,), bool(done), tuple(too_long))
