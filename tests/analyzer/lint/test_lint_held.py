"""Issue 25 item 4: lint holds each session's latest request in bounded memory
(:class:`~prefixcache.analyzer.lint.held.HeldLast`: the most recent sessions in memory, the rest
pickled to a temporary file), and its results do not depend on where a request was held."""

from __future__ import annotations

import pytest

from prefixcache.analyzer.ingest import Ingest
from prefixcache.analyzer.lint import held
from prefixcache.analyzer.lint.config import LintConfig
from prefixcache.analyzer.lint.held import HeldLast
from prefixcache.analyzer.lint.run import lint_paths
from prefixcache.analyzer.lint.simulated import simulate
from prefixcache.analyzer.prepare import Preparer
from tests.helpers import CASES, SAMPLES

CLAUDE = str(SAMPLES / "claude_code_session_v1.0.98_fe5e1c67.jsonl")
SWE = str(SAMPLES / "swe_agent_traj_function_calling_with_per_step_messages_marshmallow-1867.traj")
INPUTS = [CLAUDE, SWE, *sorted(str(p) for p in CASES.glob("*.jsonl"))]


def test_written_out_requests_read_back_equal():
    preparer = Preparer()
    preps = [preparer.prepare(r) for r in Ingest([SWE])][:6]
    last = HeldLast(in_memory=2)
    for i, p in enumerate(preps):
        last[f"s{i}"] = p
    assert len(last) == 6 and len(last._mem) == 2 and len(last._disk) == 4
    assert all(last.get(f"s{i}") == p for i, p in enumerate(preps))  # from the file and from memory
    assert last.get("nope") is None and "s0" in last and "nope" not in last
    last["s0"] = preps[5]  # stored again: back in memory, the oldest in memory goes to the file
    assert last.get("s0") == preps[5] and "s0" in last._mem and "s4" in last._disk
    last.close()


@pytest.mark.parametrize("command", ["lint", "simulate"])
def test_results_equal_with_every_session_written_out(monkeypatch, command):
    def run():
        if command == "lint":
            r = lint_paths(INPUTS, LintConfig(format="json"))
            return r.report().summary, r.results
        return simulate(INPUTS)

    want = run()
    monkeypatch.setattr(held, "IN_MEMORY", 1)
    got = run()
    assert got == want
    if command == "lint":
        assert sum(len(r.findings) for r in want[1]) > 0 and any(r.lost_tokens for r in want[1])


def test_a_temporary_folder_that_cannot_be_written_is_named(monkeypatch, tmp_path):
    import errno
    import tempfile

    class Full:
        def seek(self, *a):
            return 0

        def write(self, blob):
            raise OSError(errno.ENOSPC, "No space left on device")

        def close(self):
            pass

    monkeypatch.setattr(tempfile, "TemporaryFile", lambda **kw: Full())
    last = HeldLast(in_memory=0)
    with pytest.raises(OSError) as exc:
        last["s"] = {"any": "request"}
    assert exc.value.filename == tempfile.gettempdir() and "No space left on device" in exc.value.strerror
