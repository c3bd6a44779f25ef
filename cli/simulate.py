"""``prefixcache simulate``: hit tokens and avoided prefill under a real cache model.

Parse the options, call :func:`prefixcache.analyzer.api.simulate`, render its
:class:`~prefixcache.analyzer.cache.simulate.document.SimulateReport` (``--json``: the report as
is; rich: :mod:`prefixcache.cli.simulate_render`). Nonsense values are usage errors (exit 2)
before any work; unreadable records exit 2 unless ``--skip-bad``.
"""

from __future__ import annotations

import sys
from typing import Annotated, Optional

import orjson
import typer

from prefixcache.analyzer.cache.capacity import parse_capacities
from prefixcache.analyzer.ingest import Ingest
from prefixcache.cli.common import EXIT_ERROR, err, handle_errors, progress, report_skipped
from prefixcache.cli.options import (
    AsJson, BlockSize, Cache, Capacity, InputFormat, KvModel, ModelAsTokenizer, Paths, SkipBad, Template, Tokenizer, Ttl,
    deprecated_alias, format_option, output_format, policy_option, rate_option, seed_option,
)

FORMATS = ("rich", "json")


def _rate(text: str | None) -> float | None:
    """``--sample``: a fraction (0.01) or a percentage (1%); BadParameter otherwise."""
    if text is None:
        return None
    try:
        return float(text[:-1]) / 100 if text.strip().endswith("%") else float(text)
    except ValueError:
        raise typer.BadParameter(f"expected a rate such as 0.01 or 1%, got {text!r}", param_hint="--sample") from None


def register(app: typer.Typer) -> None:
    """Add the ``simulate`` command to ``app``."""

    @app.command("simulate")
    @handle_errors
    def simulate_cmd(
        paths: Paths,
        fmt: format_option("Output: rich (default) or json.") = None,
        as_json: AsJson = False,
        input_format: InputFormat = "auto",
        tokenizer: Tokenizer = "auto",
        old_model: ModelAsTokenizer = None,
        template: Template = "auto",
        cache: Cache = "vllm",
        policy: policy_option("Eviction policies, comma-separated: lru, fifo, lfu, slru, length, gdsf, belady (sglang: lru, fifo, lfu, slru, mru).") = "lru",
        capacity: Capacity = None,
        block_size: BlockSize = None,
        ttl: Ttl = None,
        kv_model: KvModel = None,
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
        rate: rate_option("Fleet: arrivals at this many requests/s instead of the logged times.") = None,
        seed: seed_option("Fleet: seed of --router random.") = 0,
        survival: Annotated[bool, typer.Option("--survival", help="Reuse gaps, residency at each capacity and survival curves, per segment kind and session.")] = False,
        ttl_whatif: Annotated[bool, typer.Option("--ttl-whatif", help="Replay under every provider retention (engines: idle TTLs), priced, with advice.")] = False,
        reuse: Annotated[str, typer.Option("--reuse", help="Reuse ceilings, comma-separated: prefix, chunks (what-if: chunks prefilled earlier at another position).")] = "prefix",
        recompute: Annotated[float, typer.Option("--recompute", min=0.0, max=1.0, help="--reuse chunks: fraction of a reused chunk's tokens recomputed (CacheBlend ~0.15).")] = 0.15,
        chunk_tokens: Annotated[Optional[int], typer.Option("--chunk-tokens", min=1, help="--reuse chunks: also cut chunks into windows of this many tokens.")] = None,
        sample: Annotated[Optional[str], typer.Option("--sample", help="LRU curve from SHARDS sampling of block ids at this rate (0.01 or 1%), with its error: for traces too big for the exact pass.")] = None,
        sizing: Annotated[Optional[float], typer.Option("--sizing", help="The smallest self-hosted LRU KV cache (vLLM blocks; bytes with --kv-model) that reaches this fraction of the ideal hit tokens, e.g. 0.9.")] = None,
        executor: Annotated[str, typer.Option("--executor", help="Where the independent arms (policy x capacity, routers) run: local (serial), ray (all local cores, or the cluster in RAY_ADDRESS) or ray:ADDRESS (a Ray cluster); the output is the same. Needs prefixcache[ray].")] = "local",
        skip_bad: SkipBad = False,
    ) -> None:
        """Simulate a prefix cache: hit tokens, avoided prefill, what each lost token was lost to."""
        from prefixcache.analyzer.api import SimulateOptions, simulate, simulate_fleet

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
            cache_ram_mib=cache_ram, input_format=input_format, survival=survival, ttl_whatif=ttl_whatif,
            reuse=tuple(k.strip() for k in reuse.split(",") if k.strip()), recompute=recompute, chunk_tokens=chunk_tokens,
            tokenizer=deprecated_alias("--model", "--tokenizer", old_model, tokenizer), template=template,
            sample=_rate(sample), sizing=sizing, executor=executor)
        fleet = None
        if any(x is not None for x in (replicas, router, tiers, calibrate, rate)) and options.analyses_asked:
            raise typer.BadParameter("--survival, --ttl-whatif, --reuse chunks and --sizing apply without --replicas",
                                     param_hint="--replicas")
        if any(x is not None for x in (replicas, router, tiers, calibrate, rate)):
            from prefixcache.analyzer.api import FleetOptions

            fleet = FleetOptions(replicas or 1, router or "round-robin", hardware, calibrate, tiers, rate, seed)
        ingest = Ingest(paths, format=input_format, stdin=sys.stdin.buffer if "-" in paths else None, require_requests=True)
        with progress("prepare", enabled=None if out == "rich" else False) as bar:
            report = simulate(ingest, options, on_prepared=bar.advance) if fleet is None else \
                simulate_fleet(ingest, options, fleet, on_prepared=bar.advance)
        if out == "json":
            sys.stdout.write(orjson.dumps(report).decode() + "\n")
        elif fleet is not None:
            from prefixcache.cli.fleet import render_fleet

            render_fleet(report)
        else:  # the renderers (rich tables) are imported only for the rich output
            from prefixcache.cli.simulate_analyses import render_analyses
            from prefixcache.cli.simulate_render import render

            render(report)
            render_analyses(report)
        raise typer.Exit(EXIT_ERROR if report_skipped(ingest.summary.skipped, skip_bad) else 0)
