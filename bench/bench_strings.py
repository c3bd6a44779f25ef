"""Time per MB of inspect and lint on requests with very long strings (issue 16: flat from 1 to 100 MB).

Writes a log of 4 append-only requests holding one string of SIZE MB
(mixed text: words, clock readings, git hashes, ids, newlines every ~2 KB; in the system prompt,
ending in a per-request clock, or ``--where user``), runs
``inspect --json``, ``lint --json``, ``simulate --json`` and ``canonicalize --json -o OUT`` on
it as subprocesses and prints seconds, s/MB and peak RSS per size; also ``find_volatile``
alone in this process. Usage::

    .venv/bin/python bench/bench_strings.py [--sizes 1,10,100] [--commands inspect,lint,simulate,canonicalize]

``PREFIXCACHE_CLI`` overrides the command line (e.g. another tree's ``python -m prefixcache``).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
CLI = os.environ["PREFIXCACHE_CLI"].split() if os.environ.get("PREFIXCACHE_CLI") else [sys.executable, "-m", "prefixcache"]

_PIECE = ("the build failed at 10:31:02 after commit 1a2b3c4d; see req_8f3a2b1c9d0e4f5a and "
          "2026-03-02T10:31:02Z for details, then rerun the tests with -k fast " * 14 + "\n")


def long_text(mb: float, one_line: bool = False) -> str:
    """About ``mb`` MB of log-like text (one ~2 KB line repeated; no newline at all with ``one_line``)."""
    piece = _PIECE.replace("\n", " ") if one_line else _PIECE
    return piece * max(1, int(mb * 1_000_000 / len(piece)))


def write_log(path: Path, mb: float, where: str, one_line: bool = False) -> None:
    """4 requests of one session holding a ``mb`` MB string: in the system prompt (``where=system``),
    ending in a clock that changes per request (so lint locates a break at its end and scans
    it), or as the newest user message (``where=user``)."""
    text = long_text(mb, one_line)
    with open(path, "w") as f:
        msgs: list[dict] = []
        for i in range(4):
            system = text + f"Current time: 2026-03-02 10:31:0{i} UTC" if where == "system" else "You are a coding agent."
            turn = text if where == "user" and i == 3 else f"step {i}"
            msgs = msgs + [{"role": "user", "content": turn}]
            f.write(json.dumps({"model": "gpt-4o", "user": "s", "messages": [{"role": "system", "content": system}, *msgs]}) + "\n")
            msgs = msgs + [{"role": "assistant", "content": f"done {i}"}]


def run(args: list[str]) -> tuple[int, float, float, float]:
    """(exit, wall seconds, peak RSS MB, CPU seconds: user + system) of one subprocess."""
    t0 = time.perf_counter()
    proc = subprocess.Popen(CLI + args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    return proc.returncode, time.perf_counter() - t0, usage.ru_maxrss / 1024, usage.ru_utime + usage.ru_stime


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="1,4,16", help="string sizes in MB, comma-separated")
    ap.add_argument("--commands", default="inspect,lint,simulate,canonicalize")
    ap.add_argument("--where", default="system", choices=["system", "user"], help="where the long string sits")
    ap.add_argument("--one-line", action="store_true", help="no newline inside the long string")
    opts = ap.parse_args()
    from prefixcache.analyzer.volatile import find_volatile

    print(f"{'MB':>6} {'command':14} {'exit':>4} {'wall s':>8} {'CPU s':>8} {'CPU s/MB':>8} {'RSS MB':>7}")
    for mb in (float(x) for x in opts.sizes.split(",")):
        text = long_text(mb, opts.one_line)
        t0, c0 = time.perf_counter(), time.process_time()
        n = len(find_volatile(text))
        dt, dc = time.perf_counter() - t0, time.process_time() - c0
        print(f"{mb:6g} {'find_volatile':14} {'-':>4} {dt:8.2f} {dc:8.2f} {dc / mb:8.2f} {'-':>7}  ({n:,} spans)", flush=True)
        del text
        with tempfile.TemporaryDirectory() as tmp:
            path = Path(tmp) / "long.jsonl"
            write_log(path, mb, opts.where, opts.one_line)
            for cmd in opts.commands.split(","):
                extra = ["-o", str(Path(tmp) / "canonical.jsonl"), "--force"] if cmd == "canonicalize" else []
                code, secs, rss, cpu = run([cmd, str(path), "--json", *extra])
                print(f"{mb:6g} {cmd:14} {code:>4} {secs:8.2f} {cpu:8.2f} {cpu / mb:8.2f} {rss:7.0f}", flush=True)


if __name__ == "__main__":
    main()
