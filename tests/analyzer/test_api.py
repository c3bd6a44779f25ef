"""The facade: one entry point per command, each taking one ``*Options``; with ``redact``
the report it returns is already redacted (the CLI only maps flags to options)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from prefixcache.analyzer import api, redact
from prefixcache.analyzer.errors import ConfigError

SECRET = "S3CRETk9q7w2"


@pytest.fixture(autouse=True)
def _redaction_off():
    """Each test starts and ends with redaction off (it is process state, as for one command)."""
    redact.enable(False)
    yield
    redact.enable(False)


def _unknown(tmp_path: Path) -> str:
    path = tmp_path / "unknown.jsonl"
    path.write_text(json.dumps({"api_key": f"sk-live-{SECRET}", "x": 1}) + "\n")
    return str(path)


def _log(tmp_path: Path) -> str:
    path = tmp_path / "log.jsonl"
    lines = [json.dumps({"model": "gpt-4o", "messages": [
        {"role": "system", "content": f"id {SECRET}{i}x1. Current time: 2026-03-02 10:31:0{i} UTC"},
        {"role": "user", "content": "hi"}]}) for i in range(3)]
    path.write_text("\n".join(lines) + "\n")
    return str(path)


def test_every_entry_point_redacts_its_own_report(tmp_path: Path) -> None:
    bad, log = _unknown(tmp_path), _log(tmp_path)
    inspection = api.inspect([bad], api.InspectOptions(redact=True, redact_key="k"))
    assert list(inspection) == [] and redact.active()
    assert SECRET not in repr(inspection.skipped) + repr(inspection.summary)
    run = api.lint([bad], api.LintOptions(api.LintConfig(redact=True), redact_key="k"))
    assert run.skipped and SECRET not in repr(run.skipped)
    canon = api.canonicalize([log], api.CanonicalizeOptions(out=str(tmp_path / "c.jsonl"), redact=True))
    report = canon.report(str(tmp_path / "c.jsonl"), len(canon.requests))
    assert report.transformations and SECRET not in repr(report.transformations)


def test_without_redact_nothing_is_hashed(tmp_path: Path) -> None:
    run = api.lint([_unknown(tmp_path)], api.LintOptions())
    assert SECRET in repr(run.skipped) and not redact.active()


def test_one_key_per_run_and_the_same_key_the_same_hashes() -> None:
    redact.use(True, "k")
    first = redact.redact_text(SECRET)
    redact.use(True, "k")  # a nested entry point keeps the key in use
    assert redact.redact_text(SECRET) == first
    redact.use(True, None)
    random_key = redact.redact_text(SECRET)
    redact.use(True, None)  # a random key stays the run's key
    assert redact.redact_text(SECRET) == random_key != first


def test_canonicalize_refuses_redact_to_stdout() -> None:
    with pytest.raises(ConfigError, match="give --out a file"):
        api.CanonicalizeOptions(out="-", redact=True)
