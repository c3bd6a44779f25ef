"""Issue 25 item 3: renderers and the session tokenizer reuse what an unchanged prefix gave the
session's previous request, and give exactly what a fresh, stateless pass gives."""

from __future__ import annotations

import jinja2
import jinja2.sandbox
import pytest

from prefixcache.analyzer.ingest import Ingest
from prefixcache.analyzer.prepare import Preparer
from prefixcache.analyzer.render.sandbox import BoundedSandbox, render_bounded
from prefixcache.analyzer.tokenize import SessionTokenizer
from tests.helpers import CASES, SAMPLES

INPUTS = [SAMPLES / "claude_code_session_v1.0.98_fe5e1c67.jsonl",
          SAMPLES / "swe_agent_traj_function_calling_with_per_step_messages_marshmallow-1867.traj",
          SAMPLES / "codex_rollout_synthetic_fixture_claude-code-log.jsonl",
          *sorted(CASES.glob("*.jsonl"))]


@pytest.mark.parametrize("path", INPUTS, ids=lambda p: p.name)
def test_session_state_changes_nothing(path):
    warm, reqs = Preparer(), [r for r in Ingest([str(path)]) if r.messages]
    assert len(reqs) > 1
    for r in reqs:
        got = warm.prepare(r)
        cold = Preparer()  # no session state: renders and encodes the request from scratch
        cold._opaque = dict(warm._opaque)  # a hidden prefix sized from the first call with usage (input order)
        pipe = cold.pipeline(r.model)
        rendered = pipe.renderer.render(r)
        tokens = SessionTokenizer(pipe.tokenizer, incremental=False).tokenize(
            rendered, r.session, key=str(r.extra.get("opaque_prefix_key", "")))
        want = cold.finish(r, rendered, tokens)
        assert got.rendered == want.rendered
        assert got.tokens.segments == want.tokens.segments and list(got.tokens.ids) == list(want.tokens.ids)
        assert (got.tokens.exact, got.tokens.opaque_prefix_tokens) == (want.tokens.exact, want.tokens.opaque_prefix_tokens)


def test_an_earlier_request_rendered_again_leaves_the_session_state():
    preparer = Preparer()
    reqs = [r for r in Ingest([str(INPUTS[1])]) if r.messages]
    renderer = preparer.pipeline(reqs[0].model).renderer
    first = [renderer.render(r) for r in reqs[:4]]
    state = renderer._sessions[reqs[3].session]
    assert renderer.render(reqs[1]) == first[1]  # lint explaining a break renders an earlier request again
    assert renderer._sessions[reqs[3].session] is state and state.index == reqs[3].index


def test_sandbox_reads_dict_items_and_methods_as_jinja2_does():
    env = BoundedSandbox()
    t = env.from_string("{{ m.role }}|{{ m.items is defined }}|{{ m.nope is defined }}|"
                        "{% for x in [1, 2] %}{{ loop.first }}{{ loop.last }}{{ loop.index }}{% endfor %}")
    assert render_bounded(t, {"m": {"role": "user", "items": "a key named items"}}) == \
        "user|True|False|TrueFalse1FalseTrue2"
    plain = jinja2.sandbox.ImmutableSandboxedEnvironment().from_string("{{ m.items }}|{{ m.get }}|{{ m.x }}")
    d = {"items": 1, "x": 2}
    got = render_bounded(env.from_string("{{ m.items }}|{{ m.get }}|{{ m.x }}"), {"m": d})
    assert got == plain.render(m=d) and got.startswith("<built-in method items") and got.endswith("|2")
