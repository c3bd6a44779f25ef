"""The rich terminal report of ``prefixcache lint``: session summary, waterfall,
then every finding with its location, excerpt and fix."""

from __future__ import annotations

from rich.console import Console
from rich.markup import escape
from rich.table import Table
from rich.text import Text

from prefixcache.analyzer.lint.engine import TTL, TTL_NAME, Waterfall
from prefixcache.analyzer.lint.run import LintRun
from prefixcache.analyzer.lint.rules import REGISTRY, Finding

from prefixcache.cli.common import plural
from prefixcache.cli.lint_tenants import print_groups
from prefixcache.cli.tables import print_table

SEVERITY_STYLE = {"error": "bold red", "warning": "yellow", "info": "cyan"}
BAR = 40


def _cause(code: str) -> str:
    """A loss cause as the report names it: a rule code and name, or ``ttl`` and what it means."""
    return f"{code} {TTL_NAME if code == TTL else REGISTRY[code].name}"


def _pct(part: int, whole: int) -> str:
    return f"{part / whole:.1%}" if whole else "—"


def _sessions_table(sessions: dict[str, Waterfall]) -> Table:
    table = Table(title="Sessions", title_justify="left", show_edge=False)
    table.add_column("session", overflow="fold", ratio=3)
    for col in ("requests", "prompt", "reusable", "%", "lost"):
        table.add_column(col, justify="right", no_wrap=True)
    table.add_column("main cause", overflow="fold", ratio=2)
    for name, w in sessions.items():
        if not w.content_requests:
            table.add_row(escape(name), f"{w.requests:,}", "—", "—", "—", "—",
                          Text("prompts not logged (usage only)", style="dim"))
            continue
        top = w.lost_tokens_by_code.most_common(1)
        cause = _cause(top[0][0]) if top else "—"
        if w.usage_only_requests:
            cause += f" (+{w.usage_only_requests} usage-only request(s))"
        table.add_row(escape(name), f"{w.requests:,}", f"{w.prompt_tokens:,}", f"{w.reusable_tokens:,}",
                      _pct(w.reusable_tokens, w.prompt_tokens), f"{w.lost_tokens:,}", cause)
    return table


def waterfall_rows(w: Waterfall) -> list[tuple[str, int]]:
    """(label, tokens) rows of the waterfall: reused, new, then lost per code (largest first)."""
    rows = [("reused (prefix hit)", w.reusable_tokens), ("new (appended)", w.new_tokens)]
    rows += [(f"lost · {_cause(code)}", n) for code, n in w.lost_tokens_by_code.most_common()]
    return rows


def _waterfall(w: Waterfall, console_width: int) -> Table:
    table = Table(title=f"Waterfall: {plural(w.prompt_tokens, 'prompt token')}", title_justify="left", show_edge=False,
                  show_header=False)
    table.add_column("part")
    table.add_column("tokens", justify="right")
    table.add_column("%", justify="right")
    table.add_column("bar", no_wrap=True)
    rows = waterfall_rows(w)
    # the bar takes what the label, tokens and % columns leave (each column: 2 of padding, 1 of rule)
    used = max(len(label) for label, _ in rows) + len(f"{w.prompt_tokens:,}") + len("100.0%") + 11
    bar_width = max(10, min(BAR, console_width - used))
    offset = 0
    for label, n in rows:
        width = round(bar_width * n / w.prompt_tokens) if w.prompt_tokens else 0
        start = round(bar_width * offset / w.prompt_tokens) if w.prompt_tokens else 0
        style = "green" if label.startswith("reused") else "blue" if label.startswith("new") else "red"
        bar = Text(" " * start) + Text("█" * max(width, 1 if n else 0), style=style)
        table.add_row(label, f"{n:,}", _pct(n, w.prompt_tokens), bar)
        offset += n
    return table


def _file_place(f: Finding) -> str:
    """``file:line`` when the record's line is known, else ``file`` and the item's pointer."""
    name = f.source.rsplit("/", 1)[-1]
    if f.file_line is not None:
        return f"{name}:{f.file_line}"
    return f"{name} {f.pointer}" if f.pointer and not f.json_path else name


def _clip(text: str, width: int, left: bool) -> str:
    shown = repr(text)[1:-1]
    if len(shown) <= width:
        return shown
    return "…" + shown[-width:] if left else shown[:width] + "…"


def _offsets(f: Finding) -> str:
    """`` · rendered prompt: char 2,650, token 560``: offsets in the whole rendered prompt (the
    ``line`` before the part's name is the line inside that part)."""
    offsets = ", ".join(p for p in (f"char {f.char:,}" if f.char is not None else "",
                                    f"token {f.token:,}" if f.token is not None else "") if p)
    return f" · rendered prompt: {offsets}" if offsets else ""


def _finding(f: Finding) -> list[Text]:
    head = Text()
    head.append(f"{f.severity:<7} ", style=SEVERITY_STYLE[f.severity])
    head.append(f"{f.code} {f.name}", style="bold")
    head.append(f" · session {f.session} request {f.request}")
    if f.lost_tokens:
        head.append(f" · {plural(f.lost_tokens, 'token')} lost", style="red")
    at = Text("  at " + (f"line {f.line} of " if f.line else ""))
    at.append(f.json_path or f.segment, style="magenta")
    at.append(_offsets(f) + (f" · {_file_place(f)}" if f.source else ""), style="dim")
    if f.shared_with and f.shared_with[0] == f.session:
        at.append(f" · vs request {f.shared_with[1]}", style="dim")
    elif f.shared_with:
        at.append(f" · vs {f.shared_with[0]} request {f.shared_with[1]}", style="dim")
    uncertain = "" if f.certain or "not certain" in f.message else " (cause not certain)"
    lines = [head, at, Text("  " + f.message + uncertain)]
    if f.before or f.after:
        before = _clip(f.before, 30, True)
        now = Text("  now: " + before, style="dim")
        now.append(_clip(f.after, 30, False), style="bold red" if f.other_after else "bold")
        lines.append(now)
        if f.other_after:
            was = Text("  was: " + before, style="dim")
            was.append(_clip(f.other_after, 30, False), style="bold green")
            lines.append(was)
    lines.append(Text("  fix: " + f.fix, style="italic"))
    return lines


#: Prompt-size lines printed before the rest is left to the JSON document.
MAX_SIZE_LINES = 5


def print_rich(console: Console, run: LintRun) -> None:
    """Print the whole terminal report of ``run``."""
    total, findings = run.total, run.findings
    head = f"prefixcache lint · {plural(total.requests, 'request')} · {plural(len(run.sessions), 'session')} · "
    if total.content_requests:
        head += (f"{total.reusable_tokens:,} of {total.prompt_tokens:,} prompt tokens reusable "
                 f"({_pct(total.reusable_tokens, total.prompt_tokens)}; block-aligned, B={run.block_size}: "
                 f"{total.reusable_block_tokens:,})")
    else:
        head += "no logged prompts"
    console.print(Text(head, style="bold"))
    console.print()
    print_table(console, _sessions_table(run.sessions))
    console.print()
    if total.content_requests:
        print_table(console, _waterfall(total, console.width))
        console.print()
    print_groups(console, run)
    if total.usage_only_requests:
        console.print(_usage_only(total))
        console.print()
    if findings:
        console.print(Text(f"Findings ({len(findings)})", style="bold"))
        for f in findings:
            for line in _finding(f):
                console.print(line)
            console.print()
    elif total.lost_tokens > total.ttl_tokens:  # the rules behind them were not selected: never an all-clear
        lost = ", ".join(f"{c} {k:,}" for c, k in total.lost_tokens_by_code.most_common() if c != TTL)
        console.print(Text(f"No reported findings, but {total.lost_tokens - total.ttl_tokens:,} prompt tokens were "
                           f"lost ({lost}): their rules are not selected.", style="yellow"))
    elif total.content_requests:
        console.print(Text("No findings: every request extends the previous one of its session.", style="green"))
    if total.ttl_tokens:  # idle time, not a prompt defect: a note, never a finding
        console.print(Text(f"note: {total.ttl_tokens:,} prompt tokens lost to ttl: their prefix expired in an idle "
                           f"gap past the TTL (--ttl {run.config.ttl}); keep the cache warm or buy a longer "
                           "retention.", style="cyan"))
    shown = run.size_warnings[:MAX_SIZE_LINES]
    for line in shown:
        console.print(Text("prompt size: " + line, style="yellow"))
    if len(run.size_warnings) > len(shown):
        console.print(Text(f"prompt size: and {len(run.size_warnings) - len(shown)} more session(s) "
                           "(all in --format json, warnings)", style="yellow"))
    for note in run.notes.values():
        console.print(Text(note, style="dim"))


def _usage_only(w: Waterfall) -> Text:
    """The note on requests whose prompts the log did not keep."""
    text = Text(f"Usage only: {w.usage_only_requests:,} request(s) whose prompts were not logged", style="bold yellow")
    frac = w.usage_only_cached_fraction
    cached = (f"{w.usage_only_cached_tokens:,} cached ({frac:.1%})" if frac is not None
              else "no cached-token count")
    text.append(f"\n  the log reports {w.usage_only_prompt_tokens:,} prompt tokens, {cached} — the provider's own "
                "figures, not checked here.\n  Without the prompt text nothing can be said about where reuse "
                "broke or why; these requests are left out of the reusable figures and the waterfall.",
                style="default")
    return text
