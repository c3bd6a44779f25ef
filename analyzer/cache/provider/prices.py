"""One price table for provider caches, keyed by model pattern.

Prices differ per model, not per provider (gpt-4o input is $2.50/MTok with cached
reads at 0.5×, GPT-5 $1.25 with 0.1×; claude-haiku-4-5 $1, Sonnet $3), so each
:class:`PriceRow` names a model-name pattern (``fnmatch`` glob, lower case) and
gives its input price (USD per million input tokens), the cached-read and
cache-write multipliers of that price, the cache retention (seconds) and the
minimum cacheable prompt (tokens; None = the provider's rule), with the page it
was read from and when. :func:`price_for` returns the first row whose pattern
matches the model, else the provider's default row (``provider:*``).

The ``--price-input`` / ``--price-read`` / ``--price-write`` options still
override whatever row applies (``CacheSpec.rule_overrides``).
"""

from __future__ import annotations

from dataclasses import dataclass
from fnmatch import fnmatchcase


@dataclass(frozen=True, slots=True)
class PriceRow:
    """Prices of the models matching ``pattern`` at ``provider``: ``input`` USD/MTok;
    ``read`` / ``write``: cached-read / cache-write price as a multiple of ``input``;
    ``ttl_s``: default retention (seconds); ``min_tokens``: shortest cacheable prompt
    (None: the provider's own rule); ``source`` / ``date``: where and when read."""

    pattern: str
    provider: str
    input: float
    read: float
    write: float
    ttl_s: float
    min_tokens: int | None
    source: str
    date: str


_OPENAI = "openai.com/api/pricing and the prompt caching guide"
_OPENAI_56 = "OpenAI prompt caching guide (gpt-5.6+: prompt_cache_options, 1.25× writes, 30 min)"
_ANTHROPIC = "claude.com/pricing and docs.claude.com prompt caching (5 min writes 1.25×, reads 0.1×)"
_DEEPSEEK = "api-docs.deepseek.com pricing (V3.2: cache hit $0.028, miss $0.28 per MTok)"

#: The table (first match wins; edit here when a price changes).
PRICES: tuple[PriceRow, ...] = (
    # OpenAI: GPT-5.6 and later: explicit breakpoints, writes billed 1.25×, 30 min.
    PriceRow("gpt-5.[6-9]*", "openai", 1.25, 0.1, 1.25, 1800.0, 1024, _OPENAI_56 + "; input as gpt-5", "2026-06"),
    PriceRow("gpt-[6-9]*", "openai", 1.25, 0.1, 1.25, 1800.0, 1024, _OPENAI_56 + "; input as gpt-5", "2026-06"),
    PriceRow("gpt-5*-nano*", "openai", 0.05, 0.1, 1.0, 300.0, 1024, _OPENAI, "2025-08"),
    PriceRow("gpt-5*-mini*", "openai", 0.25, 0.1, 1.0, 300.0, 1024, _OPENAI, "2025-08"),
    PriceRow("gpt-5*", "openai", 1.25, 0.1, 1.0, 300.0, 1024, _OPENAI, "2025-08"),
    PriceRow("gpt-4.1-nano*", "openai", 0.10, 0.25, 1.0, 300.0, 1024, _OPENAI, "2025-04"),
    PriceRow("gpt-4.1-mini*", "openai", 0.40, 0.25, 1.0, 300.0, 1024, _OPENAI, "2025-04"),
    PriceRow("gpt-4.1*", "openai", 2.00, 0.25, 1.0, 300.0, 1024, _OPENAI, "2025-04"),
    PriceRow("gpt-4o-mini*", "openai", 0.15, 0.5, 1.0, 300.0, 1024, _OPENAI, "2024-10"),
    PriceRow("gpt-4o*", "openai", 2.50, 0.5, 1.0, 300.0, 1024, _OPENAI, "2024-10"),
    PriceRow("o4-mini*", "openai", 1.10, 0.25, 1.0, 300.0, 1024, _OPENAI, "2025-04"),
    PriceRow("o3*", "openai", 2.00, 0.25, 1.0, 300.0, 1024, _OPENAI, "2025-06"),
    PriceRow("o1*", "openai", 15.0, 0.5, 1.0, 300.0, 1024, _OPENAI, "2024-12"),
    PriceRow("provider:openai", "openai", 1.25, 0.1, 1.0, 300.0, 1024, _OPENAI + " (GPT-5 rates)", "2025-08"),
    # Anthropic (minimum lengths by model: provider.ANTHROPIC_MIN_TOKENS).
    PriceRow("*opus-4-5*", "anthropic", 5.0, 0.1, 1.25, 300.0, None, _ANTHROPIC, "2025-11"),
    PriceRow("*opus-4*", "anthropic", 15.0, 0.1, 1.25, 300.0, None, _ANTHROPIC, "2025-08"),
    PriceRow("*3-opus*", "anthropic", 15.0, 0.1, 1.25, 300.0, None, _ANTHROPIC, "2024-03"),
    PriceRow("*haiku-4-5*", "anthropic", 1.0, 0.1, 1.25, 300.0, None, _ANTHROPIC, "2025-10"),
    PriceRow("*3-5-haiku*", "anthropic", 0.80, 0.1, 1.25, 300.0, None, _ANTHROPIC, "2024-11"),
    PriceRow("*haiku-3-5*", "anthropic", 0.80, 0.1, 1.25, 300.0, None, _ANTHROPIC, "2024-11"),
    PriceRow("*3-haiku*", "anthropic", 0.25, 0.1, 1.25, 300.0, None, _ANTHROPIC, "2024-03"),
    PriceRow("*sonnet*", "anthropic", 3.0, 0.1, 1.25, 300.0, None, _ANTHROPIC, "2025-09"),
    PriceRow("provider:anthropic", "anthropic", 3.0, 0.1, 1.25, 300.0, None, _ANTHROPIC + " (Sonnet rates)",
             "2025-09"),
    # DeepSeek: 64-token units, retention of hours to days.
    PriceRow("deepseek*", "deepseek", 0.28, 0.1, 1.0, 86400.0, 64, _DEEPSEEK, "2025-09"),
    PriceRow("provider:deepseek", "deepseek", 0.28, 0.1, 1.0, 86400.0, 64, _DEEPSEEK, "2025-09"),
)


def price_for(provider: str, model: str | None) -> PriceRow:
    """The row of ``model`` (case-insensitive glob match, first wins, rows of ``provider``
    only), else ``provider:<provider>``. KeyError for a provider without a default row."""
    m = (model or "").lower()
    if m:
        for row in PRICES:
            if row.provider == provider and not row.pattern.startswith("provider:") and fnmatchcase(m, row.pattern):
                return row
    return next(r for r in PRICES if r.pattern == f"provider:{provider}")
