"""``prefixcache inspect``: every request's prompt tokens, tokens per segment and reported usage.

:class:`Inspection` streams one :class:`InspectRecord` per request (the JSON Lines
document of ``inspect --json``, one object a line) and ends with an
:class:`InspectSummaryLine`. The records shared with ``lint`` (skipped input records,
what ``auto`` chose per model) are defined here, the first layer that knows both.
"""

from __future__ import annotations

import dataclasses
from contextlib import nullcontext
from dataclasses import dataclass, field
from typing import IO, Iterable, Iterator, Mapping, Sequence

from prefixcache.analyzer.ingest import Ingest
from prefixcache.analyzer.model import Skipped
from prefixcache.analyzer.prepare.parallel import open_pool, parse_executor, prepare_stream
from prefixcache.analyzer.prepare.prepared import Prepared, Preparer
from prefixcache.analyzer.prepare.resolve import resolve
from prefixcache.analyzer.prepare.size_check import SizeCheck
from prefixcache.analyzer.redact import redact_message, redact_skipped
from prefixcache.analyzer.tokenize import get_tokenizer

#: How the tokenizer notes name requests that log no model.
NO_MODEL = "(no model name)"


@dataclass(frozen=True, slots=True)
class SkippedRecord:
    """One input record not turned into a request: file, record number (0 = the whole
    file), the field at fault, why, and whether it is an error (``bad``) or a note."""

    source: str
    record: int
    field: str
    reason: str
    bad: bool


def skipped_records(skipped: Iterable[Skipped]) -> list[SkippedRecord]:
    """The JSON form of the skipped records, in input order."""
    return [SkippedRecord(s.source, s.record, s.field, s.reason, s.bad) for s in skipped]


def check_specs(template: str = "auto", tokenizer: str = "auto") -> None:
    """Load an explicitly named tokenizer and compile an explicitly named template once, up
    front, so a bad spec (unknown name, missing file, template syntax error) raises its
    ConfigError before a command writes any output. ``auto`` (chosen per logged model) and
    the ``tokenizer`` template (the tokenizer's own) are checked when first used."""
    if tokenizer != "auto":
        get_tokenizer(tokenizer)  # cached: the run gets the same object
    if template not in ("auto", "tokenizer"):
        resolve(None, template=template, tokenizer=tokenizer)


def tokenizer_notes(notes: Mapping[str | None, str]) -> dict[str, str]:
    """What was chosen per logged model name (:attr:`Preparer.notes`), keyed for JSON
    (:data:`NO_MODEL` for requests without a model name)."""
    return {(k or NO_MODEL): v for k, v in notes.items()}


@dataclass(frozen=True, slots=True)
class SegmentTokens:
    """One rendered part of a prompt and its length (tokens)."""

    kind: str
    label: str
    tokens: int


@dataclass(frozen=True, slots=True)
class InspectRecord:
    """One request of ``inspect --json``: where it came from, its session and index, the
    tokenizer used (or ``block trace`` / ``reported usage`` when there is no text), prompt
    tokens (``exact`` False for approximate counts, None for a block trace: no tokenizer
    claim), the provider's reported prompt and cached tokens (None when not logged), tokens per segment, reader notes and renderer
    warnings, and ``reasoning_tokens``: encrypted reasoning in the prompt, sized from the
    usage of the calls that produced it (billed, not in ``prompt_tokens``; None when the
    prompt holds none)."""

    source: str
    record: int
    pointer: str
    session: str
    index: int
    format: str
    model: str | None
    tokenizer: str
    exact: bool | None
    prompt_tokens: int
    reported_prompt_tokens: int | None
    reported_cached_tokens: int | None
    segments: list[SegmentTokens]
    notes: list[str]
    warnings: list[str]
    reasoning_tokens: int | None = None

    def group_tokens(self, kind: str) -> int:
        """Tokens of the segments of one ``kind`` (``system``, ``tool``, ``message`` …)."""
        return sum(s.tokens for s in self.segments if s.kind == kind)


@dataclass(frozen=True, slots=True)
class InspectSummary:
    """The counts of one ``inspect`` pass: files, input records, requests, sessions,
    every skipped record, what ``auto`` chose per model, and the prompt-size check:
    ``prompt_size`` (one line over the calls with a reported count, None without any) and
    ``warnings`` (one line per session whose counts are off the billed ones by more than 2%,
    :mod:`prefixcache.analyzer.prepare.size_check`)."""

    files: int
    records: int
    requests: int
    sessions: int
    skipped: list[SkippedRecord]
    tokenizers: dict[str, str]
    prompt_size: str | None = None
    warnings: list[str] = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class InspectSummaryLine:
    """The last line of ``inspect --json``: ``{"summary": {...}}``."""

    summary: InspectSummary


def inspect_record(p: Prepared) -> InspectRecord:
    """The :class:`InspectRecord` of one prepared request."""
    r, usage, tokens = p.request, p.request.usage, p.tokens
    if tokens is not None:
        used, exact = tokens.tokenizer, bool(tokens.exact)
    else:
        # a block trace makes no tokenizer claim (its lengths are the log's); usage-only counts are the billed ones
        used, exact = ("reported usage (prompt not logged)", True) if p.usage_only else ("block trace", None)
    segments = [SegmentTokens(s.kind, s.label, s.end - s.start) for s in tokens.segments] if tokens else []
    return InspectRecord(
        source=r.provenance.source, record=r.provenance.record, pointer=r.provenance.pointer, session=r.session,
        index=r.index, format=r.format, model=r.model, tokenizer=used, exact=exact, prompt_tokens=p.prompt_tokens,
        reported_prompt_tokens=usage.prompt_tokens if usage else None,
        reported_cached_tokens=usage.cached_tokens if usage else None, segments=segments, notes=list(r.notes),
        warnings=list(p.rendered.warnings) if p.rendered is not None else [],
        reasoning_tokens=r.extra.get("opaque_reasoning_tokens") if isinstance(r.extra, dict) else None,
    )


@dataclass(frozen=True, slots=True)
class InspectOptions:
    """The options of ``inspect``: the log reader (``input_format``, ``auto`` = detect per
    file), the ``tokenizer`` and ``template`` specs of :class:`Preparer`, and ``redact``:
    quoted input in notes, warnings and skip reasons as lengths and keyed hashes
    (:func:`~prefixcache.analyzer.redact.redact_message`, keyed by ``redact_key``; inspect
    prints counts, never prompt text). ``executor``: where render and tokenize run (``local``, ``ray``,
    ``ray:ADDRESS``; :mod:`~prefixcache.analyzer.prepare.parallel`): the records are the same."""

    input_format: str = "auto"
    tokenizer: str = "auto"
    template: str = "auto"
    redact: bool = False
    redact_key: str | None = None
    executor: str = "local"


class Inspection:
    """One ``inspect`` pass over log ``paths``: iterate it for the records (streaming, in
    input order), then read :attr:`summary` and :attr:`skipped`.

    ``input_format`` is the log reader (``auto`` = detect per file), ``tokenizer`` and
    ``template`` the specs of :class:`Preparer` (explicit ones checked at once,
    :func:`check_specs`); ``stdin`` is what ``-`` reads; with ``redact`` the records'
    notes and warnings, the tokenizer notes and the skip reasons have their quoted input
    redacted (:func:`~prefixcache.analyzer.redact.redact_message`); ``executor`` (``local``, ``ray``,
    ``ray:ADDRESS``) renders and tokenizes on Ray workers, in input order all the same
    (:func:`~prefixcache.analyzer.prepare.parallel.prepare_stream`). Raises ConfigError
    (unknown reader, bad tokenizer or template, bad executor) and InputError (missing path).
    """

    def __init__(self, paths: Sequence[str], input_format: str = "auto", tokenizer: str = "auto",
                 template: str = "auto", stdin: IO[bytes] | None = None, redact: bool = False,
                 executor: str = "local") -> None:
        check_specs(template, tokenizer)
        self._executor = parse_executor(executor)
        self._specs = (template, tokenizer)
        self._ingest = Ingest(paths, format=input_format, stdin=stdin, require_requests=True)
        self._preparer = Preparer(template=template, tokenizer=tokenizer)
        self._redact = redact
        self._sizes = SizeCheck()

    def __iter__(self) -> Iterator[InspectRecord]:
        self._sizes = SizeCheck()
        with open_pool(self._executor, *self._specs) or nullcontext() as pool:
            for _, p in prepare_stream(((None, r) for r in self._ingest), lambda: self._preparer, pool):
                self._sizes.add(p)
                rec = inspect_record(p)
                yield dataclasses.replace(rec, notes=[redact_message(n) for n in rec.notes],
                                          warnings=[redact_message(w) for w in rec.warnings]) if self._redact else rec

    @property
    def skipped(self) -> tuple[Skipped, ...]:
        """Every input record of the last pass not turned into a request."""
        skipped = self._ingest.summary.skipped
        return redact_skipped(skipped) if self._redact else skipped

    @property
    def notes(self) -> dict[str | None, str]:
        """Per logged model name: what was chosen and whether counts are exact."""
        notes = self._preparer.notes
        return {k: redact_message(v) for k, v in notes.items()} if self._redact else notes

    @property
    def summary(self) -> InspectSummaryLine:
        """The summary line of the last pass (skip reasons redacted with ``redact``)."""
        s = self._ingest.summary
        return InspectSummaryLine(InspectSummary(s.files, s.records, s.requests, s.sessions,
                                                 skipped_records(self.skipped), tokenizer_notes(self._preparer.notes),
                                                 self._sizes.summary(), self._sizes.warnings()))
