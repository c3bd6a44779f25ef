"""llama.cpp server's prompt reuse: slots, slot choice, and the host-RAM prompt cache.

Rules (llama.cpp ``tools/server``: ``get_available_slot``, ``server_prompt_cache``
``alloc`` / ``load`` / ``update``; facts measured in ``real-engines.md``):

* The server has ``slots`` (``-np``) slots; each keeps the tokens of its last request,
  prompt **and output**. A request reuses the longest common prefix (LCP) of its prompt
  with the chosen slot's tokens, capped at n − 1 (the last prompt token is always
  evaluated; a repeated 686-token prompt reads 685), at token granularity.
* Slot choice: among idle slots holding tokens, the one with the highest similarity
  ``LCP / prompt length`` above ``slot_similarity`` (``-sps``, default 0.10; the first
  slot wins a tie; ``-sps 0`` skips this search); else the least recently used idle
  slot (the last one among equals). Reusing a slot by similarity when it keeps under
  half its tokens (``f_keep = LCP / slot tokens < 0.5``), or any LRU choice, goes
  through the prompt cache — unless the chosen slot holds no tokens (nothing to save,
  nothing loaded: ``update_cache && tokens.size() > 0``).
* The prompt cache (``--cache-ram`` MiB, default 8,192; 0 disables it) is shared by all
  slots: the slot's old tokens are saved (skipped when an entry already holds them all;
  entries they contain are dropped), then the entry that keeps more of itself and
  matches more of the prompt than the slot (``f_keep`` ≥ 0.25, both strictly larger) is
  loaded into the slot and leaves the cache; then the oldest entries are dropped while
  the cache is over its size (at least one is always kept). Sizes are tokens × KV bytes
  per token, so ``--cache-ram`` needs a KV shape (``--kv-model`` / ``--model-config``);
  without one :data:`DEFAULT_BYTES_PER_TOKEN` (Llama-3-8B, bf16) is assumed.

Outputs: logs carry no generated token ids, so a slot's output is taken from the log
itself: when a slot last served the previous request of the same session and the new
prompt extends that prompt, the LCP runs on to the end of the assistant reply the new
prompt renders right after it (``SimRequest.reply_ends``) — the measured "extension
689 of 706". Sequential requests (one at a time), no context shift, no ``n_cache_reuse``
chunk reuse (off by default).

Two ways to drive it: :meth:`LlamaCppModel.step` (the simulator: one request at a time,
outputs from the log as above) and :meth:`LlamaCppModel.acquire` /
:meth:`LlamaCppModel.release` (a live server replay: a slot is busy from send to
response, and keeps the prompt plus the output the server returned).
"""

from __future__ import annotations

from bisect import bisect_right
from dataclasses import dataclass, field
from typing import ClassVar, Sequence

from prefixcache.analyzer.cache.base import servable_tokens
from prefixcache.analyzer.cache.models.base import CacheModel, CacheSpec, Hit, Traits, register
from prefixcache.analyzer.cache.workload import SimRequest
from prefixcache.analyzer.errors import ConfigError
from prefixcache.analyzer.sequence import common_prefix_len

#: ``-sps`` / ``--slot-prompt-similarity`` default.
SLOT_SIMILARITY = 0.10
#: ``--cache-ram`` default (MiB).
CACHE_RAM_MIB = 8192.0
#: KV bytes per token assumed for ``--cache-ram`` without a KV shape: Llama-3-8B in bf16.
DEFAULT_BYTES_PER_TOKEN = 131072
#: Slots kept under this fraction of their tokens go through the prompt cache.
F_KEEP_SAVE = 0.5
#: Prompt-cache entries keeping under this fraction of themselves are never loaded.
F_KEEP_LOAD = 0.25


@dataclass(slots=True)
class Slot:
    """One server slot: its tokens (prompt + output), last use, the request's session it
    served, and whether a request is running on it (``busy``: not available for choice)."""

    tokens: tuple[int, ...] = ()
    last: float = -1.0
    session: str | None = None
    busy: bool = False


@dataclass(slots=True)
class PromptCache:
    """The host-RAM prompt cache: token sequences, oldest first; ``limit_tokens`` None = unbounded."""

    limit_tokens: int | None
    entries: list[tuple[int, ...]] = field(default_factory=list)
    sessions: list[str | None] = field(default_factory=list)

    def save(self, tokens: tuple[int, ...], session: str | None = None) -> None:
        """``alloc``: store a slot's tokens unless an entry already holds them; drop entries they contain."""
        if not tokens or any(common_prefix_len(e, tokens) == len(tokens) for e in self.entries):
            return
        keep = [i for i, e in enumerate(self.entries) if common_prefix_len(e, tokens) < len(e)]
        self.entries = [self.entries[i] for i in keep] + [tokens]
        self.sessions = [self.sessions[i] for i in keep] + [session]

    def load(self, slot: tuple[int, ...], prompt: Sequence[int]) -> tuple[tuple[int, ...], str | None] | None:
        """``load``: the entry better than the slot for ``prompt`` and its session (removed), or None."""
        lcp = common_prefix_len(slot, prompt)
        keep_best = lcp / len(slot) if slot else -1.0
        sim_best = lcp / len(prompt)
        best = None
        for i, e in enumerate(self.entries):
            cur = common_prefix_len(e, prompt)
            keep, sim = cur / len(e), cur / len(prompt)
            if keep >= F_KEEP_LOAD and keep_best < keep and sim_best < sim:
                keep_best, sim_best, best = keep, sim, i
        return None if best is None else (self.entries.pop(best), self.sessions.pop(best))

    def update(self) -> None:
        """Drop the oldest entries while over the limit, keeping at least one."""
        if self.limit_tokens is None:
            return
        while len(self.entries) > 1 and sum(map(len, self.entries)) > self.limit_tokens:
            del self.entries[0], self.sessions[0]


@register
class LlamaCppModel(CacheModel):
    """llama.cpp server (module docstring). ``capacity_blocks`` (block size 1 = tokens) is
    the prompt cache's size and overrides ``--cache-ram``; ``expire=False`` (the ideal
    level) gives an unbounded prompt cache. Options from ``spec.engine_options``:
    ``slots``, ``slot_similarity``, ``cache_ram_mib``, ``kv_bytes_per_token``."""

    name = "llamacpp"
    traits = Traits(unit="slots", cap_last_token=True, expiry="none", slots=True)
    default_block_size = 1
    policies: ClassVar[tuple[str, ...]] = ("lru",)

    def __init__(self, spec: CacheSpec, block_size: int, capacity_blocks: int | None, expire: bool = True) -> None:
        super().__init__(spec, block_size, capacity_blocks, expire)
        opts = dict(spec.engine_options or {})
        n = int(opts.get("slots", 1))
        if n < 1:
            raise ConfigError(f"--slots must be at least 1, got {n}")
        self.similarity = float(opts.get("slot_similarity", SLOT_SIMILARITY))
        self.slots = [Slot() for _ in range(n)]
        ram = float(opts.get("cache_ram_mib", CACHE_RAM_MIB))
        bpt = int(opts.get("kv_bytes_per_token") or DEFAULT_BYTES_PER_TOKEN)
        if not expire:
            limit: int | None = None
        elif capacity_blocks is not None:
            limit = capacity_blocks * block_size
        else:
            limit = None if ram < 0 else int(ram * 2**20 // bpt)
        self.prompt_cache = PromptCache(limit) if limit != 0 else None

    @classmethod
    def fixed_block_size(cls, spec: CacheSpec) -> int | None:
        return 1

    def _lcp(self, slot: Slot, tokens: tuple[int, ...], session: str | None, reply_ends: Sequence[int]) -> int:
        """LCP with the slot's prompt + output (the reply the prompt renders, see the module docstring)."""
        k = common_prefix_len(slot.tokens, tokens)
        if k and k == len(slot.tokens) and slot.session == session:
            i = bisect_right(reply_ends, k)
            if i < len(reply_ends):
                k = reply_ends[i]
        return k

    def _choose(self, tokens: tuple[int, ...], session: str | None, reply_ends: Sequence[int]) -> tuple[int, bool]:
        """``get_available_slot``: (slot index, whether the prompt cache is consulted).
        Only idle slots are chosen; when every slot is busy (a live replay sending more
        requests than slots: the server queues the request until one is free, which one
        is not known at send time) all slots are candidates."""
        idle = [i for i, s in enumerate(self.slots) if not s.busy] or list(range(len(self.slots)))
        best, sim_best = None, -1.0
        if self.similarity != 0:
            for i in idle:
                s = self.slots[i]
                if s.tokens:
                    sim = self._lcp(s, tokens, session, reply_ends) / len(tokens)
                    if sim > sim_best and sim > self.similarity:
                        best, sim_best = i, sim
        if best is not None:
            return best, sim_best * len(tokens) / len(self.slots[best].tokens) < F_KEEP_SAVE
        lru = idle[0]
        for i in idle:
            if self.slots[i].last <= self.slots[lru].last:
                lru = i
        return lru, True

    def acquire(self, tokens: Sequence[int], now: float, session: str | None = None,
                reply_ends: Sequence[int] = ()) -> tuple[int, int]:
        """A request with prompt ``tokens`` starts at ``now`` (seconds, logical clock): choose
        its slot, go through the prompt cache when the rules say so, and occupy the slot.
        Returns (slot index, cached tokens ≤ n−1, :func:`~.base.servable_tokens` at block 1).
        ``session`` / ``reply_ends``: the log's session and the reply ends its prompt renders
        (:attr:`SimRequest.reply_ends`; empty when the slot's real output is known, as on a
        live server). Release the slot with :meth:`release`. ConfigError for an empty prompt."""
        tokens = tuple(tokens)
        if not tokens:
            raise ConfigError("llama.cpp: an empty prompt has no slot to choose")
        i, consult = self._choose(tokens, session, reply_ends)
        slot = self.slots[i]
        if consult and self.prompt_cache is not None and slot.tokens:
            self.prompt_cache.save(slot.tokens, slot.session)
            loaded = self.prompt_cache.load(slot.tokens, tokens)
            if loaded is not None:
                slot.tokens, slot.session = loaded
            self.prompt_cache.update()
        cached = servable_tokens(self._lcp(slot, tokens, session, reply_ends), len(tokens), 1)
        slot.last, slot.busy = now, True
        slot.session = session
        return i, cached

    def release(self, slot: int, tokens: Sequence[int]) -> None:
        """The request on slot index ``slot`` finished: the slot keeps ``tokens`` (its prompt
        and the output the engine computed) and is idle again."""
        s = self.slots[slot]
        s.tokens, s.busy = tuple(tokens), False

    def step(self, r: SimRequest) -> Hit:
        tokens = self._tokens(r)
        if not tokens:
            return Hit(0)
        i, cached = self.acquire(tokens, r.now, r.session, r.reply_ends)
        self.release(i, tokens)
        return Hit(cached)
