"""Reusable prompt tokens per request: the before/after figures of ``canonicalize``.

Each request is rendered and tokenized by :func:`prefixcache.analyzer.prepare.prepare`
and looked up in one :class:`~prefixcache.analyzer.cache.index.radix.PrefixIndex`: the tokens it
shares with any earlier request of the input, i.e. what an unbounded ideal prefix
cache (token granularity, across sessions) could serve.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Iterable, Mapping, Sequence

from prefixcache.analyzer.model import Request


@dataclass(frozen=True, slots=True)
class Reuse:
    """Prompt tokens and reusable tokens (the longest token prefix shared with any
    earlier request of the input) of one request, or summed over a group."""

    requests: int
    prompt_tokens: int
    reusable_tokens: int

    def __add__(self, other: "Reuse") -> "Reuse":
        return Reuse(self.requests + other.requests, self.prompt_tokens + other.prompt_tokens,
                     self.reusable_tokens + other.reusable_tokens)

    @property
    def fraction(self) -> float:
        """Reusable over prompt tokens (0.0 for no tokens)."""
        return self.reusable_tokens / self.prompt_tokens if self.prompt_tokens else 0.0


def reuse(requests: Iterable[Request], template: str = "auto", tokenizer: str = "auto") -> list[Reuse]:
    """Per request (input order): prompt tokens and tokens reusable from earlier requests.

    Requests are rendered and tokenized by :func:`prefixcache.analyzer.prepare.prepare`
    and looked up in one :class:`~prefixcache.analyzer.cache.index.radix.PrefixIndex` (an
    unbounded ideal prefix cache at token granularity, across sessions). Block-hash
    traces count their logged ``input_length`` and shared leading blocks.
    Raises ConfigError for unusable template/tokenizer specs.
    """
    return reuse_with_probes(requests, {}, template, tokenizer)[0]


def reuse_with_probes(requests: Iterable[Request], probes: Mapping[int, Sequence[Request]], template: str = "auto",
                      tokenizer: str = "auto", prepare: Callable | None = None
                      ) -> tuple[list[Reuse], dict[int, list[Reuse]]]:
    """:func:`reuse`, and for each ``probes[n]`` (other versions of request n, e.g. the
    per-rule steps of a rewrite) their figures against the same cache as request n: looked up
    after requests 0..n−1, never inserted. Returns (per request, {n: per probe}); tokens.
    ``prepare``: what prepares each of ``requests`` (a ``Preparer.prepare`` of ``template`` and
    ``tokenizer`` a caller shares, so a request it lints too is prepared once; default this
    call's own preparer, which prepares the probes either way)."""
    from prefixcache.analyzer.prepare import Preparer
    from prefixcache.analyzer.cache.index.radix import PrefixIndex

    preparer = Preparer(template, tokenizer)
    prepare = prepare or preparer.prepare
    index, out, probed = PrefixIndex(), [], {}
    for n, r in enumerate(requests):
        p = prepare(r)
        if n in probes:
            probed[n] = []
            for q in map(preparer.prepare, probes[n]):
                ids = q.tokens.ids if q.tokens is not None else ()
                probed[n].append(Reuse(1, q.prompt_tokens, index.match(ids).length if ids else 0))
        if p.tokens is not None:
            ids = p.tokens.ids
        else:  # block trace: one pseudo token per block id, scaled back to tokens below
            ids = tuple(p.request.trace.hash_ids) if p.request.trace else ()
        shared = index.insert(ids, n).length
        if p.tokens is None and p.request.trace is not None:
            shared = min(shared * p.request.trace.block_size, p.request.trace.input_length)
        out.append(Reuse(1, p.prompt_tokens, shared))
    return out, probed
