"""Peak memory and throughput on large logs (issue 16: < 1 GB peak RSS on 1 GB inputs).

Generates two kinds of input per size and runs ``inspect --json``, ``lint --json`` and
``simulate --json`` on each as subprocesses, printing exit, seconds, MB/s and peak RSS:

* **agent**: realistic agent logs, OpenAI-chat JSONL: many append-only sessions (each
  request repeats its session's history and adds a turn: user text, an assistant tool
  call, a tool result), a 2 KB system prompt and 8 tool schemas per request;
* **mooncake**: Mooncake-style block-hash traces (``timestamp``, ``input_length``,
  ``output_length``, ``hash_ids``), sessions sharing prefixes of hash ids.

Usage::

    .venv/bin/python bench/bench_memory.py [--sizes 5,50,200,1000] [--kinds agent,mooncake]
        [--commands inspect,lint,simulate] [--timeout 1800] [--lint-traces]

Sizes are MB of input. ``PREFIXCACHE_CLI`` overrides the command line.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import random
import subprocess
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CLI = os.environ["PREFIXCACHE_CLI"].split() if os.environ.get("PREFIXCACHE_CLI") else [sys.executable, "-m", "prefixcache"]

SYSTEM = ("You are a coding agent working in the user's repository. You act only through the tools below.\n"
          + "".join(f"{i}. Rule number {i}: keep edits small, read before you write, run the tests.\n" for i in range(30)))
TOOLS = [{"type": "function", "function": {
    "name": name, "description": f"{name.replace('_', ' ')}: " + "does the thing it says, carefully. " * 6,
    "parameters": {"type": "object", "properties": {"path": {"type": "string", "description": "a path"},
                                                    "text": {"type": "string"}, "line": {"type": "integer"}},
                   "required": ["path"]}}}
    for name in ("read_file", "write_file", "edit_file", "list_dir", "run_shell", "search", "git_diff", "finish")]


def _turn(rng: random.Random, k: int) -> list[dict]:
    call = {"id": f"call_{k}", "type": "function",
            "function": {"name": rng.choice(TOOLS)["function"]["name"], "arguments": json.dumps({"path": f"src/m{k}.py"})}}
    out = "\n".join(f"{n:4d}  def f{n}(x): return x * {n}" for n in range(rng.randint(10, 60)))
    return [{"role": "user", "content": f"Step {k}: please look at src/m{k}.py and fix test_{k}."},
            {"role": "assistant", "content": "", "tool_calls": [call]},
            {"role": "tool", "tool_call_id": f"call_{k}", "content": out}]


def write_agent(path: Path, mb: float, seed: int = 0) -> int:
    """Agent sessions of 5–25 turns until the file holds ``mb`` MB; returns the request count."""
    rng, target, n, sid = random.Random(seed), mb * 1e6, 0, 0
    with open(path, "w") as f:
        while f.tell() < target:
            history: list[dict] = [{"role": "system", "content": SYSTEM}]
            for k in range(rng.randint(5, 25)):
                history += _turn(rng, k)
                f.write(json.dumps({"model": "gpt-4o", "user": f"session-{sid}", "messages": history,
                                    "tools": TOOLS}) + "\n")
                n += 1
                if f.tell() >= target:
                    break
            sid += 1
    return n


def write_mooncake(path: Path, mb: float, seed: int = 0) -> int:
    """Mooncake-style trace lines until ``mb`` MB; sessions extend a shared prefix of hash ids."""
    rng, target, n, t, next_id = random.Random(seed), mb * 1e6, 0, 0, 0
    prefixes: list[list[int]] = []
    with open(path, "w") as f:
        while f.tell() < target:
            if prefixes and rng.random() < 0.8:
                base = rng.choice(prefixes)
            else:
                base = list(range(next_id, next_id + rng.randint(4, 40)))
                next_id += len(base)
                prefixes.append(base)
            grow = list(range(next_id, next_id + rng.randint(1, 20)))
            next_id += len(grow)
            ids = base + grow
            if rng.random() < 0.5:
                base.extend(grow)  # the session goes on from here
            t += rng.randint(1, 500)
            f.write(json.dumps({"timestamp": t, "input_length": 512 * len(ids) - rng.randint(0, 500),
                                "output_length": rng.randint(1, 800), "hash_ids": ids}) + "\n")
            n += 1
            if len(prefixes) > 5000:
                prefixes = prefixes[-2000:]
    return n


def run(args: list[str], timeout: float) -> tuple[str, float, float, float]:
    """(exit, wall seconds, peak RSS MB, CPU seconds: user + system) of one subprocess; exit ``T`` past
    ``timeout`` (wall clock: the bound on a hang)."""
    t0 = time.perf_counter()
    proc = subprocess.Popen(CLI + args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    code = "T"
    while True:
        pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
        if pid:
            code = str(os.waitstatus_to_exitcode(status))
            break
        if time.perf_counter() - t0 > timeout:
            proc.kill()
            _, _, usage = os.wait4(proc.pid, 0)
            break
        time.sleep(0.1)
    proc.returncode = 0
    return code, time.perf_counter() - t0, usage.ru_maxrss / 1024, usage.ru_utime + usage.ru_stime


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="5,50", help="input sizes in MB, comma-separated (e.g. 5,50,200,1000)")
    ap.add_argument("--kinds", default="agent,mooncake")
    ap.add_argument("--commands", default="inspect,lint,simulate")
    ap.add_argument("--timeout", type=float, default=1800.0, help="seconds per command")
    ap.add_argument("--lint-traces", action="store_true",
                    help="also lint the Mooncake traces (PC002 by hash chains; its JSON lists every request)")
    opts = ap.parse_args()
    print(f"{'kind':9} {'MB':>6} {'requests':>9} {'command':9} {'exit':>4} {'wall s':>8} {'CPU s':>8} "
          f"{'MB/CPU s':>8} {'RSS MB':>7}")
    for kind in opts.kinds.split(","):
        for mb in (float(x) for x in opts.sizes.split(",")):
            with tempfile.TemporaryDirectory() as tmp:
                path = Path(tmp) / f"{kind}.jsonl"
                n = (write_agent if kind == "agent" else write_mooncake)(path, mb)
                real = path.stat().st_size / 1e6
                for cmd in opts.commands.split(","):
                    if kind == "mooncake" and cmd == "lint" and not opts.lint_traces:
                        continue  # no text: lint judges only the hash chains (--lint-traces)
                    code, secs, rss, cpu = run([cmd, str(path), "--json"], opts.timeout)
                    print(f"{kind:9} {real:6.0f} {n:9,} {cmd:9} {code:>4} {secs:8.1f} {cpu:8.1f} "
                          f"{real / max(cpu, 1e-9):8.2f} {rss:7.0f}", flush=True)


if __name__ == "__main__":
    main()
