"""Replay skips prompts beyond the engine's context, one by one and before anything runs:
the in-process model (the session's test model), a pretend engine, and ``replay --server``
against a stub that reports its ``max_model_len``. A prompt far past the context is refused
before it is tokenized (the hostile long line of tests/fuzz/gen_corpus.py)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from bench.openai_stub import StubState, StubThread
from prefixcache.analyzer.errors import ConfigError
from prefixcache.analyzer.tokenize.session import SessionTokenizer
from prefixcache.replay.context import ContextLimit, max_token_chars
from prefixcache.replay import ReplayOptions, open_replay
from tests.fuzz.gen_corpus import _line, record
from tests.helpers import CASES, EXAMPLES, cli_app
from tests.replay.test_replay_run import FakeEngine


def _fake(context: int) -> FakeEngine:
    engine = FakeEngine()
    engine.max_context = context
    return engine


def _sizes(pass_name: str = "original") -> list[int]:
    """Prompt tokens of examples/agent_session.jsonl's prompts (chatml_tools, smollm2), in replay order."""
    session = open_replay([str(EXAMPLES / "agent_session.jsonl")], ReplayOptions(template="chatml_tools"),
                          engine=_fake(1 << 20))
    return [len(p.ids) for p in session.replay.prompts[pass_name]]


def test_prompts_past_the_context_are_skipped_one_by_one() -> None:
    sizes, canonical = _sizes(), _sizes("canonical")
    context = sorted(sizes)[len(sizes) // 2] + 1  # about half fit (with the one new token)
    options = ReplayOptions(template="chatml_tools", verify="all")
    session = open_replay([str(EXAMPLES / "agent_session.jsonl")], options, engine=_fake(context))
    # a request runs in every pass or none: its canonical form (values moved to the newest turn) must fit too
    fit = [n for n, c in zip(sizes, canonical) if max(n, c) + 1 <= context]
    assert 0 < len(fit) < len(sizes)
    assert [len(p.ids) for p in session.replay.prompts["original"]] == fit
    assert len(session.replay.prompts["canonical"]) == len(fit)  # every pass replays the same requests
    too_long = [s for s in session.skipped if "exceeds the model's context" in s.reason]
    assert len(too_long) == len(sizes) - len(fit) and not any(s.bad for s in too_long)
    s = too_long[0]
    assert s.source.endswith("agent_session.jsonl") and s.record >= 1
    assert f"of {context:,} tokens" in s.reason and "tokens + 1 new" in s.reason
    outcome = session.run()
    assert outcome.report.requests == len(fit) and outcome.report.skipped_records == len(too_long)
    assert {r.pass_name for r in outcome.rows} == {"cold", "warm", "canonical"}


def test_nothing_fits_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match=r"no replayable requests: all 6 prompt\(s\) exceed the model's context of 100"):
        open_replay([str(EXAMPLES / "agent_session.jsonl")], ReplayOptions(template="chatml_tools"), engine=_fake(100))


def test_max_prompt_tokens_truncates_instead_of_skipping() -> None:
    options = ReplayOptions(template="chatml_tools", max_prompt_tokens=99)
    session = open_replay([str(EXAMPLES / "agent_session.jsonl")], options, engine=_fake(100))
    assert len(session.replay.prompts["original"]) == 6 and not session.skipped


def _huge_line(tmp_path: Path, chars: int) -> Path:
    """The gen_corpus hostile case (one word of ``chars`` characters) after a normal request."""
    path = tmp_path / "long_line_no_space.jsonl"
    path.write_bytes(_line(record(0)) + _line(dict(record(1, content="a" * chars), user="s2")))
    return path


def test_a_huge_prompt_is_refused_before_it_is_tokenized(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    real = SessionTokenizer.tokenize
    longest: list[int] = []

    def spy(self, rendered, *a, **kw):
        longest.append(len(rendered.text))
        return real(self, rendered, *a, **kw)

    monkeypatch.setattr(SessionTokenizer, "tokenize", spy)
    session = open_replay([str(_huge_line(tmp_path, 3_000_000))], ReplayOptions(template="chatml_tools"),
                          engine=_fake(4096))
    assert max(longest) < 10_000  # the 3 MB prompt was rendered, never tokenized
    [skip] = session.skipped
    assert skip.record == 2 and "at least" in skip.reason and "not tokenized" in skip.reason
    assert len(session.replay.prompts["original"]) == 1


def test_max_token_chars_bounds_every_token() -> None:
    from prefixcache.analyzer.tokenize.registry import get_tokenizer

    tok = get_tokenizer("smollm2")
    n = max_token_chars(tok)
    assert n is not None and all(len(tok.decode([i])) <= n for i in range(0, 49152, 97))
    assert max_token_chars(object()) is None
    assert ContextLimit(None).room is None and ContextLimit(100, 4).room == 96


def _log(tmp_path: Path, engine_tokens: int) -> Path:
    """A session of two short requests, and between them one of about ``engine_tokens`` tokens."""
    words = " ".join(f"w{i % 997}x{i % 13}" for i in range(engine_tokens // 3))
    lines = [_line(record(0)), _line(dict(record(1, content=words), user="long")), _line(record(1))]
    path = tmp_path / "mixed.jsonl"
    path.write_bytes(b"".join(lines))
    return path


def test_the_test_model_skips_the_prompt_past_its_8192_tokens(engine, tmp_path: Path) -> None:
    options = ReplayOptions(passes=("cold",), verify="none")
    session = open_replay([str(_log(tmp_path, 12_000))], options, engine=engine)
    [skip] = session.skipped
    assert skip.record == 2 and "of 8,192 tokens" in skip.reason and "not tokenized" not in skip.reason
    tokens = int(skip.reason.split("prompt of ")[1].split(" tokens")[0].replace(",", ""))
    assert tokens > 8192
    outcome = session.run()
    assert [r.record for r in outcome.rows] == [1, 3] and outcome.report.skipped_records == 1


def test_cli_exit_2_when_nothing_fits_and_names_file_line_tokens_context(loaded, tmp_path: Path) -> None:
    path = tmp_path / "only_long.jsonl"
    path.write_bytes(_line(record(0, content="a" * 2_000_000)))
    res = CliRunner().invoke(cli_app(), ["replay", str(path), "--json", "--pass", "cold", "--device", "cpu"])
    assert res.exit_code == 2 and "Traceback" not in res.stderr
    line = res.stderr.strip().splitlines()[-1]
    assert line.startswith("error: no replayable requests") and f"{path}:1" in line
    assert "8,192 tokens" in line and "at least" in line


@pytest.fixture
def stub_state():
    """The replay bench's stub server; tests set the ``max_model_len`` it reports."""
    state = StubState(block_size=16)
    s = StubThread(state)
    yield s, state
    s.stop()


def test_server_replay_skips_prompts_past_the_reported_max_model_len(stub_state) -> None:
    stub, state = stub_state
    opts = ReplayOptions(server=stub.url, tokenizer="smollm2", template="chatml_tools")
    log = [str(CASES / "clean_append_only.jsonl")]
    wide = open_replay(log, opts)
    sizes = [len(i.prompt.ids) for i in wide.items["original"]]
    canonical = [len(i.prompt.ids) for i in wide.items["canonical"]]
    state.max_model_len = sorted(sizes)[len(sizes) // 2] + 1
    session = open_replay(log, opts)
    assert session.info.max_context == state.max_model_len
    fit = [n for n, c in zip(sizes, canonical) if max(n, c) + 1 <= state.max_model_len]
    assert [len(i.prompt.ids) for i in session.items["original"]] == fit and 0 < len(fit) < len(sizes)
    assert len(session.items["canonical"]) == len(fit)
    assert len(session.skipped) == len(sizes) - len(fit)
    assert all(f"of {state.max_model_len:,} tokens" in s.reason for s in session.skipped)
    outcome = session.run()
    assert outcome.report.requests == len(fit) and len(outcome.skipped) == len(session.skipped)


def test_json_report_counts_the_skipped(tmp_path: Path) -> None:
    sizes = _sizes()
    session = open_replay([str(EXAMPLES / "agent_session.jsonl")],
                          ReplayOptions(template="chatml_tools", passes=("cold",)),
                          engine=_fake(max(sizes)))  # the longest needs one more token for the new one
    doc = json.loads(json.dumps({"skipped": session.run().report.skipped_records}))
    assert doc["skipped"] == sizes.count(max(sizes))
