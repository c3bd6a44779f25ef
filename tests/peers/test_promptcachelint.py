"""Our lint and Anthropic cache model against the peer promptcachelint's own test cases
(:mod:`tests.peers.promptcachelint`, rebuilt at test time as Anthropic request/response logs): the
request-side checks agree with its expectations where it is right, and differ where it is not
(docs/methods/peers.md, "promptcachelint")."""

from __future__ import annotations

import pytest

from prefixcache.analyzer.ingest import Ingest
from prefixcache.analyzer.lint.engine import Linter
from prefixcache.analyzer.prepare import prepare
from tests.peers.promptcachelint import CASES, SCOPE_CASES, PeerCase, turn
from tests.test_doc_figures import run_json

#: The peer's codes and ours for the same request-side misconfiguration.
PEER_TO_OURS = {"CL010": "PC603", "CL011": "PC601", "CL013": "PC604", "CL004": "PC605", "CL007": "PC606",
                "CL014": "PC607"}


def lint_codes(case: PeerCase, tmp_path) -> list[tuple[str, int]]:
    log = case.write(tmp_path / f"{case.name}.jsonl")
    results = Linter().run(list(prepare(Ingest([str(log)]))))
    return [(f.code, f.record) for r in results for f in r.findings]


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_lint_matches_the_peer_where_it_is_right(case, tmp_path):
    found = lint_codes(case, tmp_path)
    codes = {code for code, _ in found}
    assert set(case.ours) <= codes, (case.name, found)
    assert not codes & set(case.absent), (case.name, found)
    if case.agree:  # the same diagnosis under our code, and nothing else from the provider group
        assert {PEER_TO_OURS[c] for c in case.peer if c in PEER_TO_OURS} == {c for c in codes if c.startswith("PC6")}
    else:
        assert {PEER_TO_OURS.get(c) for c in case.peer} != {c for c in codes if c.startswith("PC6")}


def test_each_finding_is_on_the_request_the_peer_names(tmp_path):
    # the peer reports a moved mark, a lookback miss and a write never read on the second request
    for name in ("breakpoint-moved-back", "lookback-exceeded", "write-without-read", "no-breakpoint"):
        case = next(c for c in CASES if c.name == name)
        assert [rec for code, rec in lint_codes(case, tmp_path) if code.startswith("PC6")] == [2], name


def _run(case: PeerCase, tmp_path) -> dict:
    return run_json(["simulate", str(case.write(tmp_path / f"{case.name}.jsonl")), "--cache", "anthropic",
                     "--per-request"])


def _predicted(case: PeerCase, tmp_path) -> list[int]:
    return [r["cached_tokens"] for r in _run(case, tmp_path)["requests"]]


def _case(name: str) -> PeerCase:
    return next(c for c in (*CASES, *SCOPE_CASES) if c.name == name)


def test_no_read_is_predicted_across_a_model_switch(tmp_path):
    """The peer's CL003 (model): caches are per model. Its cross-model case (claude-opus-5 then
    claude-sonnet-5, the same marked system prompt, both calls reporting 1,700 written and 0 read):
    we predict no read, and the call is exact; a conversation switched to another model reads nothing."""
    doc = _run(_case("model-switch"), tmp_path)
    assert [r["cached_tokens"] for r in doc["requests"]] == [0, 0]
    assert [(c["expected_cached_tokens"], c["reported_cached_tokens"]) for c in doc["calls"]] == [(0, 0), (0, 0)]
    assert _predicted(_case("model-switch-conversation"), tmp_path) == [0, 0]


def test_a_thinking_switch_keeps_only_the_system_entry(tmp_path):
    """The peer's CL003 (thinking): a thinking change invalidates the message entries, not tools and
    system: the second call reads the marked system prompt, not the conversation entry."""
    case = _case("thinking-switch")
    switched = _predicted(case, tmp_path)
    same = PeerCase("same-thinking", case.test, [case.records[0], (turn(1), 2, None)], (), ())
    kept = _predicted(same, tmp_path)
    assert switched[0] == kept[0] == 0
    assert 1000 < switched[1] < kept[1]


def test_in_thread_band_on_the_peers_clean_conversation(tmp_path):
    """The peer's clean conversation (its usage: 1,600 written, then 1,600 and 1,620 read): the in-thread
    rule holds every reported read exactly."""
    calls = _run(_case("clean-conversation"), tmp_path)["calls"]
    assert [(c["rule"], c["expected_cached_tokens"], c["reported_cached_tokens"]) for c in calls[1:]] == [
        ("in-thread", 1600, 1600), ("in-thread", 1620, 1620)]


def test_no_breakpoint_means_no_write_and_no_read(tmp_path):
    """The issue's complaint: a request without cache_control (and without automatic caching) is
    predicted to read nothing and to write nothing, though its prefix repeats (before: 1,208 read)."""
    doc = _run(_case("no-breakpoint"), tmp_path)
    assert [r["cached_tokens"] for r in doc["requests"]] == [0, 0]
    assert [c["expected_cached_tokens"] for c in doc["calls"]] == [0, 0]
    assert doc["results"][0]["written_tokens"] == 0
