"""``prefixcache report`` vs the ``simulate`` it shows (issue 28: a report in ≤ 1.5× its simulate).

On inputs generated as ``make test-scale`` generates them (:mod:`tests.test_scale`: a
Mooncake-shaped trace, a Claude Code log repeated as sessions of its own), runs the
``simulate`` command line the page names (``--policy lru,belady --capacity 5%,…,100%
--survival``) and ``report`` as interleaved pairs of subprocesses, and prints per input the
CPU seconds (user + system, of the child) and peak RSS of each, the page size and the
ratio report / simulate (median of the pairs)::

    .venv/bin/python bench/bench_report.py [--trace-mb 5] [--agent-mb 20] [--pairs 3] [--sample PATH]

``--trace-mb 0`` or ``--agent-mb 0`` leaves that input out; ``--sample`` adds a log as it is (the
Claude Code sample: a small input, where start-up and the page weigh most). The simulate command
is the one the page names (:func:`~prefixcache.analyzer.html.content.commands`): ``--cache auto``
picks ``vllm`` for the trace and the provider of the logged models for an agent log (``anthropic``
for the Claude Code sample and its copies).
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import shlex  # noqa: E402

from prefixcache.analyzer.html.content import ReportOptions, commands  # noqa: E402
from prefixcache.analyzer.ingest import Ingest  # noqa: E402
from tests.test_scale import AGENT_STAGGER_S, agent_log, mooncake_trace  # noqa: E402

CLI = [sys.executable, "-m", "prefixcache"]


def run(args: list[str]) -> tuple[float, float]:
    """(CPU seconds, peak RSS MB) of one command (its output discarded; exit 0 or 1)."""
    proc = subprocess.Popen(CLI + args, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, cwd=ROOT)
    err = proc.stderr.read() if proc.stderr else b""
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode not in (0, 1):
        raise SystemExit(f"{' '.join(args)}: exit {proc.returncode}\n{err.decode()[-2000:]}")
    return usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024


def simulate_args(path: Path) -> list[str]:
    """The ``simulate`` arguments the report of ``path`` names (the cache ``--cache auto`` picks)."""
    options = ReportOptions()
    requests = Ingest([str(path)])
    models, traced = [], True
    for r in requests:
        models.append(r.model)
        traced = traced and r.trace is not None
    cache, _ = options.cache_for(models, traced)
    return shlex.split(commands([str(path)], options, cache)["simulate"])[1:]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--trace-mb", type=float, default=5)
    ap.add_argument("--agent-mb", type=float, default=20)
    ap.add_argument("--pairs", type=int, default=3)
    ap.add_argument("--stagger", type=float, default=AGENT_STAGGER_S,
                    help="seconds between the agent log's copies (test-scale's; 0: every copy at the same times)")
    ap.add_argument("--sample", action="append", default=[], help="a log to bench as it is (repeatable)")
    opts = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        inputs = []
        if opts.trace_mb:
            path = Path(tmp) / "trace.jsonl"
            mooncake_trace(path, int(opts.trace_mb * 1e6))
            inputs.append((f"trace {opts.trace_mb:g} MB", path))
        if opts.agent_mb:
            path = Path(tmp) / "agent.jsonl"
            agent_log(path, int(opts.agent_mb * 1e6), opts.stagger)
            inputs.append((f"agent log {opts.agent_mb:g} MB", path))
        inputs += [(Path(p).name[:18], Path(p)) for p in opts.sample]
        page = Path(tmp) / "report.html"
        print(f"{'input':18} {'simulate s':>10} {'MB':>6} {'report s':>9} {'MB':>6} {'page MB':>8} {'ratio':>6}")
        for name, path in inputs:
            sim = simulate_args(path)
            rep = ["report", str(path), "-o", str(page), "--force"]
            pairs = []
            for _ in range(opts.pairs):
                pairs.append((run(sim), run(rep)))
            ratio = statistics.median(r[0] / s[0] for s, r in pairs)
            s_cpu = statistics.median(s[0] for s, _ in pairs)
            r_cpu = statistics.median(r[0] for _, r in pairs)
            s_mb = max(s[1] for s, _ in pairs)
            r_mb = max(r[1] for _, r in pairs)
            print(f"{name:18} {s_cpu:10.1f} {s_mb:6.0f} {r_cpu:9.1f} {r_mb:6.0f} {page.stat().st_size / 1e6:8.2f} "
                  f"{ratio:6.2f}", flush=True)


if __name__ == "__main__":
    main()
