"""ShareGPT conversations (FastChat's real sample) and plain prompt files."""

from __future__ import annotations

from click.testing import CliRunner

from prefixcache.analyzer.ingest import Ingest
from tests.helpers import FIXTURES, cli_app, existing

SHAREGPT = FIXTURES / "sharegpt" / "fastchat_dummy_conversation.json"


def test_fastchat_sharegpt_every_record_accounted() -> None:
    ing = Ingest([str(existing(SHAREGPT))])
    reqs = list(ing)
    s = ing.summary
    assert (s.records, s.requests, s.sessions, s.skipped) == (500, 1000, 500, ())
    assert {r.format for r in reqs} == {"sharegpt"}
    first = [r for r in reqs if r.session == "fastchat_dummy_conversation/identity_0"]
    # one request per gpt turn, its prompt every turn before it
    assert [[m.role for m in r.messages] for r in first] == [["user"], ["user", "assistant", "user"]]
    assert first[0].messages[0].content == "Who are you?"


def test_plain_prompt_files_chain_in_one_session(tmp_path) -> None:
    a, b = tmp_path / "v1.txt", tmp_path / "v2.txt"
    a.write_text("You are a helpful bot.\nToday is 2026-01-01 10:00.\nAnswer the question.\n")
    b.write_text("You are a helpful bot.\nToday is 2026-01-02 11:00.\nAnswer the question.\n")
    result = CliRunner().invoke(cli_app(), ["lint", str(a), str(b), "--format", "json"])
    assert result.exit_code == 1, result.output  # the clock in the prompt is a finding
    assert '"code": "PC101"' in result.stdout and '"sessions": 1' in result.stdout
    walked = CliRunner().invoke(cli_app(), ["lint", str(tmp_path)])
    assert walked.exit_code == 2 and "holds no log files" in walked.output  # a walk never guesses prompts
