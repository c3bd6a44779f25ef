"""Writers (same format / --to openai) and the canonicalize command."""

from __future__ import annotations

import io
import json
from dataclasses import replace
from pathlib import Path

import orjson
import pytest
import typer
from typer.testing import CliRunner

from prefixcache.analyzer.canonical.rewrite import canonicalize_requests
from prefixcache.analyzer.errors import ConfigError
from prefixcache.analyzer.ingest import Ingest
from prefixcache.analyzer.canonical.writers import write_requests
from prefixcache.cli import canonicalize as canonicalize_cli
from tests.helpers import CASES, ROOT, existing


def bare(r):
    msgs = tuple(replace(m, path="", cache_control=None) for m in r.messages)
    return msgs, tuple((t.name, json.dumps(t.parameters)) for t in r.tools), r.model


@pytest.mark.parametrize("case", ["timestamp_in_system.jsonl", "anthropic_rolling_breakpoint.jsonl",
                                  "toolcall_args_reserialized.jsonl"])
def test_write_back_unchanged_is_byte_identical_json(case: str) -> None:
    """Writing the requests as read reproduces every original record (fields the model lacks included)."""
    path = existing(CASES) / case
    buf = io.BytesIO()
    n = write_requests(Ingest([str(path)]), buf)
    lines = path.read_text().splitlines()
    assert n == len(lines)
    assert [json.loads(x) for x in buf.getvalue().decode().splitlines()] == [json.loads(x) for x in lines]


@pytest.mark.parametrize("case", ["session_id_in_system.jsonl", "anthropic_rolling_breakpoint.jsonl",
                                  "whitespace_drift.jsonl"])
def test_canonical_round_trip(case: str, tmp_path) -> None:
    reqs = list(Ingest([str(existing(CASES) / case)]))
    canon = canonicalize_requests(reqs)
    out = tmp_path / "out.jsonl"
    with open(out, "wb") as fh:
        write_requests(canon, fh)
    back = list(Ingest([str(out)]))
    assert back[0].format == reqs[0].format
    assert [bare(r) for r in back] == [bare(r) for r in canon]
    first = json.loads(out.read_text().splitlines()[0])
    original = json.loads((CASES / case).read_text().splitlines()[0])
    assert {k for k in original if k not in ("messages", "tools", "system")} <= set(first)  # max_tokens etc. kept


def test_to_openai_for_claude_code_and_errors(samples, tmp_path) -> None:
    cc = samples / "claude_code_session_v1.0.98_fe5e1c67.jsonl"
    reqs = list(Ingest([str(cc)]))
    with pytest.raises(ConfigError, match="--to openai"):
        write_requests(reqs[:1], io.BytesIO())
    out = tmp_path / "cc.jsonl"
    with open(out, "wb") as fh:
        assert write_requests(reqs, fh, to="openai") == len(reqs) == 170
    back = list(Ingest([str(out)]))
    assert len(back) == 170 and {r.format for r in back} == {"openai-chat"}
    assert [len(r.tools) for r in back] == [len(r.tools) for r in reqs]
    trace = list(Ingest([str(samples / "kvcache_tester_claudecode_hashids64_trace_0001.json")]))
    with pytest.raises(ConfigError, match="block-hash trace"):
        write_requests(trace[:1], io.BytesIO(), to="openai")
    with pytest.raises(ConfigError, match="only target"):
        write_requests(reqs[:1], io.BytesIO(), to="anthropic")


def _app() -> typer.Typer:
    app = typer.Typer()
    canonicalize_cli.register(app)
    app.command("noop")(lambda: None)  # a second command keeps typer in multi-command mode
    return app


def test_cli_canonicalize_json_report(tmp_path) -> None:
    out = tmp_path / "canon.jsonl"
    res = CliRunner().invoke(_app(), ["canonicalize", str(existing(CASES) / "timestamp_in_system.jsonl"),
                                      "--out", str(out), "--json"])
    assert res.exit_code == 0, res.output
    report = orjson.loads(res.output)
    assert report["written"] == 5 and out.exists()
    before, after = report["total"]["before"], report["total"]["after"]
    assert before["requests"] == after["requests"] == 5
    assert after["reusable_tokens"] / after["prompt_tokens"] > 0.7 > 0.35 > before["reusable_tokens"] / before["prompt_tokens"]
    # only the clock drifted: the stable (if not sorted) tools and arguments are left as sent
    assert {t["code"] for t in report["transformations"]} == {"PC101"}
    assert len(list(Ingest([str(out)]))) == 5
    res = CliRunner().invoke(_app(), ["canonicalize", str(existing(CASES) / "timestamp_in_system.jsonl"),
                                      "--out", str(out), "--json", "--normalize", "--force"])
    assert res.exit_code == 0, res.output
    assert {"PC101", "PC201", "PC203", "PC301"} <= {t["code"] for t in orjson.loads(res.output)["transformations"]}


def test_cli_canonicalize_table_skip_and_bad_code(tmp_path) -> None:
    out = tmp_path / "canon.jsonl"
    res = CliRunner().invoke(_app(), ["canonicalize", str(existing(CASES) / "tool_order_shuffle.jsonl"),
                                      "--out", str(out), "--only", "PC201"])
    assert res.exit_code == 0, res.output
    assert "PC201" in res.output and "PC203" not in res.output and "total" in res.output
    bad = CliRunner().invoke(_app(), ["canonicalize", str(CASES / "tool_order_shuffle.jsonl"), "--out", str(out),
                                      "--skip", "PC403"])
    assert bad.exit_code == 2 and "reported, never rewritten" in bad.output


FIXTURES = ROOT / "tests" / "fixtures" / "ingest"


@pytest.mark.parametrize("name", ["chat_pairs.json", "anthropic_pair.json"])
def test_pairs_written_back_exactly_and_kept_as_pairs(name: str, tmp_path) -> None:
    """Review 1 bug 4: {request, response} pairs keep their response; nothing is added."""
    path = FIXTURES / name
    original = json.loads(path.read_text())
    original = original if isinstance(original, list) else [original]
    reqs = list(Ingest([str(path)]))
    buf = io.BytesIO()
    assert write_requests(reqs, buf) == len(original)
    assert [json.loads(x) for x in buf.getvalue().decode().splitlines()] == original
    # a changed request: the body is patched, the response half survives untouched
    changed = [replace(r, tools=tuple(reversed(r.tools)) if len(r.tools) > 1 else r.tools,
                       messages=(*r.messages[:-1], replace(r.messages[-1], content="edited", text_blocks=None)))
               for r in reqs]
    buf = io.BytesIO()
    write_requests(changed, buf)
    out = [json.loads(x) for x in buf.getvalue().decode().splitlines()]
    assert [sorted(o) for o in out] == [sorted(o) for o in original] == [["request", "response"]] * len(original)
    assert [o["response"] for o in out] == [o["response"] for o in original]
    assert all("timestamp" not in o["request"] for o in out)
    back = list(Ingest([str(_write(tmp_path / "back.jsonl", out))]))
    assert [(b.usage, b.timestamp) for b in back] == [(r.usage, r.timestamp) for r in reqs]
    assert [b.messages[-1].content for b in back] == ["edited"] * len(reqs)


def _write(path: Path, records: list) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    return path


def test_to_openai_keeps_time_and_usage_in_a_pair_without_non_chat_fields(samples, tmp_path) -> None:
    reqs = list(Ingest([str(FIXTURES / "anthropic_pair.json")]))
    recs = [json.loads(x) for x in _lines(reqs, "openai")]
    assert sorted(recs[0]) == ["request", "response"]
    body = recs[0]["request"]
    assert set(body) <= {"model", "messages", "tools", "metadata", "user", "prompt_cache_key", "cache_salt"}
    assert recs[0]["response"]["usage"] == {"prompt_tokens": 2110, "completion_tokens": 42,
                                            "prompt_tokens_details": {"cached_tokens": 2000},
                                            "cache_creation_input_tokens": 100}
    back = list(Ingest([str(_write(tmp_path / "o.jsonl", recs))]))
    assert back[0].usage == reqs[0].usage and back[0].format == "openai-chat"
    cc = list(Ingest([str(samples / "claude_code_session_v1.0.98_fe5e1c67.jsonl")]))[:5]
    back = list(Ingest([str(_write(tmp_path / "cc.jsonl", [json.loads(x) for x in _lines(cc, "openai")]))]))
    assert [(b.timestamp, b.usage.cached_tokens) for b in back] == [(r.timestamp, r.usage.cached_tokens) for r in cc]


def _lines(reqs, to=None) -> list[str]:
    buf = io.BytesIO()
    write_requests(reqs, buf, to)
    return buf.getvalue().decode().splitlines()


def test_cli_input_format_and_select_ignore_aliases(tmp_path) -> None:
    out = tmp_path / "canon.jsonl"
    case = str(existing(CASES) / "tool_order_shuffle.jsonl")
    sel = CliRunner().invoke(_app(), ["canonicalize", case, "--out", str(out), "--select", "PC201",
                                      "--input-format", "openai-chat", "--json"])
    assert sel.exit_code == 0, sel.output
    assert {t["code"] for t in orjson.loads(sel.output)["transformations"] if t["applied"]} == {"PC201"}
    ign = CliRunner().invoke(_app(), ["canonicalize", case, "--out", str(out), "--ignore", "PC201,PC203", "--json",
                                      "--force"])
    assert ign.exit_code == 0, ign.output
    rows = orjson.loads(ign.output)["transformations"]
    assert not {"PC201", "PC203"} & {t["code"] for t in rows if t["applied"]}
    # the break is not repaired, so it is reported with lint's own code (issue 24 item 3)
    assert [(t["index"], t["code"]) for t in rows if not t["applied"]] == [(3, "PC201")]


def test_cli_out_never_overwrites_an_input_nor_silently_an_earlier_output(tmp_path) -> None:
    src = tmp_path / "log.jsonl"
    src.write_bytes((existing(CASES) / "tool_order_shuffle.jsonl").read_bytes())
    original = src.read_bytes()
    for extra in ([], ["--force"]):  # an input is never overwritten, even with --force
        res = CliRunner().invoke(_app(), ["canonicalize", str(src), "--out", str(src), *extra])
        assert res.exit_code == 2 and "is an input of this run" in res.output and src.read_bytes() == original
    out = tmp_path / "canon.jsonl"
    out.write_text("earlier\n")
    res = CliRunner().invoke(_app(), ["canonicalize", str(src), "--out", str(out)])
    assert res.exit_code == 2 and "pass --force" in res.output and out.read_text() == "earlier\n"
    res = CliRunner().invoke(_app(), ["canonicalize", str(src), "--out", str(out), "--force", "--format", "json"])
    assert res.exit_code == 0 and orjson.loads(res.output)["written"] == len(list(Ingest([str(out)])))


def test_cli_report_format_rich_or_json(tmp_path) -> None:
    case = str(existing(CASES) / "tool_order_shuffle.jsonl")
    runs = {opts: CliRunner().invoke(_app(), ["canonicalize", case, "--out", "-", *opts])
            for opts in (("--json",), ("--format", "json"), ("--format", "rich"), ())}
    assert all(r.exit_code == 0 for r in runs.values())
    assert runs[("--json",)].stderr == runs[("--format", "json")].stderr
    assert runs[("--format", "rich")].stderr == runs[()].stderr and "Transformations" in runs[()].stderr
    bad = CliRunner().invoke(_app(), ["canonicalize", case, "--out", "-", "--format", "sarif"])
    assert bad.exit_code == 2


def test_to_openai_of_a_log_that_is_not_json(tmp_path) -> None:
    """An Aider chat history (Markdown, not JSON: tests/fixtures/formats/samples, cut from the shared
    sample) is written ``--to openai`` from its requests alone: the writer never re-reads the
    original as JSON records (it did, and canonicalize failed with "invalid JSON" on a log lint reads),
    and the written log lints at the figure canonicalize prints."""
    src = existing(ROOT / "tests" / "fixtures" / "formats" / "samples" / "aider_llm_history_friendly_names_first6.aider.llm.history")
    out = tmp_path / "aider.jsonl"
    res = CliRunner().invoke(_app(), ["canonicalize", str(src), "--to", "openai", "-o", str(out), "--json"])
    assert res.exit_code == 0, res.output
    doc = json.loads(res.stdout)
    reqs = list(Ingest([str(src)]))
    back = list(Ingest([str(out)]))
    assert len(back) == len(reqs) == doc["written"] > 1 and {r.format for r in back} == {"openai-chat"}
    assert [[(m.role, m.content) for m in r.messages] for r in back] == [[(m.role, m.content) for m in r.messages] for r in reqs]
    assert doc["agrees"] and doc["verified"] == doc["total"]["after"]
    res = CliRunner().invoke(_app(), ["canonicalize", str(src), "-o", str(tmp_path / "same.jsonl")])
    assert res.exit_code == 2 and "--to openai" in res.output  # its own format cannot be written


def test_two_formats_in_one_output_are_refused_before_writing(tmp_path) -> None:
    """An Anthropic case and an OpenAI case into one file "in the input format": the file would hold
    two formats and lint would read back only one of them (its figure disagreed with canonicalize's).
    Refused with exit 2 naming both files and --to openai; nothing is written. --to openai works."""
    a, o = str(existing(CASES) / "anthropic_rolling_breakpoint.jsonl"), str(CASES / "schema_property_order.jsonl")
    reqs = list(Ingest([a, o]))
    with pytest.raises(ConfigError, match="two formats .*anthropic-messages.*openai-chat.*--to openai"):
        write_requests(reqs, io.BytesIO())
    out = tmp_path / "mixed.jsonl"
    res = CliRunner().invoke(_app(), ["canonicalize", a, o, "--out", str(out)])
    assert res.exit_code == 2 and not out.exists()
    res = CliRunner().invoke(_app(), ["canonicalize", a, o, "--out", str(out), "--to", "openai"])
    assert res.exit_code == 0 and len(out.read_text().splitlines()) == len(reqs)


def test_a_same_named_tool_of_another_log_does_not_block_the_schema_restore(tmp_path) -> None:
    """The Anthropic case's run_shell (another schema) read first used to take the tool's first-sent
    form, so schema_property_order's re-serialized run_shell was only reported: first forms are now
    per name and value, and the case is repaired as when it is canonicalized alone."""
    a, o = str(existing(CASES) / "anthropic_rolling_breakpoint.jsonl"), str(CASES / "schema_property_order.jsonl")
    out = tmp_path / "mixed.jsonl"
    res = CliRunner().invoke(_app(), ["canonicalize", a, o, "--out", str(out), "--to", "openai", "--json"])
    assert res.exit_code == 0, res.output
    doc = json.loads(res.stdout)
    pc203 = [t for t in doc["transformations"] if t["code"] == "PC203"]
    assert pc203 and all(t["applied"] for t in pc203) and doc["agrees"]
