"""The prompt-size check on a real Codex rollout (codemie-ai/codemie-code's gpt-5.5 session,
Apache-2.0: tests/fixtures/codex/SOURCES.md): every call's count within 2% of the billed
``input_tokens`` once the hidden prefix (tools), the encrypted reasoning of the current user
turn and the web-search results are counted, in the harmony framing."""

from pathlib import Path

from prefixcache.analyzer.ingest import Ingest
from prefixcache.analyzer.prepare.prepared import Preparer
from prefixcache.analyzer.prepare.size_check import SizeCheck

ROLLOUT = Path(__file__).parents[2] / "fixtures" / "codex" / "codemie_gpt-5.5_rollout-2026-05-11T11-26-55-019e1625.jsonl.gz"


def test_every_call_of_a_real_rollout_is_within_two_percent_of_its_bill() -> None:
    ingest = Ingest([str(ROLLOUT)])
    reqs = list(ingest)
    prep = Preparer()
    check = SizeCheck()
    rows = [check.add(prep.prepare(r)) for r in reqs]
    assert ingest.summary.records == 386 and len(reqs) == 66 and None not in rows
    assert [r.billed for r in rows][:3] == [18703, 18911, 20292]  # usage written after each call's items
    assert reqs[0].model == "gpt-5.5" and "harmony" in prep.notes["gpt-5.5"]
    (s,) = check.sessions.values()
    assert s.hidden == rows[0].hidden and rows[0].delta == 0  # sized from call 0's usage (the tools)
    assert 7000 < s.hidden < 9000
    searched = [i for i, r in enumerate(rows) if r.sized]
    assert searched == [30, 34, 36]  # the calls that ran a web search, sized from their own bill
    assert all(r.server > 0 for r in rows[31:]) and rows[29].server == 0
    # reasoning of the current user turn only: turn 2's calls no longer carry turn 1's 62 tokens
    assert rows[1].reasoning == 62 and rows[-1].reasoning == 1570
    assert check.within == 66, [f"{r.delta / r.billed:+.2%}" for r in rows]
    assert max(abs(r.delta) / r.billed for r in rows) < 0.01
    # without the web-search results, calls from the first search on would be 4-11% short
    assert sum(abs(r.delta - r.server) <= 0.02 * r.billed for r in rows) == 30
