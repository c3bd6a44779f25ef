"""Per-tenant and per-tag figures of a lint run, and where prefixes diverge.

A multi-tenant log (a gateway's, a server's) mixes users whose prompts share nothing
beyond a chat template. Sessions already keep them apart: requests are grouped by
``prompt_cache_key`` / ``user`` / ``metadata.user_id`` where the log names them
(:mod:`prefixcache.analyzer.ingest.sessions`), and conversations are inferred where it
does not, so one tenant's request is never "drift" of another's. Above sessions, this
module sums lint's figures **per tenant** and **per tag** — the reusable fraction is the
hit rate an unbounded prefix cache would reach; the reported cached fraction is what the
provider or engine did — and histograms the **divergence position**: the token at which a
request stopped sharing its session's previous prompt (the lost tokens' start), in
power-of-four buckets, as the peer tool prefixlens reports it.

The tenant of a request is the first of :data:`TENANT_KEYS` in its ``extra`` (OpenAI
``user`` / ``safety_identifier``, Anthropic ``metadata.user_id``, LiteLLM's
``metadata.user_api_key_team_id`` / ``user_api_key_user_id`` / ``end_user``, then
``prompt_cache_key``); its tags are ``extra["tags"]``, ``metadata.tags`` or LiteLLM's
``request_tags`` (strings). Requests that name none are under tenant ``None`` (shown as
``(none)``), and with no tenant at all :meth:`Tenants.figures` is empty.
"""

from __future__ import annotations

from dataclasses import dataclass

from prefixcache.analyzer.ingest.tenancy import TENANT_KEYS, tags_of, tenant_of
from prefixcache.analyzer.lint.engine import RequestResult
from prefixcache.analyzer.model import Request

__all__ = ["TENANT_KEYS", "BUCKETS", "tenant_of", "tags_of", "GroupFigures", "DivergenceBucket", "Tenants"]

#: Upper bounds (tokens, exclusive) of the divergence-position buckets; the last bucket is open.
BUCKETS = (256, 1024, 4096, 16384, 65536)

@dataclass(frozen=True, slots=True)
class GroupFigures:
    """One tenant's or tag's totals (tokens): requests, prompt tokens and reusable tokens of the
    requests whose prompts were logged, ``reusable_fraction`` (None without prompt tokens);
    ``reported_prompt_tokens`` / ``reported_cached_tokens`` over the requests reporting both,
    ``reported_cached_fraction`` (None when none does)."""

    name: str | None
    requests: int
    prompt_tokens: int
    reusable_tokens: int
    reusable_fraction: float | None
    reported_prompt_tokens: int
    reported_cached_tokens: int
    reported_cached_fraction: float | None


@dataclass(frozen=True, slots=True)
class DivergenceBucket:
    """Requests whose prefix broke at a token in ``[start, end)`` (``end`` None: open), and
    the tokens they lost."""

    start: int
    end: int | None
    requests: int
    lost_tokens: int


class _Sums:
    __slots__ = ("requests", "prompt", "reusable", "rep_prompt", "rep_cached")

    def __init__(self) -> None:
        self.requests = self.prompt = self.reusable = self.rep_prompt = self.rep_cached = 0

    def add(self, r: RequestResult) -> None:
        self.requests += 1
        if r.prompt_tokens is not None and r.reusable_tokens is not None:
            self.prompt += r.prompt_tokens
            self.reusable += r.reusable_tokens
        if r.reported_prompt_tokens is not None and r.reported_cached_tokens is not None:
            self.rep_prompt += r.reported_prompt_tokens
            self.rep_cached += r.reported_cached_tokens

    def figures(self, name: str | None) -> GroupFigures:
        return GroupFigures(name, self.requests, self.prompt, self.reusable,
                            round(self.reusable / self.prompt, 6) if self.prompt else None,
                            self.rep_prompt, self.rep_cached,
                            round(self.rep_cached / self.rep_prompt, 6) if self.rep_prompt else None)


class Tenants:
    """Accumulates :class:`GroupFigures` per tenant and per tag, and the divergence histogram,
    one (request, lint result) pair at a time (memory: one counter per tenant and tag)."""

    def __init__(self) -> None:
        self._tenants: dict[str | None, _Sums] = {}
        self._tags: dict[str, _Sums] = {}
        self._buckets = [[0, 0] for _ in range(len(BUCKETS) + 1)]

    def add(self, request: Request, result: RequestResult) -> None:
        """Count one request and its lint result."""
        self._tenants.setdefault(tenant_of(request), _Sums()).add(result)
        for tag in tags_of(request):
            self._tags.setdefault(tag, _Sums()).add(result)
        expired = result.ttl_tokens or 0  # an expired prefix did not diverge: not a divergence
        if result.lost_tokens and result.lost_tokens > expired and result.reusable_tokens is not None:
            at = result.reusable_tokens + expired
            k = next((i for i, b in enumerate(BUCKETS) if at < b), len(BUCKETS))
            self._buckets[k][0] += 1
            self._buckets[k][1] += result.lost_tokens - expired

    def figures(self) -> list[GroupFigures]:
        """Per tenant, most requests first; empty when no request names a tenant."""
        if set(self._tenants) <= {None}:
            return []
        return [s.figures(t) for t, s in sorted(self._tenants.items(), key=lambda kv: (-kv[1].requests, str(kv[0])))]

    def tag_figures(self) -> list[GroupFigures]:
        """Per tag, most requests first."""
        return [s.figures(t) for t, s in sorted(self._tags.items(), key=lambda kv: (-kv[1].requests, kv[0]))]

    def histogram(self) -> list[DivergenceBucket]:
        """Every bucket, in position order (zeros included, so charts line up)."""
        starts = (0, *BUCKETS)
        ends = (*BUCKETS, None)
        return [DivergenceBucket(s, e, n, lost) for s, e, (n, lost) in zip(starts, ends, self._buckets)]
