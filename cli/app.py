"""The ``prefixcache`` command: a typer app with one module per command.

This package is the only place that prints (rich) or sets exit codes:
0 clean, 1 findings at or above the threshold, 2 usage or input error.
"""

from __future__ import annotations

import importlib

import typer

app = typer.Typer(
    name="prefixcache",
    help="Profile agent prompts and KV prefix caches: why the prompt cache misses, and what it costs.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)

#: Command modules in this package; each defines ``register(app)``.
COMMANDS = ["inspect", "check", "lint", "rules", "canonicalize", "replay", "simulate"]

for _name in COMMANDS:
    importlib.import_module(f"{__package__}.{_name}").register(app)


def main() -> None:
    """Console-script entry point."""
    app()
