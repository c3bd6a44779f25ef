"""Issue 25 item 2: the swept policies (LRU stack sweep, Belady) total in arrays, with no object per
request: the Totals equal those of the per-request rows, field by field (loss causes, drift by rule,
segments, blocks), on the shared traces and an agent log with segments and drift causes; and rows are
built only when a caller asks (``--per-request`` or calls with reported counts)."""

from __future__ import annotations

from dataclasses import replace

import pytest

from prefixcache.analyzer.api import SimulateOptions, parse_capacities
from prefixcache.analyzer.cache.simulate.figures import totals
from prefixcache.analyzer.cache.simulate.simulator import baseline
from prefixcache.analyzer.cache.simulate.sweeps import belady_runs, distinct_blocks, sweep_block_cache, swept_totals
from prefixcache.analyzer.lint.simulated import _simulated
from tests.helpers import SAMPLES

PATHS = [SAMPLES / "mooncake_kvtrace_synthetic_trace.jsonl", SAMPLES / "kvcache_tester_claudecode_hashids64_trace_0001.json",
         SAMPLES / "claude_code_session_v1.0.98_fe5e1c67.jsonl"]


@pytest.mark.parametrize("cache", ["vllm", "blocks"])
@pytest.mark.parametrize("path", PATHS, ids=["mooncake", "kvcache_tester", "claude_code"])
def test_array_totals_equal_row_totals(path, cache):
    opts = SimulateOptions(cache=cache)
    _, _, _, reqs, causes, _ = _simulated([str(path)], opts, None)
    spec = opts.spec(None)
    bs = spec.block_size_for(reqs)
    base = baseline(reqs)
    uniq = distinct_blocks(reqs, spec, bs, base)
    caps = [c.blocks(bs, uniq, None) for c in parse_capacities("1%,10%,50%")]
    for policy in ("lru", "belady"):
        pspec = replace(spec, policy=policy)
        agg, rows = swept_totals(reqs, pspec, caps, base, causes)
        assert rows is None
        if policy == "lru":
            per_cap = sweep_block_cache(reqs, pspec, caps, base, drift_causes=causes)
            runs = [None] * len(caps)
        else:
            runs = belady_runs(reqs, pspec, caps, base, drift_causes=causes)
            per_cap = [r.rows for r in runs]
        for (t, bound), ref_rows, run in zip(agg, per_cap, runs):
            assert t == totals(ref_rows)
            assert bound is None if run is None else bound == (run.bound, run.cached_tokens, run.hit_blocks)
        assert any(t.lost["capacity"] for t, _ in agg) and agg[0][0].cached_tokens < agg[-1][0].cached_tokens
        first = swept_totals(reqs, pspec, caps, base, causes, rows=True)[1]
        assert first == per_cap[0]


@pytest.mark.parametrize("path", PATHS[:2], ids=["mooncake", "kvcache_tester"])
def test_baseline_from_lints_trace_overlaps_equals_its_own_inference(path):
    """Issue 25: the simulator's baseline takes the block-trace drift extents lint's drift pass found
    (one trace-session inference, not two): the same levels as inferring them again."""
    from prefixcache.analyzer.lint.simulated import _read
    _, _, _, reqs, causes, _, overlaps = _read([str(path)], SimulateOptions(), None)
    assert len(overlaps) == len(reqs) and any(overlaps)
    own, given = baseline(reqs), baseline(reqs, overlaps)
    assert own == given and any(a > b for a, b in zip(own.drift_end, own.lcp))
    assert baseline(reqs, overlaps[:-1]) == own  # not one per trace request: inferred again
