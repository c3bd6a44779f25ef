"""The prompt-size check: is the prompt we analyse the prompt that was billed?

Every figure prefixcache prints (reusable and lost tokens, cache hits, costs) is
computed from the prompt it rendered and tokenized. When a log also reports the
provider's or engine's own prompt count (``usage.prompt_tokens``), the two can be
compared call by call. They differ when the log leaves out part of what was sent
(instructions, tools, encrypted reasoning), when the layout or tokenizer only
approximates the provider's, or when a reader misread the log; a user quoting a
figure must know by how much.

:class:`SizeCheck` takes :class:`~prefixcache.analyzer.prepare.prepared.Prepared`
requests one by one and keeps, per session, how many calls with a reported count
are within :data:`TOLERANCE` of it. Our count is the tokenized prompt (its hidden
prefix included) plus the encrypted reasoning the reader sized from usage
(``extra["opaque_reasoning_tokens"]``, Codex: tokens that are billed but cannot be
rendered, so they are in no token stream), its images at the provider's published cost
(:mod:`prefixcache.analyzer.render.images`: already in the token stream as that many
pseudo-ids, shown apart) plus the results of server-side tools (Codex ``web_search_call``:
the provider ran a search and billed its results as input, the log has only the
query). A search is sized from the usage of the call that ran it (what that call was
billed beyond everything else we count) and carried to every later prompt that holds it
(``extra["server_tool_new"]`` / ``extra["server_tool_ids"]``). A session's hidden prefix
is sized from its first call with usage, and a search from its own call, so those calls
match by construction (a search's call is counted apart: :attr:`SizeRow.sized`).

The tolerance is 2% of the billed count: what an exact tokenizer with the exact
template misses only by a misread log. Approximate tokenizers (cl100k standing in
for Claude) are held to the same 2% and named as approximate in the warning: the
point of the check is to say how far a figure may be from the bill, not to excuse it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from statistics import median
from typing import Iterable

from prefixcache.analyzer.prepare.prepared import Prepared

#: Largest |ours − billed| / billed still called the same prompt (a fraction).
TOLERANCE = 0.02
#: Sessions named one by one in :meth:`SizeCheck.warnings`; the rest are summed in one more line.
MAX_SESSION_LINES = 10


@dataclass(frozen=True, slots=True)
class SizeRow:
    """One call's counts (tokens): ``ours`` (tokenized prompt, hidden prefix included),
    ``reasoning`` (encrypted reasoning sized from usage, added to ours), ``billed``
    (``usage.prompt_tokens``), ``hidden`` (our hidden-prefix tokens) and ``images`` (what the
    provider's published formula bills for the prompt's images:
    :func:`prefixcache.analyzer.render.images.image_tokens`; in the token stream, kept out
    of ``ours`` so the two show apart)."""

    ours: int
    reasoning: int
    billed: int
    hidden: int
    images: int = 0
    #: Results of server-side tools (web search) in the prompt, sized from usage (tokens).
    server: int = 0
    #: Whether this call sized a web search it ran from its own billed count: it matches by
    #: construction.
    sized: bool = False

    @property
    def delta(self) -> int:
        """``ours + reasoning + images + server − billed`` (tokens; negative: we count less than was billed)."""
        return self.ours + self.reasoning + self.images + self.server - self.billed

    @property
    def fraction(self) -> float:
        """:attr:`delta` as a fraction of the billed count."""
        return self.delta / max(self.billed, 1)

    @property
    def within(self) -> bool:
        """Whether :attr:`delta` is within :data:`TOLERANCE` of the billed count."""
        return abs(self.delta) <= TOLERANCE * max(self.billed, 1)


@dataclass(slots=True)
class SessionSizes:
    """The check over one session: its calls with a reported prompt count, in order, and
    whether every tokenizer that counted them was exact."""

    session: str
    rows: list[SizeRow] = field(default_factory=list)
    exact: bool = True

    @property
    def within(self) -> int:
        """Calls within :data:`TOLERANCE`."""
        return sum(r.within for r in self.rows)

    @property
    def sized(self) -> int:
        """Calls that sized a hidden part from their own billed count (within by construction)."""
        return sum(r.sized for r in self.rows)

    @property
    def median_delta_fraction(self) -> float:
        """Median of ``delta / billed`` over the calls (0.0 without calls; the mean of the middle two
        for an even count, as ``statistics.median`` and simulate's provider-call note take it)."""
        return median(r.fraction for r in self.rows) if self.rows else 0.0

    @property
    def band(self) -> tuple[float, float]:
        """Smallest and largest ``delta / billed`` over the calls ((0, 0) without calls)."""
        xs = [r.fraction for r in self.rows]
        return (min(xs), max(xs)) if xs else (0.0, 0.0)

    @property
    def hidden(self) -> int:
        """Our hidden-prefix size (tokens) on the session's last checked call; 0 without one."""
        return self.rows[-1].hidden if self.rows else 0

    @property
    def reasoning(self) -> int:
        """Encrypted-reasoning tokens added on the session's last checked call."""
        return self.rows[-1].reasoning if self.rows else 0

    @property
    def server(self) -> int:
        """Server-side tool results (tokens) added on the session's last checked call."""
        return self.rows[-1].server if self.rows else 0


def request_key(source: str, record: int, index: int) -> tuple[str, int, int]:
    """The key of one request in :attr:`SizeCheck.by_request`: its file, record (line) and
    index in its session, as a prepared request (``provenance.source``, ``provenance.record``,
    ``index``) and a simulator request (``source``, ``record``, ``index``) both carry them."""
    return (source, record, index)


def compared(ours: int, billed: int, row: SizeRow | None = None) -> SizeRow:
    """``row`` when the check made one for the call; else the plain comparison of ``ours``
    (tokens in the prompt we analyse) with ``billed``: the one :class:`SizeRow` whose
    :attr:`~SizeRow.within` and :attr:`~SizeRow.fraction` every comparison uses."""
    return row if row is not None else SizeRow(ours, 0, billed, 0)


class SizeCheck:
    """The prompt-size check over a stream of prepared requests (see the module doc).

    :meth:`add` each :class:`Prepared` (requests without tokens or without a reported
    prompt count are passed over); :attr:`sessions` and :meth:`warnings` after.
    With ``by_request=True``, :attr:`by_request` holds each checked call's row by
    :func:`request_key`: simulate's provider-call note
    (:mod:`prefixcache.analyzer.cache.simulate.provider_calls`) judges each call by it, so
    the two never disagree on which calls are off (None otherwise: lint and inspect need no
    per-call index, ~200 bytes a call on a long log)."""

    def __init__(self, by_request: bool = False) -> None:
        self.sessions: dict[str, SessionSizes] = {}
        #: Each checked call's row by :func:`request_key` (the rows of :attr:`sessions`), when kept.
        self.by_request: dict[tuple[str, int, int], SizeRow] | None = {} if by_request else None
        #: Per session, each server-side tool call's results (tokens), sized from its call's usage.
        self._server: dict[str, dict[str, int]] = {}

    def add(self, p: Prepared) -> SizeRow | None:
        """Check one request; its row, or None when there is nothing to compare."""
        u = p.request.usage
        if p.tokens is None or u is None or u.prompt_tokens is None:
            return None
        extra = p.request.extra if isinstance(p.request.extra, dict) else {}
        reasoning = int(extra.get("opaque_reasoning_tokens") or 0)
        # images are in the token stream at the provider's published count (TokenizedPrompt.image_tokens)
        images = p.tokens.image_tokens
        ours, billed, hidden = len(p.tokens.ids) - images, int(u.prompt_tokens), p.tokens.opaque_prefix_tokens
        sizes = self._server.setdefault(p.request.session, {})
        server = sum(sizes.get(i, 0) for i in extra.get("server_tool_ids", ()))
        new = [i for i in extra.get("server_tool_new", ()) if i not in sizes]
        if new:  # this call ran them: what it was billed beyond everything else is their results
            sizes[new[0]] = max(0, billed - (ours + reasoning + images + server))
            sizes.update((i, 0) for i in new[1:])
            server += sizes[new[0]]
        row = SizeRow(ours, reasoning, billed, hidden, images, server, bool(new))
        s = self.sessions.setdefault(p.request.session, SessionSizes(p.request.session))
        s.rows.append(row)
        if self.by_request is not None:
            self.by_request[request_key(p.request.provenance.source, p.request.provenance.record,
                                        p.request.index)] = row
        s.exact = s.exact and bool(p.tokens.exact)
        return row

    def add_all(self, prepared: Iterable[Prepared]) -> SizeCheck:
        """:meth:`add` every request; returns self."""
        for p in prepared:
            self.add(p)
        return self

    @property
    def calls(self) -> int:
        """Calls checked (with tokens and a reported prompt count)."""
        return sum(len(s.rows) for s in self.sessions.values())

    @property
    def within(self) -> int:
        """Calls within :data:`TOLERANCE` of their billed count."""
        return sum(s.within for s in self.sessions.values())

    def summary(self) -> str | None:
        """One line over every checked call (None when no call reports a prompt count)."""
        if not self.calls:
            return None
        off = sum(s.within < len(s.rows) for s in self.sessions.values())
        return (f"prompt size: ours within {TOLERANCE:.0%} of the billed count on {self.within:,} of "
                f"{self.calls:,} call(s) with a reported count; {off} of {len(self.sessions)} session(s) off")

    def warnings(self) -> list[str]:
        """One line per session whose prompts are not the billed ones (some call off by more than
        :data:`TOLERANCE`): how many calls, the band and median of the difference, what was added;
        past :data:`MAX_SESSION_LINES` sessions, one line sums the rest."""
        out = []
        off = [s for s in self.sessions.values() if s.within < len(s.rows)]
        for s in off[:MAX_SESSION_LINES]:
            n, ok = len(s.rows), s.within
            added = []
            if s.hidden:
                added.append(f"a {s.hidden:,}-token hidden prefix sized from its first call's usage")
            if s.reasoning:
                added.append(f"{s.reasoning:,} tokens of encrypted reasoning from the usage")
            if s.server:
                added.append(f"{s.server:,} tokens of web-search results sized from the usage of the calls that ran them")
            if s.rows[-1].images:
                added.append(f"{s.rows[-1].images:,} image tokens by the provider's formula")
            how = f"; ours includes {' and '.join(added)}" if added else ""
            approx = "" if s.exact else " (approximate)"
            lo, hi = s.band
            out.append(f"session {s.session}: our prompt counts{approx} are within {TOLERANCE:.0%} of the billed "
                       f"count on {ok} of {n} call(s); ours − billed {lo:+.1%} to {hi:+.1%}, median "
                       f"{s.median_delta_fraction:+.1%}{how}; figures computed from these prompts are off the bill by "
                       "the same margin")
        rest = off[MAX_SESSION_LINES:]
        if rest:
            calls = sum(len(s.rows) for s in rest)
            out.append(f"and {len(rest)} more session(s) off the billed counts: {sum(s.within for s in rest)} of "
                       f"{calls} call(s) within {TOLERANCE:.0%}")
        carried = self.carried()
        if carried:
            out.append(carried)
        return out

    def carried(self) -> str | None:
        """One line when calls were billed for prompt tokens the log does not carry as text (encrypted
        reasoning, web-search results: both sized from the usage, so the size check counts them and
        finds the calls within :data:`TOLERANCE`): how many tokens, on how many calls, and their share
        of the billed prompt tokens. Every figure computed from our token stream (lint's reusable
        tokens, simulate's hit tokens and cost without cache) leaves them out; None when none."""
        rows = [r for s in self.sessions.values() for r in s.rows]
        with_carried = [r for r in rows if r.reasoning or r.server]
        if not with_carried:
            return None
        reasoning, server = sum(r.reasoning for r in rows), sum(r.server for r in rows)
        billed = sum(r.billed for r in rows)
        parts = [f"{x:,} of {what}" for x, what in ((reasoning, "encrypted reasoning"), (server, "web-search results"))
                 if x]
        return (f"billed but not in the analysed prompts: {reasoning + server:,} tokens "
                f"({(reasoning + server) / max(billed, 1):.1%} of the {billed:,} billed prompt tokens) on "
                f"{len(with_carried):,} of {len(rows):,} call(s) ({', '.join(parts)}; sized from the usage). "
                "Figures computed from the prompts (reusable, hit and lost tokens, cost without cache) leave them out")
