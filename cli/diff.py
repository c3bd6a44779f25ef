"""``prefixcache diff``: both rendered prompts around their first differing token.

Parse → :func:`prefixcache.analyzer.api.diff` → render: the part and JSON
path of each side, the text just before and after the first differing character, and the
tokens of the window side by side (position, id, text). ``--json`` prints the
:class:`~prefixcache.analyzer.lint.diff.DiffReport`. ``--redact`` prints no prompt text (the
library's report comes redacted): texts as lengths and keyed hashes, tokens as ids only, and
errors with quoted input hashed. Exit codes: 0 nothing cached is lost (identical prompts, the
earlier prompt a prefix of this one, or a divergence only inside the earlier prompt's generation
prompt, which lint ignores too), 1 the prefix broke (lint's cause is printed), 2 usage or input
error.
"""

from __future__ import annotations

import sys
from typing import Optional

import orjson
import typer
from rich.table import Table
from rich.text import Text

from prefixcache.analyzer import api
from prefixcache.analyzer.api import DiffOptions
from prefixcache.analyzer.lint.diff import DiffReport, PromptSide
from prefixcache.cli.common import EXIT_FINDINGS, EXIT_OK, console, exit_code_if_stopped, handle_errors
from prefixcache.cli.options import (
    AsJson, InputFormat, Paths, Redact, RedactKey, Template, Tokenizer, format_option, implied_redact, output_format,
)


def _name(side: PromptSide) -> str:
    return f"session {side.session} request {side.index}"


def _cell(text: str) -> str:
    """Newlines, tabs and carriage returns made visible (as ``\\n``), everything else as is."""
    return text.replace("\n", "\\n").replace("\t", "\\t").replace("\r", "\\r")


def print_diff(r: DiffReport) -> None:
    """The text view of a diff report."""
    a, b = r.request, r.against
    if r.identical:
        console.print(Text(f"{_name(a)} and request {b.index}: identical prompts ({a.prompt_tokens:,} tokens)",
                           style="green"))
        return
    if r.extends:
        console.print(Text(f"request {b.index} is a prefix of request {a.index} ({_name(a)}): the prompt only grew, "
                           f"{b.prompt_tokens:,} → {a.prompt_tokens:,} tokens; nothing cached is lost", style="green"))
        return
    console.print(Text(f"{_name(a)} vs request {b.index} (session {b.session}): first difference at token "
                       f"{r.shared_tokens:,}, char {r.first_diff_char:,}", style="bold"))
    console.print(f"  tokenizer {r.tokenizer}{'' if r.exact else ' (approximate)'}; shared {r.shared_tokens:,} "
                  f"of {a.prompt_tokens:,} / {b.prompt_tokens:,} tokens", highlight=False)
    if r.cause_code:
        console.print(f"  lint: {r.cause_code} {r.cause}", highlight=False, soft_wrap=True)
    else:
        console.print("  lint: no break (the earlier prompt differs only in its generation prompt, which the answer "
                      "replaced); nothing cached is lost", highlight=False, soft_wrap=True)
    for label, side in (("this", a), ("against", b)):
        console.print(f"  {label:>7}: {_name(side)}, {side.segment} ({side.json_path or '-'}), "
                      f"{side.source}:{side.record}", highlight=False, soft_wrap=True)
    for side in (b, a):
        line = Text(f"  request {side.index}: ", style="bold")
        line.append(_cell(side.text_before), style="dim")
        line.append("│", style="red")
        line.append(_cell(side.text_after), style="yellow")
        console.print(line, soft_wrap=True)
    if not (b.tokens or a.tokens):  # --redact: no token cells
        return
    table = Table(show_edge=False, pad_edge=False, box=None)
    for col in ("token", f"req {b.index} id", f"req {b.index} text", f"req {a.index} id", f"req {a.index} text", ""):
        table.add_column(col, justify="right" if "id" in col or col == "token" else "left", no_wrap=True)
    left = {c.position: c for c in b.tokens}
    right = {c.position: c for c in a.tokens}
    for pos in sorted(left.keys() | right.keys()):
        lc, rc = left.get(pos), right.get(pos)
        mark = "" if pos < r.shared_tokens else "≠" if lc and rc and lc.id != rc.id else "·"
        table.add_row(str(pos), str(lc.id) if lc else "", _cell(lc.text) if lc else "", str(rc.id) if rc else "",
                      _cell(rc.text) if rc else "", mark, style="yellow" if pos == r.shared_tokens else None)
    console.print(table)


def register(app: typer.Typer) -> None:
    """Add the ``diff`` command to ``app``."""

    @app.command("diff")
    @handle_errors
    def diff(
        paths: Paths,
        request: str = typer.Option(..., "--request", "-r", help="The request: SESSION:K (K from 0), or K when the log has one session."),
        against: Optional[str] = typer.Option(None, "--against", help="Compare with this request: K' or SESSION:K' (default: the previous request of the session)."),
        window: int = typer.Option(8, "--window", min=1, help="Tokens shown either side of the first difference."),
        width: int = typer.Option(80, "--width", min=1, help="Characters of text shown either side."),
        fmt: format_option("text (default) or json.", "-f") = None,
        as_json: AsJson = False,
        input_format: InputFormat = "auto",
        tokenizer: Tokenizer = "auto",
        template: Template = "auto",
        redact: Redact = False,
        redact_key: RedactKey = None,
    ) -> None:
        """Show two rendered prompts of a log around their first differing token."""
        out = output_format(fmt, as_json, ("text", "json"), "text")
        options = DiffOptions(request, against, input_format, template, tokenizer, window, width,
                              bool(implied_redact(redact or None, redact_key)), redact_key)  # a flag: False = not given
        report = api.diff(paths, options, stdin=sys.stdin.buffer if "-" in paths else None)
        code = EXIT_FINDINGS if report.broke else EXIT_OK
        exit_code_if_stopped(code)
        if out == "json":
            sys.stdout.write(orjson.dumps(report, option=orjson.OPT_INDENT_2).decode() + "\n")
        else:
            print_diff(report)
        raise typer.Exit(code)
