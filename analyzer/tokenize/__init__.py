"""Tokenizers (tiktoken, Hugging Face tokenizers, GGUF) and incremental session tokenization.

Public API: :func:`get_tokenizer`, :class:`Tokenizer`, :class:`SessionTokenizer`,
:func:`choose_auto`. Heavy libraries load lazily, on first use of a tokenizer.
"""

from __future__ import annotations

from prefixcache.analyzer.tokenize.backends import HFTokenizer, Seam, TiktokenTokenizer, Tokenizer
from prefixcache.analyzer.tokenize.registry import AutoChoice, choose_auto, deepseek_dir, get_tokenizer, smollm2_gguf
from prefixcache.analyzer.tokenize.session import SessionTokenizer, map_segments, pseudo_ids, with_opaque_prefix

__all__ = [
    "AutoChoice", "HFTokenizer", "Seam", "SessionTokenizer", "TiktokenTokenizer", "Tokenizer",
    "choose_auto", "deepseek_dir", "get_tokenizer", "map_segments", "pseudo_ids", "smollm2_gguf",
    "with_opaque_prefix",
]
