"""Build a Hugging Face ``tokenizer.json`` from a GGUF file's metadata.

A GGUF stores its tokenizer as llama.cpp metadata (``tokenizer.ggml.*``): the
vocabulary, the merges, the token types, the pre-tokenizer name, the special
token ids and the chat template. This module reads those with the ``gguf``
package and assembles the equivalent ``tokenizers`` pipeline, the same one
transformers builds in ``AutoTokenizer.from_pretrained(dir, gguf_file=...)``:

* byte-level BPE (``tokenizer.ggml.model == "gpt2"``); tokens written outside
  the byte alphabet are re-spelled byte by byte;
* tokens of type 3 (CONTROL) become special added tokens, type 4 (USER_DEFINED)
  non-special added tokens, all matched whole (``normalized=False``);
* the pre-tokenizer named by ``tokenizer.ggml.pre``, as llama.cpp defines it
  (``llama_vocab::impl::load``, ``src/llama-vocab.cpp``): the split regex of the
  ``llama3``, ``qwen2`` and ``gpt-4o`` families followed by a byte-level step;
  the ``smollm`` family (also ``starcoder``, ``refact``, ``command-r``,
  ``codeshell``, ``exaone``, ``minerva-7b``), which first isolates every digit
  (``\\p{N}``) and then applies GPT-2's regex; and GPT-2's byte-level regex for the
  ``gpt-2`` family. A name outside these is built with GPT-2's regex but marked
  *not exact* (``meta["exact"]`` False, ``meta["pre"]`` names it): its counts are
  never reported as exact.

Reading a GGUF takes seconds (the reader parses every tensor header), so the
result is cached as ``tokenizer.json`` + ``gguf_meta.json`` under
``$XDG_CACHE_HOME/prefixcache/gguf/<digest>/`` (``~/.cache`` by default), keyed by
the file's absolute path, size and modification time.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Any

from prefixcache.analyzer.errors import ConfigError

_LLAMA3 = (
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}"
    r"| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"
)
_QWEN2 = (
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}"
    r"| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"
)
_GPT4O = (
    r"[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?"
    r"|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?"
    r"|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+"
)
#: llama.cpp pre-tokenizer name (``tokenizer.ggml.pre``) -> split regex.
SPLITS = {
    **dict.fromkeys(("llama3", "llama-v3", "llama-bpe", "falcon3", "dbrx", "smaug-bpe", "pixtral"), _LLAMA3),
    **dict.fromkeys(("qwen2", "deepseek-r1-qwen", "megrez"), _QWEN2),
    **dict.fromkeys(("gpt-4o", "llama4", "minimax-m2"), _GPT4O),
}
#: Pre-tokenizers that isolate each digit, then split with GPT-2's regex (llama.cpp's
#: ``LLAMA_VOCAB_PRE_TYPE_SMOLLM`` group: regexes ``\p{N}``, then GPT-2's).
DIGITS_THEN_GPT2 = frozenset(("smollm", "starcoder", "refact", "command-r", "codeshell", "exaone", "minerva-7b"))
#: Pre-tokenizers whose split is GPT-2's byte-level regex (llama.cpp's GPT2 group).
GPT2 = frozenset(("gpt-2", "gpt2", "phi-2", "jina-es", "jina-de", "jina-v1-en", "jina-v2-es", "jina-v2-de",
                  "jina-v2-code", "mpt", "olmo", "jais", "trillion", "gigachat", "a.x-4.0", "mellum"))
_CONTROL, _USER_DEFINED = 3, 4
_BYTE_LEVEL = {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": True}


def pre_tokenizer(name: str | None) -> tuple[dict[str, Any], bool]:
    """The ``tokenizers`` pre-tokenizer for a GGUF's ``tokenizer.ggml.pre`` name, and whether
    it is the one llama.cpp applies (False: an unimplemented name, built as GPT-2's regex)."""
    split = SPLITS.get(name or "")
    if split is not None:
        return {"type": "Sequence", "pretokenizers": [
            {"type": "Split", "pattern": {"Regex": split}, "behavior": "Isolated", "invert": False},
            {**_BYTE_LEVEL, "use_regex": False}]}, True
    if name in DIGITS_THEN_GPT2:
        return {"type": "Sequence", "pretokenizers": [{"type": "Digits", "individual_digits": True},
                                                      _BYTE_LEVEL]}, True
    return dict(_BYTE_LEVEL), name in GPT2


def _byte_alphabet() -> dict[int, str]:
    """GPT-2's reversible byte -> printable character map (byte-level BPE alphabet)."""
    keep = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + list(range(ord("®"), ord("ÿ") + 1))
    out, extra = {}, 0
    for b in range(256):
        if b in keep:
            out[b] = chr(b)
        else:
            out[b] = chr(256 + extra)
            extra += 1
    return out


def _field(reader: Any, key: str, default: Any = None) -> Any:
    f = reader.fields.get(key)
    if f is None:
        return default
    return f.contents()


def _strings(reader: Any, key: str) -> list[str]:
    f = reader.fields.get(key)
    if f is None:
        return []
    return [bytes(f.parts[i]).decode("utf-8", errors="surrogatepass") for i in f.data]


def read_gguf_tokenizer(path: str | os.PathLike[str]) -> tuple[dict[str, Any], dict[str, Any]]:
    """``(tokenizer_json, meta)`` for a GGUF file.

    ``meta`` has ``chat_template``, ``bos_token``, ``eos_token``, ``unk_token``,
    ``pad_token`` (strings or None), ``name``, ``pre`` (the pre-tokenizer name) and
    ``exact`` (False when that name is not implemented, see :func:`pre_tokenizer`). Raises :class:`ConfigError` for a
    missing file or a tokenizer type other than byte-level BPE.
    """
    from gguf import GGUFReader

    p = Path(path)
    if not p.is_file():
        raise ConfigError(f"GGUF file not found: {p}")
    try:
        reader = GGUFReader(str(p))
    except Exception as exc:  # the reader raises plain ValueError/struct errors
        raise ConfigError(f"{p}: not a readable GGUF file ({exc})") from exc
    kind = _field(reader, "tokenizer.ggml.model")
    if kind != "gpt2":
        raise ConfigError(f"{p}: GGUF tokenizer type {kind!r} is not supported (only byte-level BPE, 'gpt2')")
    tokens = _strings(reader, "tokenizer.ggml.tokens")
    ttype_f = reader.fields.get("tokenizer.ggml.token_type")
    types = [int(ttype_f.parts[i][0]) for i in ttype_f.data] if ttype_f is not None else [1] * len(tokens)
    merges = [tuple(m.split(" ", 1)) for m in _strings(reader, "tokenizer.ggml.merges")]
    spell = _byte_alphabet()
    alphabet = set(spell.values())
    vocab = {}
    for i, t in enumerate(tokens):
        key = t if set(t) <= alphabet else "".join(spell[b] for b in t.encode("utf-8"))
        vocab.setdefault(key, i)
    added = []
    for i, (t, ty) in enumerate(zip(tokens, types)):
        if (ty == _CONTROL and set(t) <= alphabet) or (ty == _USER_DEFINED and t in vocab):
            added.append({"id": i, "content": t, "single_word": False, "lstrip": False, "rstrip": False,
                          "normalized": False, "special": ty == _CONTROL})
    pre_name = _field(reader, "tokenizer.ggml.pre")
    pre, exact = pre_tokenizer(pre_name)
    tj = {
        "version": "1.0", "truncation": None, "padding": None, "added_tokens": added,
        "normalizer": None, "pre_tokenizer": pre, "post_processor": None,
        "decoder": {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": True, "use_regex": True},
        "model": {"type": "BPE", "dropout": None, "unk_token": None, "continuing_subword_prefix": "",
                  "end_of_word_suffix": "", "fuse_unk": False, "byte_fallback": False, "ignore_merges": False,
                  "vocab": vocab, "merges": [list(m) for m in merges]},
    }

    def tok_of(key: str) -> str | None:
        i = _field(reader, f"tokenizer.ggml.{key}")
        return tokens[int(i)] if i is not None and 0 <= int(i) < len(tokens) else None

    meta = {
        "name": _field(reader, "general.name") or p.stem, "pre": pre_name, "exact": exact,
        "chat_template": _field(reader, "tokenizer.chat_template"),
        "bos_token": tok_of("bos_token_id"), "eos_token": tok_of("eos_token_id"),
        "unk_token": tok_of("unknown_token_id"), "pad_token": tok_of("padding_token_id"),
    }
    return tj, meta


def cache_dir() -> Path:
    """The one cache folder of prefixcache: ``$PREFIXCACHE_CACHE``, else
    ``$XDG_CACHE_HOME/prefixcache`` (``~/.cache/prefixcache`` by default).
    Holds tokenizers built from GGUF files and (replay) converted models."""
    env = os.environ.get("PREFIXCACHE_CACHE")
    if env:
        return Path(env)
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "prefixcache"


def cached_gguf_tokenizer(path: str | os.PathLike[str]) -> tuple[Path, dict[str, Any]]:
    """Path of the cached ``tokenizer.json`` built from ``path``, and the GGUF meta.

    Builds and writes the cache on first use (atomic rename, so concurrent runs
    are safe); later calls read two small files.
    """
    p = Path(path).resolve()
    if not p.is_file():
        raise ConfigError(f"GGUF file not found: {p}")
    st = p.stat()
    digest = hashlib.sha256(f"{p}|{st.st_size}|{st.st_mtime_ns}|v2".encode()).hexdigest()[:20]
    d = cache_dir() / "gguf" / digest
    tj_path, meta_path = d / "tokenizer.json", d / "gguf_meta.json"
    if tj_path.is_file() and meta_path.is_file():
        return tj_path, json.loads(meta_path.read_text(encoding="utf-8"))
    tj, meta = read_gguf_tokenizer(p)
    d.mkdir(parents=True, exist_ok=True)
    for target, obj in ((tj_path, tj), (meta_path, meta)):
        tmp = target.with_suffix(f".tmp{os.getpid()}")
        tmp.write_text(json.dumps(obj, ensure_ascii=False), encoding="utf-8")
        os.replace(tmp, target)
    return tj_path, meta
