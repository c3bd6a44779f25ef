"""The llama.cpp server model: slots, slot choice by similarity then LRU, the RAM prompt cache."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from prefixcache.analyzer.cache.models.llamacpp import LlamaCppModel, PromptCache
from prefixcache.analyzer.cache.models import CACHES, CacheSpec, make_model
from prefixcache.analyzer.cache.workload import SimRequest
from prefixcache.cli.app import app
from tests.helpers import SAMPLES, existing

SWE = SAMPLES / "swe_agent_traj_function_calling_with_per_step_messages_marshmallow-1867.traj"


def _req(i: int, tokens: tuple[int, ...], session: str = "s", **kw) -> SimRequest:
    return SimRequest(order=i, session=session, index=i, source="t", record=i, model=None, now=float(i),
                      num_tokens=len(tokens), tokens=tokens, **kw)


def _model(slots: int = 1, cache_ram_mib: float = 8192.0, similarity: float = 0.10,
           capacity: int | None = None) -> LlamaCppModel:
    spec = CacheSpec("llamacpp", engine_options={"slots": slots, "cache_ram_mib": cache_ram_mib,
                                                 "slot_similarity": similarity, "kv_bytes_per_token": 1024})
    model = make_model(spec, 1, capacity)
    assert isinstance(model, LlamaCppModel)
    return model


def _seq(start: int, n: int) -> tuple[int, ...]:
    return tuple(range(start, start + n))


def test_registered_and_a_repeat_reads_n_minus_one():
    assert "llamacpp" in CACHES
    m = _model()
    p = _seq(0, 686)
    assert [m.step(_req(i, p)).cached_tokens for i in range(2)] == [0, 685]  # real-engines.md: 685 of 686


def test_the_slot_holds_prompt_and_output():
    m = _model()
    first = _seq(0, 686)
    m.step(_req(0, first))
    reply = _seq(5000, 3)  # the model's reply, as the next prompt renders it
    nxt = first + reply + _seq(9000, 17)
    assert m.step(_req(1, nxt, reply_ends=(689,))).cached_tokens == 689  # "extension 689 of 706"
    other = _model()
    other.step(_req(0, first))
    assert other.step(_req(1, nxt, session="t", reply_ends=(689,))).cached_tokens == 686  # not this slot's reply


def test_slot_choice_by_similarity_then_lru():
    m = _model(slots=2, cache_ram_mib=0)
    a, b = _seq(0, 100), _seq(1000, 100)
    m.step(_req(0, a))                      # LRU: the last of the unused slots
    m.step(_req(1, b))                      # similarity 0 ≤ 0.10: LRU, the other slot
    assert m.step(_req(2, a + _seq(50, 5))).cached_tokens == 100   # back to a's slot by similarity
    assert m.step(_req(3, b[:5] + _seq(7000, 95))).cached_tokens == 5  # not similar: the LRU slot, b's
    assert m.step(_req(4, b)).cached_tokens == 0  # 5% similar to b's slot: LRU again, a's slot
    c = _seq(3000, 100)
    # three slots: the LRU one (c's) is not the 5%-similar one (b's); -sps 0 turns the similarity
    # search off (llama.cpp get_available_slot: ``if (... && slot_prompt_similarity != 0.0f)``): LRU
    for sim, want in ((0.10, 0), (0.01, 5), (0.0, 0)):
        three = _model(slots=3, cache_ram_mib=0, similarity=sim)
        for i, p in enumerate((a, b, c, a, b)):
            three.step(_req(i, p))
        assert three.step(_req(5, b[:5] + _seq(7000, 95))).cached_tokens == want, sim


def test_ram_prompt_cache_survives_a_slot_switch_and_has_a_size():
    a, b = _seq(0, 400), _seq(10_000, 400)
    for ram, want in ((0, [0, 0, 0, 0]), (8192, [0, 0, 399, 399])):
        m = _model(cache_ram_mib=ram)
        assert [m.step(_req(i, p)).cached_tokens for i, p in enumerate((a, b, a, b))] == want, ram
    small = _model(capacity=500)  # --capacity: the prompt cache's size in tokens, over --cache-ram
    got = [small.step(_req(i, p)).cached_tokens for i, p in enumerate((a, b, _seq(20_000, 400), a))]
    assert got == [0, 0, 0, 0]  # a (400) and b (400) do not fit 500 tokens together: a was dropped
    big = _model(capacity=900)
    assert [big.step(_req(i, p)).cached_tokens for i, p in enumerate((a, b, _seq(20_000, 400), a))][-1] == 399


def test_prompt_cache_rules():
    pc = PromptCache(limit_tokens=10)
    pc.save((1, 2, 3))
    pc.save((1, 2))                 # already held by an entry
    assert pc.entries == [(1, 2, 3)]
    pc.save((1, 2, 3, 4))           # contains the old entry: replaces it
    assert pc.entries == [(1, 2, 3, 4)]
    pc.save(tuple(range(100, 109)))
    pc.update()                     # 13 tokens > 10: the oldest goes, one always stays
    assert pc.entries == [tuple(range(100, 109))]
    pc.update()
    assert len(pc.entries) == 1
    assert pc.load((), (7, 7)) is None  # f_keep 0 < 0.25: never loaded
    assert pc.load((), tuple(range(100, 105))) == (tuple(range(100, 109)), None) and not pc.entries


def test_cli_options_and_usage_errors():
    path = str(existing(SWE))
    res = CliRunner().invoke(app, ["simulate", path, "--cache", "llamacpp", "--slots", "2", "--cache-ram", "0",
                                   "--json"])
    assert res.exit_code == 0, res.output
    for bad in (["--slots", "0"], ["--slot-similarity", "1.5"], ["--cache-ram", "-2"]):
        res = CliRunner().invoke(app, ["simulate", path, "--cache", "llamacpp", *bad])
        assert res.exit_code == 2 and "Traceback" not in res.output, bad


@pytest.mark.parametrize("cap", [1, 10, 100])
def test_capacity_is_the_prompt_cache_and_never_above_the_ideal(cap):
    m, ideal = _model(capacity=cap), _model(capacity=None)
    ideal_off = make_model(CacheSpec("llamacpp"), 1, None, expire=False)
    for i, p in enumerate((_seq(0, 50), _seq(100, 50), _seq(0, 60))):
        r = _req(i, p)
        assert m.step(r).cached_tokens <= ideal_off.step(r).cached_tokens
        ideal.step(r)


def test_an_empty_slot_never_goes_through_the_prompt_cache():
    """llama.cpp ``get_available_slot``: ``update_cache = update_cache && tokens.size() > 0`` —
    a slot with no tokens neither saves nor loads, whatever the prompt cache holds."""
    m = _model(slots=2, similarity=0.5)
    a = _seq(0, 100)
    m.step(_req(0, a))                                   # LRU: slot 1
    m.step(_req(1, a[:40] + _seq(5000, 20)))             # 67% similar, keeps 40% of a: a saved to the cache
    assert m.prompt_cache is not None and m.prompt_cache.entries == [a]
    assert m.step(_req(2, a)).cached_tokens == 0         # 40% similar: LRU, slot 0, still empty: cold
    assert m.prompt_cache.entries == [a]


def test_acquire_release_skips_busy_slots():
    """The live protocol: a slot is not chosen while its request runs; release stores prompt + output."""
    m = _model(slots=2, cache_ram_mib=0)
    a = _seq(0, 100)
    s0, c0 = m.acquire(a, 1.0)
    s1, c1 = m.acquire(a, 2.0)                               # the same prompt, but a's slot is busy
    assert (c0, c1) == (0, 0) and s0 != s1
    m.release(s0, a + (7, 8))
    m.release(s1, ())
    s2, c2 = m.acquire(a + (7, 8, 9), 3.0)
    assert s2 == s0 and c2 == 102

