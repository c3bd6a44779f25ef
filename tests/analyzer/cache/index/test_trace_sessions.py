"""Trace sessions beyond the common head, on the real Mooncake conversation trace (block 0 is in every request).

The reference below is written independently of the library: it reads the whole file twice, knows the
common head from all of it (the leading blocks held by more than half of the requests), and looks at
every session, where the library streams and bounds its work.
"""

from __future__ import annotations

import gzip
import json
from collections import Counter

import orjson
from click.testing import CliRunner

from prefixcache.analyzer.cache.index.trace_sessions import TraceSessions
from tests.helpers import FIXTURES, cli_app, existing

CONV = FIXTURES / "traces" / "mooncake_conversation_trace_head6000.jsonl.gz"
B = 512  # Mooncake blocks, tokens


def _lcp(a: list[int], b: list[int]) -> int:
    k = 0
    while k < len(a) and k < len(b) and a[k] == b[k]:
        k += 1
    return k


def reference(rows: list[dict]) -> tuple[int, int]:
    """(sessions, drift tokens) with a whole-file common head: a request continues the session whose
    latest request shares the most blocks with it beyond the head, else it opens one (cold). Drift as
    simulate counts it: a continuing request that does not extend its predecessor loses what it shared
    with it beyond what any earlier request already holds (a changed partial last block is no loss)."""
    held = Counter((p, b) for r in rows for p, b in enumerate(r["hash_ids"]))
    latest: list[tuple[list[int], int]] = []
    by_first: dict[tuple[int, int], list[int]] = {}
    seen: set[int] = set()
    drift = 0
    for r in rows:
        ids, n = r["hash_ids"], r["input_length"]
        h = 0
        while h < len(ids) and 2 * held[(h, ids[h])] > len(rows):
            h += 1
        best, most = None, h
        for s in by_first.get((h, ids[h]), []) if h < len(ids) else []:
            k = _lcp(ids, latest[s][0])
            if k > most:
                best, most = s, k
        k0 = 0
        while k0 < len(ids) and ids[k0] in seen:
            k0 += 1
        seen.update(ids)
        if best is None:
            latest.append((ids, n))
            if h < len(ids):
                by_first.setdefault((h, ids[h]), []).append(len(latest) - 1)
            continue
        q, qn = latest[best]
        latest[best] = (ids, n)
        k = _lcp(ids, q)
        if k >= len(q) or (k == len(q) - 1 and len(q) * B > qn):
            continue
        shared = min(n, k0 * B)
        drift += max(shared, min(n, qn)) - shared
    return len(latest), drift


def test_conversation_trace_drift_is_within_1_5x_of_the_reference() -> None:
    rows = [orjson.loads(line) for line in gzip.open(existing(CONV))]
    assert len(rows) == 6000 and all(r["hash_ids"][0] == 0 for r in rows)  # one shared head block
    ref_sessions, ref_drift = reference(rows)
    assert (ref_sessions, ref_drift) == (3853, 3288616)
    result = CliRunner().invoke(cli_app(), ["simulate", str(CONV), "--json"])
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    drift = doc["results"][0]["lost_tokens_by_cause"]["drift"]
    assert ref_drift / 1.5 <= drift <= ref_drift * 1.5, drift  # was 19,510,158: block 0 joined everything
    assert drift == 3294862
    sessions = TraceSessions()
    names = {sessions.assign(tuple(r["hash_ids"]), "c")[0] for r in rows}
    assert abs(len(names) - ref_sessions) <= ref_sessions * 0.05  # 3,852


def test_a_single_conversation_stays_one_session() -> None:
    """A conversation that extends itself, with one rewrite in the middle: its blocks are held by every
    request but never branch into many conversations, so they are not a head."""
    s = TraceSessions()
    chains = [(1, 2), (1, 2, 3), (1, 2, 3, 4), (1, 2, 9), (1, 2, 9, 10), (1, 2, 9, 10, 11)]
    assert [s.assign(c, "t") for c in chains] == [("t/s1", i) for i in range(6)]


def test_requests_sharing_only_the_head_are_new_conversations() -> None:
    s = TraceSessions()
    out = [s.assign(c, "t")[0] for c in [(0, 1, 2), (0, 3), (0, 4, 5), (0, 1, 2, 6), (0, 4, 5, 7), (0, 8)]]
    # (0, 3) joins s1 (block 0 has not branched yet, so it is no head yet; s1's latest is now (0, 3));
    # from then on block 0 is the head: (0, 1, 2, 6) shares only it with every latest request.
    assert out == ["t/s1", "t/s1", "t/s2", "t/s3", "t/s2", "t/s4"]


def test_server_log_requests_of_another_conversation_are_not_drift() -> None:
    """A vLLM request log holds every tenant's requests in one file: request chatcmpl-a3 shares only the
    96-token prefix both earlier conversations branched from, so it opens a session (cold), not drift."""
    result = CliRunner().invoke(cli_app(), ["lint", str(existing(FIXTURES / "formats" / "vllm_enable_log_requests.log")),
                                            "--format", "json"])
    doc = json.loads(result.stdout)
    assert result.exit_code == 0, result.output
    assert [s["session"] for s in doc["sessions"]] == ["vllm_enable_log_requests#1/s1", "vllm_enable_log_requests#1/s2"]
    assert doc["summary"]["lost_tokens"] == 0 and not doc["findings"]  # was 9 tokens of PC002 drift
