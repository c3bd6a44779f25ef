"""Issue 25 item 7: ``simulate --sample RATE`` (SHARDS, Waldspurger et al. FAST '15) — at rate 1 the
sampled curve is the exact LRU figure; below it, the estimate stays near the exact one and the reported
error covers it on the shared traces; the sample (and every array behind the curve) is about R of the
trace's block lookups. The 1M-request, 1% check is bench/bench_shards.py."""

from __future__ import annotations

import orjson
import pytest

from prefixcache.analyzer.api import SimulateOptions, parse_capacities, simulate
from prefixcache.analyzer.cache.simulate.shards import sampled_ids, shards_curve
from prefixcache.analyzer.cache.simulate.stack_profile import ChainRequest, stack_profile
from prefixcache.analyzer.errors import ConfigError
from tests.helpers import SAMPLES, cli_app

MOONCAKE = SAMPLES / "mooncake_kvtrace_synthetic_trace.jsonl"
KVT = SAMPLES / "kvcache_tester_claudecode_hashids64_trace_0001.json"
CAPS = "1%,5%,10%,25%"


def _run(path, **kw):
    return simulate([str(path)], SimulateOptions(capacities=tuple(parse_capacities(CAPS)), **kw))


@pytest.mark.parametrize("cache", ["vllm", "blocks"])
@pytest.mark.parametrize("path", [MOONCAKE, KVT], ids=["mooncake", "kvcache_tester"])
def test_rate_one_is_the_exact_curve(path, cache):
    exact = _run(path, cache=cache).results
    curve = _run(path, cache=cache, sample=1.0).sampled
    assert curve.sampled_lookups == curve.lookups and len(curve.points) == len(exact) == 4
    for row, pt in zip(exact, curve.points):
        assert (pt.capacity, pt.capacity_blocks) == (row.capacity, row.capacity_blocks)
        # vLLM's scratch block (one slot while a request runs) is not modelled by the sample
        tol = 2e-3 if cache == "vllm" else 1e-6
        assert abs(pt.hit_ratio_tokens - row.hit_ratio_tokens) <= tol and pt.hit_ratio_tokens_error == 0
        assert abs(pt.hit_ratio_blocks - row.hit_ratio_blocks) <= tol


def _mooncake_chains():
    recs = [orjson.loads(line) for line in MOONCAKE.read_bytes().splitlines() if line.strip()]
    return [ChainRequest(r["hash_ids"], r["input_length"], 512) for r in recs]


def test_error_covers_the_exact_figure_on_the_shared_trace():
    ch = _mooncake_chains()
    prof = stack_profile(ch, "tail-first")
    caps = [(f, int(f * prof.unique_blocks)) for f in (0.01, 0.05, 0.10, 0.25)]
    total_tok = prof.tokens.sum()
    exact = {c: float(prof.tokens[prof.m < c].sum()) / total_tok for _, c in caps}
    covered = cases = 0
    worst = {}
    for rate in (0.05, 0.2):
        for salt in range(6):
            curve = shards_curve(ch, [(str(f), c) for f, c in caps], rate, "tail-first", salt)
            assert abs(curve.sampled_lookups - rate * curve.lookups) < 0.35 * rate * curve.lookups
            for pt in curve.points:
                miss = abs(pt.hit_ratio_tokens - exact[pt.capacity_blocks])
                worst[rate] = max(worst.get(rate, 0), miss)
                cases += 1
                covered += miss <= pt.hit_ratio_tokens_error
    assert covered >= 0.9 * cases, (covered, cases)
    assert worst[0.2] < 0.02 and worst[0.05] < 0.05  # measured: 0.003 at 10%, 0.023 at 1% (10 salts)


def test_a_grown_trace_at_two_percent_within_point_zero_two():
    """A Mooncake-shaped trace of 40k requests (ids shared by ≥ 10% of the sample kept, others
    shifted per copy, as bench_simulate builds it): the 2% sample within 0.02 of exact."""
    base = _mooncake_chains()
    held = {}
    for r in base:
        for h in set(r.hashes):
            held[h] = held.get(h, 0) + 1
    common = {h for h, c in held.items() if c >= 0.1 * len(base)}
    shift = max(h for r in base for h in r.hashes) + 1
    ch = [ChainRequest([h if h in common else h + k * shift for h in r.hashes], r.num_tokens, 512)
          for k in range(10) for r in base]
    prof = stack_profile(ch, "tail-first")
    caps = [(f, int(f * prof.unique_blocks)) for f in (0.01, 0.05, 0.10, 0.25)]
    curve = shards_curve(ch, [(str(f), c) for f, c in caps], 0.02, "tail-first", 7)
    for pt in curve.points:
        exact = float(prof.tokens[prof.m < pt.capacity_blocks].sum()) / prof.tokens.sum()
        assert abs(pt.hit_ratio_tokens - exact) < 0.02, (pt, exact)


def test_sampling_is_by_id_and_fixed_rate():
    ids = __import__("numpy").arange(200_000, dtype="uint64")
    kept = sampled_ids(ids, 0.01)
    assert 1800 < kept.sum() < 2200 and (sampled_ids(ids, 0.01) == kept).all()  # deterministic
    assert (sampled_ids(ids, 0.01, salt=1) != kept).any()


@pytest.mark.parametrize("kw", [dict(sample=0.0), dict(sample=1.5), dict(sample=0.1, policies=("lru", "belady")),
                                dict(sample=0.1, cache="sglang"), dict(sample=0.1, ttl_s=30.0)])
def test_bad_sample_options(kw):
    with pytest.raises(ConfigError):
        SimulateOptions(capacities=tuple(parse_capacities("5%")), **kw)
    with pytest.raises(ConfigError):
        SimulateOptions(sample=0.1)  # no capacity


def test_cli_sample_flag():
    from click.testing import CliRunner
    runner, app = CliRunner(), cli_app()
    out = runner.invoke(app, ["simulate", str(MOONCAKE), "--capacity", "5%", "--sample", "10%", "--json"])
    assert out.exit_code == 0, out.output
    doc = orjson.loads(out.stdout)
    assert doc["results"] == [] and doc["sampled"]["rate"] == 0.1 and doc["sampled"]["points"][0]["capacity"] == "5%"
    bad = runner.invoke(app, ["simulate", str(MOONCAKE), "--capacity", "5%", "--sample", "lots"])
    assert bad.exit_code == 2 and "--sample" in bad.output
