"""Shared test helpers: repository paths, the CLI app, offline mode.

Every input a test reads lies inside the repository (``tests/fixtures``,
``examples``): the suite never depends on ``../shared``.
"""

from __future__ import annotations

import os
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
# The CLI honours $COLUMNS on pipes; pytest-xdist workers inherit COLUMNS=80. Tests that care
# about width pass COLUMNS themselves, the rest see the pipe default (160).
os.environ.pop("COLUMNS", None)

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


def existing(path: Path) -> Path:
    """``path``, which must exist: every fixture ships with the repository, so a missing
    one is a failure, never a skip."""
    assert path.exists(), f"{path} is missing from the repository"
    return path


def validate(doc: object, schema: str) -> None:
    """Validate a parsed JSON document against the published ``docs/schemas/<schema>.schema.json``
    (generated from the report types by ``scripts/gen_docs.py``); raises on any mismatch."""
    import json

    import jsonschema

    path = existing(ROOT / "docs" / "schemas" / f"{schema}.schema.json")
    jsonschema.Draft202012Validator(json.loads(path.read_text())).validate(doc)


def spaced_claude_session(tmp_path: Path, seconds: float = 1200.0) -> Path:
    """The real Claude Code sample (tests/fixtures/samples) with every line from the middle on ``seconds``
    later: a log with one idle gap, for the ``ttl`` cause of lint and simulate. Written to ``tmp_path``."""
    import json
    from datetime import datetime, timedelta

    lines = existing(SAMPLES / "claude_code_session_v1.0.98_fe5e1c67.jsonl").read_text().splitlines()
    out = []
    for i, line in enumerate(lines):
        rec = json.loads(line)
        if i >= len(lines) // 2 and "timestamp" in rec:
            t = datetime.fromisoformat(rec["timestamp"].replace("Z", "+00:00")) + timedelta(seconds=seconds)
            rec["timestamp"] = t.isoformat().replace("+00:00", "Z")
        out.append(json.dumps(rec))
    path = tmp_path / "claude_idle.jsonl"
    path.write_text("\n".join(out) + "\n")
    return path
