"""The report's bounds (analyzer/html/bounded.py) on documents shaped like ``lint --json``'s."""

from __future__ import annotations

from prefixcache.analyzer.html import bounded
from prefixcache.analyzer.html.bounded import bound_lint, bound_replay, bound_simulate


def _doc(sessions: int, per_session: int, findings: int) -> dict:
    requests = [{"session": f"s{s}", "index": i, "usage_only": False, "prompt_tokens": 100 * (i + 1),
                 "reusable_fraction": i / per_session} for s in range(sessions) for i in range(per_session + s % 3)]
    return {
        "summary": {"requests": len(requests)},
        "sessions": [{"session": f"s{s}", "requests": per_session + s % 3, "prompt_tokens": 10, "reusable_tokens": 4,
                      "new_tokens": 6, "lost_tokens": 1, "lost_tokens_by_code": {"PC101": 1}} for s in range(sessions)],
        "findings": [{"session": f"s{k % sessions}", "request": 1, "code": "PC101", "lost_tokens": k} for k in range(findings)],
        "requests": requests, "skipped": [], "tokenizers": {},
    }


def test_small_documents_are_left_as_they_are() -> None:
    doc = _doc(3, 10, 5)
    assert bound_lint(doc) is doc
    assert bound_simulate({"calls": [1, 2]}) == {"calls": [1, 2]}
    assert bound_replay([{"pass_name": "cold"}]) == ([{"pass_name": "cold"}], None)


def test_big_documents_keep_the_top_and_say_what_they_left_out() -> None:
    doc = _doc(300, 500, 1000)
    out = bound_lint(doc)
    note = out["report_bounded"]
    assert out["summary"] is doc["summary"]
    assert len(out["sessions"]) == bounded.MAX_SESSIONS + 1
    other = out["sessions"][-1]
    assert other["session"] == "(100 other sessions)" and other["lost_tokens_by_code"] == {"PC101": 100}
    assert other["requests"] == sum(s["requests"] for s in sorted(doc["sessions"], key=lambda s: -s["requests"])[200:])
    assert [f["lost_tokens"] for f in out["findings"]] == list(range(800, 1000))  # the most lost, in log order
    assert note["findings"] == {"total": 1000, "shown": 200, "how": note["findings"]["how"]}
    per_session: dict[str, int] = {}
    for r in out["requests"]:
        per_session[r["session"]] = per_session.get(r["session"], 0) + 1
    charted = [s for s, n in per_session.items() if n > 1]  # the others keep only their finding's row
    assert len(charted) == bounded.CHARTED_SESSIONS and all(int(s[1:]) % 3 == 2 for s in charted)  # the largest
    assert set(per_session.values()) == {1, bounded.MAX_ROWS_PER_SESSION + 1}  # the sample and the finding's row
    assert note["requests"]["total"] == len(doc["requests"]) and note["requests"]["shown"] == len(out["requests"])
    assert note["prompt_tokens"]["max"] == 100 * 502 and note["prompt_tokens"]["count"] == len(doc["requests"])


def test_samples_keep_first_and_last() -> None:
    rows = list(range(1000))
    kept = bounded._sample(rows, 10)
    assert kept[0] == 0 and kept[-1] == 999 and len(kept) == 10 and kept == sorted(kept)
    replay, note = bound_replay([{"pass_name": p, "i": i} for p in ("cold", "warm") for i in range(5000)])
    assert note["total"] == 10000 and len(replay) == note["shown"] == bounded.MAX_REPLAY_ROWS
