"""Issue 28 item 4: ``report`` reads, renders and tokenizes its input once, and the simulate
document it shows is still ``simulate``'s own; simulate's drift pass over a log whose times go
backwards holds no prepared prompt.

The logs are real samples and logs built from them the way big agent logs are (a Claude Code
session repeated as sessions of their own, each copy at the same logged times, so the times
go back at every copy: :func:`tests.test_scale.agent_log`), plus the same with the times
dropped and a Mooncake-shaped trace.
"""

from __future__ import annotations

import json
import random
import weakref
from pathlib import Path
from types import SimpleNamespace

import orjson
import pytest

from prefixcache.analyzer.cache.workload import Kept
from prefixcache.analyzer.html import content
from prefixcache.analyzer.ingest import Ingest
from prefixcache.analyzer.html.content import ReportOptions, gather
from prefixcache.analyzer.lint import simulated
from prefixcache.analyzer.lint.order import sorted_stream
from prefixcache.analyzer.lint.run import lint_paths
from prefixcache.analyzer.lint.simulated import SimulatedTee, simulate
from prefixcache.analyzer.prepare import Preparer
from prefixcache.analyzer.sequence import arrival_order
from tests.helpers import CASES, SAMPLES, existing
from tests.test_scale import agent_log, mooncake_trace


def _no_times(src: Path, dst: Path) -> Path:
    """``src`` (Claude Code JSONL) without its ``timestamp`` fields: input order is the order."""
    with dst.open("w") as out:
        for line in src.open():
            row = json.loads(line)
            row.pop("timestamp", None)
            out.write(json.dumps(row) + "\n")
    return dst


@pytest.fixture(scope="module")
def logs(tmp_path_factory) -> dict[str, str]:
    tmp = tmp_path_factory.mktemp("logs")
    copies = tmp / "copies.jsonl"
    assert agent_log(copies, 1_600_000) == 3  # three copies: the times go back twice
    trace = tmp / "trace.jsonl"
    mooncake_trace(trace, 600_000)
    return {"copies": str(copies), "untimed": str(_no_times(copies, tmp / "untimed.jsonl")), "trace": str(trace),
            "claude": str(existing(SAMPLES / "claude_code_session_v1.0.98_fe5e1c67.jsonl")),
            "kvcache-tester": str(existing(SAMPLES / "kvcache_tester_claudecode_hashids64_trace_0001.json")),
            "timestamp": str(existing(CASES / "timestamp_in_system.jsonl"))}


def _json(report) -> dict:
    return orjson.loads(orjson.dumps(report))


@pytest.mark.parametrize("name", ["copies", "untimed", "trace", "claude", "kvcache-tester", "timestamp"])
def test_the_tee_gives_simulates_own_document(logs, name) -> None:
    options = ReportOptions().simulate_options("vllm")
    tee = SimulatedTee(options)
    run = lint_paths([logs[name]], ReportOptions().lint, tee=tee)
    got, want = _json(tee.report(run.ingest, run.notes)), _json(simulate([logs[name]], options))
    assert got == want
    if name == "claude":  # report --cache auto picks the provider after lint's pass: the staged requests serve it too
        hosted = ReportOptions().simulate_options("anthropic")
        got = _json(tee.report(run.ingest, run.notes, hosted))
        assert got == _json(simulate([logs[name]], hosted)) and got["cache"] == "anthropic"
    assert want["summary"]["requests"] > 0 and want["results"]
    if name == "copies":  # the prompt-size warnings name sessions in input order, as simulate does
        assert any(w.startswith("session ") for w in got["warnings"])


def test_report_prepares_each_request_once(logs, monkeypatch) -> None:
    calls = []
    real = Preparer.prepare

    def counting(self, request):
        calls.append((request.session, request.index))
        return real(self, request)

    monkeypatch.setattr(Preparer, "prepare", counting)
    # canonicalize's before/after (what fixing is worth) reads the log on its own: counted apart
    monkeypatch.setattr(content, "canonicalized", lambda *args: (None, None))
    docs = gather([logs["copies"]], ReportOptions())
    requests = docs.lint["summary"]["requests"]
    assert docs.simulate is not None and docs.simulate["summary"]["requests"] == requests > 100
    # lint prepares the requests read before the times go back (dropped at its restart), then each
    # once in arrival order; nothing else prepares any but the break excerpts (two requests each at most).
    # Before, simulate prepared every request once more, and twice more on this log.
    lint_calls = _prefix_before_restart(logs["copies"]) + requests
    assert lint_calls <= len(calls) <= lint_calls + 2 * len(docs.diffs)


def _prefix_before_restart(path: str) -> int:
    """Requests lint prepares before it sees the times go back (dropped at its restart)."""
    from prefixcache.analyzer.ingest import Ingest

    latest, n = float("-inf"), 0
    for r in Ingest([path]):
        if r.timestamp is not None and r.timestamp < latest:
            return n
        latest = max(latest, r.timestamp or latest)
        n += 1
    return 0


def test_sorted_stream_is_the_arrival_order() -> None:
    rng = random.Random(28)
    for _ in range(200):
        items = [(i, rng.randint(0, 6)) for i in range(rng.randint(0, 15))]
        want = [item for _, item in arrival_order(items, lambda x: x[1])]
        got = list(sorted_stream(items, lambda x: x[1]))
        assert [item for _, item in got] == want and [pos for pos, _ in got] == [item[0] for item in want]


def test_simulates_drift_pass_holds_no_prepared_prompt(logs, monkeypatch) -> None:
    """On a log whose times go back at every copy, the second (arrival-order) pass prepares each
    request when its turn comes: at most a few prepared requests are alive at once (the whole
    log's were, before: ~1.5 GB for a 20 MB log)."""
    alive, most = [0], [0]
    real = Preparer.prepare

    def tracked(self, request):
        p = real(self, request)
        holder = _Box(p)
        alive[0] += 1
        most[0] = max(most[0], alive[0])
        weakref.finalize(holder, lambda: alive.__setitem__(0, alive[0] - 1))
        return holder

    monkeypatch.setattr(Preparer, "prepare", tracked)
    monkeypatch.setattr(simulated, "_fed", lambda lint, box: lint)  # the boxes are not lintable
    monkeypatch.setattr(simulated.SimStream, "add", lambda self, box: None)
    monkeypatch.setattr(simulated.SizeCheck, "add", lambda self, box: None)
    real_of = Kept.of
    monkeypatch.setattr(Kept, "of", classmethod(lambda cls, box: real_of(box.p)))  # keeps no prompt
    monkeypatch.setattr(simulated.SimStream, "requests", lambda self: [SimpleNamespace(order=0, session="", index=0)])
    monkeypatch.setattr(simulated.SimStream, "in_input_order", property(lambda self: False))
    ingest, _, items, *_ = simulated._simulated([logs["copies"]], ReportOptions().simulate_options("vllm"), None)
    assert len(items) == ingest.summary.requests > 100
    assert most[0] <= 3, most[0]


class _Box:
    """A prepared request in a box that can be weakly referenced (``Prepared`` has slots)."""

    def __init__(self, p) -> None:
        self.p = p


@pytest.mark.parametrize("name", ["copies", "untimed", "claude", "timestamp"])
def test_canonicalize_in_the_report_takes_lints_prepared_requests(logs, name, monkeypatch) -> None:
    """The report's canonicalize document equals the command's (``canonicalize --review --to openai
    --json``, its own preparation throughout), while its ``before`` figures come from the token ids
    lint's pass staged (:meth:`SimulatedTee.reuse_of`): the original requests are not prepared again."""
    options = ReportOptions()
    want, _ = content.canonicalized([logs[name]], options)
    tee = SimulatedTee(options.simulate_options("vllm"))
    lint_paths([logs[name]], options.lint, tee=tee)
    seen, runs = [], []
    real, real_paths = Preparer.prepare, content.canonicalize_paths

    def counting(self, request):
        seen.append(id(request))
        return real(self, request)

    def recorded(*args, **kwargs):
        runs.append(real_paths(*args, **kwargs))
        return runs[-1]

    monkeypatch.setattr(Preparer, "prepare", counting)
    monkeypatch.setattr(content, "canonicalize_paths", recorded)
    got, _ = content.canonicalized([logs[name]], options, tee)
    assert got == want and want["total"]["before"]["prompt_tokens"] > 0
    # prepared here: the rewritten requests (lint, reuse and its probes) and the written log read back;
    # the requests as read only where a volatile value moved and there are two sessions (lint names the
    # break PC602 or not, :func:`lint_codes`: "timestamp"), once. Before, "before"'s reuse pass prepared each too.
    assert runs[0].before is not None
    originals = [i for i in seen if i in {id(r) for r in runs[0].requests}]
    assert len(originals) == (len(runs[0].requests) if name == "timestamp" else 0) == len(set(originals))
    assert len(seen) >= 2 * len(runs[0].requests)


@pytest.mark.parametrize("name", ["untimed", "claude"])
def test_lint_and_reuse_equal_the_two_passes(logs, name) -> None:
    """One preparation a request for lint and the reuse figures, whether the arrival order is the input
    order (``untimed``) or not (``claude``: its sidechains interleave; lint takes each in its turn):
    the same figures as the two passes."""
    from prefixcache.analyzer.cache.simulate.reuse import reuse
    from prefixcache.analyzer.canonical.causes import lint_and_reuse, lint_results

    requests = list(Ingest([logs[name]]))
    calls = []
    real = Preparer.prepare

    def counting(self, request):
        calls.append(request)
        return real(self, request)

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(Preparer, "prepare", counting)
        linted, figures = lint_and_reuse(requests)
    assert len(calls) == len(requests) and {id(r) for r in calls} == {id(r) for r in requests}
    assert figures == reuse(requests) and sum(f.reusable_tokens for f in figures) > 0
    assert {k: _json(v) for k, v in linted.items()} == {k: _json(v) for k, v in lint_results(requests).items()}
