"""What ``--survival``, ``--ttl-whatif`` and ``--reuse prefix,chunks`` add to ``simulate``'s time (issue 26).

On the Mooncake sample (``tests/fixtures/samples``, ``--cache blocks --capacity 5%``), in CPU
seconds, medians of ``--runs`` interleaved rounds (each configuration once per round, bench/timing.py),
without and with each analysis, in one run:

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
from pathlib import Path

from timing import interleaved

from prefixcache.analyzer.api import SimulateOptions, parse_capacities, simulate

SAMPLE = Path(__file__).resolve().parents[1] / "tests" / "fixtures" / "samples" / "mooncake_kvtrace_synthetic_trace.jsonl"


def children_cpu() -> float:
    """CPU seconds (user + system) of this process's waited-for children so far."""
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def command(flags: list[str], capacity: str) -> None:
    """Run ``prefixcache simulate`` (a subprocess, this interpreter's ``-m prefixcache``) with ``flags``."""
    subprocess.run([sys.executable, "-m", "prefixcache", "simulate", str(SAMPLE), "--cache", "blocks", "--capacity",
                    capacity, "--json", *flags], check=True, stdout=subprocess.DEVNULL, env={**os.environ, "COLUMNS": "160"})


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
    cmd, _ = interleaved({name: (lambda f=f: command(f, args.capacity)) for name, f in flags.items()}, args.runs,
                         warmup=False, clock=children_cpu)
    lib, _ = interleaved({name: (lambda o=o: simulate([str(SAMPLE)], o)) for name, o in arms.items()}, args.runs)
    print(f"Mooncake sample, --cache blocks --capacity {args.capacity}, CPU s (medians of {args.runs} interleaved rounds)")
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
