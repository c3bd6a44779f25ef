"""``canonicalize --review``: the rich view of the change sets, one per rewritten request.

Renders :class:`~prefixcache.analyzer.canonical.review.ChangeSet` s (built by the library):
the request, the rules applied, the tokens recovered, the structure check, and the unified diff
of what changed (``-`` logged, ``+`` rewritten), cut to :data:`MAX_DIFF_LINES` lines per request.
"""

from __future__ import annotations

from pathlib import Path

from rich.console import Console
from rich.markup import escape

from prefixcache.analyzer.canonical.review import ChangeSet

#: Diff lines shown per request (the JSON report has them all).
MAX_DIFF_LINES = 40
_STYLE = {"+": "green", "-": "red", "@": "cyan", "~": "yellow"}


def print_change_sets(out: Console, changes: list[ChangeSet], applied: bool) -> None:
    """Every change set, then a line saying whether anything was written."""
    if not changes:
        out.print("No change sets: nothing to rewrite.")
    for ch in changes:
        check = "[green]passed[/]" if ch.structure_ok else f"[bold red]FAILED[/] ({escape('; '.join(ch.structure_problems))})"
        out.print(f"[bold]{escape(Path(ch.source).name)} record {ch.record}[/] session {escape(ch.session)} request "
                  f"{ch.index}: {', '.join(ch.codes)}; recovers {ch.recovered_tokens:+,} tokens; structure check "
                  f"{check}", highlight=False)
        for ln in ch.diff[:MAX_DIFF_LINES]:
            style = "bold" if ln.startswith(("---", "+++")) else _STYLE.get(ln[:1], "dim")
            out.print(f"  [{style}]{escape(ln)}[/]", highlight=False, soft_wrap=True)
        if len(ch.diff) > MAX_DIFF_LINES:
            out.print(f"  [dim]… {len(ch.diff) - MAX_DIFF_LINES} more diff line(s) (--json has them all)[/]")
    if not applied:
        out.print("[yellow]review only:[/] nothing written (add --apply --out FILE to write the rewritten log)")
