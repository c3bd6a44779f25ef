"""Issue 24 item 1: a rewrite keeps the structure of what the model is told.

A volatile value inside a tag block, a fenced JSON block, a heading or a JSON value is replaced
by a stable placeholder (its value carried, with a plain label, in the newest turn); a plain
line is moved whole; every rewritten text is re-parsed (:mod:`~prefixcache.analyzer.canonical.structure`)
and a rewrite that would change its structure is not applied. Tested on the issue's input (a
``<memory updated="…">`` block with a millisecond timestamp), on real system prompts from the
samples with such blocks inserted, and as a property over composed prompts.
"""

from __future__ import annotations

import json
from collections import Counter

from hypothesis import given, settings
from hypothesis import strategies as st

from prefixcache.analyzer.cache.simulate.reuse import reuse
from prefixcache.analyzer.canonical.causes import canonicalize_explained
from prefixcache.analyzer.canonical.rewrite import PLACEHOLDER, canonicalize_all
from prefixcache.analyzer.canonical.structure import structure, structure_changes
from prefixcache.analyzer.ingest import Ingest
from prefixcache.analyzer.lint.rules import REGISTRY
from prefixcache.analyzer.model import Message, Provenance, Request
from prefixcache.analyzer.volatile import find_volatile
from tests.analyzer.canonical.drift_logs import memory_block, session, write
from tests.helpers import FIXTURES, existing

REAL = json.loads(existing(FIXTURES / "issue24" / "real_prompts.json").read_text())


def _full_reuse(reqs, figures) -> bool:
    return all(figures[k].reusable_tokens >= figures[k - 1].prompt_tokens for k in range(1, len(reqs)))


def _check_rewrite(reqs) -> list:
    """Canonicalize a one-session input and assert what item 1 asks of every request."""
    results = canonicalize_explained(reqs)
    for c in results:
        before, after = c.original.messages[0].content, c.request.messages[0].content
        assert structure_changes(before, after) == [], (c.original.index, structure_changes(before, after))
        for m in c.request.messages[1:]:  # the carried values hold no markup: no tag opens in a turn
            assert structure(m.content).tags == structure(next(
                o.content for o in c.original.messages if o.role == m.role and m.content.startswith(o.content))).tags
    after = reuse([c.request for c in results])
    assert _full_reuse(reqs, after), [(a.reusable_tokens, a.prompt_tokens) for a in after]
    left = [t for c in results for t in c.transformations if not t.applied and REGISTRY[t.code].scope == "pair"]
    assert left == [], left  # lint finds no break in the rewritten log
    return results


def test_memory_block_with_a_millisecond_timestamp(tmp_path) -> None:
    reqs = list(Ingest([str(write(tmp_path / "memory.jsonl", memory_block()))]))
    assert not _full_reuse(reqs, reuse(reqs))
    results = _check_rewrite(reqs)
    system = results[2].request.messages[0].content
    assert '<memory updated="[timestamp: see the end of the conversation]">' in system
    assert system.count("<memory") == system.count("</memory>") == 1
    newest = results[2].request.messages[-1].content
    assert newest.endswith("memory updated (timestamp): 2026-03-02T10:31:02.139Z")
    assert "<" not in newest and "</memory>" not in " ".join(m.content for m in results[2].request.messages[1:])
    assert {t.code for c in results for t in c.transformations} == {"PC101"}


def _drifting(base: str, k: int) -> str:
    """A real prompt with volatile values in every kind of structure, changing with ``k``."""
    ts = f"2026-03-02T10:{31 + k:02d}:0{k}.{100 + k}Z"
    blocks = [f'<context generated="{ts}">\nWorking directory: /repo\n</context>',
              f'```json\n{{"session_started": "{ts}", "retries": 0}}\n```',
              f"Current time: 2026-03-02 10:{31 + k:02d}:0{k} UTC"]
    paragraphs = base.split("\n\n")
    return "\n\n".join([paragraphs[0], *blocks, *paragraphs[1:]])


def test_real_system_prompts_keep_their_structure(tmp_path) -> None:
    for name, prompt in REAL.items():
        reqs = list(Ingest([str(write(tmp_path / f"{name}.jsonl", session([_drifting(prompt["text"], k)
                                                                             for k in range(3)])))]))
        results = _check_rewrite(reqs)
        system = results[1].request.messages[0].content
        assert "Current time" not in system, name  # a plain line moves whole
        assert system.count(PLACEHOLDER.format(kind="timestamp")) == 2, name  # tag attribute and JSON value
        assert json.loads(system.split("```json\n")[1].split("\n```")[0])["retries"] == 0
        base = structure(prompt["text"])
        assert structure(system).headings == base.headings and structure(system).fences == base.fences + 2


def test_a_value_that_no_placeholder_can_replace_is_left_in_place() -> None:
    """An epoch number inside a JSON value: moving its line or quoting a placeholder in would
    break the JSON, so the value stays and the rewrite is reported as not applied."""
    def req(k: int) -> Request:
        system = f'Config:\n\n{{"deployed_at": {1772448000000 + k * 1000}, "region": "eu"}}\n\nBe brief.'
        return Request("s", k, "openai-chat", Provenance("x.jsonl", k + 1),
                       (Message("system", system), Message("user", f"turn {k}")))
    results = canonicalize_all([req(0), req(1)])
    assert all(c.request == c.original for c in results)
    logs = [t for c in results for t in c.transformations]
    assert logs and all(not t.applied and "would break the structure (JSON values changed" in t.description
                        for t in logs)


_VALUES = st.builds(lambda h, m, s, ms: f"2026-03-02T{h:02d}:{m:02d}:{s:02d}.{ms:03d}Z",
                    st.integers(0, 23), st.integers(0, 59), st.integers(0, 59), st.integers(0, 999))
_WORDS = st.lists(st.sampled_from(["alpha", "beta", "gamma", "delta", "tests", "repo", "pytest", "style"]),
                  min_size=2, max_size=6).map(" ".join)


def _block(kind: str, words: str, value: str | None) -> str:
    v = value or "none"
    return {"plain": f"{words}.",
            "clock": f"Current time: {v}" if value else f"{words}!",
            "tag": f'<note at="{v}">\n{words}\n</note>' if value else f"<note>\n{words}\n</note>",
            "fence": f'```json\n{{"at": "{v}", "words": "{words}"}}\n```',
            "heading": f"## {words}" + (f" as of {value}" if value else ""),
            "json": f'{{"words": "{words}", "at": "{v}"}}'}[kind]


_PROMPT = st.lists(st.tuples(st.sampled_from(["plain", "clock", "tag", "fence", "heading", "json"]), _WORDS,
                             st.booleans()), min_size=2, max_size=7)


@settings(max_examples=40, deadline=None, derandomize=True)
@given(_PROMPT, st.lists(_VALUES, min_size=2, max_size=3, unique=True))
def test_any_rewrite_of_a_well_formed_prompt_stays_well_formed(parts, values) -> None:
    """Property: every rewritten system prompt has the structure of the original, and every
    line that holds no volatile value is kept, the same multiset of them."""
    def system(v: str) -> str:
        return "\n\n".join(_block(kind, words, v if volatile else None) for kind, words, volatile in parts)
    reqs = [Request("s", k, "openai-chat", Provenance("x.jsonl", k + 1),
                    (Message("system", system(v)), Message("user", f"question {k}")))
            for k, v in enumerate(values)]
    for c in canonicalize_all(reqs):
        before, after = c.original.messages[0].content, c.request.messages[0].content
        assert structure_changes(before, after) == []

        def kept(text: str) -> Counter:
            return Counter(ln for ln in text.splitlines() if ln.strip() and not find_volatile(ln) and "[timestamp:" not in ln)
        assert kept(after) == kept(before)


def test_structure_check_of_json_nested_past_the_limit_is_not_a_traceback():
    """A prompt line holding JSON 5,000 levels deep (stdlib json raised RecursionError on it): the structure check
    parses through the one depth-limited entry point and calls it no JSON block."""
    deep = "config\n" + "[" * 5000 + "]" * 5000 + "\n"
    assert structure(deep).json_blocks == 0 and structure('{"a": [1, {"b": 2}]}').json_blocks == 1
