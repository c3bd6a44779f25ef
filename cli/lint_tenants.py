"""The tenants, tags and divergence-position part of ``prefixcache lint``'s terminal report."""

from __future__ import annotations

from typing import Sequence

from rich.console import Console
from rich.markup import escape
from rich.table import Table
from rich.text import Text

from prefixcache.analyzer.lint.run import LintRun
from prefixcache.analyzer.lint.tenants import GroupFigures
from prefixcache.cli.tables import print_table


def _frac(x: float | None) -> str:
    return "—" if x is None else f"{x:.1%}"


def _table(title: str, rows: Sequence[GroupFigures]) -> Table:
    table = Table(title=title, title_justify="left", show_edge=False)
    table.add_column(title.split()[0].lower().rstrip("s"), overflow="fold", ratio=3)
    for col in ("requests", "prompt", "reusable %", "reported cached %"):
        table.add_column(col, justify="right", no_wrap=True)
    for g in rows:
        table.add_row(escape(g.name if g.name is not None else "(none)"), f"{g.requests:,}", f"{g.prompt_tokens:,}",
                      _frac(g.reusable_fraction), _frac(g.reported_cached_fraction))
    return table


def _tokens(n: int) -> str:
    return f"{n // 1024}k" if n >= 1024 and n % 1024 == 0 else f"{n:,}"


def print_groups(console: Console, run: LintRun) -> None:
    """Tenants and tags tables (when the log names them) and the divergence histogram (when a
    prefix broke): the reusable % is an unbounded prefix cache's hit rate, the reported one the
    provider's or engine's."""
    for title, rows in (("Tenants", run.tenants), ("Tags", run.tags)):
        if rows:
            print_table(console, _table(title, rows))
            console.print()
    hit = [b for b in run.divergence if b.requests]
    if hit:
        parts = [f"{_tokens(b.start)}–{_tokens(b.end) if b.end is not None else '…'}: {b.requests:,} "
                 f"request(s), {b.lost_tokens:,} lost" for b in hit]
        console.print(Text("Divergence position (token where a prefix broke): " + " · ".join(parts)))
        console.print()
