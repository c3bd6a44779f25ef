"""Provider rules: OpenAI 1,024/128, DeepSeek 64-token units, Anthropic breakpoints and TTL."""

from __future__ import annotations

import pytest

from prefixcache.analyzer.cache.provider.caches import AnthropicCache, Breakpoint, UnitPrefixCache
from prefixcache.analyzer.cache.provider.rules import ANTHROPIC_WRITE_1H, PROVIDERS, rules_for
from prefixcache.analyzer.errors import ConfigError


def test_constants_table():
    assert PROVIDERS["openai"].block_size == 128 and PROVIDERS["openai"].min_tokens == 1024
    assert PROVIDERS["deepseek"].block_size == 64
    a = PROVIDERS["anthropic"]
    assert (a.max_breakpoints, a.lookback_blocks, a.write_multiplier, a.read_multiplier) == (4, 20, 1.25, 0.1)
    assert rules_for("anthropic", "claude-opus-4-5-20251101").min_tokens == 4096
    assert rules_for("anthropic", "claude-sonnet-4-20250514").min_tokens == 1024
    assert rules_for("anthropic", "claude-haiku-4-5").min_tokens == 4096
    assert rules_for("openai", ttl_s=60.0).ttl_s == 60.0
    with pytest.raises(ConfigError):
        rules_for("mistral")


def test_openai_minimum_and_128_steps():
    c = UnitPrefixCache(rules_for("openai"))
    short = list(range(1000))
    c.insert(short, 0)
    assert c.match(short + [1, 2, 3], 1).cached_tokens == 0  # <1,024: never cached
    long = list(range(1300))
    c.insert(long, 2)
    assert c.match(long + [7], 3).cached_tokens == 1280  # 10 × 128
    assert c.match(long[:1100] + [9] * 300, 3).cached_tokens == 1024
    assert c.match(long[:1000] + [9] * 300, 3).cached_tokens == 0  # shared part below 1,024
    assert c.match(long + [7], 3 + 301).cached_tokens == 0  # idle past the 5-minute retention


def test_deepseek_64_token_units_like_the_logged_calls():
    # The mini-swe-agent sample: prompts 3,394 → 4,067 → 4,863 report 3,392 and 4,032 cached.
    c = UnitPrefixCache(rules_for("deepseek"))
    p1 = list(range(3394))
    p2 = p1 + list(range(10_000, 10_673))
    p3 = p2 + list(range(20_000, 20_796))
    c.insert(p1, 0)
    assert c.match(p2, 10).cached_tokens == 3392
    c.insert(p2, 10)
    assert c.match(p3, 20).cached_tokens == 4032
    assert UnitPrefixCache(rules_for("deepseek")).match(list(range(50)), 0).cached_tokens == 0


def test_anthropic_breakpoints_lookback_ttl_and_minimum():
    rules = rules_for("anthropic", "claude-sonnet-4")
    c = AnthropicCache(rules)
    toks = list(range(3000))
    bounds = list(range(100, 3001, 100))  # 30 content blocks of 100 tokens
    read, written, mult = c.step(toks, bounds, [Breakpoint(2000)], 0)
    assert (read, written, mult) == (0, 2000, 1.25)
    # a later breakpoint 10 blocks further finds the entry within the 20-block lookback
    assert c.lookup(toks, bounds, [Breakpoint(3000)], 60) == 2000
    # 25 blocks further is beyond the lookback
    far = list(range(4500))
    far_b = list(range(100, 4501, 100))
    assert c.lookup(far, far_b, [Breakpoint(4500)], 60) == 0
    # refreshed on hit: read at t=250 keeps it alive at t=500
    assert c.step(toks, bounds, [Breakpoint(2000)], 250)[0] == 2000
    assert c.lookup(toks, bounds, [Breakpoint(2000)], 500) == 2000
    assert c.lookup(toks, bounds, [Breakpoint(2000)], 900) == 0
    # a change before the breakpoint misses (exact prefix)
    changed = [7] + toks[1:]
    assert c.lookup(changed, bounds, [Breakpoint(2000)], 300) == 0
    # below the minimum: neither written nor read
    small = AnthropicCache(rules)
    assert small.step(list(range(900)), [900], [Breakpoint(900)], 0)[1] == 0
    assert small.lookup(list(range(901)), [900, 901], [Breakpoint(901)], 1) == 0
    # 1-hour breakpoints write at 2× and live an hour
    hour = AnthropicCache(rules)
    assert hour.step(toks, bounds, [Breakpoint(2000, 3600.0)], 0)[2] == ANTHROPIC_WRITE_1H
    assert hour.lookup(toks, bounds, [Breakpoint(2000)], 3000) == 2000


def test_anthropic_at_most_four_breakpoints():
    c = AnthropicCache(rules_for("anthropic"))
    toks = list(range(6000))
    bps = [Breakpoint(e) for e in (1100, 2000, 3000, 4000, 5000)]
    c.step(toks, [1100, 2000, 3000, 4000, 5000], bps, 0)
    assert c.lookup(toks[:1100] + [9] * 50, [1100, 1150], [Breakpoint(1150)], 1) == 0  # first mark dropped
    assert c.lookup(toks[:2000] + [9] * 50, [2000, 2050], [Breakpoint(2050)], 1) == 2000
