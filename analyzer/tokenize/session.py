"""Incremental, per-session tokenization of rendered prompts.

Agent sessions re-send the whole conversation on every call, so request *k+1*
usually starts with request *k*'s text. :class:`SessionTokenizer` keeps the
previous text and ids of each session, finds the longest common character
prefix with the new text, steps back to the last *seam* inside it (a position
where the tokenizer provably splits independently, see
:meth:`Tokenizer.last_seam`), reuses the ids before the seam and encodes only the
rest. Where no seam exists it encodes the whole text, so the ids are always those
of ``tokenizer.encode(rendered.text)``.

A hidden prefix (``rendered.opaque_prefix_tokens`` > 0: Claude Code's unlogged
system prompt and tools) becomes that many negative pseudo-ids derived from
``key``: equal keys give equal ids position by position, so prefix and cache
models see the hidden prefixes of one deployment as shared content.

An image placeholder whose provider publishes a token count (``images``: placeholder
tag → (digest, tokens), :func:`prefixcache.analyzer.render.images.image_costs`) becomes
that many pseudo-ids derived from the image's digest (:func:`with_images`): the same
picture resent is the same tokens, a replaced one differs from its first token on.
"""

from __future__ import annotations

from array import array
from collections import OrderedDict
from dataclasses import dataclass

import numpy as np

from typing import Mapping

from prefixcache.analyzer.model import RenderedPrompt, Segment, TokenizedPrompt, compact_ids
from prefixcache.analyzer.render.images import PLACEHOLDER
from prefixcache.analyzer.sequence import common_prefix_len
from prefixcache.analyzer.tokenize.backends import Tokenizer


@dataclass(slots=True)
class _State:
    text: str
    ids: array  # compact ids (:func:`compact_ids`), shared with the TokenizedPrompt returned
    starts: np.ndarray  # int64, start char of each token
    #: the char segments of the text, and their token spans (offset ``n_op``, no hidden prefix segment);
    #: None when image pseudo-ids moved the tokens
    segs: tuple[Segment, ...] | None = None
    tsegs: tuple[Segment, ...] = ()
    n_op: int = 0

    @property
    def arr(self) -> np.ndarray:
        """The ids as a numpy view (no copy)."""
        return np.frombuffer(self.ids, dtype=np.uint32 if self.ids.typecode == "I" else np.int64)


def pseudo_ids(key: str, n: int) -> list[int]:
    """``n`` negative pseudo token ids for a hidden prefix named ``key``.

    Id *i* depends only on ``(key, i)`` (xxh64), so two hidden prefixes with the
    same key share ids on their common length. Values lie in ``[-2**62, -1]``.
    """
    return _pseudo(key, n).tolist()


#: The longest pseudo-id run made so far per hidden-prefix key (64 keys at most): id *i* depends only on
#: ``(key, i)``, so a shorter run is a slice of it.
_RUNS: OrderedDict[str, np.ndarray] = OrderedDict()


def _pseudo(key: str, n: int) -> np.ndarray:
    """:func:`pseudo_ids` as an int64 array (read-only; a slice of the key's longest run)."""
    run = _RUNS.pop(key, None)
    if run is None or len(run) < n:
        run = _pseudo_run(key, n)
        run.flags.writeable = False
    _RUNS[key] = run
    if len(_RUNS) > 64:
        _RUNS.popitem(last=False)
    return run[:n]


def _pseudo_run(key: str, n: int) -> np.ndarray:
    import xxhash

    seed = xxhash.xxh64_intdigest(key.encode("utf-8"))
    idx = np.arange(n, dtype=np.uint64)
    # splitmix64 of (seed + i): cheap, well mixed, vectorized
    z = (idx + np.uint64(seed)) * np.uint64(0x9E3779B97F4A7C15)
    z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    z = z ^ (z >> np.uint64(31))
    return -(z >> np.uint64(2)).astype(np.int64) - 1


def _with_pseudo(key: str, n: int, body: array) -> array:
    """``array('q')`` of ``n`` pseudo-ids for ``key`` then the ids of ``body``, built in numpy (no
    Python int per token)."""
    view = np.frombuffer(body, dtype=np.uint32 if body.typecode == "I" else np.int64) if len(body) else np.zeros(0, np.int64)
    out = array("q")
    out.frombytes(np.concatenate((_pseudo(key, n), view.astype(np.int64))).tobytes())
    return out


def with_opaque_prefix(tokens: TokenizedPrompt, n: int, key: str) -> TokenizedPrompt:
    """``tokens`` with an ``n``-token hidden prefix of pseudo-ids (named ``key``) in front.

    For logs whose hidden prefix length is only known after tokenizing the rest
    (Claude Code: ``opaque_prefix_for(request, len(tokens.ids))``); no re-encoding.
    Replaces any hidden prefix ``tokens`` already had. ``exact`` becomes False.
    """
    old = tokens.opaque_prefix_tokens
    body, segs = compact_ids(tokens.ids)[old:], tokens.segments[1:] if old else tokens.segments
    if n <= 0:
        shifted = tuple(Segment(s.kind, s.label, s.start - old, s.end - old, s.ref) for s in segs)
        return TokenizedPrompt(compact_ids(body.tolist()), shifted, tokens.tokenizer, tokens.exact, 0,
                               tokens.image_tokens)
    shifted = tuple(Segment(s.kind, s.label, s.start - old + n, s.end - old + n, s.ref) for s in segs)
    return TokenizedPrompt(_with_pseudo(key, n, body),
                           (Segment("opaque", "opaque_prefix", 0, n),) + shifted, tokens.tokenizer, False, n,
                           tokens.image_tokens)


def with_images(ids: array, starts: np.ndarray, text: str,
                images: Mapping[str, tuple[str, int]]) -> tuple[array, np.ndarray, int]:
    """``ids`` (of ``text``, with int64 start chars ``starts``) with every image placeholder whose
    tag is in ``images`` replaced by its count of pseudo-ids (key ``image:<digest>``): (ids,
    starts — each image token starts at its placeholder's first char —, image tokens added).
    A placeholder's tokens are those whose first char lies inside it."""
    spans = [(m.start(), m.end(), images[m.group(1)]) for m in PLACEHOLDER.finditer(text) if m.group(1) in images]
    if not spans:
        return ids, starts, 0
    view = np.frombuffer(ids, dtype=np.uint32 if ids.typecode == "I" else np.int64).astype(np.int64)
    out_ids, out_starts, pos, total = [], [], 0, 0
    for c0, c1, (digest, n) in spans:
        a, b = int(np.searchsorted(starts, c0)), int(np.searchsorted(starts, c1))
        out_ids += [view[pos:a], _pseudo("image:" + digest, n)]
        out_starts += [starts[pos:a], np.full(n, c0, dtype=np.int64)]
        pos, total = max(pos, b), total + n
    out_ids.append(view[pos:])
    out_starts.append(starts[pos:])
    out = array("q")
    out.frombytes(np.concatenate(out_ids).tobytes())
    return out, np.concatenate(out_starts), total


class SessionTokenizer:
    """Tokenizes the rendered requests of many sessions, reusing ids within each.

    ``incremental=False`` re-encodes every prompt in full (same ids; used by the
    benchmark as the naive baseline). ``max_sessions`` bounds memory: the least
    recently used session state is dropped (its next request is encoded in full).
    ``stats`` counts ``full`` and ``incremental`` encodes and ``reused_tokens``.
    """

    def __init__(self, tokenizer: Tokenizer, incremental: bool = True, max_sessions: int = 256) -> None:
        self.tokenizer = tokenizer
        self.incremental = incremental and tokenizer.incremental
        self.max_sessions = max_sessions
        self._states: OrderedDict[str, _State] = OrderedDict()
        self.stats = {"full": 0, "incremental": 0, "reused_tokens": 0, "encoded_tokens": 0}

    def tokenize(self, rendered: RenderedPrompt, session: str, key: str = "",
                 images: Mapping[str, tuple[str, int]] | None = None, opaque: int | None = None) -> TokenizedPrompt:
        """Token ids of ``rendered.text`` (== ``tokenizer.encode``) with segment spans in tokens,
        image placeholders named in ``images`` replaced by their pseudo-ids (:func:`with_images`).

        Segment spans: a token belongs to the segment in which its first character
        lies; ``opaque`` (hidden prefix) comes first when present. ``opaque`` (tokens), when
        given, is a hidden prefix sized from usage (named ``key``) in place of the rendering's:
        the result equals ``with_opaque_prefix(tokenize(...), opaque, key)``, built in one pass.
        """
        text = rendered.text
        prev = self._states.get(session) if self.incremental else None
        ids, starts, keep = self._encode(text, session)
        n_img = 0
        if images:
            ids, starts, n_img = with_images(ids, starts, text, images)
        n_op = max(0, int(rendered.opaque_prefix_tokens or 0) if opaque is None else opaque)
        exact = bool(self.tokenizer.exact and rendered.exact) and not (opaque and opaque > 0)
        chars = rendered.segments
        k = 0
        if prev is not None and prev.segs is not None and keep and not n_img and prev.n_op == n_op:
            # A segment that is the previous request's own object and ends before the reused tokens end
            # spans the same tokens as then (the token starts up to there are the same).
            old, most = prev.segs, min(len(prev.segs), len(chars))
            while k < most and chars[k] is old[k] and chars[k].end <= keep:
                k += 1
        segs = (prev.tsegs[:k] + map_segments(chars[k:], starts, len(text), offset=n_op)) if k else \
            map_segments(chars, starts, len(text), offset=n_op)
        state = self._states.get(session) if self.incremental else None
        if state is not None:
            state.segs, state.tsegs, state.n_op = (None if n_img else chars), segs, n_op
        if n_op:
            segs = (Segment("opaque", "opaque_prefix", 0, n_op),) + segs
            all_ids = _with_pseudo(key or session, n_op, ids)
        else:
            all_ids = ids
        return TokenizedPrompt(
            ids=all_ids, segments=segs, tokenizer=self.tokenizer.name,
            exact=exact, opaque_prefix_tokens=n_op, image_tokens=n_img,
        )

    def _encode(self, text: str, session: str) -> tuple[array, np.ndarray, int]:
        """Compact ids (:func:`compact_ids`) and int64 start chars of ``text``, and the char before
        which the session's previous ids were reused (0: encoded in full)."""
        tok = self.tokenizer
        prev = self._states.get(session) if self.incremental else None
        seam = None
        if prev is not None:
            limit = common_prefix_len(prev.text, text)
            if limit > tok.margin:
                seam = tok.last_seam(prev.text, prev.arr, prev.starts, limit - tok.margin)
        if seam is not None:
            new_ids, new_starts = tok.encode_with_offsets(text[seam.char:])
            ids = _joined(prev.ids[: seam.token], new_ids)
            starts = np.concatenate((prev.starts[: seam.token], np.asarray(new_starts, dtype=np.int64) + seam.char))
            self.stats["incremental"] += 1
            self.stats["reused_tokens"] += seam.token
            self.stats["encoded_tokens"] += len(new_ids)
        else:
            raw, starts = tok.encode_with_offsets(text)
            ids = compact_ids(raw)
            starts = np.asarray(starts, dtype=np.int64)
            self.stats["full"] += 1
            self.stats["encoded_tokens"] += len(ids)
        keep = seam.char if seam is not None else 0
        if self.incremental:
            self._states[session] = _State(text, ids, starts)
            self._states.move_to_end(session)
            while len(self._states) > self.max_sessions:
                self._states.popitem(last=False)
        return ids, starts, keep

    def forget(self, session: str) -> None:
        """Drop a session's state (e.g. when it ends)."""
        self._states.pop(session, None)


def _joined(head: array, tail: list[int]) -> array:
    """``head`` followed by ``tail``, one compact array (the wider kind when needed)."""
    more = compact_ids(tail)
    if more.typecode != head.typecode:
        return array("q", head.tolist() + tail)
    return head + more


def map_segments(segments: tuple[Segment, ...], starts: np.ndarray, n_chars: int, offset: int = 0) -> tuple[Segment, ...]:
    """Char-offset segments -> token-offset segments (shifted by ``offset`` tokens).

    A token is attributed to the segment holding its first character, so a
    token that straddles a boundary (e.g. a merged ``"\\n\\n"``) counts once.
    """
    if not segments:
        return ()
    cs = np.array([s.start for s in segments], dtype=np.int64)
    ce = np.array([s.end for s in segments], dtype=np.int64)
    ts = (np.searchsorted(starts, cs, side="left") + offset).tolist()
    te = np.maximum(np.searchsorted(starts, ce, side="left") + offset, ts).tolist()
    return tuple([Segment(s.kind, s.label, a, b, s.ref) for s, a, b in zip(segments, ts, te)])
