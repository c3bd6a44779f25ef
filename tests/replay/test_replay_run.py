"""The replay run without a real model: a pure-Python engine implements the ``Engine``
protocol and runs cold, warm and canonical passes through ``Replay`` and the library entry
point (so a second engine plugs in without touching the runner); ``--capacity`` in
blocks; the typed report is the ``--json`` document."""

from __future__ import annotations

import json
import subprocess
import sys
import time
import zlib
from dataclasses import fields
from types import SimpleNamespace

import numpy as np
import orjson
import pytest

from prefixcache.analyzer.cache.index.block_hash import BlockHashCache
from prefixcache.analyzer.cache.capacity import parse_capacity
from prefixcache.analyzer.errors import ConfigError
from prefixcache.replay.local.engine import Generation
from prefixcache.replay import ReplayOptions, open_replay
from prefixcache.replay.document import PassSummary, ReplayReport
from prefixcache.replay.local.passes import Replay, ReplayConfig, predict
from prefixcache.replay.local.session import capacity_blocks
from prefixcache.replay.prompts import Prompt, to_prompts
from tests.helpers import EXAMPLES, ROOT

VOCAB = 32
KEYS = ["model", "device", "dtype", "block_size", "policy", "requests", "run", "template", "repeat", "capacity_blocks",
        "max_prompt_tokens", "truncated_prompts", "truncated_canonical_prompts", "dropped_hidden_prefixes",
        "skipped_records", "warnings", "passes", "interrupted"]
PASS_KEYS = ["pass_name", "requests", "prompt_tokens", "cached_tokens", "computed_tokens", "ttft", "ttft_p50", "ttft_p95",
             "ttft_p99", "ttft_total", "effective_tok_s", "kv_bytes_peak", "verified", "mismatches", "max_abs_dlogit",
             "simulator_equal", "speedup", "avoided_prefill", "hit_rate"]


class FakeStore:
    """A store that keeps no KV itself (like a server engine's): the index decides everything."""

    def __init__(self, index: BlockHashCache, bytes_per_token: int) -> None:
        self.index, self.kv_bytes, self._bpt = index, 0, bytes_per_token


class FakeEngine:
    """Logits are a function of the token ids only, so a cache hit changes nothing; a
    computed token costs 1 ms of pretend prefill."""

    name, max_context, kv_bytes_per_token, dtype = "fake-model", 4096, 8, "float32"
    device, device_kind, tokenizer, model_id = "cpu", "cpu", "smollm2", "smollm2"

    def __init__(self) -> None:
        self.calls = 0

    def kv_store(self, index: BlockHashCache) -> FakeStore:
        return FakeStore(index, self.kv_bytes_per_token)

    def generate(self, ids, *, max_new_tokens=1, cache=None, now=0.0, repeat=1) -> Generation:
        self.calls += 1
        cached = cache.index.match(ids, now).cached_tokens if cache is not None else 0
        logits = np.random.default_rng(zlib.crc32(np.asarray(ids, dtype=np.int64).tobytes())).random(VOCAB,
                                                                                                   dtype=np.float32)
        t0 = time.perf_counter()
        ttft = 1e-3 * (len(ids) - cached)
        if cache is not None:
            cache.index.insert(ids, now)
            cache.kv_bytes = len(cache.index) * cache.index.block_size * cache._bpt
        return Generation(t_start=t0, t_prefill_start=t0, t_first_token=t0 + ttft, t_end=t0 + ttft, store_s=0.0,
                          prompt_tokens=len(ids), cached_tokens=cached, computed_tokens=len(ids) - cached,
                          output_ids=(int(np.argmax(logits)),) * max_new_tokens, first_logits=logits,
                          kv_bytes=cache.kv_bytes if cache is not None else 0, ttft_samples=(ttft,) * repeat)

    def notes(self) -> tuple[str, ...]:
        return ("a pretend engine",)


def _prompts() -> list[Prompt]:
    system = tuple(range(1000, 1064))
    seqs = [system + (1, 2, 3), system + tuple(range(5, 40)), tuple(range(7, 60)), system + tuple(range(5, 40)) + (9,)]
    return [Prompt("s", i, "f.jsonl", i + 1, ids, len(ids), now=float(i)) for i, ids in enumerate(seqs)]


def test_a_second_engine_runs_warm_passes_through_the_runner():
    prompts = _prompts()
    config = ReplayConfig(passes=("cold", "warm"), verify="all", capacity_blocks=6)
    engine = FakeEngine()
    results = Replay(engine, config, {"original": prompts}, run="r").run()
    warm = [r for r in results if r.pass_name == "warm"]
    # 16-token blocks, 6 of them; each prompt's partial last block takes a cached block's room while
    # it runs (vLLM's pool), so request 2's 3 blocks evict the system prompt's blocks 3 and 4: 32, not 48
    assert [r.cached_tokens for r in warm] == predict(prompts, config) == [0, 64, 0, 32]
    assert all(r.verify_ok for r in warm if r.cached_tokens) and sum(r.verified for r in warm) == 2
    assert engine.calls == 4 + 4  # cold, warm: the cold pass's logits serve the checks (no recomputation)
    assert warm[-1].kv_bytes == 5 * 16 * 8  # 6 blocks, one of them the last request's partial block
    summary = PassSummary.of("warm", results, {r.position: r.ttft_s for r in results if r.pass_name == "cold"})
    assert summary.simulator_equal is True and summary.speedup > 1 and summary.avoided_prefill == 96


def test_the_runner_needs_no_torch_and_no_hf_engine():
    runner = (ROOT / "replay" / "local" / "passes.py").read_text()
    assert "HFEngine" not in runner and ".loaded" not in runner and ".model." not in runner
    code = ("import sys; import prefixcache.replay, prefixcache.replay.local.passes, prefixcache.replay.local.session; "
            "assert not {'torch', 'transformers'} & set(sys.modules), sorted(sys.modules)")
    subprocess.run([sys.executable, "-c", code], check=True, cwd=ROOT)


def test_the_whole_run_on_a_fake_engine_and_its_report(tmp_path):
    """ingest → prepare → cold, warm and canonical passes → the typed report, no model loaded."""
    out = tmp_path / "r.jsonl"
    options = ReplayOptions(template="chatml_tools", max_prompt_tokens=256, capacity=parse_capacity("50%"),
                            verify="all", out=out)
    engine = FakeEngine()
    session = open_replay([str(EXAMPLES / "agent_session.jsonl")], options, engine=engine)
    assert session.total == 18
    outcome = session.run()
    report = outcome.report
    assert [f.name for f in fields(ReplayReport)] == KEYS and [f.name for f in fields(PassSummary)] == PASS_KEYS
    doc = orjson.loads(orjson.dumps(report))
    assert list(doc) == KEYS and all(list(p) == PASS_KEYS for p in doc["passes"])
    assert (doc["model"], doc["device"], doc["dtype"], doc["template"]) == ("fake-model", "cpu", "float32", "chatml_tools")
    assert doc["requests"] == 6 and doc["max_prompt_tokens"] == 256 and doc["interrupted"] is False
    passes = {p["pass_name"]: p for p in doc["passes"]}
    assert passes["warm"]["simulator_equal"] is True and passes["canonical"]["simulator_equal"] is True
    assert passes["canonical"]["cached_tokens"] > passes["warm"]["cached_tokens"]
    assert passes["warm"]["mismatches"] == 0 and passes["warm"]["avoided_prefill"] == passes["warm"]["cached_tokens"]
    # 50% of the distinct full blocks of the original prompts, as replayed (after --max-prompt-tokens)
    unique = len({h for p in session.replay.prompts["original"] for h in BlockHashCache(16).hashes(p.ids)})
    assert report.capacity_blocks == unique // 2 > 0
    assert outcome.notes[-1] == "a pretend engine" and "tokenized with fake-model's tokenizer" in outcome.notes[0]
    assert len(out.read_bytes().splitlines()) == 18 and not outcome.disagreements


def test_the_published_schema_has_the_report_keys():
    schema = json.loads((ROOT / "docs" / "schemas" / "replay.schema.json").read_text())
    assert list(schema["properties"]) == KEYS == schema["required"]
    assert schema["properties"]["capacity_blocks"] == {"anyOf": [{"type": "integer"}, {"type": "null"}]}


@pytest.mark.parametrize("text,blocks", [("4000blocks", 4000), ("7", 7), ("2Mtok", 125000), ("256MiB", 2**21),
                                         ("1KB", 7), ("50%", 5), ("100%", 10)])
def test_capacity_in_blocks(text, blocks):
    """Blocks of 16 tokens, 8 KV bytes per token; % of the prompts' 10 distinct blocks."""
    prompts = [Prompt("s", 0, "f", 1, tuple(range(160)), 160), Prompt("s", 1, "f", 2, tuple(range(100)), 100)]
    assert capacity_blocks(parse_capacity(text), 16, 8, prompts) == blocks


def test_capacity_below_one_block_is_refused():
    with pytest.raises(ConfigError, match="--capacity 100B: 0 blocks of 16 tokens"):
        capacity_blocks(parse_capacity("100B"), 16, 8, [])
    with pytest.raises(ConfigError, match="--capacity 5%: 0 blocks"):
        capacity_blocks(parse_capacity("5%"), 16, 8, [Prompt("s", 0, "f", 1, tuple(range(40)), 40)])
    for text in ("0", "0blocks", "15tok", "0%", "0GiB"):
        with pytest.raises(ConfigError, match=f"--capacity {text}: less than one block"):
            ReplayOptions(capacity=parse_capacity(text))
    with pytest.raises(ConfigError, match="--resume needs --out"):
        ReplayOptions(resume=True)
    with pytest.raises(ConfigError, match="--max-requests 0"):
        ReplayOptions(max_requests=0)


def _prepared(index: int, timestamp: float | None):
    request = SimpleNamespace(session="s", index=index, timestamp=timestamp,
                              provenance=SimpleNamespace(source="f.jsonl", record=index + 1))
    return SimpleNamespace(request=request, rendered=None, tokens=SimpleNamespace(ids=(-1, 5, 6, 7)))


def test_prompts_follow_the_one_arrival_order():
    """Logged times: sorted, ties in input order, ``now`` = the time; any time missing:
    input order, ``now`` = the position (``analyzer.sequence.arrival_order``)."""
    timed = to_prompts([_prepared(0, 3.0), _prepared(1, 1.0), _prepared(2, 2.0), _prepared(3, 1.0)], 2)
    assert [(p.request_index, p.now) for p in timed] == [(1, 1.0), (3, 1.0), (2, 2.0), (0, 3.0)]
    assert timed[0].ids == (5, 6) and timed[0].original_tokens == 3 and timed[0].dropped_opaque == 1
    untimed = to_prompts([_prepared(0, 3.0), _prepared(1, None), _prepared(2, 2.0)])
    assert [(p.request_index, p.now) for p in untimed] == [(0, 0.0), (1, 1.0), (2, 2.0)]


def test_cli_deprecated_capacity_spellings(capsys):
    from prefixcache.cli.replay import _capacity

    assert _capacity("5%", None, None) == parse_capacity("5%")
    assert _capacity(None, "256MiB", None) == parse_capacity("256MiB")
    assert _capacity(None, "1000", None) == parse_capacity("1000B")  # the old bare number was bytes
    assert _capacity(None, None, 12) == parse_capacity("12blocks")
    assert "--capacity-blocks is deprecated" in capsys.readouterr().err
    with pytest.raises(ConfigError, match="one capacity"):
        _capacity("5%,10%", None, None)
