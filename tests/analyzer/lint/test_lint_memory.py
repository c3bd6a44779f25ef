"""Issue 16 item 3 (lint): arrival order streamed without holding every request, compact
token ids, and a bounded set of requests held for first-of-session comparisons."""

from __future__ import annotations

import json
import random
from array import array

from prefixcache.analyzer.lint.config import LintConfig
from prefixcache.analyzer.lint.engine import Linter
from prefixcache.analyzer.lint.order import RESTART, arrival_stream
from prefixcache.analyzer.lint.run import lint_paths
from prefixcache.analyzer.model import compact_ids
from prefixcache.analyzer.prepare import Preparer
from prefixcache.analyzer.sequence import arrival_order
from prefixcache.analyzer.ingest import Ingest


class _Passes:
    """A re-iterable list that counts its passes."""

    def __init__(self, items):
        self.items, self.passes = list(items), 0

    def __iter__(self):
        self.passes += 1
        return iter(self.items)


def _replay(stream):
    """What a consumer of :func:`arrival_stream` ends up with (RESTART drops what it had)."""
    out = []
    for pos, item in stream:
        if pos == RESTART:
            out = []
            continue
        out.append((pos, item))
    return out


def test_arrival_stream_matches_arrival_order():
    rng = random.Random(7)
    for _ in range(300):
        n = rng.randint(0, 12)
        times = [rng.choice([None, rng.randint(0, 5)]) if rng.random() < 0.2 else rng.randint(0, 5) for _ in range(n)]
        items = list(enumerate(times))
        want = [item for _, item in arrival_order(items, lambda x: x[1])]
        got = _replay(arrival_stream(_Passes(items), lambda x: x[1]))
        assert [item for _, item in got] == want
        assert [pos for pos, _ in got] == [item[0] for item in want]


def test_arrival_stream_reads_once_when_times_run_forward():
    src = _Passes([(i, t) for i, t in enumerate([1, 1, 2, 5, 5, 9])])
    assert [p for p, _ in arrival_stream(src, lambda x: x[1])] == [0, 1, 2, 3, 4, 5] and src.passes == 1
    late_gap = _Passes([(0, 3), (1, 1), (2, None), (3, 0)])  # backwards, then a missing time: input order
    out = list(arrival_stream(late_gap, lambda x: x[1]))
    assert [p for p, _ in out] == [0, 1, 2, 3] and RESTART not in [p for p, _ in out] and late_gap.passes == 2
    back = _Passes([(0, 3), (1, 1), (2, 2)])
    assert [p for p, _ in arrival_stream(back, lambda x: x[1])] == [0, RESTART, 1, 2, 0] and back.passes == 2


def test_compact_ids():
    assert compact_ids([1, 2, 3]).typecode == "I" and compact_ids([-5, 2]).typecode == "q"
    assert compact_ids((2**40,)).typecode == "q"
    a = array("I", [1, 2])
    assert compact_ids(a) is a and compact_ids(array("q", [1, 2])) == a


def _log(path, lines):
    path.write_text("".join(json.dumps(x) + "\n" for x in lines))
    return str(path)


def _chat(user, turns, ts=None):
    msgs = [{"role": "system", "content": "You are a careful agent. " * 20}]
    for k in range(turns):
        msgs += [{"role": "user", "content": f"step {k} of {user}: " + "fix the bug " * 5},
                 {"role": "assistant", "content": f"done {k}"}]
    rec = {"model": "gpt-4o", "user": user, "messages": msgs}
    if ts is not None:
        rec["timestamp"] = ts
    return rec


def _old_lint(path):
    """Lint as before streaming: every request read, then fed in arrival order."""
    linter, preparer = Linter(owners=10**9), Preparer()
    requests = list(Ingest([path]))
    results = [None] * len(requests)
    for _, (pos, r) in arrival_order(enumerate(requests), lambda x: x[1].timestamp):
        results[pos] = linter.feed(preparer.prepare(r))
    return results, linter


def test_streamed_lint_equals_holding_every_request(tmp_path):
    rng = random.Random(3)
    lines = [_chat(f"u{rng.randint(0, 6)}", rng.randint(1, 5), ts=rng.randint(0, 40)) for _ in range(40)]
    for name, recs in (("backwards", lines), ("sorted", sorted(lines, key=lambda x: x["timestamp"])),
                       ("gap", lines[:20] + [{k: v for k, v in lines[20].items() if k != "timestamp"}] + lines[21:])):
        path = _log(tmp_path / f"{name}.jsonl", recs)
        run = lint_paths([path], LintConfig(format="json"))
        want, old = _old_lint(path)
        assert list(run.results) == want, name
        assert run.total == old.total and run.sessions == old.sessions


def test_held_requests_are_bounded(tmp_path, monkeypatch):
    import prefixcache.analyzer.lint.engine as engine

    monkeypatch.setattr(engine, "RENDERINGS", 4)
    lines = [_chat(f"s{s}", k) for s in range(30) for k in range(1, 6)]
    path = _log(tmp_path / "many.jsonl", lines)
    linter, preparer = Linter(owners=8, render=lambda r: preparer.pipeline(r.model).renderer.render(r)), Preparer()
    for r in Ingest([path]):
        linter.feed(preparer.prepare(r))
    assert len(linter._older) <= 8 and len(linter._last) == 30
    assert all(p.rendered is None for p in linter._last.values())  # re-rendered only when a break is explained
    assert len(linter._renderings) == 4  # but for the latest few (a break is mostly explained against them)


def test_only_the_latest_sessions_stay_in_memory(tmp_path, monkeypatch):
    """Issue 25 item 4: the last request of the most recently active sessions stays in memory, the
    others are written to a temporary file and read back equal (same results as all in memory)."""
    from prefixcache.analyzer.lint import held

    lines = [_chat(f"s{s}", k) for k in range(1, 4) for s in range(12)]  # 12 sessions, interleaved
    path = _log(tmp_path / "many.jsonl", lines)

    def run():
        linter, preparer = Linter(), Preparer()
        return linter, [linter.feed(preparer.prepare(r)) for r in Ingest([path])]

    linter, want = run()
    monkeypatch.setattr(held, "IN_MEMORY", 4)
    held_linter, got = run()
    assert got == want and len(held_linter._last) == 12 and len(held_linter._last._mem) == 4
    assert sorted(p.request.session for p in held_linter._last.values()) == sorted(
        p.request.session for p in linter._last.values())


def test_json_is_written_in_chunks_byte_for_byte(tmp_path, monkeypatch):
    import orjson

    import prefixcache.analyzer.lint.document as document
    from tests.helpers import SAMPLES

    rng = random.Random(5)
    path = _log(tmp_path / "mixed.jsonl", [_chat(f"ü{rng.randint(0, 3)}", rng.randint(1, 4)) for _ in range(12)])
    empty = _log(tmp_path / "empty.jsonl", [])
    for paths in ([path], [str(SAMPLES / "mooncake_kvtrace_synthetic_trace.jsonl")], [empty]):
        run = lint_paths(paths, LintConfig(format="json"))
        whole = orjson.dumps(run.report(), option=orjson.OPT_INDENT_2)
        for size in (1, 300, 1 << 20):
            monkeypatch.setattr(document, "CHUNK_BYTES", size)
            chunks = list(run.json_chunks())
            assert b"".join(chunks) == whole
            assert all(c.decode() for c in chunks)  # chunks end between items: never inside a character


def test_input_order_is_the_one_rule_lint_and_simulate_stream_by():
    from prefixcache.analyzer.cache.workload import SimStream
    from prefixcache.analyzer.sequence import InputOrder, arrival_order

    rng = random.Random(7)
    for _ in range(200):
        times = [rng.choice([None, *range(5)]) if rng.random() < 0.2 else rng.randrange(5) for _ in range(rng.randrange(1, 8))]
        order = InputOrder()
        holds = [order.see(t) for t in times][-1]
        kept = [i for _, i in arrival_order(range(len(times)), times.__getitem__)] == list(range(len(times)))
        assert holds == kept, times
    assert SimStream().in_input_order
