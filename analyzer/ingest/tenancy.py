"""Which tenant and which tags a request names: the keys multi-tenant logs carry.

The tenant of a request is the first of :data:`TENANT_KEYS` in its ``extra`` (OpenAI
``user`` / ``safety_identifier``, Anthropic ``metadata.user_id``, LiteLLM's
``metadata.user_api_key_team_id`` / ``user_api_key_user_id`` / ``end_user``, then
``prompt_cache_key``); its tags are ``extra["tags"]``, ``metadata.tags`` or LiteLLM's
``request_tags`` (strings). Lint's per-tenant figures
(:mod:`prefixcache.analyzer.lint.tenants`) and simulate's per-tenant table both group by
these.
"""

from __future__ import annotations

from typing import Any

from prefixcache.analyzer.model import Request

#: Where a request names its tenant, in priority order (dotted: a key inside an object).
TENANT_KEYS = ("user", "safety_identifier", "metadata.user_id", "metadata.user_api_key_team_id",
               "metadata.user_api_key_user_id", "end_user", "prompt_cache_key")


def _get(extra: Any, dotted: str) -> Any:
    obj = extra
    for part in dotted.split("."):
        obj = obj.get(part) if isinstance(obj, dict) else None
    return obj


def tenant_in(extra: Any) -> str | None:
    """The tenant a request's ``extra`` names (first of :data:`TENANT_KEYS`), or None."""
    for key in TENANT_KEYS:
        v = _get(extra, key)
        if isinstance(v, (str, int)) and not isinstance(v, bool) and str(v):
            return str(v)
    return None


def tenant_of(request: Request) -> str | None:
    """The tenant a request names (first of :data:`TENANT_KEYS`), or None."""
    return tenant_in(request.extra)


def tags_of(request: Request) -> tuple[str, ...]:
    """The tags a request carries (``tags``, ``metadata.tags``, ``request_tags``), in order, deduplicated."""
    out: list[str] = []
    for key in ("tags", "metadata.tags", "request_tags"):
        v = _get(request.extra, key)
        for t in v if isinstance(v, list) else ():
            if isinstance(t, str) and t and t not in out:
                out.append(t)
    return tuple(out)
