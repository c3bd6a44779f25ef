"""Sweep benchmark: ≥100 LRU capacities in one pass vs a plain replay per capacity.

Goal (issue #4): the one-pass stack-distance sweep over 100 capacities on the
Mooncake synthetic trace takes no longer than a plain OrderedDict LRU replay
takes for 5 capacities, with identical hit counts at those 5 points and at
capacities at and above the unique and total block counts (where a cache holds
everything: hits must equal the unbounded cache's, never more).

    .venv/bin/python bench/bench_sweep.py [path/to/mooncake_trace.jsonl]

Prints both times (median CPU seconds of 5 interleaved pairs, bench/timing.py) and their ratio; exits 1 if values differ
or the ratio is above 1.
"""

from __future__ import annotations

import sys
from collections import OrderedDict
from pathlib import Path

import orjson
from timing import interleaved

from prefixcache.analyzer.cache.simulate.stack_profile import ChainRequest, stack_profile

DEFAULT = Path(__file__).resolve().parents[1] / "tests" / "fixtures" / "samples" / "mooncake_kvtrace_synthetic_trace.jsonl"
FRACTIONS = (0.01, 0.05, 0.10, 0.25, 0.50)


def plain_lru(chains: list[list[int]], capacity: int) -> int:
    """Leading cached blocks per request, then insert all of its blocks (OrderedDict LRU)."""
    od: OrderedDict[int, None] = OrderedDict()
    hits = 0
    for hashes in chains:
        for h in hashes:
            if h not in od:
                break
            hits += 1
        for h in hashes:
            if h in od:
                od.move_to_end(h)
            else:
                od[h] = None
                if len(od) > capacity:
                    od.popitem(last=False)
    return hits


def main() -> int:
    path = Path(sys.argv[1]) if len(sys.argv) > 1 else DEFAULT
    recs = [orjson.loads(line) for line in path.read_bytes().splitlines() if line.strip()]
    chains = [r["hash_ids"] for r in recs]
    unique = len({h for c in chains for h in c})
    caps5 = [int(f * unique) for f in FRACTIONS]
    total = sum(len(c) for c in chains)
    big = [unique, total, total + 1, 2 * total]
    caps100 = sorted(set(caps5) | set(big) | {max(1, unique * k // 100) for k in range(1, 101)})

    def sweep():
        prof = stack_profile([ChainRequest(r["hash_ids"], r["input_length"], 512) for r in recs], "head-first")
        return prof.hits(caps100)[0]

    t, out = interleaved({"plain": lambda: [plain_lru(chains, c) for c in caps5], "sweep": sweep}, 5)
    (t_plain, plain), (t_sweep, hits) = ((t[k], out[k]) for k in ("plain", "sweep"))
    at5 = [int(hits[caps100.index(c)]) for c in caps5]
    at_big = [int(hits[caps100.index(c)]) for c in big]
    plain_big = [plain_lru(chains, c) for c in big]
    print(f"trace: {path.name}: {len(recs):,} requests, {total:,} blocks, {unique:,} unique")
    print(f"plain OrderedDict LRU, 5 capacities:   {t_plain * 1e3:8.1f} ms CPU")
    print(f"one-pass sweep, {len(caps100)} capacities:     {t_sweep * 1e3:8.1f} ms CPU")
    print(f"ratio sweep / plain-5: {t_sweep / t_plain:.2f} (goal ≤ 1.00)")
    print("hit ratio at 1/5/10/25/50%:", " ".join(f"{h / total:.3f}" for h in at5))
    print("hit ratio at unique / total / total+1 / 2×total blocks:", " ".join(f"{h / total:.3f}" for h in at_big))
    same = at5 == plain and at_big == plain_big
    print("identical to the plain replay at those 9 points:", same)
    return 0 if same and t_sweep <= t_plain else 1


if __name__ == "__main__":
    raise SystemExit(main())
