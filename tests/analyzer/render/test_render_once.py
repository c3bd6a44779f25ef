"""Issue 25 item 3: a request renders once (two variants in one call) plus the message prefixes its
session has not rendered; the tools block and the tool-call check are found once per session. The
figures (segments, warnings) equal those of a renderer that starts afresh for every request."""

from __future__ import annotations

from pathlib import Path

from prefixcache.analyzer.ingest import Ingest
from prefixcache.analyzer.model import Message, Provenance, Request, ToolCall, ToolDef
from prefixcache.analyzer.prepare import resolve
from prefixcache.analyzer.render import JinjaRenderer, load_template, shipped_templates, worker
from tests.helpers import SAMPLES, existing

SWE = "swe_agent_traj_function_calling_with_per_step_messages_marshmallow-1867.traj"
TOOLS = (ToolDef(name="bash", description="Run a command", parameters={"type": "object", "properties": {"c": {"type": "string"}}}),
         ToolDef(name="submit", description="Submit the patch", parameters={"type": "object", "properties": {}}))


def _fresh(name: str, req: Request):
    return JinjaRenderer(load_template(name), name, {"bos_token": "<s>"}, trusted=True).render(req)


def _same(a, b) -> None:
    assert a.text == b.text and a.segments == b.segments and a.warnings == b.warnings


def test_a_session_renders_each_request_once_with_the_figures_of_a_fresh_render() -> None:
    existing(SAMPLES)
    reqs = list(Ingest([str(SAMPLES / SWE)]))
    shared = JinjaRenderer(load_template("chatml_tools"), "chatml_tools", {"bos_token": "<s>"}, trusted=True)
    per_request = []
    for req in reqs:
        before = shared.renders
        _same(shared.render(req), _fresh("chatml_tools", req))
        per_request.append(shared.renders - before)
    # the first six turns only append (an assistant message and an observation): full + base + the one
    # new prefix (the second also checks once whether the template drops tool calls); from the seventh,
    # SWE-agent rewrites old observations, so the prefixes after the first rewritten one render again
    assert per_request[:6] == [4, 4, 3, 3, 3, 3], per_request
    assert per_request[6] > 3 and sum(per_request) == 104, per_request


def _turns(n: int) -> list[Request]:
    msgs = [Message(role="system", content="You are a coding agent."), Message(role="user", content="fix the bug")]
    out = []
    for i in range(n):
        msgs += [Message(role="assistant", content=f"step {i}",
                         tool_calls=(ToolCall(id=f"c{i}", name="bash", arguments=f'{{"c": "ls {i}"}}'),)),
                 Message(role="tool", content=f"file{i}.py", tool_call_id=f"c{i}")]
        out.append(Request(session="s", index=i, format="test", provenance=Provenance("t.jsonl", i + 1, "messages"),
                           messages=tuple(msgs), tools=TOOLS))
    return out


def test_tools_and_tool_calls_are_located_once_per_session() -> None:
    for name in sorted(shipped_templates()):
        shared = JinjaRenderer(load_template(name), name, {"bos_token": "<s>"}, trusted=True)
        counts = []
        for req in _turns(5):
            before = shared.renders
            _same(shared.render(req), _fresh(name, req))
            counts.append(shared.renders - before)
        # after the first turn: full + base + one new prefix (the tools block, the tool starts and
        # the tool-call check are not rendered again)
        assert counts[1:] == [3, 3, 3, 3], (name, counts)


def test_only_the_shipped_templates_render_in_process(tmp_path: Path) -> None:
    assert {"chatml_tools", "deepseek_v32"} <= shipped_templates()
    assert resolve("some-model", "chatml_tools").renderer.chat.trusted
    own = tmp_path / "mine.jinja"
    own.write_text("{% for m in messages %}<{{ m.role }}>{{ m.content }}{% endfor %}")
    pipeline = resolve("some-model", str(own))
    assert not pipeline.renderer.chat.trusted
    worker._stop()
    req = _turns(1)[0]
    assert pipeline.renderer.render(req).text.startswith("<system>You are a coding agent.")
    assert worker._WORKER and worker._WORKER[0].proc.is_alive()  # a user's template ran in the bounded worker
    # a file named like a shipped template is still the user's file
    (tmp_path / "chatml_tools.jinja").write_text("{{ messages[0].content }}")
    assert not resolve("some-model", str(tmp_path / "chatml_tools.jinja")).renderer.chat.trusted


def _paint_reference(n_chars, spans):
    """paint by its definition, one character at a time: each character belongs to the covering span of
    the highest priority (the later one among equals), else to the template; runs of one part merge."""
    from itertools import groupby

    from prefixcache.analyzer.model import Segment
    from prefixcache.analyzer.render.segments import _PRIORITY

    owners = []
    for c in range(n_chars):
        covering = [(_PRIORITY.get(s.kind, 0), i) for i, s in enumerate(spans) if s.start <= c < s.end]
        s = spans[max(covering)[1]] if covering else None
        owners.append((s.kind, s.label, s.ref) if s else ("template", "template", -1))
    out, pos = [], 0
    for (kind, label), run in groupby(owners, key=lambda o: o[:2]):
        run = list(run)
        out.append(Segment(kind, label, pos, pos + len(run), run[-1][2]))
        pos += len(run)
    return tuple(out)


def test_paint_sweeps_to_the_same_segments_as_testing_every_span() -> None:
    import random

    from prefixcache.analyzer.model import Segment
    from prefixcache.analyzer.render.segments import _PRIORITY, paint

    rng = random.Random(25)
    kinds = [*_PRIORITY, "other"]
    for _ in range(3000):
        n = rng.randint(0, 40)
        spans = [Segment(rng.choice(kinds), rng.choice("ab"), rng.randint(-3, n + 3), rng.randint(-3, n + 3),
                         rng.randint(-1, 2)) for _ in range(rng.randint(0, 8))]
        assert paint(n, spans) == _paint_reference(n, spans), (n, spans)
        cuts = sorted(rng.randint(0, n) for _ in range(2 * rng.randint(0, 5)))  # in order, no overlap
        ordered = [Segment(rng.choice(kinds), rng.choice("ab"), a, b, rng.randint(-1, 2)) for a, b in zip(cuts[::2], cuts[1::2])]
        assert paint(n, ordered) == _paint_reference(n, ordered), (n, ordered)


def test_hidden_prefix_ids_are_built_without_a_python_int_per_token() -> None:
    from array import array

    from prefixcache.analyzer.tokenize.session import _with_pseudo, pseudo_ids

    assert _with_pseudo("k", 4, array("I", [1, 2, 3])).tolist() == pseudo_ids("k", 4) + [1, 2, 3]
    assert _with_pseudo("k", 2, array("q", [-5, 2])).tolist() == pseudo_ids("k", 2) + [-5, 2]
    assert _with_pseudo("k", 3, array("I")).tolist() == pseudo_ids("k", 3)
    assert pseudo_ids("k", 2) == pseudo_ids("k", 9)[:2] and pseudo_ids("other", 9)[:2] != pseudo_ids("k", 2)
