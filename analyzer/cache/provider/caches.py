"""Provider prompt caches over these rules: unit chains (OpenAI, DeepSeek) and breakpoints (Anthropic).

:class:`UnitPrefixCache` is automatic caching over a chain of units (a
:class:`~prefixcache.analyzer.cache.index.block_hash.BlockHashCache` with the
provider's unit, TTL and minimum); :class:`AnthropicCache` caches exact prefixes at
:class:`Breakpoint` marks (also OpenAI GPT-5.6 and later). The rules themselves, with
their sources, are :mod:`.rules`; both caches implement
:class:`~prefixcache.analyzer.cache.base.PrefixCache`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping, Sequence

import xxhash

from prefixcache.analyzer.cache.base import BlockHash, EvictResult, InsertResult, MatchResult
from prefixcache.analyzer.cache.index.block_hash import BlockHashCache
from prefixcache.analyzer.cache.index.compact import int64_bytes
from prefixcache.analyzer.cache.provider.rules import ANTHROPIC_TTL_1H_S, ANTHROPIC_WRITE_1H, ProviderRules


class UnitPrefixCache:
    """OpenAI / DeepSeek automatic prefix caching: a chain of ``block_size``-token units
    with idle TTL, no last-token cap, nothing below ``min_tokens``.

    ``match`` / ``insert`` hash the prompt; ``match_hashes`` / ``insert_hashes`` take
    its unit chain already hashed (the simulator hashes each request once).
    """

    def __init__(self, rules: ProviderRules, capacity_blocks: int | None = None, policy: str = "lru") -> None:
        self.rules = rules
        self.block_size = rules.block_size
        self._cache = BlockHashCache(rules.block_size, capacity_blocks, policy,
                                     ttl_s=rules.ttl_s, cap_last_token=False, free_order="tail-first")

    def match(self, tokens: Sequence[int], now: float, hidden: int = 0) -> MatchResult:
        """Cached prefix in whole units; 0 under the minimum. ``hidden``: tokens of
        an unlogged prefix counted toward the minimum length only."""
        return self.match_hashes(self._cache.hashes(tokens), len(tokens), now, hidden)

    def match_hashes(self, hashes: Sequence[int], num_tokens: int, now: float, hidden: int = 0) -> MatchResult:
        """:meth:`match` for a prompt of ``num_tokens`` tokens whose unit chain is ``hashes``."""
        if num_tokens + hidden < self.rules.min_tokens:
            return MatchResult(0)
        m = self._cache.match_hashes(hashes, now)
        if m.cached_tokens + hidden < self.rules.min_tokens:
            return MatchResult(0)
        return m

    def insert(self, tokens: Sequence[int], now: float, hidden: int = 0) -> InsertResult:
        """Store the prompt's whole units (nothing under the minimum length)."""
        return self.insert_hashes(self._cache.hashes(tokens), len(tokens), now, hidden)

    def insert_hashes(self, hashes: Sequence[int], num_tokens: int, now: float, hidden: int = 0) -> InsertResult:
        """:meth:`insert` for a prompt of ``num_tokens`` tokens whose unit chain is ``hashes``."""
        if num_tokens + hidden < self.rules.min_tokens:
            return InsertResult(evicted=self._cache.expire(now).evicted)
        return self._cache.insert_hashes(hashes, now)

    def evict(self, num_tokens: int, now: float) -> EvictResult:
        return self._cache.evict(num_tokens, now)


@dataclass(frozen=True, slots=True)
class Breakpoint:
    """A ``cache_control`` mark: the prefix up to token ``end`` is cached with ``ttl_s``."""

    end: int
    ttl_s: float = 300.0


@dataclass(frozen=True, slots=True)
class Scope:
    """What cache entries are scoped by besides their prefix: ``head`` for entries ending at or
    before token ``head_end`` (the system prompt and tools), ``messages`` for later ones. Anthropic
    keeps a cache per model, and a change of thinking or ``tool_choice`` invalidates the message
    entries only (:func:`~prefixcache.analyzer.cache.workload.cache_scope`)."""

    head: str = ""
    messages: str = ""
    head_end: int = 0


#: No scope: every entry in one namespace (a single-model log, the ``PrefixCache`` protocol).
NO_SCOPE = Scope()


class AnthropicCache:
    """Anthropic breakpoint caching over exact prefixes (see module docstring).

    :meth:`step` takes the prompt ``tokens``, the token offsets of its content-block
    boundaries (``boundaries``: ends of system / tool / message segments, sorted)
    and its breakpoints, and returns (read tokens, written tokens). Entries are
    keyed by a hash of the whole prefix, so any earlier change misses. ``match``
    and ``insert`` (the ``PrefixCache`` protocol) use one breakpoint at the end.
    ``ttl_s`` (seconds; None = each breakpoint's own 5 min / 1 h mark) is the
    retention of every entry, refreshed on hit; the write multiplier still follows
    the marks (2× for a 1 h mark), since that is what the request asked to pay.
    """

    block_size = 1

    def __init__(self, rules: ProviderRules, ttl_s: float | None = None) -> None:
        self.rules = rules
        #: Retention of every entry when given (``simulate --ttl``), in place of its breakpoint's
        #: mark (5 min, or 1 h); write prices still follow the marks.
        self.ttl_s = ttl_s
        self._entries: dict[tuple[int, int, str], tuple[float, float]] = {}  # (len, hash, scope) -> (last use, ttl)
        #: When each entry's write landed (the writer's response time, seconds) and its write number.
        self._landed: dict[tuple[int, int, str], tuple[float, int]] = {}
        self._writes = 0

    @staticmethod
    def prefix_hashes(tokens: Sequence[int], cuts: Sequence[int]) -> dict[int, int]:
        """Hash of ``tokens[:c]`` for every cut ``c`` (one streaming pass)."""
        data = int64_bytes(tokens)
        h = xxhash.xxh3_64()
        out, done = {}, 0
        for c in sorted(set(cuts)):
            h.update(data[done * 8:c * 8])
            done = c
            out[c] = h.intdigest()
        return out

    def _alive(self, key: tuple[int, int, str], now: float, sent: float | None = None) -> bool:
        """Live at ``now``, among the latest ``considered_breakpoints`` written, and (when the
        request's send time ``sent`` is known) written by a response that had landed by then."""
        e = self._entries.get(key)
        if e is None or now - e[0] > e[1]:
            return False
        landed, seq = self._landed.get(key, (float("-inf"), self._writes))
        n = self.rules.considered_breakpoints
        if n and seq <= self._writes - n:
            return False
        return sent is None or landed <= sent

    def lookup(self, tokens: Sequence[int], boundaries: Sequence[int],
               breakpoints: Sequence[Breakpoint], now: float, hidden: int = 0,
               hashes: Mapping[int, int] | None = None, sent: float | None = None,
               scope: Scope = NO_SCOPE, blocks: Mapping[int, int] | None = None) -> int:
        """Tokens read from cache: the longest live entry found at a breakpoint or
        within ``lookback_blocks`` content blocks before one (−1: any earlier boundary).
        Read-only. ``hidden``: tokens of an unlogged prefix, counted toward the minimum
        length only; ``hashes``: :meth:`prefix_hashes` at every boundary and breakpoint,
        when the caller keeps them (the simulator hashes each request once); ``sent``:
        when the request was sent (seconds, same clock as ``now``): entries whose
        writer's response came back later are not visible yet (None: all are); ``scope``:
        what entries are scoped by besides their prefix (:class:`Scope`: model, thinking,
        ...; an entry of another scope is another cache); ``blocks``: content blocks up to
        each boundary (None: one per boundary)."""
        best = 0
        bps = self._usable(breakpoints, len(tokens))
        bounds = sorted(set(b for b in boundaries if 0 < b <= len(tokens)) | {bp.end for bp in bps})
        hashes = hashes if hashes is not None else self.prefix_hashes(tokens, bounds)
        for bp in bps:
            j = bounds.index(bp.end)
            for c in reversed(bounds[self._window_start(bounds, j, blocks):j + 1]):
                if c + hidden >= self.rules.min_tokens and c > best and self._alive(self._key(c, hashes, scope), now, sent):
                    best = c
                    break
        return best

    def _window_start(self, bounds: Sequence[int], j: int, blocks: Mapping[int, int] | None) -> int:
        """Index in ``bounds`` of the earliest boundary the lookback from ``bounds[j]`` reaches: the
        breakpoint's own block and the ``lookback_blocks`` blocks before it (Anthropic: "up to 20
        blocks before your explicit breakpoint"); 0 with no limit."""
        back = self.rules.lookback_blocks
        if back < 0:
            return 0
        if not blocks:
            return max(0, j - back)
        at = blocks.get(bounds[j])
        if at is None:
            return max(0, j - back)
        i = j
        while i > 0 and at - blocks.get(bounds[i - 1], at) <= back:
            i -= 1
        return i

    def reachable(self, end: int, boundaries: Sequence[int], breakpoints: Sequence[Breakpoint], n: int,
                  blocks: Mapping[int, int] | None = None) -> bool:
        """Whether an entry ending at token ``end`` is within the lookback of one of ``breakpoints``
        at or after it (a request of ``n`` tokens cut at ``boundaries``): the read the in-thread
        rule counts on (:mod:`~prefixcache.analyzer.cache.simulate.bands`)."""
        bps = [bp for bp in self._usable(breakpoints, n) if bp.end >= end]
        if not bps or end <= 0:
            return False
        bounds = sorted(set(b for b in boundaries if 0 < b <= n) | {bp.end for bp in bps} | {end})
        return any(bounds.index(end) >= self._window_start(bounds, bounds.index(bp.end), blocks) for bp in bps)

    @staticmethod
    def _key(c: int, hashes: Mapping[int, int], scope: Scope) -> tuple[int, int, str]:
        return c, hashes[c], scope.head if c <= scope.head_end else scope.messages

    def _usable(self, breakpoints: Sequence[Breakpoint], n: int) -> list[Breakpoint]:
        bps = sorted({bp.end: bp for bp in breakpoints if 0 < bp.end <= n}.values(), key=lambda b: b.end)
        return bps[-self.rules.max_breakpoints:] if self.rules.max_breakpoints else bps

    def step(self, tokens: Sequence[int], boundaries: Sequence[int],
             breakpoints: Sequence[Breakpoint], now: float, hidden: int = 0,
             hashes: Mapping[int, int] | None = None, sent: float | None = None,
             scope: Scope = NO_SCOPE, blocks: Mapping[int, int] | None = None) -> tuple[int, int, float]:
        """Run one request: returns (read tokens, written tokens, write price multiplier).

        The read entry is refreshed; an entry is written at every breakpoint past
        the read point whose prefix is at least ``min_tokens`` long; it lands at
        ``now`` (the request's logged response time) for later :meth:`lookup` ``sent`` checks.
        """
        read = self.lookup(tokens, boundaries, breakpoints, now, hidden, hashes, sent, scope, blocks)
        bps = self._usable(breakpoints, len(tokens))
        if hashes is None:
            hashes = self.prefix_hashes(tokens, [read] + [bp.end for bp in bps])
        if read:
            key = self._key(read, hashes, scope)
            self._entries[key] = (now, self._entries[key][1])
        written, top_ttl = 0, 0.0
        for bp in bps:
            if bp.end + hidden < self.rules.min_tokens:
                continue
            key = self._key(bp.end, hashes, scope)
            if bp.end > read:
                written = bp.end - read
                top_ttl = max(top_ttl, bp.ttl_s)
            old = self._entries.get(key)
            keep = bp.ttl_s if self.ttl_s is None else self.ttl_s
            self._entries[key] = (now, max(keep, old[1] if old else 0.0))
            if old is None or key not in self._landed:
                self._writes += 1
                self._landed[key] = (now, self._writes)
        mult = ANTHROPIC_WRITE_1H if top_ttl >= ANTHROPIC_TTL_1H_S else self.rules.write_multiplier
        self._purge(now)
        return read, written, mult

    def _purge(self, now: float) -> None:
        dead = [k for k, (t, ttl) in self._entries.items() if now - t > ttl]
        for k in dead:
            del self._entries[k]
            self._landed.pop(k, None)

    def match(self, tokens: Sequence[int], now: float) -> MatchResult:
        return MatchResult(self.lookup(tokens, [len(tokens)], [Breakpoint(len(tokens))], now))

    def insert(self, tokens: Sequence[int], now: float) -> InsertResult:
        _, written, _ = self.step(tokens, [len(tokens)], [Breakpoint(len(tokens), self.rules.ttl_s)], now)
        return InsertResult((BlockHash(len(tokens)),) if written else ())

    def evict(self, num_tokens: int, now: float) -> EvictResult:
        self._purge(now)
        return EvictResult()
