"""What ``--survival``, ``--ttl-whatif`` and ``--reuse prefix,chunks`` add to ``simulate``'s time (issue 26).

On the Mooncake sample (``tests/fixtures/samples``, ``--cache blocks --capacity 5%``), in CPU
seconds, best of ``--runs``, without and with each analysis, in one run:

* the **command** ``prefixcache simulate … --json`` as a subprocess (its children's CPU time:
  start-up, ingest, drift causes, the cache pass, the report, the JSON) — the goal of issue 26:
  ``--survival`` and ``--reuse prefix,chunks`` together add ≤ 30%;
* the **library call** behind it (:func:`prefixcache.analyzer.api.simulate`, ``time.process_time``),
  where the second LRU replay that residency needs weighs more (reported, no goal).

The TTL what-if replays the cache once per retention (7 engine TTLs here): reported on its own.

    .venv/bin/python bench/bench_reuse_analyses.py [--runs 3] [--capacity 5%]

Prints the table; exits 1 when survival + chunks add more than 30% to the command.
"""

from __future__ import annotations

import argparse
import os
import resource
import subprocess
import sys
import time
from pathlib import Path

from prefixcache.analyzer.api import SimulateOptions, parse_capacities, simulate

SAMPLE = Path(__file__).resolve().parents[1] / "tests" / "fixtures" / "samples" / "mooncake_kvtrace_synthetic_trace.jsonl"


def best(options: SimulateOptions, runs: int) -> float:
    out = []
    for _ in range(runs):
        t0 = time.process_time()
        simulate([str(SAMPLE)], options)
        out.append(time.process_time() - t0)
    return min(out)


def command(flags: list[str], capacity: str, runs: int) -> float:
    """Best CPU seconds of ``prefixcache simulate`` (a subprocess) with ``flags``."""
    exe = Path(sys.executable).with_name("prefixcache")
    out = []
    for _ in range(runs):
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        subprocess.run([str(exe), "simulate", str(SAMPLE), "--cache", "blocks", "--capacity", capacity, "--json",
                        *flags], check=True, stdout=subprocess.DEVNULL, env={**os.environ, "COLUMNS": "160"})
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        out.append(after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime)
    return min(out)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--capacity", default="5%")
    args = ap.parse_args()
    caps = tuple(parse_capacities(args.capacity))
    base = SimulateOptions(cache="blocks", capacities=caps)
    arms = {"simulate": base,
            "+ --survival": SimulateOptions(cache="blocks", capacities=caps, survival=True),
            "+ --reuse prefix,chunks": SimulateOptions(cache="blocks", capacities=caps, reuse=("prefix", "chunks")),
            "+ both": SimulateOptions(cache="blocks", capacities=caps, survival=True, reuse=("prefix", "chunks")),
            "+ --ttl-whatif": SimulateOptions(cache="blocks", capacities=caps, ttl_whatif=True)}
    flags = {"simulate": [], "+ --survival": ["--survival"], "+ --reuse prefix,chunks": ["--reuse", "prefix,chunks"],
             "+ both": ["--survival", "--reuse", "prefix,chunks"], "+ --ttl-whatif": ["--ttl-whatif"]}
    cmd = {name: command(f, args.capacity, args.runs) for name, f in flags.items()}
    lib = {name: best(o, args.runs) for name, o in arms.items()}
    print(f"Mooncake sample, --cache blocks --capacity {args.capacity}, CPU s (best of {args.runs})")
    print(f"  {'':26s} {'command':>9s} {'':8s} {'library':>9s}")
    for name in flags:
        print(f"  {name:26s} {cmd[name]:7.3f} s {100 * (cmd[name] / cmd['simulate'] - 1):+6.1f}%"
              f"  {lib[name]:7.3f} s {100 * (lib[name] / lib['simulate'] - 1):+6.1f}%")
    added = cmd["+ both"] / cmd["simulate"] - 1
    print(f"survival + chunks add {100 * added:.1f}% to the command (goal ≤ 30%), "
          f"{100 * (lib['+ both'] / lib['simulate'] - 1):.1f}% to the library call")
    return 0 if added <= 0.30 else 1


if __name__ == "__main__":
    sys.exit(main())
