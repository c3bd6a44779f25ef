"""Replay results: JSONL round trip, torn lines, percentiles and pass summaries (no model)."""

from __future__ import annotations

import pytest

from prefixcache.analyzer.errors import ConfigError, InputError
from prefixcache.analyzer.replay_rows import LocalRow, load_rows
from prefixcache.analyzer.stats import Distribution
from prefixcache.replay.document import PassSummary, summarize
from prefixcache.replay.local.passes import ReplayConfig
from prefixcache.replay.results import ResultWriter, repair_tail, run_key


def load_results(path):
    return load_rows(path, LocalRow)


def _r(pass_name: str, pos: int, ttft: float, cached: int = 0, prompt: int = 100, **kw) -> LocalRow:
    base = dict(pass_name=pass_name, position=pos, session="s", request_index=pos, source="f.jsonl", record=pos + 1,
                prompt_tokens=prompt, original_tokens=prompt, cached_tokens=cached, predicted_cached=None,
                computed_tokens=prompt - cached, t_start=10.0, t_prefill_start=10.001, t_first_token=10.0 + ttft,
                t_end=10.0 + ttft, store_s=0.0, kv_bytes=cached * 10, output_ids=(7,))
    base.update(kw)
    return LocalRow(**base)


def test_derived_times_come_from_raw_timestamps():
    r = _r("warm", 0, 0.25, cached=64)
    assert r.ttft_s == pytest.approx(0.25)
    assert r.prefill_s == pytest.approx(0.249)
    assert r.lookup_s == pytest.approx(0.001)
    assert r.prefill_tok_s == pytest.approx(36 / 0.249)


def test_percentiles_and_speedup_against_cold():
    cold = [_r("cold", i, t) for i, t in enumerate([1.0, 2.0, 3.0, 4.0])]
    warm = [_r("warm", i, t, cached=c, predicted_cached=c) for i, (t, c) in enumerate([(1.0, 0), (0.5, 64), (0.5, 80), (1.0, 48)])]
    cold_s, warm_s = summarize(cold + warm, ("cold", "warm", "canonical"))
    assert cold_s.ttft.p50 == pytest.approx(2.5) and cold_s.ttft.p95 == pytest.approx(3.85)
    assert (cold_s.ttft_p50, cold_s.ttft_p95, cold_s.ttft_p99) == (cold_s.ttft.p50, cold_s.ttft.p95, cold_s.ttft.p99)
    assert cold_s.ttft.count == 4 and cold_s.ttft.mean == pytest.approx(2.5) and cold_s.ttft.max == pytest.approx(4.0)
    assert cold_s.speedup is None and cold_s.simulator_equal is None
    assert warm_s.avoided_prefill == 192 and warm_s.computed_tokens == 208
    assert warm_s.speedup == pytest.approx(10.0 / 3.0)
    assert warm_s.hit_rate == pytest.approx(0.48)
    assert warm_s.simulator_equal is True and warm_s.kv_bytes_peak == 800
    off = PassSummary.of("warm", warm[:1] + [_r("warm", 1, 0.5, cached=64, predicted_cached=48)])
    assert off.simulator_equal is False
    assert Distribution.of([]).flat() == (0.0, 0.0, 0.0) and Distribution.of([]).count == 0


def test_verification_counts_and_mismatches():
    rs = [_r("warm", 0, 1.0, cached=16, max_abs_dlogit=2e-5, argmax_match=True, tokens_match=True, verify_ok=True),
          _r("warm", 1, 1.0, cached=16, max_abs_dlogit=3.0, argmax_match=False, tokens_match=False, verify_ok=False),
          _r("warm", 2, 1.0)]
    s = PassSummary.of("warm", rs)
    assert (s.verified, s.mismatches, s.max_abs_dlogit) == (2, 1, 3.0)


def test_jsonl_round_trip_and_torn_last_line(tmp_path):
    path = tmp_path / "out" / "replay.jsonl"
    w = ResultWriter(path, LocalRow)
    rows = [_r("cold", 0, 0.5), _r("warm", 0, 0.1, cached=32, max_abs_dlogit=1e-5, argmax_match=True,
                                    tokens_match=True, verify_ok=True)]
    for r in rows:
        w.write(r)
    w.close()
    assert load_results(path) == rows
    with path.open("ab") as f:
        f.write(b'{"pass_name": "warm", "posi')  # killed mid-write
    assert load_results(path) == rows
    path.write_bytes(b"not json\n" + rows[0].to_json() + b"\n")
    with pytest.raises(InputError, match="replay.jsonl:1"):
        load_results(path)


def test_config_rejects_unknown_pass_and_verify_mode():
    with pytest.raises(ConfigError, match="--pass hot"):
        ReplayConfig(passes=("cold", "hot"))
    with pytest.raises(ConfigError, match="--verify some"):
        ReplayConfig(verify="some")


def test_resume_cuts_a_torn_tail_before_appending(tmp_path):
    path = tmp_path / "replay.jsonl"
    rows = [_r("cold", 0, 0.5, run="abc"), _r("cold", 1, 0.4, run="abc", ttft_samples=(0.4, 0.5, 0.3))]
    path.write_bytes(rows[0].to_json() + b"\n" + rows[1].to_json()[:40])  # killed mid-write
    w = ResultWriter(path, LocalRow, append=True)
    w.write(rows[1])
    w.close()
    assert load_results(path) == rows and path.read_bytes().count(b"\n") == 2
    path.write_bytes(rows[0].to_json())  # intact last line without its newline
    assert repair_tail(path, LocalRow) == 0 and path.read_bytes() == rows[0].to_json() + b"\n"
    path.write_bytes(rows[0].to_json() + b"\n" + b'{"pass_na  ')  # torn, trailing blanks, no newline
    assert repair_tail(path, LocalRow) == len(b'{"pass_na  ') and load_results(path) == rows[:1]
    path.write_bytes(rows[0].to_json() + b"\n" + b'{"pass_na\n\n')  # newline-terminated: whole, so not ours
    with pytest.raises(InputError, match="replay.jsonl:2"):
        repair_tail(path, LocalRow)


def test_counts_below_one_are_rejected_up_front():
    for kw, flag in ((dict(verify_every=0), "--verify-every 0"), (dict(repeat=0), "--repeat 0"),
                     (dict(block_size=0), "--block-size 0"), (dict(capacity_blocks=0), r"--capacity \(blocks\) 0")):
        with pytest.raises(ConfigError, match=flag):
            ReplayConfig(**kw)


def test_run_key_names_the_settings():
    base = dict(model="m", dtype="float32", device="cpu", block_size=16, capacity=12, policy="lru",
                template="model", tokenizer="m", max_prompt_tokens=None, max_new_tokens=1)
    key = run_key(**base)
    assert len(key) == 12 and key == run_key(**dict(reversed(list(base.items()))))
    assert all(run_key(**{**base, k: "other"}) != key for k in base)
