"""``prefixcache replay --server URL``: render a replay through a running engine.

Called by :mod:`prefixcache.cli.replay` once its options are parsed: builds
:class:`~prefixcache.replay.server.session.ServerOptions`, calls
:func:`~prefixcache.replay.server.session.open_server_replay`, renders the report.
Exit codes: 0 every request reconciles, 1 differences, PC504 findings, failed requests or
a refused cold pass, 2 usage / input / engine error, 130 interrupted.
"""

from __future__ import annotations

import os
import sys
from typing import Callable

import orjson
import typer
from rich.markup import escape
from rich.table import Table

from prefixcache.cli.common import EXIT_FINDINGS, EXIT_OK, console, err, progress, report_skipped
from prefixcache.cli.tables import print_table

EXIT_INTERRUPTED = 130


def api_key(env: str | None) -> str | None:
    """The API key from the environment variable named by ``--api-key-env`` (usage error when unset)."""
    if env is None:
        return None
    value = os.environ.get(env)
    if not value:
        raise typer.BadParameter(f"environment variable {env} is not set", param_hint="--api-key-env")
    return value


def _ms(x: float | None) -> str:
    return "—" if x is None else f"{x * 1000:,.1f}"


def _pct(d) -> str:
    return f"{_ms(d.p50)} / {_ms(d.p95)} / {_ms(d.p99)}"


ROWS: tuple[tuple[str, Callable], ...] = (
    ("requests ok / sent", lambda s: f"{s.ok}/{s.requests}" + (f" [red]({s.failed} failed)[/]" if s.failed else "")),
    ("cache reset", lambda s: {None: "—", True: "yes", False: "[yellow]no[/]"}[s.reset]),
    ("prompt tokens (ours / engine)", lambda s: f"{s.prompt_tokens:,} / {s.engine_prompt_tokens:,}"),
    ("cached tokens (engine)", lambda s: f"{s.cached_tokens:,}"),
    ("cached tokens (predicted)", lambda s: f"{s.predicted_cached:,}"),
    ("reconciled / differing", lambda s: f"{s.reconciled} / " + (f"[red]{s.differing}[/]" if s.differing else "0")),
    ("hit rate", lambda s: f"{100 * s.hit_rate:.1f}%"),
    ("/metrics hit rate (Σhits/Σqueries)", lambda s: "—" if s.metrics_hit_rate is None else f"{100 * s.metrics_hit_rate:.1f}%"),
    ("/metrics hits = Σ cached", lambda s: {None: "—", True: "yes", False: "[red]NO[/]"}[s.metrics_equal]),
    ("TTFT p50 / p95 / p99 ms", lambda s: _pct(s.ttft)),
    ("TPOT p50 / p95 / p99 ms", lambda s: _pct(s.tpot)),
    ("ITL p50 / p95 / p99 ms", lambda s: _pct(s.itl)),
    ("e2e p50 / p95 / p99 ms", lambda s: _pct(s.e2e)),
    ("engine TTFT mean ms", lambda s: _ms(s.engine_ttft_mean)),
    ("requests/s · output tok/s", lambda s: f"{s.requests_per_s:,.1f} · {s.output_tok_s:,.1f}"),
)


def _table(report) -> Table:
    e = report.engine
    t = Table(title=f"replay · {e.model} · {e.kind} at {e.url} · --send {report.send} · {report.load}",
              title_justify="left")
    t.add_column("")
    for s in report.passes:
        t.add_column(s.pass_name, justify="right")
    for label, cell in ROWS:
        t.add_row(label, *("—" if s.refused else cell(s) for s in report.passes))
    return t


def render(outcome) -> None:
    r = outcome.report
    print_table(console, _table(r))
    for line in outcome.notes:
        console.print(f"[dim]{escape(line)}[/]")
    for s in r.passes:
        if s.refused:
            console.print(f"[yellow]{s.pass_name} pass not run:[/] {escape(s.refused)}", highlight=False)
        for reason, n in s.failures.items():
            console.print(f"[red]{s.pass_name}: {n} request(s) failed:[/] {escape(reason)}", highlight=False)
    if outcome.out is not None:
        console.print(f"[dim]per-request results: {outcome.out} (run {r.run})[/]")


def problems(outcome) -> None:
    r = outcome.report
    for d in r.differences:
        err.print(f"[red]differs:[/] {d.source}:{d.record} pass {d.pass_name}: engine cached {d.cached_tokens}, "
                  f"predicted {d.predicted_cached} (by {d.by}): {escape(d.fact)}", highlight=False)
    for f in r.findings:
        err.print(f"[red]{f.code}:[/] {f.source}:{f.record}: the engine counted {f.engine_prompt_tokens} prompt "
                  f"tokens, our template and tokenizer {f.prompt_tokens} ({f.by:+d})", highlight=False)
    if r.stopped:
        err.print(f"[red]stopped:[/] {escape(r.stopped)}; rerun with --resume to continue", highlight=False)


def run_server(paths: list[str], options, shape: str) -> None:
    """Open, run and render a server replay; raises typer.Exit with the exit code."""
    from prefixcache.replay.server.session import open_server_replay

    with console.status("detecting the server and preparing prompts"):
        session = open_server_replay(paths, options)
    with progress("replay", total=session.total) as bar:
        outcome = session.run(lambda name: (bar.describe(f"replay {name}"), bar.advance()))
    report_skipped(outcome.skipped, skip_bad=True)
    if shape == "json":
        sys.stdout.write(orjson.dumps(outcome.report).decode() + "\n")
    else:
        render(outcome)
    problems(outcome)
    r = outcome.report
    if r.interrupted:
        err.print("[yellow]interrupted:[/] the summary covers the requests that finished; rerun with --resume")
        raise typer.Exit(EXIT_INTERRUPTED)
    bad = r.differences or r.findings or r.stopped or any(s.failed or s.refused for s in r.passes)
    raise typer.Exit(EXIT_FINDINGS if bad else EXIT_OK)
