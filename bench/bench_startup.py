"""Start-up cost of the CLI in CPU seconds (user + system of the child), as interleaved runs.

Each round runs, in turn: a bare interpreter (``python -c pass``), ``prefixcache --help``,
``prefixcache lint --help`` and ``prefixcache rules`` (one command's module and what it imports).
The table prints the median CPU seconds of each over the rounds and its ratio to the bare
interpreter. The goal (issue "Fast and big", item 5): ``prefixcache --help`` ≤ 0.3 s CPU, met
because the root group lists the commands from their summaries and imports a command's module
only when that command runs (``cli/app.py`` ``LazyGroup``).

Usage: python bench/bench_startup.py [--rounds 7]   (the CLI is ``python -m prefixcache`` of the
interpreter running this file; exit 1 when the goal is missed)
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys

GOAL_S = 0.3

CASES = {
    "python -c pass": [sys.executable, "-c", "pass"],
    "prefixcache --help": [sys.executable, "-m", "prefixcache", "--help"],
    "prefixcache lint --help": [sys.executable, "-m", "prefixcache", "lint", "--help"],
    "prefixcache rules": [sys.executable, "-m", "prefixcache", "rules"],
}


def cpu_seconds(argv: list[str]) -> float:
    """User + system CPU seconds of one child run of ``argv`` (output discarded). Raises
    CalledProcessError when it fails."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    subprocess.run(argv, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                   env={**os.environ, "COLUMNS": "100"})
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=7)
    args = ap.parse_args(argv)
    runs: dict[str, list[float]] = {name: [] for name in CASES}
    for _ in range(args.rounds):  # interleaved: a load change hits every case alike
        for name, cmd in CASES.items():
            runs[name].append(cpu_seconds(cmd))
    bare = statistics.median(runs["python -c pass"]) or 1e-3
    print(f"{'command':<26} {'CPU s (median)':>15} {'× bare':>8}")
    for name, values in runs.items():
        med = statistics.median(values)
        print(f"{name:<26} {med:>15.3f} {med / bare:>8.1f}")
    root = statistics.median(runs["prefixcache --help"])
    print(f"prefixcache --help: {root:.3f} s CPU (goal ≤ {GOAL_S} s)")
    return 0 if root <= GOAL_S else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
