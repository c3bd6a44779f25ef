"""Issue 24 "what to build": rewrites as reviewable change sets (``canonicalize --review``):
per request, the rules applied, a unified diff of what changed, the tokens recovered and the
structure check; nothing is written without ``--apply``."""

from __future__ import annotations

import json

from typer.testing import CliRunner

from prefixcache.cli.app import app
from tests.analyzer.canonical.drift_logs import flip_flop_sections, memory_block, write


def test_review_shows_change_sets_and_writes_nothing(tmp_path) -> None:
    log = str(write(tmp_path / "memory.jsonl", memory_block()))
    res = CliRunner().invoke(app, ["canonicalize", log, "--review"])
    assert res.exit_code == 0, res.output
    text = res.output
    assert "request 1: PC101; recovers +" in text and "structure check passed" in text
    assert '-<memory updated="2026-03-02T10:31:01.138Z">' in text
    assert '+<memory updated="[timestamp: see the end of the conversation]">' in text
    assert "review only: nothing written" in text
    assert sorted(p.name for p in tmp_path.iterdir()) == ["memory.jsonl"]


def test_review_json_lists_every_change_with_recovered_tokens(tmp_path) -> None:
    log = str(write(tmp_path / "flip.jsonl", flip_flop_sections()))
    doc = json.loads(CliRunner().invoke(app, ["canonicalize", log, "--review", "--json"]).output)
    changes = doc["changes"]
    assert [(c["index"], c["codes"], c["structure_ok"]) for c in changes] == [(1, ["PC402"], True), (3, ["PC402"], True)]
    total = doc["total"]["after"]["reusable_tokens"] - doc["total"]["before"]["reusable_tokens"]
    recovered = [c["recovered_tokens"] for c in changes]
    assert all(r > 0 for r in recovered) and sum(recovered) <= total  # request 2 also gains: its predecessor is fixed
    assert any(ln.startswith("-## Style") for ln in changes[0]["diff"]) or any(
        ln.startswith("+## Style") for ln in changes[0]["diff"])
    assert doc["written"] == 0 and doc["agrees"] is True
    by_request = {c["index"]: c["recovered_tokens"] for c in changes}
    rows = [(t["index"], t["code"], t["request_recovered_tokens"]) for t in doc["transformations"]]
    assert rows == [(i, "PC402", by_request[i]) for i in (1, 3)]


def test_apply_writes_and_options_are_checked(tmp_path) -> None:
    log = str(write(tmp_path / "memory.jsonl", memory_block()))
    out = tmp_path / "canon.jsonl"
    res = CliRunner().invoke(app, ["canonicalize", log, "--review", "--apply", "--out", str(out)])
    assert res.exit_code == 0 and out.exists() and "review only" not in res.output
    assert len(out.read_text().splitlines()) == 4
    missing = CliRunner().invoke(app, ["canonicalize", log])
    assert missing.exit_code == 2 and "--out is required" in missing.output
    alone = CliRunner().invoke(app, ["canonicalize", log, "--apply", "--out", str(tmp_path / "x.jsonl")])
    assert alone.exit_code == 2 and "--apply goes with --review" in alone.output


def test_redacted_change_sets_hold_no_prompt_text(tmp_path) -> None:
    log = str(write(tmp_path / "memory.jsonl", memory_block()))
    res = CliRunner().invoke(app, ["canonicalize", log, "--review", "--redact", "--json"])
    assert res.exit_code == 0, res.output
    diff = [ln for c in json.loads(res.output)["changes"] for ln in c["diff"]]
    assert diff and "memory updated" not in " ".join(diff) and "pytest" not in " ".join(diff)
    assert all(ln.startswith(("---", "+++", "@@")) or " chars, h:" in ln for ln in diff)
