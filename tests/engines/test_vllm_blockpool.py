"""The ``vllm`` cache model equals vLLM's own ``BlockPool`` under eviction, request by request.

``scripts/vllm_blockpool.py`` drives ``vllm.v1.core.block_pool.BlockPool`` from the engine venv
(``.venv-vllm``, built by ``make engine-vllm``) over the Mooncake trace, offline, as vLLM's
scheduler does for prompt-only requests; the analyzer's model, its one-pass LRU sweep, the
per-capacity replay and the fleet's pooled replicas must give the same hit tokens on every request
at 1, 5, 10 and 25% capacity. No server is started."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from prefixcache.analyzer.api import Ingest, Preparer
from prefixcache.analyzer.cache.capacity import parse_capacity
from prefixcache.analyzer.cache.fleet.replicas import Arm, run_fleet
from prefixcache.analyzer.cache.fleet.timing import HARDWARE
from prefixcache.analyzer.cache.models import CacheSpec, make_model
from prefixcache.analyzer.cache.simulate.simulator import simulate_stream
from prefixcache.analyzer.cache.simulate.sweeps import distinct_blocks, sweep_block_cache
from prefixcache.analyzer.cache.workload import to_sim_requests
from tests.helpers import ROOT, SAMPLES

pytestmark = pytest.mark.engines
TRACE = SAMPLES / "mooncake_kvtrace_synthetic_trace.jsonl"
#: The engine venv: ``VLLM_VENV`` (as ``make test-engines`` passes it), else the checkout's ``.venv-vllm``.
VLLM_PY = Path(os.environ.get("VLLM_VENV") or ROOT / ".venv-vllm") / "bin" / "python"


FRACTIONS = ["1%", "5%", "10%", "25%"]


@pytest.fixture(scope="module")
def reqs():
    if not VLLM_PY.exists():
        pytest.fail(f"no {VLLM_PY}: make test-engines builds it (make engine-vllm), or set VLLM_VENV")
    preparer = Preparer()
    return to_sim_requests([preparer.prepare(r) for r in Ingest([str(TRACE)])])


def _capacity(reqs, fraction: str) -> int:
    return parse_capacity(fraction).blocks(512, distinct_blocks(reqs, CacheSpec("vllm"), 512))  # as simulate --capacity


@pytest.fixture(scope="module")
def block_pool(reqs) -> dict[int, dict[int, int]]:
    """vLLM's BlockPool at every capacity, in one process (importing vLLM is most of its time)."""
    caps = ",".join(str(_capacity(reqs, f)) for f in FRACTIONS)
    proc = subprocess.run([str(VLLM_PY), str(ROOT / "scripts" / "vllm_blockpool.py"), str(TRACE),
                           "--capacity-blocks", caps, "--block-size", "512"],
                          capture_output=True, text=True, timeout=600, check=True)
    rows = [json.loads(line) for line in proc.stdout.splitlines()]
    assert not [r for r in rows if "skipped" in r]
    out: dict[int, dict[int, int]] = {}
    for r in rows:
        out.setdefault(r["capacity"], {})[r["record"]] = r["cached_tokens"]
    return out


@pytest.mark.parametrize("fraction", FRACTIONS)
def test_vllm_model_equals_vllm_block_pool(reqs, block_pool, fraction):
    spec = CacheSpec("vllm")
    capacity = _capacity(reqs, fraction)
    want = block_pool[capacity]
    assert len(want) == len(reqs) == 3993
    model = make_model(spec, 512, capacity)
    paths = {
        "model": [model.step(r).cached_tokens for r in reqs],
        "replay": [f.cached_tokens for f in simulate_stream(reqs, spec, capacity)],
        "sweep": [f.cached_tokens for f in sweep_block_cache(reqs, spec, [capacity])[0]],
        "fleet": [s.cached for s in run_fleet(reqs, spec, 512, Arm(1, capacity, HARDWARE["h100-llama3-8b"]),
                                               "round-robin", None, [r.now for r in reqs], [0] * len(reqs),
                                               fast=True)[0]],
    }
    expected = [want[r.record] for r in reqs]
    for name, got in paths.items():
        equal = sum(a == b for a, b in zip(got, expected))
        assert equal == len(reqs), (fraction, name, equal, sum(got) - sum(expected))
    assert sum(expected) > 0
