"""The hostile-input table of issue 16: every corpus case × every command, as subprocesses.

Prints one row per (case, command): exit code, wall seconds, CPU seconds (user + system:
on a loaded machine the wall time is mostly waiting), peak RSS (MB), whether stderr held a
traceback, and the first stderr line. A run past ``--timeout`` is a hang (exit
``T``). Usage::

    .venv/bin/python bench/bench_hostile.py [--scale 1] [--timeout 30] [--only NAME,...] [--replay]
        [--limits-scale 2] [--commands inspect,lint] [--mem-gb 12]

``--scale`` multiplies the long-string sizes (10 = 10 MB strings). Replay (which loads
the embedded model) runs only with ``--replay``, on a handful of cases. The resource-limit
corpus of issue 28 (``tests/fuzz/limits.py``: decompression bombs expanding to
``--limits-scale`` GiB, deep argument strings, memory-hungry templates) runs too; every
command runs under an address-space cap of ``--mem-gb`` GiB (a run killed by it shows as
a negative exit or a MemoryError traceback).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.fuzz import limits  # noqa: E402
from tests.fuzz.gen_corpus import Case, build  # noqa: E402

#: The command line (this interpreter's ``-m prefixcache``); ``PREFIXCACHE_CLI`` overrides it.
CLI = os.environ.get("PREFIXCACHE_CLI", f"{sys.executable} -m prefixcache").split()
#: Address-space cap of every command (bytes); set by ``--mem-gb``.
MEM_CAP = [12 << 30]
REPLAY_CASES = {"good.jsonl", "deep_content.jsonl", "deep_tool_schema.jsonl", "truncated_list.json", "stdin_closed", "fifo"}


def commands(case: Case, out: Path, good: str, replay: bool) -> list[tuple[str, list[str]]]:
    """The command lines a case runs through."""
    if case.kind == "template":
        return [("check", ["check", case.path, "-c", case.context, "--tokenizer", "smollm2"]),
                ("inspect", ["inspect", good, "--template", case.path, "--tokenizer", "smollm2", "--json"]),
                ("lint", ["lint", good, "--template", case.path, "--tokenizer", "smollm2", "--json"])]
    p = case.path
    cmds = [("inspect", ["inspect", p, "--json"]), ("lint", ["lint", p, "--json"]),
            ("simulate", ["simulate", p, "--json"]),
            ("canonicalize", ["canonicalize", p, "-o", str(out / "canon.jsonl"), "--force", "--json"])]
    if replay and case.name in REPLAY_CASES:
        cmds.append(("replay", ["replay", p, "--json", "--max-requests", "2", "--pass", "cold"]))
    return cmds


def _capped(close_stdin: bool):
    def pre() -> None:
        import resource

        resource.setrlimit(resource.RLIMIT_AS, (MEM_CAP[0], MEM_CAP[0]))
        if close_stdin:
            os.close(0)
    return pre


def run_one(args: list[str], case: Case, timeout: float) -> tuple[str, float, float, float, bool, str]:
    """(exit, wall seconds, CPU seconds, peak RSS MB, traceback?, first stderr line) of one command."""
    stdin = subprocess.DEVNULL if case.stdin is None else subprocess.PIPE
    t0 = time.perf_counter()
    with tempfile.TemporaryFile() as errf:
        if case.stdin is None:  # a closed fd 0, not an empty one
            proc = subprocess.Popen(CLI + args, stdin=None, stdout=subprocess.DEVNULL, stderr=errf,
                                    preexec_fn=_capped(True))
        else:
            proc = subprocess.Popen(CLI + args, stdin=stdin, stdout=subprocess.DEVNULL, stderr=errf,
                                    preexec_fn=_capped(False))
            if proc.stdin is not None:
                try:
                    proc.stdin.write(case.stdin)
                    proc.stdin.close()
                except BrokenPipeError:
                    pass
        code = "T"
        deadline = t0 + timeout
        while True:
            pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
            if pid:
                code = str(os.waitstatus_to_exitcode(status))
                break
            if time.perf_counter() > deadline:
                proc.kill()
                _, _, usage = os.wait4(proc.pid, 0)
                break
            time.sleep(0.05)
        proc.returncode = 0  # reaped by wait4
        secs = time.perf_counter() - t0
        errf.seek(0)
        err = errf.read().decode("utf-8", "replace")
    lines = [ln for ln in err.splitlines() if ln.strip()]
    cpu = usage.ru_utime + usage.ru_stime
    return code, secs, cpu, usage.ru_maxrss / 1024, "Traceback" in err, (lines[0] if lines else "")[:110]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--scale", type=float, default=1.0)
    ap.add_argument("--timeout", type=float, default=30.0)
    ap.add_argument("--only", default="")
    ap.add_argument("--replay", action="store_true")
    ap.add_argument("--limits-scale", type=float, default=2.0, help="GiB the decompression bombs expand to")
    ap.add_argument("--commands", default="", help="only these commands (comma-separated)")
    ap.add_argument("--mem-gb", type=float, default=12.0)
    opts = ap.parse_args()
    MEM_CAP[0] = int(opts.mem_gb * (1 << 30))
    only = set(filter(None, opts.only.split(",")))
    keep = set(filter(None, opts.commands.split(",")))
    with tempfile.TemporaryDirectory() as tmp:
        cases = build(Path(tmp) / "corpus", opts.scale) + limits.build(Path(tmp) / "limits", opts.limits_scale)
        good = next(c.path for c in cases if c.name == "good.jsonl")
        out = Path(tmp) / "out"
        out.mkdir()
        print(f"{'case':26} {'command':12} {'exit':>4} {'s':>6} {'cpu s':>6} {'MB':>6} tb  first stderr line")
        for case in cases:
            if only and case.name not in only:
                continue
            for cmd, args in commands(case, out, good, opts.replay):
                if keep and cmd not in keep:
                    continue
                code, secs, cpu, rss, tb, line = run_one(args, case, opts.timeout)
                print(f"{case.name:26} {cmd:12} {code:>4} {secs:6.1f} {cpu:6.1f} {rss:6.0f} {'TB' if tb else '- '}  {line}",
                      flush=True)


if __name__ == "__main__":
    main()
