"""Issue 24 "what to build": rewrites as reviewable change sets (``canonicalize --review``):
per request, the rules applied, a unified diff of what changed, the tokens recovered and the
structure check; nothing is written without ``--apply``."""

from __future__ import annotations

import json

from typer.testing import CliRunner

from prefixcache.cli.app import app
from prefixcache.analyzer.canonical.rewrite import SessionMemory, _DICT_FIELDS
from tests.analyzer.canonical.drift_logs import flip_flop_sections, memory_and_flip_flop, memory_block, write


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
    changes = json.loads(res.output)["changes"]
    diff = [ln for c in changes for ln in c["diff"]] + [ln for c in changes for r in c["rules"] for ln in r["diff"]]
    assert diff and "memory updated" not in " ".join(diff) and "pytest" not in " ".join(diff)
    assert all(ln.startswith(("---", "+++", "@@")) or " chars, h:" in ln for ln in diff)


def _review(log: str, *extra: str) -> dict:
    res = CliRunner().invoke(app, ["canonicalize", log, "--review", "--json", *extra])
    assert res.exit_code == 0, res.output
    return json.loads(res.output)


def test_two_drifts_in_one_request_are_reviewed_per_rule(tmp_path) -> None:
    """A millisecond ``<memory updated=...>`` timestamp on every request and, in requests 1
    and 3, two sections swapped: each of those requests gets one diff and one token figure per
    rule, and the rules' figures add up to the request's."""
    log = str(write(tmp_path / "two.jsonl", memory_and_flip_flop()))
    doc = _review(log)
    changes = {c["index"]: c for c in doc["changes"]}
    assert [(i, c["codes"]) for i, c in changes.items()] == [(0, ["PC101"]), (1, ["PC101", "PC402"]),
                                                             (2, ["PC101"]), (3, ["PC101", "PC402"])]
    for i in (1, 3):
        c = changes[i]
        rules = {r["code"]: r for r in c["rules"]}
        assert list(rules) == ["PC101", "PC402"] and all(r["structure_ok"] for r in c["rules"])
        moved, restored = "\n".join(rules["PC101"]["diff"]), "\n".join(rules["PC402"]["diff"])
        assert '+<memory updated="[timestamp: see the end of the conversation]">' in moved and "## Style" not in moved
        assert "+## Style" in restored and "-## Style" in restored and "memory" not in restored
        assert all(r["recovered_tokens"] > 0 for r in c["rules"])
        assert c["context_tokens"] + sum(r["recovered_tokens"] for r in c["rules"]) == c["recovered_tokens"]
    # request 1's cache (request 0, which has no section drift) is the same without PC402: the
    # PC101 step's figure is what the rewrite without PC402 recovers, less what request 0's rewrite changed
    alone = {c["index"]: c for c in _review(log, "--skip", "PC402")["changes"]}
    one = changes[1]
    assert alone[1]["recovered_tokens"] == one["context_tokens"] + one["rules"][0]["recovered_tokens"]
    rows = [(t["index"], t["code"], t["recovered_tokens"]) for t in doc["transformations"] if t["applied"]]
    assert rows == [(i, r["code"], r["recovered_tokens"]) for i, c in changes.items() for r in c["rules"]]
    text = CliRunner().invoke(app, ["canonicalize", log, "--review"]).output
    assert "request 1: PC101, PC402; recovers +" in text and "  PC402: recovers +" in text
    assert "come from the rewrites of earlier requests alone" in text


def test_scratch_memory_layers_every_field() -> None:
    """Per-rule steps run on a scratch copy of the session memory: it must layer every dict field."""
    from dataclasses import fields
    assert set(_DICT_FIELDS) | {"requests", "input_requests"} == {f.name for f in fields(SessionMemory)}


def test_review_of_a_format_that_cannot_be_written_back_lints_nothing_and_says_so(tmp_path) -> None:
    """A fresh user's trip (stop 33): ``--review`` of a log canonicalize cannot write back (a
    mini-swe-agent trajectory) was refused with "use --to openai" although a review writes nothing.
    It now reviews, says nothing was linted and why, and names the whole command that writes a copy."""
    from tests.helpers import SAMPLES, existing

    log = tmp_path / "ds.traj.json"
    log.write_bytes(existing(SAMPLES / "mini_swe_agent_v1.1_deepseek_reasoner_pvlib-1606.traj.json").read_bytes())
    res = CliRunner().invoke(app, ["canonicalize", str(log), "--review"], env={"COLUMNS": "400"})
    assert res.exit_code == 0, res.output
    text = " ".join(res.output.split())
    assert "reusable after: canonicalize 12,324 of 17,347 (71.0%); not linted: mini-swe-agent logs cannot be " \
           "written back" in text, text
    assert f"prefixcache canonicalize {log} --to openai --out FILE.jsonl" in text
    assert "add --apply --to openai --out FILE.jsonl" in text and "lint of the written" not in text
    doc = json.loads(CliRunner().invoke(app, ["canonicalize", str(log), "--review", "--json"]).stdout)
    assert doc["verified_by"] == "none" and doc["written"] == 0
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ds.traj.json"]
    # writing still needs --to openai, and the error says to add it
    res = CliRunner().invoke(app, ["canonicalize", str(log), "--review", "--apply", "--out", str(tmp_path / "o.jsonl")])
    assert res.exit_code == 2 and "add --to openai" in res.output


def test_review_names_the_lint_of_the_unwritten_log(tmp_path) -> None:
    """``--review`` lints the log as it would be written and says that nothing was written (it said
    "lint of the written log")."""
    log = str(write(tmp_path / "memory.jsonl", memory_block()))
    text = " ".join(CliRunner().invoke(app, ["canonicalize", log, "--review"], env={"COLUMNS": "400"}).output.split())
    assert "; lint of the log as it would be written (nothing written) " in text and "lint of the written log" not in text
    doc = json.loads(CliRunner().invoke(app, ["canonicalize", log, "--review", "--json"]).output)
    assert doc["verified_by"] == "unwritten" and doc["agrees"] is True
    out = tmp_path / "canon.jsonl"
    doc = json.loads(CliRunner().invoke(app, ["canonicalize", log, "--out", str(out), "--json"]).output)
    assert doc["verified_by"] == "written"
