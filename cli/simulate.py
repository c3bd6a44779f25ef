"""``prefixcache simulate``: hit tokens and avoided prefill under a real cache model.

For each policy × capacity: token / block hit ratio, request hit rate, ideal
(unbounded cache) and fraction of ideal, avoided prefill tokens, hits by
segment and lost tokens by cause; where the log has the provider's reported
cached tokens, predicted next to reported for every call with the agreement;
for provider caches an estimated cost line. ``--json`` writes one document
(README: simulate JSON schema).
"""

from __future__ import annotations

import sys
from dataclasses import replace
from typing import Optional

import orjson
import typer
from rich.table import Table

from prefixcache.analyzer.cache.capacity import kv_shape, parse_capacities
from prefixcache.analyzer.cache.eviction import POLICIES
from prefixcache.analyzer.cache.runs import drift_causes, sweep_block_cache, unique_blocks
from prefixcache.analyzer.cache.simulator import CACHES, CacheSpec, baseline, simulate, to_sim_requests
from prefixcache.analyzer.errors import ConfigError, PrefixcacheError
from prefixcache.analyzer.ingest import Ingest
from prefixcache.analyzer.metrics import CAUSES, Prices, calibrated_cached, cost_usd, totals
from prefixcache.analyzer.pipeline import Preparer

from .common import EXIT_ERROR, console, err, handle_errors, progress


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
    reqs = to_sim_requests(items)
    unit = spec.unit(reqs)
    base = baseline(reqs)
    try:
        causes = drift_causes(items, reqs, unit if cache in ("vllm", "sglang") else 16)
    except (ImportError, PrefixcacheError, ValueError):
        causes = {}
    uniq = base.unique_tokens // unit if cache == "sglang" else unique_blocks(reqs, unit)
    bpt = shape.bytes_per_token if shape else None
    cap_blocks = [(c.text, c.blocks(unit, uniq, bpt)) for c in caps] or [("unbounded", None)]
    results, first_rows = [], None
    for pol in pols:
        pspec = replace(spec, policy=pol, ttl_s=ttl if ttl is not None else (300.0 if pol == "ttl" else None))
        blocks = [b for _, b in cap_blocks]
        if cache in ("vllm", "blocks") and None not in blocks and pol in ("lru", "belady") and in_flight <= 1:
            per_cap = sweep_block_cache(reqs, pspec, blocks, base)
            per_cap = [_attach(rows, causes) for rows in per_cap]
        else:
            if pol == "belady":
                raise ConfigError("--policy belady needs a finite --capacity, --cache vllm or blocks, no --in-flight")
            per_cap = [simulate(reqs, pspec, b, base, causes) for b in blocks]
        for (text, b), rows in zip(cap_blocks, per_cap):
            results.append(_row(cache, pol, text, b, unit, bpt, rows))
            first_rows = first_rows or rows
    min_tok = spec.provider_rules(model).min_tokens if cache in ("openai", "anthropic", "deepseek") else 0
    calls, agree = _calls(first_rows or [], unit, max(unit, 64), min_tok)
    cost = None
    if cache in ("openai", "anthropic", "deepseek"):
        rules = spec.provider_rules(model)
        with_c, without = cost_usd(first_rows, Prices(rules.price_input, rules.read_multiplier))
        cost = {"usd_with_cache": round(with_c, 6), "usd_without_cache": round(without, 6),
                "price_input_per_mtok": rules.price_input, "read_multiplier": rules.read_multiplier,
                "write_multiplier": rules.write_multiplier, "min_tokens": rules.min_tokens, "ttl_s": rules.ttl_s}
    summary = ingest.summary
    bad = [s for s in summary.skipped if s.bad]
    doc = {"cache": cache, "block_size": unit, "unique_blocks": uniq, "kv_bytes_per_token": bpt,
           "results": results, "calls": calls, "agreement": agree, "cost": cost,
           "tokenizers": {str(k): v for k, v in preparer.notes.items()},
           "summary": {"files": summary.files, "records": summary.records, "requests": summary.requests,
                       "sessions": summary.sessions, "skipped": len(summary.skipped)}}
    if per_request:
        doc["requests"] = [_req_dict(f) for f in first_rows or []]
    if as_json:
        sys.stdout.write(orjson.dumps(doc).decode() + "\n")
    else:
        _print(doc, first_rows if per_request else None)
    for s in summary.skipped:
        where = f"{s.source}:{s.record}" + (f" field {s.field}" if s.field else "")
        err.print(f"[{'red' if s.bad else 'yellow'}]skipped:[/] {where}: {s.reason}", highlight=False)
    return EXIT_ERROR if bad and not skip_bad else 0


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


def _num(n: int) -> str:
    """Compact token counts: 950, 12.3k, 4.56M."""
    if abs(n) < 10_000:
        return f"{n:,}"
    if abs(n) < 1_000_000:
        return f"{n / 1e3:,.1f}k"
    return f"{n / 1e6:,.2f}M"


def _print(doc: dict, rows) -> None:
    t = Table(title=f"simulate · cache {doc['cache']} · block {doc['block_size']} tokens · "
                    f"{doc['unique_blocks']:,} unique blocks", title_justify="left")
    for col in ("policy", "capacity", "blocks", "hit tok", "hit blk", "req hit", "ideal", "of ideal", "avoided"):
        t.add_column(col, justify="left" if col in ("policy", "capacity") else "right")
    for r in doc["results"]:
        t.add_row(r["policy"], r["capacity"], "∞" if r["capacity_blocks"] is None else f"{r['capacity_blocks']:,}",
                  _pct(r["hit_ratio_tokens"]), _pct(r["hit_ratio_blocks"]), _pct(r["request_hit_rate"]),
                  _pct(r["ideal_hit_ratio"]), _pct(r["fraction_of_ideal"]), _num(r["avoided_prefill_tokens"]))
    console.print(t)
    used = [c for c in CAUSES if any(r["lost_tokens_by_cause"][c] for r in doc["results"])]
    if used:
        lt = Table(title="lost tokens by cause", title_justify="left")
        lt.add_column("policy")
        lt.add_column("size")
        for col in used:
            lt.add_column(col, justify="right")
        for r in doc["results"]:
            lt.add_row(r["policy"], r["capacity"], *(_num(r["lost_tokens_by_cause"][c]) for c in used))
        console.print(lt)
    first = doc["results"][0]
    seg = ", ".join(f"{k} {v:,}" for k, v in first["hits_by_segment"].items() if v)
    if seg:
        console.print(f"cached tokens by segment ({first['policy']}, {first['capacity']}): {seg}")
    if first["drift_by_rule"]:
        console.print("drift by rule: " + ", ".join(f"{k} {v:,}" for k, v in first["drift_by_rule"].items()))
    if rows:
        _print_requests(rows)
    if doc["calls"]:
        _print_calls(doc)
    if doc["cost"]:
        c = doc["cost"]
        saved = 1 - c["usd_with_cache"] / c["usd_without_cache"] if c["usd_without_cache"] else 0.0
        console.print(f"estimated input cost: ${c['usd_with_cache']:.4f} with cache vs ${c['usd_without_cache']:.4f} "
                      f"without ({_pct(saved)} saved; ${c['price_input_per_mtok']}/MTok, read ×{c['read_multiplier']}, "
                      f"write ×{c['write_multiplier']})")
    for model, note in doc["tokenizers"].items():
        console.print(f"[dim]tokenizer for {model}: {note}[/]")


def _print_requests(rows) -> None:
    t = Table(title="per request", title_justify="left")
    used = [c for c in CAUSES if any(f.lost.get(c) for f in rows)]
    for col in ("#", "session", "record", "prompt", "cached", "ideal", *used):
        t.add_column(col, justify="right" if col not in ("session",) else "left")
    for f in rows:
        t.add_row(str(f.order), f.session[-16:], str(f.record), f"{f.prompt_tokens:,}", f"{f.cached_tokens:,}",
                  f"{f.ideal_tokens:,}", *(f"{f.lost.get(c, 0):,}" for c in used))
    console.print(t)


def _print_calls(doc: dict) -> None:
    a = doc["agreement"]
    t = Table(title="predicted vs reported cached tokens", title_justify="left")
    for col in ("session", "record", "prompt", "rep. prompt", "predicted", "calibr.", "reported", "Δ calibr."):
        t.add_column(col, justify="left" if col == "session" else "right")
    for c in doc["calls"]:
        t.add_row(c["session"][-12:], str(c["record"]), f"{c['prompt_tokens']:,}",
                  "—" if c["reported_prompt_tokens"] is None else f"{c['reported_prompt_tokens']:,}",
                  f"{c['predicted_cached_tokens']:,}", f"{c['calibrated_cached_tokens']:,}",
                  f"{c['reported_cached_tokens']:,}", f"{c['calibrated_cached_tokens'] - c['reported_cached_tokens']:+,}")
    console.print(t)
    console.print(f"agreement (within {a['tolerance_tokens']} tokens): {a['within_tolerance']}/{a['calls']} calls "
                  f"({_pct(a['agreement'])}), mean |error| {a['mean_abs_error_tokens']:,} tokens; calibrated to the "
                  f"reported prompt length: {a['calibrated_within_tolerance']}/{a['calls']} "
                  f"({_pct(a['calibrated_agreement'])}), mean |error| {a['calibrated_mean_abs_error_tokens']:,}")
    if a["warm_before_log"]:
        console.print(f"{a['warm_before_log']} call(s) were served from cache although nothing earlier in the log "
                      "shares their prefix (warm before the log began): no replay of this log can predict them")


def register(app: typer.Typer) -> None:
    """Add the ``simulate`` command to ``app``."""

    @app.command("simulate")
    @handle_errors
    def simulate_cmd(
        paths: list[str] = typer.Argument(..., help="Log files, directories, globs, block-hash traces, or - for stdin."),
        fmt: str = typer.Option("auto", "--format", help="Force a log format; default: detect per file."),
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
