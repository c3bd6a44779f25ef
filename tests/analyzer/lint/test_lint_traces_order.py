"""Issue 11 items 1–2: block-hash traces report their re-prefills (PC002, sessions
inferred from hash chains for Mooncake), and lint walks requests in logged-time order."""

from __future__ import annotations

import json

from prefixcache.analyzer.lint.config import LintConfig
from prefixcache.analyzer.lint.run import lint_paths
from prefixcache.analyzer.cache.index.trace_sessions import TraceSessions, trace_break
from prefixcache.analyzer.model import BlockTrace, Provenance, Request

from typer.testing import CliRunner

from prefixcache.cli.app import app
from tests.helpers import SAMPLES

KVT = SAMPLES / "kvcache_tester_claudecode_hashids64_trace_0001.json"
MOONCAKE = SAMPLES / "mooncake_kvtrace_synthetic_trace.jsonl"


def _lint(*paths, **cfg):
    return lint_paths([str(p) for p in paths], LintConfig(**cfg))


def test_kvcache_tester_trace_reports_its_reprefill():
    run = _lint(KVT)
    by = {r.index: r for r in run.results}
    big = by[40]
    # request 40 shares 269 blocks (17,216 tokens: tools 12,974 + system 4,243) with request 39,
    # whose 147,697 tokens were computed: 147,697 - 17,216 = 130,481 lost
    assert (big.reusable_tokens, big.lost_tokens, big.lost_code) == (17_216, 130_481, "PC002")
    f = next(f for f in big.findings if f.code == "PC002")
    assert (f.token, f.json_path, f.severity, f.lost_tokens) == (17_216, "requests[40].hash_ids[269]", "warning",
                                                                  130_481)
    assert f.message.startswith("unknown: no text")
    # six more requests differ only in the previous request's last (full) block: info
    tails = sorted(r.index for r in run.results if r.findings and r.findings[0].severity == "info")
    assert tails == [5, 10, 13, 16, 18, 26]
    assert run.total.lost_tokens_by_code == {"PC002": 130_481 + 78 + 87 + 101 + 86 + 97 + 64}
    assert run.verdict().failed


def test_mooncake_sessions_are_inferred_from_hash_chains():
    run = _lint(MOONCAKE)
    assert len(run.results) == 3993 and len(run.sessions) == 2211
    assert run.total.lost_tokens > 0 and run.findings
    worst = max(run.results, key=lambda r: r.lost_tokens or 0)
    assert worst.lost_code == "PC002" and worst.session.startswith("mooncake_kvtrace_synthetic_trace/s")


def _trace(ids, n, block=4, session="t", fmt="mooncake", index=0):
    return Request(session, index, fmt, Provenance("t.jsonl", index + 1), trace=BlockTrace(tuple(ids), block, n))


def _chain(ids, n):
    return tuple(ids), "t"


def test_trace_break_partial_tail_is_not_a_break():
    q = BlockTrace((1, 2, 3), 4, 10)  # last block holds 2 of 4 tokens
    assert trace_break(BlockTrace((1, 2, 9, 10), 4, 16), q) is None
    full = BlockTrace((1, 2, 3), 4, 12)
    assert trace_break(BlockTrace((1, 2, 9, 10), 4, 16), full).tail
    brk = trace_break(BlockTrace((1, 7), 4, 8), full)
    assert (brk.block, brk.token, brk.tail) == (1, 4, False)


def test_inferred_session_is_the_one_sharing_most_leading_blocks():
    s = TraceSessions()
    assert s.assign(*_chain([1, 2, 3], 12)) == ("t/s1", 0)
    assert s.assign(*_chain([1, 5], 8)) == ("t/s1", 1)  # shares block 1 with s1's latest
    assert s.assign(*_chain([9], 4)) == ("t/s2", 0)
    assert s.assign(*_chain([1, 5, 6], 12)) == ("t/s1", 2)


def test_mooncake_fixture_lost_tokens_and_block(tmp_path):
    log = tmp_path / "mc.jsonl"
    rows = [{"timestamp": 0, "input_length": 1024, "hash_ids": [1, 2]},
            {"timestamp": 1, "input_length": 1536, "hash_ids": [1, 2, 3]},
            {"timestamp": 2, "input_length": 2048, "hash_ids": [1, 7, 8, 9]},
            {"timestamp": 3, "input_length": 512, "hash_ids": [40]}]
    log.write_text("".join(json.dumps(r) + "\n" for r in rows))
    run = _lint(log)
    r = run.results[2]
    assert (r.session, r.index, r.reusable_tokens, r.lost_tokens, r.lost_code) == ("mc/s1", 2, 512, 1024, "PC002")
    assert (r.findings[0].token, r.findings[0].json_path) == (512, "hash_ids[1]")
    assert run.results[3].session == "mc/s2" and not run.results[3].findings


def _chat(path, created, messages):
    path.write_text(json.dumps({"model": "gpt-4.1", "timestamp": created, "messages": messages}) + "\n")


def test_lint_walks_requests_in_logged_time_order(tmp_path):
    sys_ = {"role": "system", "content": "You are a careful agent. " * 40}
    first = [sys_, {"role": "user", "content": "list the files"}]
    later = first + [{"role": "assistant", "content": "a.py b.py"}, {"role": "user", "content": "read a.py"}]
    _chat(tmp_path / "a.jsonl", 2000, later)  # logged later, read first
    _chat(tmp_path / "z.jsonl", 1000, first)
    run = _lint(tmp_path / "a.jsonl", tmp_path / "z.jsonl", format="json")
    a, z = run.results  # listed in input order
    assert z.reusable_tokens == 0 and z.shared_with is None  # z came first: nothing to reuse
    assert a.shared_with == (z.session, z.index) and a.reusable_tokens > 0


def test_cli_never_says_no_findings_when_tokens_were_lost():
    res = CliRunner().invoke(app, ["lint", str(KVT)], catch_exceptions=False)
    assert "No findings" not in res.output and "PC002" in res.output


def test_traces_are_labelled_with_their_own_block_size_and_no_tokenizer_claim(tmp_path):
    """Mooncake blocks are 512 tokens, kv-cache-tester's 64: the block-aligned figure says so (not the
    --block-size default 16), and trace rows make no tokenizer claim (exact None, no badge)."""
    for path, size in ((MOONCAKE, 512), (KVT, 64)):
        run = _lint(path)
        assert run.block_size == size and run.report().summary.block_size == size
        assert {r.exact for r in run.results} == {None}
    result = CliRunner().invoke(app, ["lint", str(KVT)], env={"COLUMNS": "200"})
    assert "block-aligned, B=64:" in result.stdout
    out = tmp_path / "r.html"
    result = CliRunner().invoke(app, ["report", str(KVT), "-o", str(out)])
    assert result.exit_code == 0, result.output
    page = out.read_text()
    assert 'id="tokenizer-badge"' not in page and "block size 64 tokens" in page
