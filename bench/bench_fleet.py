"""Fleet benchmark: 16 replicas behind every router vs one single-cache ``simulate`` run.

Goal (issue 13): the whole fleet study on the Mooncake synthetic trace — the workload
ceiling, the pooled cache, and 16 replicas behind each registered router
(``analyzer/cache/fleet/routing.ROUTERS``: all of them, not a hand-picked few) with the
timing model — takes less than 2× one single-cache run per router (``simulate --capacity``
at the fleet's per-replica capacity; issue 13 set 10× for 5 routers, the same 2× each). Both start from the same prepared
requests (ingest and tokenization are shared and not timed).

    .venv/bin/python bench/bench_fleet.py [path/to/mooncake_trace.jsonl] [--capacity 2%] [--rounds 3]

Prints both figures as the median CPU seconds of interleaved pairs (one single-cache run, then
one fleet run, per round), the whole ratio and the ratio per router, and each router's hit ratio;
exits 1 if the ratio per router is 2 or more.
"""

from __future__ import annotations

import statistics
import sys
import time
from pathlib import Path

from prefixcache.analyzer.api import FleetOptions, Ingest, Preparer, SimulateOptions, parse_capacities
from prefixcache.analyzer.cache.fleet.routing import ROUTERS
from prefixcache.analyzer.cache.fleet.study import fleet_report
from prefixcache.analyzer.cache.simulate.study import simulate_report
from prefixcache.analyzer.cache.workload import to_sim_requests

DEFAULT = Path(__file__).resolve().parents[1] / "tests" / "fixtures" / "samples" / "mooncake_kvtrace_synthetic_trace.jsonl"
GOAL = 2.0  # per router


def cpu(fn) -> tuple[float, object]:
    """CPU seconds (``time.process_time``) of one call of ``fn``, and its result."""
    t = time.process_time()
    out = fn()
    return time.process_time() - t, out


def main(argv: list[str]) -> int:
    capacity = "2%"
    if "--capacity" in argv:
        i = argv.index("--capacity")
        capacity = argv[i + 1]
        del argv[i:i + 2]
    rounds = 3
    if "--rounds" in argv:
        i = argv.index("--rounds")
        rounds = int(argv[i + 1])
        del argv[i:i + 2]
    path = Path(argv[0]) if argv else DEFAULT
    ingest = Ingest([str(path)])
    preparer = Preparer()
    items = [preparer.prepare(r) for r in ingest]
    reqs = to_sim_requests(items)
    options = SimulateOptions(capacities=tuple(parse_capacities(capacity)))
    fleet = FleetOptions(replicas=16, routers=",".join(ROUTERS))
    singles, manys, rep = [], [], None
    for _ in range(rounds):  # interleaved pairs: a load change hits both sides alike
        t, _ = cpu(lambda: simulate_report(items, reqs, options, None, ingest.summary, {}))
        singles.append(t)
        t, rep = cpu(lambda: fleet_report(items, reqs, options, fleet, None, ingest.summary, {}))
        manys.append(t)
    single, many = statistics.median(singles), statistics.median(manys)
    ratio = many / single / len(ROUTERS)
    print(f"{path.name}: {len(reqs):,} requests, {rep.prompt_tokens:,} prompt tokens, capacity {capacity} per replica "
          f"({rep.capacity_blocks:,} blocks of {rep.block_size})")
    print(f"median CPU of {rounds} interleaved pairs: single-cache simulate {single:.3f} s; 16 replicas × "
          f"{len(ROUTERS)} routers (+ ceiling, pooled): {many:.3f} s; ratio {many / single:.2f}, per router {ratio:.2f} (goal < {GOAL:g})")
    print(f"ceiling {rep.ceiling_hit_ratio:.1%}, pooled {rep.pooled_hit_ratio:.1%}")
    for r in rep.results:
        print(f"  {r.router:<20} hit {r.hit_ratio_tokens:6.1%}  TTFT p50 {r.ttft.p50:8.3f} s  p99 {r.ttft.p99:8.3f} s")
    return 0 if ratio < GOAL else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
