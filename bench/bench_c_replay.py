"""simulate next to a plain C replay of the same LRU + Belady MIN (bench/c_replay.c), CPU seconds of
interleaved rounds.

Issue 25 item 1: the goal is simulate within 3× of a C replay. The C program (built here with the system
``cc -O2``; no part of the package) runs, per capacity, an LRU over dense block ids touched in prompt order
and a per-block heap MIN, pinned and unpinned: the algorithms of ``bench_simulate.plain_lru`` /
``plain_belady``. Its hits must equal the library's cache passes (``bench_simulate.library_hits``) on every
request. Timed each round, on Mooncake-shaped traces (``bench_simulate.mooncake_shaped``) at 5% and 10%
of the distinct blocks: the C replay (a child process; its input file is written before), our cache
passes (stack sweep + MIN plan + 4 replays, in process), and the whole ``simulate --cache blocks
--capacity 5%,10% --policy lru,belady`` library call (ingest, lint's drift causes, the report).

    .venv/bin/python bench/bench_c_replay.py [--sizes 10000,30000] [--rounds 3]

Exits 1 when hits differ.
"""

from __future__ import annotations

import argparse
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))

from bench_simulate import library_hits, mooncake_shaped, write  # noqa: E402

from prefixcache.analyzer.api import SimulateOptions, parse_capacities, simulate  # noqa: E402


def child_cpu(argv: list[str]) -> float:
    """CPU seconds (user + system) of one child run."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    subprocess.run(argv, check=True)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def cpu(fn):
    t = time.process_time()
    out = fn()
    return time.process_time() - t, out


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="10000,30000")
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args(argv)
    ok = True
    with tempfile.TemporaryDirectory() as tmp:
        exe = Path(tmp) / "c_replay"
        subprocess.run(["cc", "-O2", "-o", str(exe), str(ROOT / "bench" / "c_replay.c")], check=True)
        for n in (int(s) for s in args.sizes.split(",")):
            recs = mooncake_shaped(n)
            path = write(recs, Path(tmp))
            flat = np.concatenate([np.asarray(r["hash_ids"], dtype=np.int64) for r in recs])
            uniq, dense = np.unique(flat, return_inverse=True)
            lens = np.array([len(r["hash_ids"]) for r in recs], dtype=np.int64)
            trace = Path(tmp) / f"trace_{n}.bin"
            trace.write_bytes(np.concatenate(([n], lens, dense.astype(np.int64), [len(uniq)])).astype(np.int64).tobytes())
            caps = [int(f * len(uniq)) for f in (0.05, 0.10)]
            out = Path(tmp) / f"hits_{n}.bin"
            opts = SimulateOptions(cache="blocks", policies=("lru", "belady"),
                                   capacities=tuple(parse_capacities("5%,10%")))
            t_c, t_lib, t_sim = [], [], []
            for _ in range(args.rounds):  # interleaved
                t_c.append(child_cpu([str(exe), str(trace), str(out), *map(str, caps)]))
                t, lib = cpu(lambda: library_hits(recs, caps))
                t_lib.append(t)
                t_sim.append(cpu(lambda: simulate([str(path)], opts))[0])
            got = np.frombuffer(out.read_bytes(), dtype=np.int64).reshape(len(caps), 3, n)
            same = all(got[j, k].tolist() == lib[(pol, c)] for j, c in enumerate(caps)
                       for k, pol in enumerate(("lru", "pinned", "unpinned")))
            ok &= same
            c, lb, sm = (statistics.median(x) for x in (t_c, t_lib, t_sim))
            print(f"{n:,} requests, {len(uniq):,} distinct blocks, capacities {caps}: identical hits {same}")
            print(f"  C replay {c:.3f} s CPU ({1e6 * c / n:.1f} µs/request)   cache passes {lb:.3f} s "
                  f"({1e6 * lb / n:.1f} µs/request, {lb / c:.2f}× C)   simulate call {sm:.2f} s "
                  f"({1e6 * sm / n:.1f} µs/request, {sm / c:.1f}× C; goal ≤ 3×)")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
