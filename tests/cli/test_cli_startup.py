"""Lazy start-up: ``prefixcache --help`` imports no command module, and the summaries it lists are
the commands' own (they cannot drift)."""

from __future__ import annotations

import inspect
import subprocess
import sys

import typer
from typer.testing import CliRunner

from prefixcache.cli.app import COMMANDS, app, load_command

#: What a command module pulls in; none of it may load for the root ``--help``.
HEAVY = ("numpy", "jinja2", "tiktoken", "tokenizers", "orjson", "rich.markdown", "rich.progress",
         "prefixcache.analyzer.ingest", "prefixcache.analyzer.cache", "prefixcache.cli.common",
         "prefixcache.cli.lint")


def _summary(help_text: str) -> str:
    return " ".join(inspect.cleandoc(help_text).split("\n\n")[0].split())


def test_every_summary_is_the_commands_own_first_paragraph() -> None:
    for name in COMMANDS:
        assert COMMANDS[name][1] == _summary(load_command(name).help), name


def test_every_registered_command_is_listed_under_its_module() -> None:
    import importlib

    for module in {m for m, _ in COMMANDS.values()}:
        scratch = typer.Typer()
        importlib.import_module(f"prefixcache.cli.{module}").register(scratch)
        for info in scratch.registered_commands:
            assert COMMANDS[info.name][0] == module, info.name


def test_root_help_imports_no_command_module() -> None:
    code = ("import sys\nfrom prefixcache.cli.app import main\ncode = main(['--help'])\n"
            f"print(sorted(m for m in {HEAVY!r} if m in sys.modules))\nsys.exit(code)")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip().splitlines()[-1] == "[]"
    listing = proc.stdout.split("Commands:")[1]
    assert [line.split()[0] for line in listing.strip().splitlines()[:-1]] == list(COMMANDS)


def test_commands_still_run_and_unknown_names_are_usage_errors() -> None:
    runner = CliRunner()
    result = runner.invoke(app, ["rule", "PC101", "--json"])
    assert result.exit_code == 0 and '"PC101"' in result.output
    bad = runner.invoke(app, ["lnt"])
    assert bad.exit_code == 2 and "No such command" in bad.output
