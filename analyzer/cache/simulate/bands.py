"""Provider rules from the log's own usage: what a call reads given the previous call of its thread.

A provider's cache write lands asynchronously, and our tokens only approximate the
provider's (Claude's tokenizer is not public), so besides the simulated prediction
each call gets an **expected** count in the provider's own tokens from the previous
call of the same thread (session) and a **lagged** one — what it reads if that
previous write had not landed yet: the band ``[lagged, expected]``. The rules
(``real-engines.md``, Providers; measured on real logs):

* **Anthropic** and **OpenAI GPT-5.6+** (breakpoints): read(k) = read(k−1) +
  write(k−1) = prompt(k−1) − input_tokens(k−1): the previous request's prefix up to
  its last breakpoint, never its uncached tail. Lagged: read(k−1).
* **DeepSeek**: 64·⌊(prompt(k−1) + completion(k−1))/64⌋ for ``deepseek-chat`` (it
  stores prompt + generated tokens), 64·⌊prompt(k−1)/64⌋ for ``deepseek-reasoner``.
  Lagged: cached(k−1) (the older write is all that is visible).
* **OpenAI up to GPT-5.5** (automatic): the provider keeps the KV of what it generated
  too: expected = prompt(k−1) + completion(k−1) in 128-token steps from 1,024; lagged =
  prompt(k−1) in those steps (the prefix it was certainly sent). Measured on six real
  Codex rollouts (gpt-5.3-codex, 485 calls): the reported count equals 128·⌊(prompt(k−1) +
  completion(k−1))/128⌋ on most calls, one step less on some (tokens of the output
  not sent back), and an older prefix or 0 on the rest: the request reached a machine
  without the prefix (a provider-side miss, :mod:`.provider_calls`). **gpt-5.5** reads come
  in 512·k − 128 instead (every non-zero read of the committed real gpt-5.5 rollout is ≡ 384
  mod 512; :func:`~.provider.rules.openai_read_unit`): both ends are 512·⌊(n + 128)/512⌋ − 128 of
  the same n, the unit of the model serving the call.
* **Gemini** (implicit): expected = prompt(k−1) (no fixed units); lagged = cached(k−1)
  less 1% (``report_slack``: the reported count of one prefix moves by up to 1% between
  calls, measured on the one real Gemini CLI log we have, so this figure is fitted to it).

A rule applies ("in-thread") only when our tokens show that the call extends the
previous call's prompt up to its last breakpoint (DeepSeek chat: up to its prompt) and,
for Anthropic, the call can read that entry — it has a breakpoint (``cache_control`` or
automatic caching; none when the log shows none) whose 20-block lookback reaches it — and
the previous call is the thread's latest under the same cache scope (model, thinking,
``tool_choice``: a model switch is a new cache),
the previous call reported its usage, and the gap is within the retention; the
expected count is capped at the call's own reported prompt. Automatic caches also take
the rule when our tokens show a change but the provider read inside its band
(``usage-confirmed``): an automatic cache serves only an unchanged prefix, so the change
is in our rendering (a prompt we render only in part, such as Codex's), not in the
billed prompt. After a gap past the provider's usual retention but within its longest
(OpenAI: 5–10 min, always within 1 h) the rule is ``in-thread-idle``: ``lagged`` is the
in-thread lower end, but the entry may have been cleared, so the band that holds the
truth is ``[0, expected]`` (``CallRow.inside_band`` judges it so) and a read below
``lagged`` is a TTL miss (:mod:`.provider_calls`). Other calls (a thread's
first call, a changed prefix) keep the simulated prediction as both ends of the band.

**Hidden prefixes at breakpoints** (breakpoint caches; Claude Code's unlogged system
prompt and tools, ``real-engines.md``, Providers). A hidden prefix is sized from the
first call's usage (reported prompt minus our tokens for the logged messages), so it
also absorbs unlogged *first-turn* content (injected context) that was never at a
breakpoint: a later thread's first call that reads only the shared hidden prefix
reads less than that size (on the Claude Code sample 11,381 where the size says
11,667–11,670). Its size in provider tokens is known only from an earlier call that
read exactly the hidden prefix — an entry at its breakpoint, written by a call whose
write had landed — and whose own response had landed before this call was sent; never
from the call's own usage. With such a measurement the call is
``hidden-prefix-measured`` (the measured size at both ends); without one it is
``hidden-prefix-unsized``: band ``[0, simulated]`` — 0 if no write had landed or all
of the size is first-turn content, the simulated figure if none is — which holds the
truth, rather than a confident wrong figure.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Mapping, Sequence

from prefixcache.analyzer.cache.base import floor_blocks
from prefixcache.analyzer.cache.provider.caches import AnthropicCache
from prefixcache.analyzer.cache.provider.rules import ProviderRules, openai_read_unit
from prefixcache.analyzer.cache.workload import SimRequest


@dataclass(frozen=True, slots=True)
class Band:
    """One call's expected cached tokens (provider tokens) and the lagged end of its band;
    ``rule``: one of :data:`RULES` (module docstring)."""

    lagged: int
    expected: int
    rule: str


#: Band rules (``CallRow.rule``): the in-thread usage rule, the same rule where our tokens show a change
#: that the provider's own count contradicts (``usage-confirmed``), the rule after a gap past the usual
#: retention but within the longest (``in-thread-idle``: the band's real lower end is 0), the simulated
#: prediction, and a
#: thread's first call reading only a hidden prefix whose size was / was not measured earlier.
RULES = ("in-thread", "usage-confirmed", "in-thread-idle", "simulated", "hidden-prefix-measured",
         "hidden-prefix-unsized")


def _anthropic(rules: ProviderRules) -> bool:
    return rules.rule_set == "anthropic-breakpoints"


def _marks(r: SimRequest, rules: ProviderRules):
    """The breakpoints the provider applies to ``r`` (Anthropic: none when the log shows it set none)."""
    return r.anthropic_breakpoints if _anthropic(rules) else r.breakpoints


def _last_mark(r: SimRequest, rules: ProviderRules) -> int:
    """Where the previous call's cached prefix ends in our tokens: its last breakpoint
    (breakpoint caches), else its whole prompt."""
    bps = _marks(r, rules)
    if rules.max_breakpoints and bps:
        return max(bp.end for bp in bps)
    return r.num_tokens


def _reads_from(r: SimRequest, end: int, rules: ProviderRules) -> bool:
    """Whether ``r`` can read an entry ending at ``end`` (Anthropic): it has a breakpoint whose
    20-block lookback reaches ``end``. Other rule sets: always."""
    if not _anthropic(rules):
        return True
    return AnthropicCache(rules).reachable(end, r.boundaries, r.anthropic_breakpoints, r.num_tokens, r.blocks())


def _extends(r: SimRequest, prev: SimRequest, end: int) -> bool:
    """Whether ``r`` starts with ``prev``'s first ``end`` tokens."""
    if r.tokens is None or prev.tokens is None or end > r.num_tokens:
        return False
    return r.tokens[:end] == prev.tokens[:end]


def _steps(rules: ProviderRules, n: int) -> int:
    """``n`` tokens as the provider caches them: 0 under the minimum, else in its units
    (OpenAI: 1,024 then 128-token steps; gpt-5.5: 512·k − 128, ``rules.read_unit`` / ``read_offset``)."""
    unit = rules.block_size
    if n < rules.min_tokens:
        return 0
    if rules.read_unit:
        got = floor_blocks(n + rules.read_offset, rules.read_unit) - rules.read_offset
        return got if got >= rules.min_tokens else 0
    if rules.min_tokens > unit > 1:  # OpenAI: 1,024 then 128-token steps
        return rules.min_tokens + floor_blocks(n - rules.min_tokens, unit)
    return floor_blocks(n, unit)


def _reading(rules: ProviderRules, model: str | None) -> ProviderRules:
    """``rules`` with the read unit of the model that serves a call (OpenAI automatic caches:
    gpt-5.5 reads come in 512·k − 128, :func:`~.provider.rules.openai_read_unit`; a mixed-model run
    is simulated under one model's rules)."""
    if rules.name != "openai" or rules.max_breakpoints:
        return rules
    unit, offset = openai_read_unit(model)
    return rules if (unit, offset) == (rules.read_unit, rules.read_offset) else \
        replace(rules, read_unit=unit, read_offset=offset)


def _expected(rules: ProviderRules, prev: SimRequest) -> tuple[int, int] | None:
    """The rule's ``(lagged, expected)`` from the previous call's reported usage (None: not enough
    usage; the lagged end before the cap at the call's own prompt). See the module docstring."""
    p, c = prev.reported_prompt, prev.reported_cached
    if p is None or c is None:
        return None
    if rules.max_breakpoints:
        if prev.reported_write is None:
            return None
        return c, c + prev.reported_write
    if rules.stores_output and prev.reported_output is None:
        return None
    if rules.output_band:  # OpenAI: the prompt it was sent, up to that plus what it generated
        return _steps(rules, p), _steps(rules, p + (prev.reported_output or 0))
    n = p + ((prev.reported_output or 0) if rules.stores_output else 0)
    return int(c * (1 - rules.report_slack)), _steps(rules, n)


def _confirmed(rules: ProviderRules, r: SimRequest, lag: int, exp: int) -> bool:
    """Whether the provider's own count shows that ``r``'s billed prompt extends the previous
    call's although our tokens differ (automatic caches: a read inside the in-thread band, at
    least one unit above the minimum, is a prefix the provider found unchanged)."""
    rep = r.reported_cached
    return not rules.max_breakpoints and rep is not None and lag <= rep <= exp and rep > rules.min_tokens


def hidden_end(r: SimRequest) -> int:
    """Where ``r``'s hidden prefix (leading pseudo-token ids, negative) ends, in our tokens; 0 without one."""
    t = r.tokens
    if not t or t[0] >= 0:
        return 0
    for b in r.boundaries:
        if t[b - 1] < 0 and (b == len(t) or t[b] >= 0):
            return b
    return next((i for i, x in enumerate(t) if x >= 0), len(t))


class HiddenSizes:
    """Sizes (provider tokens) of hidden prefixes measured by calls that read exactly their
    hidden prefix, each visible from when its response landed (see the module docstring).
    A hidden prefix is named by its first pseudo-token id (equal keys, equal ids)."""

    def __init__(self) -> None:
        self._seen: dict[int, list[tuple[float, int, int]]] = {}  # key -> [(landed, order, size)]

    def measure(self, r: SimRequest, raw: int, end: int) -> None:
        """Record ``r``'s reported read as its hidden prefix's size when our simulation read
        exactly the hidden prefix (``raw == end``) and the provider read part of the prompt."""
        rep, prompt = r.reported_cached, r.reported_prompt
        if end and raw == end and rep and (prompt is None or rep < prompt) and r.tokens:
            self._seen.setdefault(r.tokens[0], []).append((r.now, r.order, rep))

    def size(self, r: SimRequest) -> int | None:
        """The latest size measured before ``r`` by a call whose response had landed when
        ``r`` was sent (arrival order when its send time is not logged); None if none."""
        if not r.tokens:
            return None
        got = [(o, n) for landed, o, n in self._seen.get(r.tokens[0], ())
               if o < r.order and (r.sent is None or landed <= r.sent)]
        return max(got)[1] if got else None


#: Logged ``prompt_cache_retention`` values (OpenAI) → the idle retention they buy (seconds;
#: platform.openai.com prompt caching: ``in_memory`` the default, ``24h`` extended).
RETENTION_S = {"24h": 86400.0}


def retention_of(extra: object) -> float | None:
    """The retention (seconds) a request's logged ``prompt_cache_retention`` asks for (None: not
    logged, or the default)."""
    return RETENTION_S.get(str(extra.get("prompt_cache_retention"))) if isinstance(extra, Mapping) else None


def bands(reqs: Sequence[SimRequest], simulated: Sequence[int], rules: ProviderRules,
          raw: Sequence[int] | None = None, retention: Sequence[float | None] | None = None) -> list[Band]:
    """The band of every request (arrival order) given its simulated (calibrated)
    prediction ``simulated`` in provider tokens and ``raw``, the same in our tokens (needed
    for the hidden-prefix rules of breakpoint caches; None: not applied). See the module
    docstring."""
    prev_of: dict[object, SimRequest] = {}
    sizes = HiddenSizes()
    out = []
    for i, (r, sim) in enumerate(zip(reqs, simulated)):
        thread = (r.session, r.scope) if _anthropic(rules) else r.session  # a model switch is another cache
        prev = prev_of.get(thread)
        prev_of[thread] = r
        band = Band(sim, sim, "simulated")
        kept = retention[prev.order] if retention is not None and prev is not None else None
        ttl, ttl_max = (kept, kept) if kept else (rules.ttl_s, rules.ttl_max_s or rules.ttl_s)
        idle = prev is not None and ttl < r.now - prev.now <= ttl_max
        if prev is not None and (r.now - prev.now <= ttl or idle):
            got = _expected(_reading(rules, r.model), prev)
            if got is not None:
                lag, exp = got
                exp = min(exp, r.reported_prompt if r.reported_prompt is not None else exp)
                mark = _last_mark(prev, rules)
                if _extends(r, prev, mark) and _reads_from(r, mark, rules):
                    band = Band(min(lag, exp), exp, "in-thread-idle" if idle else "in-thread")
                elif _confirmed(rules, r, min(lag, exp), exp):
                    band = Band(min(lag, exp), exp, "usage-confirmed")
        if band.rule == "simulated" and raw is not None and rules.max_breakpoints:
            end = hidden_end(r)
            if end and raw[i] == end:
                size = sizes.size(r)
                if size is not None and r.reported_prompt is not None:
                    size = min(size, r.reported_prompt)
                band = Band(size, size, "hidden-prefix-measured") if size is not None else \
                    Band(0, sim, "hidden-prefix-unsized")
            sizes.measure(r, raw[i], end)
        out.append(band)
    return out
