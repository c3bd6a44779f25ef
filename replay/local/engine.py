"""The replay engine protocol: everything the runner (:mod:`prefixcache.replay.local.passes`) and the
run (:mod:`prefixcache.replay.local.session`) need from a model that replays prompts given as token ids.

An engine runs one request at a time. It may be handed a KV store
(:class:`KVStore`, built by the engine itself from the analyzer's cache index with
:meth:`Engine.kv_store`) that decides, through that index, which leading tokens are
served from cache; the engine then computes only the rest (the prefill suffix). What
the store keeps is the engine's business: the in-process HF engine keeps one torch
tensor per block (:class:`prefixcache.replay.local.kv.KVPrefixCache`); a server engine keeps
nothing (the server holds the KV) and reports the index's figures. Every timing is a raw
``time.perf_counter`` reading in seconds (:class:`prefixcache.analyzer.replay_rows.RequestTiming`),
so results and summaries derive TTFT and percentiles from one source.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol, Sequence

import numpy as np

from prefixcache.analyzer.cache.index.block_hash import BlockHashCache
from prefixcache.analyzer.replay_rows import RequestTiming


@dataclass(frozen=True, slots=True)
class Generation(RequestTiming):
    """What one request did in the engine.

    Token counts are tokens; the raw ``perf_counter`` timestamps (seconds) and the
    TTFT / prefill / lookup times derived from them come from
    :class:`prefixcache.analyzer.replay_rows.RequestTiming`.

    ``first_logits`` is the next-token logit vector after the prompt, float32, shape
    ``(vocab,)``; ``output_ids`` the greedy tokens (``max_new_tokens`` of them);
    ``kv_bytes`` the KV bytes the store holds after this request (0 without one);
    ``ttft_samples`` the TTFT of each repeated prefill (seconds; the timestamps are the
    median run's, and ``t_end`` is its first token plus the decode time).
    """

    prompt_tokens: int
    cached_tokens: int
    computed_tokens: int
    output_ids: tuple[int, ...]
    first_logits: np.ndarray
    kv_bytes: int = 0
    ttft_samples: tuple[float, ...] = ()


class KVStore(Protocol):
    """An engine's storage for the blocks the analyzer's cache index holds.

    ``index`` is the :class:`~prefixcache.analyzer.cache.index.block_hash.BlockHashCache` it was
    built on: it alone decides hits and evictions, so the engine's cached tokens are the
    simulator's. ``kv_bytes`` is the KV the store holds now (bytes; 0 for a store that
    keeps none itself). Only the engine that made the store reads or writes it.
    """

    index: BlockHashCache
    kv_bytes: int


class Engine(Protocol):
    """A model that replays prompts given as token ids.

    Members (units):

    * ``name`` — the model's display name;
    * ``max_context`` — context length, tokens;
    * ``kv_bytes_per_token`` — KV cache size of one token over all layers, bytes
      (turns a byte capacity into blocks);
    * ``dtype`` — the weights' and KV's element type, e.g. ``"float32"``, ``"bfloat16"``
      (picks the verification tolerance);
    * ``device`` — where it runs, as the engine names it (``"cpu"``, ``"cuda:1"``);
      ``device_kind`` its kind (``"cpu"``, ``"cuda"``; part of the run key);
    * ``tokenizer`` — the tokenizer spec the analyzer tokenizes prompts with (a folder,
      an HF id: prompts must be the engine's own token ids);
    * ``model_id`` — what identifies the weights and tokenizer wherever they are stored (a
      converted GGUF's folder name carries the file's content digest): the run key's model,
      so ``--resume`` accepts the same run from another cache folder or home directory;
    * ``kv_store(index)`` — a fresh, empty KV store over ``index`` (one per cache pass);
    * ``generate(...)`` — run one request (below);
    * ``notes()`` — lines worth telling the user after a run (e.g. a dequantized GGUF,
      peak accelerator memory), possibly none.

    ``generate`` raises :class:`prefixcache.analyzer.errors.EngineError` for an empty
    prompt, a prompt longer than the context, or an out-of-memory failure.
    """

    name: str
    max_context: int
    kv_bytes_per_token: int
    dtype: str
    device: str
    device_kind: str
    tokenizer: str
    model_id: str

    def kv_store(self, index: BlockHashCache) -> KVStore:
        """An empty KV store driven by ``index`` (block size = ``index.block_size``)."""
        ...

    def generate(
        self,
        ids: Sequence[int],
        *,
        max_new_tokens: int = 1,
        cache: KVStore | None = None,
        now: float = 0.0,
        repeat: int = 1,
    ) -> Generation:
        """Prefill ``ids`` (reusing ``cache``'s matched blocks and storing the prompt's full
        blocks into it afterwards), decode ``max_new_tokens`` greedy tokens, time it.
        ``now`` is the logical clock (seconds) of the index; ``repeat`` > 1 times the
        lookup → prefill → first token that many times on the same cache state and keeps
        the median run's timestamps."""
        ...

    def notes(self) -> tuple[str, ...]:
        """What the user should know about this engine's figures (one line each)."""
        ...
