"""Readers for agent logs: Claude Code, Codex, SWE-agent, mini-swe-agent (real samples + edge cases)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from prefixcache.analyzer.errors import InputError
from prefixcache.analyzer.ingest.readers import claude_code, codex, mini_swe_agent, swe_agent
from prefixcache.analyzer.ingest.base import RecordsSeen, Source
from prefixcache.analyzer.ingest.detect import scores
from prefixcache.analyzer.model import Request, Skipped

CLAUDE = "claude_code_session_v1.0.98_fe5e1c67.jsonl"
CODEX = "codex_rollout_synthetic_fixture_claude-code-log.jsonl"
SWE = "swe_agent_traj_function_calling_with_per_step_messages_marshmallow-1867.traj"
MINI = "mini_swe_agent_v1.1_deepseek_reasoner_pvlib-1606.traj.json"
MINI_LEGACY = "mini_swe_agent_legacy_list_github_issue.traj.json"
SID = "fe5e1c67-53e7-4862-81ae-d0e013e3270b"


def read(reader, path: Path) -> tuple[list[Request], list[Skipped], int]:
    """Run a reader over a file: requests, skips, and the RecordsSeen count (which must come last)."""
    out = list(reader.read(Source(str(path), lambda: open(path, "rb"))))
    assert isinstance(out[-1], RecordsSeen) and out[-1].source == str(path)
    assert not any(isinstance(o, RecordsSeen) for o in out[:-1])
    return ([o for o in out if isinstance(o, Request)], [o for o in out if isinstance(o, Skipped)], out[-1].records)


def write(tmp_path: Path, name: str, lines: list) -> Path:
    p = tmp_path / name
    p.write_text("".join((x if isinstance(x, str) else json.dumps(x)) + "\n" for x in lines))
    return p


@pytest.mark.parametrize("name,fmt", [(CLAUDE, "claude-code"), (CODEX, "codex"), (SWE, "swe-agent"),
                                      (MINI, "mini-swe-agent"), (MINI_LEGACY, "mini-swe-agent")])
def test_detection_picks_the_agent_reader(samples, name, fmt):
    head = (samples / name).read_bytes()[: 64 * 1024].decode("utf-8", "ignore")
    assert scores(head, str(samples / name))[0][1] == fmt


# ---------------------------------------------------------------- Claude Code

@pytest.fixture(scope="module")
def claude():
    from tests.helpers import SAMPLES, existing
    return read(claude_code.ClaudeCodeReader(), existing(SAMPLES / CLAUDE))


def test_claude_code_one_request_per_request_id_every_line_counted(claude):
    reqs, skipped, records = claude
    assert (len(reqs), skipped, records) == (170, [], 438)
    assert len({r.extra["requestId"] for r in reqs}) == 170
    side = [r for r in reqs if r.extra["opaque_prefix_key"] == "claude-code:sidechain"]
    assert len(side) == 161
    counts = {}
    for r in reqs:
        counts[r.session] = counts.get(r.session, 0) + 1
    assert counts == {SID: 9, f"{SID}/sidechain-1": 9, f"{SID}/sidechain-2": 34, f"{SID}/sidechain-3": 40,
                      f"{SID}/sidechain-4": 25, f"{SID}/sidechain-5": 53}
    for sid in counts:  # indexes are 0..n-1 per session, in file order
        assert [r.index for r in reqs if r.session == sid] == list(range(counts[sid]))


def test_claude_code_usage_from_last_line_of_the_call(claude):
    first = claude[0][0]
    # lines 4-6 share requestId ...Krttht; output_tokens is 3 on line 4 and final (172) on line 6
    assert first.provenance.record == 4 and first.extra["requestId"] == "req_011CSkYzZmrLKTfC5kKrttht"
    u = first.usage
    assert (u.prompt_tokens, u.cached_tokens, u.cache_write_tokens, u.output_tokens) == (3 + 1331 + 14874, 14874, 1331, 172)
    assert first.model == "claude-sonnet-4-20250514"
    assert first.timestamp == pytest.approx(1756860754.495)  # 2025-09-03T00:52:34.495Z
    assert first.opaque_prefix_tokens is None and first.tools == ()
    assert first.observed == {"messages", "usage", "timestamp", "model"}
    assert any("opaque shared prefix" in n for n in first.notes)
    assert sum(r.usage.output_tokens for r in claude[0]) == 51933
    assert sum(r.usage.cached_tokens for r in claude[0]) == 3647854


def test_claude_code_rebuilds_api_alternation(claude):
    reqs = claude[0]
    # call 1: the slash command line and its expanded (isMeta) body are one user turn
    (m,) = reqs[0].messages
    assert m.role == "user" and len(m.text_blocks) == 2 and m.text_blocks[0].startswith("<command-message>")
    # call 2: three response lines fold into one assistant message; parallel results → 2 tool messages
    roles = [m.role for m in reqs[1].messages]
    assert roles == ["user", "assistant", "tool", "tool"]
    a = reqs[1].messages[1]
    assert [c.name for c in a.tool_calls] == ["Glob", "Glob"]
    assert a.tool_calls[0].arguments == '{"pattern": "**/*.md", "path": "~/.claude/commands"}'
    assert a.tool_calls[0].arguments_inferred
    assert [m.tool_call_id for m in reqs[1].messages[2:]] == [c.id for c in a.tool_calls]
    assert reqs[1].messages[2].path == "line 7: message.content[0]"


def test_claude_code_threads_are_append_only_and_sidechains_start_from_task_prompts(claude):
    reqs = claude[0]
    last = {}
    for r in reqs:
        prev = last.get(r.session)
        if prev is not None:
            assert r.messages[: len(prev.messages)] == prev.messages
        last[r.session] = r
    prompts = {json.loads(c.arguments)["prompt"] for r in reqs if r.session == SID
               for m in r.messages for c in m.tool_calls if c.name == "Task"}
    roots = [r.messages for r in reqs if r.index == 0 and "/sidechain-" in r.session]
    assert len(roots) == 5 and all(len(ms) == 1 and ms[0].content in prompts for ms in roots)


def test_claude_code_hidden_prefix_is_shared_per_opaque_key(claude):
    """Why sidechains share one opaque key: later subagents' first calls read the same cached
    hidden prefix (system + tools, 11,381 tokens) that the concurrent first three had to write."""
    firsts = {r.session.rsplit("/", 1)[-1]: r.usage for r in claude[0] if r.index == 0 and "/" in r.session}
    assert [firsts[f"sidechain-{n}"].cached_tokens for n in range(1, 6)] == [0, 0, 0, 11381, 11381]
    assert all(u.prompt_tokens > 11381 for u in firsts.values())


def test_claude_code_edge_lines(tmp_path):
    base = {"sessionId": "s1", "isSidechain": False, "timestamp": "2025-01-01T00:00:00Z", "version": "2.0.0"}
    usage = {"input_tokens": 5, "cache_creation_input_tokens": 10, "cache_read_input_tokens": 100, "output_tokens": 7}
    lines = [
        {"type": "file-history-snapshot", "messageId": "x", "snapshot": {}},
        {**base, "type": "user", "uuid": "u1", "parentUuid": None, "message": {"role": "user", "content": "hi"}},
        {**base, "type": "assistant", "uuid": "a1", "parentUuid": "u1", "requestId": "r1",
         "message": {"id": "m1", "role": "assistant", "model": "claude-x", "usage": usage,
                     "content": [{"type": "thinking", "thinking": "plan", "signature": "sig"}]}},
        {**base, "type": "assistant", "uuid": "a2", "parentUuid": "a1", "requestId": "r1",
         "message": {"id": "m1", "role": "assistant", "model": "claude-x", "usage": usage,
                     "content": [{"type": "tool_use", "id": "t1", "name": "Bash", "input": {"command": "ls"}}]}},
        {**base, "type": "user", "uuid": "u2", "parentUuid": "a2",
         "message": {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": "a.py"}]}},
        {**base, "type": "assistant", "uuid": "e1", "parentUuid": "u2", "isApiErrorMessage": True,
         "message": {"role": "assistant", "model": "<synthetic>", "content": [{"type": "text", "text": "API Error"}]}},
        {**base, "type": "assistant", "uuid": "a3", "parentUuid": "u2", "requestId": "r2",
         "message": {"id": "m2", "role": "assistant", "model": "claude-x", "usage": usage,
                     "content": [{"type": "text", "text": "done"}]}},
        {**base, "type": "user", "uuid": "s0", "parentUuid": None, "isSidechain": True, "agentId": "ab12",
         "message": {"role": "user", "content": "sub task"}},
        {**base, "type": "assistant", "uuid": "s1", "parentUuid": "s0", "isSidechain": True, "agentId": "ab12",
         "requestId": "r3", "message": {"id": "m3", "role": "assistant", "model": "claude-x", "usage": usage,
                                        "content": [{"type": "text", "text": "ok"}]}},
        {"type": "brand-new-kind", "uuid": "z"},
        '{"type": "user", "message": {"role": "us',
    ]
    reqs, skipped, records = read(claude_code.ClaudeCodeReader(), write(tmp_path, "s1.jsonl", lines))
    assert records == 11 and len(reqs) == 3
    assert [(s.record, s.bad) for s in skipped] == [(6, False), (10, False), (11, True)]
    assert "API error" in skipped[0].reason and "brand-new-kind" in skipped[1].reason
    assert "truncated" in skipped[2].reason
    r2 = reqs[1]
    assert [m.role for m in r2.messages] == ["user", "assistant", "tool"]  # the error line is not in the prompt
    assert r2.messages[1].reasoning == "plan" and r2.messages[1].tool_calls[0].arguments == '{"command": "ls"}'
    assert reqs[2].session == "s1/agent-ab12" and reqs[2].extra["opaque_prefix_key"] == "claude-code:sidechain"
    assert reqs[2].messages[0].content == "sub task"


def test_claude_code_interleaved_response_and_rewind(tmp_path):
    base = {"sessionId": "s2", "isSidechain": False, "timestamp": "2025-01-01T00:00:00Z"}

    def asst(uuid, parent, rid, mid, block):
        return {**base, "type": "assistant", "uuid": uuid, "parentUuid": parent, "requestId": rid,
                "message": {"id": mid, "role": "assistant", "model": "c", "content": [block]}}

    def user(uuid, parent, content):
        return {**base, "type": "user", "uuid": uuid, "parentUuid": parent, "message": {"role": "user", "content": content}}

    def use(i):
        return {"type": "tool_use", "id": f"t{i}", "name": "Read", "input": {"n": i}}

    def result(i):
        return [{"type": "tool_result", "tool_use_id": f"t{i}", "content": f"r{i}"}]

    lines = [user("u0", None, "q"), asst("a1", "u0", "r1", "m1", use(1)), user("u1", "a1", result(1)),
             asst("a1b", "u1", "r1", "m1", use(2)), user("u2", "a1b", result(2)),
             asst("a2", "u2", "r2", "m2", {"type": "text", "text": "done"}),
             user("u3", "a2", "next"), asst("a3", "u3", "r3", "m3", {"type": "text", "text": "ok"}),
             user("u4", "a2", "edited next"), asst("a4", "u4", "r4", "m4", {"type": "text", "text": "ok2"})]
    reqs, skipped, records = read(claude_code.ClaudeCodeReader(), write(tmp_path, "s2.jsonl", lines))
    assert (len(reqs), skipped, records) == (4, [], 10) and reqs[0].usage is None
    # the response of r1 streamed around its own tool result is one assistant message
    assert [m.role for m in reqs[1].messages] == ["user", "assistant", "tool", "tool"]
    assert [c.id for c in reqs[1].messages[1].tool_calls] == ["t1", "t2"]
    assert [m.content for m in reqs[2].messages][-1] == "next"
    # a rewind (u4 forks from a2) gets its own branch, not the abandoned "next"
    assert [m.content for m in reqs[3].messages] == ["q", "", "r1", "r2", "done", "edited next"]


# ---------------------------------------------------------------- Codex

def test_codex_sample_calls_and_unknown_record(samples):
    reqs, skipped, records = read(codex.CodexReader(), samples / CODEX)
    assert records == 14
    # model calls start at lines 5 (reasoning+exec), 8 (apply_patch), 10 (mcp call), 13 (final answer)
    assert [r.provenance.record for r in reqs] == [5, 8, 10, 13]
    assert [len(r.messages) for r in reqs] == [1, 3, 5, 7]
    assert {r.session for r in reqs} == {"11111111-1111-4111-8111-111111111111"}
    assert [r.index for r in reqs] == [0, 1, 2, 3]
    assert all(r.model == "synthetic-model" and r.usage is None and "usage" not in r.observed for r in reqs)
    (s,) = skipped
    assert (s.record, s.bad, s.field) == (14, False, "type") and "future_synthetic_record" in s.reason
    last = reqs[-1].messages
    assert [m.role for m in last] == ["user", "assistant", "tool", "assistant", "tool", "assistant", "tool"]
    assert last[1].reasoning == "I will inspect the synthetic directory." and last[1].reasoning_opaque
    assert last[1].tool_calls[0].arguments == '{"cmd":"find . -maxdepth 1 -type f"}'
    assert last[3].tool_calls[0].kind == "custom" and last[3].tool_calls[0].arguments.startswith("*** Begin Patch")
    assert last[4].content == "Done!" and last[4].tool_call_id == "call-custom-001"
    assert not any("SYNTHETIC_ENCRYPTED" in m.content for m in last)
    assert reqs[0].timestamp == pytest.approx(1767323048.0)  # 2026-01-02T03:04:08Z, first output item


def test_codex_instructions_token_count_and_compaction(tmp_path):
    def ri(payload):
        return {"timestamp": "2026-01-02T03:04:05Z", "type": "response_item", "payload": payload}
    user = {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "go"}]}
    answer = {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "ok"}]}
    tc = {"type": "token_count", "info": {"total_token_usage": {"input_tokens": 5000},
                                          "last_token_usage": {"input_tokens": 900, "cached_input_tokens": 768,
                                                               "cache_write_input_tokens": 0, "output_tokens": 12}}}
    lines = [
        {"timestamp": "2026-01-02T03:04:05Z", "type": "session_meta",
         "payload": {"id": "sess", "base_instructions": {"text": "You are Codex."}}},
        {"timestamp": "2026-01-02T03:04:05Z", "type": "turn_context", "payload": {"model": "gpt-5-codex"}},
        ri(user), ri(answer),
        {"timestamp": "2026-01-02T03:04:06Z", "type": "event_msg", "payload": tc},
        {"timestamp": "2026-01-02T03:04:07Z", "type": "compacted",
         "payload": {"message": "summary", "replacement_history": [user, {"type": "message", "role": "user",
                     "content": [{"type": "input_text", "text": "summary of work"}]}]}},
        ri({"type": "message", "role": "user", "content": [{"type": "input_text", "text": "more"}]}), ri(answer),
        ri({"type": "mystery_item"}),
    ]
    reqs, skipped, records = read(codex.CodexReader(), write(tmp_path, "r.jsonl", lines))
    assert records == 9 and len(reqs) == 2
    assert reqs[0].messages[0].role == "system" and reqs[0].messages[0].content == "You are Codex."
    assert reqs[0].usage.prompt_tokens == 900 and reqs[0].usage.cached_tokens == 768
    assert reqs[0].usage.cache_write_tokens == 0 and reqs[0].usage.output_tokens == 12
    assert reqs[1].usage is None and reqs[0].model == "gpt-5-codex"
    assert [m.content for m in reqs[1].messages] == ["You are Codex.", "go", "summary of work", "more"]
    assert [(s.record, s.bad) for s in skipped] == [(9, False)]


# ---------------------------------------------------------------- SWE-agent

def test_swe_agent_prompt_of_each_step(samples):
    reqs, skipped, records = read(swe_agent.SweAgentReader(), samples / SWE)
    assert (len(reqs), skipped, records) == (13, [], 13)
    # trajectory[i].messages is the history AFTER step i (4, 6, ..., 28 items); the prompt of step i
    # is the history after step i-1, and for step 0 the first two messages.
    assert [len(r.messages) for r in reqs] == list(range(2, 27, 2))
    doc = json.loads((samples / SWE).read_text())
    steps = doc["trajectory"]
    for i, r in enumerate(reqs):
        assert r.messages[-1].role == ("user" if i == 0 else "tool")
        assert all(m.content != steps[i]["response"] for m in r.messages if m.role == "assistant")
        if i:
            assert [m.content for m in r.messages] == [m["content"] for m in steps[i - 1]["messages"]]
    # last_n_observations (n=5) elides message 3 from step 6 on: the prefix is rewritten
    assert reqs[5].messages[3].content.startswith("AUTHORS.rst")
    assert reqs[6].messages[3].content == "Old environment output: (7 lines omitted)"
    a = reqs[1].messages[2]
    assert a.tool_calls[0].name == "bash" and a.tool_calls[0].arguments == '{"command":"ls -F"}'
    assert reqs[1].messages[3].tool_call_id == a.tool_calls[0].id == "call_9diWc1DYm4RLmPfHgIaP2wd"
    assert reqs[0].model is None and reqs[0].tools == () and reqs[0].usage is None
    assert reqs[0].extra["tool_bundles"] == ["tools/defaults", "tools/search", "tools/edit_replace", "tools/submit"]


def test_swe_agent_query_steps_and_history_fallback(tmp_path):
    sys_m = {"role": "system", "content": "sys"}
    u = {"role": "user", "content": [{"type": "text", "text": "fix it", "cache_control": {"type": "ephemeral"}}]}
    a = {"role": "assistant", "content": "look", "thinking_blocks": [{"type": "thinking", "thinking": "hmm"}],
         "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "bash", "arguments": "{}"}}]}
    t = {"role": "tool", "content": "out", "tool_call_ids": ["c1"]}
    q = tmp_path / "q.traj"
    q.write_text(json.dumps({"trajectory": [{"query": [sys_m, u], "response": "look"},
                                            {"query": [sys_m, u, a, t], "response": "done"},
                                            {"query": "oops"}], "history": []}))
    reqs, skipped, records = read(swe_agent.SweAgentReader(), q)
    assert records == 3 and [len(r.messages) for r in reqs] == [2, 4]
    assert reqs[1].messages[1].cache_control == "5m" and reqs[1].messages[2].reasoning == "hmm"
    assert reqs[1].messages[3].tool_call_id == "c1"
    assert skipped[0].record == 3 and skipped[0].field == "trajectory[2].messages"
    h = tmp_path / "h.traj"
    h.write_text(json.dumps({"trajectory": [{"action": "ls"}], "history": [sys_m, u, a, t, {**a, "content": "x"}]}))
    reqs, skipped, records = read(swe_agent.SweAgentReader(), h)
    assert records == 5 and [len(r.messages) for r in reqs] == [2, 4] and not skipped
    assert "rebuilt from history" in reqs[0].notes[0]
    bad = tmp_path / "b.traj"
    bad.write_text("[1, 2]")
    with pytest.raises(InputError, match="b.traj"):
        list(swe_agent.SweAgentReader().read(Source(str(bad), lambda: open(bad, "rb"))))


# ---------------------------------------------------------------- mini-swe-agent

def test_mini_swe_agent_v11_deepseek_usage(samples):
    reqs, skipped, records = read(mini_swe_agent.MiniSweAgentReader(), samples / MINI)
    assert records == 11 and [len(r.messages) for r in reqs] == [2, 4, 6, 8]
    assert [r.usage.prompt_tokens for r in reqs] == [3394, 4067, 4863, 5023]
    assert [r.usage.cached_tokens for r in reqs] == [3392, 3392, 4032, 4800]
    assert [r.usage.output_tokens for r in reqs] == [74, 72, 103, 69]
    assert reqs[0].timestamp == pytest.approx(1776075647.1506512)
    assert {r.model for r in reqs} == {"deepseek-reasoner"} and {r.session for r in reqs} == {"pvlib__pvlib-python-1606"}
    assert reqs[1].messages[2].reasoning.startswith("I'll start by exploring")
    assert reqs[1].messages[3].tool_call_id == reqs[1].messages[2].tool_calls[0].id
    # tool-calling mode: the constant bash tool is inferred, not observed
    assert [t.name for t in reqs[0].tools] == ["bash"] and "tools" not in reqs[0].observed
    assert reqs[0].tools[0].parameters["required"] == ["command"]
    assert any("bash tool" in n for n in reqs[0].notes)
    # info.model_stats.api_calls = 5, but the 5th call died (SSL EOF) and left only the exit message
    (s,) = skipped
    assert (s.record, s.bad) == (11, False) and "api_calls=5" in s.reason and "InternalServerError" in s.reason


def test_mini_swe_agent_legacy_list(samples):
    reqs, skipped, records = read(mini_swe_agent.MiniSweAgentReader(), samples / MINI_LEGACY)
    assert (records, skipped) == (22, []) and [len(r.messages) for r in reqs] == list(range(2, 21, 2))
    assert reqs[0].usage is None and reqs[-1].messages[-1].role == "user"
    assert reqs[0].session == "mini_swe_agent_legacy_list_github_issue"


def test_mini_swe_agent_bad_message_is_named(tmp_path):
    p = tmp_path / "x.traj.json"
    p.write_text(json.dumps({"info": {}, "trajectory_format": "mini-swe-agent-1.1",
                             "messages": [{"role": "system", "content": "s"}, {"role": "wizard", "content": 1},
                                          {"role": "assistant", "content": "a"}]}))
    reqs, skipped, records = read(mini_swe_agent.MiniSweAgentReader(), p)
    assert records == 3 and len(reqs) == 1 and len(reqs[0].messages) == 1
    assert (skipped[0].record, skipped[0].field, skipped[0].bad) == (2, "messages[1].role", True)
    assert any("unreadable" in n for n in reqs[0].notes)


# ---------------------------------------------------------------- robustness

def mutate(value, rnd):
    """Randomly drop keys/items and swap values for wrong types (deterministic per ``rnd``)."""
    if isinstance(value, dict):
        out = {}
        for k, v in value.items():
            r = rnd.random()
            if r < 0.03:
                continue
            out[k] = rnd.choice([None, 1, -3, "s", [], {}, True, [1, "x"]]) if r < 0.07 else mutate(v, rnd)
        return out
    if isinstance(value, list):
        return [mutate(v, rnd) if rnd.random() > 0.03 else rnd.choice([None, 1, "s", {}])
                for v in value if rnd.random() > 0.02]
    return value


def check_mutants(reader, path: Path, tmp_path: Path, jsonl: bool, seeds: int = 8) -> None:
    """Mutated copies of a real file: only Requests/Skipped/RecordsSeen or an InputError, never a traceback."""
    import random
    for seed in range(seeds):
        rnd = random.Random(seed)
        if jsonl:
            lines = path.read_text().splitlines()
            text = "".join(json.dumps(mutate(json.loads(line), rnd)) + "\n" for line in lines)
        else:
            text = json.dumps(mutate(json.loads(path.read_text()), rnd))
        p = tmp_path / f"{seed}{''.join(path.suffixes)}"
        p.write_text(text)
        try:
            reqs, skipped, records = read(reader, p)
        except InputError as e:
            assert str(p) in str(e)
            continue
        if jsonl:
            assert records == len(lines)
        assert all(s.source == str(p) and s.reason for s in skipped)


@pytest.mark.parametrize("cls,name,jsonl", [(claude_code.ClaudeCodeReader, CLAUDE, True), (codex.CodexReader, CODEX, True),
                                            (swe_agent.SweAgentReader, SWE, False),
                                            (mini_swe_agent.MiniSweAgentReader, MINI, False),
                                            (mini_swe_agent.MiniSweAgentReader, MINI_LEGACY, False)])
def test_mutated_samples_never_crash(samples, tmp_path, cls, name, jsonl):
    check_mutants(cls(), samples / name, tmp_path, jsonl)


def test_codex_ghost_snapshots_hidden_prefix_and_encrypted_reasoning(tmp_path):
    """Reader semantics (not a figure): ghost_snapshot items are counted non-request items with one note;
    every call carries the hidden-prefix key; encrypted reasoning sent back is sized from the
    reasoning_output_tokens of the call that produced it."""
    def ri(payload):
        return {"timestamp": "2025-11-23T19:30:19Z", "type": "response_item", "payload": payload}

    def tc(inp, reasoning):
        return {"timestamp": "2025-11-23T19:30:20Z", "type": "event_msg", "payload": {
            "type": "token_count", "info": {"last_token_usage": {
                "input_tokens": inp, "cached_input_tokens": 0, "output_tokens": 40,
                "reasoning_output_tokens": reasoning}}}}
    ghost = {"type": "ghost_snapshot", "ghost_commit": {"id": "4a64dbe7", "parent": "4272a68a",
                                                          "preexisting_untracked_files": []}}
    think = {"type": "reasoning", "summary": [], "content": None, "encrypted_content": "gAAAAB..."}
    call = {"type": "function_call", "name": "shell", "arguments": "{}", "call_id": "c1"}
    lines = [
        {"timestamp": "2025-11-23T19:30:18Z", "type": "session_meta",
         "payload": {"id": "s", "instructions": None, "cli_version": "0.60.1"}},
        {"timestamp": "2025-11-23T19:30:18Z", "type": "turn_context", "payload": {"model": "gpt-5.1-codex-max"}},
        ri({"type": "message", "role": "user", "content": [{"type": "input_text", "text": "go"}]}),
        ri(ghost), ri(think), ri(call), tc(5153, 64),
        ri({"type": "function_call_output", "call_id": "c1", "output": "done"}), ri(ghost),
        ri(think), ri({"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "ok"}]}),
        tc(5300, 32),
    ]
    reqs, skipped, records = read(codex.CodexReader(), write(tmp_path, "r.jsonl", lines))
    assert records == 12 and len(reqs) == 2
    assert {r.extra["opaque_prefix_key"] for r in reqs} == {"codex:gpt-5.1-codex-max:0.60.1"}
    assert "opaque_reasoning_tokens" not in reqs[0].extra  # the first prompt holds no reasoning yet
    assert reqs[1].extra["opaque_reasoning_tokens"] == 64  # call 1's reasoning, sent back on call 2
    assert [r.usage.prompt_tokens for r in reqs] == [5153, 5300]
    (note,) = skipped
    assert (note.record, note.bad) == (4, False) and note.reason.startswith("2 ghost_snapshot items")


def test_codex_usage_before_or_after_the_items_goes_to_its_own_call(tmp_path):
    """Reader semantics (not a figure): Codex 0.60 writes a call's token_count before the call's
    items (and repeats the last one, and writes info-null heartbeats); 0.1xx writes it after. The
    k-th new cumulative usage is the k-th call's either way. A search run in a call is listed as its
    own (server_tool_new) and in every later prompt (server_tool_ids); encrypted reasoning is carried
    only within the user turn that produced it."""
    def ri(payload):
        return {"timestamp": "2025-11-23T19:30:19Z", "type": "response_item", "payload": payload}

    def tc(total, inp, reasoning=0):
        usage = {"input_tokens": inp, "cached_input_tokens": 0, "output_tokens": 40, "reasoning_output_tokens": reasoning}
        return {"timestamp": "2025-11-23T19:30:20Z", "type": "event_msg", "payload": {
            "type": "token_count", "info": {"total_token_usage": {"input_tokens": total}, "last_token_usage": usage}}}

    user = ri({"type": "message", "role": "user", "content": [{"type": "input_text", "text": "go"}]})
    think = ri({"type": "reasoning", "summary": [], "content": None, "encrypted_content": "gAAAAB..."})
    search = ri({"type": "web_search_call", "status": "completed", "action": {"type": "search", "query": "q"}})
    call = ri({"type": "function_call", "name": "shell", "arguments": "{}", "call_id": "c1"})
    out = ri({"type": "function_call_output", "call_id": "c1", "output": "done"})
    say = ri({"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "ok"}]})
    heartbeat = {"timestamp": "2025-11-23T19:30:20Z", "type": "event_msg", "payload": {"type": "token_count", "info": None}}
    meta = {"timestamp": "2025-11-23T19:30:18Z", "type": "session_meta", "payload": {"id": "s", "cli_version": "0.60.1"}}
    ctx = {"timestamp": "2025-11-23T19:30:18Z", "type": "turn_context", "payload": {"model": "gpt-5.1-codex-max"}}
    before = [meta, ctx, user, heartbeat, tc(100, 100, 7), think, search, call, out, tc(100, 100, 7), tc(250, 150),
              say, user, tc(450, 200), say]
    after = [meta, ctx, user, think, search, call, tc(100, 100, 7), out, tc(100, 100, 7), say, tc(250, 150),
             user, say, tc(450, 200)]
    for lines in (before, after):
        reqs, _, _ = read(codex.CodexReader(), write(tmp_path, "r.jsonl", lines))
        assert [r.usage.prompt_tokens for r in reqs] == [100, 150, 200]
        assert [r.extra.get("opaque_reasoning_tokens") for r in reqs] == [None, 7, None]  # turn 2 drops turn 1's
        (sid,) = reqs[0].extra["server_tool_new"]
        assert "server_tool_new" not in reqs[1].extra and reqs[1].extra["server_tool_ids"] == [sid]
        assert reqs[2].extra["server_tool_ids"] == [sid]
