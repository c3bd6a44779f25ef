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
* **OpenAI up to GPT-5.5** (automatic): prompt(k−1) in 128-token steps from 1,024.
  Lagged: cached(k−1).

A rule applies ("in-thread") only when our tokens show that the call extends the
previous call's prompt up to its last breakpoint (DeepSeek chat: up to its prompt),
the previous call reported its usage, and the gap is within the retention; the
expected count is capped at the call's own reported prompt. Other calls (a thread's
first call, a changed prefix) keep the simulated prediction as both ends of the band.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

from prefixcache.analyzer.cache.provider import ProviderRules
from prefixcache.analyzer.cache.workload import SimRequest


@dataclass(frozen=True, slots=True)
class Band:
    """One call's expected cached tokens (provider tokens) and the lagged end of its band;
    ``rule``: ``in-thread`` (from the previous call's usage) or ``simulated``."""

    lagged: int
    expected: int
    rule: str


def _last_mark(r: SimRequest, rules: ProviderRules) -> int:
    """Where the previous call's cached prefix ends in our tokens: its last breakpoint
    (breakpoint caches), else its whole prompt."""
    if rules.max_breakpoints and r.breakpoints:
        return max(bp.end for bp in r.breakpoints)
    return r.num_tokens


def _extends(r: SimRequest, prev: SimRequest, end: int) -> bool:
    """Whether ``r`` starts with ``prev``'s first ``end`` tokens."""
    if r.tokens is None or prev.tokens is None or end > r.num_tokens:
        return False
    return r.tokens[:end] == prev.tokens[:end]


def _expected(rules: ProviderRules, prev: SimRequest) -> int | None:
    """The rule's count from the previous call's reported usage (None: not enough usage)."""
    p, c = prev.reported_prompt, prev.reported_cached
    if p is None or c is None:
        return None
    if rules.max_breakpoints:
        if prev.reported_write is None:
            return None
        return c + prev.reported_write
    unit = rules.block_size
    if rules.stores_output and prev.reported_output is None:
        return None
    n = p + ((prev.reported_output or 0) if rules.stores_output else 0)
    if n < rules.min_tokens:
        return 0
    if rules.min_tokens > unit:  # OpenAI: 1,024 then 128-token steps
        return rules.min_tokens + (n - rules.min_tokens) // unit * unit
    return n // unit * unit


def bands(reqs: Sequence[SimRequest], simulated: Sequence[int], rules: ProviderRules) -> list[Band]:
    """The band of every request (arrival order) given its simulated (calibrated)
    prediction ``simulated`` in provider tokens (see the module docstring)."""
    prev_of: dict[str, SimRequest] = {}
    out = []
    for r, sim in zip(reqs, simulated):
        prev = prev_of.get(r.session)
        prev_of[r.session] = r
        band = Band(sim, sim, "simulated")
        if prev is not None and r.now - prev.now <= rules.ttl_s:
            exp = _expected(rules, prev)
            if exp is not None and _extends(r, prev, _last_mark(prev, rules)):
                cap = r.reported_prompt if r.reported_prompt is not None else exp
                exp = min(exp, cap)
                band = Band(min(prev.reported_cached or 0, exp), exp, "in-thread")
        out.append(band)
    return out
