"""The ``prefixcache`` command: a typer app with one module per command.

This package is the only place that prints (rich) or sets exit codes:
0 clean, 1 findings at or above the threshold, 2 usage or input error.
"""

from __future__ import annotations

import importlib
import sys

import typer
from rich.markup import escape

from prefixcache import __version__
from prefixcache.cli.common import err, stdout_closed
from prefixcache.cli.usage import ClickException, NoArgsIsHelpError, UsageError, usage_message

app = typer.Typer(
    name="prefixcache",
    help="Profile agent prompts and KV prefix caches: why the prompt cache misses, and what it costs.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
)

#: Command modules in this package; each defines ``register(app)``.
COMMANDS = ["inspect", "check", "lint", "diff", "rules", "canonicalize", "replay", "simulate", "report", "calibrate"]

for _name in COMMANDS:
    importlib.import_module(f"{__package__}.{_name}").register(app)


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
    for sub in getattr(command, "commands", {}).values():
        _plain_metavars(sub)


def command():
    """The click command behind ``prefixcache``, with classic metavars."""
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
        err.print(f"[bold red]error:[/] {escape(usage_message(exc))}{hint}", highlight=False)
        return exc.exit_code
    except ClickException as exc:
        err.print(f"[bold red]error:[/] {escape(exc.format_message())}", highlight=False)
        return exc.exit_code
    except typer.Abort:
        err.print("[bold red]aborted[/]", highlight=False)
        return 1
    except SystemExit as exc:
        if type(sys.stdout).__name__ == "PacifyFlushWrapper":  # click's own exit on a broken pipe
            stdout_closed()
            return 0
        return exc.code if isinstance(exc.code, int) else 1 if exc.code else 0
    return rv if isinstance(rv, int) else 0
