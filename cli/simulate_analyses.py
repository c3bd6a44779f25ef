"""Rich rendering of ``simulate``'s analyses (``--survival``, ``--ttl-whatif``, ``--reuse chunks``, provider calls).

Tables and lines from the report's :class:`~prefixcache.analyzer.cache.simulate.analyses.Analyses`
(no figures computed here); a report without them prints nothing.
"""

from __future__ import annotations

from rich.markup import escape
from rich.table import Table

from prefixcache.analyzer.api import SimulateReport
from prefixcache.analyzer.cache.simulate.chunks import ChunkReuse
from prefixcache.analyzer.cache.simulate.provider_calls import CLASSES, ProviderCalls
from prefixcache.analyzer.cache.simulate.sizing import sizing_line
from prefixcache.analyzer.cache.simulate.survival import Survival, TimePoint
from prefixcache.analyzer.cache.simulate.ttl_whatif import TtlWhatIf
from prefixcache.cli.common import console
from prefixcache.cli.tables import print_table

#: Times shown in the rich tables (the JSON has every one of T_POINTS).
_SHOWN = (10.0, 60.0, 300.0, 1800.0, 3600.0, 86400.0)


def _t(seconds: float) -> str:
    if seconds >= 3600:
        return f"{seconds / 3600:g}h"
    return f"{seconds / 60:g}m" if seconds >= 60 else f"{seconds:g}s"


def _frac(p: TimePoint) -> str:
    return "—" if p.fraction is None else f"{100 * p.fraction:.1f}%"


def _s(x: float | None) -> str:
    return "—" if x is None else f"{x:,.1f}"


def _table(title: str, columns: tuple[str, ...], left: int = 1) -> Table:
    t = Table(title=title, title_justify="left")
    for i, col in enumerate(columns):
        t.add_column(col, justify="left" if i < left else "right", overflow="fold")
    return t


def _survival(s: Survival) -> None:
    shown = [p for p in s.gaps[0].within if p.t_s in _SHOWN] if s.gaps else []
    t = _table(f"reuse gaps · {s.block_size}-token blocks (time since the block's previous use)",
               ("kind", "reuses", "p50 s", "p95 s", "max s", *(f"≤{_t(p.t_s)}" for p in shown)))
    for g in [*s.gaps, *s.sessions[:5]]:
        pts = [p for p in g.within if p.t_s in _SHOWN]
        t.add_row(escape(g.kind), f"{g.gaps_s.count:,}", _s(g.gaps_s.p50), _s(g.gaps_s.p95), _s(g.gaps_s.max),
                  *(_frac(p) for p in pts))
    print_table(console, t)
    if s.sessions_total > 5:
        console.print(f"[dim]{s.sessions_total} sessions reuse blocks; the 5 with most reuses shown (JSON: "
                      f"{len(s.sessions)})[/]")
    t = _table("residency and survival (share of stored blocks still cached t after storing)",
               ("capacity", "kind", "stored", "evicted p50 s", "still cached", *(_t(x) for x in _SHOWN)), left=2)
    for r in s.residency:
        pts = [p for p in r.survival if p.t_s in _SHOWN]
        t.add_row(escape(r.capacity), r.kind, f"{r.stored_blocks:,}", _s(r.evicted_s.p50),
                  f"{r.still_cached_blocks:,}", *(_frac(p) for p in pts))
    print_table(console, t)


def _ttl(w: TtlWhatIf) -> None:
    priced = any(r.usd_total is not None for r in w.rows)
    cols = ("retention", "ttl s", "hit tok", "hit %", "req hit", "written", "lost ttl") + \
        (("reads $", "writes $", "uncached $", "total $") if priced else ())
    t = _table(f"TTL what-if · cache {w.cache} · capacity {escape(w.capacity)}", cols)
    for r in w.rows:
        money = (f"{r.usd_reads:.4f}", f"{r.usd_writes:.4f}", f"{r.usd_uncached:.4f}", f"{r.usd_total:.4f}") \
            if priced else ()
        t.add_row(escape(r.label), "—" if r.ttl_s is None else f"{r.ttl_s:g}", f"{r.cached_tokens:,}",
                  f"{100 * r.hit_ratio_tokens:.1f}%", str(r.requests_hit), f"{r.written_tokens:,}",
                  f"{r.lost_ttl_tokens:,}", *money)
    print_table(console, t)
    for a in w.advice:
        console.print(escape(a.advice))


def _chunks(c: ChunkReuse) -> None:
    console.print(f"reuse ceilings ({escape(c.chunking)}): prefix {c.prefix_ceiling_tokens:,} of "
                  f"{c.prompt_tokens:,} prompt tokens ({100 * c.prefix_ceiling_ratio:.1f}%); chunks prefilled "
                  f"earlier at another position add {c.beyond_prefix_tokens:,} ({c.requests_with_beyond} "
                  f"requests): {c.chunk_ceiling_tokens:,} ({100 * c.chunk_ceiling_ratio:.1f}%); after recomputing "
                  f"{100 * c.recompute_fraction:g}% of them {c.effective_tokens:,}")
    console.print(f"[dim]{escape(c.note)}[/]")


def _provider_calls(p: ProviderCalls) -> None:
    t = _table(f"{p.provider} calls by class (band held on {_pct(p.band_held)} of the calls not provider-side; "
               f"anchored on the {p.band_anchor})", ("class", "calls", "prompt tokens", "cached", "billed $", "lost tokens",
                                                   "lost $"))
    for c in CLASSES:
        t.add_row(c.replace("_", " "), f"{p.classes[c]:,}", f"{p.tokens[c]:,}", f"{p.cached_tokens[c]:,}",
                  f"{p.dollars[c]:.4f}", f"{p.lost_tokens[c]:,}", f"{p.lost_dollars[c]:.4f}")
    print_table(console, t)
    for note in p.notes:
        console.print(f"[dim]{escape(note)}[/]")


def _pct(x: float | None) -> str:
    return "–" if x is None else f"{100 * x:.1f}%"


def render_analyses(rep: SimulateReport) -> None:
    """The analyses of ``rep`` (none: nothing printed)."""
    a = getattr(rep, "analyses", None)
    if a is None:
        return
    if a.survival is not None:
        _survival(a.survival)
    if a.ttl_whatif is not None:
        _ttl(a.ttl_whatif)
    if a.chunks is not None:
        _chunks(a.chunks)
    if getattr(a, "provider_calls", None) is not None:
        _provider_calls(a.provider_calls)
    if getattr(a, "sizing", None) is not None:
        console.print(f"sizing: {escape(sizing_line(a.sizing))}", highlight=False)
