"""Provider cache verdicts logged with a response: Anthropic ``diagnostics`` and OpenAI
``prompt_cache_diagnostics``.

* Anthropic (beta ``cache-diagnosis-2026-04-07``; the request names
  ``diagnostics.previous_message_id``): the response's ``diagnostics.cache_miss_reason``
  has a ``type`` — ``model_changed``, ``system_changed``, ``tools_changed``,
  ``messages_changed``, ``previous_message_not_found``, ``unavailable`` — and, for the
  ``*_changed`` ones, ``cache_missed_input_tokens`` (an estimate of the tokens after
  the divergence). A null reason means no divergence, or a comparison still running.
* OpenAI (GPT-5.6+, Responses API; the request sets
  ``prompt_cache_options.comparison_response_id``): the response's
  ``prompt_cache_diagnostics`` is a typed outcome (cache hit, cache miss with a reason,
  comparison not found, unavailable) with token estimates.

Both name a *section* of the request (model, system, tools, messages), never the byte,
token or template cause: that is what our rule codes and token offsets add. The reader
keeps the verdict as ``Request.extra["provider_diagnostics"]`` =
``{"provider", "reason", "missed_tokens"}`` (reason a string, tokens an int or None).
"""

from __future__ import annotations

from typing import Any


def _tokens(d: dict) -> int | None:
    """The first integer field whose name mentions tokens (an estimate of the missed prefix)."""
    for k, v in d.items():
        if "token" in k and isinstance(v, int) and not isinstance(v, bool):
            return v
    return None


def verdict(response: dict | None) -> dict[str, Any] | None:
    """The provider's cache verdict in a response body, or None when it carries none."""
    if not isinstance(response, dict):
        return None
    diag = response.get("diagnostics")
    if isinstance(diag, dict) and "cache_miss_reason" in diag:
        reason = diag.get("cache_miss_reason")
        if isinstance(reason, dict):
            return {"provider": "anthropic", "reason": str(reason.get("type") or "pending"),
                    "missed_tokens": _tokens(reason)}
        return {"provider": "anthropic", "reason": str(reason) if reason else "no_divergence", "missed_tokens": None}
    diag = response.get("prompt_cache_diagnostics")
    if isinstance(diag, dict):
        miss = diag.get("cache_miss_reason") or diag.get("reason")
        kind = diag.get("type") or diag.get("status") or ""
        if isinstance(miss, dict):
            return {"provider": "openai", "reason": str(miss.get("type") or kind or "cache_miss"),
                    "missed_tokens": _tokens(miss) or _tokens(diag)}
        return {"provider": "openai", "reason": str(miss or kind or "unknown"), "missed_tokens": _tokens(diag)}
    return None
