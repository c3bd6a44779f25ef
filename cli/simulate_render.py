"""Rich rendering of ``prefixcache simulate``: tables and lines from a
:class:`~prefixcache.analyzer.cache.simulate.document.SimulateReport`'s attributes (no figures computed here).

Labels follow the cache model's declared traits (:func:`~prefixcache.analyzer.cache.models.traits_for`),
never its name.
"""

from __future__ import annotations

from rich.markup import escape
from rich.table import Table

from prefixcache.analyzer.api import SimulateReport
from prefixcache.analyzer.cache.models import traits_for
from prefixcache.analyzer.cache.simulate.document import ResultRow
from prefixcache.analyzer.cache.simulate.figures import CAUSES
from prefixcache.cli.common import console, plural
from prefixcache.cli.tables import print_table


def _pct(x: float) -> str:
    return f"{100 * x:.1f}%"


def _n(n: int) -> str:
    """Token and block counts in tables and lines: always in full, comma-grouped."""
    return f"{n:,}"


def _table(title: str, columns: tuple[str, ...], left: int = 0) -> Table:
    """A table whose first ``left`` columns (and a session column) are left-aligned text; the
    others hold figures (kept whole at any width by :func:`~prefixcache.cli.tables.print_table`)."""
    t = Table(title=title, title_justify="left")
    for i, col in enumerate(columns):
        t.add_column(col, justify="left" if col == "session" or i < left else "right", overflow="fold")
    return t


def _policy(r: ResultRow) -> str:
    """The policy, with the ``--ttl`` a cache that expires only under ``--ttl`` ran under
    (providers keep their own retention, :attr:`~prefixcache.analyzer.cache.models.Traits.expiry`)."""
    return f"{r.policy} ttl {r.ttl_s:g}s" if r.ttl_s is not None and traits_for(r.cache).expiry == "ttl" else r.policy


def _granule(rep: SimulateReport) -> str:
    """What the cache counts in (its :attr:`~prefixcache.analyzer.cache.models.Traits.unit`), for the
    title: no "block 1 tokens"."""
    bs, n, unit = rep.block_size, rep.unique_blocks, traits_for(rep.cache).unit
    if unit == "breakpoints":
        return "token-granular prefixes at breakpoints"
    if unit == "units":
        return f"{bs}-token units · {plural(n, 'unique unit')}"
    if unit == "slots":
        return f"slots and prompt cache in tokens · {plural(n, 'unique token')}"
    if bs == 1:
        return f"1-token pages · {plural(n, 'unique token')}"
    return f"{bs}-token {unit} · {plural(n, 'unique block')}"


def _results(rep: SimulateReport) -> None:
    t = _table(f"simulate · cache {rep.cache} · {_granule(rep)}", ("policy", "capacity", "blocks", "hit tok",
               "hit blk", "req hit", "ideal tok", "ideal blk", "of ideal tok", "of ideal blk", "avoided"), left=2)
    for r in rep.results:
        t.add_row(_policy(r), r.capacity, "∞" if r.capacity_blocks is None else _n(r.capacity_blocks),
                  _pct(r.hit_ratio_tokens), _pct(r.hit_ratio_blocks), _pct(r.request_hit_rate),
                  _pct(r.ideal_hit_ratio_tokens), _pct(r.ideal_hit_ratio_blocks), _pct(r.fraction_of_ideal_tokens),
                  _pct(r.fraction_of_ideal_blocks), _n(r.avoided_prefill_tokens))
    print_table(console, t)
    for r in rep.results:
        if (b := r.offline_bound) is not None:
            console.print(f"offline bound at {r.capacity} (Belady MIN, the larger variant): tokens "
                          f"{_pct(b.bound_hit_ratio_tokens)}, blocks {_pct(b.bound_hit_ratio_blocks)} · pinned "
                          f"{_pct(b.pinned_hit_ratio_tokens)} / {_pct(b.pinned_hit_ratio_blocks)}, unpinned "
                          f"{_pct(b.unpinned_hit_ratio_tokens)} / {_pct(b.unpinned_hit_ratio_blocks)}")
    used = [c for c in CAUSES if any(r.lost_tokens_by_cause[c] for r in rep.results)]
    if used:
        lt = _table("lost tokens by cause", ("policy", "capacity", *used), left=2)
        for r in rep.results:
            lt.add_row(_policy(r), r.capacity, *(_n(r.lost_tokens_by_cause[c]) for c in used))
        print_table(console, lt)
    first = rep.results[0]
    seg = ", ".join(f"{k} {_n(v)}" for k, v in first.hits_by_segment.items() if v)
    if seg:
        console.print(f"cached tokens by segment ({first.policy}, {first.capacity}): {seg}")
    if first.drift_by_rule:
        console.print("drift by rule: " + ", ".join(f"{k} {_n(v)}" for k, v in first.drift_by_rule.items()))


def _requests(rep: SimulateReport) -> None:
    rows = getattr(rep, "requests", [])
    used = [c for c in CAUSES if any(f.lost_tokens_by_cause.get(c) for f in rows)]
    title = "per request"
    if len(rep.results) > 1:  # the rows are the first result row's (the JSON document says so in its schema)
        title += f" ({rep.results[0].policy}, {rep.results[0].capacity}: the first of {len(rep.results)} result rows)"
    t = _table(title, ("#", "session", "record", "prompt", "cached", "ideal", *used))
    for f in rows:
        t.add_row(str(f.order), f.session, str(f.record), _n(f.prompt_tokens), _n(f.cached_tokens),
                  _n(f.ideal_tokens), *(_n(f.lost_tokens_by_cause.get(c, 0)) for c in used))
    print_table(console, t)


def _tenants(rep: SimulateReport) -> None:
    t = _table("per tenant (first row)", ("tenant", "requests", "prompt", "cached", "hit %", "reported cached %"), left=1)
    for g in rep.tenants:
        t.add_row(escape(g.tenant if g.tenant is not None else "(none)"), _n(g.requests), _n(g.prompt_tokens),
                  _n(g.cached_tokens), "—" if g.hit_ratio is None else _pct(g.hit_ratio),
                  "—" if g.reported_hit_ratio is None else _pct(g.reported_hit_ratio))
    print_table(console, t)


#: Band column marks by ``CallRow.rule``: the in-thread rule, a hidden prefix of unknown size.
_MARK = {"in-thread": " ·", "hidden-prefix-unsized": " ?", "hidden-prefix-measured": " m"}


def _calls(rep: SimulateReport) -> None:
    a = rep.agreement
    t = _table("predicted vs reported cached tokens", ("session", "record", "prompt", "rep. prompt", "predicted",
               "calibr.", "band", "reported", "Δ expected"))
    for c in rep.calls:
        band = _n(c.expected_cached_tokens) if c.lagged_cached_tokens == c.expected_cached_tokens else \
            f"{_n(c.lagged_cached_tokens)}–{_n(c.expected_cached_tokens)}"
        t.add_row(c.session, str(c.record), _n(c.prompt_tokens),
                  "—" if c.reported_prompt_tokens is None else _n(c.reported_prompt_tokens),
                  _n(c.predicted_cached_tokens), _n(c.calibrated_cached_tokens),
                  band + _MARK.get(c.rule, ""), _n(c.reported_cached_tokens),
                  f"{c.expected_cached_tokens - c.reported_cached_tokens:+,}")
    print_table(console, t)
    console.print(f"provider rule (band: lagged–expected; · = in-thread rule from the previous call's usage): "
                  f"exact {a.expected_exact}/{a.calls}, within {_n(a.tolerance_tokens)} {a.expected_within_tolerance}"
                  f"/{a.calls}, reported inside the band {a.inside_band}/{a.calls}; in-thread calls "
                  f"{a.in_thread_exact}/{a.in_thread_calls} exact")
    for c in rep.calls:
        if c.rule == "hidden-prefix-unsized":
            console.print(f"record {c.record} (?): reads only the hidden prefix, whose size no earlier call measured "
                          f"(ours includes unlogged first-turn content): band {_n(c.lagged_cached_tokens)}–"
                          f"{_n(c.expected_cached_tokens)}, reported {_n(c.reported_cached_tokens)}")
        if c.rule == "hidden-prefix-measured":
            console.print(f"record {c.record} (m): reads only the hidden prefix, sized by an earlier call's read of it "
                          f"that had landed before this call was sent: {_n(c.expected_cached_tokens)}, reported "
                          f"{_n(c.reported_cached_tokens)}")
        if c.provider_verdict is not None:
            missed = "" if c.provider_missed_tokens is None else f" ({_n(c.provider_missed_tokens)} tokens missed)"
            ours = f"{c.drift_cause or 'no rule'} at token {_n(c.shared_tokens)}"
            console.print(f"record {c.record}: provider verdict {escape(c.provider_verdict)}{missed}; ours: {ours}")
    console.print(f"agreement (within {plural(a.tolerance_tokens, 'token')}): {a.within_tolerance}/{plural(a.calls, 'call')} "
                  f"({_pct(a.agreement)}), mean |error| {a.mean_abs_error_tokens:,.0f} tokens; calibrated to the "
                  f"reported prompt length: {a.calibrated_within_tolerance}/{a.calls} "
                  f"({_pct(a.calibrated_agreement)}), mean |error| {a.calibrated_mean_abs_error_tokens:,.0f} tokens")
    if a.warm_before_log:
        console.print(f"{a.warm_before_log} call(s) were served from cache although nothing earlier in the log "
                      "shares their prefix (warm before the log began): no replay of this log can predict them")


def _money(rep: SimulateReport) -> None:
    c = rep.cost
    rates = f"${c.price_input_per_mtok}/MTok, read ×{c.read_multiplier}, write ×{c.write_multiplier}" \
        if len(c.by_model) < 2 else "each call at its own model's row"
    for label, with_c, without in (("estimated input cost, predicted hits", c.usd_with_cache, c.usd_without_cache),
                                   ("input cost the log's reported usage implies", c.reported_usd_with_cache,
                                    c.reported_usd_without_cache)):
        if with_c is not None:
            saved = 1 - with_c / without if without else 0.0
            console.print(f"{label}: ${with_c:.4f} with cache vs ${without:.4f} without ({_pct(saved)} saved); "
                          f"{rates}")
    console.print(f"[dim]rules {c.rule_set}; prices {escape(c.price_source)} ({c.price_date})[/]")
    for m in c.by_model if len(c.by_model) > 1 else ():
        rep_c = "–" if m.reported_usd_with_cache is None else f"${m.reported_usd_with_cache:.4f}"
        console.print(f"[dim]  {escape(m.model)}: {plural(m.requests, 'request')} at ${m.price_input_per_mtok}/MTok, "
                      f"read ×{m.read_multiplier}; reported usage {rep_c} ({escape(m.price_source)}, {m.price_date})[/]")
    if c.send_times_missing:
        console.print(f"[yellow]send times not logged[/] for {plural(c.send_times_missing, 'request')}: every "
                      "earlier write counts as landed, so a thread's first call may be predicted warm")


def _sampled(rep: SimulateReport) -> None:
    """The SHARDS curve of ``--sample``: each estimate with its ± error (about 2σ)."""
    c = rep.sampled
    t = _table(f"simulate --sample {c.rate:g} · cache {rep.cache} · {_granule(rep)} · LRU, estimated from "
               f"{_n(c.sampled_lookups)} of {_n(c.lookups)} block lookups ({_n(c.sampled_ids)} sampled ids)",
               ("capacity", "blocks", "hit tok", "± tok", "hit blk", "± blk"), left=1)
    for p in c.points:
        t.add_row(p.capacity, _n(p.capacity_blocks), _pct(p.hit_ratio_tokens), _pct(p.hit_ratio_tokens_error),
                  _pct(p.hit_ratio_blocks), _pct(p.hit_ratio_blocks_error))
    print_table(console, t)
    console.print("[dim]SHARDS (hashed sampling of block ids): the error is about two standard deviations "
                  "(id sampling + distance scaling), not a hard bound; no per-request figures or loss causes[/]")


def render(rep: SimulateReport) -> None:
    """The rich report: results, capacity warnings, lost tokens, per request, calls, reported usage,
    cost, notes."""
    if rep.results:
        _results(rep)
    if rep.sampled is not None:
        _sampled(rep)
    for line in rep.warnings:
        console.print(f"[yellow]warning:[/] {escape(line)}")
    if rep.usage_only_requests:
        what = "nothing to simulate: a cache model needs the prompts" if not rep.results else \
            "left out of the simulation above"
        console.print(f"[yellow]prompts not logged:[/] {rep.usage_only_requests} request(s) carry only the "
                      f"provider's reported usage; {what}")
    if rep.tenants:
        _tenants(rep)
    if getattr(rep, "requests", None):
        _requests(rep)
    if rep.calls:
        _calls(rep)
    if (u := rep.reported) is not None:
        console.print(f"reported by the log ({plural(u.calls, 'call')}): {_n(u.prompt_tokens)} prompt tokens, "
                      f"{_n(u.cached_tokens)} cached ({_pct(u.hit_ratio)}), {_n(u.cache_write_tokens)} written to cache")
    if rep.cost is not None:
        _money(rep)
    for note in rep.tokenizers.values():
        console.print(f"[dim]{escape(note)}[/]")
