"""simulate next to a peer with a compiled core: kvcache-simulator 0.1.3 (C++ backend), same trace, same
capacities, CPU seconds of interleaved pairs.

The peer runs from the bench venv (``make bench-venv`` builds ``.venv-bench`` with it; the project never
depends on it). Each round runs, as subprocesses, the peer's ``run --policies lru,optimal`` and our
``simulate --cache blocks --policy lru,belady`` at the same capacities in blocks (the peer takes budgets in
GiB of a model's KV, so each budget is the capacity × the peer's bytes per block, rounded up to the
block), on Mooncake-shaped traces of 10k and 30k requests (``bench_simulate.mooncake_shaped``, whose
working set grows with the trace). Printed: median CPU seconds of each, the ratio peer / ours (≥ 1.0:
we are faster), and both LRU figures. The figures are not the same definition: the peer measures the
last 50% of requests after a warm-up half, ours every request; the table shows ours over the same last
half too, so the two can be read side by side.

Usage: python bench/bench_peers.py [--sizes 10000,30000] [--rounds 3] [--peer .venv-bench/bin/kvcache-simulator]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))

from bench_simulate import mooncake_shaped, write  # noqa: E402

FRACTIONS = (0.05, 0.10)
MODEL = "deepseek-v3"


def cpu_run(argv: list[str]) -> tuple[float, str]:
    """CPU seconds (user + system) of one child run and its stdout; CalledProcessError on failure."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    proc = subprocess.run(argv, check=True, capture_output=True, text=True, env={**os.environ, "COLUMNS": "200"})
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime), proc.stdout


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="10000,30000")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--peer", default=str(ROOT / ".venv-bench" / "bin" / "kvcache-simulator"))
    args = ap.parse_args(argv)
    if not Path(args.peer).exists():
        print(f"no peer at {args.peer}: run `make bench-venv` first")
        return 2
    ours_cmd = [sys.executable, "-m", "prefixcache", "simulate"]
    with tempfile.TemporaryDirectory() as tmp:
        for n in (int(s) for s in args.sizes.split(",")):
            recs = mooncake_shaped(n)
            path = write(recs, Path(tmp))
            distinct = len({h for r in recs for h in r["hash_ids"]})
            caps = [int(f * distinct) for f in FRACTIONS]
            probe = json.loads(subprocess.run([args.peer, "run", "--trace", str(path), "--model", MODEL,
                                               "--block-size", "512", "--budgets-gib", "1", "--policies", "lru",
                                               "--no-progress", "--format", "json", "--max-records", "1"],
                                              check=True, capture_output=True, text=True).stdout)
            per_block = probe["metadata"]["bytesPerBlock"]
            gib = ",".join(f"{(c + 0.5) * per_block / 2**30:.9f}" for c in caps)
            peer = [args.peer, "run", "--trace", str(path), "--model", MODEL, "--block-size", "512",
                    "--budgets-gib", gib, "--policies", "lru,optimal", "--no-progress", "--format", "json"]
            ours = ours_cmd + [str(path), "--cache", "blocks", "--capacity", ",".join(f"{c}blocks" for c in caps),
                               "--policy", "lru,belady", "--per-request", "--json"]
            t_peer, t_ours, out_peer, out_ours = [], [], "", ""
            for _ in range(args.rounds):  # interleaved pairs
                t, out_peer = cpu_run(peer)
                t_peer.append(t)
                t, out_ours = cpu_run(ours)
                t_ours.append(t)
            p, o = statistics.median(t_peer), statistics.median(t_ours)
            print(f"{n:,} requests, {distinct:,} distinct blocks, capacities {caps} blocks:")
            print(f"  kvcache-simulator (C++): {p:.2f} s CPU   prefixcache simulate: {o:.2f} s CPU   "
                  f"ratio peer / ours {p / o:.2f} (goal ≥ 1.0)")
            doc_peer, doc_ours = json.loads(out_peer), json.loads(out_ours)
            half = n // 2
            for point, cap in zip(doc_peer["points"], caps):
                lru = point["results"]["lru"]
                print(f"  {cap:>7,} blocks: peer LRU {lru['hitRate']:.4f} (last {n - lru['measurementStartRequest']:,} "
                      f"requests, {point['cacheBlocks']:,} blocks)", end="")
                row = next(r for r in doc_ours["results"] if r["policy"] == "lru" and r["capacity_blocks"] == cap)
                print(f"; ours LRU all requests {row['hit_ratio_tokens']:.4f}", end="")
                if cap == caps[0] and doc_ours.get("requests"):
                    reqs = doc_ours["requests"][half:]
                    print(f", last half {sum(r['cached_tokens'] for r in reqs) / sum(r['prompt_tokens'] for r in reqs):.4f}",
                          end="")
                print()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
