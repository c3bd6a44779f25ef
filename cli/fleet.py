"""Rich rendering of ``simulate --replicas N``: the :class:`~prefixcache.analyzer.cache.fleet.document.FleetReport`
as tables (decomposition, lost tokens by cause, TTFT and load per router)."""

from __future__ import annotations

from rich.markup import escape
from rich.table import Table

from prefixcache.analyzer.cache.fleet.document import FleetReport
from prefixcache.analyzer.cache.fleet.study import FLEET_CAUSES
from prefixcache.cli.common import console, plural
from prefixcache.cli.tables import print_table


def _pct(x: float) -> str:
    return f"{100 * x:.1f}%"


def _table(title: str, columns: tuple[str, ...]) -> Table:
    t = Table(title=title, title_justify="left")
    for i, col in enumerate(columns):
        t.add_column(col, justify="left" if i == 0 else "right", overflow="fold")
    return t


def _s(x: float) -> str:
    return f"{x:.3f}"


def _header(rep: FleetReport) -> None:
    hw = rep.hardware
    cap = "unbounded" if rep.capacity_blocks is None else f"{rep.capacity} = {rep.capacity_blocks:,} blocks"
    console.print(f"fleet · {rep.replicas} × cache {rep.cache} ({rep.policy}, {rep.block_size}-token blocks, {cap} "
                  f"each) · {plural(rep.requests, 'request')}, {rep.prompt_tokens:,} prompt tokens · arrivals "
                  f"{rep.arrivals}")
    console.print(f"timing {escape(hw.name)}: prefill {hw.prefill_tok_s:,.0f} tok/s + {hw.overhead_s * 1e3:.1f} ms a "
                  f"request, decode {hw.decode_tok_s:g} tok/s, {hw.concurrency} slots, {hw.kv_bytes_per_token:,} KV "
                  "bytes/token", highlight=False)
    if (c := rep.calibration) is not None:
        console.print(f"calibrated on {escape(c.path)} ({plural(c.rows, 'row')}): {c.prefill_tok_s:,.0f} tok/s, "
                      f"overhead {c.overhead_s * 1e3:.2f} ms; mean |error| {c.mean_abs_error_s * 1e3:.2f} ms "
                      f"({_pct(c.mean_rel_error)}), R² {c.r2:.4f}", highlight=False)
    for t in rep.tiers:
        link = "" if t.bandwidth_bytes_per_s is None else \
            f" @ {t.bandwidth_bytes_per_s / 1e9:g} GB/s + {t.latency_s * 1e6:g} µs"
        console.print(f"tier {t.name}: {t.size} = {t.blocks:,} blocks{link}", highlight=False)


def render_fleet(rep: FleetReport) -> None:
    """The rich fleet report."""
    _header(rep)
    tiered = len(rep.tiers) > 1
    t = _table(f"decomposition · ceiling {rep.ceiling_tokens:,} ({_pct(rep.ceiling_hit_ratio)}) · pooled "
               f"{rep.pooled_tokens:,} ({_pct(rep.pooled_hit_ratio)})",
               ("router", "ceiling", "− capacity", "− routing", "= cached", "hit", *(("restored",) if tiered else ())))
    for r in rep.results:
        t.add_row(r.router, f"{rep.ceiling_tokens:,}", f"{r.capacity_loss_tokens:,}", f"{r.routing_loss_tokens:,}",
                  f"{r.cached_tokens:,}", _pct(r.hit_ratio_tokens), *((f"{r.restored_tokens:,}",) if tiered else ()))
    print_table(console, t)
    used = [c for c in FLEET_CAUSES if any(r.lost_tokens_by_cause.get(c) for r in rep.results)]
    if used:
        lt = _table("lost tokens by cause", ("router", *used))
        for r in rep.results:
            lt.add_row(r.router, *(f"{r.lost_tokens_by_cause[c]:,}" for c in used))
        print_table(console, lt)
    tt = _table("TTFT and load (seconds)", ("router", "p50", "p95", "p99", "mean queue", "queue max/mean",
                                            "requests max/mean"))
    for r in rep.results:
        tt.add_row(r.router, *(_s(x) for x in r.ttft.flat()), _s(r.mean_queue_s),
                   "—" if r.queue_imbalance is None else f"{r.queue_imbalance:.2f}", f"{r.request_imbalance:.2f}")
    print_table(console, tt)
    for line in rep.warnings:
        console.print(f"[yellow]warning:[/] {escape(line)}")
    for note in rep.tokenizers.values():
        console.print(f"[dim]{escape(note)}[/]")
