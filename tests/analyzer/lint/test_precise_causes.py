"""Issue 24 item 7: the volatile values and drifts a peer linter names, each with its own precise
code (never a generic PC401) and an auto-fix where one is safe.

Inputs are built here (our own texts): a system prompt that differs between two requests of
one session only by the drifting value, inside a longer stable prompt.
"""

from __future__ import annotations

import json

import pytest

from prefixcache.analyzer import api
from prefixcache.analyzer.cache.simulate.reuse import reuse
from prefixcache.analyzer.canonical.causes import canonicalize_explained
from prefixcache.analyzer.ingest import Ingest
from tests.analyzer.canonical.drift_logs import SECTIONS, TOOLS, TURNS

STABLE = "\n\n".join(SECTIONS)

#: (what drifts, system prompt of request 0, of request 1, lint's code, canonicalize fixes it)
DRIFTS = [
    ("prefixed correlation id", "Trace: trace_9fbc21aa", "Trace: trace_02de77bb", "PC102", True),
    ("request id with a dash", "Handling req-4f2a9c1 now.", "Handling req-8b31d07 now.", "PC102", True),
    ("long counter", "This is seq 1000240 of the run.", "This is seq 1000241 of the run.", "PC102", True),
    ("weekday", "Today is Monday.", "Today is Tuesday.", "PC101", True),
    ("month name", "The current month: March.", "The current month: April.", "PC101", True),
    ("e-mail address", "You help ada@example.com today.", "You help bob@example.com today.", "PC104", False),
    ("locale", "locale: en-GB", "locale: fr-FR", "PC104", False),
    ("NFC vs NFD", "Caf\u00e9 r\u00e9sum\u00e9 rules.", "Cafe\u0301 re\u0301sume\u0301 rules.", "PC303", True),
    ("JSON key order in text", 'Settings {"mode": "fast", "retries": 2}', 'Settings {"retries": 2, "mode": "fast"}',
     "PC304", True),
    ("rotating few-shot examples", "Q: one\nA: 1\nQ: two\nA: 2\nQ: three\nA: 3",
     "Q: four\nA: 4\nQ: five\nA: 5\nQ: six\nA: 6", "PC406", False),
]


def _log(tmp_path, first: str, second: str, tools=(TOOLS, TOOLS)):
    lines, msgs = [], []
    for k, (head, t) in enumerate(((first, tools[0]), (second, tools[1]))):
        msgs.append({"role": "user", "content": TURNS[k]})
        body = {"model": "gpt-4.1", "user": "s", "messages": [{"role": "system", "content": head + "\n\n" + STABLE},
                                                               *msgs], "tools": list(t)}
        lines.append(json.dumps(body, ensure_ascii=False))
        msgs.append({"role": "assistant", "content": f"Done with step {k}."})
    path = tmp_path / "log.jsonl"
    path.write_text("\n".join(lines) + "\n")
    return str(path)


@pytest.mark.parametrize("what,first,second,code,fixable", DRIFTS, ids=[d[0] for d in DRIFTS])
def test_precise_code_and_fix(tmp_path, what, first, second, code, fixable) -> None:
    path = _log(tmp_path, first, second)
    pair = [f for f in api.lint([path]).findings if f.request == 1 and f.code not in ("PC103", "PC601")]
    assert pair and pair[0].code == code, (what, [(f.code, f.message) for f in pair])
    reqs = list(Ingest([path]))
    results = canonicalize_explained(reqs)
    after = reuse([c.request for c in results])
    repaired = after[1].reusable_tokens >= after[0].prompt_tokens
    assert repaired == fixable, what
    if not fixable:  # reported with lint's own code, not rewritten
        assert [(t.code, t.applied) for t in results[1].transformations] == [(code, False)]


def test_a_tool_added_is_pc202_alone(tmp_path) -> None:
    """A tool added to the request: the tools changed (PC202), the template did not (no PC501)."""
    extra = {"type": "function", "function": {"name": "web_fetch", "description": "Fetch a page.",
                                              "parameters": {"type": "object", "properties": {}}}}
    path = _log(tmp_path, "Hello.", "Hello.", tools=(TOOLS, [*TOOLS, extra]))
    codes = [f.code for f in api.lint([path]).findings if f.request == 1 and f.code not in ("PC103", "PC601")]
    assert codes == ["PC202"]


def test_stable_values_raise_nothing(tmp_path) -> None:
    for _, first, _, _, _ in DRIFTS:
        path = _log(tmp_path, first, first)
        assert [f.code for f in api.lint([path]).findings if f.request == 1 and f.code not in ("PC103", "PC601")] == []


def test_a_knowledge_cutoff_date_is_not_a_risk(tmp_path) -> None:
    """kvlint's "ignores an unchanged timestamp" (``Knowledge cutoff 2024-06-01``): a cutoff date
    is constant by definition, so PC103 (a risk: "if it changes") says nothing; a dated line
    that is not a cutoff still gets its info, and a cutoff that does change is still PC101."""
    def found(path):  # PC601: the built prompt is below OpenAI's 1,024-token minimum, as in the other tests
        return [(f.code, f.severity) for f in api.lint([path]).findings if f.code != "PC601"]
    assert found(_log(tmp_path, "Knowledge cutoff 2024-06-01. Answer briefly.",
                      "Knowledge cutoff 2024-06-01. Answer briefly.")) == []
    assert found(_log(tmp_path, "Release notes of 2024-06-01.", "Release notes of 2024-06-01.")) == [("PC103", "info")]
    path = _log(tmp_path, "Knowledge cutoff 2024-06-01.", "Knowledge cutoff 2024-07-01.")
    assert [f.code for f in api.lint([path]).findings if f.request == 1] == ["PC101"]


def test_per_user_values_across_sessions_name_pc104(tmp_path) -> None:
    """Independent requests (one session each, as kvlint's engine test builds them) whose system
    prompts differ only by a user's e-mail: PC602 (across sessions) names PC104 as the cause."""
    lines = [json.dumps({"model": "gpt-4.1", "user": f"u{i}", "messages": [
        {"role": "system", "content": f"{STABLE}\nuser: person{i}@example.com"},
        {"role": "user", "content": "Where is my order?"}]}) for i in range(4)]
    path = tmp_path / "users.jsonl"
    path.write_text("\n".join(lines) + "\n")
    found = [(f.code, f.related, f.certain) for f in api.lint([str(path)]).findings if f.code != "PC601"]
    assert found == [("PC602", "PC104", True)] * 3
