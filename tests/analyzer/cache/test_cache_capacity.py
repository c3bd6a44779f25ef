"""Capacity specs and KV bytes per token."""

from __future__ import annotations

import orjson
import pytest

from prefixcache.analyzer.cache.capacity import PRESETS, kv_bytes_from_config, kv_shape, parse_capacities, parse_capacity
from prefixcache.analyzer.errors import ConfigError


def test_parse_units():
    assert parse_capacity("5%").blocks(16, 1000) == 50
    assert parse_capacity("4000blocks").blocks(16, 0) == 4000
    assert parse_capacity("4000").blocks(16, 0) == 4000
    assert parse_capacity("2Mtok").blocks(16, 0) == 125_000
    assert parse_capacity("1k tokens").blocks(512, 0) == 1
    gib = parse_capacity("1GiB")
    assert gib.unit == "bytes" and gib.blocks(16, 0, 131072) == 512  # 1 GiB / (128 KiB × 16)
    with pytest.raises(ConfigError):
        gib.blocks(16, 0)
    assert [c.text for c in parse_capacities("1%,5%, 10%")] == ["1%", "5%", "10%"]
    for bad in ("", "five", "5 parsecs", "3k%"):
        with pytest.raises(ConfigError):
            parse_capacities(bad)


def test_presets_match_published_sizes():
    assert PRESETS["llama-3-70b"].bytes_per_token == 320 * 1024  # Mooncake's 320 KB/token
    assert PRESETS["llama-3-8b"].bytes_per_token == 128 * 1024
    assert PRESETS["smollm2-135m"].bytes_per_token == 45 * 1024  # design.md: 45 KiB (float32)
    assert kv_shape("llama-3-8b", dtype="fp8").bytes_per_token == 64 * 1024
    with pytest.raises(ConfigError):
        kv_shape("nope")
    assert kv_shape() is None


def test_hf_config(tmp_path):
    cfg = {"num_hidden_layers": 32, "num_attention_heads": 32, "num_key_value_heads": 8,
           "hidden_size": 4096, "torch_dtype": "bfloat16"}
    (tmp_path / "config.json").write_bytes(orjson.dumps(cfg))
    assert kv_bytes_from_config(tmp_path).bytes_per_token == 131072
    assert kv_bytes_from_config(tmp_path / "config.json", "float32").bytes_per_token == 262144
    mla = {"num_hidden_layers": 61, "kv_lora_rank": 512, "qk_rope_head_dim": 64, "torch_dtype": "bfloat16"}
    (tmp_path / "mla.json").write_bytes(orjson.dumps(mla))
    assert kv_bytes_from_config(tmp_path / "mla.json").bytes_per_token == 61 * 576 * 2
    (tmp_path / "bad.json").write_bytes(orjson.dumps({"num_attention_heads": 2}))
    with pytest.raises(ConfigError, match="num_hidden_layers"):
        kv_bytes_from_config(tmp_path / "bad.json")
    with pytest.raises(ConfigError):
        kv_bytes_from_config(tmp_path / "missing.json")
