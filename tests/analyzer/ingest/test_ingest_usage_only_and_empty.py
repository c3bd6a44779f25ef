"""A standalone Cline ui_messages.json is a usage-only log; inputs read as nothing exit 2 with the reason."""

from __future__ import annotations

import json

from click.testing import CliRunner

from prefixcache.analyzer.ingest import Ingest
from tests.helpers import FIXTURES, cli_app, existing

UI = FIXTURES / "ingest" / "cline_ui_only" / "ui_messages.json"


def test_standalone_ui_messages_is_usage_only() -> None:
    ing = Ingest([str(existing(UI))])
    reqs = list(ing)
    # Anthropic semantics: prompt = tokensIn + cacheWrites + cacheReads; cached = cacheReads.
    assert [(r.usage.prompt_tokens, r.usage.cached_tokens, r.usage.cache_write_tokens) for r in reqs] == [
        (11844, 0, 11840), (12004, 11840, 160), (12194, 12000, 190)]
    assert {r.session for r in reqs} == {"cline:cline_ui_only"} and all("messages" not in r.observed for r in reqs)
    assert [r.extra["cost"] for r in reqs] == [0.0452, 0.0071, 0.0053]
    s = ing.summary
    # every row accounted: 3 requests, 1 cancelled call noted, the other 5 rows are UI context
    assert (s.records, s.requests) == (9, 3)
    (note,) = s.skipped
    assert (note.record, note.field, note.bad) == (8, "[7].text", False) and "cancelled" in note.reason


def test_ui_messages_beside_its_history_stays_context() -> None:
    ing = Ingest([str(existing(FIXTURES / "formats" / "cline_task"))])
    assert len(list(ing)) == 3  # the requests come from api_conversation_history.json only
    assert any("read as context" in k.reason for k in ing.summary.skipped)


def test_inputs_read_as_nothing_exit_2_with_the_reason(tmp_path) -> None:
    task = tmp_path / "task"
    task.mkdir()
    (task / "ui_messages.json").write_text(json.dumps([{"ts": 1, "type": "say", "say": "task", "text": "hi"}]))
    for command in (["inspect"], ["lint"], ["simulate"]):
        result = CliRunner().invoke(cli_app(), [*command, str(task / "ui_messages.json")])
        assert result.exit_code == 2, (command, result.output)
        assert "no requests in the input(s): 1 record(s) read" in result.output
    assert list(Ingest([str(task)])) == []  # the library itself still iterates to nothing
