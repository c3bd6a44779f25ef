"""simulate scales linearly in requests, and its 5-capacity LRU + Belady figures equal a plain replay.

Issue #10, item 8. Two measurements on Mooncake-shaped block traces:

1. **Time per request** of ``prefixcache simulate TRACE --capacity 5%,10% --policy lru,belady --json``,
   the command a user runs (``python -m prefixcache``: start-up, ingest, arrival order, lint's drift
   causes, the cache passes, the report written; CPU seconds of the child, rusage), and of the library
   call behind it (:func:`prefixcache.analyzer.api.simulate`, ``time.process_time``), on 10k … 100k
   requests (``--max 1000000`` adds 1M): flat means linear (goal: largest / smallest ≤ 1.3, on the
   command). The sizes run interleaved, one of each per round, medians of ``--rounds``.
2. **5 capacities × (LRU, Belady pinned, Belady unpinned)** on ``--cache blocks`` against a
   plain replay written here: an ``OrderedDict`` LRU per capacity and a heap MIN per
   capacity and variant, each computing its own next uses. Timed twice on our side: the
   cache passes behind the figures (one stack-distance sweep for LRU, one
   :func:`~prefixcache.analyzer.cache.simulate.bounds.min_plan` shared by ten bucketed MIN replays:
   the same work the plain replay does, from the same block chains; the goal, ≥ 10×), and
   the whole ``simulate`` call (ingest, lint's drift causes, arrival order, the cache passes,
   per-request figures, the report). Figures must be identical: per request for the cache
   passes, as totals for the report. The three run interleaved (bench/timing.py), medians of CPU
   seconds over ``--rounds``.

The traces are the Mooncake synthetic trace (``tests/fixtures/samples``) tiled: copy k keeps
every request's length, output and block structure and its timestamps come after copy k−1's
end. Ids that 10% or more of the sample's requests hold (the common head: a shared system
prompt) keep their value in every copy; every other id is shifted past copy k−1's. So the
working set grows with the trace (distinct blocks ∝ requests, as in a longer production
trace) while the hot shared prefix is reused across the whole trace, at every distance; a
tiling of disjoint copies would keep every reuse inside one copy and never grow the stack.

    .venv/bin/python bench/bench_simulate.py [--max 100000] [--ratio-requests 3993] [--rounds 3]

Prints both tables; exits 1 when figures differ.
"""

from __future__ import annotations

import argparse
import heapq
import resource
import statistics
import subprocess
import sys
import tempfile
from collections import OrderedDict
from pathlib import Path

import orjson
from timing import cpu_call, interleaved

from prefixcache.analyzer.api import SimulateOptions, parse_capacities, simulate
from prefixcache.analyzer.cache.simulate.bounds import belady_hits, min_plan
from prefixcache.analyzer.cache.simulate.stack_profile import ChainRequest, stack_profile

SAMPLE = Path(__file__).resolve().parents[1] / "tests" / "fixtures" / "samples" / "mooncake_kvtrace_synthetic_trace.jsonl"
SIZES = (10_000, 30_000, 100_000)
#: the command a user runs on a trace (issue "Fast and big"): 2 capacities × LRU, Belady
USER_OPTIONS = dict(capacities=("5%", "10%"), policies=("lru", "belady"))
#: ids held by at least this share of the sample's requests stay shared across copies
COMMON = 0.10
FRACTIONS = ("1%", "5%", "10%", "25%", "50%")
BLOCK = 512


def mooncake_shaped(n: int) -> list[dict]:
    """``n`` requests shaped like the sample (see the module docstring)."""
    recs = [orjson.loads(line) for line in SAMPLE.read_bytes().splitlines() if line.strip()]
    shift = max(h for r in recs for h in r["hash_ids"]) + 1
    span = recs[-1]["timestamp"] + 1
    held: dict[int, int] = {}
    for r in recs:
        for h in set(r["hash_ids"]):
            held[h] = held.get(h, 0) + 1
    common = {h for h, c in held.items() if c >= COMMON * len(recs)}
    out = []
    for i in range(n):
        k, r = divmod(i, len(recs))
        src = recs[r]
        out.append({"timestamp": src["timestamp"] + k * span, "input_length": src["input_length"],
                    "output_length": src["output_length"],
                    "hash_ids": [h if h in common else h + k * shift for h in src["hash_ids"]]})
    return out


def write(recs: list[dict], folder: Path) -> Path:
    path = folder / f"mooncake_shaped_{len(recs)}.jsonl"
    path.write_bytes(b"\n".join(orjson.dumps(r) for r in recs) + b"\n")
    return path


def command_cpu(args: list[str]) -> float:
    """CPU seconds (user + system) of ``python -m prefixcache ARGS`` (output discarded); exit 0 or SystemExit."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    rc = subprocess.run([sys.executable, "-m", "prefixcache", *args], stdout=subprocess.DEVNULL).returncode
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if rc != 0:
        raise SystemExit(f"prefixcache {' '.join(args)} exited {rc}")
    return (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


# --- the plain reference -----------------------------------------------------------------

def plain_lru(chains: list[list[int]], capacity: int) -> list[int]:
    """Leading cached blocks per request, then every block touched in prompt order (OrderedDict)."""
    od: OrderedDict[int, None] = OrderedDict()
    hits = []
    for hashes in chains:
        k = 0
        while k < len(hashes) and hashes[k] in od:
            k += 1
        hits.append(k)
        for h in hashes:
            if h in od:
                od.move_to_end(h)
            else:
                od[h] = None
        while len(od) > capacity:
            od.popitem(last=False)
    return hits


def plain_belady(chains: list[list[int]], capacity: int, pinned: bool) -> list[int]:
    """MIN: after each request, evict the block whose next use (request, position) is furthest;
    with ``pinned`` the request's own blocks go last."""
    nxt: dict[int, tuple[int, int]] = {}
    nexts: list[list[tuple[int, int]]] = [[] for _ in chains]
    never = (1 << 62, 0)
    for r in range(len(chains) - 1, -1, -1):
        nexts[r] = [nxt.get(h, never) for h in chains[r]]
        for i in range(len(chains[r]) - 1, -1, -1):
            nxt[chains[r][i]] = (r, i)
    when: dict[int, tuple[int, int]] = {}
    heap: list = []
    hits = []
    for r, hashes in enumerate(chains):
        k = 0
        while k < len(hashes) and hashes[k] in when:
            k += 1
        hits.append(k)
        for h, nu in zip(hashes, nexts[r]):
            when[h] = nu
            heapq.heappush(heap, (-nu[0], -nu[1], h))
        mine = set(hashes) if pinned else set()
        held, others = [], len(when) - len(mine)
        while len(when) > capacity and others > 0:  # pinned: first the blocks of other requests
            item = heapq.heappop(heap)
            h = item[2]
            if when.get(h) != (-item[0], -item[1]):
                continue
            if h in mine:
                held.append(item)
            else:
                del when[h]
                others -= 1
        for item in held:
            heapq.heappush(heap, item)
        while len(when) > capacity:  # then the request's own
            item = heapq.heappop(heap)
            if when.get(item[2]) == (-item[0], -item[1]):
                del when[item[2]]
    return hits


def plain_hits(recs: list[dict], caps: list[int]) -> dict[tuple[str, int], list[int]]:
    """(policy, capacity) → leading hit blocks per request, from the plain replays."""
    chains = [r["hash_ids"] for r in recs]
    out = {}
    for c in caps:
        out[("lru", c)] = plain_lru(chains, c)
        out[("pinned", c)] = plain_belady(chains, c, True)
        out[("unpinned", c)] = plain_belady(chains, c, False)
    return out


def library_hits(recs: list[dict], caps: list[int]) -> dict[tuple[str, int], list[int]]:
    """The same from the library's cache passes: one LRU stack profile for every capacity,
    one MIN plan for every capacity and both variants."""
    chains = [ChainRequest(r["hash_ids"], r["input_length"], BLOCK) for r in recs]
    prof = stack_profile(chains, "head-first")
    plan = min_plan(chains)
    out = {}
    for c in caps:
        out[("lru", c)] = prof.per_request(c)[0].tolist()
        out[("pinned", c)] = belady_hits(chains, c, True, plan).tolist()
        out[("unpinned", c)] = belady_hits(chains, c, False, plan).tolist()
    return out


def totals(recs: list[dict], hits: dict[tuple[str, int], list[int]]) -> dict[tuple[str, int], tuple[int, int]]:
    """(policy, capacity) → (hit tokens, hit blocks)."""
    return {key: (sum(min(r["input_length"], k * BLOCK) for r, k in zip(recs, h)), sum(h)) for key, h in hits.items()}


def report_figures(doc, prompt: int, blocks: int) -> dict[tuple[str, int], tuple[int, int]]:
    """The same figures from the simulate report (ratios back to counts)."""
    out = {}
    for row in doc.results:
        if row.policy == "lru":
            out[("lru", row.capacity_blocks)] = (row.cached_tokens, round(row.hit_ratio_blocks * blocks))
        else:
            b = row.offline_bound
            out[("pinned", row.capacity_blocks)] = (round(b.pinned_hit_ratio_tokens * prompt),
                                                    round(b.pinned_hit_ratio_blocks * blocks))
            out[("unpinned", row.capacity_blocks)] = (round(b.unpinned_hit_ratio_tokens * prompt),
                                                      round(b.unpinned_hit_ratio_blocks * blocks))
    return out


def close(a: dict, b: dict, prompt: int, blocks: int) -> bool:
    """Equal counts (the report's ratios carry 6 decimals: compare at that resolution)."""
    return a.keys() == b.keys() and all(abs(a[k][0] - b[k][0]) <= prompt * 1e-6 and
                                        abs(a[k][1] - b[k][1]) <= blocks * 1e-6 for k in a)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--max", type=int, default=SIZES[-1], help="largest trace (requests)")
    ap.add_argument("--ratio-requests", type=int, default=3993, help="requests of the 5-capacity comparison")
    ap.add_argument("--rounds", type=int, default=3, help="interleaved rounds (medians)")
    args = ap.parse_args()
    ok = True
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        user = SimulateOptions(capacities=tuple(parse_capacities(",".join(USER_OPTIONS["capacities"]))),
                               policies=USER_OPTIONS["policies"])
        flags = ["--capacity", ",".join(USER_OPTIONS["capacities"]), "--policy", ",".join(user.policies), "--json"]
        print(f"prefixcache simulate TRACE {' '.join(flags)} (vllm); median CPU of {args.rounds} interleaved rounds "
              "(one run of each size per round); time per request:")
        traces = {}
        for n in (s for s in (*SIZES, 1_000_000) if s <= args.max):
            recs = mooncake_shaped(n)
            traces[n] = (write(recs, folder), len({h for r in recs for h in r["hash_ids"]}))
            del recs
        cmd = {n: [] for n in traces}
        lib = {n: [] for n in traces}
        docs = {}
        for _ in range(args.rounds):
            for n, (path, _) in traces.items():
                cmd[n].append(command_cpu(["simulate", str(path), *flags]))
                t, docs[n] = cpu_call(lambda: simulate([str(path)], user))
                lib[n].append(t)
        per_cmd, per_lib = [], []
        for n, (path, distinct) in traces.items():
            c, lb = statistics.median(cmd[n]), statistics.median(lib[n])
            per_cmd.append(c / n)
            per_lib.append(lb / n)
            hits = "  ".join(f"{r.policy} {r.capacity} {r.hit_ratio_tokens:.3f}" for r in docs[n].results)
            print(f"  {n:>9,} requests, {distinct:>10,} distinct blocks: command {c:7.2f} s CPU "
                  f"{1e6 * c / n:7.1f} µs/request; library call {lb:7.2f} s CPU {1e6 * lb / n:7.1f} µs/request  hit {hits}")
        print(f"  largest / smallest time per request: command {max(per_cmd) / min(per_cmd):.2f} (goal ≤ 1.3), "
              f"library call {max(per_lib) / min(per_lib):.2f}")

        recs = mooncake_shaped(args.ratio_requests)
        path = write(recs, folder)
        opts = SimulateOptions(cache="blocks", policies=("lru", "belady"),
                               capacities=tuple(parse_capacities(",".join(FRACTIONS))))
        caps = [r.capacity_blocks for r in simulate([str(path)], opts).results if r.policy == "lru"]
        t, out = interleaved({"ours": lambda: simulate([str(path)], opts), "lib": lambda: library_hits(recs, caps),
                              "plain": lambda: plain_hits(recs, caps)}, args.rounds, warmup=False)
        (cpu_ours, doc), (cpu_lib, lib), (cpu_plain, plain) = ((t[k], out[k]) for k in ("ours", "lib", "plain"))
        prompt = sum(r["input_length"] for r in recs)
        blocks = sum(len(r["hash_ids"]) for r in recs)
        same_requests = lib == plain
        same_report = close(totals(recs, plain), report_figures(doc, prompt, blocks), prompt, blocks)
        ok &= same_requests and same_report
        print(f"\n5 capacities ({', '.join(FRACTIONS)} = {', '.join(map(str, caps))} blocks) × LRU, Belady pinned "
              f"and unpinned, --cache blocks, {len(recs):,} requests:")
        print(f"  median CPU of {args.rounds} interleaved rounds (plain, cache passes, simulate):")
        print(f"  plain replay (OrderedDict LRU, heap MIN):       {cpu_plain:6.2f} s CPU")
        print(f"  cache passes (LRU stack profile, MIN plan + 10 bucketed replays): {cpu_lib:6.3f} s CPU")
        print(f"  simulate (whole library call: ingest + report): {cpu_ours:6.2f} s CPU")
        print(f"  plain / cache passes (CPU): {cpu_plain / cpu_lib:.1f}× (goal ≥ 10×)   "
              f"identical hits on every request: {same_requests}")
        print(f"  plain / simulate (CPU):     {cpu_plain / cpu_ours:.1f}×   identical report figures: {same_report}")
        for row in doc.results:
            b = row.offline_bound
            extra = f"  (pinned {b.pinned_hit_ratio_blocks:.3f}, unpinned {b.unpinned_hit_ratio_blocks:.3f})" if b else ""
            print(f"    {row.policy:<6} {row.capacity:>4}: blocks {row.hit_ratio_blocks:.3f} "
                  f"tokens {row.hit_ratio_tokens:.3f}{extra}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
