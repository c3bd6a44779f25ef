"""The replay summary (``replay --json``) as a library type, and what it is built from.

:class:`ReplayReport` is the document: its fields are the JSON keys in output order
and ``orjson.dumps(report)`` is the document byte for byte. :func:`build_report`
computes it from the prompts a run replayed and the results it produced.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import PurePath
from typing import Sequence

from prefixcache.analyzer.render import fold_warnings
from prefixcache.replay.local.engine import Engine
from prefixcache.replay.local.results import PassSummary, RequestResult, summarize
from prefixcache.replay.local.passes import Prompt, ReplayConfig


@dataclass(frozen=True, slots=True)
class ReplayReport:
    """The summary of one replay run (``prefixcache replay --json``).

    ``model`` / ``device`` / ``dtype``: the engine's display name, device (as the engine
    names it, e.g. ``cpu``, ``cuda:0``) and element type. ``block_size`` (tokens),
    ``policy``, ``capacity_blocks`` (blocks; None = unbounded): the cache index of the
    cache passes. ``requests``: original prompts replayed; ``run``: the settings digest
    every JSONL row carries; ``template``: the ``--template`` given (``model`` = the
    model's own); ``repeat``: prefills timed per request. ``max_prompt_tokens`` (tokens;
    None = no bound) and the counts of prompts it truncated (original, canonical);
    ``dropped_hidden_prefixes``: prompts replayed without a hidden (opaque) prefix the
    log does not contain; ``skipped_records``: input records not turned into requests;
    ``warnings``: the renderer's warnings, one per kind (its latest instance; lint rule
    PC503). ``passes``: one :class:`PassSummary` per pass that ran; ``interrupted``: the
    run was stopped (Ctrl-C) and the passes cover the requests that finished.
    """

    model: str
    device: str
    dtype: str
    block_size: int
    policy: str
    requests: int
    run: str
    template: str
    repeat: int
    capacity_blocks: int | None
    max_prompt_tokens: int | None
    truncated_prompts: int
    truncated_canonical_prompts: int
    dropped_hidden_prefixes: int
    skipped_records: int
    warnings: tuple[str, ...]
    passes: tuple[PassSummary, ...]
    interrupted: bool


def build_report(engine: Engine, config: ReplayConfig, prompts: dict[str, list[Prompt]],
                 results: Sequence[RequestResult], *, run: str, template: str,
                 max_prompt_tokens: int | None, skipped_records: int, interrupted: bool) -> ReplayReport:
    """The summary of a run that replayed ``prompts`` (``original`` and, when the canonical
    pass ran, ``canonical``) with ``config`` (its ``capacity_blocks`` already resolved)
    and produced ``results`` on ``engine``. Warnings name the model's own chat template the
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
        passes=tuple(summarize(results, config.passes)), interrupted=interrupted,
    )
