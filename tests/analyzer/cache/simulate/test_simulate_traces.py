"""Issue 11 item 1, simulate side: a block-hash trace request that does not extend the
previous request of its session files the tokens that request had as ``drift``, named
PC002 in ``drift_by_rule`` — the same sessions (inferred from hash chains for Mooncake,
:mod:`prefixcache.analyzer.cache.index.trace_sessions`) and the same lost tokens as lint."""

from __future__ import annotations

from prefixcache.analyzer.api import SimulateOptions, parse_capacities, simulate
from prefixcache.analyzer.cache.simulate.simulator import baseline
from prefixcache.analyzer.cache.workload import SimRequest
from prefixcache.analyzer.lint.config import LintConfig
from prefixcache.analyzer.lint.run import lint_paths
from tests.helpers import SAMPLES

KVT = SAMPLES / "kvcache_tester_claudecode_hashids64_trace_0001.json"
MOONCAKE = SAMPLES / "mooncake_kvtrace_synthetic_trace.jsonl"


def _run(path, **kw):
    return simulate([str(path)], SimulateOptions(**kw))


def _lint(path):
    return lint_paths([str(path)], LintConfig())


def test_kvcache_tester_reprefill_is_drift_pc002():
    rep = _run(KVT, per_request=True)
    row = rep.results[0]
    # lint: PC002 loses 130,994 tokens (request 40: 130,481); new tokens 197,867 (cold here)
    assert row.lost_tokens_by_cause["drift"] == 130_994 and row.drift_by_rule == {"PC002": 130_994}
    assert row.lost_tokens_by_cause["cold"] == 197_867 == _lint(KVT).total.new_tokens
    drifted = {r.order: (r.lost_tokens_by_cause["drift"], r.drift_cause) for r in rep.requests
               if r.lost_tokens_by_cause["drift"]}
    assert drifted[40] == (130_481, "PC002")  # after the /compact; the six others are lint's info tails
    assert sorted(drifted) == [5, 10, 13, 16, 18, 26, 40] and sum(d for d, _ in drifted.values()) == 130_994


def test_mooncake_drift_reconciles_with_lint():
    run = _lint(MOONCAKE)
    assert run.total.lost_tokens_by_code == {"PC002": 343_354} and run.total.findings_by_code["PC002"] == 427
    for cache in ("vllm", "blocks"):
        row = _run(MOONCAKE, cache=cache).results[0]
        # unbounded: drift is lint's lost tokens exactly, cold its new tokens; vLLM's
        # last-token cap (a full hit still recomputes its last block: 49,781 tokens of
        # granularity; the blocks cache has no cap) comes after lcp and takes from neither
        assert row.drift_by_rule == {"PC002": 343_354} == {"PC002": row.lost_tokens_by_cause["drift"]}
        assert row.lost_tokens_by_cause["cold"] == run.total.new_tokens == 20_998_613
        assert row.lost_tokens_by_cause["granularity"] == (49_781 if cache == "vllm" else 0)


def test_bounded_cache_keeps_drift_and_files_the_rest_as_capacity():
    row = _run(MOONCAKE, capacities=parse_capacities("5%")).results[0]
    assert row.drift_by_rule == {"PC002": 343_354} and row.lost_tokens_by_cause["capacity"] > 0


def _req(order, ids, n, session="m", infer=True, block=4):
    return SimRequest(order=order, session=session, index=order, source="m.jsonl", record=order + 1, model=None,
                      now=float(order), num_tokens=n, hashes=tuple(ids), block_size=block, infer_session=infer)


def test_inferred_sessions_decide_the_drift():
    reqs = [_req(0, [1, 2, 3], 12),      # session s1
            _req(1, [7, 8], 8),          # no shared first block: session s2
            _req(2, [1, 2, 9, 10], 16),  # continues s1 (2 leading blocks), drops block 3: 4 tokens drift
            _req(3, [7, 8, 5], 10)]      # extends s2: no drift
    base = baseline(reqs)
    assert tuple(base.lcp) == (0, 0, 8, 8)
    assert tuple(base.drift_end) == (0, 0, 12, 8)
    # without inference all four are one session: request 3 would not extend request 2
    flat = baseline([_req(r.order, r.hashes, r.num_tokens, infer=False) for r in reqs])
    assert flat.drift_end[3] == 10


def test_changed_partial_last_block_is_not_drift():
    # the previous request's last block held 2 of 4 tokens: lint counts r as extending it
    base = baseline([_req(0, [1, 2, 3], 10), _req(1, [1, 2, 9, 10], 16)])
    assert base.drift_end[1] == base.lcp[1] == 8
