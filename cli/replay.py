"""``prefixcache replay``: run the logged requests through a real local model (or a running server with
``--server URL``) with and without a KV prefix cache, original and canonicalized, and measure prefill,
cached tokens, TTFT and KV memory; verify that cache hits change nothing in the output.
Parse → one :class:`~prefixcache.replay.options.ReplayOptions` → :func:`prefixcache.replay.open_replay`
→ render (:mod:`prefixcache.cli.replay_render`, which also gives the exit codes: 0 clean, 1 findings,
2 usage, input or engine error, 130 interrupted — the summary of what finished is still printed and the
JSONL kept).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Optional

import typer

from prefixcache.analyzer.cache.base import DEFAULT_BLOCK_SIZE
from prefixcache.analyzer.cache.capacity import parse_capacity
from prefixcache.analyzer.errors import ConfigError
from prefixcache.cli.common import check_output, console, handle_errors, progress
from prefixcache.cli.options import (
    AsJson, Force, InputFormat, Paths, ReplayBlockSize, ReplayCapacity, _given, deprecated_alias, format_option,
    out_option, output_format, policy_option, rate_option, seed_option,
)


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


def api_key(env: str | None) -> str | None:
    """The API key from the environment variable named by ``--api-key-env`` (usage error when unset)."""
    if env is None:
        return None
    value = os.environ.get(env)
    if not value:
        raise typer.BadParameter(f"environment variable {env} is not set", param_hint="--api-key-env")
    return value


def register(app: typer.Typer) -> None:
    """Add the ``replay`` command to ``app``."""

    @app.command("replay")
    @handle_errors
    def replay(
        paths: Paths,
        fmt: format_option("Output: rich (tables) or json (the summary).") = None,
        as_json: AsJson = False,
        input_format: InputFormat = "auto",
        model: str = typer.Option("smollm2", "--model", help="smollm2 (built in), a local HF folder, a .gguf file, or an HF id in the local cache."),
        template: str = typer.Option("model", "--template", help="Chat template: model (the model's own) or any --template spec of inspect."),
        device: str = typer.Option("auto", "--device", help="auto (CUDA when present, else CPU), cpu, cuda, cuda:N."),
        dtype: str = typer.Option("float32", "--dtype", help="float32, bfloat16 or float16."),
        passes: str = typer.Option("cold,warm,canonical", "--pass", help="Comma-separated passes: cold, warm, canonical."),
        block_size: ReplayBlockSize = DEFAULT_BLOCK_SIZE,
        capacity: ReplayCapacity = None,
        capacity_bytes: Optional[str] = typer.Option(None, "--capacity-bytes", hidden=True),
        capacity_blocks: Optional[int] = typer.Option(None, "--capacity-blocks", hidden=True),
        policy: policy_option("Eviction policy of the cache index (lru, fifo, lfu, slru, ...).") = "lru",
        max_new_tokens: int = typer.Option(1, "--max-new-tokens", min=1, help="Greedy tokens to decode (1 = measure TTFT only)."),
        verify: str = typer.Option("sample", "--verify", help="Recompute cache hits cold and compare: none, sample, all."),
        verify_every: int = typer.Option(4, "--verify-every", min=1, help="With --verify sample: every N-th cache hit."),
        tol: Optional[float] = typer.Option(None, "--tol", min=0.0, help="Max |Δlogit| allowed (default 1e-3 float32, 1.0 bfloat16, 0.25 float16)."),
        repeat: int = typer.Option(1, "--repeat", min=1, help="Time each request's prefill N times on the same cache state; TTFT = the median."),
        out: out_option("Stream per-request results to this JSONL file.") = None,
        resume: bool = typer.Option(False, "--resume", help="Continue an interrupted run from --out."),
        force: Force = False,
        max_requests: Optional[int] = typer.Option(None, "--max-requests", min=1, help="Replay only the first N requests."),
        max_prompt_tokens: Optional[int] = typer.Option(None, "--max-prompt-tokens", min=1, help="Truncate prompts to N tokens (prefix kept)."),
        server: Optional[str] = typer.Option(None, "--server", help="Replay through a running OpenAI-compatible server at this URL (vLLM, llama.cpp, SGLang, generic) instead of the local model."),
        api_key_env: Optional[str] = typer.Option(None, "--api-key-env", help="With --server: environment variable holding the API key (sent as a bearer token)."),
        send: str = typer.Option("tokens", "--send", help="With --server: tokens (our token ids via /v1/completions) or chat (the logged messages via /v1/chat/completions)."),
        tokenizer: Optional[str] = typer.Option(None, "--tokenizer", help="With --server: our tokenizer (default: the folder the server loaded)."),
        concurrency: Optional[int] = typer.Option(None, "--concurrency", min=1, help="With --server: requests in flight at most (default 1; unbounded with --rate/--schedule)."),
        rate: rate_option("With --server: Poisson arrivals at R requests/s (seeded by --seed).", minimum=0.0) = None,
        seed: seed_option("With --rate: the arrival generator's seed (the same seed, the same arrival times).") = 0,
        schedule: str = typer.Option("none", "--schedule", help="With --server: none, or logged (the logged inter-arrival times)."),
        time_scale: Optional[float] = typer.Option(None, "--time-scale", help="With --schedule logged: multiply the logged gaps by X (0.1 = ten times faster; default 1)."),
        speedup: Optional[float] = typer.Option(None, "--speedup", hidden=True),
        burstiness: float = typer.Option(1.0, "--burstiness", help="With --rate: gamma arrivals of shape B (1 = Poisson; below 1 burstier, above more regular), as vllm bench serve."),
        users: Optional[int] = typer.Option(None, "--users", min=1, help="With --server: closed loop of N users, each replaying one session at a time."),
        think_time: float = typer.Option(0.0, "--think-time", min=0.0, help="With --users: seconds a user waits after a response before its next turn."),
        warmup: Optional[str] = typer.Option(None, "--warmup", help="With --server: leave the first N requests (20) or seconds (30s) of each cache pass (warm, canonical) out of the figures."),
        duration: Optional[float] = typer.Option(None, "--duration", help="With --server: stop sending new requests S seconds into each cache pass (the rest are counted as unsent)."),
        slo: Optional[str] = typer.Option(None, "--slo", help="With --server: goodput targets, e.g. ttft=500ms,tpot=50ms,e2e=2s (a bare number is ms)."),
        timeout: float = typer.Option(300.0, "--timeout", help="With --server: seconds to wait for each read."),
        retries: int = typer.Option(0, "--retries", min=0, help="With --server: resend a failed request up to N times (never by default)."),
        kv_events: Optional[str] = typer.Option(None, "--kv-events", help="With --server (vLLM): subscribe to its KV-cache events: tcp://HOST:PORT (vLLM binds) or bind:tcp://127.0.0.1:PORT (vLLM's --kv-events-config endpoint connects); every cached-token difference is checked against them."),
    ) -> None:
        """Replay requests through a local model with and without a KV prefix cache; measure TTFT."""
        from prefixcache.cli.replay_render import finish
        from prefixcache.replay import ReplayOptions, open_replay

        shape = output_format(fmt, as_json, ("rich", "json"), "rich")
        if server is None and any(v is not None for v in (api_key_env, tokenizer, concurrency, rate, users, warmup,
                                                          duration, slo, kv_events)):
            raise typer.BadParameter("--api-key-env, --tokenizer, --concurrency, --rate, --users, --warmup, --duration, "
                                     "--slo and --kv-events need --server", param_hint="--server")
        scale = deprecated_alias("--speedup", "--time-scale", None if speedup is None else 1.0 / speedup if speedup > 0 else 0.0,
                                 time_scale)
        if resume and force:
            raise typer.BadParameter("--resume continues the file, --force starts it over: give one", param_hint="--resume")
        if resume and out is None:
            raise typer.BadParameter("--resume needs --out")
        if out is not None:
            check_output(out, paths, force=resume or force, flag="--resume or --force", make_parents=True)
        options = ReplayOptions(
            input_format=input_format, template=template, passes=tuple(p.strip() for p in passes.split(",") if p.strip()),
            block_size=block_size if server is None or _given("--block-size") else None,
            capacity=_capacity(capacity, capacity_bytes, capacity_blocks), max_new_tokens=max_new_tokens,
            max_requests=max_requests, max_prompt_tokens=max_prompt_tokens, out=None if out is None else Path(out),
            resume=resume, model=None if server is not None and model == "smollm2" else model, device=device,
            dtype=dtype, policy=policy, verify=verify, verify_every=verify_every, tol=tol, repeat=repeat,
            server=server, api_key=api_key(api_key_env), send=send, tokenizer=tokenizer, concurrency=concurrency,
            rate=rate, schedule=schedule, time_scale=1.0 if scale is None else scale, seed=seed, burstiness=burstiness,
            users=users, think_time=think_time, warmup=warmup, duration=duration, slo=slo, timeout=timeout,
            retries=retries, kv_events=kv_events)
        with console.status("detecting the server and preparing prompts" if server else
                            "loading the model and preparing prompts"):
            session = open_replay(paths, options)
        with progress("replay", total=session.total) as bar:
            outcome = session.run(lambda name: (bar.describe(f"replay {name}"), bar.advance()))
        finish(outcome, shape)
