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
* llama.cpp: token-granular reuse of the longest common prefix with a slot's last prompt
  and output, at most n−1 tokens; the slot chosen is the idle slot of the highest
  similarity above 0.10 (``--slot-prompt-similarity``), else the least recently used one.
"""

from __future__ import annotations

from typing import Sequence

from prefixcache.analyzer.cache.index.block_hash import BlockHashCache
from prefixcache.analyzer.sequence import common_prefix_len


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


class SlotPredictor:
    """llama.cpp slot reuse over ``slots`` slots (token-granular, LCP with the slot's last sequence)."""

    SIMILARITY = 0.10

    def __init__(self, slots: int) -> None:
        self.slots: list[tuple[int, ...]] = [() for _ in range(max(1, slots))]
        self.used = [0.0] * len(self.slots)
        self.busy = [False] * len(self.slots)
        self.evicted = 0
        self._clock = 0.0

    def send(self, ids: Sequence[int]) -> tuple[int, object]:
        self._clock += 1.0
        ids = tuple(ids)
        idle = [i for i, b in enumerate(self.busy) if not b] or list(range(len(self.slots)))
        sims = {i: common_prefix_len(self.slots[i], ids) for i in idle}
        best = max(idle, key=lambda i: (sims[i], -i))
        if not self.slots[best] or sims[best] / max(1, len(ids)) <= self.SIMILARITY:
            best = min(idle, key=lambda i: (self.used[i], i))
        self.busy[best], self.used[best] = True, self._clock
        return min(sims.get(best, 0), max(0, len(ids) - 1)), best

    def done(self, handle: object, ids: Sequence[int], output_ids: Sequence[int]) -> None:
        slot = int(handle)  # type: ignore[call-overload]
        self.slots[slot] = tuple(ids) + tuple(output_ids)
        self.busy[slot] = False


def make_predictor(kind: str, block_size: int, capacity_blocks: int | None, slots: int | None,
                   policy: str = "lru") -> BlockPredictor | SlotPredictor:
    """The predictor for an engine ``kind`` (see the module docstring)."""
    if kind == "llamacpp":
        return SlotPredictor(slots or 1)
    return BlockPredictor(block_size, capacity_blocks, policy)
