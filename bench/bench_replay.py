"""Replay engine speed, measured in one run (prints ratios; no pass/fail thresholds).

1. ``warm / suffix-only``: TTFT of a warm request (prefix served from the KV prefix
   cache, suffix computed) divided by the TTFT of a cold prompt made of only that
   uncached suffix. The difference is the cost of reusing the cache: lookup, KV
   assembly, and attention over the cached prefix. Goal ≤ 1.5.
2. ``bookkeeping``: share of warm TTFT spent in the cache lookup + KV assembly
   (goal < 5%); the store after decode (copying new blocks out) is reported
   against TTFT too, although it is not part of it.

Usage: python bench/bench_replay.py [--device cpu|cuda] [--prefix 1024] [--suffix 64] [--reps 5] [--threads N]
    [--budget 300]

CPU threads: ``--threads``, else ``OMP_NUM_THREADS`` as the environment sets it, else 2; OpenMP waits
passively (``OMP_WAIT_POLICY=PASSIVE`` unless the environment sets it: spinning threads on a loaded
machine slowed one run past 900 s). Bounded time: repetitions stop once ``--budget`` seconds (wall
clock, model load excluded) are spent, after at least one; the figures say how many ran. Each
repetition is an interleaved pair (warm request, then the suffix-only cold one): the ratios are of
medians of wall-clock TTFT (the figure an engine user sees), and the CPU seconds of each side
(``time.process_time``, every torch thread) are printed next to them.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")  # before torch starts its OpenMP pool

from prefixcache.analyzer.cache.index.block_hash import BlockHashCache  # noqa: E402
from prefixcache.replay.local.hf import HFEngine, load_model  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
TEXT = ROOT / "tests" / "fixtures" / "samples" / "swe_agent_traj_function_calling_with_per_step_messages_marshmallow-1867.traj"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default=None)
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--dtype", default="float32")
    ap.add_argument("--prefix", type=int, default=1024, help="cached prefix, tokens")
    ap.add_argument("--suffix", type=int, default=64, help="uncached suffix, tokens")
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--threads", type=int, default=None, help="torch CPU threads (default: OMP_NUM_THREADS, else 2)")
    ap.add_argument("--budget", type=float, default=300.0, help="seconds for the repetitions (at least one runs)")
    a = ap.parse_args()
    loaded = load_model(a.model, device=a.device, dtype=a.dtype, threads=a.threads)
    eng = HFEngine(loaded)
    source = TEXT.read_text() if TEXT.exists() else (ROOT / "README.md").read_text() * 20
    ids = loaded.tokenizer(source)["input_ids"]
    need = a.prefix + a.suffix * (a.reps + 1)
    if len(ids) < need:
        ids = (ids * (need // len(ids) + 1))
    prefix = ids[:a.prefix]
    eng.generate(prefix[:64])  # warm-up
    warm, suffix_only, lookup, store, cpu_warm, cpu_cold = [], [], [], [], [], []
    deadline = time.monotonic() + a.budget
    for rep in range(a.reps):
        if rep and time.monotonic() > deadline:
            print(f"budget of {a.budget:g} s spent after {rep} of {a.reps} repetitions")
            break
        cache = eng.kv_store(BlockHashCache(16, None, "lru"))
        eng.generate(prefix, cache=cache, now=0)
        suffix = ids[a.prefix + rep * a.suffix: a.prefix + (rep + 1) * a.suffix]
        t0 = time.process_time()
        g = eng.generate(prefix + suffix, cache=cache, now=1)
        cpu_warm.append(time.process_time() - t0)
        assert g.cached_tokens == a.prefix // 16 * 16, g.cached_tokens
        t0 = time.process_time()
        c = eng.generate(suffix)
        cpu_cold.append(time.process_time() - t0)
        warm.append(g.ttft_s)
        lookup.append(g.lookup_s)
        store.append(g.store_s)
        suffix_only.append(c.ttft_s)
    w, s = statistics.median(warm), statistics.median(suffix_only)
    lk, st = statistics.median(lookup), statistics.median(store)
    print(f"model {loaded.name} on {loaded.device} {a.dtype}; prefix {a.prefix} cached + suffix {a.suffix} computed, "
          f"median of {len(warm)} interleaved pairs, {__import__('torch').get_num_threads()} torch threads, "
          f"load average {os.getloadavg()[0]:.2f}")
    print(f"warm TTFT {w * 1e3:.1f} ms, suffix-only cold TTFT {s * 1e3:.1f} ms")
    print(f"warm / suffix-only TTFT ratio: {w / s:.2f}   (goal <= 1.5)")
    cw, cc = statistics.median(cpu_warm), statistics.median(cpu_cold)
    print(f"CPU seconds (whole generate call): warm {cw:.3f} s, suffix-only {cc:.3f} s, ratio {cw / cc:.2f}")
    print(f"bookkeeping (lookup + KV assembly) share of warm TTFT: {100 * lk / w:.1f}%   (goal < 5%)")
    print(f"store after decode (copy new blocks out): {st * 1e3:.2f} ms = {100 * st / w:.1f}% of warm TTFT")
    return 0


if __name__ == "__main__":
    sys.exit(main())
