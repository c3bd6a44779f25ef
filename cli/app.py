"""The ``prefixcache`` command: a typer app with one module per command.

This package is the only place that prints (rich) or sets exit codes:
0 clean, 1 findings at or above the threshold, 2 usage or input error.
"""

from __future__ import annotations

import importlib

import typer

from prefixcache import __version__

app = typer.Typer(
    name="prefixcache",
    help="Profile agent prompts and KV prefix caches: why the prompt cache misses, and what it costs.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
)

#: Command modules in this package; each defines ``register(app)``.
COMMANDS = ["inspect", "check", "lint", "rules", "canonicalize", "replay", "simulate"]

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
    """Name option values like classic CLIs (``--format FORMAT``, ``PATHS...``) instead
    of typer's Python type hints (``<str>``, ``{paths}``) in ``--help``."""
    for param in command.params:
        if param.param_type_name == "argument":
            label = param.name.upper() + ("..." if param.nargs != 1 else "")
            param.make_metavar = lambda ctx=None, _label=label: _label  # type: ignore[method-assign]
            param.display_type_rich = lambda ctx=None: None  # type: ignore[attr-defined]
        elif param.metavar is None and not getattr(param, "is_flag", False):
            param.metavar = param.name.upper()
    for sub in getattr(command, "commands", {}).values():
        _plain_metavars(sub)


def main() -> None:
    """Console-script entry point."""
    command = typer.main.get_command(app)
    _plain_metavars(command)
    command(prog_name="prefixcache")
