"""What a worker sends back for each prepared request: the change from its session's previous one.

A session's prompts grow by appending: request *k* renders to request *k − 1*'s text plus a new
turn, its token ids and segment spans likewise. Sending every full rendering back (its text, ids
and one :class:`~prefixcache.analyzer.model.Segment` per part) moves the sum of all prompts, which
grows with the square of a session's length (measured: 112 MB of results per 10.5 MB of agent log,
most of the driver's unpickling spent rebuilding the segments). :class:`Encoder` (on the worker)
sends instead, per request, how much of the session's previous rendering it keeps and what follows:
the number of leading characters, ids and segments equal to the previous request's, and the rest.
:class:`Decoder` (here) rebuilds the same ``(RenderedPrompt, TokenizedPrompt)`` from the previous
one it rebuilt for that session, so what the wire carries grows with the log, not with the prompts.

Both sides keep the last rendering of at most :data:`SESSIONS` sessions (least recently used
dropped: the encoder names the sessions it drops with the item that dropped them, and the decoder
drops them there too, so both always agree on each session's base). A session's requests must reach
one encoder, and its items the decoder, in the same order (:class:`~.parallel.RayPool` sends each
session to one worker and reads its results back in order). The rebuilt values equal the worker's
(text, ids and segments compare equal; the tests compare every sample's lint output with the serial run's).
"""

from __future__ import annotations

import dataclasses
from array import array
from collections import OrderedDict
from typing import Any, Sequence

from prefixcache.analyzer.model import RenderedPrompt, Request, TokenizedPrompt
from prefixcache.analyzer.sequence import common_prefix_len

#: Sessions whose last rendering each side keeps (per worker; an evicted session's next request is
#: sent whole).
SESSIONS = 256

_R_REST = tuple(f.name for f in dataclasses.fields(RenderedPrompt) if f.name not in ("text", "segments"))
_T_REST = tuple(f.name for f in dataclasses.fields(TokenizedPrompt) if f.name not in ("ids", "segments"))


def _same_head(a: Sequence, b: Sequence) -> int:
    """Number of equal leading items of the tuples ``a`` and ``b`` (segments: few a request)."""
    n = min(len(a), len(b))
    i = 0
    while i < n and a[i] == b[i]:
        i += 1
    return i


def _ids_head(prev: Any, ids: Any) -> int:
    """Leading ids kept from ``prev`` (0 unless both are arrays of one type code, so the concatenation
    the decoder makes is an array of the same type)."""
    if not (isinstance(prev, array) and isinstance(ids, array) and prev.typecode == ids.typecode):
        return 0
    return common_prefix_len(prev, ids)


class Encoder:
    """The worker's side: :meth:`encode` turns each request's ``(rendered, tokens)`` into a wire item."""

    def __init__(self, sessions: int = SESSIONS) -> None:
        self.sessions = sessions
        self._last: OrderedDict[str, tuple[RenderedPrompt, TokenizedPrompt]] = OrderedDict()

    def encode(self, requests: Sequence[Request], results: Sequence[Any]) -> list[Any]:
        """One item per request, in order: the exception a request's render raised, as it is, or a
        tuple ``(session, dropped, chars kept, text after them, segments kept, the segments after
        them, ids kept, ids after them, token segments kept, the token segments after them, the
        other fields of the rendering, the other fields of the tokens)``; ``dropped`` names the
        sessions forgotten on both sides before this one's base is stored."""
        out: list[Any] = []
        last = self._last
        for req, res in zip(requests, results):
            if isinstance(res, BaseException):
                out.append(res)
                continue
            rendered, tokens = res
            prev = last.pop(req.session, None)
            if prev is None:
                c = k = d = j = 0
            else:
                pr, pt = prev
                c = common_prefix_len(pr.text, rendered.text)
                k = _same_head(pr.segments, rendered.segments)
                d = _ids_head(pt.ids, tokens.ids)
                j = _same_head(pt.segments, tokens.segments)
            last[req.session] = res
            dropped = []
            while len(last) > self.sessions:
                dropped.append(last.popitem(last=False)[0])
            out.append((req.session, tuple(dropped), c, rendered.text[c:], k, rendered.segments[k:], d,
                        tokens.ids[d:], j, tokens.segments[j:], tuple(getattr(rendered, f) for f in _R_REST),
                        tuple(getattr(tokens, f) for f in _T_REST)))
        return out


class Decoder:
    """This process's side: :meth:`decode` rebuilds the ``(rendered, tokens)`` of each item."""

    def __init__(self) -> None:
        self._last: dict[str, tuple[RenderedPrompt, TokenizedPrompt]] = {}

    def decode(self, items: Sequence[Any]) -> list[Any]:
        """``(rendered, tokens)`` per item (an exception item stays the exception), in order."""
        out: list[Any] = []
        last = self._last
        for item in items:
            if isinstance(item, BaseException):
                out.append(item)
                continue
            session, dropped, c, text, k, segs, d, ids, j, tsegs, r_rest, t_rest = item
            prev = last.get(session)
            if prev is not None:
                pr, pt = prev
                text = pr.text[:c] + text if c else text
                segs = pr.segments[:k] + segs if k else segs
                ids = pt.ids[:d] + ids if d else ids
                tsegs = pt.segments[:j] + tsegs if j else tsegs
            res = (RenderedPrompt(text, segs, **dict(zip(_R_REST, r_rest))),
                   TokenizedPrompt(ids, tsegs, **dict(zip(_T_REST, t_rest))))
            for s in dropped:
                last.pop(s, None)
            last[session] = res
            out.append(res)
        return out
