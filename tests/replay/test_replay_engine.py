"""The replay engine's KV prefix cache on token ids: reuse is exact, the engine's cached
tokens are the simulator's, eviction frees KV, and broken positions/KV are caught."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from prefixcache.analyzer.cache.index.block_hash import BlockHashCache
from prefixcache.analyzer.errors import EngineError
from prefixcache.replay.local.kv import KVPrefixCache

pytestmark = pytest.mark.slow
B = 16
TOL = 1e-3


def _cache(engine, capacity=None) -> KVPrefixCache:
    return engine.kv_store(BlockHashCache(B, capacity, "lru"))


def _same_as_cold(engine, ids, gen, new_tokens=1) -> float:
    cold = engine.generate(ids, max_new_tokens=new_tokens)
    assert gen.output_ids == cold.output_ids
    assert int(np.argmax(gen.first_logits)) == int(np.argmax(cold.first_logits))
    delta = float(np.abs(gen.first_logits - cold.first_logits).max())
    assert delta < TOL
    return delta


def test_hit_reuses_prefix_and_matches_cold(engine, text_ids):
    a = text_ids[:300]
    b = text_ids[:250] + text_ids[400:460]  # diverges at token 250, inside block 15
    kv = _cache(engine)
    first = engine.generate(a, cache=kv, now=0)
    assert (first.cached_tokens, first.computed_tokens) == (0, 300)
    assert len(kv) == 300 // B and kv.kv_bytes == len(kv) * B * engine.kv_bytes_per_token
    gen = engine.generate(b, max_new_tokens=4, cache=kv, now=1)
    # partially matching block: 250 // 16 = 15 full blocks match; block 15 (tokens 240–255) differs
    assert gen.cached_tokens == 240 and gen.computed_tokens == len(b) - 240
    _same_as_cold(engine, b, gen, new_tokens=4)


def test_blocks_shared_by_several_requests(engine, text_ids):
    system = text_ids[:160]
    kv = _cache(engine)
    outs = []
    for i, tail in enumerate((text_ids[200:260], text_ids[300:340], text_ids[500:590])):
        outs.append(engine.generate(system + tail, cache=kv, now=i))
    assert [g.cached_tokens for g in outs] == [0, 160, 160]
    # the shared 10 blocks are stored once; each request adds only its own full blocks
    assert len(kv) == len(kv.index) == 10 + 60 // B + 40 // B + 90 // B
    for g, tail in zip(outs[1:], (text_ids[300:340], text_ids[500:590])):
        _same_as_cold(engine, system + tail, g)


def test_hit_after_eviction_frees_and_restores_kv(engine, text_ids):
    a, b = text_ids[:200], text_ids[600:800]
    kv = _cache(engine, capacity=16)  # room for one prompt's 12 blocks, not two
    engine.generate(a, cache=kv, now=0)
    held = kv.kv_bytes
    # B's 12 full blocks and its partial 13th (8 tokens, never cached) need 13 of the 16: as in
    # vLLM's block pool, the partial block takes a cached block's room while B runs, so 9 of A's 12
    # blocks are evicted (LRU, A freed tail first) and 15 stay cached
    engine.generate(b, cache=kv, now=1)
    assert len(kv) == len(kv.index) == 15
    assert kv.kv_bytes == 15 * B * engine.kv_bytes_per_token > held
    assert kv.evicted_blocks == 9
    again = engine.generate(a, cache=kv, now=2)  # A's 3 head blocks survived eviction
    assert again.cached_tokens == 3 * B
    _same_as_cold(engine, a, again)
    hit = engine.generate(a, cache=kv, now=3)  # re-stored after eviction: full hit
    assert hit.cached_tokens == (len(a) - 1) // B * B
    _same_as_cold(engine, a, hit)


def test_engine_cached_tokens_equal_simulator(engine, text_ids):
    """Same block size, capacity and policy: the engine's hits are ``simulate``'s predictions."""
    from prefixcache.replay.local.passes import Prompt, ReplayConfig, predict

    seqs = [text_ids[:120], text_ids[:200], text_ids[40:200], text_ids[:130] + text_ids[900:950],
            text_ids[:200] + text_ids[200:260], text_ids[40:100], text_ids[:120]]
    prompts = [Prompt("s", i, "t", i + 1, tuple(ids), len(ids), now=float(i)) for i, ids in enumerate(seqs)]
    want = predict(prompts, ReplayConfig(block_size=B, capacity_blocks=20))
    kv = _cache(engine, capacity=20)
    got = []
    for p in prompts:
        got.append(engine.generate(p.ids, cache=kv, now=p.now).cached_tokens)
        assert set(kv.blocks) == set(kv.index._last)  # KV held for exactly the indexed blocks
    assert got == want
    assert sum(want) > 0 and kv.evicted_blocks > 0


def test_corrupted_kv_or_wrong_positions_are_detected(engine, text_ids):
    """The checks the verification relies on really fail when reuse is wrong."""
    ids = text_ids[:200]
    kv = _cache(engine)
    engine.generate(ids, cache=kv, now=0)
    cold = engine.generate(ids)
    cached, past = kv.lookup(ids, 1)
    with torch.inference_mode():
        shifted, _ = engine.forward(ids[cached:], past, 0)  # positions restarting at 0
    assert float(np.abs(shifted.numpy() - cold.first_logits).max()) > 0.05
    first = next(iter(kv.blocks))
    with torch.inference_mode():
        kv.blocks[first].add_(1.0)  # in place: the views the lookup hands out see it
    bad = engine.generate(ids, cache=kv, now=2)
    assert float(np.abs(bad.first_logits - cold.first_logits).max()) > 0.05


def test_prompt_longer_than_context_is_a_clear_error(engine):
    with pytest.raises(EngineError, match="exceeds the model's context of 8192 tokens"):
        engine.generate([1] * 8192)
    with pytest.raises(EngineError, match="empty prompt"):
        engine.generate([])


def test_block_extraction_paths_agree(engine, text_ids):
    """The CPU (per-block copies) and accelerator (one stack, split) store paths keep the same KV."""
    ids = text_ids[:150]
    caches = []
    for vectorized in (False, True):
        kv = _cache(engine)
        kv.vectorized = vectorized
        engine.generate(ids, cache=kv, now=0)
        caches.append(kv)
    a, b = caches
    assert list(a.blocks) == list(b.blocks) and len(a) == 150 // B
    for h in a.blocks:
        assert a.blocks[h].shape == (30, 2, 1, 3, B, 64) and a.blocks[h].is_contiguous()
        assert torch.equal(a.blocks[h], b.blocks[h])
    assert a.kv_bytes == b.kv_bytes == len(a) * B * engine.kv_bytes_per_token


def test_repeat_times_the_same_cache_state_and_keeps_the_median_run(engine, text_ids):
    """``repeat``: N lookups + prefills on one cache state, stored once; TTFT is the median run's."""
    a, b = text_ids[:160], text_ids[:160] + text_ids[300:340]
    kv = _cache(engine)
    engine.generate(a, cache=kv, now=0)
    gen = engine.generate(b, cache=kv, now=1, repeat=3)
    assert gen.cached_tokens == 160 and len(gen.ttft_samples) == 3
    assert gen.ttft_s == pytest.approx(sorted(gen.ttft_samples)[1])
    assert len(kv) == len(kv.index) == 200 // B  # stored once, after the repeats
    _same_as_cold(engine, b, gen)


def test_short_hit_attention_equals_masked_sdpa_and_cold(engine, text_ids):
    """A prefill after a short cached prefix (2·P ≤ S) runs the padded ``is_causal`` kernel:
    the same values as transformers' masked SDPA, and the same logits as a cold prefill."""
    from types import SimpleNamespace

    from transformers.integrations.sdpa_attention import sdpa_attention_forward

    from prefixcache.replay.local.hf import ATTN, prefix_sdpa_forward

    assert engine.model.config._attn_implementation == ATTN
    torch.manual_seed(0)
    module = SimpleNamespace(num_key_value_groups=3, is_causal=True)
    for p, s in ((16, 200), (100, 200), (150, 200)):  # padded, padded (2·P = S), masked
        q, k, v = torch.randn(1, 9, s, 64), torch.randn(1, 3, p + s, 64), torch.randn(1, 3, p + s, 64)
        mask = torch.ones(s, p + s, dtype=torch.bool).tril(p)[None, None]  # bottom-right causal
        want, _ = sdpa_attention_forward(module, q, k, v, mask, scaling=0.125)
        got, _ = prefix_sdpa_forward(module, q, k, v, mask, scaling=0.125)
        assert got.shape == want.shape == (1, s, 9, 64)
        assert float((got - want).abs().max()) < 1e-5
    ids = text_ids[:400]
    kv = _cache(engine)
    engine.generate(ids[:40], cache=kv, now=0)  # 2 blocks stored: 32 cached, 368 computed
    gen = engine.generate(ids, max_new_tokens=3, cache=kv, now=1)
    assert gen.cached_tokens == 32
    _same_as_cold(engine, ids, gen, new_tokens=3)


def test_hf_engine_implements_the_protocol(engine, loaded):
    assert (engine.dtype, engine.device, engine.device_kind, engine.tokenizer) == ("float32", "cpu", "cpu", loaded.path)
    assert engine.kv_bytes_per_token == 2 * 30 * 3 * 64 * 4 and engine.max_context == 8192  # SmolLM2-135M, float32
    assert engine.notes() == (f"{loaded.gguf.name} is dequantized to float32 for replay (converted once): "
                              "timings are those of an unquantized model",)
    assert isinstance(engine.kv_store(BlockHashCache(B)), KVPrefixCache)


def test_an_index_matching_past_the_cap_is_caught(engine, text_ids):
    """The index caps hits at ⌊(n−1)/B⌋·B; the KV store only checks it (one cap, the index's)."""
    ids = text_ids[:64]
    kv = engine.kv_store(BlockHashCache(B, None, "lru", cap_last_token=False))
    engine.generate(ids, cache=kv, now=0)
    with pytest.raises(EngineError, match="matched 64 tokens of a 64-token prompt"):
        kv.lookup(ids, 1)
