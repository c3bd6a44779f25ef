"""Issue 28: the resource budget (analyzer/limits.py) holds on bombs, deep argument strings,
memory-hungry templates and hard links, with one exit-2 line naming the input and the limit.

The corpus is ``tests/fuzz/limits.py``, generated into a temporary folder at a small scale
(bombs expanding to 256 MiB: the ratio check stops them after 32 MiB); ``bench/bench_hostile.py``
runs it at 2 GiB and prints exit · seconds · peak RSS per case and command.
"""

from __future__ import annotations

import gzip
import json
import os

import pytest
from click.testing import CliRunner

from tests.fuzz import limits as corpus_limits
from tests.fuzz.gen_corpus import Case, record
from tests.helpers import EXAMPLES, cli_app

from prefixcache.analyzer import limits
from prefixcache.analyzer.errors import ConfigError
from prefixcache.analyzer.ingest import Ingest
from prefixcache.analyzer.ingest.jsonio import JSONDepthError, loads
from prefixcache.analyzer.render.jinja_template import parse_arguments
from prefixcache.analyzer.render.sandbox import RenderLimitError


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Case]:
    return {c.name: c for c in corpus_limits.build(tmp_path_factory.mktemp("limits"), scale=0.25)}


@pytest.fixture(autouse=True)
def quick_render(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PREFIXCACHE_RENDER_TIMEOUT", "2")


def _run(*args: str):
    res = CliRunner().invoke(cli_app(), [str(a) for a in args])
    assert res.exception is None or isinstance(res.exception, SystemExit), repr(res.exception)
    assert "Traceback" not in res.stderr
    return res


def _error_lines(res) -> list[str]:
    return [ln for ln in res.stderr.splitlines() if ln.startswith("error:")]


@pytest.mark.parametrize("name", ["bomb_line.jsonl.gz", "bomb_line.jsonl.zst", "bomb_lines.jsonl.gz"])
@pytest.mark.parametrize("command", ["inspect", "lint"])
def test_decompression_bombs_are_refused_by_ratio(corpus, name, command) -> None:
    res = _run(command, corpus[name].path, "--json")
    assert res.exit_code == 2
    (line,) = [ln for ln in _error_lines(res) if "expands more than 500x" in ln]
    assert name in line and "PREFIXCACHE_MAX_EXPANSION_RATIO" in line


def test_bomb_ratio_is_measured_as_read(corpus) -> None:
    """The refusal comes once 32 MiB have come out, from the compressed bytes consumed by then."""
    ing = Ingest([corpus["bomb_line.jsonl.gz"].path])
    assert list(ing) == []
    (skip,) = ing.summary.skipped
    out, taken = _figures(skip.reason)
    assert 32 << 20 < out <= (32 << 20) + (1 << 20) and out > 500 * taken


def _figures(reason: str) -> tuple[int, int]:
    inner = reason.split("(", 1)[1].split(")", 1)[0]  # "33,816,576 bytes from 41,195"
    out, taken = inner.split(" bytes from ")
    return int(out.replace(",", "")), int(taken.replace(",", ""))


def test_list_bomb_is_refused_by_the_document_limit(corpus, monkeypatch) -> None:
    monkeypatch.setenv("PREFIXCACHE_MAX_DOCUMENT_BYTES", str(8 << 20))
    res = _run("inspect", corpus["bomb_list.json.gz"].path, "--json")
    assert res.exit_code == 2
    (line,) = _error_lines(res)
    assert "bomb_list.json.gz" in line and "over 8,388,608 bytes (PREFIXCACHE_MAX_DOCUMENT_BYTES" in line


def test_expanded_bytes_limit_keeps_the_records_before_it(tmp_path, monkeypatch) -> None:
    lines = b"".join(json.dumps(record(i % 3)).encode() + b"\n" for i in range(3000))
    path = tmp_path / "log.jsonl.gz"
    path.write_bytes(gzip.compress(lines, mtime=0))
    monkeypatch.setenv("PREFIXCACHE_MAX_EXPANDED_BYTES", str(len(lines) // 2))
    ing = Ingest([str(path)])
    kept = sum(1 for _ in ing)
    assert 0 < kept < 3000
    (skip,) = ing.summary.skipped
    assert skip.bad and "PREFIXCACHE_MAX_EXPANDED_BYTES" in skip.reason and "the rest is not read" in skip.reason
    monkeypatch.delenv("PREFIXCACHE_MAX_EXPANDED_BYTES")
    assert sum(1 for _ in Ingest([str(path)])) == 3000


def test_zstd_frames_are_all_read(tmp_path) -> None:
    import zstandard

    one, two = (json.dumps(record(i)).encode() + b"\n" for i in (0, 1))
    path = tmp_path / "two_frames.jsonl.zst"
    path.write_bytes(zstandard.ZstdCompressor().compress(one) + zstandard.ZstdCompressor().compress(two))
    assert sum(1 for _ in Ingest([str(path)])) == 2


def test_deep_argument_strings_never_reach_a_recursive_parser(corpus, tmp_path) -> None:
    case = corpus["deep_arguments.jsonl"]
    for command in ("inspect", "lint", "simulate"):
        assert _run(command, case.path, "--json").exit_code in (0, 1), command
    res = _run("canonicalize", case.path, "-o", tmp_path / "c.jsonl", "--json")
    assert res.exit_code in (0, 1), res.stderr[-400:]
    assert sum(1 for _ in open(tmp_path / "c.jsonl")) == 3  # every record written
    deep = "[" * 5000 + "]" * 5000
    with pytest.raises(JSONDepthError, match="deeper than 1024"):
        loads(deep)
    with pytest.raises(JSONDepthError, match="deeper than 128"):
        loads("[" * 200 + "]" * 200, lenient=True)
    assert parse_arguments(deep) == deep  # a template sees the raw string
    assert loads('{"x": NaN, "n": 123456789012345678901234567890}', lenient=True)["n"] == 123456789012345678901234567890
    with pytest.raises(ValueError):
        loads('{"x": NaN}')


@pytest.mark.parametrize("name", sorted(corpus_limits.MEMORY_TEMPLATES) + ["huge_file", "over_size"])
def test_memory_templates_end_within_the_budget(corpus, name) -> None:
    case = corpus[name]
    res = _run("check", case.path, "-c", case.context, "--tokenizer", "smollm2")
    assert res.exit_code in (0, 1, 2)
    if res.exit_code == 2:
        (line,) = _error_lines(res)
        assert f"{name}.jinja" in line and "PREFIXCACHE_" in line, line


@pytest.mark.slow  # four renders up to their limits (~7 s)
def test_each_template_limit_is_named(corpus, monkeypatch) -> None:
    for name, timeout, words in (("tojson_laughs", 20, "PREFIXCACHE_RENDER_MAX_MEMORY"),
                                 ("near_cap_then_multiply", 20, "PREFIXCACHE_RENDER_MAX_MEMORY"),
                                 ("huge_file", 2, "longer than 2 s (PREFIXCACHE_RENDER_TIMEOUT)"),
                                 ("over_size", 2, "over 4,194,304 bytes (PREFIXCACHE_MAX_TEMPLATE_BYTES")):
        monkeypatch.setenv("PREFIXCACHE_RENDER_TIMEOUT", str(timeout))
        case = corpus[name]
        res = _run("check", case.path, "-c", case.context, "--tokenizer", "smollm2")
        assert res.exit_code == 2 and words in res.stderr, (name, res.stderr)


def test_a_chat_template_past_memory_is_refused_and_the_worker_recovers(corpus) -> None:
    from prefixcache.analyzer.render.jinja_template import JinjaChat

    msgs = [{"role": "user", "content": "hi"}]
    with pytest.raises(RenderLimitError, match="PREFIXCACHE_RENDER_MAX_MEMORY"):
        JinjaChat(corpus_limits.MEMORY_TEMPLATES["near_cap_then_multiply"]).render(msgs, None, True, 0.0)
    with pytest.raises(RenderLimitError, match="longer than 2 s"):
        JinjaChat("{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}").render(
            msgs, None, True, 0.0)
    chat = JinjaChat("{% for m in messages %}<{{ m.role }}>{{ m.content }}{% endfor %}{{ strftime_now('%Y') }}")
    assert chat.render(msgs, None, True, 0.0) == "<user>hi1970"


def test_every_limit_has_a_name_a_default_and_an_override(monkeypatch) -> None:
    for lim in limits.LIMITS.values():
        assert lim.env == f"PREFIXCACHE_{lim.name}" and lim.default > 0 and lim.unit and lim.what
        monkeypatch.setenv(lim.env, "7")
        assert limits.value(lim.name) == 7
        monkeypatch.setenv(lim.env, "junk")
        assert limits.value(lim.name) == int(lim.default)


def test_template_and_context_files_are_read_no_further_than_their_limits(tmp_path, monkeypatch) -> None:
    from prefixcache.analyzer.render.files import read_json, read_text

    big = tmp_path / "t.jinja"
    big.write_text("x" * 5000)
    monkeypatch.setenv("PREFIXCACHE_MAX_TEMPLATE_BYTES", "1000")
    with pytest.raises(ConfigError, match="t.jinja: template is over 1,000 bytes"):
        read_text(big, "template")
    deep = tmp_path / "c.json"
    deep.write_text("[" * 3000 + "]" * 3000)
    with pytest.raises(ConfigError, match="c.json: context file: JSON nested too deeply"):
        read_json(deep, "context file")


def test_replay_out_refuses_a_hard_link_of_an_input(tmp_path) -> None:
    log = tmp_path / "log.jsonl"
    log.write_bytes((EXAMPLES / "agent_session.jsonl").read_bytes())
    before = log.read_bytes()
    link = tmp_path / "results.jsonl"
    os.link(log, link)
    for inputs in ([str(log)], [str(tmp_path)]):
        res = _run("replay", *inputs, "--out", link, "--force")
        assert res.exit_code == 2 and "results.jsonl: is an input of this run" in res.stderr, res.stderr
    assert log.read_bytes() == before


def test_a_run_that_writes_no_row_keeps_the_earlier_results(tmp_path) -> None:
    from prefixcache.analyzer.replay_rows import LocalRow
    from prefixcache.replay.results import ResultWriter

    earlier = tmp_path / "r.jsonl"
    earlier.write_bytes(b"an earlier run\n")
    ResultWriter(earlier, LocalRow).close()
    assert earlier.read_bytes() == b"an earlier run\n"
