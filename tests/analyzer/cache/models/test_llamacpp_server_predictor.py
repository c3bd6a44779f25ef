"""llama.cpp predicted once: the server replay's predictor and ``simulate --cache llamacpp`` agree.

Both drive :class:`~prefixcache.analyzer.cache.models.llamacpp.LlamaCppModel`: the simulator
through ``step`` (the slot's output taken from the reply the next prompt renders), the
server predictor through ``acquire`` / ``release`` with the output the server returned.
Here the "server" output of each request is exactly the reply its session's next prompt
renders after it, so the two must give the same cached tokens request by request, on
real sample sessions, with the prompt cache off (as a server replay runs llama-server).
"""

from __future__ import annotations

from bisect import bisect_right

import pytest

from prefixcache.analyzer.api import SimulateOptions, simulate
from prefixcache.analyzer.cache.workload import SimRequest, to_sim_requests
from prefixcache.analyzer.ingest import Ingest
from prefixcache.analyzer.prepare import Preparer
from prefixcache.replay.server.predict import LlamaCppPredictor, make_predictor
from tests.helpers import SAMPLES, existing

SESSIONS = [
    "swe_agent_traj_function_calling_with_per_step_messages_marshmallow-1867.traj",
    "claude_code_session_v1.0.98_fe5e1c67.jsonl",
    "mini_swe_agent_v1.1_deepseek_reasoner_pvlib-1606.traj.json",
    "codex_rollout_synthetic_fixture_claude-code-log.jsonl",
    "mini_swe_agent_legacy_list_github_issue.traj.json",
]


def _outputs(reqs: list[SimRequest]) -> list[tuple[int, ...]]:
    """Each request's output as its session's next prompt renders it (empty when that
    prompt does not extend this one)."""
    out: list[tuple[int, ...]] = [() for _ in reqs]
    last: dict[str, int] = {}
    for i, r in enumerate(reqs):
        j = last.get(r.session)
        last[r.session] = i
        prev = reqs[j].tokens if j is not None else None
        if prev is None or r.tokens is None or r.tokens[:len(prev)] != prev:
            continue
        k = bisect_right(r.reply_ends, len(prev))
        if k < len(r.reply_ends):
            out[j] = r.tokens[len(prev):r.reply_ends[k]]
    return out


@pytest.mark.parametrize("slots", [1, 2, 3])
@pytest.mark.parametrize("sample", SESSIONS)
def test_server_predictor_equals_the_simulator(sample, slots):
    path = str(existing(SAMPLES / sample))
    report = simulate([path], SimulateOptions(cache="llamacpp", slots=slots, cache_ram_mib=0, per_request=True))
    want = {f.order: f.cached_tokens for f in report.requests}
    preparer = Preparer()
    reqs = to_sim_requests([preparer.prepare(r) for r in Ingest([path])])
    assert len(reqs) == len(want) > 1
    predictor = make_predictor("llamacpp", 1, None, slots)
    assert isinstance(predictor, LlamaCppPredictor)
    got = {}
    for r, output in zip(reqs, _outputs(reqs)):
        got[r.order], handle = predictor.send(r.tokens or ())
        predictor.done(handle, r.tokens or (), output)
    assert got == want
    assert any(want.values())
