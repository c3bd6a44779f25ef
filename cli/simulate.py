"""``prefixcache simulate``: hit tokens and avoided prefill under a real cache model.

Parse the options, call :func:`prefixcache.analyzer.api.simulate`, render its
:class:`~prefixcache.analyzer.cache.simulate.document.SimulateReport` (``--json``: the report as
is; rich: tables from its attributes). Nonsense values are usage errors (exit 2)
before any work; unreadable records exit 2 unless ``--skip-bad``.
"""

from __future__ import annotations

import sys
from typing import Annotated, Optional

import orjson
import typer
from rich.markup import escape
from rich.table import Table

from prefixcache.analyzer.api import FleetOptions, SimulateOptions, SimulateReport, simulate, simulate_fleet
from prefixcache.analyzer.cache.capacity import parse_capacities
from prefixcache.analyzer.cache.simulate.figures import CAUSES
from prefixcache.analyzer.cache.simulate.document import ResultRow
from prefixcache.analyzer.cache.models.registry import CACHES
from prefixcache.analyzer.ingest import Ingest
from prefixcache.cli.fleet import render_fleet
from prefixcache.cli.common import EXIT_ERROR, console, err, handle_errors, plural, progress, report_skipped
from prefixcache.cli.options import (
    AsJson, BlockSize, Capacity, InputFormat, ModelAsTokenizer, Paths, SkipBad, Template, Tokenizer,
    deprecated_alias, output_format,
)
from prefixcache.cli.tables import print_table

FORMATS = ("rich", "json")


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
    """The policy, with the ``--ttl`` a block cache ran under (providers keep their own)."""
    return f"{r.policy} ttl {r.ttl_s:g}s" if r.ttl_s is not None and r.cache in ("vllm", "blocks") else r.policy


def _granule(rep: SimulateReport) -> str:
    """What the cache counts in, for the title: no "block 1 tokens"."""
    bs, n = rep.block_size, rep.unique_blocks
    if rep.cache == "anthropic":
        return "token-granular prefixes at breakpoints"
    if rep.cache in ("openai", "deepseek"):
        return f"{bs}-token units · {plural(n, 'unique unit')}"
    if rep.cache == "llamacpp":
        return f"slots and prompt cache in tokens · {plural(n, 'unique token')}"
    if bs == 1:
        return f"1-token pages · {plural(n, 'unique token')}"
    return f"{bs}-token {'pages' if rep.cache == 'sglang' else 'blocks'} · {plural(n, 'unique block')}"


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
    t = _table("per request", ("#", "session", "record", "prompt", "cached", "ideal", *used))
    for f in rows:
        t.add_row(str(f.order), f.session, str(f.record), _n(f.prompt_tokens), _n(f.cached_tokens),
                  _n(f.ideal_tokens), *(_n(f.lost_tokens_by_cause.get(c, 0)) for c in used))
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
    rates = f"${c.price_input_per_mtok}/MTok, read ×{c.read_multiplier}, write ×{c.write_multiplier}"
    for label, with_c, without in (("estimated input cost, predicted hits", c.usd_with_cache, c.usd_without_cache),
                                   ("input cost the log's reported usage implies", c.reported_usd_with_cache,
                                    c.reported_usd_without_cache)):
        if with_c is not None:
            saved = 1 - with_c / without if without else 0.0
            console.print(f"{label}: ${with_c:.4f} with cache vs ${without:.4f} without ({_pct(saved)} saved); "
                          f"{rates}")
    console.print(f"[dim]rules {c.rule_set}; prices {escape(c.price_source)} ({c.price_date})[/]")
    if c.send_times_missing:
        console.print(f"[yellow]send times not logged[/] for {plural(c.send_times_missing, 'request')}: every "
                      "earlier write counts as landed, so a thread's first call may be predicted warm")


def render(rep: SimulateReport) -> None:
    """The rich report: results, capacity warnings, lost tokens, per request, calls, reported usage,
    cost, notes."""
    if rep.results:
        _results(rep)
    for line in rep.warnings:
        console.print(f"[yellow]warning:[/] {escape(line)}")
    if rep.usage_only_requests:
        what = "nothing to simulate: a cache model needs the prompts" if not rep.results else \
            "left out of the simulation above"
        console.print(f"[yellow]prompts not logged:[/] {rep.usage_only_requests} request(s) carry only the "
                      f"provider's reported usage; {what}")
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


def register(app: typer.Typer) -> None:
    """Add the ``simulate`` command to ``app``."""

    @app.command("simulate")
    @handle_errors
    def simulate_cmd(
        paths: Paths,
        fmt: Annotated[Optional[str], typer.Option("--format", help="Output: rich (default) or json.")] = None,
        as_json: AsJson = False,
        input_format: InputFormat = "auto",
        tokenizer: Tokenizer = "auto",
        old_model: ModelAsTokenizer = None,
        template: Template = "auto",
        cache: Annotated[str, typer.Option("--cache", help=f"Cache model: {', '.join(CACHES)}.")] = "vllm",
        policy: Annotated[str, typer.Option("--policy", help="Eviction policies, comma-separated: lru, fifo, lfu, slru, length, gdsf, belady (sglang: lru, fifo, lfu, slru, mru).")] = "lru",
        capacity: Capacity = None,
        block_size: BlockSize = None,
        ttl: Annotated[Optional[float], typer.Option("--ttl", min=0.0, help="Expire entries idle longer than this (seconds, logical clock; ≥ 0).")] = None,
        kv_model: Annotated[Optional[str], typer.Option("--kv-model", help="KV size preset for byte capacities (llama-3-8b, llama-3-70b, qwen2.5-7b, ...).")] = None,
        model_config: Annotated[Optional[str], typer.Option("--model-config", help="HF config.json (or folder) for KV bytes per token.")] = None,
        kv_dtype: Annotated[Optional[str], typer.Option("--kv-dtype", help="KV dtype (bf16, fp16, fp8, fp32); default from the config.")] = None,
        min_tokens: Annotated[Optional[int], typer.Option("--min-tokens", min=0, help="Override the provider's minimum cacheable length.")] = None,
        price_input: Annotated[Optional[float], typer.Option("--price-input", min=0.0, help="Input price, USD per million tokens.")] = None,
        price_read: Annotated[Optional[float], typer.Option("--price-read", min=0.0, help="Cache read price multiplier.")] = None,
        price_write: Annotated[Optional[float], typer.Option("--price-write", min=0.0, help="Cache write price multiplier.")] = None,
        in_flight: Annotated[int, typer.Option("--in-flight", min=1, help="Block caches: requests in flight at once; each pins its blocks until that many later requests started (1 = sequential).")] = 1,
        per_request: Annotated[bool, typer.Option("--per-request", help="Show (and write in JSON) every request's figures.")] = False,
        slots: Annotated[int, typer.Option("--slots", min=1, help="llamacpp: server slots (llama-server -np).")] = 1,
        slot_similarity: Annotated[float, typer.Option("--slot-similarity", min=0.0, max=1.0, help="llamacpp: LCP similarity above which an idle slot is reused (llama-server -sps).")] = 0.10,
        cache_ram: Annotated[float, typer.Option("--cache-ram", min=-1.0, help="llamacpp: host-RAM prompt cache in MiB (0 off, -1 no limit; sized with --kv-model, else Llama-3-8B bf16); --capacity overrides it.")] = 8192.0,
        replicas: Annotated[Optional[int], typer.Option("--replicas", min=1, help="Fleet: N replicas of the cache (each with --capacity) behind --router.")] = None,
        router: Annotated[Optional[str], typer.Option("--router", help="Fleet routers, comma-separated: round-robin, random, least-loaded, session, session-per-router[:R], prefix-hash[:K], cache-aware, kv-cost, oracle.")] = None,
        hardware: Annotated[str, typer.Option("--hardware", help="Fleet timing preset: h100-llama3-8b, a100-llama3-8b, h200-llama3-70b-tp4, cpu-smollm2-135m.")] = "h100-llama3-8b",
        calibrate: Annotated[Optional[str], typer.Option("--calibrate", help="Fleet: fit prefill tok/s and per-request overhead from a replay results JSONL.")] = None,
        tiers: Annotated[Optional[str], typer.Option("--tiers", help="Fleet KV tiers, fastest first: gpu=16GiB,cpu=128GiB[@25GB/s][+20us],disk=1TiB.")] = None,
        rate: Annotated[Optional[float], typer.Option("--rate", help="Fleet: arrivals at this many requests/s instead of the logged times.")] = None,
        seed: Annotated[int, typer.Option("--seed", help="Fleet: seed of --router random.")] = 0,
        skip_bad: SkipBad = False,
    ) -> None:
        """Simulate a prefix cache: hit tokens, avoided prefill, what each lost token was lost to."""
        out = output_format(fmt, as_json, FORMATS, "rich")
        policies = tuple(p.strip() for p in policy.split(",") if p.strip())
        if "ttl" in policies:
            err.print("[yellow]warning:[/] --policy ttl is deprecated and will be removed; use --policy lru "
                      "--ttl SECONDS (ttl alone means --ttl 300)", highlight=False)
        options = SimulateOptions(
            cache=cache, policies=policies, capacities=tuple(parse_capacities(capacity)) if capacity else (),
            block_size=block_size, ttl_s=ttl, kv_model=kv_model, model_config=model_config, kv_dtype=kv_dtype,
            min_tokens=min_tokens, price_input=price_input, price_read=price_read, price_write=price_write,
            in_flight=in_flight, per_request=per_request, slots=slots, slot_similarity=slot_similarity,
            cache_ram_mib=cache_ram, input_format=input_format,
            tokenizer=deprecated_alias("--model", "--tokenizer", old_model, tokenizer), template=template)
        fleet = None
        if any(x is not None for x in (replicas, router, tiers, calibrate, rate)):
            fleet = FleetOptions(replicas or 1, router or "round-robin", hardware, calibrate, tiers, rate, seed)
        ingest = Ingest(paths, format=input_format, stdin=sys.stdin.buffer if "-" in paths else None)
        with progress("prepare", enabled=None if out == "rich" else False) as bar:
            report = simulate(ingest, options, on_prepared=bar.advance) if fleet is None else \
                simulate_fleet(ingest, options, fleet, on_prepared=bar.advance)
        if out == "json":
            sys.stdout.write(orjson.dumps(report).decode() + "\n")
        elif fleet is not None:
            render_fleet(report)
        else:
            render(report)
        raise typer.Exit(EXIT_ERROR if report_skipped(ingest.summary.skipped, skip_bad) else 0)
