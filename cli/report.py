"""``prefixcache report``: one self-contained HTML file with the run's figures and charts.

Parse → :func:`prefixcache.analyzer.api.report` (lint, simulate, replay rows) →
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

from prefixcache.analyzer import api
from prefixcache.analyzer.api import ReportOptions
from prefixcache.analyzer.html import render_html
from prefixcache.analyzer.html.content import DEFAULT_CAPACITY as REPORT_CAPACITY
from prefixcache.analyzer.lint.config import load_config
from prefixcache.cli.common import EXIT_ERROR, check_output, err, handle_errors, progress, report_skipped
from prefixcache.cli.options import (
    ReportCache, capacity_option,
    BlockSize, Config, Force, InputFormat, KvModel, ModelAsTokenizer, Paths, RedactKey, RedactOrNot,
    SkipBad, Template, Tokenizer, deprecated_alias, implied_redact, out_option, policy_option,
)
from prefixcache.cli.output import atomic_output


ReportCapacity = capacity_option("Capacities of the curves: 5% (of unique blocks), 4000blocks, 2Mtok, 16GiB (KV bytes); "
                                 f"comma-separated; the first is the one the summary quotes. Default: {REPORT_CAPACITY} "
                                 "on an engine cache (the summary quotes 100%), none on a provider's.")

def register(app: typer.Typer) -> None:
    """Add the ``report`` command to ``app``."""

    @app.command("report")
    @handle_errors
    def report_cmd(
        paths: Paths,
        out: out_option("The HTML file to write.", "-o", required=True),
        replay: Annotated[Optional[str], typer.Option("--replay", help="A replay run's results (replay --out FILE, JSONL): TTFT per pass, predicted vs observed cached tokens.")] = None,
        simulate_doc: Annotated[Optional[str], typer.Option("--simulate", help="A saved simulate --json document to show instead of simulating here.")] = None,
        input_format: InputFormat = "auto",
        tokenizer: Tokenizer = None,  # type: ignore[assignment]  # None: the config file's, else auto
        old_model: ModelAsTokenizer = None,
        template: Template = None,  # type: ignore[assignment]
        cache: ReportCache = "auto",
        policy: policy_option("Eviction policies of the simulation, comma-separated (default lru,belady on vllm and "
                              "blocks, else lru).", optional=True) = None,
        capacity: ReportCapacity = None,
        block_size: BlockSize = None,
        kv_model: KvModel = None,
        redact: RedactOrNot = None,
        redact_key: RedactKey = None,
        config: Config = None,
        title: Annotated[str, typer.Option("--title", help="The page's title.")] = "prefixcache report",
        skip_bad: SkipBad = False,
        force: Force = False,
    ) -> None:
        """Write one offline HTML report: four answers first (reuse, losses, fixes, sizing), then per-session turns, capacity curves, replay, fleet."""
        cfg = load_config(config).merged(format="json", redact=implied_redact(redact, redact_key), block_size=block_size, template=template,
                                         tokenizer=deprecated_alias("--model", "--tokenizer", old_model, tokenizer))
        options = ReportOptions(
            lint=cfg, config=config, input_format=input_format, cache=cache,
            policies=tuple(p.strip() for p in (policy or "").split(",") if p.strip()) or None,
            capacity=capacity,
            block_size=block_size, kv_model=kv_model, simulate_path=simulate_doc, replay_path=replay, redact_key=redact_key)
        target = Path(out)
        check_output(target, [*paths, *(p for p in (replay, simulate_doc) if p)], force)
        t0 = time.perf_counter()
        with progress("report") as bar:
            docs = api.report(paths, options, on_request=bar.advance)
        page = render_html(docs, title).encode()
        with atomic_output(target) as fh:
            fh.write(page)
        err.print(f"wrote {escape(out)} ({len(page) / 1e6:.2f} MB) in {time.perf_counter() - t0:.1f} s", highlight=False)
        raise typer.Exit(EXIT_ERROR if report_skipped(docs.skipped, skip_bad) else 0)
