"""Session grouping: which requests belong to one conversation, and in what order.

Rules, first match wins (documented in docs/formats.md, "Sessions"):

1. **Explicit.** A reader that knows the session (Claude Code ``sessionId``, a
   Codex rollout, one trajectory file) sets ``Request.session``; it is kept.
2. **Routing keys.** Else ``extra["prompt_cache_key"]`` names the session: equal
   key ⇒ same session. A user (``extra["user"]``, ``extra["metadata"]["user_id"]``:
   a tenant, who holds many conversations) scopes rule 4 instead: its requests chain
   only with that user's, so two users never share a session and one user's two
   conversations are two sessions (a user's requests without messages: one session).
3. **No messages.** A request without messages (usage-only logs) joins one
   session per input file.
4. **Message-prefix chaining.** Else the request's non-system messages are
   compared with the latest request of every open chained session, by the loose
   :func:`~prefixcache.analyzer.identity.chaining_key` (role, whitespace-collapsed
   text, tool-call ids and names, ``tool_call_id``; *not* system prompts, tool-call
   arguments or ``cache_control``, which are exactly the bytes that drift between
   calls of one conversation). Candidates and their score (messages matched):

   * *prefix*: the request starts with the same messages as that latest request
     (common leading run ≥ 1; the whole of it = an append-only extension);
   * *sliding window*: the request's first message sits at position k > 0 of
     that latest request and the run matches from there (≥ 2 messages, or up to
     its end) — the client dropped the oldest turns.

   The best score wins (ties: extension, then prefix, then sliding; then the
   most recently active session), among the :data:`MAX_CANDIDATES` most recently
   active candidates. A request that is a *strict prefix* of the
   latest request re-sends less than the conversation already did: that is a new
   run of the same task, so it starts a new session. No candidate ⇒ new session.

   Chaining looks only inside one *scope*: the input file, so separate log files
   are separate conversations even when they hold the same messages; files that
   hold one call each (a single JSON document, OpenHands ``log_completions``)
   share the scope of their directory.

Session ids are ``<file stem>#<n>`` (``n`` counts sessions first seen in files of
that stem, from 1; ``stdin#n`` for ``-``); explicit ids are kept as given.
``Request.index`` is the 0-based arrival position inside the session.
"""

from __future__ import annotations

import dataclasses
from itertools import islice
from pathlib import Path
from typing import Any

from prefixcache.analyzer.identity import chaining_key
from prefixcache.analyzer.model import Request

#: Extra keys that name a session, in priority order (``metadata`` is Anthropic's object).
SESSION_KEYS = ("prompt_cache_key", "user", "metadata.user_id")
#: Chaining compares a request with at most this many recently active candidate sessions,
#: so many runs of one task (same first message) cost O(1) per request, not O(sessions).
MAX_CANDIDATES = 64


def routing_key(extra: Any) -> tuple[str, str] | None:
    """(key name, value) of the first session-naming routing key in ``extra``."""
    if not isinstance(extra, dict):
        return None
    for name in SESSION_KEYS:
        obj: Any = extra
        for part in name.split("."):
            obj = obj.get(part) if isinstance(obj, dict) else None
        if isinstance(obj, (str, int)) and not isinstance(obj, bool) and str(obj):
            return name, str(obj)
    return None


def _stem(source: str) -> str:
    return "stdin" if source == "-" else (Path(source).stem or source)


@dataclasses.dataclass
class _Chain:
    sid: str
    scope: str
    keys: tuple[int, ...]
    last_seen: int


class SessionGrouper:
    """Assigns ``session`` and ``index`` to requests in arrival order (streaming).

    State is per open session: the message keys of its latest request only, so
    memory grows with sessions, not with requests.
    """

    def __init__(self) -> None:
        self._count: dict[str, int] = {}   # requests per session id (next index)
        self._stems: dict[str, int] = {}   # sessions per file stem
        self._named: dict[tuple[str, str], str] = {}  # routing key / file → session id
        self._chains: dict[str, _Chain] = {}
        # (scope, message key) → sessions whose latest request holds it, least recently active first
        self._where: dict[tuple[str, int], dict[str, None]] = {}
        self._clock = 0

    @property
    def sessions(self) -> int:
        """Number of distinct sessions seen so far."""
        return len(self._count)

    def _new_id(self, source: str) -> str:
        stem = _stem(source)
        n = self._stems.get(stem, 0) + 1
        self._stems[stem] = n
        return f"{stem}#{n}"

    def assign(self, req: Request, scope: str | None = None) -> Request:
        """The request with its session id, index and (when inferred) a note saying how.

        ``scope`` bounds message-prefix chaining (default: the request's file).
        """
        note = ""
        if req.session:
            sid = req.session
        elif (key := routing_key(req.extra)) is not None and (key[0] == "prompt_cache_key" or not req.messages):
            sid = self._named.get(key) or self._named.setdefault(key, self._new_id(req.provenance.source))
            note = f"session from {key[0]}"
        elif not req.messages:
            key = ("file", req.provenance.source)
            sid = self._named.get(key) or self._named.setdefault(key, self._new_id(req.provenance.source))
            note = "session: one per file (no messages to chain)"
        else:  # a user (a tenant) holds many conversations: chain within it, never across users
            base = req.provenance.source if scope is None else scope
            sid, note = self._chain(req, base if key is None else f"{base}\0{key[0]}={key[1]}")
            note += f" within {key[0]} {key[1]!r}" if key is not None else ""
        index = self._count.get(sid, 0)
        self._count[sid] = index + 1
        notes = req.notes + ((note,) if note else ())
        return dataclasses.replace(req, session=sid, index=index, notes=notes)

    def _chain(self, req: Request, scope: str) -> tuple[str, str]:
        """Rule 4: join the best-matching chained session, or open a new one."""
        nonsys = [m for m in req.messages if m.role not in ("system", "developer")]
        keys = tuple(chaining_key(m) for m in (nonsys or req.messages))
        best: tuple[tuple[int, int, int], str, str] | None = None
        for sid in islice(reversed(self._where.get((scope, keys[0]), {})), MAX_CANDIDATES):
            chain = self._chains[sid]
            scored = _score(keys, chain.keys)
            if scored is None:
                continue
            (count, rank), how = scored
            cand = ((count, rank, chain.last_seen), sid, how)
            if best is None or cand[0] > best[0]:
                best = cand
        if best is None:
            sid, note = self._new_id(req.provenance.source), "session: new (no earlier request shares its first message)"
        else:
            sid, note = best[1], f"session: continues {best[1]} ({best[2]})"
        self._update(sid, scope, keys)
        return sid, note

    def _update(self, sid: str, scope: str, keys: tuple[int, ...]) -> None:
        old = self._chains.get(sid)
        if old is not None:
            for k in old.keys:
                holders = self._where.get((old.scope, k))
                if holders is not None:
                    holders.pop(sid, None)
                    if not holders:
                        del self._where[(old.scope, k)]
        self._clock += 1
        self._chains[sid] = _Chain(sid, scope, keys, self._clock)
        for k in keys:
            self._where.setdefault((scope, k), {})[sid] = None


def _score(new: tuple[int, ...], latest: tuple[int, ...]) -> tuple[tuple[int, int], str] | None:
    """((messages matched, kind rank), description) of ``new`` continuing ``latest``, or None."""
    lcp = 0
    for a, b in zip(new, latest):
        if a != b:
            break
        lcp += 1
    if lcp == len(latest):
        return (lcp, 3), "append-only extension"
    if lcp == len(new):
        return None  # strict prefix: a re-run of the same task, not a continuation
    if lcp:
        return (lcp, 2), f"shares {lcp} leading messages"
    for k in range(1, len(latest)):
        if latest[k] != new[0]:
            continue
        run = 0
        while run < len(new) and k + run < len(latest) and new[run] == latest[k + run]:
            run += 1
        if run >= 2 or k + run == len(latest):
            return (run, 1), f"sliding window, drops {k} leading messages"
    return None
