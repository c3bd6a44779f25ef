"""Every call of a hosted-provider log classified against the provider rule's band, in calls, tokens and dollars.

A provider reports how many prompt tokens it served from cache (``cached_tokens``);
:mod:`.bands` gives each call the band ``[lagged, expected]`` the provider's rules allow.
Each call with a reported count falls in one class (first that applies):

* ``drift`` — our prompt changed inside the prefix the session had already sent (lint
  names the rule, ``CallRow.drift_cause``): the user's to fix — unless the provider's own
  count contradicts it (band rule ``usage-confirmed``, :mod:`.bands`: the change is in our
  rendering, and the call is judged by the band);
* ``exact`` — the reported count equals the band's expected end;
* ``in_band`` — it lies inside the band;
* ``provider_side`` — below the band while our prompt was stable over it: the provider
  served less than the prefix it had been sent (the request reached a machine without
  it, or the provider evicted it) — not the user's fault;
* ``ttl`` — below the band after an idle gap past the provider's usual retention but
  within its longest (band rule ``in-thread-idle``): the entry may have expired;
* ``above_band`` — above the band: the provider served more than the rule allows (a
  prefix cached before the log began, a hidden prefix shared across sessions that our
  rule cannot size).

``no_usage`` counts the requests that report no cached count. Per class: ``tokens``
(reported prompt tokens of its calls), ``cached_tokens``, ``dollars`` (the input cost
those calls were billed, reported reads and writes included, each priced by its own model's row, :mod:`..provider.prices`),
``lost_tokens`` / ``lost_dollars`` (provider-side and TTL: expected − reported; drift: the
tokens our simulation lost to drift, :attr:`~.figures.RequestFigures.lost`; priced at
the input price less the read price). ``band_held`` is the share of calls not classed
provider-side whose reported count lies inside the band. ``band_anchor`` is ``usage``
when our rendered prompt is not the billed one (the prompt-size check's tolerance,
:data:`~prefixcache.analyzer.prepare.size_check.TOLERANCE`, missed on most calls): the
in-thread bands come from the previous call's reported usage, never from our tokens.
Each call is judged by the prompt-size check's own row for it (``sizes``,
:attr:`~prefixcache.analyzer.prepare.size_check.SizeCheck.by_request`: our tokens plus the
encrypted reasoning and web-search results sized from usage), so this note and the check's
``prompt size:`` line count the same calls off; a call the check did not see is compared
plainly (:func:`~prefixcache.analyzer.prepare.size_check.compared`).
"""

from __future__ import annotations

from dataclasses import dataclass
from statistics import median
from typing import TYPE_CHECKING, Iterable, Mapping, Sequence

from prefixcache.analyzer.cache.provider.cost import billed_tokens
from prefixcache.analyzer.cache.provider.rules import rules_for
from prefixcache.analyzer.cache.simulate.figures import RequestFigures
from prefixcache.analyzer.cache.workload import SimRequest

if TYPE_CHECKING:
    from prefixcache.analyzer.prepare.size_check import SizeRow

#: The classes, in the order they are tried (``no_usage`` last: requests without a reported count).
CLASSES = ("exact", "in_band", "provider_side", "ttl", "drift", "above_band", "no_usage")


@dataclass(frozen=True, slots=True)
class ProviderCalls:
    """The ``simulate --json`` ``analyses.provider_calls`` block (module docstring): ``calls``
    with a reported cached count; per class of :data:`CLASSES`: ``classes`` (calls),
    ``tokens`` (reported prompt tokens), ``cached_tokens``, ``dollars`` (billed input USD),
    ``lost_tokens`` and ``lost_dollars``; ``band_held`` (0–1, over calls not provider-side);
    ``band_anchor``: ``prompt`` or ``usage``; ``models``: calls per logged model; ``notes``."""

    provider: str
    calls: int
    classes: dict[str, int]
    tokens: dict[str, int]
    cached_tokens: dict[str, int]
    dollars: dict[str, float]
    lost_tokens: dict[str, int]
    lost_dollars: dict[str, float]
    band_held: float | None
    band_anchor: str
    models: dict[str, int]
    notes: list[str]


def classify(call) -> str:
    """The class of one :class:`~.document.CallRow` (module docstring)."""
    rep, lag, exp = call.reported_cached_tokens, call.lagged_cached_tokens, call.expected_cached_tokens
    if call.drift_cause is not None and call.rule != "usage-confirmed":
        return "drift"
    if rep == exp:
        return "exact"
    if lag <= rep <= exp:
        return "in_band"
    if rep < lag:
        return "ttl" if call.rule == "in-thread-idle" else "provider_side"
    return "above_band"


def provider_calls(provider: str, calls: Sequence, rows: Sequence[RequestFigures], reqs: Sequence[SimRequest],
                   extras: Iterable[Mapping] = (), overrides: dict | None = None,
                   sizes: Mapping[tuple[str, int, int], SizeRow] | None = None) -> ProviderCalls:
    """Classify ``calls`` (:func:`~.document.call_rows`, over ``rows``: the first result row's
    figures, arrival order; ``reqs``: the simulated requests in that order, for each call's
    model and reported cache writes, billed at the rules' write multiplier) under ``provider``'s rules;
    ``extras``: the requests' ``extra`` dicts (``prompt_cache_key``, ``prompt_cache_retention``);
    ``overrides``: the ``--price-*`` options (:class:`~.provider.rules.ProviderRules` fields);
    ``sizes``: the prompt-size check's row of each checked call (module docstring)."""
    # (prepare imports the renderer: only when priced)
    from prefixcache.analyzer.prepare.size_check import compared, request_key

    zero = {c: 0 for c in CLASSES}
    n_calls, tokens, cached, lost = dict(zero), dict(zero), dict(zero), dict(zero)
    dollars, lost_usd = {c: 0.0 for c in CLASSES}, {c: 0.0 for c in CLASSES}
    by_model: dict[str, int] = {}
    held = counted = off = 0
    deltas: list[float] = []
    reported = iter(calls)
    for f, r in zip(rows, reqs):
        model = r.model
        if f.reported_cached_tokens is None:
            n_calls["no_usage"] += 1
            continue
        call = next(reported)
        cls = classify(call)
        rules = rules_for(provider, model, **(overrides or {}))
        prompt = call.reported_prompt_tokens if call.reported_prompt_tokens is not None else call.prompt_tokens
        rep = call.reported_cached_tokens
        n_calls[cls] += 1
        tokens[cls] += prompt
        cached[cls] += rep
        scale = rules.price_input / 1e6
        dollars[cls] += billed_tokens(prompt, rep, r.reported_write or 0, rules.read_multiplier,
                                      rules.write_multiplier) * scale
        gone = max(0, call.expected_cached_tokens - rep) if cls in ("provider_side", "ttl") else \
            f.lost.get("drift", 0) if cls == "drift" else 0
        lost[cls] += gone
        lost_usd[cls] += gone * scale * (1 - rules.read_multiplier)
        by_model[model or "(no model name)"] = by_model.get(model or "(no model name)", 0) + 1
        if cls != "provider_side":
            counted += 1
            held += call.inside_band
        if call.reported_prompt_tokens:
            row = compared(call.prompt_tokens, call.reported_prompt_tokens,
                           (sizes or {}).get(request_key(r.source, r.record, r.index)))
            deltas.append(row.fraction)
            off += not row.within
    n = len(calls)
    anchor = "usage" if deltas and off * 2 > len(deltas) else "prompt"
    notes = _notes(anchor, off, deltas, list(extras), by_model)
    confirmed = sum(c.rule == "usage-confirmed" and c.drift_cause is not None for c in calls)
    if confirmed:
        notes.append(f"{confirmed} calls our tokens show as changed (lint's drift) read inside the provider rule's band: "
                     "an automatic cache serves only an unchanged prefix, so the change is in our rendering, not the "
                     "billed prompt; they are classed by the band, not as drift")
    return ProviderCalls(provider, n, n_calls, tokens, cached, {k: round(v, 6) for k, v in dollars.items()}, lost,
                         {k: round(v, 6) for k, v in lost_usd.items()}, round(held / counted, 4) if counted else None,
                         anchor, by_model, notes)


def _notes(anchor: str, off: int, deltas: Sequence[float], extras: Sequence[dict], models: dict[str, int]) -> list[str]:
    """The lines that qualify the split: the band's anchor, the logged routing keys and retentions, mixed models."""
    out = []
    if anchor == "usage":
        out.append(f"our rendered prompt is not the billed one on {off} of {len(deltas)} calls (ours − billed, median "
                   f"{median(deltas):+.1%}): the in-thread bands are anchored on the reported usage (the previous "
                   "call's reported prompt and output), not on our tokens")
    keys = [e.get("prompt_cache_key") for e in extras if isinstance(e, Mapping) and e.get("prompt_cache_key")]
    if keys:
        out.append(f"{len(keys)} calls carry a prompt_cache_key ({len(set(map(str, keys)))} distinct): the provider "
                   "routes by it, so a provider-side miss under one key is the provider's routing or eviction")
    ret = [str(e.get("prompt_cache_retention")) for e in extras
           if isinstance(e, Mapping) and e.get("prompt_cache_retention")]
    if ret:
        kinds = ", ".join(f"{k} on {ret.count(k)}" for k in sorted(set(ret)))
        out.append(f"prompt_cache_retention logged ({kinds} calls): a call after one logging 24h is judged with a "
                   "24 h retention window; others with the rules' retention")
    if len(models) > 1:
        out.append("mixed models: " + ", ".join(f"{m} {k}" for m, k in models.items()) + " calls, each priced by its "
                   "own row")
    return out


__all__ = ["CLASSES", "ProviderCalls", "classify", "provider_calls"]
