"""The report's first screen: four answers, each a figure of the documents the page embeds.

1. **Reuse** — prompt tokens, how many were reusable (``lint`` summary: a prefix shared with
   an earlier request) and how many were served: for a hosted log, the cached tokens the log
   reports (``simulate`` ``reported``) beside what the provider's rules predict, and why the
   log's figure can exceed the reusable one (:func:`served_beyond`: calls warm before the log,
   calls above the rules' band); for an engine, the headline row's cached tokens (the user's
   first ``--capacity``, else the 100% row).
2. **Losses** — what was lost and to what: drift by rule code (the headline row's
   ``drift_by_rule``), the prefix sessions share broken by a per-session value (lint's PC602
   lost tokens: simulate judges drift within a session and counts each session's copy as a
   first use), provider-side and TTL misses (``analyses.provider_calls``, hosted logs
   with reported usage), capacity and TTL evictions (engines), below-minimum and granularity,
   routing (a fleet document's first router), each in tokens and, where a price applies, USD.
3. **Fix** — what canonicalizing is worth: reusable tokens before and after (``canonicalize
   --review --json``: ``total.before``, ``in_memory``), per rewrite rule (each request's
   ``request_recovered_tokens`` shared out by its rules' ``recovered_tokens``: the rules add up
   to after − before) and the rules canonicalize reports but cannot rewrite (lint's lost tokens
   for that code), in tokens and USD.
4. **Sizing** — the smallest self-hosted LRU KV cache that reaches 90% of the ideal
   (``analyses.sizing``, :mod:`~prefixcache.analyzer.cache.simulate.sizing`).

Dollar figures other than the provider split's are tokens × :func:`usd_per_token`: the price
of a prompt token less the price of reading it from cache, averaged over the run's requests
weighted by their prompt tokens, each at its own model's row (:mod:`..cache.provider.prices`).
Every answer row names its source (``source``: document and key) so the page and a test can
check it against the command's ``--json``.
"""

from __future__ import annotations

from typing import Any, Iterable, Sequence

from prefixcache.analyzer.cache.provider.rules import rules_for
from prefixcache.analyzer.cache.simulate.sizing import Sizing, sizing_line

#: Loss causes of a result row shown on their own line (drift is split by rule; cold is not a loss).
ROW_CAUSES = (("capacity", "capacity (evicted before reuse)"), ("ttl", "TTL (expired in an idle gap)"),
              ("below_minimum", "below the provider's minimum length"),
              ("granularity", "granularity (partial blocks / units)"))


def usd_per_token(cache: str, requests: Iterable[tuple[str | None, int]]) -> float | None:
    """USD a prompt token served from ``cache``'s cache saves (input price × (1 − read
    multiplier), per million → per token), weighted by ``requests``' ``(model, prompt tokens)``;
    None for an engine cache (no price) or no tokens."""
    total = weighted = 0.0
    for model, tokens in requests:
        rules = rules_for(cache, model)
        weighted += tokens * rules.price_input / 1e6 * (1 - rules.read_multiplier)
        total += tokens
    return weighted / total if total else None


def headline_row(sim: dict[str, Any] | None, user_capacity: bool) -> int | None:
    """Index in ``sim["results"]`` of the row the first screen quotes: the first row (the
    first policy at the first capacity, or the provider's unbounded row) when the user named
    a capacity or the cache is a provider's; else the first policy's ``100%`` row (a cache that
    holds every distinct block), never a 5% row. None without rows."""
    if not sim or not sim["results"]:
        return None
    rows = sim["results"]
    if user_capacity or sim.get("cost") is not None:
        return 0
    first = rows[0]["policy"]
    return next((i for i, r in enumerate(rows) if r["policy"] == first and r["capacity"] == "100%"), 0)


def _usd(tokens: int | None, per_token: float | None) -> float | None:
    return None if tokens is None or per_token is None else round(tokens * per_token, 6)


def _loss(label: str, tokens: int | None, usd: float | None, source: str, note: str = "") -> dict[str, Any]:
    return {"cause": label, "tokens": tokens, "usd": usd, "source": source, "note": note}


#: Lint's codes for a loss no single session sees (simulate judges drift within a session), shown
#: from lint's ``summary.lost_tokens_by_code`` when simulate's drift has no row of them.
CROSS_SESSION = (("PC602", "cross-session prefix · PC602 (lint)",
                  "a prefix the sessions share breaks at a per-session value; simulate counts each session's "
                  "copy as its own first use, not as drift"),)


def losses(sim: dict[str, Any] | None, row: int | None, fleet: dict[str, Any] | None,
           per_token: float | None, lint_lost: dict[str, int] | None = None) -> list[dict[str, Any]]:
    """Question 2's rows (module docstring), in a fixed order; ``tokens`` None where the cause
    does not apply (``note`` says why). ``lint_lost``: lint's ``summary.lost_tokens_by_code``
    (tokens), for the losses between sessions (:data:`CROSS_SESSION`) simulate does not name."""
    if sim is None or row is None:
        return []
    r = sim["results"][row]
    at = f"simulate results[{row}]"
    hosted = sim.get("cost") is not None
    pc = ((sim.get("analyses") or {}).get("provider_calls")) if hosted else None
    out = [_loss(f"drift · {code}", tok, _usd(tok, per_token), f"{at}.drift_by_rule.{code}",
                 "our prompt changed: fix in the agent or with canonicalize")
           for code, tok in sorted(r["drift_by_rule"].items(), key=lambda kv: -kv[1]) if tok]
    for code, label, note in CROSS_SESSION:
        tok = (lint_lost or {}).get(code, 0)
        if tok and not r["drift_by_rule"].get(code):
            out.append(_loss(label, tok, _usd(tok, per_token), f"lint summary.lost_tokens_by_code.{code}", note))
    if pc is not None:
        for cls, label, note in (("provider_side", "provider-side (routing or eviction at the provider)",
                                  "our prompt was stable; the provider served less"),
                                 ("ttl", "TTL (idle past the provider's retention)", "")):
            out.append(_loss(label, pc["lost_tokens"][cls], pc["lost_dollars"][cls],
                             f"simulate analyses.provider_calls.lost_tokens.{cls}", note))
    elif hosted:
        out.append(_loss("provider-side (routing or eviction at the provider)", None, None, "",
                         "the log reports no cached tokens to compare"))
    else:
        out.append(_loss("provider-side", None, None, "", "self-hosted: no provider"))
    lost = r["lost_tokens_by_cause"]
    for cause, label in ROW_CAUSES:
        if (cause == "ttl" and pc is not None) or (cause == "below_minimum" and not hosted):
            continue
        if cause == "capacity" and hosted:
            out.append(_loss(label, None, None, "", "a provider cache has no capacity you size"))
            continue
        tok = lost.get(cause, 0)
        out.append(_loss(label, tok, _usd(tok, per_token), f"{at}.lost_tokens_by_cause.{cause}"))
    if fleet and fleet.get("results"):
        f = fleet["results"][0]
        out.append(_loss(f"routing ({f['router']} over {fleet['replicas']} replicas)", f["routing_loss_tokens"],
                         None, "fleet results[0].routing_loss_tokens"))
    else:
        out.append(_loss("routing", None, None, "", "one cache: simulate --replicas N --json, then report --simulate"))
    return out


def fix(canon: dict[str, Any] | None, lint_lost: dict[str, int], per_token: float | None) -> dict[str, Any]:
    """Question 3 (module docstring) from a ``canonicalize --review --json`` document (None:
    the logs hold no prompt text to rewrite; then only lint's losses by code, ``before`` /
    ``after`` None). ``lint_lost``: lint's ``summary.lost_tokens_by_code``."""
    before = after = None
    if canon is not None:
        before, after = canon["total"]["before"]["reusable_tokens"], canon["in_memory"]["reusable_tokens"]
    applied: dict[str, list[int]] = {}
    reported: dict[str, int] = {}
    # per request: what its rewrites recover together (request_recovered_tokens: the same on each of its
    # applied rows), and each rule's own probe figure, by which that request's figure is shared out
    requests: dict[tuple, tuple[int, dict[str, int]]] = {}
    for t in (canon or {}).get("transformations", []):
        if t["applied"]:
            got = applied.setdefault(t["code"], [0, 0])
            got[1] += 1
            key = (t["source"], t["record"], t["session"], t["index"])
            total, shares = requests.setdefault(key, (t["request_recovered_tokens"], {}))
            shares[t["code"]] = shares.get(t["code"], 0) + t["recovered_tokens"]
        else:
            reported[t["code"]] = reported.get(t["code"], 0) + 1
    for total, shares in requests.values():
        for code, tok in _shared_out(total, shares).items():
            applied[code][0] += tok
    rules = [{"code": c, "rewrites": n, "tokens": tok, "usd": _usd(tok, per_token)}
             for c, (tok, n) in sorted(applied.items(), key=lambda kv: -kv[1][0])]
    manual = [{"code": c, "changes": reported.get(c, 0), "tokens": lint_lost.get(c, 0),
               "usd": _usd(lint_lost.get(c, 0), per_token)}
              for c in sorted(set(reported) | {c for c, v in lint_lost.items() if v and c not in applied},
                              key=lambda c: -lint_lost.get(c, 0))]
    recovered = None if canon is None else after - before
    return {"before": before, "after": after, "recovered": recovered, "usd": _usd(recovered, per_token),
            "rules": rules, "manual": manual}


def _shared_out(total: int, shares: dict[str, int]) -> dict[str, int]:
    """A request's recovered tokens (``total``, after − before of that request) shared out among its
    rules in proportion to their own figures (``shares``: each rule's rewrite alone on top of the rules
    before it, which also counts what earlier requests' rewrites change: so the per-rule figures of a
    log do not add up to its total, and these shares do). Equal parts when no rule figure is positive;
    the remainder of the integer split goes to the first rule."""
    codes = list(shares)
    weights = [max(shares[c], 0) for c in codes]
    if sum(weights) == 0:
        weights = [1] * len(codes)
    parts = [total * w // sum(weights) for w in weights]
    parts[0] += total - sum(parts)
    return dict(zip(codes, parts))


def warnings(lint: dict[str, Any], sim: dict[str, Any] | None, extra: Sequence[str]) -> list[str]:
    """Every warning of ``lint`` and ``simulate`` (in that order, each once), then ``extra``."""
    return list(dict.fromkeys([*lint.get("warnings", []), *((sim or {}).get("warnings") or []), *extra]))


def served_beyond(sim: dict[str, Any] | None, reusable_tokens: int, prompt_tokens: int) -> dict[str, Any] | None:
    """Why the log reports more served tokens than were reusable, or None when nothing needs saying.

    Two of simulate's figures explain it: the calls the provider served from cache although nothing
    earlier in the log shares their prefix (``calls[].warm_before_log``: warm before the log began,
    so no replay of the log can predict them) and the calls above the band the provider's rules
    allow (``analyses.provider_calls`` class ``above_band``, which holds those and any other, e.g. a
    hidden prefix shared across sessions). Returns ``warm_calls`` / ``warm_tokens`` (reported cached
    tokens of the warm calls), ``above_calls`` / ``above_tokens``, ``rest_tokens`` (what the other
    calls were served) and the sentence (``line``; it names the billed prompt size when it is not
    ours, ``prompt_tokens``). Tokens are the log's reported cached tokens."""
    reported = (sim or {}).get("reported")
    if not reported:
        return None
    warm = [c for c in sim.get("calls") or () if c.get("warm_before_log")]
    pc = ((sim.get("analyses") or {}).get("provider_calls") or {})
    above_calls = (pc.get("classes") or {}).get("above_band", 0)
    above_tokens = (pc.get("cached_tokens") or {}).get("above_band", 0)
    if not warm and not above_calls and reported["cached_tokens"] <= reusable_tokens:
        return None
    warm_tokens = sum(c["reported_cached_tokens"] for c in warm)
    rest = reported["cached_tokens"] - max(above_tokens, warm_tokens)
    parts = []
    if warm:
        parts.append(f"{_calls(len(warm))} ({warm_tokens:,} tokens) served from a cache warm before the log began: "
                     "nothing earlier in the log shares the prefix, so no replay of this log predicts it")
    if above_calls:
        parts.append(f"{_calls(above_calls)} in all ({above_tokens:,} tokens) above the band the provider's rules "
                     "allow (a prefix cached before the log, or a hidden prefix shared across sessions)")
    head = "Served is above reusable" if reported["cached_tokens"] > reusable_tokens else "Served includes"
    if rest <= reusable_tokens:
        tail = f", within the {reusable_tokens:,} reusable"
    else:  # the billed prompts are not ours (a hidden prefix sized from usage ...): the size check's warnings say
        tail = (f", above the {reusable_tokens:,} reusable of our {prompt_tokens:,} prompt tokens: the log bills "
                f"{reported['prompt_tokens']:,} (see the warnings)" if reported["prompt_tokens"] != prompt_tokens else "")
    line = f"{head}: {'; '.join(parts)}. The other calls were served {rest:,} tokens{tail}."
    return {"warm_calls": len(warm), "warm_tokens": warm_tokens, "above_calls": above_calls,
            "above_tokens": above_tokens, "rest_tokens": rest, "line": line}


def _calls(n: int) -> str:
    return f"{n:,} call" + ("" if n == 1 else "s")


def first_screen(lint: dict[str, Any], sim: dict[str, Any] | None, canon: dict[str, Any] | None,
                 fleet: dict[str, Any] | None, *, cache: str, chosen_by: str, user_capacity: bool,
                 per_token: float | None, kv_name: str | None, notes: Sequence[str] = ()) -> dict[str, Any]:
    """The four answers (module docstring) as one JSON value: ``cache`` and how it was chosen
    (``chosen_by``), ``row`` (the headline result row), ``reuse``, ``losses``, ``fix``,
    ``sizing`` (with its sentence, ``line``), ``warnings`` (lint's, simulate's, then ``notes``:
    the report's own, e.g. why canonicalize gave nothing) and ``usd_per_token``."""
    s = lint["summary"]
    row = headline_row(sim, user_capacity)
    r = sim["results"][row] if sim is not None and row is not None else None
    reported = (sim or {}).get("reported")
    cost = (sim or {}).get("cost")
    reuse = {"prompt_tokens": s["prompt_tokens"], "reusable_tokens": s["reusable_tokens"],
             "reusable_fraction": s["reusable_fraction"],
             "served_tokens": r["cached_tokens"] if r else None,
             "served_ratio": r["hit_ratio_tokens"] if r else None,
             "capacity": r["capacity"] if r else None, "policy": r["policy"] if r else None,
             "reported": reported, "cost": cost, "beyond": served_beyond(sim, s["reusable_tokens"], s["prompt_tokens"])}
    analyses = (sim or {}).get("analyses") or {}
    size = analyses.get("sizing")
    return {"cache": cache, "chosen_by": chosen_by, "hosted": cost is not None, "row": row, "reuse": reuse,
            "losses": losses(sim, row, fleet, per_token, s["lost_tokens_by_code"]), "fix": fix(canon, s["lost_tokens_by_code"], per_token),
            "sizing": None if size is None else {**size, "line": _sizing_line(size, kv_name)},
            "warnings": warnings(lint, sim, notes), "usd_per_token": per_token}


def _sizing_line(size: dict[str, Any], kv_name: str | None) -> str:
    return sizing_line(Sizing(**size), kv_name)
