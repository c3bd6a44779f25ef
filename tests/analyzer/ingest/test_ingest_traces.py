"""Block-hash trace readers: Mooncake, Bailian, kv-cache-tester (real samples + edge cases)."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from prefixcache.analyzer.errors import InputError
from prefixcache.analyzer.ingest.readers import traces
from prefixcache.analyzer.ingest.base import RecordsSeen, Source
from prefixcache.analyzer.ingest.detect import scores
from prefixcache.analyzer.model import Request, Skipped

MOONCAKE = "mooncake_kvtrace_synthetic_trace.jsonl"
TESTER = "kvcache_tester_claudecode_hashids64_trace_0001.json"
MOON, BAILIAN, KVT = traces.MooncakeReader(), traces.BailianReader(), traces.KvcacheTesterReader()


def read(reader, path: Path) -> tuple[list[Request], list[Skipped], int]:
    out = list(reader.read(Source(str(path), lambda: open(path, "rb"))))
    assert isinstance(out[-1], RecordsSeen)
    return ([o for o in out if isinstance(o, Request)], [o for o in out if isinstance(o, Skipped)], out[-1].records)


def write(tmp_path: Path, name: str, lines: list) -> Path:
    p = tmp_path / name
    p.write_text("".join((x if isinstance(x, str) else json.dumps(x)) + "\n" for x in lines))
    return p


@pytest.mark.parametrize("name,fmt", [(MOONCAKE, "mooncake"), (TESTER, "kvcache-tester")])
def test_detection_picks_the_trace_reader(samples, name, fmt):
    head = (samples / name).read_bytes()[: 64 * 1024].decode("utf-8", "ignore")
    assert scores(head, str(samples / name))[0][1] == fmt


def test_mooncake_sample(samples):
    reqs, skipped, records = read(MOON, samples / MOONCAKE)
    assert (len(reqs), skipped, records) == (3993, [], 3993)
    assert len({h for r in reqs for h in r.trace.hash_ids}) == 43924  # papers.md / SOURCES.md
    assert {r.session for r in reqs} == {"mooncake_kvtrace_synthetic_trace"}
    assert [r.index for r in reqs[:3]] == [0, 1, 2] and reqs[-1].index == 3992
    assert all(r.messages == () and r.trace.block_size == 512 for r in reqs)
    assert all(len(r.trace.hash_ids) == math.ceil(r.trace.input_length / 512) for r in reqs)
    first, last = reqs[0], reqs[-1]
    assert (first.timestamp, first.trace.input_length, first.trace.output_length) == (0.0, 40160, 6)
    assert first.trace.hash_ids[:3] == (0, 1, 2) and first.usage.prompt_tokens == 40160
    assert last.timestamp == pytest.approx(1022.025)  # 1022025 ms
    assert sum(r.trace.input_length for r in reqs) == 61194628


def test_mooncake_bad_lines_are_named(tmp_path):
    ok = {"timestamp": 5, "input_length": 600, "output_length": 1, "hash_ids": [1, 2]}
    p = write(tmp_path, "m.jsonl", [ok, {**ok, "hash_ids": [1, "x"]}, {"timestamp": 1, "input_length": 3},
                                    "", '{"timestamp": 1, "inp', {**ok, "input_length": -1}])
    reqs, skipped, records = read(MOON, p)
    assert records == 5 and len(reqs) == 1 and reqs[0].timestamp == 0.005
    assert [(s.record, s.field) for s in skipped] == [(2, "hash_ids[1]"), (3, "hash_ids"), (5, ""), (6, "input_length")]
    assert all(s.bad for s in skipped) and "truncated" in skipped[2].reason


def test_bailian_chat_chains_are_sessions(tmp_path):
    rows = [
        {"chat_id": 1, "parent_chat_id": -1, "timestamp": 0.5, "input_length": 40, "output_length": 3,
         "type": "text", "turn": 1, "hash_ids": [1, 2, 3]},
        {"chat_id": 2, "parent_chat_id": -1, "timestamp": 1.0, "input_length": 16, "output_length": 3,
         "type": "text", "turn": 1, "hash_ids": [9]},
        {"chat_id": 3, "parent_chat_id": 1, "timestamp": 61.114, "input_length": 70, "output_length": 5,
         "type": "text", "turn": 2, "hash_ids": [1, 2, 3, 4, 5]},
        {"chat_id": 4, "parent_chat_id": 3, "timestamp": 90.0, "input_length": 90, "output_length": 5,
         "type": "text", "turn": 3, "hash_ids": [1, 2, 3, 4, 5, 6]},
        {"chat_id": 7, "parent_chat_id": 55, "timestamp": 95.0, "input_length": 16, "output_length": 1,
         "type": "search", "turn": 4, "hash_ids": [11]},
        {"chat_id": 8, "timestamp": 96.0, "input_length": 16, "hash_ids": [12]},
    ]
    p = write(tmp_path, "qwen_traceA_blksz_16.jsonl", rows)
    head = p.read_text()[:4096]
    assert scores(head, str(p))[0][1] == "bailian"
    reqs, skipped, records = read(BAILIAN, p)
    assert records == 6 and len(reqs) == 5
    assert [(r.session, r.index) for r in reqs] == [
        ("qwen_traceA_blksz_16/chat-1", 0), ("qwen_traceA_blksz_16/chat-2", 0), ("qwen_traceA_blksz_16/chat-1", 1),
        ("qwen_traceA_blksz_16/chat-1", 2), ("qwen_traceA_blksz_16/chat-55", 0)]
    assert reqs[2].timestamp == 61.114 and reqs[2].trace.block_size == 16 and reqs[2].extra["turn"] == 2
    assert "not earlier in the file" in reqs[4].notes[0]
    assert (skipped[0].record, skipped[0].field) == (6, "parent_chat_id")


def test_kvcache_tester_sample(samples):
    reqs, skipped, records = read(KVT, samples / TESTER)
    assert (len(reqs), skipped, records) == (41, [], 41)  # no subagent groups in this trace
    assert {r.session for r in reqs} == {"trace_0001"} and [r.index for r in reqs] == list(range(41))
    assert all(r.trace.block_size == 64 and len(r.trace.hash_ids) == r.trace.input_length // 64 for r in reqs)
    assert (reqs[0].timestamp, reqs[0].usage.prompt_tokens, reqs[0].usage.output_tokens) == (0.0, 71175, 169)
    assert (reqs[-1].timestamp, reqs[-1].trace.input_length) == (5418.0, 196860)
    assert reqs[0].model == "claude-opus-4-5-20251101"
    assert reqs[0].extra["tool_tokens"] == 12974 and reqs[0].extra["system_tokens"] == 4243
    assert len({h for r in reqs for h in r.trace.hash_ids}) == 5119
    assert sum(r.trace.input_length for r in reqs) == 4873373  # totals.parent_tokens.input


def test_kvcache_tester_subagents_are_sessions(tmp_path):
    doc = {"id": "t9", "block_size": 64, "tool_tokens": 100, "system_tokens": 50, "requests": [
        {"t": 0.0, "type": "s", "in": 130, "out": 5, "hash_ids": [1, 2]},
        {"t": 10.0, "type": "subagent", "agent_id": "a1", "subagent_type": "Explore", "tool_tokens": 70,
         "requests": [{"t": 0.0, "type": "s", "in": 64, "out": 1, "hash_ids": [1]},
                      {"t": 3.5, "type": "n", "in": 128, "out": 1, "hash_ids": [1, 2]},
                      {"t": 4.0, "in": 128}]},
        {"t": 20.0, "type": "s", "in": 200, "out": 5, "hash_ids": [1, 2, 3]},
    ]}
    p = tmp_path / "t9.json"
    p.write_text(json.dumps(doc))
    reqs, skipped, records = read(KVT, p)
    assert records == 6 and len(reqs) == 4
    assert [(r.session, r.index, r.timestamp) for r in reqs] == [
        ("t9", 0, 0.0), ("t9/a1", 0, 10.0), ("t9/a1", 1, 13.5), ("t9", 1, 20.0)]
    off = traces.SUBAGENT_ID_STRIDE
    assert reqs[2].trace.hash_ids == (1 + off, 2 + off) and reqs[3].trace.hash_ids == (1, 2, 3)
    assert reqs[1].extra["tool_tokens"] == 70 and reqs[0].extra["tool_tokens"] == 100
    assert reqs[1].provenance.pointer == "requests[1].requests[0]"
    assert (skipped[0].record, skipped[0].field) == (5, "requests[1].requests[2].hash_ids")


def test_kvcache_tester_wrong_document(tmp_path):
    p = tmp_path / "bad.json"
    p.write_text(json.dumps({"id": "x", "requests": []}))
    with pytest.raises(InputError, match="block_size"):
        list(KVT.read(Source(str(p), lambda: open(p, "rb"))))


@pytest.mark.parametrize("reader,name,jsonl", [(MOON, MOONCAKE, True), (KVT, TESTER, False)])
def test_mutated_traces_never_crash(samples, tmp_path, reader, name, jsonl):
    from tests.analyzer.ingest.test_ingest_agents import check_mutants
    check_mutants(reader, samples / name, tmp_path, jsonl, seeds=4)
