"""The prompt-size check on real samples: is the analysed prompt the billed one, within 2%?"""

from __future__ import annotations

import json

from click.testing import CliRunner

from prefixcache.analyzer.ingest import Ingest
from prefixcache.analyzer.prepare import prepare
from prefixcache.analyzer.prepare.size_check import SizeCheck, SizeRow
from tests.helpers import FIXTURES, SAMPLES, cli_app, existing

OTEL = FIXTURES / "formats" / "samples" / "otel_genai_session_a" / "otel_openllmetry_session_a.jsonl"
CLAUDE = SAMPLES / "claude_code_session_v1.0.98_fe5e1c67.jsonl"
DEEPSEEK = SAMPLES / "mini_swe_agent_v1.1_deepseek_reasoner_pvlib-1606.traj.json"


def _check(path) -> SizeCheck:
    return SizeCheck().add_all(prepare(Ingest([str(existing(path))])))


def test_exact_pipelines_are_the_billed_prompt() -> None:
    """llama.cpp (SmolLM2, smollm pre-tokenizer) and the DeepSeek API (V3.2 encoding): every call within 2%."""
    for path, calls in ((OTEL, 7), (DEEPSEEK, 4)):
        s = _check(path)
        assert (s.calls, s.within, s.warnings()) == (calls, calls, [])


def test_claude_code_with_a_stand_in_tokenizer_says_how_far_it_is() -> None:
    """cl100k stands in for Claude's unpublished tokenizer: 47 of 170 calls within 2%; every session off
    is named with its band, and the hidden prefix the first call sized."""
    s = _check(CLAUDE)
    assert (s.calls, s.within) == (170, 47)
    main = s.sessions["fe5e1c67-53e7-4862-81ae-d0e013e3270b"]
    assert (len(main.rows), main.within, main.hidden) == (9, 7, 15262)
    assert main.rows[0].delta == 0  # the first call sizes the hidden prefix: equal by construction
    lines = s.warnings()
    assert len(lines) == 6 and all("(approximate)" in line for line in lines)
    assert "7 of 9 call(s); ours − billed -2.6% to +0.0%, median -1.3%" in lines[0]


def test_encrypted_reasoning_counts_toward_ours() -> None:
    row = SizeRow(ours=9_800, reasoning=150, billed=10_000, hidden=4_000)
    assert row.delta == -50 and row.within
    assert not SizeRow(ours=9_800, reasoning=0, billed=10_100, hidden=0).within


def test_lint_and_simulate_carry_the_warnings() -> None:
    for args in (["lint", str(CLAUDE), "--format", "json"], ["simulate", str(CLAUDE), "--json", "--cache", "anthropic"]):
        result = CliRunner().invoke(cli_app(), args)
        assert result.exit_code in (0, 1), result.output
        doc = json.loads(result.stdout)
        assert sum("our prompt counts (approximate) are within 2%" in w for w in doc["warnings"]) == 6
