"""Every synthetic case in shared/cases with expected.json: cause, request and location."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from prefixcache.analyzer.ingest import Ingest
from prefixcache.analyzer.lint.engine import Linter
from prefixcache.analyzer.prepare import prepare
from prefixcache.analyzer.lint.rules import REGISTRY
from tests.helpers import CASES

#: Findings about one request alone (risks, template/provider notes), not breaks.
SINGLE = {code for code, rule in REGISTRY.items() if rule.scope == "request"}
EXPECTED = json.loads((CASES / "expected.json").read_text()) if (CASES / "expected.json").exists() else {}


def lint_file(path: Path):
    """(requests by 0-based line, results) for one case file."""
    preps = list(prepare(Ingest([str(path)])))
    linter = Linter()
    results = list(linter.run(preps))
    return {p.request.provenance.record - 1: p.request for p in preps}, results, linter


def where_matches(where: str, finding, request) -> bool:
    """Does a finding sit at the case's "where" (e.g. ``system, first line``,
    ``tools[run_shell].parameters.properties``, ``messages[2].tool_calls[0].function.arguments``)?"""
    head = where.split(",")[0].split(" ")[0]
    if head == "system":
        ok = finding.segment == "system"
        return ok and (finding.line == 1 if "first line" in where else True)
    if head == "tools":
        return finding.segment.startswith("tools")
    m = re.match(r"tools\[([A-Za-z_]\w*)\](.*)", head)
    if m:
        idx = [t.name for t in request.tools].index(m.group(1))
        rest = m.group(2)
        return finding.segment == f"tools[{idx}]" and finding.json_path.startswith(f"tools[{idx}]") and (
            not rest or finding.json_path.endswith(rest) or finding.json_path.endswith(".function" + rest))
    if head.startswith("messages["):
        return finding.json_path == head or finding.json_path.startswith(head + ".")
    raise AssertionError(f"unknown where {where!r}")


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_case(name, cases):
    exp = EXPECTED[name]
    requests, results, linter = lint_file(cases / name)
    assert len(results) == exp["requests"]
    assert len(linter.sessions) == exp.get("sessions", 1)
    breaks = [(f.record - 1, f) for r in results for f in r.findings if f.code not in SINGLE]
    cross = [(line, f) for line, f in breaks if f.code == "PC602"]
    within = [(line, f) for line, f in breaks if f.code != "PC602"]
    for b in exp["breaks"]:
        hits = [f for line, f in within if line == b["request"] and f.name == b["cause"]]
        assert hits, f"{name}: no {b['cause']} at request {b['request']}: {[(i, f.name) for i, f in within]}"
        assert any(where_matches(b["where"], f, requests[b["request"]]) for f in hits), \
            f"{name}: {b['cause']} at {[(f.segment, f.json_path, f.line) for f in hits]}, expected {b['where']}"
    assert sorted(line for line, _ in within) == sorted(b["request"] for b in exp["breaks"])
    if "cross_session" in exp:
        cs = exp["cross_session"]
        assert cross, f"{name}: no cross-session finding"
        for line, f in cross:
            assert REGISTRY[f.related].name == cs["cause"]
            assert where_matches(cs["where"], f, requests[line])
    else:
        assert cross == []
    for r in results:  # the waterfall adds up for every request
        assert r.reusable_tokens + r.lost_tokens + r.new_tokens == r.prompt_tokens


def test_clean_append_only_reuses_the_whole_previous_prompt(cases):
    _, results, linter = lint_file(cases / "clean_append_only.jsonl")
    assert all(r.findings == () for r in results)
    for prev, cur in zip(results, results[1:]):
        assert cur.reusable_tokens == prev.prompt_tokens and cur.shared_with == (prev.session, prev.index)
        assert cur.lost_tokens == 0
    assert linter.total.lost_tokens == 0


def test_rolling_cache_control_marker_is_not_drift(cases):
    _, results, _ = lint_file(cases / "anthropic_rolling_breakpoint.jsonl")
    assert [f for r in results for f in r.findings] == []


def test_timestamp_losses_are_attributed_to_pc101(cases):
    _, results, linter = lint_file(cases / "timestamp_in_system.jsonl")
    # Every later request re-prefills what the previous one had computed after the clock.
    for prev, cur in zip(results, results[1:]):
        assert cur.lost_code == "PC101"
        assert cur.lost_tokens == prev.prompt_tokens - cur.reusable_tokens
        assert cur.findings[0].lost_tokens == cur.lost_tokens
    assert set(linter.total.lost_tokens_by_code) == {"PC101"}
    assert linter.total.reusable_tokens < linter.total.prompt_tokens * 0.35
    # the single-request warning is reported once per session, not on every request
    assert [(f.code, f.request, f.line) for r in results for f in r.findings if f.code == "PC103"] == [("PC103", 0, 1)]


def test_return_to_original_schema_order_still_loses_the_last_turn(cases):
    """Request 5 shares most with request 3 (same key order) but the tokens request 4
    computed are lost: attributed to PC203, not counted as new."""
    _, results, _ = lint_file(cases / "schema_property_order.jsonl")
    r3, r4, r5 = results[3], results[4], results[5]
    assert r5.shared_with == (r3.session, r3.index) and r5.compared_with == (r4.session, r4.index)
    assert r5.reusable_tokens == r3.prompt_tokens
    assert r5.lost_code == "PC203" and r5.lost_tokens == r4.prompt_tokens - r3.prompt_tokens
