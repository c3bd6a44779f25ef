"""Prompt: one logged request as both replay stacks send it (token ids, clock, provenance), and how requests become prompts.

:func:`replayable` picks the requests that carry prompt text; :func:`to_prompts` turns
prepared requests into :class:`Prompt` values in the one arrival order
(:func:`prefixcache.analyzer.sequence.arrival_order`), each with its logical clock.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Iterable

from prefixcache.analyzer.errors import ConfigError
from prefixcache.analyzer.ingest import Ingest
from prefixcache.analyzer.model import Request
from prefixcache.analyzer.prepare import usage_only
from prefixcache.analyzer.sequence import arrival_order

if TYPE_CHECKING:
    from prefixcache.analyzer.prepare import Prepared


@dataclass(frozen=True, slots=True)
class Prompt:
    """One request as the engine sees it: token ids (bounded by ``--max-prompt-tokens``,
    truncated from the end so the prefix is kept), and where it came from.
    ``original_tokens`` is the length before truncation; ``dropped_opaque`` the
    hidden-prefix pseudo tokens (Claude Code) left out because no model can run them;
    ``now`` the logical clock (logged seconds, else the position); ``warnings`` the
    renderer's (content the chat template dropped, lint rule PC503)."""

    session: str
    request_index: int
    source: str
    record: int
    ids: tuple[int, ...]
    original_tokens: int
    dropped_opaque: int = 0
    now: float = 0.0
    warnings: tuple[str, ...] = ()

    @property
    def truncated(self) -> bool:
        """Cut by ``--max-prompt-tokens``."""
        return len(self.ids) < self.original_tokens


def to_prompts(prepared: Iterable["Prepared"], max_prompt_tokens: int | None = None) -> list[Prompt]:
    """Engine prompts of prepared requests in arrival order, each with its logical clock
    ``now`` (:func:`prefixcache.analyzer.sequence.arrival_order`); block-hash traces (no
    tokens) are left out."""
    staged = []
    for p in prepared:
        if p.tokens is None:
            continue
        ids = p.tokens.ids
        opaque = 0
        while opaque < len(ids) and ids[opaque] < 0:
            opaque += 1
        ids = ids[opaque:]
        kept = ids[:max_prompt_tokens] if max_prompt_tokens else ids
        r = p.request
        warned = tuple(p.rendered.warnings) if p.rendered is not None else ()
        prompt = Prompt(r.session, r.index, r.provenance.source, r.provenance.record, tuple(kept), len(ids), opaque,
                        warnings=warned)
        staged.append((r.timestamp, prompt))
    return [replace(prompt, now=now) for now, (_, prompt) in arrival_order(staged, lambda item: item[0])]


def replayable(ingest: Ingest, max_requests: int | None) -> list[Request]:
    """The requests with prompt text (the first ``max_requests``); ConfigError when there are
    none: block-hash traces and usage-only logs (prompts not logged) carry no prompt."""
    reqs = [r for r in ingest if r.trace is None and not usage_only(r)]
    if not reqs:
        skipped = ingest.summary.skipped
        first = (f"; {len(skipped)} record(s) skipped, first {skipped[0].source}:{skipped[0].record}: "
                 f"{skipped[0].reason}" if skipped else "")
        raise ConfigError("no replayable requests: replay needs logs with prompt text (block-hash traces and "
                          f"usage-only logs, whose prompts were not logged, carry none){first}")
    return reqs[:max_requests] if max_requests else reqs
