"""``prefixcache replay``: run the logged requests through a real local model with and
without a KV prefix cache, original and canonicalized, and measure prefill, cached
tokens, TTFT and KV memory; verify that cache hits change nothing in the output.

Exit codes: 0 clean, 1 a verification mismatch (or the engine's cached tokens
differ from the simulator's), 2 usage, input or engine error, 130 interrupted
(the summary of what finished is still printed and the JSONL kept).
"""

from __future__ import annotations

import re
from dataclasses import asdict
import sys
from pathlib import Path
from typing import Optional

import orjson
import typer
from rich.markup import escape
from rich.table import Table

from prefixcache.analyzer.errors import ConfigError
from prefixcache.analyzer.ingest import Ingest
from prefixcache.analyzer.prepare import Preparer

from prefixcache.cli.common import EXIT_FINDINGS, EXIT_OK, console, err, handle_errors, one_per_kind, progress, report_skipped

EXIT_INTERRUPTED = 130
_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([KMGT]?i?B?)?\s*$", re.I)


def parse_bytes(text: str | None) -> int | None:
    """``"512MiB"``, ``"2GB"``, ``"1e6"``-free plain ints → bytes (binary and decimal units)."""
    if text is None:
        return None
    m = _SIZE.match(text)
    if not m:
        raise ConfigError(f"--capacity-bytes {text!r}: expected a size such as 512MiB or 2GB")
    unit = (m.group(2) or "").upper().rstrip("B")
    base = 1024 if unit.endswith("I") else 1000
    power = {"": 0, "K": 1, "M": 2, "G": 3, "T": 4}[unit.rstrip("I")]
    return int(float(m.group(1)) * base**power)


def _requests(paths: list[str], fmt: str, max_requests: Optional[int]) -> tuple[list, Ingest]:
    ingest = Ingest(paths, format=fmt, stdin=sys.stdin.buffer if "-" in paths else None)
    reqs = [r for r in ingest if r.trace is None]
    if not reqs:
        raise ConfigError("no replayable requests: replay needs logs with prompt text (block-hash traces carry none)")
    return (reqs[:max_requests] if max_requests else reqs), ingest


def _canonical(requests: list) -> list:
    """The canonicalized requests (#5), in the same order."""
    from prefixcache.analyzer.canonical.rewrite import canonicalize_requests

    return list(canonicalize_requests(requests))


def _ms(s: float) -> str:
    return f"{s * 1000:,.0f}"


def _table(summaries, model: str, device: str) -> Table:
    """One column per pass, one row per figure (fits a narrow terminal)."""
    t = Table(title=f"replay · {model} · {device}", title_justify="left")
    t.add_column("")
    for s in summaries:
        t.add_column(s.pass_name, justify="right")
    rows = [
        ("requests", lambda s: str(s.requests)),
        ("prompt tokens", lambda s: f"{s.prompt_tokens:,}"),
        ("cached tokens (avoided prefill)", lambda s: f"{s.cached_tokens:,}"),
        ("prefill tokens computed", lambda s: f"{s.computed_tokens:,}"),
        ("hit rate", lambda s: f"{100 * s.hit_rate:.1f}%"),
        ("TTFT p50 / p95 / p99 ms", lambda s: f"{_ms(s.ttft_p50)} / {_ms(s.ttft_p95)} / {_ms(s.ttft_p99)}"),
        ("TTFT total s", lambda s: f"{s.ttft_total:.2f}"),
        ("speedup vs cold", lambda s: "—" if s.speedup is None else f"{s.speedup:.2f}×"),
        ("served tokens/s", lambda s: f"{s.effective_tok_s:,.0f}"),
        ("KV held, peak MiB", lambda s: f"{s.kv_bytes_peak / 2**20:,.1f}"),
        ("verified ok / checked", lambda s: f"{s.verified - s.mismatches}/{s.verified}"
            + (f" [red]({s.mismatches} mismatch)[/]" if s.mismatches else "")),
        ("max |Δlogit| vs cold", lambda s: "—" if s.max_abs_dlogit is None else f"{s.max_abs_dlogit:.1e}"),
        ("cached = simulator", lambda s: {None: "—", True: "yes", False: "[red]NO[/]"}[s.simulator_equal]),
    ]
    for label, cell in rows:
        t.add_row(label, *(cell(s) for s in summaries))
    return t


def run_replay(paths: list[str], opts: dict) -> int:
    """Load the model, prepare the prompts, run the passes, print the summary."""
    from prefixcache.replay.engine.hf import HFEngine, load_model
    from prefixcache.replay.results import ResultWriter, load_results, summarize
    from prefixcache.replay.runner import Replay, ReplayConfig, at_least_one, run_key, to_prompts

    passes = tuple(p.strip() for p in opts["passes"].split(",") if p.strip())
    config = ReplayConfig(passes=passes, block_size=opts["block_size"], capacity_blocks=opts["capacity_blocks"],
                          capacity_bytes=parse_bytes(opts["capacity_bytes"]), policy=opts["policy"],
                          max_new_tokens=opts["max_new_tokens"], verify=opts["verify"],
                          verify_every=opts["verify_every"], tol=opts["tol"], repeat=opts["repeat"])
    at_least_one(("--max-requests", opts["max_requests"]), ("--max-prompt-tokens", opts["max_prompt_tokens"]))
    requests, ingest = _requests(paths, opts["fmt"], opts["max_requests"])
    with console.status("loading model"):
        loaded = load_model(opts["model"], device=opts["device"], dtype=opts["dtype"])
    engine = HFEngine(loaded)
    spec = "tokenizer" if opts["template"] == "model" else opts["template"]
    preparer = Preparer(template=spec, tokenizer=loaded.path)
    bound = opts["max_prompt_tokens"]
    prompts = {"original": to_prompts((preparer.prepare(r) for r in requests), bound)}
    if "canonical" in passes:
        canon = Preparer(template=spec, tokenizer=loaded.path)
        prompts["canonical"] = to_prompts((canon.prepare(r) for r in _canonical(requests)), bound)
    run = run_key(model=loaded.path, dtype=opts["dtype"], device=loaded.device.type, block_size=config.block_size,
                  capacity=config.capacity_for(engine), policy=config.policy, template=spec, tokenizer=loaded.path,
                  max_prompt_tokens=bound, max_new_tokens=config.max_new_tokens)
    out = Path(opts["out"]) if opts["out"] else None
    done = load_results(out) if opts["resume"] and out is not None and out.exists() else []
    writer = ResultWriter(out, append=bool(done))  # appending: a torn last line is cut first
    try:
        replay = Replay(engine, config, prompts, writer, done, run=run)  # refuses another run's rows
    except BaseException:
        writer.close()
        raise
    interrupted = False
    try:
        replay.warmup()
        with progress("replay", total=replay.total()) as bar:
            replay.run(lambda name, _r: (bar.describe(f"replay {name}"), bar.advance()))
    except KeyboardInterrupt:
        interrupted = True
    finally:
        writer.close()
    summaries = summarize(replay.results, passes)
    facts = _facts(prompts, ingest, config.capacity_for(engine), bound, run, opts)
    own = f"template {Path(loaded.path).name}:chat_template"  # the analyzer names it by the (cache) folder
    facts["warnings"] = [w.replace(own, "the model's own chat template") for w in facts["warnings"]]
    _report(summaries, facts, loaded, preparer, opts, out, interrupted, ingest)
    for r in replay.results:
        if r.mismatch:
            err.print(f"[red]mismatch:[/] {r.source}:{r.record} pass {r.pass_name}: {r.cached_tokens} cached tokens, "
                      f"max |Δlogit| {r.max_abs_dlogit:.2e}, argmax {'same' if r.argmax_match else 'DIFFERS'}, "
                      f"greedy tokens {'same' if r.tokens_match else 'DIFFER'}", highlight=False)
        elif r.predicted_cached is not None and r.predicted_cached != r.cached_tokens:
            err.print(f"[red]error:[/] {r.source}:{r.record} pass {r.pass_name}: engine cached {r.cached_tokens} "
                      f"tokens, simulator predicted {r.predicted_cached}", highlight=False)
    if interrupted:
        return EXIT_INTERRUPTED
    bad = sum(s.mismatches for s in summaries) or any(s.simulator_equal is False for s in summaries)
    return EXIT_FINDINGS if bad else EXIT_OK


def _facts(prompts, ingest, capacity, bound, run, opts) -> dict:
    """What bounded or changed the replayed prompts (printed and in ``--json``)."""
    every = [p for ps in prompts.values() for p in ps]
    orig = prompts["original"]
    return {"requests": len(orig), "run": run, "template": opts["template"], "repeat": opts["repeat"], "capacity_blocks": capacity,
            "max_prompt_tokens": bound, "truncated_prompts": sum(p.truncated for p in orig),
            "truncated_canonical_prompts": sum(p.truncated for p in prompts.get("canonical", [])),
            "dropped_hidden_prefixes": sum(1 for p in orig if p.dropped_opaque),
            "skipped_records": len(ingest.summary.skipped), "warnings": one_per_kind(w for p in every for w in p.warnings)}


def _notes(loaded, preparer, opts) -> list[str]:
    """How prompts were rendered and tokenized, and what the model is, said once."""
    how = "the model's own chat template" if opts["template"] == "model" else f"template {opts['template']}"
    exact = all(preparer.pipeline(m).renderer.exact and preparer.pipeline(m).tokenizer.exact for m in preparer.notes)
    lines = [f"prompts rendered with {how} and tokenized with {loaded.name}'s tokenizer "
             f"(token counts {'exact' if exact else 'approximate'})"]
    if loaded.gguf is not None:
        then = "" if opts["dtype"] == "float32" else f", then cast to {opts['dtype']}"
        lines.append(f"{loaded.gguf.name} is dequantized to float32 for replay (converted once{then}): timings are "
                     "those of an unquantized model")
    return lines


def _report(summaries, facts, loaded, preparer, opts, out, interrupted, ingest) -> None:
    report_skipped(ingest.summary.skipped, skip_bad=True)  # replay runs what it can read
    if opts["as_json"]:
        rows = [{**asdict(s), "avoided_prefill": s.avoided_prefill,
                 "hit_rate": s.hit_rate} for s in summaries]
        sys.stdout.write(orjson.dumps({"model": loaded.name, "device": str(loaded.device), "dtype": opts["dtype"],
                                       "block_size": opts["block_size"], "policy": opts["policy"], **facts,
                                       "passes": rows, "interrupted": interrupted}).decode() + "\n")
        return
    console.print(_table(summaries, loaded.name, f"{loaded.device} {opts['dtype']}"))
    console.print(f"[dim]{facts['requests']} request(s) from {ingest.summary.files} file(s); "
                  f"block {opts['block_size']} tokens, policy {opts['policy']}, capacity "
                  f"{facts['capacity_blocks'] or 'unbounded'}{'' if facts['capacity_blocks'] is None else ' blocks'}; "
                  f"TTFT = cache lookup + prefill + first token (greedy)"
                  f"{', median of ' + str(facts['repeat']) + ' runs' if facts['repeat'] > 1 else ''}; "
                  "canonical speedup is against cold runs of the original prompts[/]", highlight=False)
    if facts["truncated_prompts"] or facts["truncated_canonical_prompts"]:
        console.print(f"[yellow]note:[/] {facts['truncated_prompts']} prompt(s) truncated to --max-prompt-tokens "
                      f"{facts['max_prompt_tokens']} (prefix kept): in long append-only sessions this inflates the "
                      "hit rate (each prompt repeats the previous one and appends; the cut keeps mostly the repeated part)", highlight=False)
    if facts["dropped_hidden_prefixes"]:
        console.print(f"[dim]{facts['dropped_hidden_prefixes']} prompt(s) had a hidden (opaque) prefix the log does "
                      "not contain; replayed without it[/]")
    for line in _notes(loaded, preparer, opts):
        console.print(f"[dim]{escape(line)}[/]")
    for w in facts["warnings"]:
        console.print(f"[yellow]warning:[/] {escape(w)} (latest instance; lint rule PC503)")
    if facts["warnings"] and opts["template"] == "model":
        console.print("[dim]the model's own template is what its engine would render; "
                      "--template chatml_tools renders tools and tool calls[/]")
    if loaded.device.type == "cuda":
        import torch

        console.print(f"[dim]peak GPU memory allocated: {torch.cuda.max_memory_allocated(loaded.device) / 2**20:,.0f} MiB[/]")
    if out is not None:
        console.print(f"[dim]per-request results: {out} (run {facts['run']})[/]")
    if interrupted:
        err.print("[yellow]interrupted:[/] the summary covers the requests that finished; rerun with --resume to continue")


def register(app: typer.Typer) -> None:
    """Add the ``replay`` command to ``app``."""

    @app.command("replay")
    @handle_errors
    def replay(
        paths: list[str] = typer.Argument(..., help="Log files, directories (recursive), globs, or - for stdin."),
        fmt: str = typer.Option("auto", "--input-format", help="Force a log format; default: detect per file."),
        model: str = typer.Option("smollm2", "--model", help="smollm2 (built in), a local HF folder, a .gguf file, or an HF id in the local cache."),
        template: str = typer.Option("model", "--template", help="Chat template: model (the model's own) or any --template spec of inspect."),
        device: str = typer.Option("auto", "--device", help="auto (CUDA when present, else CPU), cpu, cuda, cuda:N."),
        dtype: str = typer.Option("float32", "--dtype", help="float32, bfloat16 or float16."),
        passes: str = typer.Option("cold,warm,canonical", "--pass", help="Comma-separated passes: cold, warm, canonical."),
        block_size: int = typer.Option(16, "--block-size", help="KV block size in tokens (vLLM default 16)."),
        capacity_blocks: Optional[int] = typer.Option(None, "--capacity-blocks", help="KV cache capacity in blocks (default unbounded)."),
        capacity_bytes: Optional[str] = typer.Option(None, "--capacity-bytes", help="KV cache capacity in bytes, e.g. 256MiB."),
        policy: str = typer.Option("lru", "--policy", help="Eviction policy of the cache index (lru, fifo, lfu, slru, ...)."),
        max_new_tokens: int = typer.Option(1, "--max-new-tokens", help="Greedy tokens to decode (1 = measure TTFT only)."),
        verify: str = typer.Option("sample", "--verify", help="Recompute cache hits cold and compare: none, sample, all."),
        verify_every: int = typer.Option(4, "--verify-every", help="With --verify sample: every N-th cache hit."),
        tol: Optional[float] = typer.Option(None, "--tol", help="Max |Δlogit| allowed (default 1e-3 float32, 1.0 bfloat16, 0.25 float16)."),
        repeat: int = typer.Option(1, "--repeat", help="Time each request's prefill N times on the same cache state; TTFT = the median."),
        out: Optional[str] = typer.Option(None, "--out", help="Stream per-request results to this JSONL file."),
        resume: bool = typer.Option(False, "--resume", help="Continue an interrupted run from --out."),
        max_requests: Optional[int] = typer.Option(None, "--max-requests", help="Replay only the first N requests."),
        max_prompt_tokens: Optional[int] = typer.Option(None, "--max-prompt-tokens", help="Truncate prompts to N tokens (prefix kept)."),
        as_json: bool = typer.Option(False, "--json", help="Print the summary as one JSON object."),
    ) -> None:
        """Replay requests through a local model with and without a KV prefix cache; measure TTFT."""
        if resume and not out:
            raise typer.BadParameter("--resume needs --out")
        opts = dict(fmt=fmt, model=model, template=template, device=device, dtype=dtype, passes=passes,
                    block_size=block_size, capacity_blocks=capacity_blocks, capacity_bytes=capacity_bytes,
                    policy=policy, max_new_tokens=max_new_tokens, verify=verify, verify_every=verify_every, tol=tol,
                    out=out, resume=resume, max_requests=max_requests, max_prompt_tokens=max_prompt_tokens,
                    as_json=as_json, repeat=repeat)
        raise typer.Exit(run_replay(paths, opts))
