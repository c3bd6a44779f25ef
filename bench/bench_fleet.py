"""Fleet benchmark: 16 replicas × 5 routers vs one single-cache ``simulate`` run.

Goal (issue 13): the whole fleet study on the Mooncake synthetic trace — the workload
ceiling, the pooled cache, and 16 replicas behind each of 5 routers (round-robin,
least-loaded, prefix-hash, cache-aware, kv-cost) with the timing model — takes less
than 10× one single-cache run (``simulate --capacity`` at the fleet's per-replica
capacity). Both start from the same prepared requests (ingest and tokenization are
shared and not timed).

    .venv/bin/python bench/bench_fleet.py [path/to/mooncake_trace.jsonl] [--capacity 2%]

Prints both times (best of 3 runs each), their ratio and each router's hit ratio;
exits 1 if the ratio is 10 or more.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

from prefixcache.analyzer.api import FleetOptions, Ingest, Preparer, SimulateOptions, parse_capacities
from prefixcache.analyzer.cache.fleet.study import fleet_report
from prefixcache.analyzer.cache.simulate.study import simulate_report
from prefixcache.analyzer.cache.workload import to_sim_requests

DEFAULT = Path(__file__).resolve().parents[1] / "tests" / "fixtures" / "samples" / "mooncake_kvtrace_synthetic_trace.jsonl"
ROUTERS = "round-robin,least-loaded,prefix-hash,cache-aware,kv-cost"
GOAL = 10.0


def best_of(fn, runs: int = 3) -> tuple[float, object]:
    best, out = float("inf"), None
    for _ in range(runs):
        t = time.perf_counter()
        out = fn()
        best = min(best, time.perf_counter() - t)
    return best, out


def main(argv: list[str]) -> int:
    capacity = "2%"
    if "--capacity" in argv:
        i = argv.index("--capacity")
        capacity = argv[i + 1]
        del argv[i:i + 2]
    path = Path(argv[0]) if argv else DEFAULT
    ingest = Ingest([str(path)])
    preparer = Preparer()
    items = [preparer.prepare(r) for r in ingest]
    reqs = to_sim_requests(items)
    options = SimulateOptions(capacities=tuple(parse_capacities(capacity)))
    fleet = FleetOptions(replicas=16, routers=ROUTERS)
    single, _ = best_of(lambda: simulate_report(items, reqs, options, None, ingest.summary, {}))
    many, rep = best_of(lambda: fleet_report(items, reqs, options, fleet, None, ingest.summary, {}))
    ratio = many / single
    print(f"{path.name}: {len(reqs):,} requests, {rep.prompt_tokens:,} prompt tokens, capacity {capacity} per replica "
          f"({rep.capacity_blocks:,} blocks of {rep.block_size})")
    print(f"single-cache simulate: {single:.3f} s; 16 replicas × 5 routers (+ ceiling, pooled): {many:.3f} s; "
          f"ratio {ratio:.2f} (goal < {GOAL:g})")
    print(f"ceiling {rep.ceiling_hit_ratio:.1%}, pooled {rep.pooled_hit_ratio:.1%}")
    for r in rep.results:
        print(f"  {r.router:<14} hit {r.hit_ratio_tokens:6.1%}  TTFT p50 {r.ttft_p50_s:8.3f} s  p99 {r.ttft_p99_s:8.3f} s")
    return 0 if ratio < GOAL else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
