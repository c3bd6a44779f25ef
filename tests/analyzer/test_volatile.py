"""find_volatile on real strings from the shared cases and samples, plus the known traps."""

from __future__ import annotations

import json

import pytest

from prefixcache.analyzer.volatile import ID_KINDS, TIME_KINDS, VolatileSpan, find_volatile, rule_code
from tests.helpers import CASES, existing


def kinds(text: str) -> list[tuple[str, float | None, str]]:
    return [(s.kind, s.granularity_s, s.text) for s in find_volatile(text)]


def first_system(case: str, line: int) -> str:
    rec = json.loads((existing(CASES) / case).read_text().splitlines()[line])
    return rec["messages"][0]["content"]


def test_timestamp_case_system_prompt() -> None:
    text = first_system("timestamp_in_system.jsonl", 0)
    spans = find_volatile(text)
    assert [(s.kind, s.granularity_s, s.text) for s in spans] == [("timestamp", 1.0, "2026-03-02 10:31:02 UTC")]
    s = spans[0]
    assert text[s.start : s.end] == s.text and s.start == len("Current time: ")
    assert rule_code(s) == "PC101"


def test_session_id_case_system_prompt() -> None:
    spans = find_volatile(first_system("session_id_in_system.jsonl", 3))
    assert [(s.kind, s.text) for s in spans] == [("uuid", "0a9b8c7d-6e5f-4a3b-2c1d-0e9f8a7b6c5d")]
    assert spans[0].granularity_s is None and rule_code(spans[0]) == "PC102"


@pytest.mark.parametrize(
    "case", ["clean_append_only.jsonl", "tool_order_shuffle.jsonl", "whitespace_drift.jsonl", "sliding_window.jsonl"]
)
def test_clean_cases_have_no_volatile_values(case: str) -> None:
    """Rules lists, numbered items, versions (Python 3.11), paths and line ranges are not volatile."""
    for line in (existing(CASES) / case).read_text().splitlines():
        rec = json.loads(line)
        texts = [m.get("content") or "" for m in rec["messages"]]
        texts += [tc["function"]["arguments"] for m in rec["messages"] for tc in m.get("tool_calls") or []]
        texts += [json.dumps(rec["tools"])]
        for t in texts:
            assert find_volatile(t) == [], t[:200]


def test_granularities() -> None:
    assert kinds("at 2026-08-16T10:31:02.123Z") == [("timestamp", 0.001, "2026-08-16T10:31:02.123Z")]
    assert kinds("Date: 2026-03-02") == [("date", 86400.0, "2026-03-02")]
    assert kinds("Current time: 10:31") == [("time", 60.0, "10:31")]
    assert kinds("Monday, March 2, 2026 10:31 AM.") == [("timestamp", 60.0, "Monday, March 2, 2026 10:31 AM")]
    assert kinds("Mon, 02 Mar 2026 10:31:02 GMT") == [("timestamp", 1.0, "Mon, 02 Mar 2026 10:31:02 GMT")]
    assert kinds("t=1776075660.4332898") == [("epoch", 1e-07, "1776075660.4332898")]
    assert kinds("ts 1737433799123 ms") == [("epoch", 0.001, "1737433799123")]
    assert kinds("20260302T103102Z") == [("timestamp", 1.0, "20260302T103102Z")]


def test_ids_and_nonces() -> None:
    assert kinds("x-anthropic-billing-header: cc_version=1.0.98; cch=36ee5;") == [("nonce", None, "36ee5")]
    assert kinds("CONVERSATION_ID: 7f3a91bc") == [("request-id", None, "7f3a91bc")]
    assert kinds("req_011CSkZNXoe7c9qL33uwa7fX") == [("request-id", None, "req_011CSkZNXoe7c9qL33uwa7fX")]
    sha = "3739671ad08541e759230997bf0e50dcb8059d05ef4c64c23bbb9a37a0829f24"
    assert kinds(f"size=4522 sha256={sha}\n") == [("hex-id", None, sha)]


def test_no_false_positives() -> None:
    text = (
        "claude-code 1.0.98, model claude-sonnet-4-20250514, Python 3.11, see line 40 and fields.py:12:34; "
        "file is 345,136 B; aspect 16:9; decade facade added; 13/13/2026; session_id: string; 9514472699993348"
    )
    assert find_volatile(text) == []


def test_git_short_hashes_only_in_git_context() -> None:
    assert kinds("diff --git a/x b/x\nindex ad388c7..168a845 100644\n") == [
        ("hex-id", None, "ad388c7"),
        ("hex-id", None, "168a845"),
    ]
    assert kinds("ad388c7 Fix the parser\n168a845 (HEAD -> main) Merge") == [
        ("hex-id", None, "ad388c7"),
        ("hex-id", None, "168a845"),
    ]
    assert find_volatile("the value ad388c7 is odd") == []
    assert find_volatile("cafe123 and beef") == []  # a line-leading hash needs a git-log-like subject after it
    assert kinds("commit 1a2b3c4d") == [("hex-id", None, "1a2b3c4d")]


def test_real_samples_spans(samples) -> None:
    swe = (samples / "swe_agent_traj_function_calling_with_per_step_messages_marshmallow-1867.traj").read_text()
    traj = json.loads(swe)
    diff = next(
        m["content"] if isinstance(m["content"], str) else m["content"][0]["text"]
        for step in traj["trajectory"]
        for m in step.get("messages", [])
        if "index ad388c7..168a845" in (m["content"] if isinstance(m["content"], str) else json.dumps(m["content"]))
    )
    got = {(s.kind, s.text) for s in find_volatile(diff)}
    assert {("hex-id", "ad388c7"), ("hex-id", "168a845")} <= got
    pv = json.loads((samples / "mini_swe_agent_v1.1_deepseek_reasoner_pvlib-1606.traj.json").read_text())
    texts = [m["content"] for m in pv["messages"] if isinstance(m.get("content"), str)]
    found = [s for t in texts for s in find_volatile(t)]
    assert any(s.kind == "timestamp" and s.text == "2010-01-01 13:30:00+00:00" for s in found)
    assert all(s.kind in TIME_KINDS for s in found), [s for s in found if s.kind not in TIME_KINDS]


def test_spans_sorted_disjoint_and_consistent() -> None:
    text = "Session 7d3f5c8e-1b2a-4c6d-9e0f-a1b2c3d4e5f6 at 2026-03-02 10:31:02 UTC, cch=0aaa9; ts 1737433799"
    spans = find_volatile(text)
    assert [s.kind for s in spans] == ["uuid", "timestamp", "nonce", "epoch"]
    for a, b in zip(spans, spans[1:]):
        assert a.end <= b.start
    for s in spans:
        assert isinstance(s, VolatileSpan) and text[s.start : s.end] == s.text
        assert (s.granularity_s is None) == (s.kind in ID_KINDS)
