"""``--executor ray`` on 2 local workers against the serial run: a 12-arm simulate sweep and lint of a big agent log.

Issue 25 item 6: the goal is a speed-up of at least 1.7x (wall clock) on 2 local workers for a
12-arm ``simulate`` sweep and for ``lint`` of a 200 MB agent log, with the same output. This bench
starts a Ray head of its own (``ray start --head --num-cpus 2`` on a free localhost port, stopped by
its PID at the end) and runs each command as a user runs it (``python -m prefixcache ...``), once
serially (``--executor local``) and once joining that cluster (``--executor ray:ADDRESS``, as on an
existing cluster: Ray's own start-up is not counted, joining it and starting its workers is), in
interleaved pairs (serial, Ray, serial, Ray ...): a load change on the shared machine hits both sides.

Reported per pair, and as medians: wall seconds of each side; CPU seconds of the serial command
(user + system of the child), of the Ray driver (the child) and of the cluster (what the head's
process tree gained while the command ran, polled every 0.2 s with psutil: the workers, and Ray's own
daemons), with the largest gain of one process (the busiest worker); the speed-up in wall clock
(serial / Ray) and a load-free estimate of it, the **CPU critical path**: what the wall-clock ratio is on
a quiet machine with ``--workers`` cores — for simulate, serial CPU / (driver CPU + busiest worker's CPU),
the driver preparing and then waiting for the arms; for lint, whose driver reads and lints while the
workers render the next chunks, serial CPU / max(driver CPU, busiest worker's CPU, (driver + cluster CPU)
/ cores); the same with the cluster's own daemons (raylet, GCS, agents: their CPU per second is
measured on the idle cluster before the pairs) counted for the quiet wall instead of the loaded one (they
run whatever the job does, so under load the Ray run's longer wall inflates their share: the load-free
figure counts them for the critical path itself); the machine's load average before and after (on a
shared machine other jobs take the cores the workers need, and a 3-process Ray run takes a bigger share
of an oversubscribed machine than a 1-process serial run: the wall-clock ratio is then inflated, so
repeat when it is quiet); and whether the two outputs are byte-identical (the bench exits 1 when not).

The sweep: ``simulate --cache vllm --policy fifo,lfu,slru --capacity 1%,5%,10%,25%`` (12 arms: one
replay per policy and capacity; :mod:`prefixcache.analyzer.cache.simulate.arms`) on a
Mooncake-shaped trace (``bench_simulate.mooncake_shaped``); ``--ttl SECONDS`` adds a TTL to every
arm. The log: ``bench_lint.build_big_log`` (copies of the SWE-agent and Claude Code samples).

    .venv/bin/python bench/bench_executor.py [--requests 50000] [--lint-mb 200] [--rounds 2]
        [--only simulate|lint] [--ttl 300]
"""

from __future__ import annotations

import argparse
import os
import resource
import secrets
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))

from bench_lint import build_big_log  # noqa: E402
from bench_simulate import mooncake_shaped, write  # noqa: E402

SWEEP = ["--cache", "vllm", "--policy", "fifo,lfu,slru", "--capacity", "1%,5%,10%,25%"]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Cluster:
    """A local Ray head with ``cpus`` CPUs, started with ``ray start --block`` and stopped by its PID."""

    def __init__(self, cpus: int) -> None:
        self.tmp = tempfile.mkdtemp(prefix="pcray-", dir="/tmp")
        port = _free_port()
        os.environ.update({"RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN": secrets.token_hex(32),
                           "RAY_USAGE_STATS_ENABLED": "0"})
        self.proc = subprocess.Popen(
            [str(Path(sys.executable).with_name("ray")), "start", "--head", f"--port={port}", f"--num-cpus={cpus}",
             "--block", "--include-dashboard=false", "--disable-usage-stats", f"--temp-dir={self.tmp}",
             "--object-store-memory=500000000"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
        self.address = f"127.0.0.1:{port}"
        self.cpus = cpus
        self.idle = 0.0  # CPU s per s of its own processes with no job (idle_rate)
        deadline = time.monotonic() + 120
        while True:
            with socket.socket() as s:
                if s.connect_ex(("127.0.0.1", port)) == 0:
                    break
            if self.proc.poll() is not None or time.monotonic() > deadline:
                self.close()
                raise SystemExit("the Ray head did not come up")
            time.sleep(0.5)

    def processes(self) -> dict[int, float]:
        """pid → CPU seconds (user + system) of every live process of the head's tree."""
        import psutil

        out: dict[int, float] = {}
        try:
            top = psutil.Process(self.proc.pid)
            procs = [top, *top.children(recursive=True)]
        except psutil.NoSuchProcess:
            return out
        for p in procs:
            try:
                t = p.cpu_times()
                out[p.pid] = t.user + t.system
            except psutil.NoSuchProcess:
                pass
        return out

    def idle_rate(self, seconds: float = 15.0) -> float:
        """CPU seconds per second the cluster's own processes (raylet, GCS, the dashboard and runtime-env
        agents, the log monitor) spend with no job: measured over ``seconds`` once it has settled."""
        time.sleep(5)
        a = sum(self.processes().values())
        time.sleep(seconds)
        return max(0.0, (sum(self.processes().values()) - a) / seconds)

    def close(self) -> None:
        self.proc.send_signal(signal.SIGTERM)  # ray start --block stops what it started
        try:
            self.proc.wait(60)
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(10)
        shutil.rmtree(self.tmp, ignore_errors=True)


class Sampler:
    """The CPU seconds a cluster's processes spend while it runs: their CPU times polled every
    ``period`` seconds (a worker that ends between two polls loses at most one period), as the total
    over the tree and the largest gain of one process (the busiest worker: the critical path)."""

    def __init__(self, cluster: Cluster, period: float = 0.2) -> None:
        import threading

        self.cluster, self.period = cluster, period
        self.start = cluster.processes()
        self.last = dict(self.start)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._poll, daemon=True)
        self._thread.start()

    def _poll(self) -> None:
        while not self._stop.wait(self.period):
            self.last.update(self.cluster.processes())

    def stop(self) -> tuple[float, float]:
        """(total CPU seconds gained, the largest one process gained)."""
        self._stop.set()
        self._thread.join()
        self.last.update(self.cluster.processes())
        gains = [cpu - self.start.get(pid, 0.0) for pid, cpu in self.last.items()]
        return sum(gains), max(gains, default=0.0)


def run(args: list[str], cluster: Cluster | None) -> tuple[float, float, float, float, bytes]:
    """(wall s, CPU s of the command and its children, CPU s the cluster's processes gained, the largest
    gain of one of them, stdout) of one command."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    sampler = Sampler(cluster) if cluster else None
    t0 = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "prefixcache", *args], stdout=subprocess.PIPE,
                          stderr=subprocess.DEVNULL)
    wall = time.perf_counter() - t0
    workers, busiest = sampler.stop() if sampler else (0.0, 0.0)
    if proc.returncode not in (0, 1):
        raise SystemExit(f"prefixcache {' '.join(args)} exited {proc.returncode}")
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu, workers, busiest, proc.stdout


def pairs(label: str, args: list[str], cluster: Cluster, rounds: int, overlap: bool = False) -> bool:
    """Interleaved pairs of ``args`` serial and on ``cluster``; prints each pair and the medians. ``overlap``:
    the driver works while the workers do (lint's pipelined chunks), so the CPU critical path is the largest of
    the driver's CPU, the busiest worker's and the whole CPU over the cluster's cores; else (simulate: the
    driver prepares, then waits for the arms) the driver's plus the busiest worker's."""
    print(f"\n{label}\n  prefixcache {' '.join(args)} [--executor ray:{cluster.address}]", flush=True)
    same, speed, bound, quiet, rows = True, [], [], [], {"serial": [], "ray": []}
    idle = cluster.idle
    for k in range(rounds):
        load = os.getloadavg()[0]
        s = run(args, None)
        r = run([*args, "--executor", f"ray:{cluster.address}"], cluster)
        same &= s[4] == r[4]
        speed.append(s[0] / r[0])
        # load-free estimate: the serial CPU over the driver's CPU plus the busiest worker's (their critical path
        # when each has a core: the driver prepares, then waits while the workers run)
        bound.append(s[1] / (max(r[1], r[3], (r[1] + r[2]) / cluster.cpus) if overlap else r[1] + r[3]))
        # the cluster's own daemons burn `idle` CPU s per wall second whatever runs: under load the Ray run's wall
        # (so their share of its CPU) is inflated too. Load-free, they run for the quiet wall T itself:
        # T = max(driver, busiest, (driver + cluster - idle * wall + idle * T) / cpus)
        job = r[1] + r[2] - idle * r[0]
        quiet.append(s[1] / (max(r[1], r[3], job / (cluster.cpus - idle)) if overlap else r[1] + r[3]))
        rows["serial"].append(s)
        rows["ray"].append(r)
        print(f"  pair {k + 1}: serial {s[0]:7.2f} s wall {s[1]:7.2f} s CPU | ray {r[0]:7.2f} s wall, driver "
              f"{r[1]:6.2f} s CPU, cluster {r[2]:7.2f} s CPU (busiest process {r[3]:6.2f} s) | speed-up wall "
              f"{s[0] / r[0]:.2f}x, CPU critical path {bound[-1]:.2f}x (idle daemons at the quiet wall: "
              f"{quiet[-1]:.2f}x) | load {load:.2f} -> {os.getloadavg()[0]:.2f} | "
              f"identical output: {s[4] == r[4]}", flush=True)
    med = {k: [statistics.median(x[i] for x in v) for i in range(4)] for k, v in rows.items()}
    print(f"  median: serial {med['serial'][0]:.2f} s wall ({med['serial'][1]:.2f} s CPU); ray {med['ray'][0]:.2f} s wall "
          f"(driver {med['ray'][1]:.2f} + cluster {med['ray'][2]:.2f} s CPU, busiest {med['ray'][3]:.2f}); speed-up "
          f"wall {statistics.median(speed):.2f}x, CPU critical path {statistics.median(bound):.2f}x (idle daemons at the "
          f"quiet wall: {statistics.median(quiet):.2f}x; the cluster idles at {idle:.3f} CPU s/s) (goal >= 1.7x on "
          f"2 workers); identical output in every pair: {same}", flush=True)
    return same


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--requests", type=int, default=50_000, help="requests of the simulate trace")
    ap.add_argument("--lint-mb", type=float, default=200.0, help="MB of the lint log")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--workers", type=int, default=2, help="CPUs of the local Ray head")
    ap.add_argument("--only", choices=("simulate", "lint"))
    ap.add_argument("--ttl", type=float, default=None, help="add --ttl SECONDS to every simulate arm")
    a = ap.parse_args(argv)
    print(f"{os.cpu_count()} CPUs on this machine; load average {os.getloadavg()}")
    ok = True
    cluster = Cluster(a.workers)
    try:
        cluster.idle = cluster.idle_rate()
        print(f"the idle cluster's own processes: {cluster.idle:.3f} CPU s per s", flush=True)
        with tempfile.TemporaryDirectory(prefix="bench-executor-") as tmp:
            if a.only in (None, "simulate"):
                path = write(mooncake_shaped(a.requests), Path(tmp))
                extra = ["--ttl", f"{a.ttl:g}"] if a.ttl is not None else []
                ok &= pairs(f"12-arm simulate sweep, {a.requests:,} Mooncake-shaped requests",
                            ["simulate", str(path), *SWEEP, *extra, "--json"], cluster, a.rounds)
            if a.only in (None, "lint"):
                logs = Path(tmp) / "logs"
                logs.mkdir()
                files = build_big_log(logs, a.lint_mb)
                mb = sum(f.stat().st_size for f in files) / 1e6
                ok &= pairs(f"lint of a {mb:.0f} MB agent log ({len(files)} files)", ["lint", str(logs), "--json"],
                            cluster, a.rounds, overlap=True)
    finally:
        cluster.close()
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
