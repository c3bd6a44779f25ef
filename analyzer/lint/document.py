"""The JSON document of ``prefixcache lint --format json``, as typed values.

Every type's fields are exactly its JSON keys, in output order, with JSON-ready values
(fractions rounded to 6 decimals), so ``orjson.dumps(report)`` is the document byte
for byte. Token figures are tokens; ``prompt = reusable + lost + new`` per request,
session and run (lost includes ``ttl``: prefixes expired in idle gaps past ``--ttl``, keyed
``ttl`` in ``lost_tokens_by_code`` and per request ``ttl_tokens``) (usage-only requests, whose prompts were not logged, are counted
apart in ``usage_only``).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field, fields
from typing import Iterable, Iterator, Mapping

import orjson

from prefixcache.analyzer.lint.engine import RequestResult, Waterfall
from prefixcache.analyzer.lint.rules import Finding
from prefixcache.analyzer.lint.tenants import DivergenceBucket, GroupFigures
from prefixcache.analyzer.prepare.inspect import SkippedRecord

#: Decimals of every fraction in the document.
DIGITS = 6


@dataclass(frozen=True, slots=True)
class UsageOnlyFigures:
    """Requests whose prompts were not logged: how many, and the prompt and cached tokens
    the provider reported for them (cached: None when none reports it)."""

    requests: int
    reported_prompt_tokens: int
    reported_cached_tokens: int | None
    reported_cached_fraction: float | None


@dataclass(frozen=True, slots=True)
class WaterfallFigures:
    """Totals over requests (tokens): prompt = reusable + lost + new; lost tokens and
    findings by rule code; ``reusable_fraction`` None when no prompt was logged."""

    requests: int
    prompt_tokens: int
    reusable_tokens: int
    reusable_fraction: float | None
    reusable_block_tokens: int
    new_tokens: int
    lost_tokens: int
    lost_tokens_by_code: dict[str, int]
    findings_by_code: dict[str, int]
    usage_only: UsageOnlyFigures


@dataclass(frozen=True, slots=True)
class LintSummary(WaterfallFigures):
    """The run's totals, then its session count, block size (tokens), finding count and
    findings by severity (``error``, ``warning``, ``info``)."""

    sessions: int
    block_size: int
    findings: int
    findings_by_severity: dict[str, int]


@dataclass(frozen=True, slots=True)
class SessionFigures:
    """One session's totals: its id, then the :class:`WaterfallFigures` fields."""

    session: str
    requests: int
    prompt_tokens: int
    reusable_tokens: int
    reusable_fraction: float | None
    reusable_block_tokens: int
    new_tokens: int
    lost_tokens: int
    lost_tokens_by_code: dict[str, int]
    findings_by_code: dict[str, int]
    usage_only: UsageOnlyFigures


@dataclass(frozen=True, slots=True)
class LintRequestRow:
    """One request's figures (:class:`~prefixcache.analyzer.lint.engine.RequestResult`
    without its findings, which the document lists apart): content figures are None for
    usage-only requests; ``shared_with`` / ``compared_with`` are ``[session, index]``;
    ``ttl_tokens``: the part of ``lost_tokens`` lost to ``ttl`` (``lost_code`` names the rest)."""

    session: str
    index: int
    source: str
    record: int
    model: str | None
    prompt_tokens: int | None
    reusable_tokens: int | None
    reusable_block_tokens: int | None
    new_tokens: int | None
    lost_tokens: int | None
    lost_code: str | None
    ttl_tokens: int | None
    shared_with: tuple[str, int] | None
    compared_with: tuple[str, int] | None
    exact: bool | None
    line: int | None
    usage_only: bool
    reported_prompt_tokens: int | None
    reported_cached_tokens: int | None
    reusable_fraction: float | None


@dataclass(frozen=True, slots=True)
class LintReport:
    """The ``lint --format json`` document: run summary, sessions, requests, findings
    (:class:`~prefixcache.analyzer.lint.rules.Finding`), skipped input records, and what
    ``auto`` chose per model (``tokenizers``), and ``warnings``: one line per session whose
    prompt counts are not within 2% of the billed ones
    (:mod:`prefixcache.analyzer.prepare.size_check`); ``tenants`` and ``tags`` (figures per
    tenant and tag, empty when the log names none) and ``divergence`` (where prefixes broke,
    bucketed) from :mod:`prefixcache.analyzer.lint.tenants`."""

    summary: LintSummary
    sessions: list[SessionFigures]
    requests: list[LintRequestRow]
    findings: list[Finding]
    skipped: list[SkippedRecord]
    tokenizers: dict[str, str]
    warnings: list[str] = field(default_factory=list)
    tenants: list[GroupFigures] = field(default_factory=list)
    tags: list[GroupFigures] = field(default_factory=list)
    divergence: list[DivergenceBucket] = field(default_factory=list)


def _round(x: float | None) -> float | None:
    return None if x is None else round(x, DIGITS)


def usage_only_figures(w: Waterfall) -> UsageOnlyFigures:
    """The usage-only block of a waterfall."""
    return UsageOnlyFigures(w.usage_only_requests, w.usage_only_prompt_tokens,
                            w.usage_only_cached_tokens if w.usage_only_cached_reported else None,
                            _round(w.usage_only_cached_fraction))


def waterfall_figures(w: Waterfall) -> WaterfallFigures:
    """A waterfall's totals (codes sorted)."""
    return WaterfallFigures(
        requests=w.requests, prompt_tokens=w.prompt_tokens, reusable_tokens=w.reusable_tokens,
        reusable_fraction=_round(w.reusable_fraction) if w.prompt_tokens else None,
        reusable_block_tokens=w.reusable_block_tokens, new_tokens=w.new_tokens, lost_tokens=w.lost_tokens,
        lost_tokens_by_code=dict(sorted(w.lost_tokens_by_code.items())),
        findings_by_code=dict(sorted(w.findings_by_code.items())), usage_only=usage_only_figures(w),
    )


def _values(figures: WaterfallFigures) -> dict:
    return {f.name: getattr(figures, f.name) for f in fields(WaterfallFigures)}


def session_figures(name: str, w: Waterfall) -> SessionFigures:
    """One session's row."""
    return SessionFigures(session=name, **_values(waterfall_figures(w)))


def lint_summary(total: Waterfall, sessions: int, block_size: int, by_severity: Mapping[str, int]) -> LintSummary:
    """The run's summary: totals, then sessions, block size and findings by severity
    (``by_severity``: the reported findings counted by severity)."""
    counts = {s: by_severity.get(s, 0) for s in ("error", "warning", "info")}
    return LintSummary(**_values(waterfall_figures(total)), sessions=sessions, block_size=block_size,
                       findings=sum(by_severity.values()), findings_by_severity=counts)


def request_row(r: RequestResult) -> LintRequestRow:
    """One request's row (``reusable_fraction`` rounded)."""
    return LintRequestRow(
        session=r.session, index=r.index, source=r.source, record=r.record, model=r.model,
        prompt_tokens=r.prompt_tokens, reusable_tokens=r.reusable_tokens, reusable_block_tokens=r.reusable_block_tokens,
        new_tokens=r.new_tokens, lost_tokens=r.lost_tokens, lost_code=r.lost_code, ttl_tokens=r.ttl_tokens,
        shared_with=r.shared_with,
        compared_with=r.compared_with, exact=r.exact, line=r.line, usage_only=r.usage_only,
        reported_prompt_tokens=r.reported_prompt_tokens, reported_cached_tokens=r.reported_cached_tokens,
        reusable_fraction=_round(r.reusable_fraction),
    )


#: Bytes written at a time by :func:`json_chunks`.
CHUNK_BYTES = 1 << 20


def _items(items: Iterable[object]) -> Iterator[bytes]:
    """Each item as orjson's indented JSON at list depth 1 (4 spaces in), comma-joined."""
    first = True
    for item in items:
        text = orjson.dumps(item, option=orjson.OPT_INDENT_2).replace(b"\n", b"\n    ")
        yield (b"\n    " if first else b",\n    ") + text
        first = False
    if not first:
        yield b"\n  "


def json_chunks(head: LintReport, requests: Iterable[LintRequestRow | dict], findings: Iterable[Finding | dict],
                sessions: Iterable[SessionFigures] | None = None) -> Iterator[bytes]:
    """``orjson.dumps(report, option=OPT_INDENT_2)`` of ``head`` with its ``requests`` and
    ``findings`` lists replaced by these (and its ``sessions`` by ``sessions`` when given),
    produced piece by piece (chunks of about
    :data:`CHUNK_BYTES`) so the whole document is never held. ``head``'s own two lists
    are ignored; items may also be their JSON parsed back (dicts, :mod:`prefixcache.analyzer.lint.spill`).
    Byte for byte the document (orjson escapes newlines inside strings, so re-indenting
    an item's lines is exact)."""
    lists: list[tuple[bytes, Iterable]] = [(b"requests", requests), (b"findings", findings)]
    marks = {"requests": ["\x00requests"], "findings": ["\x00findings"]}
    if sessions is not None:
        lists.insert(0, (b"sessions", sessions))
        marks["sessions"] = ["\x00sessions"]
    marked = orjson.dumps(dataclasses.replace(head, **marks), option=orjson.OPT_INDENT_2)
    buf = bytearray()
    for name, items in lists:
        before, marked = marked.split(b'[\n    "\\u0000' + name + b'"\n  ]', 1)
        buf += before + b"["
        for piece in _items(items):
            buf += piece
            if len(buf) >= CHUNK_BYTES:
                yield bytes(buf)
                buf.clear()
        buf += b"]"
    yield bytes(buf + marked)
