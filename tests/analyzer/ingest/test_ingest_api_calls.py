"""Issue 11 item 3: every call a SWE-agent / mini-swe-agent file records is a request or
a skip with a reason, checked against ``info.model_stats.api_calls``."""

from __future__ import annotations

import json

from prefixcache.analyzer.ingest import Ingest

from tests.helpers import FIXTURES, SAMPLES

SUBMIT = FIXTURES / "issue11" / "swe_agent_submit_no_answer.traj"


def _read(path):
    ing = Ingest([str(path)])
    return list(ing), ing.summary.skipped


def test_swe_agent_final_submit_call_is_a_request():
    reqs, skipped = _read(SUBMIT)
    assert json.loads(SUBMIT.read_text())["info"]["model_stats"]["api_calls"] == 5
    assert len(reqs) == 5 and skipped == ()
    last = reqs[-1]
    assert last.provenance.pointer == "trajectory[4]" and len(last.messages) == 10  # the whole history
    assert any("final call" in n for n in last.notes)


def test_swe_agent_calls_without_messages_are_a_skip(tmp_path):
    doc = json.loads(SUBMIT.read_text())
    doc["info"]["model_stats"]["api_calls"] = 7
    path = tmp_path / "seven.traj"
    path.write_text(json.dumps(doc))
    reqs, skipped = _read(path)
    assert len(reqs) == 5
    (s,) = skipped
    assert (s.field, s.bad) == ("info.model_stats.api_calls", False) and "api_calls=7" in s.reason


def test_swe_agent_sample_calls_all_read():
    reqs, skipped = _read(SAMPLES / "swe_agent_traj_function_calling_with_per_step_messages_marshmallow-1867.traj")
    assert len(reqs) == 13 and skipped == ()  # info.model_stats.api_calls = 13


def test_mini_swe_agent_failed_call_is_explained():
    reqs, skipped = _read(SAMPLES / "mini_swe_agent_v1.1_deepseek_reasoner_pvlib-1606.traj.json")
    assert len(reqs) == 4 and len(skipped) == 1 and "api_calls=5 but 4 responses" in skipped[0].reason


def test_mini_swe_agent_without_exit_message_checks_api_calls(tmp_path):
    doc = json.loads((SAMPLES / "mini_swe_agent_v1.1_deepseek_reasoner_pvlib-1606.traj.json").read_text())
    doc["messages"] = [m for m in doc["messages"] if m.get("role") != "exit"]
    path = tmp_path / "noexit.traj.json"
    path.write_text(json.dumps(doc))
    reqs, skipped = _read(path)
    assert len(reqs) == 4
    (s,) = skipped
    assert s.field == "info.model_stats.api_calls" and "api_calls=5 but the file holds 4" in s.reason
