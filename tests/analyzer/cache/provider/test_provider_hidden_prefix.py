"""Hidden prefixes at breakpoints (issue 10 item 2, last part): a thread's first call that reads only the
shared hidden prefix (Claude Code's unlogged system prompt and tools) is sized only from an earlier call
that read exactly that prefix and whose response had landed before it was sent — never from its own
usage; without such a call it gets the band [0, simulated] and says so (``rule``)."""

from __future__ import annotations

from prefixcache.analyzer.cache.provider.caches import Breakpoint
from prefixcache.analyzer.cache.provider.rules import rules_for
from prefixcache.analyzer.cache.simulate.bands import RULES, bands, hidden_end
from prefixcache.analyzer.cache.workload import SimRequest
from prefixcache.analyzer.tokenize.session import pseudo_ids
from tests.helpers import SAMPLES, existing
from tests.test_doc_figures import run_json

CLAUDE = SAMPLES / "claude_code_session_v1.0.98_fe5e1c67.jsonl"
HIDDEN = tuple(pseudo_ids("claude-code:sidechain", 1000))
ANTHROPIC = rules_for("anthropic", "claude-sonnet-4-20250514")


def _first_call(order: int, session: str, sent: float, now: float, read: int, body: int = 50) -> SimRequest:
    """A thread's first call: 1,000 hidden pseudo-tokens, then ``body`` message tokens (our
    tokens); the provider counts 1,300 + body (300 tokens of unlogged first-turn content)."""
    tokens = HIDDEN + tuple(range(order * 100, order * 100 + body))
    n = len(tokens)
    prompt = 1300 + body
    return SimRequest(order, session, 0, "log", order, "claude-sonnet-4", now, n, tokens=tokens,
                      boundaries=(1000, n), breakpoints=(Breakpoint(1000), Breakpoint(n)),
                      reported_prompt=prompt, reported_cached=read, reported_write=prompt - read - 3, sent=sent)


def test_hidden_end_is_the_leading_pseudo_tokens():
    r = _first_call(1, "a", 0.0, 1.0, 0)
    assert hidden_end(r) == 1000
    assert hidden_end(SimRequest(0, "s", 0, "log", 0, None, 0.0, 3, tokens=(1, 2, 3), boundaries=(3,))) == 0


def test_unsized_then_measured_by_an_earlier_landed_read():
    reqs = [
        _first_call(0, "a", sent=0.0, now=2.0, read=0),        # writes the hidden prefix
        _first_call(1, "b", sent=10.0, now=12.0, read=1010),   # reads it: nothing measured before → band
        _first_call(2, "c", sent=11.0, now=13.0, read=1010),   # sent before b's answer landed → band
        _first_call(3, "d", sent=20.0, now=22.0, read=1010),   # b's read landed at 12 → measured, exact
    ]
    sim = [0, 1040, 1040, 1040]   # calibrated: the size taken from a's usage, first-turn content included
    raw = [0, 1000, 1000, 1000]   # our simulation reads exactly the hidden prefix
    got = bands(reqs, sim, ANTHROPIC, raw)
    assert [b.rule for b in got] == ["simulated", "hidden-prefix-unsized", "hidden-prefix-unsized",
                                     "hidden-prefix-measured"]
    assert [(b.lagged, b.expected) for b in got] == [(0, 0), (0, 1040), (0, 1040), (1010, 1010)]
    assert all(b.lagged <= r.reported_cached <= b.expected for b, r in zip(got, reqs))
    assert {b.rule for b in got} <= set(RULES)


def test_own_usage_never_sizes_the_call():
    reqs = [_first_call(0, "a", 0.0, 2.0, 0), _first_call(1, "b", 10.0, 12.0, 1010)]
    got = bands(reqs, [0, 1040], ANTHROPIC, [0, 1000])
    assert (got[1].rule, got[1].expected) == ("hidden-prefix-unsized", 1040)


def test_without_send_times_arrival_order_decides_and_automatic_caches_are_left_alone():
    reqs = [_first_call(i, s, None, float(i), r) for i, (s, r) in enumerate((("a", 0), ("b", 1010), ("c", 1010)))]
    got = bands(reqs, [0, 1040, 1040], ANTHROPIC, [0, 1000, 1000])
    assert [b.rule for b in got] == ["simulated", "hidden-prefix-unsized", "hidden-prefix-measured"]
    auto = bands(reqs, [0, 1040, 1040], rules_for("deepseek", "deepseek-chat"), [0, 1000, 1000])
    assert [b.rule for b in auto] == ["simulated"] * 3


def test_claude_code_later_subagents_get_a_band_that_holds_their_read():
    """Subagents 4 and 5 read the shared system+tools prefix (11,381 tokens) on their first call; the
    size from the first subagent's usage (11,667 of our tokens) absorbs ~290 tokens of first-turn content,
    and no earlier call read exactly that prefix (4 and 5 were sent in the same millisecond)."""
    doc = run_json(["simulate", str(existing(CLAUDE)), "--cache", "anthropic"])
    a = doc["agreement"]
    assert (a["expected_exact"], a["expected_within_tolerance"], a["inside_band"]) == (167, 167, 169)
    assert (a["in_thread_calls"], a["in_thread_exact"]) == (164, 164)
    first = {c["session"].rsplit("/", 1)[-1]: c for c in doc["calls"] if c["rule"] != "in-thread"}
    later = [first[f"sidechain-{i}"] for i in (4, 5)]
    assert [c["rule"] for c in later] == ["hidden-prefix-unsized"] * 2
    assert [(c["lagged_cached_tokens"], c["reported_cached_tokens"]) for c in later] == [(0, 11381), (0, 11381)]
    assert all(c["inside_band"] and 280 <= c["expected_cached_tokens"] - 11381 <= 300 for c in later)
    assert [first[f"sidechain-{i}"]["rule"] for i in (1, 2, 3)] == ["simulated"] * 3


def test_provider_rules_page_shows_the_unsized_rows():
    """docs/methods/provider-rules.md "Hidden prefixes at breakpoints": the real lines (COLUMNS=120)."""
    from tests.test_doc_figures import assert_shows, documented, run

    argv = ["simulate", "tests/fixtures/samples/claude_code_session_v1.0.98_fe5e1c67.jsonl", "--cache", "anthropic"]
    code, out, _ = run(argv, columns=120)
    assert code == 0
    assert_shows(out, documented("docs/methods/provider-rules.md", "$ prefixcache " + " ".join(argv)))


def test_measured_rows_are_marked_and_explained_in_the_text(tmp_path):
    """Fresh-user trial: with subagent 5 sent after subagent 4's answer landed (00:56:40.957), record 296
    becomes ``hidden-prefix-measured`` (exact: 11,381); the text marks it ``m`` and says where its size
    comes from, as ``?`` rows are explained."""
    import json

    lines = CLAUDE.read_text().splitlines()
    rec = json.loads(lines[294])  # line 295: subagent 5's first user line, the call's send time
    rec["timestamp"] = "2025-09-03T00:56:41.000Z"
    lines[294] = json.dumps(rec)
    moved = tmp_path / "claude_moved.jsonl"
    moved.write_text("\n".join(lines) + "\n")
    doc = run_json(["simulate", str(moved), "--cache", "anthropic"])
    row = next(c for c in doc["calls"] if c["record"] == 296)
    assert row["rule"] == "hidden-prefix-measured" and row["expected_cached_tokens"] == row["reported_cached_tokens"] == 11381
    assert doc["agreement"]["expected_exact"] == 168
    from tests.test_doc_figures import run

    code, out, _ = run(["simulate", str(moved), "--cache", "anthropic"], columns=400)
    assert code == 0 and "11,381 m" in out
    assert "record 296 (m): reads only the hidden prefix, sized by an earlier call's read of it" in out
