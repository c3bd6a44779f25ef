"""Start and stop a real engine on localhost for ``replay --server`` and ``make test-engines``.

    python scripts/engine.py model                 # the SmolLM2 HF folder (converted once if missing)
    python scripts/engine.py start [--engine vllm|llamacpp] [--block-size N] [--num-blocks N]
    python scripts/engine.py stop                  # by the PID (process group) it started
    python scripts/engine.py status

``start`` picks a free localhost port, starts the engine in its own process group (so
``stop`` ends it and its workers by PID), waits until ``GET /v1/models`` answers, and
writes ``build/engine-<engine>.json`` (``pid``, ``port``, ``url``, ``log``) and prints
the URL. vLLM runs from ``.venv-vllm`` (``make engine-vllm``) with prefix caching,
prompt-token details and ``VLLM_SERVER_DEV_MODE=1`` (so ``/reset_prefix_cache``
exists); llama.cpp's ``llama-server`` (``make engine-llamacpp``, found on PATH or in
``.venv-llamacpp/bin``) with ``--metrics``, ``--slot-save-path`` and ``--cache-ram 0``
so that a cold pass can really empty it. Start-up of vLLM on a loaded 2-core machine
takes 3–7 minutes (model load, then compile warm-up).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
STATE = ROOT / "build"
SERVED_NAME = "smollm2"


def model_folder() -> Path:
    """The HF folder replay converts the built-in SmolLM2 GGUF into (created if missing)."""
    from prefixcache.replay.local.hf import resolve_model_path

    return Path(resolve_model_path(None)[0])


def default_gguf() -> Path:
    from prefixcache.replay.local.hf import default_gguf as find

    return find()


def vllm_python() -> Path:
    """The vLLM venv's python: ``$VLLM_VENV`` (as the Makefile's ``VLLM_VENV``), else ``.venv-vllm``."""
    return Path(os.environ.get("VLLM_VENV") or ROOT / ".venv-vllm") / "bin" / "python"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _vllm(port: int, folder: Path, args: argparse.Namespace) -> tuple[list[str], dict[str, str]]:
    python = vllm_python()
    if not python.exists():
        sys.exit(f"no {python.parent.parent}: run `make engine-vllm` first")
    cmd = [str(python), "-m", "vllm.entrypoints.openai.api_server", "--model", str(folder),
           "--served-model-name", SERVED_NAME, "--host", "127.0.0.1", "--port", str(port), "--dtype", "float32",
           "--max-model-len", str(args.max_model_len), "--enable-prefix-caching", "--enable-prompt-tokens-details",
           "--max-num-seqs", str(args.max_num_seqs)]
    if args.block_size:
        cmd += ["--block-size", str(args.block_size)]
    if args.num_blocks:
        cmd += ["--num-gpu-blocks-override", str(args.num_blocks)]
    if args.eager:
        cmd.append("--enforce-eager")  # no torch.compile warm-up: start-up in ~1 min instead of 3–7
    if args.kv_events_port:
        # The publisher connects to tcp://127.0.0.1:PORT (a non-wildcard endpoint) and the subscriber
        # (replay --kv-events bind:...) binds it: nothing listens beyond localhost.
        cmd += ["--kv-events-config", json.dumps({"enable_kv_cache_events": True, "publisher": "zmq",
                                                  "endpoint": f"tcp://127.0.0.1:{args.kv_events_port}",
                                                  "topic": "kv"})]
    env = dict(os.environ, VLLM_CPU_KVCACHE_SPACE=str(args.kv_gib), HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1",
               VLLM_SERVER_DEV_MODE="1")
    return cmd, env


def _llamacpp(port: int, args: argparse.Namespace) -> tuple[list[str], dict[str, str]]:
    binary = shutil.which("llama-server") or str(ROOT / ".venv-llamacpp" / "bin" / "llama-server")
    if not Path(binary).exists():
        sys.exit("no llama-server on PATH: run `make engine-llamacpp` (about 45 minutes) first")
    slots = STATE / "llamacpp-slots"
    slots.mkdir(parents=True, exist_ok=True)
    cmd = [binary, "-m", str(default_gguf()), "--host", "127.0.0.1", "--port", str(port), "-c",
           str(args.max_model_len), "-np", "1", "--metrics", "--slot-save-path", str(slots), "--cache-ram", "0"]
    return cmd, dict(os.environ)


def _ready(url: str, proc: subprocess.Popen, wait_s: float, log: Path) -> None:
    deadline = time.monotonic() + wait_s
    while time.monotonic() < deadline:
        failed = "Engine core initialization failed" in log.read_text(errors="replace")
        if proc.poll() is not None or failed:
            stop_pid(proc.pid, grace_s=10)
            tail = log.read_text(errors="replace").splitlines()[-15:]
            sys.exit("the engine failed during start-up; last log lines:\n" + "\n".join(tail))
        try:
            with urllib.request.urlopen(url + "/v1/models", timeout=5) as r:
                if r.status == 200:
                    return
        except OSError:
            pass
        time.sleep(2)
    stop_pid(proc.pid)
    sys.exit(f"the engine did not answer {url}/v1/models within {wait_s:.0f} s (log: {log})")


def start(args: argparse.Namespace) -> dict:
    """Start the engine and wait for readiness; returns (and saves) its state."""
    port = args.port or free_port()
    if args.engine == "vllm":
        cmd, env = _vllm(port, model_folder(), args)
    else:
        cmd, env = _llamacpp(port, args)
    STATE.mkdir(parents=True, exist_ok=True)
    log = STATE / f"engine-{args.engine}.log"
    with log.open("wb") as f:
        proc = subprocess.Popen(cmd, stdout=f, stderr=subprocess.STDOUT, env=env, start_new_session=True,
                                stdin=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}"
    state = {"engine": args.engine, "pid": proc.pid, "port": port, "url": url, "log": str(log), "cmd": cmd}
    (STATE / f"engine-{args.engine}.json").write_text(json.dumps(state, indent=1))
    t0 = time.monotonic()
    _ready(url, proc, args.wait, log)
    state["startup_s"] = round(time.monotonic() - t0, 1)
    (STATE / f"engine-{args.engine}.json").write_text(json.dumps(state, indent=1))
    return state


def stop_pid(pid: int, grace_s: float = 30.0) -> None:
    """SIGTERM the process group of ``pid`` (the engine and its workers), SIGKILL after ``grace_s``."""
    try:
        os.killpg(pid, signal.SIGTERM)
    except ProcessLookupError:
        return
    deadline = time.monotonic() + grace_s
    while time.monotonic() < deadline:
        try:
            done, _ = os.waitpid(pid, os.WNOHANG)
        except ChildProcessError:
            done = 0
            try:
                os.killpg(pid, 0)
            except ProcessLookupError:
                return
        if done == pid:
            break
        time.sleep(0.5)
    try:
        os.killpg(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def stop(engine: str) -> bool:
    """Stop the engine started by :func:`start` (False when none is recorded)."""
    path = STATE / f"engine-{engine}.json"
    if not path.exists():
        return False
    stop_pid(json.loads(path.read_text())["pid"])
    path.unlink()
    return True


def parse(argv: list[str] | None = None) -> argparse.Namespace:
    """The command line (``action`` and the engine's settings)."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("action", choices=("model", "start", "stop", "status"))
    ap.add_argument("--engine", choices=("vllm", "llamacpp"), default="vllm")
    ap.add_argument("--port", type=int, default=0)
    ap.add_argument("--block-size", type=int, default=None, help="KV block size (vLLM CPU default: 128)")
    ap.add_argument("--num-blocks", type=int, default=None, help="KV blocks (vLLM --num-gpu-blocks-override)")
    ap.add_argument("--kv-gib", type=int, default=1, help="VLLM_CPU_KVCACHE_SPACE (GiB)")
    ap.add_argument("--max-model-len", type=int, default=8192)
    ap.add_argument("--max-num-seqs", type=int, default=8)
    ap.add_argument("--eager", action="store_true", help="vLLM --enforce-eager (no compile warm-up)")
    ap.add_argument("--kv-events-port", type=int, default=0,
                    help="publish KV-cache events to tcp://127.0.0.1:PORT (the subscriber binds it)")
    ap.add_argument("--wait", type=float, default=900.0, help="seconds to wait for readiness")
    return ap.parse_args(argv)


def main(argv: list[str] | None = None) -> None:
    args = parse(argv)
    if args.action == "model":
        print(model_folder())
    elif args.action == "start":
        print(start(args)["url"])
    elif args.action == "stop":
        print("stopped" if stop(args.engine) else "no engine recorded")
    else:
        path = STATE / f"engine-{args.engine}.json"
        print(path.read_text() if path.exists() else "not running")


if __name__ == "__main__":
    main()
