"""``lint --ttl``: a prefix idle past the TTL is lost to ``ttl``, its own row, never a finding.

Built from real logs: the Claude Code sample with every line from the middle on 20 min later
(the simulate TTL test spaces it the same way), and the sliding-window (truncation) case with
logged times and one idle gap. Hand-checked figures: in the Claude Code session the main
session's request 3 (18,096 prompt tokens) extended request 2 (16,697 tokens) after 219.8 s;
spaced, it comes 1,419.8 s later, so its 16,697 reusable tokens go to ``ttl`` (new stays 1,399).
"""

from __future__ import annotations

import json
from pathlib import Path

import orjson
import pytest
from click.testing import CliRunner

from prefixcache.analyzer.errors import ConfigError
from prefixcache.analyzer.lint.config import LintConfig, from_mapping, parse_ttl
from prefixcache.analyzer.lint.engine import TTL
from prefixcache.analyzer.lint.run import lint_paths
from prefixcache.analyzer.lint.rules.provider import provider_ttl
from tests.helpers import CASES, SAMPLES, cli_app, existing, spaced_claude_session, validate

CLAUDE = SAMPLES / "claude_code_session_v1.0.98_fe5e1c67.jsonl"
MAIN = "fe5e1c67-53e7-4862-81ae-d0e013e3270b"


def _spaced(tmp_path: Path) -> Path:
    """The Claude Code sample with every line from the middle on 1,200 s later."""
    return spaced_claude_session(tmp_path, 1200.0)


def _timed_window(tmp_path: Path, gap_before: int) -> Path:
    """The sliding-window case (requests 4–6 drop the oldest turns: PC403) with logged times
    60 s apart and 1,000 s of idle time before request ``gap_before``."""
    out, t = [], 1_700_000_000
    for i, line in enumerate(existing(CASES / "sliding_window.jsonl").read_text().splitlines()):
        t += 1000 if i == gap_before else 60
        out.append(json.dumps({**json.loads(line), "timestamp": t}))
    path = tmp_path / f"window_gap{gap_before}.jsonl"
    path.write_text("\n".join(out) + "\n")
    return path


def _rows(run) -> dict[tuple[str, int], object]:
    return {(r.session, r.index): r for r in run.store.results()}


def test_calls_after_the_gap_lose_their_prefix_to_ttl(tmp_path) -> None:
    spaced = _spaced(tmp_path)
    base = lint_paths([str(existing(CLAUDE))], LintConfig())
    off = lint_paths([str(spaced)], LintConfig())
    on = lint_paths([str(spaced)], LintConfig(ttl="provider"))  # claude-sonnet-4: Anthropic, 300 s
    assert provider_ttl("claude-sonnet-4-20250514") == 300.0
    # without --ttl the spaced log's figures are today's
    assert [(r.reusable_tokens, r.new_tokens, r.lost_tokens, r.lost_code) for r in off.store.results()] == \
        [(r.reusable_tokens, r.new_tokens, r.lost_tokens, r.lost_code) for r in base.store.results()]
    assert off.total.ttl_tokens == 0 and TTL not in off.total.lost_tokens_by_code
    # the real session has no idle gap over 300 s: --ttl provider changes nothing there
    assert lint_paths([str(existing(CLAUDE))], LintConfig(ttl="provider")).total.lost_tokens_by_code == \
        base.total.lost_tokens_by_code
    before, after = _rows(off), _rows(on)
    moved = {k: r.ttl_tokens for k, r in after.items() if r.ttl_tokens}
    assert moved == {(MAIN, 3): 16_697}  # exactly the one call after the gap (subagents never straddle it)
    r, was = after[(MAIN, 3)], before[(MAIN, 3)]
    assert (was.prompt_tokens, was.reusable_tokens, was.new_tokens, was.lost_tokens) == (18_096, 16_697, 1_399, 0)
    assert (r.reusable_tokens, r.reusable_block_tokens, r.new_tokens, r.lost_tokens, r.lost_code) == (0, 0, 1_399, 16_697, None)
    assert r.findings == () and on.store.findings == 0  # idle time is not a prompt defect
    for k in before:
        if k != (MAIN, 3):
            assert (after[k].reusable_tokens, after[k].lost_tokens) == (before[k].reusable_tokens, before[k].lost_tokens)
    assert on.total.lost_tokens_by_code == {TTL: 16_697}
    assert on.total.reusable_tokens == off.total.reusable_tokens - 16_697 == 3_463_373
    assert on.total.prompt_tokens == on.total.reusable_tokens + on.total.lost_tokens + on.total.new_tokens
    assert on.sessions[MAIN].lost_tokens_by_code == {TTL: 16_697}
    # an explicit TTL applies to any model: 250 s also catches the 278.7 s gap before request 5
    short = _rows(lint_paths([str(existing(CLAUDE))], LintConfig(ttl=250.0)))
    assert {k: r.ttl_tokens for k, r in short.items() if r.ttl_tokens} == {(MAIN, 5): 18_340}


def test_truncation_after_a_gap_keeps_its_drift_cause(tmp_path) -> None:
    """Request 4 drops the oldest turns (PC403, 630 tokens after the break) and comes after 1,000 s idle:
    its 1,001 still-identical tokens go to ``ttl``, the 630 stay PC403; requests 5 and 6 are unchanged."""
    plain = lint_paths([str(existing(CASES / "sliding_window.jsonl"))], LintConfig(ttl=1.0))  # no logged times
    assert plain.total.ttl_tokens == 0 and plain.total.lost_tokens_by_code == {"PC403": 1_893}
    path = _timed_window(tmp_path, gap_before=4)
    off = lint_paths([str(path)], LintConfig())
    on = lint_paths([str(path)], LintConfig(ttl=300.0))
    assert off.total.lost_tokens_by_code == {"PC403": 1_893}
    rows = sorted(on.store.results(), key=lambda r: r.index)
    r4 = rows[4]
    assert (r4.prompt_tokens, r4.reusable_tokens, r4.new_tokens, r4.lost_tokens, r4.ttl_tokens, r4.lost_code) == \
        (1_631, 0, 0, 1_001 + 630, 1_001, "PC403")
    assert r4.findings[0].code == "PC403" and r4.findings[0].lost_tokens == 630
    assert [(r.reusable_tokens, r.lost_tokens, r.ttl_tokens) for r in rows[5:]] == [(1_001, 630, 0), (1_001, 633, 0)]
    assert on.total.lost_tokens_by_code == {"PC403": 1_893, TTL: 1_001}
    assert on.store.by_severity == off.store.by_severity  # the same findings, no new one
    # a gap before an append-only request: its whole reused prefix (request 2's 1,438 tokens) expires
    appended = sorted(lint_paths([str(_timed_window(tmp_path, 3))], LintConfig(ttl=300.0)).store.results(),
                      key=lambda r: r.index)[3]
    assert (appended.reusable_tokens, appended.ttl_tokens, appended.new_tokens, appended.lost_code) == (0, 1_438, 207, None)
    # the divergence histogram counts the break at its token (1,001), not at the expired 0
    assert [b.requests for b in on.divergence] == [b.requests for b in off.divergence]


def test_engine_models_get_no_provider_ttl_and_bad_values_exit_2(tmp_path) -> None:
    assert provider_ttl("Qwen/Qwen2.5-7B-Instruct") is None and provider_ttl(None) is None
    assert provider_ttl("gpt-4.1") == 300.0 and provider_ttl("gpt-5.6") == 1800.0
    assert parse_ttl("provider") == "provider" and parse_ttl("300") == 300.0 and parse_ttl(0) == 0.0
    for bad in ("-1", "soon", True, float("nan")):
        with pytest.raises(ConfigError, match="ttl"):
            parse_ttl(bad)
    assert from_mapping({"ttl": 300}, "prefixcache.toml").ttl == 300.0
    res = CliRunner().invoke(cli_app(), ["lint", str(existing(CLAUDE)), "--ttl", "-5"])
    assert res.exit_code == 2 and "--ttl: must be seconds >= 0" in res.output


def test_cli_shows_ttl_as_its_own_row_and_keeps_the_exit_code(tmp_path) -> None:
    spaced = str(_spaced(tmp_path))
    runner = CliRunner()
    rich = runner.invoke(cli_app(), ["lint", spaced, "--ttl", "provider"], env={"COLUMNS": "200"})
    assert rich.exit_code == 0, rich.output
    assert "lost · ttl idle gap past the TTL" in rich.stdout and "16,697 prompt tokens lost to ttl" in rich.stdout
    doc = orjson.loads(runner.invoke(cli_app(), ["lint", spaced, "--ttl", "provider", "--json"]).stdout)
    validate(doc, "lint")
    assert doc["summary"]["lost_tokens_by_code"] == {"ttl": 16_697} and doc["summary"]["findings"] == 0
    assert [(r["index"], r["ttl_tokens"]) for r in doc["requests"] if r["ttl_tokens"]] == [(3, 16_697)]
    # --fail-under judges prompt defects: the expired prefix still counts as reusable
    for ttl in ([], ["--ttl", "provider"]):
        assert runner.invoke(cli_app(), ["lint", spaced, "--format", "text", "--fail-under", "96.5%", *ttl]).exit_code == 0
        assert runner.invoke(cli_app(), ["lint", spaced, "--format", "text", "--fail-under", "97%", *ttl]).exit_code == 1
