"""``prefixcache report``: one self-contained HTML file with the run's figures and charts.

Parse → :func:`~prefixcache.analyzer.html.gather` (lint, simulate, replay rows) →
:func:`~prefixcache.analyzer.html.render_html` → write ``--out`` atomically (never over an
input, nor over an existing file without ``--force``). Exit codes: 0 written, 2 usage or
input error (unreadable records too, unless ``--skip-bad``; the report is still written).
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Annotated, Optional

import typer
from rich.markup import escape

from prefixcache.analyzer.html import ReportOptions, gather, render_html
from prefixcache.analyzer.html.content import DEFAULT_CAPACITY
from prefixcache.analyzer.lint.config import load_config
from prefixcache.cli.common import EXIT_ERROR, atomic_output, check_output, err, handle_errors, implied_redact, progress, start_redaction, report_skipped
from prefixcache.cli.options import (
    BlockSize, Capacity, Force, InputFormat, ModelAsTokenizer, Paths, SkipBad, Template, Tokenizer, deprecated_alias,
)


def register(app: typer.Typer) -> None:
    """Add the ``report`` command to ``app``."""

    @app.command("report")
    @handle_errors
    def report_cmd(
        paths: Paths,
        out: Annotated[str, typer.Option("--out", "-o", help="The HTML file to write.")],
        replay: Annotated[Optional[str], typer.Option("--replay", help="A replay run's results (replay --out FILE, JSONL): TTFT per pass, predicted vs observed cached tokens.")] = None,
        simulate_doc: Annotated[Optional[str], typer.Option("--simulate", help="A saved simulate --json document to show instead of simulating here.")] = None,
        input_format: InputFormat = "auto",
        tokenizer: Tokenizer = None,  # type: ignore[assignment]  # None: the config file's, else auto
        old_model: ModelAsTokenizer = None,
        template: Template = None,  # type: ignore[assignment]
        cache: Annotated[str, typer.Option("--cache", help="Cache model of the simulation (see simulate --help).")] = "vllm",
        policy: Annotated[Optional[str], typer.Option("--policy", help="Eviction policies of the simulation, comma-separated (default lru,belady on vllm and blocks, else lru).")] = None,
        capacity: Capacity = None,
        block_size: BlockSize = None,
        kv_model: Annotated[Optional[str], typer.Option("--kv-model", help="KV size preset: adds the hit ratio vs capacity in bytes.")] = None,
        redact: Annotated[Optional[bool], typer.Option("--redact/--no-redact", help="No prompt text in the file: lengths and hashes in the findings.")] = None,
        redact_key: Annotated[Optional[str], typer.Option("--redact-key", envvar="PREFIXCACHE_REDACT_KEY", show_envvar=True, help="Key for --redact hashes, to compare them with a lint --redact run under the same key (default: a random key per run).")] = None,
        config: Annotated[Optional[str], typer.Option("--config", help="Lint config file (default: prefixcache.toml or [tool.prefixcache] in pyproject.toml).")] = None,
        title: Annotated[str, typer.Option("--title", help="The page's title.")] = "prefixcache report",
        skip_bad: SkipBad = False,
        force: Force = False,
    ) -> None:
        """Write one offline HTML report: summary, per-session turns, capacity curves, replay, fleet."""
        cfg = load_config(config).merged(format="json", redact=implied_redact(redact, redact_key), block_size=block_size, template=template,
                                         tokenizer=deprecated_alias("--model", "--tokenizer", old_model, tokenizer))
        start_redaction(cfg.redact, redact_key)
        options = ReportOptions(
            lint=cfg, config=config, input_format=input_format, cache=cache,
            policies=tuple(p.strip() for p in (policy or "").split(",") if p.strip()) or None,
            capacity=capacity or DEFAULT_CAPACITY,
            block_size=block_size, kv_model=kv_model, simulate_path=simulate_doc, replay_path=replay)
        target = Path(out)
        check_output(target, [*paths, *(p for p in (replay, simulate_doc) if p)], force)
        t0 = time.perf_counter()
        with progress("report") as bar:
            docs = gather(paths, options, on_request=bar.advance)
        page = render_html(docs, title).encode()
        with atomic_output(target) as fh:
            fh.write(page)
        err.print(f"wrote {escape(out)} ({len(page) / 1e6:.2f} MB) in {time.perf_counter() - t0:.1f} s", highlight=False)
        raise typer.Exit(EXIT_ERROR if report_skipped(docs.skipped, skip_bad) else 0)
