"""Rendering of ``prefixcache replay``'s outcome (in-process or ``--server``): tables, notes, problems, exit code.

:func:`finish` prints a :class:`~prefixcache.replay.document.ReplayOutcome` (the
``--json`` document, or rich tables and notes) and its problems on stderr, and raises
``typer.Exit`` with the exit code: 0 clean; 1 a verification mismatch or cached tokens
that differ from the simulator's (in-process), or differences, PC504 findings, failed
requests or a refused cold pass (``--server``); 130 interrupted.
"""

from __future__ import annotations

import sys
from typing import Callable

import orjson
import typer
from rich.markup import escape
from rich.table import Table

from prefixcache.cli.common import EXIT_FINDINGS, EXIT_OK, console, err, plural, report_skipped
from prefixcache.cli.tables import print_table

EXIT_INTERRUPTED = 130


def _ms(s: float | None, digits: int = 0) -> str:
    return "—" if s is None else f"{s * 1000:,.{digits}f}"


def _pct(d, digits: int = 1) -> str:
    """``p50 / p95 / p99`` of a Distribution, in milliseconds."""
    return f"{_ms(d.p50, digits)} / {_ms(d.p95, digits)} / {_ms(d.p99, digits)}"


def _pct4(d, digits: int = 1) -> str:
    """``p50 / p90 / p95 / p99`` of a Distribution, in milliseconds (the server summary's percentiles)."""
    return " / ".join(_ms(getattr(d, q), digits) for q in ("p50", "p90", "p95", "p99"))


def _goodput(s) -> str:
    f = s.serving
    if f.goodput is None:
        return "— (no --slo)"
    return f"{f.goodput:,.2f} ({f.good}/{f.measured})"


_FLAG = {None: "—", True: "yes", False: "[red]NO[/]"}

#: In-process: one row per figure of a pass summary (label, cell).
ROWS: tuple[tuple[str, Callable], ...] = (
    ("requests", lambda s: str(s.requests)),
    ("prompt tokens", lambda s: f"{s.prompt_tokens:,}"),
    ("cached tokens (avoided prefill)", lambda s: f"{s.cached_tokens:,}"),
    ("prefill tokens computed", lambda s: f"{s.computed_tokens:,}"),
    ("hit rate", lambda s: f"{100 * s.hit_rate:.1f}%"),
    ("TTFT p50 / p95 / p99 ms", lambda s: _pct(s.ttft, 0)),
    ("TTFT total s", lambda s: f"{s.ttft_total:.2f}"),
    ("speedup vs cold", lambda s: "—" if s.speedup is None else f"{s.speedup:.2f}×"),
    ("served tokens/s", lambda s: f"{s.effective_tok_s:,.0f}"),
    ("KV held, peak MiB", lambda s: f"{s.kv_bytes_peak / 2**20:,.1f}"),
    ("verified ok / checked", lambda s: f"{s.verified - s.mismatches}/{s.verified}"
        + (f" [red]({s.mismatches} mismatch)[/]" if s.mismatches else "")),
    ("max |Δlogit| vs cold", lambda s: "—" if s.max_abs_dlogit is None else f"{s.max_abs_dlogit:.1e}"),
    ("cached = simulator", lambda s: _FLAG[s.simulator_equal]),
)

#: ``--server``: one row per figure of a pass summary (label, cell).
SERVER_ROWS: tuple[tuple[str, Callable], ...] = (
    ("requests ok / sent", lambda s: f"{s.ok}/{s.requests}" + (f" [red]({s.failed} failed)[/]" if s.failed else "")),
    ("cache reset", lambda s: {None: "—", True: "yes", False: "[yellow]no[/]"}[s.reset]),
    ("prompt tokens (ours / engine)", lambda s: f"{s.prompt_tokens:,} / {s.engine_prompt_tokens:,}"),
    ("cached tokens (engine)", lambda s: f"{s.cached_tokens:,}"),
    ("cached tokens (predicted)", lambda s: f"{s.predicted_cached:,}"),
    ("reconciled / differing", lambda s: f"{s.reconciled} / " + (f"[red]{s.differing}[/]" if s.differing else "0")),
    ("hit rate", lambda s: f"{100 * s.hit_rate:.1f}%"),
    ("/metrics hit rate (Σhits/Σqueries)", lambda s: "—" if s.metrics_hit_rate is None else f"{100 * s.metrics_hit_rate:.1f}%"),
    ("/metrics hits = Σ cached", lambda s: _FLAG[s.metrics_equal]),
    ("measured · warm-up · unsent", lambda s: f"{s.serving.measured} · {s.serving.warmup} · {s.unsent}"),
    ("in flight at send p50 / max", lambda s: "—" if not s.serving.in_flight.count else
     f"{s.serving.in_flight.p50:g} / {s.serving.in_flight.max:g}"),
    ("TTFT p50 / p90 / p95 / p99 ms", lambda s: _pct4(s.ttft)),
    ("TPOT p50 / p90 / p95 / p99 ms", lambda s: _pct4(s.tpot)),
    ("ITL p50 / p90 / p95 / p99 ms", lambda s: _pct4(s.itl)),
    ("E2E p50 / p90 / p95 / p99 ms", lambda s: _pct4(s.e2e)),
    ("engine TTFT · queue mean ms", lambda s: f"{_ms(s.engine_ttft_mean, 1)} · {_ms(s.engine_queue_mean, 1)}"),
    ("requests/s · output · total tok/s", lambda s: f"{s.requests_per_s:,.1f} · {s.output_tok_s:,.1f} · "
     f"{s.serving.total_token_throughput:,.1f}"),
    ("goodput requests/s (good/measured)", _goodput),
)


def _server(report) -> bool:
    return hasattr(report, "engine")


def table(report) -> Table:
    """One column per pass, one row per figure (fits a narrow terminal)."""
    if _server(report):
        e = report.engine
        title, rows = f"replay · {e.model} · {e.kind} at {e.url} · --send {report.send} · {report.load}", SERVER_ROWS
    else:
        title, rows = f"replay · {report.model} · {report.device} {report.dtype}", ROWS
    t = Table(title=title, title_justify="left")
    t.add_column("")
    for s in report.passes:
        t.add_column(s.pass_name, justify="right")
    for label, cell in rows:
        t.add_row(label, *("—" if getattr(s, "refused", None) else cell(s) for s in report.passes))
    return t


def _local_notes(outcome) -> None:
    r = outcome.report
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


def render(outcome) -> None:
    """The rich tables and notes of ``outcome``."""
    r = outcome.report
    print_table(console, table(r))
    if not _server(r):
        _local_notes(outcome)
    for line in outcome.notes:
        if line.startswith("warning: "):
            console.print(f"[yellow]warning:[/] {escape(line[len('warning: '):])}", highlight=False)
        else:
            console.print(f"[dim]{escape(line)}[/]")
    for w in getattr(r, "warnings", ()):
        console.print(f"[yellow]warning:[/] {escape(w)} (latest instance; lint rule PC503)")
    if getattr(r, "warnings", ()) and r.template == "model":
        console.print("[dim]the model's own template is what its engine would render; "
                      "--template chatml_tools renders tools and tool calls[/]")
    for s in r.passes if _server(r) else ():
        if s.refused:
            console.print(f"[yellow]{s.pass_name} pass not run:[/] {escape(s.refused)}", highlight=False)
        elif s.serving.warmup and not s.serving.measured:
            console.print(f"[yellow]warning:[/] {s.pass_name}: all {s.serving.warmup} request(s) sent were in the "
                          "warm-up (--warmup): no serving figure was measured (shorten the warm-up)", highlight=False)
        for reason, n in s.failures.items():
            console.print(f"[red]{s.pass_name}: {n} request(s) failed:[/] {escape(reason)}", highlight=False)
    kv = getattr(r, "kv_events", None)
    if kv is not None:
        res = kv.survival.residency[0]
        console.print(f"KV events: {kv.events} in {kv.batches} batches ({kv.stored} stored, {kv.removed} removed, "
                      f"{kv.cleared} cleared; {kv.missing_batches} batches lost); {kv.accounted} of {kv.requests} "
                      f"requests' cached tokens = the events' resident prefix; block residency p50 "
                      f"{res.evicted_s.p50 if res.evicted_s.count else '-'} s over {res.evicted_s.count} evictions"
                      + (f"; events: {kv.file}" if kv.file else ""), highlight=False)
    if outcome.out is not None:
        console.print(f"[dim]per-request results: {outcome.out} (run {r.run})[/]")


def problems(outcome) -> bool:
    """Print every problem on stderr; True when there is one (exit 1)."""
    r = outcome.report
    for row in outcome.disagreements:
        if row.mismatch:
            err.print(f"[red]mismatch:[/] {row.source}:{row.record} pass {row.pass_name}: {row.cached_tokens} cached "
                      f"tokens, max |Δlogit| {row.max_abs_dlogit:.2e}, argmax {'same' if row.argmax_match else 'DIFFERS'}"
                      f", greedy tokens {'same' if row.tokens_match else 'DIFFER'}", highlight=False)
        else:
            err.print(f"[red]error:[/] {row.source}:{row.record} pass {row.pass_name}: engine cached "
                      f"{row.cached_tokens} tokens, simulator predicted {row.predicted_cached}", highlight=False)
    if not _server(r):
        return any(s.mismatches or s.simulator_equal is False for s in r.passes)
    for d in r.differences:
        err.print(f"[red]differs:[/] {d.source}:{d.record} pass {d.pass_name}: engine cached {d.cached_tokens}, "
                  f"predicted {d.predicted_cached} (by {d.by}): {escape(d.fact)}", highlight=False)
    for f in r.findings:
        err.print(f"[red]{f.code}:[/] {f.source}:{f.record}: the engine counted {f.engine_prompt_tokens} prompt "
                  f"tokens, our template and tokenizer {f.prompt_tokens} ({f.by:+d})", highlight=False)
    if r.stopped:
        err.print(f"[red]stopped:[/] {escape(r.stopped)}; rerun with --resume to continue", highlight=False)
    return bool(r.differences or r.findings or r.stopped or any(s.failed or s.refused for s in r.passes))


def finish(outcome, shape: str) -> None:
    """Print ``outcome`` as ``shape`` (``json`` or ``rich``) and its problems; raise ``typer.Exit``."""
    report_skipped(outcome.skipped, skip_bad=True)  # replay runs what it can read
    if shape == "json":
        sys.stdout.write(orjson.dumps(outcome.report).decode() + "\n")
    else:
        render(outcome)
    bad = problems(outcome)
    if outcome.report.interrupted:
        err.print("[yellow]interrupted:[/] the summary covers the requests that finished; rerun with --resume to continue")
        raise typer.Exit(EXIT_INTERRUPTED)
    raise typer.Exit(EXIT_FINDINGS if bad else EXIT_OK)
