"""Beyond the prefix (``simulate --reuse prefix,chunks``): the chunk ceiling against a brute-force count."""

from __future__ import annotations

import json

import pytest

from prefixcache.analyzer.cache.simulate.chunks import chunk_bounds, chunk_ceiling, chunk_reuse
from prefixcache.analyzer.cache.simulate.simulator import baseline
from prefixcache.analyzer.cache.workload import to_sim_requests
from prefixcache.analyzer.errors import ConfigError
from prefixcache.analyzer.ingest import Ingest
from prefixcache.analyzer.prepare import Preparer
from tests.helpers import SAMPLES, existing

DOCS = {
    "A": "Retrieved document A. The vLLM scheduler keeps a free block queue ordered by eviction priority; "
         "blocks freed by a finished request join its tail in reverse order. " * 4,
    "B": "Retrieved document B. SGLang keeps a radix tree of token sequences and evicts whole leaves, least "
         "recently used first, when the memory pool runs short. " * 4,
    "C": "Retrieved document C. Anthropic caches the prefix up to each cache_control breakpoint for five "
         "minutes, refreshed on every read, or one hour at twice the write price. " * 4,
}
SYSTEM = "You answer questions from the retrieved documents only, citing them by letter."


def _rag_log(tmp_path, orders: list[str]):
    lines = []
    for i, order in enumerate(orders):
        msgs = [{"role": "system", "content": SYSTEM}]
        msgs += [{"role": "user", "content": DOCS[d]} for d in order]
        msgs.append({"role": "user", "content": f"Question {i}: which document mentions {order[-1]}?"})
        lines.append(json.dumps({"model": "gpt-4.1", "messages": msgs, "session_id": f"q{i}"}))
    path = tmp_path / "rag.jsonl"
    path.write_text("\n".join(lines) + "\n")
    return path


def _reqs(path):
    p = Preparer()
    return to_sim_requests([p.prepare(r) for r in Ingest([str(path)])])


def brute_force(reqs, lcp):
    """For every request: lcp + tokens past it of each chunk whose token list equals a chunk of an
    earlier request (compared as lists, every pair; no hashing)."""
    earlier: list[list[int]] = []
    out = []
    for r, p in zip(reqs, lcp):
        ids = list(r.tokens)
        mine = [(s, e, ids[s:e]) for s, e in chunk_bounds(r)]
        beyond = sum(e - max(s, p) for s, e, toks in mine if e > p and any(toks == o for o in earlier))
        earlier += [toks for _, _, toks in mine]
        out.append(p + beyond)
    return out


def test_reordered_documents_equal_the_brute_force_count(tmp_path):
    reqs = _reqs(_rag_log(tmp_path, ["ABC", "CAB", "BCA", "ABC"]))
    lcp = baseline(reqs).lcp
    got = chunk_ceiling(reqs, lcp)
    assert [c for c, _, _ in got] == brute_force(reqs, lcp)
    # request 2 (C, A, B) shares only the system prompt as a prefix, yet all three documents were prefilled
    sizes = {}
    first = reqs[0]
    for (s, e), d in zip(chunk_bounds(first)[1:4], "ABC"):
        sizes[d] = e - s
    ceiling, beyond, groups = got[1]
    assert lcp[1] < chunk_bounds(reqs[1])[1][1]  # the prefix ends inside the first document
    assert beyond >= sizes["A"] + sizes["B"]
    assert beyond <= sizes["A"] + sizes["B"] + sizes["C"]
    assert ceiling == lcp[1] + beyond and set(groups) <= {"history", "newest_turn", "other"}
    # request 4 repeats request 1 but for the question: its prefix already covers the documents
    assert got[3][1] == 0
    doc = chunk_reuse(reqs, lcp, 0.15)
    assert doc.chunk_ceiling_tokens == sum(brute_force(reqs, lcp))
    assert doc.prefix_ceiling_tokens == sum(lcp) < doc.chunk_ceiling_tokens
    assert doc.effective_tokens == doc.prefix_ceiling_tokens + int(doc.beyond_prefix_tokens * 0.85)
    assert doc.requests_with_beyond == 2
    windows = chunk_reuse(reqs, lcp, 0.15, window=32)
    assert windows.chunking == "segments, 32-token windows"
    assert windows.chunk_ceiling_tokens >= windows.prefix_ceiling_tokens


@pytest.mark.parametrize("name", [
    "claude_code_session_v1.0.98_fe5e1c67.jsonl", "codex_rollout_synthetic_fixture_claude-code-log.jsonl",
    "kvcache_tester_claudecode_hashids64_trace_0001.json", "mini_swe_agent_legacy_list_github_issue.traj.json",
    "mini_swe_agent_v1.1_deepseek_reasoner_pvlib-1606.traj.json", "mooncake_kvtrace_synthetic_trace.jsonl",
    "openhands_trajectory_events_basic_gui_mode.json",
    "swe_agent_traj_function_calling_with_per_step_messages_marshmallow-1867.traj"])
def test_chunk_ceiling_at_least_the_prefix_on_every_sample(name):
    reqs = _reqs(existing(SAMPLES / name))
    lcp = baseline(reqs).lcp
    per = chunk_ceiling(reqs, lcp)
    assert all(c >= p for (c, _, _), p in zip(per, lcp))
    doc = chunk_reuse(reqs, lcp)
    assert doc.chunk_ceiling_tokens >= doc.prefix_ceiling_tokens
    assert doc.beyond_prefix_tokens == sum(doc.beyond_by_segment.values())
    if reqs and reqs[0].tokens is not None and len(reqs) < 80:  # brute force where every pair of chunks is cheap
        assert [c for c, _, _ in per] == brute_force(reqs, lcp)


def test_bad_parameters():
    with pytest.raises(ConfigError, match="--recompute"):
        chunk_reuse([], [], 1.5)
    with pytest.raises(ConfigError, match="--chunk-tokens"):
        chunk_reuse([], [], 0.15, window=0)


def test_trace_chunks_equal_a_loop_over_blocks():
    """The vectorized trace path against the definition: a block counts when an earlier request had its id."""
    reqs = _reqs(existing(SAMPLES / "mooncake_kvtrace_synthetic_trace.jsonl"))
    lcp = baseline(reqs).lcp
    seen: set = set()
    want = []
    for r, p in zip(reqs, lcp):
        bs, n = r.block_size, r.num_tokens
        beyond = sum(min(n, (k + 1) * bs) - max(k * bs, p) for k, h in enumerate(r.hashes)
                     if h in seen and min(n, (k + 1) * bs) > p and k * bs < n)
        seen.update(r.hashes)
        want.append(p + beyond)
    assert [c for c, _, _ in chunk_ceiling(reqs, lcp)] == want
