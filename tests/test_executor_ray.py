"""Issue 25 item 6: ``--executor ray:ADDRESS`` gives the serial run's output, byte for byte, on every
shared sample, on a real local Ray cluster that this module starts (``ray start --head --block`` on
a free port, stopped by its PID) and joins by address, as a user joins an existing cluster."""

from __future__ import annotations

import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import orjson
import pytest
from click.testing import CliRunner

from tests.helpers import SAMPLES, cli_app, existing

pytestmark = pytest.mark.slow  # a Ray cluster starts (~10 s), then every sample is linted twice


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def ray_cluster():
    """The address of a local two-CPU Ray head started for this module, stopped by PID at the end."""
    ray_bin = Path(sys.executable).with_name("ray")
    assert ray_bin.exists(), "ray is not installed: make setup installs prefixcache[ray]"
    port = _free_port()
    tmp = tempfile.mkdtemp(prefix="pcray-", dir="/tmp")  # Ray's socket paths must stay short
    # a token of this cluster's own (Ray 2.5x authenticates its control plane with one), for the head and
    # for the drivers this process starts
    auth = {"RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN": secrets.token_hex(32)}
    saved = {k: os.environ.get(k) for k in auth}
    os.environ.update(auth)
    env = {**os.environ, "RAY_USAGE_STATS_ENABLED": "0"}
    proc = subprocess.Popen([str(ray_bin), "start", "--head", f"--port={port}", "--num-cpus=2", "--block",
                             "--include-dashboard=false", "--disable-usage-stats", f"--temp-dir={tmp}",
                             "--object-store-memory=150000000"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env, start_new_session=True)
    address = f"127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 90
        while True:
            with socket.socket() as s:
                if s.connect_ex(("127.0.0.1", port)) == 0:
                    break
            assert proc.poll() is None, "ray start exited before the head came up"
            assert time.monotonic() < deadline, "the Ray head did not come up within 90 s"
            time.sleep(0.5)
        yield address
    finally:
        proc.send_signal(signal.SIGTERM)  # ray start --block stops the processes it started
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(10)
        shutil.rmtree(tmp, ignore_errors=True)
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def _lint(*args: str) -> str:
    res = CliRunner().invoke(cli_app(), ["lint", *args, "--json"])
    assert res.exit_code in (0, 1), (args, res.stderr, res.exception)
    return res.stdout


def test_lint_on_ray_equals_the_serial_run_on_every_sample(ray_cluster, tmp_path) -> None:
    samples = sorted(p for p in existing(SAMPLES).iterdir() if p.is_file() and p.suffix != ".md")
    assert len(samples) >= 8
    for sample in samples:
        serial = _lint(str(sample))
        assert _lint(str(sample), "--executor", f"ray:{ray_cluster}") == serial, sample.name
    # all of them at once: sessions of several files spread over the two workers
    every = [str(p) for p in samples]
    assert _lint(*every, "--executor", f"ray:{ray_cluster}") == _lint(*every)


def _inspect(*args: str) -> str:
    res = CliRunner().invoke(cli_app(), ["inspect", *args, "--json"])
    assert res.exit_code == 0, (args, res.stderr, res.exception)
    return res.stdout


def test_inspect_on_ray_equals_the_serial_run(ray_cluster) -> None:
    """``inspect --executor ray`` prepares on the workers through the same compact wire as lint (each request
    as the change from its session's previous rendering): every record and the summary, byte for byte."""
    samples = sorted(p for p in existing(SAMPLES).iterdir() if p.is_file() and p.suffix != ".md")
    every = [str(p) for p in samples]
    serial = _inspect(*every)
    assert serial.count("\n") > 100
    assert _inspect(*every, "--executor", f"ray:{ray_cluster}") == serial


def test_a_trace_written_on_ray_equals_the_serial_one(ray_cluster, tmp_path) -> None:
    import pyarrow.parquet as pq

    logs = [str(SAMPLES / n) for n in ("swe_agent_traj_function_calling_with_per_step_messages_marshmallow-1867.traj",
                                        "claude_code_session_v1.0.98_fe5e1c67.jsonl")]
    for name, extra in (("serial.parquet", []), ("ray.parquet", ["--executor", f"ray:{ray_cluster}"])):
        res = CliRunner().invoke(cli_app(), ["trace", *logs, "-o", str(tmp_path / name), *extra])
        assert res.exit_code == 0, res.stderr
    assert pq.read_table(tmp_path / "ray.parquet").equals(pq.read_table(tmp_path / "serial.parquet"))


def _simulate(*args: str) -> tuple[int, str]:
    res = CliRunner().invoke(cli_app(), ["simulate", *args, "--json"])
    assert res.exit_code in (0, 1, 2), (args, res.stderr, res.exception)
    return res.exit_code, res.stdout


def test_simulate_arms_on_ray_equal_the_serial_run_on_every_sample(ray_cluster) -> None:
    """Issue 25 item 6: the policy × capacity arms as Ray tasks over one shared copy of the trace give
    the serial report byte for byte (per-request rows included: the first arm's come back)."""
    samples = sorted(p for p in existing(SAMPLES).iterdir() if p.is_file() and p.suffix != ".md")
    ran = 0
    for sample in samples:
        # lru and belady swept (one arm each), fifo and lfu one arm per capacity: 6 arms
        args = [str(sample), "--policy", "fifo,lru,lfu,belady", "--capacity", "5%,25%", "--per-request"]
        serial = _simulate(*args)
        assert _simulate(*args, "--executor", f"ray:{ray_cluster}") == serial, sample.name
        ran += serial[0] == 0
    assert ran >= 6  # most samples have prompts to simulate (a usage-only log exits 2 on both paths alike)


def test_fleet_routers_on_ray_equal_the_serial_run(ray_cluster) -> None:
    """Every router of a fleet study as a Ray task: the same report as the serial run."""
    trace = str(SAMPLES / "mooncake_kvtrace_synthetic_trace.jsonl")
    args = [trace, "--replicas", "4", "--capacity", "5%", "--router",
            "round-robin,random,least-loaded,session,session-per-router:2,prefix-hash:2,cache-aware,kv-cost,oracle"]
    serial = _simulate(*args)
    assert serial[0] == 0 and len(orjson.loads(serial[1])["results"]) == 9
    assert _simulate(*args, "--executor", f"ray:{ray_cluster}") == serial
