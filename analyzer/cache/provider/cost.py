"""Provider input cost in USD: the one place cached reads and cache writes are priced.

A prompt's input is billed as ``cached × read + written × write + rest × 1`` times the
input price (USD per million tokens), where ``read`` / ``write`` are multiples of that
price (:mod:`.prices`: e.g. Anthropic reads 0.1×, writes 1.25× or 2× for 1 h marks;
automatic caching writes at 1×). :func:`cost_usd` prices the simulator's predicted
hits, :func:`reported_cost_usd` the log's reported usage; both also give the cost with
no cache (every prompt token at 1×).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable, Protocol


@dataclass(frozen=True, slots=True)
class Prices:
    """USD per million input tokens and the cache-read multiplier (writes carry
    their own multiplier per request)."""

    input: float
    read_multiplier: float


class PricedRequest(Protocol):
    """What :func:`cost_usd` reads of a request's figures (tokens; the write multiplier)."""

    prompt_tokens: int
    cached_tokens: int
    written_tokens: int
    write_multiplier: float


def billed_tokens(prompt: int, cached: int, written: int, read_multiplier: float, write_multiplier: float) -> float:
    """Prompt tokens weighted by price: ``cached·read + written·write + max(0, prompt − cached − written)``
    (token-equivalents at the input price)."""
    return cached * read_multiplier + written * write_multiplier + max(0, prompt - cached - written)


def cost_usd(rows: Iterable[PricedRequest], prices: Prices) -> tuple[float, float]:
    """(estimated cost with the cache, cost with no cache) in USD over predicted ``rows``.

    Cached tokens cost ``read_multiplier``; written tokens the request's write
    multiplier (Anthropic 1.25× / 2×; 1× for automatic caching); the rest 1×.
    """
    with_cache = without = 0.0
    for r in rows:
        with_cache += billed_tokens(r.prompt_tokens, r.cached_tokens, r.written_tokens, prices.read_multiplier,
                                    r.write_multiplier)
        without += r.prompt_tokens
    scale = prices.input / 1e6
    return with_cache * scale, without * scale


def reported_cost_usd(prompt: int, cached: int, written: int, prices: Prices,
                      write_multiplier: float = 1.0) -> tuple[float, float]:
    """(cost a reported usage implies, cost with no cache) in USD: ``cached`` reported
    cached tokens at ``read_multiplier``, ``written`` reported cache writes at
    ``write_multiplier``, the rest of the ``prompt`` reported prompt tokens at 1×."""
    scale = prices.input / 1e6
    return billed_tokens(prompt, cached, written, prices.read_multiplier, write_multiplier) * scale, prompt * scale
