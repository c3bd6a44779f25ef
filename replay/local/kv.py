"""Real KV storage for the blocks of the analyzer's cache index.

The index (:class:`prefixcache.analyzer.cache.index.block_hash.BlockHashCache`, the same
object ``simulate`` uses) decides what is cached, what a prompt hits and what is
evicted; this module only keeps the KV tensors of the blocks the index holds, so
the engine's cached tokens are the simulator's by construction.

One block's KV is a tensor of shape ``(layers, 2, 1, kv_heads, block_size, head_dim)``
(keys then values, on the engine's device and dtype). A hit hands views of the
matched blocks to the model as a transformers ``DynamicCache`` whose layers join
them with the suffix's KV in the forward pass's own update (one copy, the one any
``DynamicCache`` makes); evicted blocks are dropped, which frees their memory.
Models with sliding-window layers are refused (their caches keep only a window).
"""

from __future__ import annotations

from typing import Any, Sequence

import torch
from transformers import DynamicCache
from transformers.cache_utils import DynamicLayer

from prefixcache.analyzer.cache.base import BlockHash, hit_cap_tokens
from prefixcache.analyzer.cache.index.block_hash import BlockHashCache
from prefixcache.analyzer.errors import ConfigError, EngineError


class KVPrefixCache:
    """A KV prefix cache: the analyzer's block index plus one KV tensor per indexed block
    (the HF engine's :class:`prefixcache.replay.local.engine.KVStore`).

    ``index`` is the block cache that decides hits and evictions (``match`` returns one
    hash per matched block); ``model_config`` is the transformers config used to
    build ``DynamicCache`` objects of the right layer types.
    """

    def __init__(self, index: BlockHashCache, model_config: Any) -> None:
        if index.block_size < 1:
            raise ConfigError(f"block size must be ≥ 1 token, got {index.block_size}")
        if any(DynamicCache(config=model_config).is_sliding):
            raise EngineError("models with sliding-window attention layers are not supported by the replay KV store "
                              "(their caches keep only the last window, so blocks cannot be cut from them)")
        self.index = index
        self.block_size = index.block_size
        self.model_config = model_config
        self.blocks: dict[BlockHash, torch.Tensor] = {}
        self._views: dict[BlockHash, list[tuple[torch.Tensor, torch.Tensor]]] = {}
        self.kv_bytes = 0
        self.evicted_blocks = 0
        #: Force (True/False) the accelerator-style block extraction; None = by device.
        self.vectorized: bool | None = None

    def lookup(self, ids: Sequence[int], now: float) -> tuple[int, Any]:
        """Cached prefix of ``ids``: ``(cached_tokens, DynamicCache | None)``.

        ``cached_tokens`` is the index's match, which the index already caps like vLLM
        (⌊(n−1)/B⌋·B, so at least the last token is computed); the cache object holds
        exactly that many tokens' KV. Raises EngineError if the index matches more than
        that cap, a partial block, or a block whose KV is missing.
        """
        match = self.index.match(ids, now)
        cached = match.cached_tokens
        if cached > hit_cap_tokens(len(ids), self.block_size) or cached % self.block_size:
            raise EngineError(f"the cache index matched {cached} tokens of a {len(ids)}-token prompt: more than "
                              f"the whole {self.block_size}-token blocks before its last token")
        nblocks = cached // self.block_size
        if nblocks == 0:
            return 0, None
        if len(match.block_hashes) < nblocks:
            raise EngineError("the cache index matched blocks without naming their hashes")
        try:
            views = [self._views[h] for h in match.block_hashes[:nblocks]]
        except KeyError as exc:
            raise EngineError(f"KV store out of sync with the cache index: block {exc.args[0]:#x} has no KV") from exc
        return nblocks * self.block_size, self._as_cache(views, nblocks * self.block_size)

    def _as_cache(self, views: list[list[tuple[torch.Tensor, torch.Tensor]]], length: int) -> Any:
        """A ``DynamicCache`` over the matched blocks without copying them: each layer is
        a :class:`_BlockPrefixLayer` that concatenates its blocks with the suffix's KV in
        the forward pass's own update (the one copy any ``DynamicCache`` makes anyway)."""
        cache = DynamicCache(config=self.model_config)
        cache.layers = [_BlockPrefixLayer([v[i][0] for v in views], [v[i][1] for v in views], length)
                        for i in range(len(views[0]))]
        return cache

    def store(self, ids: Sequence[int], kv: Any, now: float) -> None:
        """Record the request in the index and keep KV for its newly inserted blocks.

        ``kv`` is the request's ``DynamicCache`` after prefill (it may hold decoded
        tokens past the prompt; only prompt positions are read). Blocks the index
        evicts lose their KV here. The prompt's last, partial block is never cached but
        takes a cached block's room while the request runs, as in vLLM's block pool (what
        ``simulate --cache vllm`` models: :func:`prefixcache.analyzer.cache.models.pool_blocks`).
        """
        result = self.index.insert(ids, now)
        if result.inserted:
            position = {h: i for i, h in enumerate(self._hashes(ids))}
            missing = [h for h in result.inserted if h not in position]
            if missing:
                raise EngineError("the cache index inserted blocks that are not this prompt's block hashes")
            self._keep(kv, sorted((position[h], h) for h in result.inserted))
        for h in result.evicted:
            block = self.blocks.pop(h, None)
            self._views.pop(h, None)
            if block is not None:
                self.kv_bytes -= block.nbytes
                self.evicted_blocks += 1

    def _hashes(self, ids: Sequence[int]) -> list[BlockHash]:
        """The index's own block hashes of ``ids`` (its namespace / extra keys included)."""
        return self.index.hashes(ids)

    def _keep(self, kv: Any, blocks: list[tuple[int, BlockHash]]) -> None:
        """Copy the inserted blocks ``(block index, hash)``, sorted, out of the request's cache.

        Each block gets its own tensor, so evicting it frees exactly its memory. On CPU one
        small copy per layer and block is fastest (stacking a whole span first is ~20×
        slower there); on an accelerator, where each copy is a kernel launch, the span is
        gathered in one stack and split.
        """
        first = kv.layers[0].keys
        split = self.vectorized if self.vectorized is not None else first.device.type != "cpu"
        made = self._split_span(kv, blocks) if split else self._copy_blocks(kv, blocks)
        for (_, h), block in zip(blocks, made):
            self._views[h] = [(block[n, 0], block[n, 1]) for n in range(block.shape[0])]
            old = self.blocks.get(h)
            if old is not None:
                self.kv_bytes -= old.nbytes
            self.blocks[h] = block
            self.kv_bytes += block.nbytes

    def _copy_blocks(self, kv: Any, blocks: list[tuple[int, BlockHash]]) -> list[torch.Tensor]:
        b, k0 = self.block_size, kv.layers[0].keys
        out = []
        for i, _ in blocks:
            block = k0.new_empty((len(kv.layers), 2, k0.shape[0], k0.shape[1], b, k0.shape[3]))
            for n, layer in enumerate(kv.layers):
                block[n, 0].copy_(layer.keys[:, :, i * b:(i + 1) * b])
                block[n, 1].copy_(layer.values[:, :, i * b:(i + 1) * b])
            out.append(block)
        return out

    def _split_span(self, kv: Any, blocks: list[tuple[int, BlockHash]]) -> list[torch.Tensor]:
        b = self.block_size
        lo, hi = blocks[0][0] * b, (blocks[-1][0] + 1) * b
        span = torch.stack([torch.stack((layer.keys[:, :, lo:hi], layer.values[:, :, lo:hi])) for layer in kv.layers])
        return [span[..., i * b - lo:(i + 1) * b - lo, :].clone() for i, _ in blocks]

    def __len__(self) -> int:
        return len(self.blocks)


class _BlockPrefixLayer(DynamicLayer):
    """A transformers ``DynamicLayer`` whose cached prefix is still a list of block views
    (``(1, kv_heads, block_size, head_dim)`` each): the first ``update`` concatenates the
    blocks and the new tokens' KV in one copy, so a lookup itself copies nothing."""

    def __init__(self, keys: list[torch.Tensor], values: list[torch.Tensor], length: int) -> None:
        super().__init__()
        self._pending: tuple[list[torch.Tensor], list[torch.Tensor]] | None = (keys, values)
        self._length = length
        self.device = keys[0].device
        self.is_initialized = True

    def get_seq_length(self) -> int:
        return self._length if self._pending is not None else super().get_seq_length()

    def update(self, key_states: torch.Tensor, value_states: torch.Tensor, *args: Any, **kwargs: Any):
        if self._pending is None:
            return super().update(key_states, value_states, *args, **kwargs)
        ks, vs = self._pending
        self._pending = None
        self.keys = torch.cat([*ks, key_states], dim=-2)
        self.values = torch.cat([*vs, value_states], dim=-2)
        return self.keys, self.values
