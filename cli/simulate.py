"""``prefixcache simulate``: hit tokens and avoided prefill under a real cache model.

For each policy × capacity: token / block hit ratio, request hit rate, ideal
(unbounded cache) and fraction of ideal, avoided prefill tokens, hits by
segment and lost tokens by cause; where the log has the provider's reported
cached tokens, predicted next to reported for every call with the agreement;
for provider caches an estimated cost line, and next to it the cost the log's
own reported usage implies. Usage-only requests (the log kept the provider's
counts but not the prompt) cannot be simulated: they are counted and their
reported usage shown. ``--json`` writes one document (README: simulate JSON schema).
"""

from __future__ import annotations

import sys
from dataclasses import replace
from typing import Optional

import orjson
import typer
from rich.markup import escape
from rich.table import Table

from prefixcache.analyzer.cache.capacity import kv_shape, parse_capacities
from prefixcache.analyzer.cache.eviction import POLICIES
from prefixcache.analyzer.cache.runs import sweep_block_cache, unique_blocks
from prefixcache.analyzer.lint.engine import drift_causes
from prefixcache.analyzer.cache.simulator import CACHES, CacheSpec, baseline, simulate, to_sim_requests
from prefixcache.analyzer.errors import ConfigError, PrefixcacheError
from prefixcache.analyzer.ingest import Ingest
from prefixcache.analyzer.cache.figures import CAUSES, Prices, calibrated_cached, cost_usd, reported_usage, totals
from prefixcache.analyzer.prepare import Preparer

from prefixcache.cli.common import EXIT_ERROR, console, handle_errors, progress, report_skipped


def _row(cache: str, policy: str, cap_text: str, cap_blocks, unit: int, bpt, rows) -> dict:
    t = totals(rows)
    return {
        "cache": cache, "policy": policy, "capacity": cap_text,
        "capacity_blocks": cap_blocks, "block_size": unit,
        "capacity_tokens": None if cap_blocks is None else cap_blocks * unit,
        "capacity_bytes": None if cap_blocks is None or not bpt else cap_blocks * unit * bpt,
        "requests": t.requests, "prompt_tokens": t.prompt_tokens, "cached_tokens": t.cached_tokens,
        "hit_ratio_tokens": round(t.hit_ratio_tokens, 6), "hit_ratio_blocks": round(t.hit_ratio_blocks, 6),
        "request_hit_rate": round(t.request_hit_rate, 6), "ideal_hit_ratio": round(t.ideal_hit_ratio, 6),
        "fraction_of_ideal": round(t.fraction_of_ideal, 6), "avoided_prefill_tokens": t.avoided_prefill_tokens,
        "written_tokens": t.written_tokens, "lost_tokens_by_cause": dict(t.lost),
        "hits_by_segment": dict(t.segments), "drift_by_rule": dict(t.drift_by_cause),
    }


def _calls(rows, unit: int, tol: int, min_tokens: int) -> tuple[list[dict], dict | None]:
    """Predicted vs reported cached tokens per call, and the agreement figures."""
    calls = []
    for f, cal in zip(rows, calibrated_cached(rows, unit, min_tokens)):
        if f.reported_cached_tokens is None:
            continue
        calls.append({"session": f.session, "source": f.source, "record": f.record,
                      "prompt_tokens": f.prompt_tokens, "reported_prompt_tokens": f.reported_prompt_tokens,
                      "predicted_cached_tokens": f.cached_tokens,
                      "calibrated_cached_tokens": f.cached_tokens if cal is None else cal,
                      "reported_cached_tokens": f.reported_cached_tokens,
                      "warm_before_log": f.shared_tokens == 0 and f.reported_cached_tokens > 0})
    if not calls:
        return [], None
    n = len(calls)
    within = lambda key: sum(abs(c[key] - c["reported_cached_tokens"]) <= tol for c in calls)  # noqa: E731
    mae = lambda key: sum(abs(c[key] - c["reported_cached_tokens"]) for c in calls) / n  # noqa: E731
    rep = sum(c["reported_cached_tokens"] for c in calls)
    agree = {"calls": n, "tolerance_tokens": tol,
             "within_tolerance": within("predicted_cached_tokens"),
             "agreement": round(within("predicted_cached_tokens") / n, 4),
             "calibrated_within_tolerance": within("calibrated_cached_tokens"),
             "calibrated_agreement": round(within("calibrated_cached_tokens") / n, 4),
             "mean_abs_error_tokens": round(mae("predicted_cached_tokens"), 1),
             "calibrated_mean_abs_error_tokens": round(mae("calibrated_cached_tokens"), 1),
             "warm_before_log": sum(c["warm_before_log"] for c in calls),
             "reported_cached_tokens": rep,
             "predicted_cached_tokens": sum(c["predicted_cached_tokens"] for c in calls)}
    return calls, agree


def run_simulate(paths, fmt, tokenizer, template, cache, policies, capacity, block_size, ttl, kv_model,
                 model_config, kv_dtype, min_tokens, price_input, price_read, price_write, per_request,
                 as_json, skip_bad, in_flight: int = 1) -> int:
    """Ingest → prepare → simulate every policy × capacity; print or write JSON."""
    if cache not in CACHES:
        raise ConfigError(f"unknown --cache {cache!r}; choose one of {', '.join(CACHES)}")
    pols = [p.strip() for p in policies.split(",") if p.strip()]
    for p in pols:
        if p not in (*POLICIES, "belady", "mru"):
            raise ConfigError(f"unknown --policy {p!r}; choose from {', '.join(POLICIES)}, belady")
    caps = parse_capacities(capacity) if capacity else []
    shape = kv_shape(kv_model, model_config, kv_dtype)
    ingest = Ingest(paths, format=fmt, stdin=sys.stdin.buffer if "-" in paths else None)
    preparer = Preparer(template=template, tokenizer=tokenizer)
    items = []
    with progress("prepare", enabled=None if not as_json else False) as bar:
        for request in ingest:
            items.append(preparer.prepare(request))
            bar.advance()
    overrides = {"min_tokens": min_tokens, "price_input": price_input, "read_multiplier": price_read,
                 "write_multiplier": price_write}
    model = next((p.request.model for p in items if p.request.model), None)
    if in_flight < 1:
        raise ConfigError(f"--in-flight must be at least 1, got {in_flight}")
    spec = CacheSpec(cache, "lru", block_size, ttl, model, {k: v for k, v in overrides.items() if v is not None},
                     in_flight)
    reqs = to_sim_requests(items)  # usage-only requests have no prompt to replay
    unit = spec.unit(reqs)
    bpt = shape.bytes_per_token if shape else None
    results, first_rows, uniq = _run_policies(items, reqs, spec, pols, caps, ttl, bpt) if reqs else ([], None, 0)
    min_tok = spec.provider_rules(model).min_tokens if cache in ("openai", "anthropic", "deepseek") else 0
    calls, agree = _calls(first_rows or [], unit, max(unit, 64), min_tok)
    reported = reported_usage(p.request.usage for p in items)
    summary = ingest.summary
    usage_only = sum(p.usage_only for p in items)
    doc = {"cache": cache, "block_size": unit, "unique_blocks": uniq, "kv_bytes_per_token": bpt,
           "results": results, "calls": calls, "agreement": agree,
           "cost": _cost(spec, model, first_rows, reported) if cache in ("openai", "anthropic", "deepseek") else None,
           "usage_only_requests": usage_only,
           "reported": None if reported is None else {
               "calls": reported.requests, "prompt_tokens": reported.prompt_tokens,
               "cached_tokens": reported.cached_tokens, "cache_write_tokens": reported.cache_write_tokens,
               "hit_ratio": round(reported.hit_ratio, 6)},
           "tokenizers": {(k or "(no model name)"): v for k, v in preparer.notes.items()},
           "summary": {"files": summary.files, "records": summary.records, "requests": summary.requests,
                       "sessions": summary.sessions, "skipped": len(summary.skipped)}}
    if per_request:
        doc["requests"] = [_req_dict(f) for f in first_rows or []]
    if as_json:
        sys.stdout.write(orjson.dumps(doc).decode() + "\n")
    else:
        _print(doc, first_rows if per_request else None)
    return EXIT_ERROR if report_skipped(summary.skipped, skip_bad) else 0


def _run_policies(items, reqs, spec: CacheSpec, pols, caps, ttl, bpt) -> tuple[list[dict], list | None, int]:
    """Every policy × capacity: (result rows, first row's per-request figures, unique blocks)."""
    cache, unit = spec.cache, spec.unit(reqs)
    base = baseline(reqs)
    try:
        causes = drift_causes(items, reqs, unit if cache in ("vllm", "sglang") else 16)
    except (ImportError, PrefixcacheError, ValueError):
        causes = {}
    uniq = base.unique_tokens // unit if cache == "sglang" else unique_blocks(reqs, unit)
    cap_blocks = [(c.text, c.blocks(unit, uniq, bpt)) for c in caps] or [("unbounded", None)]
    results, first_rows = [], None
    for pol in pols:
        pspec = replace(spec, policy=pol, ttl_s=ttl if ttl is not None else (300.0 if pol == "ttl" else None))
        blocks = [b for _, b in cap_blocks]
        if cache in ("vllm", "blocks") and None not in blocks and pol in ("lru", "belady") and spec.in_flight <= 1:
            per_cap = sweep_block_cache(reqs, pspec, blocks, base)
            per_cap = [_attach(rows, causes) for rows in per_cap]
        else:
            if pol == "belady":
                raise ConfigError("--policy belady needs a finite --capacity, --cache vllm or blocks, no --in-flight")
            per_cap = [simulate(reqs, pspec, b, base, causes) for b in blocks]
        for (text, b), rows in zip(cap_blocks, per_cap):
            results.append(_row(cache, pol, text, b, unit, bpt, rows))
            first_rows = first_rows or rows
    return results, first_rows, uniq


def _cost(spec: CacheSpec, model, first_rows, reported) -> dict:
    """Provider caches: input cost of our predicted hits (first result row; null when
    nothing was simulated) and the cost the log's reported usage implies."""
    rules = spec.provider_rules(model)
    prices = Prices(rules.price_input, rules.read_multiplier)
    with_c, without = cost_usd(first_rows, prices) if first_rows else (None, None)
    rep_c, rep_without = reported.cost_usd(prices, rules.write_multiplier) if reported else (None, None)
    r6 = lambda x: None if x is None else round(x, 6)  # noqa: E731
    return {"usd_with_cache": r6(with_c), "usd_without_cache": r6(without),
            "reported_usd_with_cache": r6(rep_c), "reported_usd_without_cache": r6(rep_without),
            "price_input_per_mtok": rules.price_input, "read_multiplier": rules.read_multiplier,
            "write_multiplier": rules.write_multiplier, "min_tokens": rules.min_tokens, "ttl_s": rules.ttl_s}


def _attach(rows, causes):
    return [replace(f, drift_cause=causes.get(f.order)) for f in rows]


def _req_dict(f) -> dict:
    return {"order": f.order, "session": f.session, "source": f.source, "record": f.record,
            "prompt_tokens": f.prompt_tokens, "cached_tokens": f.cached_tokens, "ideal_tokens": f.ideal_tokens,
            "blocks_total": f.blocks_total, "blocks_hit": f.blocks_hit, "written_tokens": f.written_tokens,
            "lost_tokens_by_cause": dict(f.lost), "hits_by_segment": dict(f.segments),
            "drift_cause": f.drift_cause, "reported_cached_tokens": f.reported_cached_tokens}


def _pct(x: float) -> str:
    return f"{100 * x:.1f}%"


def _n(n: int) -> str:
    """Token and block counts in tables and lines: always in full, comma-grouped."""
    return f"{n:,}"


def _granule(cache: str, unit: int, uniq: int) -> str:
    """What the cache counts in, for the title: no "block 1 tokens"."""
    if cache == "anthropic":
        return "token-granular prefixes at breakpoints"
    if cache in ("openai", "deepseek"):
        return f"{unit}-token units · {_n(uniq)} unique units"
    if unit == 1:
        return f"1-token pages · {_n(uniq)} unique tokens"
    return f"{unit}-token {'pages' if cache == 'sglang' else 'blocks'} · {_n(uniq)} unique blocks"


def _print(doc: dict, rows) -> None:
    if doc["results"]:
        _print_results(doc)
    if doc["usage_only_requests"]:
        n = doc["usage_only_requests"]
        what = ("nothing to simulate: a cache model needs the prompts" if not doc["results"]
                else "left out of the simulation above")
        console.print(f"[yellow]prompts not logged:[/] {n} request(s) carry only the provider's reported usage; "
                      f"{what}")
    if rows:
        _print_requests(rows)
    if doc["calls"]:
        _print_calls(doc)
    rep = doc["reported"]
    if rep:
        console.print(f"reported by the log ({_n(rep['calls'])} calls): {_n(rep['prompt_tokens'])} prompt tokens, "
                      f"{_n(rep['cached_tokens'])} cached ({_pct(rep['hit_ratio'])}), "
                      f"{_n(rep['cache_write_tokens'])} written to cache")
    if doc["cost"]:
        _print_cost(doc["cost"])
    for note in doc["tokenizers"].values():
        console.print(f"[dim]{escape(note)}[/]")


def _print_results(doc: dict) -> None:
    granule = _granule(doc["cache"], doc["block_size"], doc["unique_blocks"])
    t = Table(title=f"simulate · cache {doc['cache']} · {granule}", title_justify="left")
    for col in ("policy", "capacity", "blocks", "hit tok", "hit blk", "req hit", "ideal", "of ideal", "avoided"):
        t.add_column(col, justify="left" if col in ("policy", "capacity") else "right")
    for r in doc["results"]:
        t.add_row(r["policy"], r["capacity"], "∞" if r["capacity_blocks"] is None else _n(r["capacity_blocks"]),
                  _pct(r["hit_ratio_tokens"]), _pct(r["hit_ratio_blocks"]), _pct(r["request_hit_rate"]),
                  _pct(r["ideal_hit_ratio"]), _pct(r["fraction_of_ideal"]), _n(r["avoided_prefill_tokens"]))
    console.print(t)
    used = [c for c in CAUSES if any(r["lost_tokens_by_cause"][c] for r in doc["results"])]
    if used:
        lt = Table(title="lost tokens by cause", title_justify="left")
        lt.add_column("policy")
        lt.add_column("capacity")
        for col in used:
            lt.add_column(col, justify="right")
        for r in doc["results"]:
            lt.add_row(r["policy"], r["capacity"], *(_n(r["lost_tokens_by_cause"][c]) for c in used))
        console.print(lt)
    first = doc["results"][0]
    seg = ", ".join(f"{k} {_n(v)}" for k, v in first["hits_by_segment"].items() if v)
    if seg:
        console.print(f"cached tokens by segment ({first['policy']}, {first['capacity']}): {seg}")
    if first["drift_by_rule"]:
        console.print("drift by rule: " + ", ".join(f"{k} {_n(v)}" for k, v in first["drift_by_rule"].items()))


def _print_cost(c: dict) -> None:
    rates = f"${c['price_input_per_mtok']}/MTok, read ×{c['read_multiplier']}, write ×{c['write_multiplier']}"

    def line(with_c: float, without: float) -> str:
        saved = 1 - with_c / without if without else 0.0
        return f"${with_c:.4f} with cache vs ${without:.4f} without ({_pct(saved)} saved)"

    if c["usd_with_cache"] is not None:
        console.print(f"estimated input cost, predicted hits: {line(c['usd_with_cache'], c['usd_without_cache'])}; "
                      f"{rates}")
    if c["reported_usd_with_cache"] is not None:
        console.print(f"input cost the log's reported usage implies: "
                      f"{line(c['reported_usd_with_cache'], c['reported_usd_without_cache'])}; {rates}")


def _print_requests(rows) -> None:
    t = Table(title="per request", title_justify="left")
    used = [c for c in CAUSES if any(f.lost.get(c) for f in rows)]
    for col in ("#", "session", "record", "prompt", "cached", "ideal", *used):
        t.add_column(col, justify="left" if col == "session" else "right",
                     overflow="fold" if col == "session" else "ellipsis", min_width=12 if col == "session" else None)
    for f in rows:
        t.add_row(str(f.order), f.session, str(f.record), _n(f.prompt_tokens), _n(f.cached_tokens),
                  _n(f.ideal_tokens), *(_n(f.lost.get(c, 0)) for c in used))
    console.print(t)


def _print_calls(doc: dict) -> None:
    a = doc["agreement"]
    t = Table(title="predicted vs reported cached tokens", title_justify="left")
    for col in ("session", "record", "prompt", "rep. prompt", "predicted", "calibr.", "reported", "Δ calibr."):
        t.add_column(col, justify="left" if col == "session" else "right",
                     overflow="fold" if col == "session" else "ellipsis", min_width=12 if col == "session" else None)
    for c in doc["calls"]:
        t.add_row(c["session"], str(c["record"]), f"{c['prompt_tokens']:,}",
                  "—" if c["reported_prompt_tokens"] is None else f"{c['reported_prompt_tokens']:,}",
                  f"{c['predicted_cached_tokens']:,}", f"{c['calibrated_cached_tokens']:,}",
                  f"{c['reported_cached_tokens']:,}", f"{c['calibrated_cached_tokens'] - c['reported_cached_tokens']:+,}")
    console.print(t)
    console.print(f"agreement (within {a['tolerance_tokens']} tokens): {a['within_tolerance']}/{a['calls']} calls "
                  f"({_pct(a['agreement'])}), mean |error| {a['mean_abs_error_tokens']:,.0f} tokens; calibrated to the "
                  f"reported prompt length: {a['calibrated_within_tolerance']}/{a['calls']} "
                  f"({_pct(a['calibrated_agreement'])}), mean |error| {a['calibrated_mean_abs_error_tokens']:,.0f} tokens")
    if a["warm_before_log"]:
        console.print(f"{a['warm_before_log']} call(s) were served from cache although nothing earlier in the log "
                      "shares their prefix (warm before the log began): no replay of this log can predict them")


def register(app: typer.Typer) -> None:
    """Add the ``simulate`` command to ``app``."""

    @app.command("simulate")
    @handle_errors
    def simulate_cmd(
        paths: list[str] = typer.Argument(..., help="Log files, directories, globs, block-hash traces, or - for stdin."),
        fmt: str = typer.Option("auto", "--input-format", help="Force a log format (see README); default: detect per file."),
        tokenizer: str = typer.Option("auto", "--tokenizer", "--model", help="Tokenizer spec (see inspect)."),
        template: str = typer.Option("auto", "--template", help="Chat template (see inspect)."),
        cache: str = typer.Option("vllm", "--cache", help=f"Cache model: {', '.join(CACHES)}."),
        policy: str = typer.Option("lru", "--policy", help="Eviction policies, comma-separated: lru, fifo, lfu, slru, length, gdsf, ttl, belady (sglang also mru)."),
        capacity: Optional[str] = typer.Option(None, "--capacity", help="Capacities, comma-separated: 5%, 4000blocks, 2Mtok, 16GiB. Default: unbounded."),
        block_size: Optional[int] = typer.Option(None, "--block-size", help="Block / page size in tokens (vllm 16, sglang 1)."),
        ttl: Optional[float] = typer.Option(None, "--ttl", help="Expire blocks idle longer than this (seconds, logical clock)."),
        kv_model: Optional[str] = typer.Option(None, "--kv-model", help="KV size preset for byte capacities (llama-3-8b, llama-3-70b, qwen2.5-7b, ...)."),
        model_config: Optional[str] = typer.Option(None, "--model-config", help="HF config.json (or folder) for KV bytes per token."),
        kv_dtype: Optional[str] = typer.Option(None, "--kv-dtype", help="KV dtype (bf16, fp16, fp8, fp32); default from the config."),
        min_tokens: Optional[int] = typer.Option(None, "--min-tokens", help="Override the provider's minimum cacheable length."),
        price_input: Optional[float] = typer.Option(None, "--price-input", help="Input price, USD per million tokens."),
        price_read: Optional[float] = typer.Option(None, "--price-read", help="Cache read price multiplier."),
        price_write: Optional[float] = typer.Option(None, "--price-write", help="Cache write price multiplier."),
        in_flight: int = typer.Option(1, "--in-flight", help="Block caches: requests in flight at once; each pins its blocks until that many later requests started (1 = sequential)."),
        per_request: bool = typer.Option(False, "--per-request", help="Show (and write in JSON) every request's figures."),
        as_json: bool = typer.Option(False, "--json", help="Write one JSON document (README: simulate)."),
        skip_bad: bool = typer.Option(False, "--skip-bad", help="Report unreadable records and go on."),
    ) -> None:
        """Simulate a prefix cache: hit tokens, avoided prefill, what each lost token was lost to."""
        raise typer.Exit(run_simulate(paths, fmt, tokenizer, template, cache, policy, capacity, block_size, ttl,
                                      kv_model, model_config, kv_dtype, min_tokens, price_input, price_read,
                                      price_write, per_request, as_json, skip_bad, in_flight))
