"""Restore vs recompute calibration: the fits recover known constants; simulate --tiers reads the file."""

from __future__ import annotations

import random

import orjson
import pytest
from typer.testing import CliRunner

from prefixcache.analyzer.cache.fleet.calibration import (
    KIND, LineFit, Measurement, TierCalibration, break_even_tokens, calibrate, poor_fits, read_calibration,
    tier_links,
)
from prefixcache.analyzer.cache.fleet.tiers import parse_tiers
from prefixcache.analyzer.cache.fleet.timing import calibration_of
from prefixcache.analyzer.errors import InputError
from prefixcache.cli.app import app
from tests.helpers import SAMPLES, existing

BPT = 46_080  # SmolLM2-135M float32 KV bytes per token
#: Known constants: prefill 40 ms + 500 µs/token; host restore 0.2 ms + BPT / 20 GB/s; disk 5 ms + BPT / 1.5 GB/s.
TRUE = {"prefill": (0.040, 500e-6), "cpu-unpinned": (0.0002, BPT / 20e9), "disk": (0.005, BPT / 1.5e9)}


def synthetic(noise: float = 0.02, seed: int = 7) -> list[Measurement]:
    rng = random.Random(seed)
    out = []
    for curve, (a, b) in TRUE.items():
        for n in (128, 256, 512, 1024, 2048, 4096):
            t = (a + b * n) * (1 + rng.uniform(-noise, noise))
            out.append(Measurement(curve, n, t, BPT * n, [t]))
    return out


def test_fit_recovers_known_constants_within_5_percent():
    fits = {f.curve: f for f in calibrate(synthetic(), BPT)}
    for curve, (a, b) in TRUE.items():
        f = fits[curve].fit
        assert f.per_token_s == pytest.approx(b, rel=0.05)
        assert f.intercept_s == pytest.approx(a, rel=0.05)
        assert f.mean_rel_error < 0.02 and f.r2 > 0.99
    assert fits["cpu-unpinned"].bandwidth_bytes_s == pytest.approx(20e9, rel=0.05)
    assert fits["disk"].bandwidth_bytes_s == pytest.approx(1.5e9, rel=0.05)
    # prefill 40 ms + 500 µs/t against disk 5 ms + 30.7 µs/t: restoring wins from the start
    assert fits["disk"].break_even_tokens == 0.0
    assert fits["prefill"].break_even_tokens is None


def test_a_poor_fit_is_warned_about_and_a_good_one_is_not():
    """The trial's case: a first length still warming up (10× its true time) leaves a prefill line that explains
    little of the timings; the calibration says so instead of handing out its break-even lengths silently."""
    assert poor_fits(calibrate(synthetic(), BPT)) == []
    warm = [Measurement(m.curve, m.tokens, m.seconds * (10 if m.curve == "prefill" and m.tokens == 128 else 1),
                        m.kv_bytes, m.samples) for m in synthetic()]
    fits = {f.curve: f for f in calibrate(warm, BPT)}
    assert fits["prefill"].fit.r2 < 0.9
    warned = poor_fits(list(fits.values()))
    assert len(warned) == 1 and warned[0].startswith("warning: the prefill fit is poor (R² ")


def test_break_even_by_hand():
    pre = LineFit(2, 0.001, 100e-6, 0, 0, 1)
    slow_start = LineFit(2, 0.011, 50e-6, 0, 0, 1)  # 10 ms more fixed, 50 µs/token less: even at 200 tokens
    assert break_even_tokens(pre, slow_start) == pytest.approx(200.0)
    assert break_even_tokens(pre, LineFit(2, 0.0, 200e-6, 0, 0, 1)) is None  # slower per token: never
    assert break_even_tokens(pre, LineFit(2, 0.0, 10e-6, 0, 0, 1)) == 0.0


def _write(tmp_path, points=None):
    pts = points or synthetic(0.0)
    cal = TierCalibration(KIND, "synthetic", "cpu", "float32", "x", 2, BPT, pts, calibrate(pts, BPT), [])
    path = tmp_path / "cal.json"
    path.write_bytes(orjson.dumps(cal, option=orjson.OPT_INDENT_2))
    return path


def test_file_round_trip_links_and_fit(tmp_path):
    path = _write(tmp_path)
    cal = read_calibration(path)
    assert cal is not None and cal.kv_bytes_per_token == BPT
    links = tier_links(cal)
    assert links["cpu"][0] == pytest.approx(20e9, rel=1e-6) and links["cpu"][1] == pytest.approx(0.0002, rel=1e-6)
    assert links["disk"][0] == pytest.approx(1.5e9, rel=1e-6)
    fit, got = calibration_of(path)
    assert fit.prefill_tok_s == pytest.approx(2000.0, rel=1e-3) and fit.overhead_s == pytest.approx(0.04, rel=1e-3)
    assert got == links
    specs = {t.name: t for t in parse_tiers("gpu=10%,cpu=1Mtok,disk=8Mtok@3GB/s", links)}
    assert specs["cpu"].bandwidth == pytest.approx(20e9, rel=1e-6)
    assert specs["disk"].bandwidth == 3e9  # a bandwidth given on the command line wins
    bad = tmp_path / "bad.json"
    bad.write_text(f'{{"kind": "{KIND}", "model": "x"}}')
    with pytest.raises(InputError, match="not a complete tier calibration"):
        read_calibration(bad)
    assert read_calibration(existing(SAMPLES / "mooncake_kvtrace_synthetic_trace.jsonl")) is None


def test_simulate_tiers_uses_the_measured_links(tmp_path):
    path = _write(tmp_path)
    res = CliRunner().invoke(app, [
        "simulate", str(existing(SAMPLES / "mooncake_kvtrace_synthetic_trace.jsonl")), "--cache", "blocks",
        "--replicas", "2", "--tiers", "gpu=5%,cpu=20%,disk=50%", "--calibrate", str(path), "--json"])
    assert res.exit_code == 0, res.output
    doc = orjson.loads(res.stdout)
    tiers = {t["name"]: t for t in doc["tiers"]}
    assert tiers["cpu"]["bandwidth_bytes_per_s"] == pytest.approx(20e9, rel=1e-6)
    assert tiers["disk"]["latency_s"] == pytest.approx(0.005, rel=1e-6)
    assert doc["hardware"]["prefill_tok_s"] == pytest.approx(2000.0, rel=1e-3)
    assert doc["calibration"]["rows"] == 6
