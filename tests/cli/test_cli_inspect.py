"""`prefixcache inspect` end to end: JSON schema, accounting, errors and exit codes."""

from __future__ import annotations

import orjson
import pytest
from typer.testing import CliRunner

from prefixcache.cli.app import app
from tests.helpers import EXAMPLES, SAMPLES, existing

runner = CliRunner()

REQUIRED = {"source", "record", "session", "index", "format", "model", "tokenizer", "exact", "prompt_tokens",
            "reported_prompt_tokens", "reported_cached_tokens", "segments"}


def _json_lines(args: list[str]) -> tuple[int, list[dict], str]:
    res = runner.invoke(app, ["inspect", "--json", *args])
    lines = [orjson.loads(line) for line in res.stdout.splitlines() if line.strip()]
    return res.exit_code, lines, res.stderr


def test_example_session_json_schema() -> None:
    code, lines, _ = _json_lines([str(EXAMPLES / "agent_session.jsonl")])
    assert code == 0
    *reqs, last = lines
    assert len(reqs) == 6 and all(REQUIRED <= set(r) for r in reqs)
    assert [r["index"] for r in reqs] == list(range(6))
    assert len({r["session"] for r in reqs}) == 1
    # each request re-sends the conversation: prompts grow strictly
    sizes = [r["prompt_tokens"] for r in reqs]
    assert sizes == sorted(sizes) and len(set(sizes)) == 6
    for r in reqs:
        assert sum(s["tokens"] for s in r["segments"]) == r["prompt_tokens"]
        kinds = {s["kind"] for s in r["segments"]}
        assert {"system", "message"} <= kinds
    s = last["summary"]
    assert (s["files"], s["records"], s["requests"], s["sessions"], s["skipped"]) == (1, 6, 6, 1, [])


def test_whole_samples_dir_is_accounted_for() -> None:
    existing(SAMPLES)
    code, lines, _ = _json_lines(["--skip-bad", str(SAMPLES)])
    assert code == 0
    *reqs, last = lines
    s = last["summary"]
    assert s["files"] == 8
    assert s["requests"] == len(reqs)
    assert not [k for k in s["skipped"] if k["bad"]]
    by_format: dict[str, int] = {}
    for r in reqs:
        by_format[r["format"]] = by_format.get(r["format"], 0) + 1
    assert by_format["mooncake"] == 3993
    assert by_format["claude-code"] == 170
    assert by_format["swe-agent"] == 13
    assert by_format["mini-swe-agent"] == 4 + 10  # v1.1: 4 logged calls (the 5th failed to connect); legacy list: 10 assistant turns


def test_reported_usage_passes_through(samples) -> None:
    code, lines, _ = _json_lines([str(samples / "mini_swe_agent_v1.1_deepseek_reasoner_pvlib-1606.traj.json")])
    assert code == 0
    reqs = lines[:-1]
    assert all(r["reported_cached_tokens"] is not None for r in reqs)
    # DeepSeek reports cache hits in 64-token units
    assert all(r["reported_cached_tokens"] % 64 == 0 for r in reqs)


@pytest.mark.parametrize(
    "content, expect",
    [
        (b'{"model": "gpt-4o", "messages": [{"role": "user", "content": "hi"}]}\n{"model": "gpt-4o", "messa', ":2"),
        (b"\x00\x01\x02\xff\xfe binary", "bad.jsonl"),
        (b"", "empty"),
    ],
)
def test_bad_input_exits_2_with_location(tmp_path, content, expect) -> None:
    bad = tmp_path / "bad.jsonl"
    bad.write_bytes(content)
    res = runner.invoke(app, ["inspect", str(bad)])
    assert res.exit_code == 2
    assert "Traceback" not in res.output
    assert expect in res.stderr
    res = runner.invoke(app, ["inspect", "--skip-bad", str(bad)])
    assert res.exit_code == 0


def test_missing_path_is_a_clear_error(tmp_path) -> None:
    res = runner.invoke(app, ["inspect", str(tmp_path / "nope.jsonl")])
    assert res.exit_code == 2
    assert "nope.jsonl" in res.stderr and "Traceback" not in res.output
