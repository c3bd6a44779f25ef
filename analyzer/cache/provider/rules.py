"""Provider prompt-cache rules (OpenAI, Anthropic, Gemini, DeepSeek): the constants and the rule set by model.

Every constant lives in :data:`PROVIDERS` / :data:`ANTHROPIC_MIN_TOKENS` below, with
its source, so a rule change is a one-line edit. Sources: each provider's prompt
caching documentation as of 2026 (named in every entry's ``source``).

* **OpenAI up to GPT-5.5** — automatic for prompts ≥ 1,024 tokens; the cached prefix
  grows in 128-token steps (so a hit is 0 or 1,024 + k·128); exact prefix only; kept
  in memory for 5–10 min of inactivity (we take 5 min, refreshed on hit). Modeled
  as a 128-token block chain (:class:`~.block_hash.BlockHashCache`). gpt-5.5 reports
  its reads in 512·k − 128 (measured, :data:`OPENAI_GPT55_READ`): the provider rule's band
  uses that unit; the simulated chain keeps 128-token blocks.
* **OpenAI GPT-5.6 and later** (chosen by model name, :func:`openai_breakpoints`) —
  explicit breakpoints (``prompt_cache_breakpoint`` on content blocks, plus one
  implicit one at the end of the newest message unless ``prompt_cache_options.mode``
  is ``explicit``); up to 4 written per request, the latest 80 of the conversation
  considered for matching with no lookback limit, exact (not block-rounded)
  prefixes; ``prompt_cache_options.ttl`` 30 min; writes billed 1.25× and reported
  as ``cache_write_tokens``. Modeled by :class:`~.caches.AnthropicCache` with those limits.
* **Gemini** (implicit caching, 2.5 and later) — automatic, no cost guarantee; the
  minimum prompt by model (:data:`GEMINI_MIN_TOKENS`); retention not documented (we
  take the 1 h of explicit caches); the reported cached count is not in fixed units and
  moves by up to 1% between calls that read one prefix (measured on the one real Gemini
  CLI log we have). Modeled as a 1-token chain. Explicit caches (``cachedContents``)
  are not modeled: a log does not say which calls used one.
* **DeepSeek** — on by default, 64-token storage units, content under 64 tokens is
  not cached, longest common prefix from token 0, cleared after hours to days
  unused (we take 24 h). A 64-token block chain. ``deepseek-chat`` stores the
  prompt **and the generated tokens** of a call (cached(k) = 64·⌊(prompt(k−1) +
  completion(k−1))/64⌋ when the write is visible); ``deepseek-reasoner`` the prompt
  only (``real-engines.md``, Providers; measured on real trajectories).
* **Anthropic** — explicit ``cache_control`` breakpoints (at most 4 slots; automatic
  caching, a top-level ``cache_control``, puts one on the last cacheable block and takes
  one slot). No breakpoint, no caching: nothing is written or read. A cache entry is the
  exact prefix up to a breakpoint, per model (a model switch is a new cache; a thinking
  or ``tool_choice`` change invalidates the message entries, not tools and system); a
  lookup at a breakpoint also checks the 20 content blocks before it for an entry; the
  longest hit is read. Entries live 5 min (or 1 h) and are refreshed free on each hit.
  Prefixes shorter than the model's minimum cacheable length
  (:data:`ANTHROPIC_MIN_TOKENS`) are neither written nor read. Writes cost 1.25× (5 min)
  or 2× (1 h) the base input price, reads 0.1× (0.05× on some models: the price row).

Prices are USD per million input tokens, from the one table keyed by model pattern
(:mod:`.prices`); every one is still a CLI option (``--price-input``,
``--price-read``, ``--price-write``) that overrides the table. The caches that apply
these rules are in :mod:`.caches`, the cost arithmetic in :mod:`.cost`.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass, replace

from prefixcache.analyzer.errors import ConfigError
from prefixcache.analyzer.cache.provider.prices import price_for


@dataclass(frozen=True, slots=True)
class ProviderRules:
    """One provider's caching constants.

    ``block_size``: hit granularity (tokens; the provider's storage unit); ``min_tokens``: shortest prompt (or
    breakpoint prefix) that is cached; ``ttl_s``: idle retention, refreshed on hit;
    ``price_input``: base $/MTok; ``read_multiplier`` / ``write_multiplier``: cache
    read / write price relative to the base; ``max_breakpoints`` and
    ``lookback_blocks``: breakpoint rules (0 = automatic prefix caching; lookback −1 =
    no limit); ``considered_breakpoints``: how many of the conversation's latest
    breakpoint entries are matched (0 = all); ``stores_output``: the provider also
    stores the generated tokens of a call (``deepseek-chat``); ``rule_set``: which
    rule set applies (``openai-automatic``, ``openai-breakpoints``, ...);
    ``price_source`` / ``price_date``: the price row used (:mod:`.prices`);
    ``output_band``: the band's expected end counts the previous call's generated tokens
    (the provider keeps the KV of what it generated; OpenAI automatic caching, measured on
    real Codex rollouts, :mod:`~prefixcache.analyzer.cache.simulate.bands`); ``report_slack``:
    how far (a fraction) the provider's reported cached count for one prefix moves between
    calls (Gemini), taken off the band's lagged end; ``ttl_max_s``: the longest the provider
    may keep an idle entry when ``ttl_s`` is only its usual retention (OpenAI: 5–10 min,
    always within 1 h; None: ``ttl_s``); ``read_unit`` / ``read_offset``: the unit (tokens) a
    reported read comes in when it is not ``block_size`` (0: ``block_size``), counted from
    ``read_offset`` tokens before the billed prompt's start: a read is ``read_unit``·k −
    ``read_offset`` (OpenAI gpt-5.5: 512 and 128, :data:`OPENAI_GPT55_READ`).
    """

    name: str
    block_size: int
    min_tokens: int
    ttl_s: float
    price_input: float
    read_multiplier: float
    write_multiplier: float = 1.0
    max_breakpoints: int = 0
    lookback_blocks: int = 0
    source: str = ""
    considered_breakpoints: int = 0
    stores_output: bool = False
    rule_set: str = ""
    price_source: str = ""
    price_date: str = ""
    output_band: bool = False
    report_slack: float = 0.0
    ttl_max_s: float | None = None
    read_unit: int = 0
    read_offset: int = 0


#: The constants table (edit here when a provider changes its rules).
PROVIDERS: dict[str, ProviderRules] = {
    "openai": ProviderRules(
        "openai", block_size=128, min_tokens=1024, ttl_s=300.0,
        price_input=1.25, read_multiplier=0.1, write_multiplier=1.0,
        source="platform.openai.com prompt caching guide: ≥1,024 tokens, 128-token increments, "
               "5–10 min idle (≤1 h); GPT-5 $1.25/MTok input, cached 0.1× (gpt-4o era 0.5×)"),
    "anthropic": ProviderRules(
        "anthropic", block_size=1, min_tokens=1024, ttl_s=300.0,
        price_input=3.0, read_multiplier=0.1, write_multiplier=1.25,
        max_breakpoints=4, lookback_blocks=20,
        source="platform.claude.com prompt caching: ≤4 breakpoints, ~20-block lookback, "
               "5 min TTL refreshed on hit (1 h: write 2×), write 1.25×, read 0.1×; Sonnet $3/MTok"),
    "gemini": ProviderRules(
        "gemini", block_size=1, min_tokens=2048, ttl_s=3600.0,
        price_input=1.25, read_multiplier=0.1, write_multiplier=1.0, report_slack=0.01,
        source="ai.google.dev/gemini-api/docs/caching (checked 2026-12-04): implicit caching on by default for "
               "Gemini 2.5 and later, no cost guarantee, minimum prompt by model (2.5: 2,048 listed, 1,024 enforced "
               "for 2.5 Flash; 3.x: 4,096); retention not documented (explicit caches default to 1 h, we take 1 h); "
               "cached input 0.1×; the reported count is not in fixed units"),
    "deepseek": ProviderRules(
        "deepseek", block_size=64, min_tokens=64, ttl_s=86400.0,
        price_input=0.14, read_multiplier=0.1, write_multiplier=1.0,
        source="api-docs.deepseek.com context caching (2024): 64-token units, <64 tokens not cached, "
               "hours to days retention; hit $0.014 vs miss $0.14 per MTok"),
}

#: Anthropic minimum cacheable prompt length by model-name fragment (first match wins; unlisted Claude
#: models: the rules' 1,024). Checked 2026-12-07: the prompt caching page's list as quoted in
#: anthropic-sdk-python#1194 (4,096 Opus 4.6 / 4.5 and Haiku 4.5; 1,024 Sonnet 4.6 / 4.5, Opus 4.1 / 4,
#: Sonnet 4 and 3.7; 2,048 Haiku 3.5 / 3 — that issue reports 2,048 observed on Sonnet 4.6, we keep the
#: documented figure), "What's new in Claude Opus 4.8" (1,024, "lower" than Opus 4.7's), and for Opus 4.7
#: (2,048) and the 5 family (512 Opus 5 / 5.5, Fable 5.x, Mythos 5.x; 1,024 Sonnet 5 / 5.5) the page as
#: quoted by dev.to (creeta, 2026) and promptcachelint 0.1.0. Haiku 5.5: not found, the default.
ANTHROPIC_MIN_TOKENS: tuple[tuple[str, int], ...] = (
    ("opus-4-5", 4096), ("opus-4-6", 4096), ("haiku-4-5", 4096), ("opus-4-7", 2048), ("opus-4-8", 1024),
    ("sonnet-4-6", 1024), ("haiku-3-5", 2048), ("3-5-haiku", 2048), ("haiku-3", 2048), ("3-haiku", 2048),
    ("sonnet-4-5", 1024), ("sonnet-4", 1024), ("opus-4-1", 1024), ("opus-4", 1024),
    ("sonnet-3-7", 1024), ("3-7-sonnet", 1024), ("3-5-sonnet", 1024), ("sonnet-3-5", 1024),
    ("opus-5", 512), ("fable-5", 512), ("mythos-5", 512), ("sonnet-5", 1024),
)
#: Gemini minimum prompt for implicit caching by model-name fragment (first match wins): the caching page
#: (ai.google.dev/gemini-api/docs/caching, checked 2026-12-04) lists 4,096 for 3.x and later, 2,048 for 2.5
#: Pro; the API enforces 1,024 for 2.5 Flash and 2,048 for 2.5 Flash-Lite (its own 400 error quoted on
#: discuss.ai.google.dev, "min_total_token_count=1024"). Unlisted names: the rules' 2,048.
GEMINI_MIN_TOKENS: tuple[tuple[str, int], ...] = (
    ("gemini-2.5-flash-lite", 2048), ("gemini-2.5-flash", 1024), ("gemini-2.5-pro", 2048),
    ("gemini-3", 4096), ("gemini-4", 4096),
)
#: Anthropic write multiplier for the 1-hour TTL.
ANTHROPIC_WRITE_1H = 2.0
ANTHROPIC_TTL_1H_S = 3600.0


#: GPT-5.6+ limits: breakpoints written per request, latest breakpoints considered, retention (s).
OPENAI_BREAKPOINTS_WRITTEN = 4
OPENAI_BREAKPOINTS_CONSIDERED = 80
OPENAI_TTL_S = 1800.0
#: OpenAI automatic caching: entries are cleared after 5–10 min idle, always within 1 h (s).
OPENAI_TTL_MAX_S = 3600.0
#: OpenAI gpt-5.5 (automatic caching): a reported read is 512·k − 128 tokens — every non-zero
#: read of the committed real gpt-5.5 Codex rollout (48 of 48, Codex 0.125) is ≡ 384 (mod 512),
#: where gpt-5.3-codex reads fall on any 128-token step (docs/methods/provider-rules.md, "What
#: OpenAI stores, measured"): ``(read_unit, read_offset)``.
OPENAI_GPT55_READ = (512, 128)
_GPT = re.compile(r"gpt-(\d+)(?:\.(\d+))?")


def openai_breakpoints(model: str | None) -> bool:
    """True for the models with explicit breakpoints (GPT-5.6 and later, by name:
    ``gpt-5.6``, ``gpt-5.7-mini``, ``gpt-6``...); False for GPT-5.5 and earlier,
    GPT-4o/4.1, the o-series and unknown names (the automatic 128-token rule)."""
    v = _gpt_version(model)
    return v is not None and v >= (5, 6)


def openai_read_unit(model: str | None) -> tuple[int, int]:
    """``(read_unit, read_offset)`` of an OpenAI automatic-cache model (:class:`ProviderRules`):
    :data:`OPENAI_GPT55_READ` for gpt-5.5, ``(0, 0)`` (the 128-token steps) for the others."""
    return OPENAI_GPT55_READ if _gpt_version(model) == (5, 5) else (0, 0)


def _gpt_version(model: str | None) -> tuple[int, int] | None:
    """``(major, minor)`` of a ``gpt-N[.M]`` model name (``gpt-5.5-codex`` → (5, 5)); None for other names."""
    m = _GPT.search((model or "").lower())
    return None if m is None else (int(m.group(1)), int(m.group(2) or 0))


def _deepseek_stores_output(model: str | None) -> bool:
    """``deepseek-chat`` (and V3 chat names) store prompt + generated tokens; reasoner models the prompt only."""
    m = (model or "").lower()
    return bool(m) and "reasoner" not in m and "r1" not in m and "thinking" not in m


def rules_for(provider: str, model: str | None = None, **overrides) -> ProviderRules:
    """The rules of ``provider`` for ``model``: the model's price row (:func:`.prices.price_for`:
    input price, read/write multipliers, retention, minimum), its rule set (OpenAI
    GPT-5.6+ breakpoints, DeepSeek chat storing output), the model's minimum length
    (Anthropic), then any non-None ``overrides`` (field names of :class:`ProviderRules`).
    ConfigError for an unknown provider."""
    if provider not in PROVIDERS:
        raise ConfigError(f"unknown provider {provider!r}; choose one of {', '.join(PROVIDERS)}")
    rules = _model_rules(provider, model)
    given = {k: v for k, v in overrides.items() if v is not None}
    return replace(rules, **given) if given else rules


@functools.lru_cache(maxsize=1024)
def _model_rules(provider: str, model: str | None) -> ProviderRules:
    """:func:`rules_for` without overrides, once per (provider, model): lint asks for every
    request (``provider_minimum``, ``provider_ttl``). The rules are frozen, so one object serves all."""
    rules = PROVIDERS[provider]
    row = price_for(provider, model)
    rules = replace(rules, price_input=row.input, read_multiplier=row.read, write_multiplier=row.write,
                    ttl_s=row.ttl_s, min_tokens=rules.min_tokens if row.min_tokens is None else row.min_tokens,
                    price_source=f"{row.pattern}: {row.source}", price_date=row.date,
                    rule_set=f"{provider}-breakpoints" if provider == "anthropic" else f"{provider}-automatic")
    minimums = {"anthropic": ANTHROPIC_MIN_TOKENS, "gemini": GEMINI_MIN_TOKENS}.get(provider, ())
    n = next((n for frag, n in minimums if frag in (model or "").lower()), None)
    if n is not None:
        rules = replace(rules, min_tokens=n)
    if provider == "openai":
        rules = replace(rules, output_band=True, ttl_max_s=OPENAI_TTL_MAX_S)
        unit, offset = openai_read_unit(model)
        rules = replace(rules, read_unit=unit, read_offset=offset)
    if provider == "openai" and openai_breakpoints(model):
        rules = replace(rules, block_size=1, max_breakpoints=OPENAI_BREAKPOINTS_WRITTEN, lookback_blocks=-1, ttl_max_s=None,
                        considered_breakpoints=OPENAI_BREAKPOINTS_CONSIDERED, rule_set="openai-breakpoints")
    if provider == "deepseek" and _deepseek_stores_output(model):
        rules = replace(rules, stores_output=True, rule_set="deepseek-prompt+output")
    return rules


@dataclass(frozen=True, slots=True)
class Retention:
    """One retention a provider sells: ``label``, idle ``ttl_s`` (seconds, refreshed on hit;
    None = the rule set's own, :attr:`ProviderRules.ttl_s`), the write price multiplier it
    bills (None = the rules' or the breakpoint marks' own) and its ``source``."""

    label: str
    ttl_s: float | None
    write_multiplier: float | None
    source: str


#: The retentions of each provider that ``simulate --ttl-whatif`` compares, the default
#: (``ttl_s`` None: what ``simulate`` applies) first. Checked 2026 against the providers' docs.
RETENTIONS: dict[str, tuple[Retention, ...]] = {
    "anthropic": (
        Retention("5m", None, None, "platform.claude.com prompt caching: 5 min default, refreshed on hit, write 1.25×"),
        Retention("1h", ANTHROPIC_TTL_1H_S, ANTHROPIC_WRITE_1H,
                  "platform.claude.com prompt caching: cache_control ttl 1h, write 2× base input, read 0.1×"),
    ),
    "openai": (
        Retention("in-memory", None, None, "platform.openai.com prompt caching: in_memory retention, cleared "
                  "after 5–10 min idle, always within 1 h (GPT-5.6+: 30 min)"),
        Retention("24h", 86400.0, None, "platform.openai.com prompt caching: prompt_cache_retention 24h "
                  "(extended), same price as in-memory (learn.microsoft.com Azure OpenAI prompt caching)"),
    ),
    "gemini": (
        Retention("1h", None, None, "ai.google.dev caching: implicit retention not documented; explicit caches "
                  "default to a 1 h TTL"),
        Retention("5m", 300.0, None, "a short implicit retention, for comparison (not documented)"),
    ),
    "deepseek": (
        Retention("24h", None, None, "api-docs.deepseek.com context caching: cleared after hours to days unused "
                  "(we take 24 h)"),
        Retention("1h", 3600.0, None, "api-docs.deepseek.com context caching: the low end, 'a few hours'"),
    ),
}
