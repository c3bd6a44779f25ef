"""Integration tests against real engines (``make test-engines``; marker ``engines``).

Collected only with ``PREFIXCACHE_ENGINE_TESTS=1`` (set by ``make test-engines``), so a
plain ``make test`` never needs vLLM. The vLLM server is started once per session by
``scripts/engine.py`` on a free localhost port — 32-token blocks (the CPU backend needs multiples of 32) and 256 KV blocks, so
that replaying every shared case at once evicts; ``--enforce-eager`` (no torch.compile warm-up:
start-up in about 1.5 min instead of 3–7); its KV-cache events published to another free
localhost port, which the replay binds — and stopped by PID at the end. With
``PREFIXCACHE_VLLM_URL`` set, that running server is used instead (it must have been started the
same way; ``PREFIXCACHE_VLLM_KV_EVENTS`` names its events endpoint, e.g.
``bind:tcp://127.0.0.1:PORT``). ``VLLM_VENV`` names the vLLM venv (default ``.venv-vllm``).
llama.cpp tests run when ``llama-server`` is on PATH.
"""

from __future__ import annotations

import importlib.util
import os

import pytest

from tests.helpers import ROOT

if os.environ.get("PREFIXCACHE_ENGINE_TESTS") != "1":
    collect_ignore_glob = ["test_*.py"]

#: The vLLM configuration the engine tests are written for.
VLLM_ARGS = ["--block-size", "32", "--num-blocks", "256", "--max-model-len", "4096", "--eager"]


def _engine_script():
    spec = importlib.util.spec_from_file_location("engine_script", ROOT / "scripts" / "engine.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _start(kind: str, extra: list[str]):
    script = _engine_script()
    return script, script.start(script.parse(["start", "--engine", kind, "--wait", "1200", *extra]))


@pytest.fixture(scope="session")
def vllm_server():
    """``(url, kv-events endpoint)`` of the session's vLLM server."""
    url = os.environ.get("PREFIXCACHE_VLLM_URL")
    if url:
        yield url, os.environ.get("PREFIXCACHE_VLLM_KV_EVENTS")
        return
    script = _engine_script()
    port = script.free_port()
    script, state = _start("vllm", [*VLLM_ARGS, "--kv-events-port", str(port)])
    try:
        yield state["url"], f"bind:tcp://127.0.0.1:{port}"
    finally:
        script.stop_pid(state["pid"])


@pytest.fixture(scope="session")
def vllm_url(vllm_server):
    return vllm_server[0]


@pytest.fixture(scope="session")
def vllm_kv_events(vllm_server):
    if vllm_server[1] is None:
        pytest.fail("PREFIXCACHE_VLLM_URL is set without PREFIXCACHE_VLLM_KV_EVENTS (the server's events endpoint)")
    return vllm_server[1]


@pytest.fixture(scope="session")
def llamacpp_url():
    import shutil

    if shutil.which("llama-server") is None:
        pytest.skip("llama-server is not on PATH (make engine-llamacpp builds it, ~45 min)")
    script, state = _start("llamacpp", [])
    try:
        yield state["url"]
    finally:
        script.stop_pid(state["pid"])
