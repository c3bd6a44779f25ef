"""The predicted cached tokens of each request sent to a server, from our model of that engine.

The prediction is made live, in the order requests are sent, so it follows whatever load
shape the run uses:

* vLLM (and SGLang, generic servers): a :class:`~prefixcache.analyzer.cache.index.block_hash.BlockHashCache`
  with the engine's block size and capacity (vLLM: ``num_gpu_blocks − 1``; one block is the
  null block). A request's blocks are looked up and pinned when it is sent — vLLM's
  scheduler registers a request's full blocks in the prefix table when it allocates them,
  so a request scheduled after it shares them even before they are computed — and
  released (tail first) when its response is back. The tokens whose KV the engine
  computed are the prompt plus all output tokens but the last (the last one is sampled,
  never fed back), so those full blocks are cached too (vLLM hashes output blocks as they
  fill: ``Request.append_output_token_ids``).
* llama.cpp: the analyzer's :class:`~prefixcache.analyzer.cache.models.llamacpp.LlamaCppModel`
  (token-granular reuse of the longest common prefix with a slot's last prompt and output,
  at most n−1 tokens; the idle slot of the highest similarity above 0.10
  (``--slot-prompt-similarity``), else the least recently used one), with the server's
  slot count and the prompt cache off.
"""

from __future__ import annotations

from typing import Sequence

from prefixcache.analyzer.cache.index.block_hash import BlockHashCache
from prefixcache.analyzer.cache.models import MODELS, CacheSpec, LlamaCppModel


class BlockPredictor:
    """vLLM-style block cache prediction (``block_size`` tokens, ``capacity_blocks`` or None)."""

    def __init__(self, block_size: int, capacity_blocks: int | None, policy: str = "lru") -> None:
        self.index = BlockHashCache(block_size, capacity_blocks, policy)
        self.evicted = 0
        self._clock = 0.0

    def _now(self) -> float:
        self._clock += 1.0
        return self._clock

    def send(self, ids: Sequence[int]) -> tuple[int, object]:
        """Predicted cached tokens of a request sent now, and a handle for :meth:`done`."""
        now = self._now()
        hit = self.index.match(tuple(ids), now).cached_tokens
        hashes = self.index.hashes(tuple(ids))
        _, evicted = self.index.acquire(hashes, now)
        self.evicted += len(evicted)
        return hit, hashes

    def done(self, handle: object, ids: Sequence[int], output_ids: Sequence[int]) -> None:
        """The request's response is back: its computed tokens' full blocks are released."""
        now = self._now()
        hashes = list(handle)  # type: ignore[call-overload]
        if len(output_ids) > 1:
            full = self.index.hashes(tuple(ids) + tuple(output_ids[:-1]))
            extra = full[len(hashes):]
            if extra:
                _, ev = self.index.acquire(extra, now)
                self.evicted += len(ev)
                hashes += extra
        self.evicted += len(self.index.release(hashes, now))


class LlamaCppPredictor:
    """llama.cpp slot reuse, predicted by the analyzer's :class:`~prefixcache.analyzer.cache.models.llamacpp.LlamaCppModel`
    (the one implementation of ``get_available_slot`` and the n−1 cap) over ``slots`` slots.

    ``cache_ram_mib``: the server's host-RAM prompt cache (``--cache-ram``; 0 = off). The
    server does not publish it (``/props`` has ``total_slots``, not ``--cache-ram``), and a
    server replay needs ``--cache-ram 0`` for its cold pass (:data:`~.client.RESETS`), so
    the default is off. A slot is busy from :meth:`send` to :meth:`done` and then keeps
    the prompt plus the output the server returned."""

    def __init__(self, slots: int, cache_ram_mib: float = 0.0) -> None:
        spec = CacheSpec(LlamaCppModel.name, engine_options={"slots": max(1, slots), "cache_ram_mib": cache_ram_mib})
        self.model = LlamaCppModel(spec, 1, None)
        self.evicted = 0
        self._clock = 0.0

    def send(self, ids: Sequence[int]) -> tuple[int, object]:
        """Predicted cached tokens of a request sent now, and its slot (the handle for :meth:`done`)."""
        self._clock += 1.0
        if not ids:
            return 0, None
        slot, cached = self.model.acquire(ids, self._clock)
        return cached, slot

    def done(self, handle: object, ids: Sequence[int], output_ids: Sequence[int]) -> None:
        """The request's response is back: its slot keeps the prompt and the output."""
        if handle is not None:
            self.model.release(int(handle), tuple(ids) + tuple(output_ids))  # type: ignore[call-overload]


def make_predictor(kind: str, block_size: int, capacity_blocks: int | None, slots: int | None,
                   policy: str = "lru") -> BlockPredictor | LlamaCppPredictor:
    """The predictor for an engine ``kind`` (:data:`~.detect.KINDS`; see the module docstring):
    the slot model for a kind whose cache model runs slots (:attr:`~prefixcache.analyzer.cache.models.Traits.slots`),
    else the block cache."""
    model = MODELS.get(kind)
    if model is not None and model.traits.slots:
        return LlamaCppPredictor(slots or 1)
    return BlockPredictor(block_size, capacity_blocks, policy)
