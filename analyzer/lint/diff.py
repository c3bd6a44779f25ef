"""``prefixcache diff``: two rendered prompts of one log around their first differing token.

The script every user writes before believing a lint finding: render and tokenize both
requests exactly as lint does (:class:`~prefixcache.analyzer.prepare.Preparer`, the same
template and tokenizer resolution), find the first differing token ``t`` (the shared
token prefix, :func:`~prefixcache.analyzer.sequence.common_prefix_len`) and the first
differing character, and map both to the request's part and JSON path
(:func:`~prefixcache.analyzer.lint.locate.locate`). :func:`diff_requests` returns the
typed :class:`DiffReport` (``orjson.dumps(report)`` is ``diff --json``).

Token text is each id decoded alone (a token that splits a multi-byte character shows
the replacement character); pseudo ids of a hidden prefix (negative) show as
``<hidden>``.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import IO, Sequence

from prefixcache.analyzer.errors import ConfigError, InputError
from prefixcache.analyzer.ingest import Ingest, skipped_message
from prefixcache.analyzer.lint.locate import locate
from prefixcache.analyzer.lint.rules import RULES, PairContext, classify
from prefixcache.analyzer.model import Request
from prefixcache.analyzer.prepare import Prepared, Preparer
from prefixcache.analyzer.redact import redact_message, redact_text
from prefixcache.analyzer.sequence import common_prefix_len


@dataclass(frozen=True, slots=True)
class TokenCell:
    """One token of the window: its ``position`` in the prompt, ``id`` and decoded ``text``."""

    position: int
    id: int
    text: str


@dataclass(frozen=True, slots=True)
class PromptSide:
    """One of the two prompts at the divergence: which request (session, index, log file
    and record), its length (tokens), the part holding the first differing character
    (``segment``) and its ``json_path`` in the logged record, the rendered text just
    before and after that character, and the tokens of the window."""

    session: str
    index: int
    source: str
    record: int
    prompt_tokens: int
    segment: str
    json_path: str
    text_before: str
    text_after: str
    tokens: list[TokenCell]


@dataclass(frozen=True, slots=True)
class DiffReport:
    """The ``diff --json`` document: the request and the one it is compared against, the
    shared token prefix (= the first differing token; tokens), the first differing
    character of the rendered texts (None when the prompts are identical), whether they
    are, the tokenizer used (``exact`` False when approximate), and what lint's pair rules
    say of the divergence (``cause_code`` and its message; None when identical or when
    no rule applies, e.g. the earlier prompt ended in a generation prompt). ``extends`` is
    True when the earlier prompt's tokens are a prefix of this one's (the prompt only grew);
    ``broke`` is True when cached tokens are lost: the prompts differ and a pair rule names a
    cause (a divergence inside the earlier prompt's own generation prompt, which lint ignores,
    is not a break)."""

    request: PromptSide
    against: PromptSide
    shared_tokens: int
    first_diff_char: int | None
    identical: bool
    tokenizer: str
    exact: bool
    cause_code: str | None
    cause: str | None
    extends: bool = False
    broke: bool = False


def _redacted_side(side: PromptSide) -> PromptSide:
    return replace(side, text_before=redact_text(side.text_before), text_after=redact_text(side.text_after),
                   tokens=[])


def redacted(report: DiffReport) -> DiffReport:
    """``report`` without prompt text (``diff --redact``): texts as lengths and keyed hashes
    (:func:`~prefixcache.analyzer.redact.redact_text`), no token cells (ids decode back to
    the text with a public tokenizer), quoted values in the cause redacted."""
    return replace(report, request=_redacted_side(report.request), against=_redacted_side(report.against),
                   cause=redact_message(report.cause) if report.cause else None)


def parse_request(spec: str, what: str = "--request") -> tuple[str | None, int]:
    """``SESSION:K`` (or ``K`` alone) → (session or None, K); ConfigError when K is not an index >= 0."""
    session, sep, k = spec.rpartition(":")
    try:
        index = int(k)
    except ValueError:
        raise ConfigError(f"{what} {spec}: expected SESSION:K (K a request index, 0 = the first)") from None
    if index < 0:
        raise ConfigError(f"{what} {spec}: the request index must be >= 0")
    return (session if sep else None), index


def _pick(requests: Sequence[Request], session: str | None, index: int, what: str) -> Request:
    sessions = list(dict.fromkeys(r.session for r in requests))
    if session is None:
        if len(sessions) != 1:
            raise ConfigError(f"{what}: the log has {len(sessions)} sessions; name one as SESSION:K")
        session = sessions[0]
    for r in requests:
        if r.session == session and r.index == index:
            return r
    if session not in sessions:
        shown = ", ".join(sessions[:5]) + (" ..." if len(sessions) > 5 else "")
        raise ConfigError(f"{what}: no session {session!r} in the log (sessions: {shown})")
    n = sum(r.session == session for r in requests)
    raise ConfigError(f"{what}: session {session} has requests 0 to {n - 1}, not {index}")


def _side(p: Prepared, other: Prepared, token: int, preparer: Preparer, window: int, width: int) -> PromptSide:
    req = p.request
    decode = preparer.pipeline(req.model).tokenizer.decode
    div = locate(req, p.rendered, p.tokens, other.rendered, other.tokens, token, width=width)
    ids = p.tokens.ids
    lo, hi = max(0, token - window), min(len(ids), token + window)
    cells = [TokenCell(i, ids[i], "<hidden>" if ids[i] < 0 else decode([ids[i]])) for i in range(lo, hi)]
    return PromptSide(req.session, req.index, req.provenance.source, req.provenance.record, len(ids), div.segment,
                      div.json_path, div.before, div.after, cells)


@dataclass(frozen=True, slots=True)
class DiffOptions:
    """The options of ``diff``: ``request`` (``SESSION:K``, or ``K`` when the log has one
    session), ``against`` (``K'`` or ``SESSION:K'``; None: the previous request of the
    session), the log reader, template and tokenizer specs, ``window`` (tokens listed either
    side of the first difference) and ``width`` (characters of text either side), and
    ``redact``: the :func:`redacted` report, hashed with ``redact_key`` (None: a random key
    per run)."""

    request: str
    against: str | None = None
    input_format: str = "auto"
    template: str = "auto"
    tokenizer: str = "auto"
    window: int = 8
    width: int = 80
    redact: bool = False
    redact_key: str | None = None


def diff_requests(paths: Sequence[str], request: str, against: str | None = None, input_format: str = "auto",
                  template: str = "auto", tokenizer: str = "auto", window: int = 8, width: int = 80,
                  stdin: IO[bytes] | None = None, redact: bool = False) -> DiffReport:
    """Compare request ``request`` (``SESSION:K``) with ``against`` (``K'`` or ``SESSION:K'``;
    default the previous request of the same session). ``window`` tokens either side of
    the divergence are listed, ``width`` characters of text; ``redact`` gives the
    :func:`redacted` report (no prompt text). Raises ConfigError for a bad
    or unknown request, a request with no prompt text (block traces, usage-only records)
    and bad specs; InputError for unreadable logs."""
    if window < 1 or width < 1:
        raise ConfigError("--window and --width must be >= 1")
    session, k = parse_request(request)
    ingest = Ingest(paths, format=input_format, stdin=stdin)
    requests = list(ingest)
    if not requests:
        skipped = ingest.summary.skipped
        why = f" ({skipped_message(skipped[0])})" if skipped else ""
        raise InputError(f"no requests in the log{why}", paths[0] if paths else "-", 0)
    a = _pick(requests, session, k, "--request")
    if against is None:
        if k == 0:
            raise ConfigError(f"--request {request}: the first request of its session has no previous one; "
                              "give --against K")
        b = _pick(requests, a.session, k - 1, "--against")
    else:
        s2, k2 = parse_request(against, "--against")
        b = _pick(requests, s2 or a.session, k2, "--against")
    preparer = Preparer(template=template, tokenizer=tokenizer)
    pb, pa = preparer.prepare(b), preparer.prepare(a)
    report = diff_prepared(pa, pb, preparer, window, width)
    return redacted(report) if redact else report


def diff_prepared(pa: Prepared, pb: Prepared, preparer: Preparer, window: int = 8, width: int = 80) -> DiffReport:
    """The :class:`DiffReport` of request ``pa`` against ``pb``, both prepared by ``preparer``
    (whose tokenizers decode the window's tokens): what :func:`diff_requests` returns once it
    has picked and prepared the two requests. ConfigError when either has no prompt text."""
    a = pa.request
    for p in (pa, pb):
        if p.tokens is None or p.rendered is None:
            raise ConfigError(f"session {p.request.session} request {p.request.index}: no prompt text in the log "
                              "(a block-hash trace or usage-only record); nothing to diff")
    t = common_prefix_len(pa.tokens.ids, pb.tokens.ids)
    char = common_prefix_len(pa.rendered.text, pb.rendered.text)
    identical = pa.tokens.ids == pb.tokens.ids and pa.rendered.text == pb.rendered.text
    this, that = _side(pa, pb, t, preparer, window, width), _side(pb, pa, t, preparer, window, width)
    found = [] if identical else classify(PairContext(pa, pb, locate(a, pa.rendered, pa.tokens, pb.rendered,
                                                                     pb.tokens, t)), RULES)
    cause = found[0] if found else None
    if cause is not None and cause.json_path:  # the rule knows the field (tool-call arguments): same in both
        this, that = (replace(side, json_path=cause.json_path) if side.json_path and
                      cause.json_path.startswith(side.json_path + ".") else side for side in (this, that))
    return DiffReport(
        request=this, against=that,
        shared_tokens=t, first_diff_char=None if identical else char, identical=identical,
        tokenizer=pa.tokens.tokenizer, exact=pa.tokens.exact and pb.tokens.exact,
        cause_code=cause.code if cause else None, cause=cause.message if cause else None,
        extends=t == len(pb.tokens.ids) and not identical, broke=cause is not None,
    )
