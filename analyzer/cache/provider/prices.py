"""One price table for provider caches, keyed by model pattern.

Prices differ per model, not per provider (gpt-4o input is $2.50/MTok with cached
reads at 0.5×, GPT-5 $1.25 with 0.1×; claude-haiku-4-5 $1, Sonnet $3), so each
:class:`PriceRow` names a model-name pattern (``fnmatch`` glob, lower case) and
gives its input price (USD per million input tokens), the cached-read and
cache-write multipliers of that price, the cache retention (seconds) and the
minimum cacheable prompt (tokens; None = the provider's rule), with the page it
was read from and when. :func:`price_for` returns the first row whose pattern
matches the model, else the provider's default row (``provider:*``). The model is
matched lower-cased, with ``[``, ``]``, ``@``, ``:`` and ``/`` read as ``-`` and a ``-``
appended, so a version row that ends at a separator (``*fable-5-2-*``) never takes a
neighbour's date-suffixed id (``claude-fable-5-20260609`` is Fable 5, not 5.2).

The ``--price-input`` / ``--price-read`` / ``--price-write`` options still
override whatever row applies (``CacheSpec.rule_overrides``).
"""

from __future__ import annotations

import re
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
_ANTHROPIC_PAGE = "platform.claude.com/docs/en/about-claude/pricing, model pricing table (checked 2026-12-04)"
_ANTHROPIC_52 = ("platform.claude.com Fable 5.2 / Mythos 5.2 migration guide (released 2026-11-09); list price "
                 "$8 / $40, reads $0.20, as resellers at list price quote it (checked 2026-12-04)")
_ANTHROPIC_OPUS55 = "platform.claude.com/docs/en/models/opus-5-5/overview: $4, writes $5 / $8, reads $0.20 (0.05×)"
_ANTHROPIC_SONNET55 = ("platform.claude.com pricing table: $2, writes $2.50 / $4; reads cut from $0.20 to $0.10 (0.05×) "
                       "on 2026-10-07 (calls before then were billed 0.1×); re-checked 2026-12-08: the model page "
                       "copy that lists $0.20 (0.1×) predates the cut (its lineup still shows Haiku 4.5, not Haiku 5.5 "
                       "of 2026-10-07), and the trackers that read the live pricing page after it list $0.10")
_ANTHROPIC_OPUS_NEXT = ("no published price for an Opus after 5.5 (claude-opus-6 …; searched 2026-12-08: the provider's "
                        "model pages name Opus 5.5 the current Opus): priced as the newest published Opus, 5.5, and "
                        "warned about (price_warning)")
_ANTHROPIC_HAIKU55 = ("platform.claude.com pricing: Haiku 5.5 up to 100K prompt tokens $0.10, reads $0.01; a longer "
                      "prompt bills every token at $0.50 (not modelled: such calls are under-priced 5×)")
_OPENAI_PAGE = ("developers.openai.com/api/docs/pricing and the model pages (gpt-5-codex: $1.25, cached $0.125), "
                "as resellers and the Codex rate card (25 credits = $1) quote them (checked 2026-12-04)")
_OPENAI_6 = ("developers.openai.com/api/docs/models/gpt-6.1-sol: $2, cached $0.10 (0.05×), writes $2.50 (1.25×), "
             "30 min; gpt-6 sol $2, cached $0.20 (0.1×); short-context tier (≤ 272K) only (checked 2026-12-04)")
_GEMINI = ("ai.google.dev/gemini-api/docs/pricing and /caching: implicit caching on 2.5 and later, cached input "
           "0.1× of input (≤ 200K prompt tier only), no write charge (checked 2026-12-04)")
_DEEPSEEK = "api-docs.deepseek.com pricing (V3.2: cache hit $0.028, miss $0.28 per MTok)"

#: The table (first match wins; edit here when a price changes).
PRICES: tuple[PriceRow, ...] = (
    # OpenAI: GPT-6.1 (0.05× reads) and GPT-6 / GPT-5.6 (0.1×): explicit breakpoints, writes billed 1.25×, 30 min.
    PriceRow("gpt-6.1*", "openai", 2.0, 0.05, 1.25, 1800.0, 1024, _OPENAI_6, "2026-12"),
    PriceRow("gpt-[6-9]*", "openai", 2.0, 0.1, 1.25, 1800.0, 1024, _OPENAI_6, "2026-12"),
    PriceRow("gpt-5.[6-9]*", "openai", 5.0, 0.1, 1.25, 1800.0, 1024, _OPENAI_56 + "; gpt-5.6-sol/terra/luna $5, cached $0.50",
             "2026-12"),
    PriceRow("gpt-5.5*", "openai", 5.0, 0.1, 1.0, 300.0, 1024, _OPENAI_PAGE + " (GPT-5.5 $5, cached $0.50)", "2026-12"),
    PriceRow("gpt-5.4*-nano*", "openai", 0.20, 0.1, 1.0, 300.0, 1024, _OPENAI_PAGE + " (GPT-5.4-nano $0.20)", "2026-12"),
    PriceRow("gpt-5.4*-mini*", "openai", 0.75, 0.1, 1.0, 300.0, 1024, _OPENAI_PAGE + " (GPT-5.4-mini $0.75)", "2026-12"),
    PriceRow("gpt-5.4*", "openai", 2.50, 0.1, 1.0, 300.0, 1024, _OPENAI_PAGE + " (GPT-5.4 $2.50)", "2026-12"),
    PriceRow("gpt-5.[23]*", "openai", 1.75, 0.1, 1.0, 300.0, 1024,
             _OPENAI_PAGE + " (GPT-5.2, GPT-5.2-Codex, GPT-5.3-Codex $1.75, cached $0.175)", "2026-12"),
    PriceRow("gpt-5*-nano*", "openai", 0.05, 0.1, 1.0, 300.0, 1024, _OPENAI, "2025-08"),
    PriceRow("gpt-5*-mini*", "openai", 0.25, 0.1, 1.0, 300.0, 1024, _OPENAI, "2025-08"),
    PriceRow("gpt-5*", "openai", 1.25, 0.1, 1.0, 300.0, 1024,
             _OPENAI_PAGE + " (GPT-5, GPT-5.1, GPT-5-Codex, GPT-5.1-Codex(-Max) $1.25)", "2026-12"),
    PriceRow("gpt-4.1-nano*", "openai", 0.10, 0.25, 1.0, 300.0, 1024, _OPENAI, "2025-04"),
    PriceRow("gpt-4.1-mini*", "openai", 0.40, 0.25, 1.0, 300.0, 1024, _OPENAI_PAGE + " (GPT-4.1-mini $0.40)", "2026-12"),
    PriceRow("gpt-4.1*", "openai", 2.00, 0.25, 1.0, 300.0, 1024, _OPENAI_PAGE + " (GPT-4.1 $2, cached $0.50)", "2026-12"),
    PriceRow("gpt-4o-mini*", "openai", 0.15, 0.5, 1.0, 300.0, 1024, _OPENAI, "2024-10"),
    PriceRow("gpt-4o*", "openai", 2.50, 0.5, 1.0, 300.0, 1024, _OPENAI, "2024-10"),
    PriceRow("o4-mini*", "openai", 1.10, 0.25, 1.0, 300.0, 1024, _OPENAI, "2025-04"),
    PriceRow("o3*", "openai", 2.00, 0.25, 1.0, 300.0, 1024, _OPENAI, "2025-06"),
    PriceRow("o1*", "openai", 15.0, 0.5, 1.0, 300.0, 1024, _OPENAI, "2024-12"),
    PriceRow("provider:openai", "openai", 1.25, 0.1, 1.0, 300.0, 1024, _OPENAI + " (GPT-5 rates)", "2025-08"),
    # Anthropic (minimum lengths by model: provider.ANTHROPIC_MIN_TOKENS). Read multipliers differ per model
    # since the 5 generation (Fable/Mythos 5.1+ 0.025×, Opus 5.5 and Sonnet 5.5 0.05×); 5 min writes 1.25×,
    # 1 h writes 2× everywhere (rules.ANTHROPIC_WRITE_1H).
    PriceRow("*fable-5-2-*", "anthropic", 8.0, 0.025, 1.25, 300.0, None, _ANTHROPIC_52, "2026-12"),
    PriceRow("*mythos-5-2-*", "anthropic", 8.0, 0.025, 1.25, 300.0, None, _ANTHROPIC_52, "2026-12"),
    PriceRow("*fable-5-1-*", "anthropic", 10.0, 0.025, 1.25, 300.0, None, _ANTHROPIC_PAGE, "2026-12"),
    PriceRow("*mythos-5-1-*", "anthropic", 10.0, 0.025, 1.25, 300.0, None, _ANTHROPIC_PAGE, "2026-12"),
    PriceRow("*fable-5-*", "anthropic", 10.0, 0.1, 1.25, 300.0, None, _ANTHROPIC_PAGE, "2026-12"),
    PriceRow("*mythos-5-*", "anthropic", 10.0, 0.1, 1.25, 300.0, None, _ANTHROPIC_PAGE, "2026-12"),
    PriceRow("*opus-5-5-*", "anthropic", 4.0, 0.05, 1.25, 300.0, None, _ANTHROPIC_OPUS55, "2026-12"),
    PriceRow("*opus-5-*", "anthropic", 5.0, 0.1, 1.25, 300.0, None, _ANTHROPIC_PAGE, "2026-12"),
    PriceRow("*opus-4-[5-9]-*", "anthropic", 5.0, 0.1, 1.25, 300.0, None, _ANTHROPIC_PAGE + " (Opus 4.5–4.8)",
             "2026-12"),
    PriceRow("*opus-4*", "anthropic", 15.0, 0.1, 1.25, 300.0, None, _ANTHROPIC_PAGE + " (Opus 4, 4.1)", "2026-12"),
    PriceRow("*3-opus*", "anthropic", 15.0, 0.1, 1.25, 300.0, None, _ANTHROPIC, "2024-03"),
    PriceRow("*opus*", "anthropic", 4.0, 0.05, 1.25, 300.0, None, _ANTHROPIC_OPUS_NEXT, "2026-12"),
    PriceRow("*sonnet-5-5-*", "anthropic", 2.0, 0.05, 1.25, 300.0, None, _ANTHROPIC_SONNET55, "2026-12"),
    PriceRow("*sonnet-5-*", "anthropic", 2.0, 0.1, 1.25, 300.0, None, _ANTHROPIC_PAGE + " (Sonnet 5)", "2026-12"),
    PriceRow("*haiku-5-5-*", "anthropic", 0.10, 0.1, 1.25, 300.0, None, _ANTHROPIC_HAIKU55, "2026-12"),
    PriceRow("*haiku-4-5*", "anthropic", 1.0, 0.1, 1.25, 300.0, None, _ANTHROPIC, "2025-10"),
    PriceRow("*3-5-haiku*", "anthropic", 0.80, 0.1, 1.25, 300.0, None, _ANTHROPIC, "2024-11"),
    PriceRow("*haiku-3-5*", "anthropic", 0.80, 0.1, 1.25, 300.0, None, _ANTHROPIC, "2024-11"),
    PriceRow("*3-haiku*", "anthropic", 0.25, 0.1, 1.25, 300.0, None, _ANTHROPIC, "2024-03"),
    PriceRow("*sonnet*", "anthropic", 3.0, 0.1, 1.25, 300.0, None, _ANTHROPIC, "2025-09"),  # Sonnet 3.x and 4.x
    PriceRow("provider:anthropic", "anthropic", 3.0, 0.1, 1.25, 300.0, None, _ANTHROPIC + " (Sonnet rates)",
             "2025-09"),
    # Gemini: implicit caching (minimums by model: rules.GEMINI_MIN_TOKENS); retention not documented for implicit
    # caches, explicit caches default to 1 h (we take 1 h).
    PriceRow("gemini-3.5-flash*", "gemini", 1.50, 0.1, 1.0, 3600.0, None, _GEMINI + " (3.5 Flash $1.50)", "2026-12"),
    PriceRow("gemini-3.1-pro*", "gemini", 2.00, 0.1, 1.0, 3600.0, None, _GEMINI + " (3.1 Pro $2, ≤ 200K)", "2026-12"),
    PriceRow("gemini-3.1-flash-lite*", "gemini", 0.25, 0.1, 1.0, 3600.0, None, _GEMINI + " (3.1 Flash-Lite $0.25)",
             "2026-12"),
    PriceRow("gemini-3-pro*", "gemini", 2.00, 0.1, 1.0, 3600.0, None, _GEMINI + " (3 Pro $2, ≤ 200K)", "2026-12"),
    PriceRow("gemini-3-flash*", "gemini", 0.50, 0.1, 1.0, 3600.0, None, _GEMINI + " (3 Flash $0.50, cached $0.05)",
             "2026-12"),
    PriceRow("gemini-2.5-pro*", "gemini", 1.25, 0.1, 1.0, 3600.0, None, _GEMINI + " (2.5 Pro $1.25, ≤ 200K)", "2026-12"),
    PriceRow("gemini-2.5-flash-lite*", "gemini", 0.10, 0.1, 1.0, 3600.0, None, _GEMINI + " (2.5 Flash-Lite $0.10)",
             "2026-12"),
    PriceRow("gemini-2.5-flash*", "gemini", 0.30, 0.1, 1.0, 3600.0, None, _GEMINI + " (2.5 Flash $0.30)", "2026-12"),
    PriceRow("provider:gemini", "gemini", 1.25, 0.1, 1.0, 3600.0, None, _GEMINI + " (2.5 Pro rates)", "2026-12"),
    # DeepSeek: 64-token units, retention of hours to days.
    PriceRow("deepseek*", "deepseek", 0.28, 0.1, 1.0, 86400.0, 64, _DEEPSEEK, "2025-09"),
    PriceRow("provider:deepseek", "deepseek", 0.28, 0.1, 1.0, 86400.0, 64, _DEEPSEEK, "2025-09"),
)


_SEPARATORS = str.maketrans({c: "-" for c in "[]@:/ "})


def _key(model: str | None) -> str:
    """``model`` as the patterns match it: lower case, separators as ``-``, one ``-`` appended
    ("" for no model)."""
    return (model or "").lower().translate(_SEPARATORS).rstrip("-") + "-" if model else ""


def price_for(provider: str, model: str | None) -> PriceRow:
    """The row of ``model`` (case-insensitive glob match, first wins, rows of ``provider``
    only), else ``provider:<provider>``. KeyError for a provider without a default row."""
    m = _key(model)
    if m:
        for row in PRICES:
            if row.provider == provider and not row.pattern.startswith("provider:") and fnmatchcase(m, row.pattern):
                return row
    return next(r for r in PRICES if r.pattern == f"provider:{provider}")


def provider_of(model: str | None) -> str | None:
    """The provider whose price rows name ``model`` (the first matching row of any provider,
    provider defaults left out); None for no model or a name no row matches."""
    m = _key(model)
    return next((r.provider for r in PRICES if m and not r.pattern.startswith("provider:")
                 and fnmatchcase(m, r.pattern)), None)


#: Rows that price a family's versions no row names (never checked for a model of their own): warned about.
FAMILY_FALLBACKS = ("*opus*",)

#: The newest version of each model family the table was checked against (``family regex``,
#: version): a logged model with a later version is priced with an older row and warned about.
NEWEST_LISTED: tuple[tuple[str, tuple[int, ...]], ...] = (
    (r"gpt-(\d+)(?:\.(\d+))?", (6, 1)),
    (r"gemini-(\d+)(?:\.(\d+))?", (3, 5)),
    (r"claude-(?:opus|sonnet|haiku)-(\d+)(?:-(\d{1,2}))?(?!\d)", (5, 5)),
    (r"claude-(?:fable|mythos)-(\d+)(?:-(\d{1,2}))?(?!\d)", (5, 2)),
)


def price_warning(provider: str, model: str | None) -> str | None:
    """A warning when ``model`` is priced with a row that was not checked for it: no row of
    ``provider`` names it (the provider's default row is used), or its version is later than
    the newest its family lists (:data:`NEWEST_LISTED`); the line names the row used. None otherwise."""
    if not model:
        return None
    row = price_for(provider, model)
    used = f"priced with the {row.pattern} row (${row.input:g}/MTok, reads {row.read:g}×, {row.date})"
    if row.pattern.startswith("provider:"):
        return f"no {provider} price row names model {model!r}: {used}"
    key = model.lower()
    for pattern, newest in NEWEST_LISTED:
        m = re.search(pattern, key)
        if m is None:
            continue
        version = tuple(int(g) for g in m.groups() if g is not None)
        if version > newest:
            listed = ".".join(map(str, newest))
            return f"model {model!r} is newer than any price row (newest listed: {listed}): {used}"
        break
    if row.pattern in FAMILY_FALLBACKS:
        return f"no {provider} price row names model {model!r}: {used}"
    return None
