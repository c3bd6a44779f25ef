"""Cache capacities: tokens, blocks, bytes of KV, or a percentage of unique blocks.

KV bytes per token of a transformer = layers × KV heads × head dim × 2 (K and V)
× dtype size (vLLM ``AttentionSpec.page_size_bytes`` / block size). Multi-head
latent attention (DeepSeek-V2/V3, ``kv_lora_rank`` in the config) stores one
latent of ``kv_lora_rank + qk_rope_head_dim`` per layer instead. Presets cover a
few common models; any Hugging Face ``config.json`` works through
:func:`kv_bytes_from_config`.

Spec syntax (``--capacity``, comma-separated for a sweep): ``5%`` of the trace's
unique blocks, ``4000`` or ``4000blocks`` blocks, ``2M tokens`` / ``2Mtok``
tokens, ``16GiB`` / ``20GB`` / ``512MiB`` bytes of KV (needs a model config).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from prefixcache.analyzer.ingest.jsonio import loads as json_loads

from prefixcache.analyzer.errors import ConfigError

DTYPE_BYTES = {"float32": 4, "fp32": 4, "float16": 2, "fp16": 2, "bfloat16": 2, "bf16": 2,
               "float8": 1, "fp8": 1, "float8_e4m3fn": 1, "float8_e5m2": 1, "int8": 1}


@dataclass(frozen=True, slots=True)
class KVShape:
    """Per-token KV size inputs (from a preset or a config.json)."""

    layers: int
    kv_heads: int
    head_dim: int
    dtype_bytes: int = 2
    latent_dim: int = 0  # MLA: kv_lora_rank + qk_rope_head_dim per layer (kv_heads ignored)

    @property
    def bytes_per_token(self) -> int:
        """KV cache bytes per token."""
        if self.latent_dim:
            return self.layers * self.latent_dim * self.dtype_bytes
        return self.layers * self.kv_heads * self.head_dim * 2 * self.dtype_bytes


#: Presets (bf16 unless noted), from each model's published config.json.
PRESETS: dict[str, KVShape] = {
    "llama-3-8b": KVShape(32, 8, 128),            # 128 KiB/token
    "llama-3-70b": KVShape(80, 8, 128),           # 320 KiB/token (Mooncake's 320 KB)
    "qwen2.5-7b": KVShape(28, 4, 128),            # 56 KiB/token
    "qwen3-32b": KVShape(64, 8, 128),             # 256 KiB/token
    "mistral-7b": KVShape(32, 8, 128),
    "deepseek-v3": KVShape(61, 1, 0, 2, latent_dim=512 + 64),  # MLA latent
    "smollm2-135m": KVShape(30, 3, 64, 4),        # float32 as replay runs it: 45 KiB/token
}


def kv_bytes_from_config(path: str | Path, dtype: str | None = None) -> KVShape:
    """Read a Hugging Face ``config.json`` (file or model folder) into a :class:`KVShape`.

    ``dtype`` overrides ``torch_dtype``/``dtype`` in the config (default bf16).
    Raises ``ConfigError`` naming the file and the missing field.
    """
    p = Path(path)
    if p.is_dir():
        p = p / "config.json"
    try:
        cfg = json_loads(p.read_bytes())
    except (OSError, ValueError) as exc:  # unreadable, not JSON, or nested past the depth limit
        raise ConfigError(f"{p}: cannot read model config: {exc}") from None
    cfg = cfg.get("text_config", cfg) if isinstance(cfg, dict) else cfg
    if not isinstance(cfg, dict):
        raise ConfigError(f"{p}: model config must be a JSON object")

    def need(key: str) -> int:
        if not isinstance(cfg.get(key), int):
            raise ConfigError(f"{p}: field {key} missing or not an integer")
        return cfg[key]

    layers = need("num_hidden_layers")
    name = (dtype or cfg.get("torch_dtype") or cfg.get("dtype") or "bfloat16").lower()
    if name not in DTYPE_BYTES:
        raise ConfigError(f"{p}: unknown dtype {name!r}; use one of {', '.join(DTYPE_BYTES)}")
    if isinstance(cfg.get("kv_lora_rank"), int):
        return KVShape(layers, 1, 0, DTYPE_BYTES[name],
                       latent_dim=cfg["kv_lora_rank"] + int(cfg.get("qk_rope_head_dim", 0)))
    heads = need("num_attention_heads")
    kv_heads = cfg.get("num_key_value_heads") or heads
    head_dim = cfg.get("head_dim") or need("hidden_size") // heads
    return KVShape(layers, int(kv_heads), int(head_dim), DTYPE_BYTES[name])


def kv_shape(model: str | None = None, config: str | None = None, dtype: str | None = None) -> KVShape | None:
    """The KV shape from ``--model-config`` (wins) or a preset name; None if neither."""
    if config:
        return kv_bytes_from_config(config, dtype)
    if model:
        if model not in PRESETS:
            raise ConfigError(f"unknown KV preset {model!r}; choose one of {', '.join(PRESETS)} or pass --model-config")
        shape = PRESETS[model]
        if dtype:
            if dtype.lower() not in DTYPE_BYTES:
                raise ConfigError(f"unknown dtype {dtype!r}; use one of {', '.join(DTYPE_BYTES)}")
            shape = KVShape(shape.layers, shape.kv_heads, shape.head_dim, DTYPE_BYTES[dtype.lower()], shape.latent_dim)
        return shape
    return None


@dataclass(frozen=True, slots=True)
class Capacity:
    """One parsed capacity: ``value`` in ``unit`` (``%``, ``blocks``, ``tokens``, ``bytes``); ``text`` as given."""

    value: float
    unit: str
    text: str

    def blocks(self, block_size: int, unique_blocks: int, bytes_per_token: int | None = None) -> int:
        """Capacity in blocks of ``block_size`` tokens (rounded down, at least 0)."""
        if self.unit == "%":
            return int(self.value / 100.0 * unique_blocks)
        if self.unit == "blocks":
            return int(self.value)
        if self.unit == "tokens":
            return int(self.value // block_size)
        if not bytes_per_token:
            raise ConfigError(f"capacity {self.text!r} is in bytes: pass --kv-model or --model-config")
        return int(self.value // (bytes_per_token * block_size))


_UNITS = {"": "blocks", "block": "blocks", "blocks": "blocks",
          "t": "tokens", "tok": "tokens", "token": "tokens", "tokens": "tokens", "%": "%"}
_SCALE = {"": 1, "k": 1e3, "m": 1e6, "g": 1e9}
_BYTES = {"b": 1, "kb": 1e3, "mb": 1e6, "gb": 1e9, "tb": 1e12,
          "kib": 2**10, "mib": 2**20, "gib": 2**30, "tib": 2**40}
_RE = re.compile(r"^\s*([0-9]*\.?[0-9]+)\s*([kKmMgG]?)\s*([A-Za-z%]*)\s*$")


def parse_capacity(text: str) -> Capacity:
    """Parse one ``--capacity`` spec (see module docstring). ``ConfigError`` naming
    ``--capacity`` and the value when it is malformed, negative, or a fractional number
    of blocks (``0.5blocks``; ``1.5k`` = 1,500 blocks is whole)."""
    spec = text.strip()
    m = _RE.match(text)
    if not m:
        if spec.startswith("-") and _RE.match(spec[1:]):
            raise ConfigError(f"--capacity {spec}: a capacity cannot be negative")
        raise ConfigError(f"--capacity {spec or repr(text)}: not a capacity; use e.g. 5%, 4000blocks, 2Mtok, 16GiB")
    num, scale, unit = float(m.group(1)), m.group(2).lower(), m.group(3)
    if unit and (scale + unit).lower() in _BYTES:
        return Capacity(num * _BYTES[(scale + unit).lower()], "bytes", spec)
    u = unit.lower()
    if u not in _UNITS:
        raise ConfigError(f"--capacity {spec}: unknown unit {unit!r}; use %, blocks, tokens, or bytes (KiB, MiB, GiB, GB)")
    if _UNITS[u] == "%" and scale:
        raise ConfigError(f"--capacity {spec}: a percentage takes no k/M/G")
    value = num * _SCALE[scale]
    if _UNITS[u] == "blocks" and value != int(value):
        raise ConfigError(f"--capacity {spec}: a number of blocks must be whole")
    return Capacity(value, _UNITS[u], spec)


def parse_capacities(text: str) -> list[Capacity]:
    """Parse a comma-separated list of capacity specs (ConfigError as :func:`parse_capacity`)."""
    items = [t for t in text.split(",") if t.strip()]
    if not items:
        raise ConfigError("--capacity: empty; use e.g. 5%, 4000blocks, 2Mtok, 16GiB")
    return [parse_capacity(t) for t in items]
