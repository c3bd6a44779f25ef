"""The ``prefixcache`` command: a typer app with one module per command.

This package is the only place that prints (rich) or sets exit codes:
0 clean, 1 findings at or above the threshold, 2 usage or input error.
"""

from __future__ import annotations

import importlib
import sys

import typer
from typer.core import TyperGroup

from prefixcache import __version__
from prefixcache.cli.usage import ClickException, NoArgsIsHelpError, UsageError, make_default_short_help, usage_message

#: Every command: its name -> (the module of this package whose ``register(app)`` defines it, the first
#: paragraph of its help). ``prefixcache --help`` lists these without importing a command module (the
#: modules pull in numpy, jinja2, tiktoken and the analyzer); a command's module is imported when the
#: command runs or shows its own help. tests/cli/test_cli_startup.py checks each summary against the
#: command's own help, so they cannot drift.
COMMANDS: dict[str, tuple[str, str]] = {
    "inspect": ("inspect", "Show each request's prompt tokens, tokens per segment, and reported usage."),
    "check": ("check", "CI gate for prompt templates: fail when the cache-stable prefix shrinks or a varying "
              "value renders early."),
    "lint": ("lint", "Find where each prompt's reusable prefix breaks, why, and what it costs."),
    "diff": ("diff", "Show two rendered prompts of a log around their first differing token."),
    "rules": ("rules", "List every lint rule (code, name, group, severity, what it finds) and the severity table (exit effects)."),
    "rule": ("rules", "Show one rule's documentation."),
    "canonicalize": ("canonicalize", "Rewrite logged requests into a cache-stable form and show the reusable "
                     "tokens before and after."),
    "replay": ("replay", "Replay requests through a local model with and without a KV prefix cache; measure "
               "TTFT."),
    "simulate": ("simulate", "Simulate a prefix cache: hit tokens, avoided prefill, what each lost token was "
                 "lost to."),
    "report": ("report", "Write one offline HTML report: four answers first (reuse, losses, fixes, sizing), then "
               "per-session turns, capacity curves, replay, fleet."),
    "trace": ("trace", "Tokenize logs once into a columnar block-hash trace (Parquet) that simulate and lint read."),
    "export": ("export", "Write logs as a text-free block-hash trace (lengths, timestamps, block ids) that Mooncake "
               "tools and AIPerf replay."),
    "calibrate": ("calibrate", "Time prefill and KV restores (host memory, disk) at several lengths; fit them; "
                  "write the file."),
}


class LazyGroup(TyperGroup):
    """The root command group: lists :data:`COMMANDS` from their summaries and imports a command's
    module only when that command is looked up (to run it or show its help), so start-up costs the
    CLI framework alone (``bench/bench_startup.py`` measures it)."""

    def list_commands(self, ctx) -> list[str]:
        return list(COMMANDS)

    def get_command(self, ctx, cmd_name: str):
        if cmd_name not in COMMANDS:
            return None
        return load_command(cmd_name)

    def format_commands(self, ctx, formatter) -> None:
        """The ``Commands:`` section from the summaries (no import), shortened as click shortens a
        command's help (``make_default_short_help`` at the same width)."""
        limit = formatter.width - 6 - max(len(name) for name in COMMANDS)
        rows = [(name, make_default_short_help(summary, limit)) for name, (_, summary) in COMMANDS.items()]
        with formatter.section("Commands"):
            formatter.write_dl(rows)


_SETTINGS = dict(add_completion=False, pretty_exceptions_enable=False, rich_markup_mode=None)

app = typer.Typer(
    name="prefixcache",
    help="Profile agent prompts and KV prefix caches: why the prompt cache misses, and what it costs.",
    no_args_is_help=True,
    cls=LazyGroup,
    **_SETTINGS,
)

_LOADED: dict[str, object] = {}


def load_command(name: str):
    """The click command ``name`` (a key of :data:`COMMANDS`), built once: its module is imported and
    registered on a scratch typer app, and its metavars made classic (:func:`_plain_metavars`).
    Raises KeyError for a name that is not a command."""
    if name not in _LOADED:
        module, _ = COMMANDS[name]
        scratch = typer.Typer(**_SETTINGS)
        importlib.import_module(f"{__package__}.{module}").register(scratch)
        group = typer.main.get_group(scratch)
        for cmd_name, cmd in group.commands.items():
            _plain_metavars(cmd)
            _LOADED[cmd_name] = cmd
    return _LOADED[name]


def _version(value: bool) -> None:
    if value:
        print(f"prefixcache {__version__}")
        raise typer.Exit(0)


@app.callback()
def _root(
    version: bool = typer.Option(False, "--version", callback=_version, is_eager=True,
                                 help="Print the version and exit."),
) -> None:
    """Profile agent prompts and KV prefix caches: why the prompt cache misses, and what it costs."""


def _plain_metavars(command) -> None:
    """Name option values like classic CLIs (``--format FORMAT``, ``PATHS...``) instead of
    typer's Python names (``{paths}...`` in usage lines, ``paths...`` in ``--help``). Typer
    (0.24+) draws an argument's name from ``_usage_display_name`` / ``_rich_display_name``,
    not from click's ``make_metavar``, so both are set per argument."""
    for param in command.params:
        if param.param_type_name == "argument":
            name = param.name.upper() + ("..." if param.nargs != 1 else "")
            usage = name if param.required else f"[{name}]"
            param.metavar = param.name.upper()  # "Missing argument 'PATHS'"
            param._usage_display_name = lambda _usage=usage: _usage  # type: ignore[attr-defined]
            param._rich_display_name = lambda _name=name: _name  # type: ignore[attr-defined]
            param.display_type_rich = lambda ctx=None: None  # type: ignore[attr-defined]  # no <list[str]>
            param.make_metavar = lambda ctx=None, _name=name: _name  # type: ignore[method-assign]  # older typer
        elif param.metavar is None and not getattr(param, "is_flag", False):
            param.metavar = param.name.upper()


def command():
    """The click command behind ``prefixcache`` (a :class:`LazyGroup`), with classic metavars."""
    cmd = typer.main.get_command(app)
    _plain_metavars(cmd)
    return cmd


def main(argv: list[str] | None = None) -> int:
    """Console-script entry point (``argv``: the arguments, default ``sys.argv[1:]``); returns the
    exit code. A usage error is one line on stderr (exit 2); a closed stdout pipe keeps the
    command's exit code (0 when the command was stopped by it) and prints nothing."""
    code = _invoke(command(), argv)
    try:
        sys.stdout.flush()  # a broken pipe shows here, not in the interpreter's last flush
    except BrokenPipeError:
        from prefixcache.cli.common import stdout_closed

        stdout_closed()
    return code


def _invoke(cmd, argv: list[str] | None) -> int:
    """Run ``cmd`` without click's standalone handling; every outcome becomes an exit code."""
    try:
        rv = cmd.main(args=argv, prog_name="prefixcache", standalone_mode=False)
    except NoArgsIsHelpError as exc:  # bare ``prefixcache``: the help
        exc.show()
        return exc.exit_code
    except UsageError as exc:
        hint = f" (see {exc.ctx.command_path} --help)" if exc.ctx is not None else ""
        _error(f"{usage_message(exc)}{hint}")
        return exc.exit_code
    except ClickException as exc:
        _error(exc.format_message())
        return exc.exit_code
    except typer.Abort:
        _error(None)
        return 1
    except SystemExit as exc:
        if type(sys.stdout).__name__ == "PacifyFlushWrapper":  # click's own exit on a broken pipe
            from prefixcache.cli.common import stdout_closed

            stdout_closed()
            return 0
        return exc.code if isinstance(exc.code, int) else 1 if exc.code else 0
    return rv if isinstance(rv, int) else 0


def _error(message: str | None) -> None:
    """One red ``error:`` line on stderr (``aborted`` for None). The console is imported here, on
    the error path, so that a plain ``--help`` never loads it."""
    from rich.markup import escape

    from prefixcache.cli.common import err

    text = "[bold red]aborted[/]" if message is None else f"[bold red]error:[/] {escape(message)}"
    err.print(text, highlight=False)
