"""Reports bounded by design: what a page embeds does not grow with the input.

``lint --json`` holds one row per request, per session and per finding; a 50 MB trace gives
hundreds of thousands of each, and a page that embeds them all (and prints a table row for
each) is tens of megabytes that no browser opens usefully. :func:`bound_lint` keeps

* the :data:`MAX_SESSIONS` sessions with the most requests (the session table), the rest
  summed into one row named ``(N other sessions)``;
* the :data:`MAX_FINDINGS` findings that lose the most tokens (ties in log order);
* the first :data:`MAX_SKIPPED` skipped records (the rest are counted);
* the request rows the page draws: the sessions charted (:data:`~.page.MAX_SESSION_CHARTS`,
  the largest), each sampled evenly to at most :data:`MAX_ROWS_PER_SESSION` rows (its first
  and last kept), and the rows of the findings kept;

and adds ``report_bounded``: per list, how many rows it had and how many are shown, how they
were chosen, and the distribution (:class:`~prefixcache.analyzer.stats.Distribution`) of
every request's prompt tokens and reusable fraction, so the page can say what it left out.
``summary`` is never touched: every headline figure is over all requests. A document within
every bound is returned as it is (without ``report_bounded``).

:func:`bound_simulate` samples the simulate document's per-call rows (``calls``) evenly to
:data:`MAX_CALLS` (its ``results``, the capacity rows the page plots, are never cut);
:func:`bound_replay` samples replay rows evenly per pass to :data:`MAX_REPLAY_ROWS` in all.
"""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

from prefixcache.analyzer.stats import Distribution

#: Sessions listed in the table.
MAX_SESSIONS = 200
#: Findings listed (largest lost tokens first).
MAX_FINDINGS = 200
#: Request rows kept per charted session (sampled evenly; first and last kept).
MAX_ROWS_PER_SESSION = 150
#: Skipped records listed (the first ones, in input order).
MAX_SKIPPED = 200
#: Rows of ``simulate --json``'s per-call list (``calls``) kept (sampled evenly).
MAX_CALLS = 300
#: Replay rows kept in all (sampled evenly per pass).
MAX_REPLAY_ROWS = 4000
#: Sessions whose turns are charted (the largest); :mod:`.page` charts this many.
CHARTED_SESSIONS = 12


def _sample(rows: list[Any], most: int) -> list[Any]:
    """At most ``most`` of ``rows``, evenly spaced, first and last kept, in order."""
    if len(rows) <= most:
        return rows
    step = (len(rows) - 1) / (most - 1)
    return [rows[round(i * step)] for i in range(most)]


def _other_sessions(rest: list[dict[str, Any]]) -> dict[str, Any]:
    """One session-table row summing ``rest`` (its name says how many sessions it stands for)."""
    row: dict[str, Any] = {"session": f"({len(rest):,} other sessions)"}
    for key in ("requests", "prompt_tokens", "reusable_tokens", "new_tokens", "lost_tokens"):
        row[key] = sum(s.get(key) or 0 for s in rest)
    by_code: dict[str, int] = {}
    for s in rest:
        for code, v in (s.get("lost_tokens_by_code") or {}).items():
            by_code[code] = by_code.get(code, 0) + v
    row["lost_tokens_by_code"] = dict(sorted(by_code.items()))
    return row


def bound_lint(doc: dict[str, Any]) -> dict[str, Any]:
    """``doc`` (a ``lint --json`` document) within the bounds of the module docstring; the same
    object when it is within them already. The result's ``report_bounded`` says, per list
    (``sessions``, ``findings``, ``requests``), ``{"total", "shown", "how"}``, and holds
    ``prompt_tokens`` / ``reusable_fraction``: the distribution over every request row."""
    requests, sessions, findings, skipped = doc["requests"], doc["sessions"], doc["findings"], doc["skipped"]
    by_session: dict[str, list[dict[str, Any]]] = {}
    for r in requests:
        if not r["usage_only"]:
            by_session.setdefault(r["session"], []).append(r)
    big = len(sessions) > MAX_SESSIONS or len(findings) > MAX_FINDINGS or any(
        len(rows) > MAX_ROWS_PER_SESSION for rows in by_session.values()) or len(requests) > (
        CHARTED_SESSIONS * MAX_ROWS_PER_SESSION + MAX_FINDINGS) or len(skipped) > MAX_SKIPPED
    if not big:
        return doc
    ranked = sorted(sessions, key=lambda s: -s["requests"])
    kept_sessions = ranked[:MAX_SESSIONS]
    if len(ranked) > MAX_SESSIONS:
        kept_sessions = [*kept_sessions, _other_sessions(ranked[MAX_SESSIONS:])]
    order = sorted(range(len(findings)), key=lambda i: (-(findings[i].get("lost_tokens") or 0), i))
    kept_findings = [findings[i] for i in sorted(order[:MAX_FINDINGS])]
    charted = sorted(by_session, key=lambda s: -len(by_session[s]))[:CHARTED_SESSIONS]
    keep = {id(r) for s in charted for r in _sample(by_session[s], MAX_ROWS_PER_SESSION)}
    wanted = {(f["session"], f["request"]) for f in kept_findings}
    kept_rows = [r for r in requests if id(r) in keep or (r["session"], r["index"]) in wanted]
    note = {
        "sessions": {"total": len(sessions), "shown": min(len(sessions), MAX_SESSIONS),
                     "how": f"the {MAX_SESSIONS} with the most requests; the others summed in one row"},
        "findings": {"total": len(findings), "shown": len(kept_findings),
                     "how": f"the {MAX_FINDINGS} that lose the most tokens, in log order"},
        "requests": {"total": len(requests), "shown": len(kept_rows),
                     "how": f"the {CHARTED_SESSIONS} largest sessions, each sampled evenly to at most "
                            f"{MAX_ROWS_PER_SESSION} requests, and the requests of the findings shown"},
        "skipped": {"total": len(skipped), "shown": min(len(skipped), MAX_SKIPPED),
                    "how": f"the first {MAX_SKIPPED}, in input order"},
        "prompt_tokens": asdict(Distribution.of(r["prompt_tokens"] for r in requests)),
        "reusable_fraction": asdict(Distribution.of(r.get("reusable_fraction") for r in requests)),
    }
    return {**doc, "sessions": kept_sessions, "findings": kept_findings, "requests": kept_rows,
            "skipped": skipped[:MAX_SKIPPED], "report_bounded": note}


def bound_simulate(doc: dict[str, Any] | None) -> dict[str, Any] | None:
    """``doc`` (a ``simulate --json`` document) with ``calls`` sampled evenly to :data:`MAX_CALLS`
    rows and ``report_bounded.calls`` = ``{"total", "shown", "how"}``; the same object when shorter."""
    calls = doc.get("calls") if doc else None
    if not isinstance(calls, list) or len(calls) <= MAX_CALLS:
        return doc
    kept = _sample(calls, MAX_CALLS)
    note = {"calls": {"total": len(calls), "shown": len(kept), "how": f"sampled evenly to {MAX_CALLS} rows"}}
    return {**doc, "calls": kept, "report_bounded": note}


def bound_replay(rows: list[dict[str, Any]] | None) -> tuple[list[dict[str, Any]] | None, dict[str, Any] | None]:
    """Replay rows sampled evenly per pass to :data:`MAX_REPLAY_ROWS` in all, and a note
    ``{"total", "shown", "how"}`` (None when nothing was left out)."""
    if not rows or len(rows) <= MAX_REPLAY_ROWS:
        return rows, None
    passes: dict[str, list[dict[str, Any]]] = {}
    for r in rows:
        passes.setdefault(r["pass_name"], []).append(r)
    each = max(2, MAX_REPLAY_ROWS // len(passes))
    kept = [r for p in passes.values() for r in _sample(p, each)]
    return kept, {"total": len(rows), "shown": len(kept), "how": f"each pass sampled evenly to at most {each} rows"}
