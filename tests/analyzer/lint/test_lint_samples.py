"""Lint on every real sample in shared/samples: sensible findings, figures that add up."""

from __future__ import annotations

import re
from functools import lru_cache

import pytest

from prefixcache.analyzer.ingest import Ingest
from prefixcache.analyzer.lint.document import waterfall_figures
from prefixcache.analyzer.lint.engine import Linter
from prefixcache.analyzer.prepare import prepare
from tests.helpers import SAMPLES, existing

SWE = "swe_agent_traj_function_calling_with_per_step_messages_marshmallow-1867.traj"
CLAUDE = "claude_code_session_v1.0.98_fe5e1c67.jsonl"


@lru_cache(maxsize=None)
def lint(name: str):
    """(results, linter) for one sample, linted once per test session."""
    path = existing(SAMPLES / name)
    linter = Linter()
    results = list(linter.run(prepare(Ingest([str(path)]))))
    for r in results:
        if r.usage_only:
            continue
        assert r.reusable_tokens + r.lost_tokens + r.new_tokens == r.prompt_tokens
        assert 0 <= r.reusable_block_tokens <= r.reusable_tokens
    return results, linter


def codes(results) -> list[str]:
    return [f.code for r in results for f in r.findings]


def test_swe_agent_elided_observations_are_history_rewrites():
    """From trajectory[5] on, each step elides one more old observation
    (messages[3], [5], [7], ...): one PC404 per request, at that message."""
    results, linter = lint(SWE)
    found = [(f.json_path, f) for r in results for f in r.findings]
    assert [f.code for _, f in found] == ["PC404"] * 7
    for k, (path, f) in zip(range(5, 12), found):
        assert path == f"trajectory[{k}].messages[{2 * k - 7}].content", path
        assert f.segment == f"messages[{2 * k - 7}]" and "tool result" in f.message and "elided" in f.message
        assert f.lost_tokens > 0 and "Old environment output" in f.before[-25:] + f.after
    # before the history processor kicks in, every step extends the previous one
    first = results.index(next(r for r in results if r.findings))
    assert first == 6 and all(r.lost_tokens == 0 for r in results[:first])
    assert set(linter.total.lost_tokens_by_code) == {"PC404"} and linter.total.lost_tokens > 10_000


def test_claude_code_sidechains_are_not_drift_of_the_main_thread():
    results, linter = lint(CLAUDE)
    sessions = set(linter.sessions)
    main = [s for s in sessions if "/" not in s]
    side = [s for s in sessions if "/" in s]
    assert len(main) == 1 and len(side) >= 5
    breaks = [f for r in results for f in r.findings if f.lost_tokens or f.code.startswith(("PC0", "PC4", "PC1", "PC2", "PC3"))]
    assert breaks == [], [(f.session, f.request, f.code, f.message) for f in breaks]
    # a sidechain's first request shares nothing with the main thread (its hidden system
    # prompt and tools differ); later sidechains reuse the first one's hidden prefix,
    # as the log's cache_read_input_tokens show (11,381 tokens read on their first call)
    firsts = sorted((r for r in results if r.index == 0 and r.session in side), key=lambda r: r.session)
    assert all(r.lost_tokens == 0 for r in firsts)
    assert firsts[0].shared_with is None
    for r in firsts[1:]:
        assert r.shared_with is not None and "/sidechain-" in r.shared_with[0]
        assert r.reusable_tokens > 10_000
    assert linter.total.reusable_fraction > 0.9


def test_mini_swe_agent_deepseek_reasoner_keeps_reasoning_in_thinking_mode():
    """The DeepSeek-V3.2 encoding (thinking mode) re-sends the reasoning of the current turn:
    nothing is dropped, nothing is lost (the V3.1-style template dropped it: PC503)."""
    results, _ = lint("mini_swe_agent_v1.1_deepseek_reasoner_pvlib-1606.traj.json")
    assert [f.code for r in results for f in r.findings] == []
    assert all(r.lost_tokens == 0 for r in results)


def test_mini_swe_agent_legacy_is_append_only():
    results, linter = lint("mini_swe_agent_legacy_list_github_issue.traj.json")
    assert codes(results) == [] and len(results) == 10
    for prev, cur in zip(results, results[1:]):
        assert cur.reusable_tokens == prev.prompt_tokens


def test_codex_rollout_encrypted_reasoning_is_an_info_note():
    """No template can render encrypted reasoning: PC503 says so at info severity
    (below the default --fail-on warning), with a note instead of a template fix."""
    results, _ = lint("codex_rollout_synthetic_fixture_claude-code-log.jsonl")
    found = [f for r in results for f in r.findings]
    assert [f.code for f in found] == ["PC503"]
    f = found[0]
    assert f.severity == "info" and re.search(r"encrypted|redacted", f.message) and "undercounted" in f.message
    assert f.fix.startswith("Nothing to fix") and f.file_line == 8


def test_openhands_usage_only_requests_are_reported_not_analysed():
    """OpenHands trajectories keep the provider's counts, not the prompts: no content
    figures (None), no findings, the reported prompt/cached tokens kept apart."""
    results, linter = lint("openhands_trajectory_events_basic_gui_mode.json")
    assert len(results) == 4 and codes(results) == []
    assert all(r.usage_only and r.prompt_tokens is None and r.reusable_tokens is None for r in results)
    assert [r.reported_prompt_tokens for r in results] == [3439, 3601, 4769, 5488]
    assert [r.reported_cached_tokens for r in results] == [0, 3435, 3595, 4763]
    t = linter.total
    assert (t.requests, t.content_requests, t.prompt_tokens, t.reusable_tokens) == (4, 0, 0, 0)
    assert (t.usage_only_requests, t.usage_only_prompt_tokens, t.usage_only_cached_tokens) == (4, 17_297, 11_793)
    assert t.usage_only_cached_fraction == pytest.approx(11_793 / 17_297)
    figures = waterfall_figures(t)
    assert figures.reusable_fraction is None and figures.usage_only.requests == 4


def test_usage_only_requests_do_not_distort_content_fractions():
    """Linting a usage-only log next to a logged one leaves the content figures as
    they are for the logged one alone."""
    alone, linter_alone = lint("mini_swe_agent_legacy_list_github_issue.traj.json")
    paths = [str(existing(SAMPLES / n)) for n in ("openhands_trajectory_events_basic_gui_mode.json",
                                              "mini_swe_agent_legacy_list_github_issue.traj.json")]
    linter = Linter()
    list(linter.run(prepare(Ingest(paths))))
    a, b = linter_alone.total, linter.total
    assert (b.prompt_tokens, b.reusable_tokens, b.new_tokens) == (a.prompt_tokens, a.reusable_tokens, a.new_tokens)
    assert b.reusable_fraction == a.reusable_fraction and b.requests == a.requests + 4


@pytest.mark.parametrize("name,fraction", [
    ("kvcache_tester_claudecode_hashids64_trace_0001.json", 0.93),
    ("mooncake_kvtrace_synthetic_trace.jsonl", 0.65),
])
def test_block_traces_get_reuse_by_block(name, fraction):
    """Reuse by block; every request that does not extend its predecessor is a PC002 with the
    tokens it lost (issue 11: no false all-clear on traces)."""
    results, linter = lint(name)
    assert set(codes(results)) == {"PC002"}
    assert linter.total.reusable_fraction == pytest.approx(fraction, abs=0.005)
    assert all(any(f.code == "PC002" for f in r.findings) for r in results if r.lost_tokens)
    assert linter.total.lost_tokens_by_code["PC002"] == {"kvcache": 130_994, "mooncake": 343_354}[name.split("_")[0]]
