"""``simulate --replicas``: calibration from a replay results file, the command line, its errors."""

from __future__ import annotations

import random

import orjson
import pytest
import typer
from typer.testing import CliRunner

from prefixcache.analyzer.cache.fleet.timing import fit_replay, replay_points
from prefixcache.analyzer.errors import InputError
from prefixcache.cli import simulate as simulate_cli
from tests.helpers import SAMPLES, existing

SINGLE = "kvcache_tester_claudecode_hashids64_trace_0001.json"
PREFILL, OVERHEAD = 9_000.0, 0.040


def _row(i: int, computed: int, ttft: float) -> dict:
    """A replay result row with the documented keys (docs/schemas/replay-result.schema.json)."""
    t0 = 100.0 + i
    return {"t_start": t0, "t_prefill_start": t0 + 0.001, "t_first_token": t0 + ttft, "t_end": t0 + ttft + 0.01,
            "store_s": 0.0, "pass_name": "warm", "position": i, "session": "s", "request_index": i,
            "source": "log.jsonl", "record": i + 1, "prompt_tokens": computed + 64, "original_tokens": computed + 64,
            "cached_tokens": 64, "predicted_cached": 64, "computed_tokens": computed, "kv_bytes": 0,
            "output_ids": [1], "max_abs_dlogit": None, "argmax_match": None, "tokens_match": None,
            "verify_ok": None, "run": "abc", "ttft_samples": [ttft], "ttft_s": ttft, "prefill_s": ttft - 0.001,
            "prefill_tok_s": computed / (ttft - 0.001)}


def _replay_file(path, n: int = 60, jitter: float = 0.002, torn: bool = False):
    rng = random.Random(7)
    lines = []
    for i in range(n):
        computed = rng.randrange(200, 30_000)
        ttft = OVERHEAD + computed / PREFILL + rng.uniform(-jitter, jitter)
        lines.append(orjson.dumps(_row(i, computed, ttft)))
    data = b"\n".join(lines) + b"\n"
    if torn:
        data += b'{"t_start": 1.0, "comp'
    path.write_bytes(data)
    return path


def test_calibration_recovers_known_constants_within_five_percent(tmp_path):
    fit = fit_replay(_replay_file(tmp_path / "replay.jsonl", torn=True))
    assert fit.rows == 60
    assert abs(fit.prefill_tok_s - PREFILL) / PREFILL < 0.05
    assert abs(fit.overhead_s - OVERHEAD) / OVERHEAD < 0.05
    assert fit.mean_abs_error_s < 0.002 and fit.r2 > 0.999


def test_calibration_reads_timestamps_when_ttft_is_not_written(tmp_path):
    path = _replay_file(tmp_path / "replay.jsonl", jitter=0.0)
    rows = [orjson.loads(line) for line in path.read_bytes().splitlines()]
    for r in rows:
        del r["ttft_s"]
    path.write_bytes(b"\n".join(orjson.dumps(r) for r in rows) + b"\n")
    fit = fit_replay(path)
    assert abs(fit.prefill_tok_s - PREFILL) < 1 and abs(fit.overhead_s - OVERHEAD) < 1e-4


def test_calibration_refuses_what_it_cannot_fit(tmp_path):
    bad = tmp_path / "bad.jsonl"
    bad.write_bytes(b'{"computed_tokens": 5, "ttft_s": 0.1}\nnot json\n{"computed_tokens": 9, "ttft_s": 0.2}\n')
    with pytest.raises(InputError, match="not a replay result"):
        replay_points(bad)
    flat = tmp_path / "flat.jsonl"
    flat.write_bytes(b'{"computed_tokens": 5, "ttft_s": 0.1}\n{"computed_tokens": 5, "ttft_s": 0.2}\n')
    with pytest.raises(InputError, match="two different"):
        fit_replay(flat)
    with pytest.raises(InputError):
        fit_replay(tmp_path / "missing.jsonl")


def _app() -> typer.Typer:
    app = typer.Typer()
    simulate_cli.register(app)
    app.command("noop")(lambda: None)  # a second command keeps typer in multi-command mode
    return app


def _run(*args: str):
    return CliRunner().invoke(_app(), ["simulate", str(existing(SAMPLES / SINGLE)), *args])


def test_cli_fleet_json_and_rich(tmp_path):
    replay = _replay_file(tmp_path / "replay.jsonl")
    res = _run("--replicas", "3", "--router", "round-robin,session,oracle", "--capacity", "30%", "--calibrate",
               str(replay), "--json")
    assert res.exit_code == 0, res.output
    doc = orjson.loads(res.stdout)
    assert doc["replicas"] == 3 and [r["router"] for r in doc["results"]][:2] == ["round-robin", "session"]
    assert doc["hardware"]["name"] == "h100-llama3-8b+calibrated" and doc["calibration"]["rows"] == 60
    rich = _run("--replicas", "2", "--router", "kv-cost", "--tiers", "gpu=20%,cpu=1Mtok", "--rate", "4")
    assert rich.exit_code == 0, rich.output
    assert "decomposition" in rich.stdout and "tier cpu" in rich.stdout and "rate 4/s" in rich.stdout


@pytest.mark.parametrize("args", [
    ("--replicas", "0"), ("--router", "bogus"), ("--replicas", "2", "--tiers", "gpu=1GiB,nvme=1TiB"),
    ("--replicas", "2", "--rate", "0"), ("--replicas", "2", "--cache", "openai"),
    ("--replicas", "2", "--hardware", "tpu"), ("--replicas", "2", "--calibrate", "/nonexistent/replay.jsonl"),
    ("--replicas", "2", "--tiers", "gpu=10%", "--capacity", "5%"),
])
def test_cli_fleet_usage_errors_are_one_line_exit_2(args):
    res = _run(*args)
    assert res.exit_code == 2, res.output
    assert "Traceback" not in res.output


def test_session_router_sticks_to_the_sessions_inferred_on_a_sessionless_trace() -> None:
    """Mooncake logs no session ids: `session` routes by the sessions lint infers from hash chains
    (2,211), so the load spreads instead of one replica taking the whole trace."""
    res = CliRunner().invoke(_app(), ["simulate", str(existing(SAMPLES / "mooncake_kvtrace_synthetic_trace.jsonl")),
                                      "--replicas", "4", "--router", "session", "--capacity", "5%", "--json"])
    assert res.exit_code == 0, res.output
    row = orjson.loads(res.stdout)["results"][0]
    assert row["router"] == "session" and row["request_imbalance"] < 1.2
