"""``prefixcache replay``: run the logged requests through a real local model with and
without a KV prefix cache, original and canonicalized, and measure prefill, cached
tokens, TTFT and KV memory; verify that cache hits change nothing in the output.
Parse → :func:`prefixcache.replay.local.session.open_replay` → render.

Exit codes: 0 clean, 1 a verification mismatch (or the engine's cached tokens
differ from the simulator's), 2 usage, input or engine error, 130 interrupted
(the summary of what finished is still printed and the JSONL kept).
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Optional

import orjson
import typer
from rich.markup import escape
from rich.table import Table

from prefixcache.analyzer.cache.base import DEFAULT_BLOCK_SIZE
from prefixcache.analyzer.cache.capacity import parse_capacity
from prefixcache.analyzer.errors import ConfigError
from prefixcache.cli.common import (
    EXIT_FINDINGS, EXIT_OK, check_output, console, err, handle_errors, plural, progress, report_skipped,
)
from prefixcache.cli.options import AsJson, InputFormat, Paths, deprecated_alias, output_format
from prefixcache.cli.tables import print_table

EXIT_INTERRUPTED = 130
CAPACITY_HELP = ("KV cache capacity: 256MiB (KV bytes, by the model's KV bytes per token), 4000blocks, 2Mtok, or 5% "
                 "(of the distinct blocks of the original prompts as replayed). Default: unbounded.")


def _ms(s: float) -> str:
    return f"{s * 1000:,.0f}"


#: One row per figure of a pass summary (label, cell).
ROWS = (
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
)


def _table(report) -> Table:
    """One column per pass, one row per figure (fits a narrow terminal)."""
    t = Table(title=f"replay · {report.model} · {report.device} {report.dtype}", title_justify="left")
    t.add_column("")
    for s in report.passes:
        t.add_column(s.pass_name, justify="right")
    for label, cell in ROWS:
        t.add_row(label, *(cell(s) for s in report.passes))
    return t


def _render(outcome) -> None:
    r = outcome.report
    print_table(console, _table(r))
    cap = "unbounded" if r.capacity_blocks is None else plural(r.capacity_blocks, "block")
    console.print(f"[dim]{r.requests} request(s) from {outcome.files} file(s); block {r.block_size} tokens, policy "
                  f"{r.policy}, capacity {cap}; TTFT = cache lookup + prefill + first token (greedy)"
                  f"{', median of ' + str(r.repeat) + ' runs' if r.repeat > 1 else ''}; "
                  "canonical speedup is against cold runs of the original prompts[/]", highlight=False)
    if r.truncated_prompts or r.truncated_canonical_prompts:
        console.print(f"[yellow]note:[/] {r.truncated_prompts} prompt(s) truncated to --max-prompt-tokens "
                      f"{r.max_prompt_tokens} (prefix kept): in long append-only sessions this inflates the hit rate "
                      "(each prompt repeats the previous one and appends; the cut keeps mostly the repeated part)",
                      highlight=False)
    if r.dropped_hidden_prefixes:
        console.print(f"[dim]{r.dropped_hidden_prefixes} prompt(s) had a hidden (opaque) prefix the log does "
                      "not contain; replayed without it[/]")
    for line in outcome.notes:
        console.print(f"[dim]{escape(line)}[/]")
    for w in r.warnings:
        console.print(f"[yellow]warning:[/] {escape(w)} (latest instance; lint rule PC503)")
    if r.warnings and r.template == "model":
        console.print("[dim]the model's own template is what its engine would render; "
                      "--template chatml_tools renders tools and tool calls[/]")
    if outcome.out is not None:
        console.print(f"[dim]per-request results: {outcome.out} (run {r.run})[/]")


def _problems(outcome) -> None:
    for r in outcome.disagreements:
        if r.mismatch:
            err.print(f"[red]mismatch:[/] {r.source}:{r.record} pass {r.pass_name}: {r.cached_tokens} cached tokens, "
                      f"max |Δlogit| {r.max_abs_dlogit:.2e}, argmax {'same' if r.argmax_match else 'DIFFERS'}, "
                      f"greedy tokens {'same' if r.tokens_match else 'DIFFER'}", highlight=False)
        else:
            err.print(f"[red]error:[/] {r.source}:{r.record} pass {r.pass_name}: engine cached {r.cached_tokens} "
                      f"tokens, simulator predicted {r.predicted_cached}", highlight=False)


def _capacity(capacity: Optional[str], old_bytes: Optional[str], old_blocks: Optional[int]):
    """The one ``--capacity``, or its deprecated spellings (bytes: a bare number is bytes)."""
    if sum(v is not None for v in (capacity, old_bytes, old_blocks)) > 1:
        raise typer.BadParameter("give one capacity", param_hint="--capacity")
    if old_bytes is not None:
        old_bytes = old_bytes.strip() + ("" if old_bytes.strip().upper().endswith("B") else "B")
    text = deprecated_alias("--capacity-bytes", "--capacity", old_bytes, capacity)
    text = deprecated_alias("--capacity-blocks", "--capacity", None if old_blocks is None else f"{old_blocks}blocks", text)
    if text is not None and "," in text:
        raise ConfigError(f"--capacity {text}: replay runs one capacity (a sweep is simulate's)")
    return None if text is None else parse_capacity(text)


def _server(paths: list[str], shape: str, o: dict) -> None:
    """The ``--server`` path (:mod:`prefixcache.cli.replay_server`)."""
    from prefixcache.cli.replay_server import api_key, run_server
    from prefixcache.replay.server.load import LoadShape
    from prefixcache.replay.server.session import ServerOptions

    cap = _capacity(o["capacity"], o["capacity_bytes"], o["capacity_blocks"])
    timed = o["rate"] is not None or o["schedule"] != "none"
    load = LoadShape(concurrency=o["concurrency"] or (None if timed else 1), rate=o["rate"], schedule=o["schedule"],
                     speedup=o["speedup"], seed=o["seed"])
    options = ServerOptions(
        url=o["server"], api_key=api_key(o["api_key_env"]), model=None if o["model"] == "smollm2" else o["model"],
        send=o["send"], tokenizer=o["tokenizer"], template=o["template"], input_format=o["input_format"],
        passes=tuple(p.strip() for p in o["passes"].split(",") if p.strip()),
        shape=load, block_size=o["block_size"] if _given_block(o) else None, capacity=cap,
        max_new_tokens=o["max_new_tokens"], max_requests=o["max_requests"], max_prompt_tokens=o["max_prompt_tokens"],
        timeout=o["timeout"], retries=o["retries"], out=None if o["out"] is None else Path(o["out"]),
        resume=o["resume"])
    run_server(paths, options, shape)


def _given_block(o: dict) -> bool:
    """--block-size given on the command line (else the engine's own block size is used)."""
    from prefixcache.cli.options import _given

    return _given("--block-size")


def register(app: typer.Typer) -> None:
    """Add the ``replay`` command to ``app``."""

    @app.command("replay")
    @handle_errors
    def replay(
        paths: Paths,
        fmt: Optional[str] = typer.Option(None, "--format", help="Output: rich (tables) or json (the summary)."),
        as_json: AsJson = False,
        input_format: InputFormat = "auto",
        model: str = typer.Option("smollm2", "--model", help="smollm2 (built in), a local HF folder, a .gguf file, or an HF id in the local cache."),
        template: str = typer.Option("model", "--template", help="Chat template: model (the model's own) or any --template spec of inspect."),
        device: str = typer.Option("auto", "--device", help="auto (CUDA when present, else CPU), cpu, cuda, cuda:N."),
        dtype: str = typer.Option("float32", "--dtype", help="float32, bfloat16 or float16."),
        passes: str = typer.Option("cold,warm,canonical", "--pass", help="Comma-separated passes: cold, warm, canonical."),
        block_size: int = typer.Option(DEFAULT_BLOCK_SIZE, "--block-size", min=1, help="KV block size in tokens (vLLM's default)."),
        capacity: Optional[str] = typer.Option(None, "--capacity", help=CAPACITY_HELP),
        capacity_bytes: Optional[str] = typer.Option(None, "--capacity-bytes", hidden=True),
        capacity_blocks: Optional[int] = typer.Option(None, "--capacity-blocks", hidden=True),
        policy: str = typer.Option("lru", "--policy", help="Eviction policy of the cache index (lru, fifo, lfu, slru, ...)."),
        max_new_tokens: int = typer.Option(1, "--max-new-tokens", min=1, help="Greedy tokens to decode (1 = measure TTFT only)."),
        verify: str = typer.Option("sample", "--verify", help="Recompute cache hits cold and compare: none, sample, all."),
        verify_every: int = typer.Option(4, "--verify-every", min=1, help="With --verify sample: every N-th cache hit."),
        tol: Optional[float] = typer.Option(None, "--tol", min=0.0, help="Max |Δlogit| allowed (default 1e-3 float32, 1.0 bfloat16, 0.25 float16)."),
        repeat: int = typer.Option(1, "--repeat", min=1, help="Time each request's prefill N times on the same cache state; TTFT = the median."),
        out: Optional[str] = typer.Option(None, "--out", help="Stream per-request results to this JSONL file."),
        resume: bool = typer.Option(False, "--resume", help="Continue an interrupted run from --out."),
        force: bool = typer.Option(False, "--force", help="Start --out over when it exists."),
        max_requests: Optional[int] = typer.Option(None, "--max-requests", min=1, help="Replay only the first N requests."),
        max_prompt_tokens: Optional[int] = typer.Option(None, "--max-prompt-tokens", min=1, help="Truncate prompts to N tokens (prefix kept)."),
        server: Optional[str] = typer.Option(None, "--server", help="Replay through a running OpenAI-compatible server at this URL (vLLM, llama.cpp, SGLang, generic) instead of the local model."),
        api_key_env: Optional[str] = typer.Option(None, "--api-key-env", help="With --server: environment variable holding the API key (sent as a bearer token)."),
        send: str = typer.Option("tokens", "--send", help="With --server: tokens (our token ids via /v1/completions) or chat (the logged messages via /v1/chat/completions)."),
        tokenizer: Optional[str] = typer.Option(None, "--tokenizer", help="With --server: our tokenizer (default: the folder the server loaded)."),
        concurrency: Optional[int] = typer.Option(None, "--concurrency", min=1, help="With --server: requests in flight at most (default 1; unbounded with --rate/--schedule)."),
        rate: Optional[float] = typer.Option(None, "--rate", min=0.0, help="With --server: Poisson arrivals at R requests/s (seeded by --seed)."),
        seed: int = typer.Option(0, "--seed", help="With --rate: the arrival generator's seed."),
        schedule: str = typer.Option("none", "--schedule", help="With --server: none, or logged (the logged inter-arrival times)."),
        speedup: float = typer.Option(1.0, "--speedup", help="With --schedule logged: divide the logged gaps by X."),
        timeout: float = typer.Option(300.0, "--timeout", help="With --server: seconds to wait for each read."),
        retries: int = typer.Option(0, "--retries", min=0, help="With --server: resend a failed request up to N times (never by default)."),
    ) -> None:
        """Replay requests through a local model with and without a KV prefix cache; measure TTFT."""
        from prefixcache.replay.local.session import ReplayOptions, open_replay
        from prefixcache.replay.local.passes import ReplayConfig

        shape = output_format(fmt, as_json, ("rich", "json"), "rich")
        if server is None and any(v is not None for v in (api_key_env, tokenizer, concurrency, rate)):
            raise typer.BadParameter("--api-key-env, --tokenizer, --concurrency and --rate need --server",
                                     param_hint="--server")
        if resume and force:
            raise typer.BadParameter("--resume continues the file, --force starts it over: give one", param_hint="--resume")
        if resume and out is None:
            raise typer.BadParameter("--resume needs --out")
        if out is not None:
            check_output(out, paths, force=resume or force, flag="--resume or --force", make_parents=True)
        out_path = None if out is None else Path(out)
        if server is not None:
            return _server(paths, shape, locals())
        config = ReplayConfig(passes=tuple(p.strip() for p in passes.split(",") if p.strip()), block_size=block_size,
                              policy=policy, max_new_tokens=max_new_tokens, verify=verify, verify_every=verify_every,
                              tol=tol, repeat=repeat)
        options = ReplayOptions(model=model, device=device, dtype=dtype, input_format=input_format, template=template,
                                max_requests=max_requests, max_prompt_tokens=max_prompt_tokens, config=config,
                                capacity=_capacity(capacity, capacity_bytes, capacity_blocks), out=out_path, resume=resume)
        with console.status("loading the model and preparing prompts"):
            session = open_replay(paths, options)
        with progress("replay", total=session.total) as bar:
            outcome = session.run(lambda name: (bar.describe(f"replay {name}"), bar.advance()))
        report_skipped(outcome.skipped, skip_bad=True)  # replay runs what it can read
        if shape == "json":
            sys.stdout.write(orjson.dumps(outcome.report).decode() + "\n")
        else:
            _render(outcome)
        _problems(outcome)
        if outcome.report.interrupted:
            err.print("[yellow]interrupted:[/] the summary covers the requests that finished; rerun with --resume to continue")
            raise typer.Exit(EXIT_INTERRUPTED)
        bad = any(s.mismatches or s.simulator_equal is False for s in outcome.report.passes)
        raise typer.Exit(EXIT_FINDINGS if bad else EXIT_OK)
