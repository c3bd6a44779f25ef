"""``canonicalize --review``: the rich view of the change sets, one per rewritten request.

Renders :class:`~prefixcache.analyzer.canonical.review.ChangeSet` s (built by the library):
the request, the rules applied, the tokens recovered, the structure check, and the unified diff
of what changed (``-`` logged, ``+`` rewritten), per rule when the request has several, cut to
:data:`MAX_DIFF_LINES` lines per diff.
"""

from __future__ import annotations

from pathlib import Path

from rich.console import Console
from rich.markup import escape

from prefixcache.analyzer.canonical.review import ChangeSet

#: Diff lines shown per request (the JSON report has them all).
MAX_DIFF_LINES = 40
_STYLE = {"+": "green", "-": "red", "@": "cyan", "~": "yellow"}


def _check(ok: bool, problems: list[str]) -> str:
    return "[green]passed[/]" if ok else f"[bold red]FAILED[/] ({escape('; '.join(problems))})"


def _print_diff(out: Console, diff: list[str], indent: str) -> None:
    for ln in diff[:MAX_DIFF_LINES]:
        style = "bold" if ln.startswith(("---", "+++")) else _STYLE.get(ln[:1], "dim")
        out.print(f"{indent}[{style}]{escape(ln)}[/]", highlight=False, soft_wrap=True)
    if len(diff) > MAX_DIFF_LINES:
        out.print(f"{indent}[dim]… {len(diff) - MAX_DIFF_LINES} more diff line(s) (--json has them all)[/]")


def print_change_sets(out: Console, changes: list[ChangeSet], applied: bool, to_write: str = "--apply --out FILE") -> None:
    """Every change set (per rule when a request has several), then whether anything was written
    (and, if not, the options ``to_write`` that would write it)."""
    if not changes:
        out.print("No change sets: nothing to rewrite.")
    for ch in changes:
        out.print(f"[bold]{escape(Path(ch.source).name)} record {ch.record}[/] session {escape(ch.session)} request "
                  f"{ch.index}: {', '.join(ch.codes)}; recovers {ch.recovered_tokens:+,} tokens; structure check "
                  f"{_check(ch.structure_ok, ch.structure_problems)}", highlight=False)
        if ch.context_tokens:
            out.print(f"  [dim]of which {ch.context_tokens:+,} tokens come from the rewrites of earlier requests "
                      "alone[/]", highlight=False)
        if len(ch.rules) == 1:
            _print_diff(out, ch.diff, "  ")
            continue
        for rule in ch.rules:
            out.print(f"  [bold]{rule.code}[/]: recovers {rule.recovered_tokens:+,} tokens; structure check "
                      f"{_check(rule.structure_ok, rule.structure_problems)}", highlight=False)
            _print_diff(out, rule.diff, "    ")
    if not applied:
        out.print(f"[yellow]review only:[/] nothing written (add {to_write} to write the rewritten log)")
