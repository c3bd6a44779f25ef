"""Shared test helpers: repository paths, the CLI app, offline mode.

Every input a test reads lies inside the repository (``tests/fixtures``,
``examples``): the suite never depends on ``../shared``.
"""

from __future__ import annotations

import os
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "tests" / "fixtures"
SAMPLES = FIXTURES / "samples"
CASES = FIXTURES / "cases"
EXAMPLES = ROOT / "examples"


def cli_app():
    """The click command behind ``prefixcache`` (for ``CliRunner``)."""
    import typer

    from prefixcache.cli.app import app

    return typer.main.get_command(app)
