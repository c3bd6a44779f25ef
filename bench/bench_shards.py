"""SHARDS (``simulate --sample``) against the exact LRU pass on a big Mooncake-shaped trace.

Issue 25 item 7: at a 1% sample the estimated LRU hit ratio is within 0.01 (absolute) of the exact one
at every capacity on a 1M-request Mooncake-shaped trace, and the reported error covers the difference.
The trace is the shared Mooncake sample tiled as in ``bench_simulate.mooncake_shaped`` (ids held by ≥ 10%
of the sample's requests shared by every copy, the others shifted per copy, so the working set grows),
built here as numpy views (no object per block). Exact: one stack sweep (:mod:`.stack_profile`, compiled
core); sampled: :func:`~prefixcache.analyzer.cache.simulate.shards.shards_curve` at each rate. Printed:
both curves, the largest absolute difference, whether every difference is inside the reported ±, and CPU
seconds of each pass.

    .venv/bin/python bench/bench_shards.py [--requests 1000000] [--rates 0.01,0.1] [--salts 3]
    .venv/bin/python bench/bench_shards.py --shared [--salts 20]

``--shared`` checks instead that the reported ± is honest on the small shared block traces (Mooncake,
kv-cache-tester; their ``vllm`` chains): the share of (salt × capacity 1–50%) cases whose |sampled −
exact| is inside the reported ±, the largest difference and the median ±, at 1, 5, 10 and 20%.

Exits 1 when a 1% difference is ≥ 0.01. Memory: 3.7 GB peak RSS at 1M requests (30.5M block lookups: the
exact sweep's arrays, and the sampled pass's columns of every lookup before the sample is drawn);
``--requests 300000`` needs about a third.
"""

from __future__ import annotations

import argparse
import resource
import sys
import time
from pathlib import Path

import numpy as np
import orjson

from prefixcache.analyzer.cache.simulate.shards import shards_curve
from prefixcache.analyzer.cache.simulate.stack_profile import ChainRequest, stack_profile

SAMPLE = Path(__file__).resolve().parents[1] / "tests" / "fixtures" / "samples" / "mooncake_kvtrace_synthetic_trace.jsonl"
#: capacities as fractions of the trace's distinct blocks: the tiled trace's reuse is inside one copy of the
#: sample or on the shared head, so the curve moves below ~0.5% at 1M requests and is flat above
FRACTIONS = (0.00005, 0.0001, 0.0002, 0.0005, 0.001, 0.002, 0.005, 0.01, 0.05, 0.25)


def chains(n: int) -> list[ChainRequest]:
    """``n`` Mooncake-shaped requests (see the module docstring) as ChainRequests over numpy views."""
    recs = [orjson.loads(line) for line in SAMPLE.read_bytes().splitlines() if line.strip()]
    held: dict[int, int] = {}
    for r in recs:
        for h in set(r["hash_ids"]):
            held[h] = held.get(h, 0) + 1
    common = {h for h, c in held.items() if c >= 0.10 * len(recs)}
    shift = max(h for r in recs for h in r["hash_ids"]) + 1
    base = [np.asarray(r["hash_ids"], dtype=np.int64) for r in recs]
    keep = [np.isin(b, list(common)) for b in base]
    out = []
    for i in range(n):
        k, j = divmod(i, len(recs))
        ids = np.where(keep[j], base[j], base[j] + k * shift)
        out.append(ChainRequest(ids, recs[j]["input_length"], 512))
    return out


def shared_traces(salts: int) -> None:
    """The ``--shared`` table (see the module docstring)."""
    from prefixcache.analyzer.api import Ingest, Preparer
    from prefixcache.analyzer.cache.models import CacheSpec
    from prefixcache.analyzer.cache.simulate.sweeps import chains as model_chains
    from prefixcache.analyzer.cache.workload import to_sim_requests

    for path in (SAMPLE, SAMPLE.with_name("kvcache_tester_claudecode_hashids64_trace_0001.json")):
        preparer = Preparer()
        reqs = to_sim_requests([preparer.prepare(r) for r in Ingest([str(path)])])
        spec = CacheSpec("vllm")
        ch = model_chains(reqs, spec, spec.block_size_for(reqs))
        prof = stack_profile(ch, "tail-first")
        caps = [(f"{100 * f:g}%", max(1, int(f * prof.unique_blocks))) for f in (0.01, 0.05, 0.10, 0.25, 0.5)]
        tok = prof.tokens.sum()
        exact = {c: float(prof.tokens[prof.m < c].sum()) / tok for _, c in caps}
        print(f"{path.name}: {len(reqs):,} requests, {prof.unique_blocks:,} distinct blocks; exact "
              + "  ".join(f"{lbl} {exact[c]:.3f}" for lbl, c in caps))
        for rate in (0.01, 0.05, 0.1, 0.2):
            inside = cases = 0
            worst, errors = 0.0, []
            for salt in range(salts):
                for p in shards_curve(ch, caps, rate, "tail-first", salt).points:
                    d = abs(p.hit_ratio_tokens - exact[p.capacity_blocks])
                    worst, cases = max(worst, d), cases + 1
                    inside += d <= p.hit_ratio_tokens_error
                    errors.append(p.hit_ratio_tokens_error)
            print(f"  rate {rate:g}: inside the reported ± in {inside}/{cases}; largest |sampled − exact| {worst:.4f}; "
                  f"median ± {float(np.median(errors)):.4f}")


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--requests", type=int, default=1_000_000)
    ap.add_argument("--rates", default="0.01,0.1")
    ap.add_argument("--salts", type=int, default=3)
    ap.add_argument("--shared", action="store_true", help="the ± honesty table on the small shared traces")
    ap.add_argument("--fractions", default=",".join(f"{f:g}" for f in FRACTIONS),
                    help="capacities, fractions of the distinct blocks")
    args = ap.parse_args(argv)
    if args.shared:
        shared_traces(args.salts)
        return 0
    ch = chains(args.requests)
    t = time.process_time()
    prof = stack_profile(ch, "tail-first")
    t_exact = time.process_time() - t
    uniq = int(prof.unique_blocks)
    caps = [(f"{100 * f:g}%", int(f * uniq)) for f in map(float, args.fractions.split(","))]
    tok = prof.tokens.sum()
    exact = {c: float(prof.tokens[prof.m < c].sum()) / tok for _, c in caps}
    lookups = len(prof.m)
    del prof
    print(f"{args.requests:,} requests, {lookups:,} block lookups, {uniq:,} distinct blocks; "
          f"exact stack sweep {t_exact:.1f} s CPU")
    print("  capacities (blocks): " + "  ".join(f"{lbl} {c:,}" for lbl, c in caps))
    print("  exact LRU token hit ratio: " + "  ".join(f"{lbl} {exact[c]:.4f}" for lbl, c in caps))
    ok = True
    for rate in (float(x) for x in args.rates.split(",")):
        worst, inside, cases, cpu = 0.0, 0, 0, []
        for salt in range(args.salts):
            t = time.process_time()
            curve = shards_curve(ch, caps, rate, "tail-first", salt)
            cpu.append(time.process_time() - t)
            for p in curve.points:
                d = abs(p.hit_ratio_tokens - exact[p.capacity_blocks])
                worst = max(worst, d)
                cases += 1
                inside += d <= p.hit_ratio_tokens_error
            print(f"  rate {rate:g} salt {salt}: " + "  ".join(
                f"{p.capacity} {p.hit_ratio_tokens:.4f}±{p.hit_ratio_tokens_error:.4f}" for p in curve.points)
                + f"   ({curve.sampled_lookups:,} sampled lookups)")
        print(f"  rate {rate:g}: largest |sampled − exact| {worst:.4f}; inside the reported ± in {inside}/{cases}; "
              f"median {sorted(cpu)[len(cpu) // 2]:.1f} s CPU per curve (exact {t_exact:.1f} s)")
        if rate <= 0.01 and worst >= 0.01:
            ok = False
    print(f"peak RSS {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} MB")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
