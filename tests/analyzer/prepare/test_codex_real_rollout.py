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
    # what the log does not carry as text is said, with its share of the bill (a fresh user's trip: every call
    # "within 2%" while simulate's prompts were 7.3% under the billed tokens)
    carried = sum(r.reasoning + r.server for r in rows)
    assert carried == sum(r.billed for r in rows) - sum(r.ours + r.images for r in rows) + sum(r.delta for r in rows)
    line = check.carried()
    assert line is not None and line in check.warnings()
    assert line.startswith(f"billed but not in the analysed prompts: {carried:,} tokens (7.4% of the 6,055,836 billed")
    assert "on 64 of 66 call(s)" in line and "394,452 of web-search results" in line


def test_one_median_for_the_size_check_and_simulates_provider_note() -> None:
    """Two calls: the size warning and the provider-call note name the same median (both statistics.median;
    the note took the lower middle value, -52.7% against the warning's -32.1%)."""
    import orjson
    from typer.testing import CliRunner

    from prefixcache.cli.app import app

    log = ROLLOUT.parent.parent / "images" / "pydantic_ai_gpt-5-mini_tool_returns_image.jsonl.gz"
    res = CliRunner().invoke(app, ["simulate", str(log), "--cache", "openai", "--json"])
    doc = orjson.loads(res.stdout)
    (warning,) = [w for w in doc["warnings"] if w.startswith("session ")]
    (note,) = [n for n in doc["analyses"]["provider_calls"]["notes"] if n.startswith("our rendered prompt")]
    assert "median -32.1%" in warning and "median -32.1%" in note



def _notes(items, reqs, options, sizes) -> list[str]:
    """simulate's provider-call notes over ``items`` given the size check's rows ``sizes``."""
    from prefixcache.analyzer.cache.simulate.study import simulate_report
    from prefixcache.analyzer.ingest import IngestSummary

    report = simulate_report(items, reqs, options, None, IngestSummary(1, 0, len(reqs), 1, []), {}, sizes=sizes)
    return report.analyses.provider_calls.notes


def test_simulates_provider_note_judges_each_call_as_the_size_check_does() -> None:
    """simulate's provider-call note and the prompt-size check are one comparison. Before, the note
    compared our tokens alone with the bill (no web-search results, no encrypted reasoning): 36 of
    66 calls off, median -5.1%, bands anchored on usage, while the check put all 66 within 1%."""
    import orjson

    from prefixcache.analyzer.cache.simulate.study import SimulateOptions
    from prefixcache.analyzer.html.content import ReportOptions
    from prefixcache.analyzer.lint import simulated
    from prefixcache.analyzer.lint.run import lint_paths

    options = SimulateOptions(cache="openai")
    split = orjson.loads(orjson.dumps(simulated.simulate([str(ROLLOUT)], options)))["analyses"]["provider_calls"]
    assert split["calls"] == 66 and split["band_anchor"] == "prompt"
    assert not any("not the billed one" in n for n in split["notes"]), split["notes"]
    # report's pass (lint feeding simulate) hands simulate the same rows
    tee = simulated.SimulatedTee(options)
    run = lint_paths([str(ROLLOUT)], ReportOptions().lint, tee=tee)
    assert orjson.loads(orjson.dumps(tee.report(run.ingest, run.notes)))["analyses"]["provider_calls"] == split
    # the rows are what turns the old verdict around: without them (a caller with no size check)
    # the plain comparison gives back the 36 calls and -5.1% this test exists for
    _, _, items, reqs, _, sizes, _ = simulated._read([str(ROLLOUT)], options, None)
    assert len(sizes.by_request) == 66 and sizes.within == 66
    plain = [n for n in _notes(items, reqs, options, None) if "not the billed one" in n]
    assert len(plain) == 1 and "on 36 of 66 calls" in plain[0] and "median -5.1%" in plain[0], plain
    assert not [n for n in _notes(items, reqs, options, sizes.by_request) if "not the billed one" in n]
