"""Harness speed of ``replay --server``: the client alone, then its overhead on a real engine.

1. Against the minimal OpenAI-compatible stub (``bench/openai_stub.py``, run in its own
   process so it does not share the harness's interpreter): N one-token ``--send tokens``
   requests at concurrency 64 through the full harness (scheduler, prediction, rows,
   summary), twice: N single-turn sessions, and N/30 sessions of 30 turns each (every turn
   waits for its predecessor, so the scheduler keeps ≥ 64 sessions side by side). Target:
   ≥ 500 requests/s. On a shared machine the wall rate follows the load; the harness CPU
   per request (and requests per harness CPU-second) is the figure that does not.
2. With ``PREFIXCACHE_VLLM_URL`` set (``scripts/engine.py start``): a warm pass of the
   shared cases, sequential; client TTFT minus vLLM's own TTFT
   (``vllm:time_to_first_token_seconds`` histogram over the pass: its mean, and its p50
   interpolated in the buckets). Target: < 5 ms at p50.

    .venv/bin/python bench/bench_replay_harness.py [N]
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from prefixcache.replay.server.metrics import histogram_delta, histogram_quantile  # noqa: E402
from prefixcache.replay.server.client import ServerClient  # noqa: E402
from prefixcache.replay.server.load import LoadShape  # noqa: E402
from prefixcache.replay.prompts import Prompt  # noqa: E402
from prefixcache.replay.server.passes import ServedItem, ServedRun  # noqa: E402
from prefixcache.replay.server.summary import build_server_report  # noqa: E402


_CPU: list[float] = []


def _items(n: int, turns: int = 1) -> list[ServedItem]:
    """``n`` prompts of 32 tokens; with ``turns`` > 1, n / turns sessions whose turns interleave in log order."""
    sessions = max(1, n // turns)
    return [ServedItem(Prompt(f"s{i % sessions}", i // sessions, "bench", i, tuple(range(i % 50, i % 50 + 32)), 32),
                       None) for i in range(n)]


async def _harness(url: str, n: int, concurrency: int, turns: int = 1) -> tuple[float, int]:
    client = ServerClient(url, connections=concurrency)
    info = await client.detect()
    run = ServedRun(client, info, {"original": _items(n, turns)}, passes=("warm",), send="tokens",
                    shape=LoadShape(concurrency=concurrency), block_size=info.block_size or 16, capacity_blocks=None)
    t0, c0 = time.perf_counter(), time.process_time()
    await run.run()
    wall = time.perf_counter() - t0
    _CPU.append(time.process_time() - c0)
    await client.aclose()
    report = build_server_report(info, send="tokens", load="bench", block_size=16, capacity_blocks=None, requests=n,
                                 run="", rows=run.rows, states=run.states, stopped=run.stopped, interrupted=False)
    return wall, report.passes[0].ok


def stub_bench(n: int = 3000, concurrency: int = 64) -> float:
    proc = subprocess.Popen([sys.executable, str(ROOT / "bench" / "openai_stub.py"), "0"], stdout=subprocess.PIPE,
                            text=True)
    rates = []
    try:
        port = int(proc.stdout.readline())
        url = f"http://127.0.0.1:{port}"
        asyncio.run(_harness(url, 200, concurrency))  # warm-up: connections, imports
        for turns in (1, 30):
            load = os.getloadavg()[0]
            wall, ok = asyncio.run(_harness(url, n, concurrency, turns))
            rate, cpu = ok / wall, _CPU[-1]
            rates.append(rate)
            shape = "single-turn sessions" if turns == 1 else f"{max(1, n // turns)} sessions × {turns} turns"
            print(f"harness vs stub ({shape}): {ok}/{n} one-token requests at concurrency {concurrency} in "
                  f"{wall:.2f} s = {rate:,.0f} requests/s (target ≥ 500); harness CPU {cpu:.2f} s = "
                  f"{1e3 * cpu / n:.2f} ms per request, {ok / cpu:,.0f} requests per harness CPU-second; load average "
                  f"{load:.1f} on {os.cpu_count()} cores")
    finally:
        proc.terminate()
        proc.wait(10)
    return min(rates)


def _vllm(url: str) -> None:
    from prefixcache.replay import ReplayOptions, open_replay

    cases = sorted(str(p) for p in (ROOT / "tests" / "fixtures" / "cases").glob("*.jsonl"))
    session = open_replay(cases, ReplayOptions(server=url, passes=("warm",)))
    asyncio.run(_vllm_pass(url, session))


async def _vllm_pass(url: str, session) -> None:
    client = ServerClient(url)
    client.info = session.info
    run = ServedRun(client, session.info, session.items, passes=("warm",), send="tokens", shape=LoadShape(),
                    block_size=session.block_size, capacity_blocks=session.capacity)
    await run.run()
    await client.aclose()
    st = run.states[0]
    ttft = sorted(r.ttft_s for r in run.rows if r.ok and r.ttft_s is not None)
    engine_p50 = histogram_quantile(histogram_delta(st.before, st.after), 0.5)
    s0 = st.before.total("vllm:time_to_first_token_seconds_sum")
    s1 = st.after.total("vllm:time_to_first_token_seconds_sum")
    client_mean = sum(ttft) / len(ttft)
    engine_mean = (s1 - s0) / len(ttft)
    p50 = ttft[len(ttft) // 2]
    print(f"vLLM CPU, {len(ttft)} warm requests: client TTFT mean {client_mean * 1e3:.1f} ms, engine "
          f"{engine_mean * 1e3:.1f} ms, overhead {(client_mean - engine_mean) * 1e3:.2f} ms; client p50 "
          f"{p50 * 1e3:.1f} ms, engine p50 (bucket-interpolated) {engine_p50 * 1e3:.1f} ms")


def main() -> None:
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 3000
    stub_bench(n)
    url = os.environ.get("PREFIXCACHE_VLLM_URL")
    if url:
        _vllm(url)
    else:
        print("vLLM overhead: skipped (set PREFIXCACHE_VLLM_URL; scripts/engine.py start prints it)")


if __name__ == "__main__":
    main()
