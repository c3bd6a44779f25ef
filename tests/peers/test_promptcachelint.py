"""Our lint and Anthropic cache model against the peer promptcachelint's own test cases
(:mod:`tests.peers.promptcachelint`, rebuilt at test time as Anthropic request/response logs): the
request-side checks agree with its expectations where it is right, and differ where it is not
(docs/methods/peers.md, "promptcachelint")."""

from __future__ import annotations

import pytest

from prefixcache.analyzer.ingest import Ingest
from prefixcache.analyzer.lint.engine import Linter
from prefixcache.analyzer.prepare import prepare
from tests.peers.promptcachelint import CASES, SCOPE_CASES, PeerCase
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


def _calls(case: PeerCase, tmp_path) -> list[dict]:
    return run_json(["simulate", str(case.write(tmp_path / f"{case.name}.jsonl")), "--cache", "anthropic"])["calls"]


def test_no_read_is_predicted_across_a_model_switch(tmp_path):
    """The peer's CL003 (model): caches are per model, so the second call (claude-sonnet-5 after
    claude-opus-5, same prefix) reads nothing, and the band says so."""
    first, second = _calls(next(c for c in SCOPE_CASES if c.name == "model-switch"), tmp_path)
    assert first["predicted_cached_tokens"] == 0
    assert (second["predicted_cached_tokens"], second["expected_cached_tokens"], second["rule"]) == (0, 0, "simulated")


def test_a_thinking_switch_keeps_only_the_system_entry(tmp_path):
    """The peer's CL003 (thinking): a thinking change invalidates the message entries, not tools and
    system: the second call reads the marked system prompt, not the conversation entry, and the
    in-thread rule (which would count the whole previous prefix) does not apply."""
    case = next(c for c in SCOPE_CASES if c.name == "thinking-switch")
    _, second = _calls(case, tmp_path)
    assert second["rule"] == "simulated"
    assert 0 < second["predicted_cached_tokens"] < second["prompt_tokens"] - 5
    same = PeerCase("same-thinking", case.test, [case.records[0], (case.records[1][0] | {"thinking": None}, 2,
                                                                   case.records[1][2])], (), ())
    _, kept = _calls(same, tmp_path)
    assert kept["rule"] == "in-thread" and kept["predicted_cached_tokens"] > second["predicted_cached_tokens"]


def test_no_breakpoint_means_no_write_and_no_read(tmp_path):
    """The issue's complaint: a request without cache_control (and without automatic caching) is
    predicted to read nothing and to write nothing, though its prefix repeats."""
    case = next(c for c in CASES if c.name == "no-breakpoint")
    doc = run_json(["simulate", str(case.write(tmp_path / "nb.jsonl")), "--cache", "anthropic"])
    assert [c["predicted_cached_tokens"] for c in doc["calls"]] == [0, 0]
    assert [c["expected_cached_tokens"] for c in doc["calls"]] == [0, 0]
