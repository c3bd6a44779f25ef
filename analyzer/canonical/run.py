"""``prefixcache canonicalize`` as library calls, and its JSON report.

:func:`canonicalize_paths` reads and canonicalizes an input (one
:class:`~prefixcache.analyzer.canonical.rewrite.SessionMemory` per session); the
:class:`CanonicalRun` it returns writes the canonical requests and builds the report:
transformations (applied and reported) and reusable tokens before / after per
session and in total (an ideal prefix cache at token granularity,
:func:`~prefixcache.analyzer.cache.simulate.reuse.reuse`). ``orjson.dumps(report)`` is the
``canonicalize --json`` document.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from io import BytesIO
from typing import IO, Callable, Sequence

from prefixcache.analyzer.cache.simulate.reuse import Reuse, reuse, reuse_with_probes
from prefixcache.analyzer.canonical.document import (
    BeforeAfter, CanonicalizeReport, MinimumEffect, ReuseFigures, SessionReuse, TransformationRow,
)
from prefixcache.analyzer.canonical.causes import (
    VOLATILE_MOVES, canonicalize_explained, lint_and_reuse, lint_codes, lint_results,
)
from prefixcache.analyzer.canonical.review import ChangeSet, change_sets, rewritten
from prefixcache.analyzer.canonical.rewrite import APPLIED_CODES, CanonicalOptions, Canonicalized
from prefixcache.analyzer.canonical.writers import write_requests
from prefixcache.analyzer.errors import ConfigError
from prefixcache.analyzer.ingest import Ingest
from prefixcache.analyzer.lint.rules.provider import provider_minimum
from prefixcache.analyzer.model import Request, Skipped
from prefixcache.analyzer.prepare import usage_only
from prefixcache.analyzer.prepare.inspect import check_specs
from prefixcache.analyzer.redact import redact_message, redact_skipped, redact_text


@dataclass(frozen=True, slots=True)
class CanonicalizeOptions:
    """The options of ``canonicalize``: ``rules`` (which rewrites apply,
    :class:`~prefixcache.analyzer.canonical.rewrite.CanonicalOptions`), the log reader,
    template and tokenizer specs (of the reuse figures), ``out`` (where the rewritten log
    goes, as the report names it; ``-`` = stdout), ``to`` (``openai``: write OpenAI Chat
    JSONL; None: the input format) and ``redact``: the report's quoted values (moved
    timestamps, ids, tool names) and the skip reasons as lengths and keyed hashes under
    ``redact_key`` (None: a random key per run). The rewritten log itself is written as is,
    so ``redact`` with ``out`` ``-`` raises ConfigError (it would print prompt text)."""

    rules: CanonicalOptions = field(default_factory=CanonicalOptions)
    input_format: str = "auto"
    template: str = "auto"
    tokenizer: str = "auto"
    out: str = "-"
    to: str | None = None
    redact: bool = False
    redact_key: str | None = None

    def __post_init__(self) -> None:
        if self.out == "-" and self.redact:
            raise ConfigError("--redact keeps prompt text off the terminal, but -o - would print the rewritten log: "
                              "give --out a file")


def parse_codes(text: str | None, option: str) -> frozenset[str] | None:
    """``"PC201,PC203"`` → codes (None for no option); ConfigError for a code canonicalize
    does not apply (reported codes included: they are never rewritten)."""
    if text is None:
        return None
    codes = frozenset(c.strip().upper() for c in text.split(",") if c.strip())
    unknown = sorted(codes - set(APPLIED_CODES))
    if unknown:
        raise ConfigError(f"{option} {','.join(unknown)}: canonicalize applies only {', '.join(APPLIED_CODES)} "
                          "(every other cause lint names is reported, never rewritten)")
    return codes


def _figures(r: Reuse) -> ReuseFigures:
    return ReuseFigures(r.requests, r.prompt_tokens, r.reusable_tokens)


def session_rows(results: Sequence[Canonicalized], before: Sequence[Reuse], after: Sequence[Reuse]
                 ) -> tuple[list[SessionReuse], BeforeAfter]:
    """Reuse before/after summed per (source, session), in first-seen order, and in total."""
    zero = Reuse(0, 0, 0)
    rows: dict[tuple[str, str], tuple[Reuse, Reuse]] = {}
    for c, b, a in zip(results, before, after):
        key = (c.original.provenance.source, c.original.session)
        pb, pa = rows.get(key, (zero, zero))
        rows[key] = (pb + b, pa + a)
    sessions = [SessionReuse(src, sess, _figures(b), _figures(a)) for (src, sess), (b, a) in rows.items()]
    return sessions, BeforeAfter(_figures(sum(before, zero)), _figures(sum(after, zero)))


def minimum_effects(results: Sequence[Canonicalized], before: Sequence[Reuse], after: Sequence[Reuse]
                    ) -> list[MinimumEffect]:
    """Requests whose rewrite crossed their hosted provider's minimum cacheable prompt length
    (self-hosted and unknown models have none). Only a request that a rewrite changed: a
    request left as it was whose count drops only because the written format cannot carry
    part of the prompt (Claude Code's hidden system prompt in ``--to openai``) is the
    in-memory note's, not a rewrite's effect."""
    out = []
    for c, b, a in zip(results, before, after):
        r = c.original
        if not any(t.applied for t in c.transformations):
            continue
        found = provider_minimum(r.model)
        if found is None or (b.prompt_tokens >= found[0]) == (a.prompt_tokens >= found[0]):
            continue
        out.append(MinimumEffect(r.provenance.source, r.provenance.record, r.session, r.index, r.model or "",
                                 found[1], found[0], b.prompt_tokens, a.prompt_tokens,
                                 "below" if a.prompt_tokens < found[0] else "above"))
    return out


def transformation_rows(results: Sequence[Canonicalized], before: Sequence[Reuse], memory: Sequence[Reuse],
                        changes: Sequence[ChangeSet]) -> list[TransformationRow]:
    """One row per transformation (input order). An applied row carries its request's figure
    (``request_recovered_tokens``) and, on the first row of its rule in the request, the
    rule's own figure (``recovered_tokens``, from the change set's :class:`RuleChange`; 0 on
    the rule's other rows, so rows sum per request to the rules' part)."""
    by_place = {(ch.source, ch.record, ch.session, ch.index): ch for ch in changes}
    rows = []
    for c, b, m in zip(results, before, memory):
        o = c.original
        ch = by_place.get((o.provenance.source, o.provenance.record, o.session, o.index))
        per_rule = {r.code: r.recovered_tokens for r in ch.rules} if ch is not None else {}
        for t in c.transformations:
            rows.append(TransformationRow(o.provenance.source, o.provenance.record, o.session, o.index, t.code,
                                          t.applied, t.description, t.json_path,
                                          m.reusable_tokens - b.reusable_tokens if t.applied else 0,
                                          per_rule.pop(t.code, 0) if t.applied else 0))
    return rows


def with_lint_codes(rows: list[TransformationRow], changes: list[ChangeSet], codes: dict[tuple[str, int, str], str]
                    ) -> tuple[list[TransformationRow], list[ChangeSet]]:
    """``rows`` and ``changes`` with each applied rewrite named by lint's code for the break it
    repairs (``codes``: :func:`~.causes.lint_codes`), the rewrite's own code kept in the words."""
    if not codes:
        return rows, changes

    def code(session: str, index: int, c: str) -> str:
        return codes.get((session, index, c), c)

    rows = [replace(r, code=code(r.session, r.index, r.code),
                    description=f"{r.description} (the same in every request of its session: the prefix sessions "
                                f"share breaks, lint's {code(r.session, r.index, r.code)}; moved as {r.code} is)")
            if r.applied and code(r.session, r.index, r.code) != r.code else r for r in rows]
    changes = [replace(ch, codes=list(dict.fromkeys(code(ch.session, ch.index, c) for c in ch.codes)),
                       rules=[replace(rc, code=", ".join(code(ch.session, ch.index, c.strip())
                                                         for c in rc.code.split(","))) for rc in ch.rules])
               for ch in changes]
    return rows, changes


def _redact_diff(diff: list[str]) -> list[str]:
    return [ln if ln.startswith(("---", "+++", "@@")) else ln[:1] + redact_text(ln[1:]) for ln in diff]


def redact_change_set(ch: ChangeSet) -> ChangeSet:
    """``ch`` with every diff line's text (its own and its rules') as a length and keyed hash."""
    return replace(ch, diff=_redact_diff(ch.diff), rules=[replace(r, diff=_redact_diff(r.diff)) for r in ch.rules])


@dataclass(frozen=True, slots=True)
class CanonicalRun:
    """An input read and canonicalized: the logged requests, each one's result, the
    skipped input records (reasons redacted with ``redact``), the template / tokenizer specs
    of the reuse figures, whether the report is redacted, and ``before``: the requests' own
    reuse figures (:func:`~prefixcache.analyzer.cache.simulate.reuse.reuse`, one per request)
    when a pass that prepared them already has them (``prefixcache report``'s lint pass), else
    None (computed here)."""

    requests: tuple[Request, ...]
    results: tuple[Canonicalized, ...]
    skipped: tuple[Skipped, ...]
    template: str = "auto"
    tokenizer: str = "auto"
    redact: bool = False
    before: tuple[Reuse, ...] | None = None

    def write(self, out: IO[bytes], to: str | None = None) -> int:
        """Write the canonical requests (input format, or OpenAI Chat with ``to="openai"``);
        returns how many. ConfigError when the input held no request, or for a format
        that cannot be written."""
        if not self.requests:
            raise ConfigError("no requests to canonicalize in the input")
        return write_requests([c.request for c in self.results], out, to)

    def report(self, out: str, written: int, data: bytes | None = None) -> CanonicalizeReport:
        """The report; with :attr:`redact` the descriptions' quoted values are lengths and keyed hashes.

        ``data`` is what was written (the bytes of the output). The ``after`` figures are
        then those of the written log as read back, never of the requests in memory (a
        format that cannot carry a part of the prompt, e.g. the hidden prefix of a Claude
        Code log written ``--to openai``, must not be credited with it); ``verified`` is
        ``prefixcache lint``'s own figure of the written log, which must equal ``after``
        (``agrees``); ``in_memory`` the figure of the rewritten requests before writing.
        Without ``data`` the three are the in-memory figure. ``verified_by`` (the report's label of
        ``verified``): ``none`` without ``data``, ``unwritten`` when nothing was ``written`` (the
        bytes were linted in memory: ``--review``, ``report``), else ``written``."""
        before = self.before if self.before is not None else reuse(self.requests, self.template, self.tokenizer)
        memory, probes = reuse_with_probes([c.request for c in self.results], rewritten(self.results),
                                           self.template, self.tokenizer)
        after, verified = memory, _figures(sum(memory, Reuse(0, 0, 0)))
        if data is not None:
            back = list(Ingest(["-"], stdin=BytesIO(data)))
            if len(back) == len(self.results):
                linted, after = lint_and_reuse(back, self.template, self.tokenizer)
            else:
                linted = lint_results(back, self.template, self.tokenizer)
            lint = linted.values()
            verified = ReuseFigures(len(lint), sum(r.prompt_tokens or 0 for r in lint),
                                    sum(r.reusable_tokens or 0 for r in lint))
        sessions, total = session_rows(self.results, before, after)
        changes = change_sets(self.results, before, memory, probes)
        rows = transformation_rows(self.results, before, memory, changes)
        moved = any(t.applied and t.code in VOLATILE_MOVES for c in self.results for t in c.transformations)
        if moved and len({r.session for r in self.requests}) > 1:  # PC602 needs two sessions: else no lint pass
            rows, changes = with_lint_codes(rows, changes, lint_codes(self.results, lint_results(
                self.requests, self.template, self.tokenizer)))
        if self.redact:
            rows = [replace(row, description=redact_message(row.description)) for row in rows]
            changes = [redact_change_set(ch) for ch in changes]
        in_memory = _figures(sum(memory, Reuse(0, 0, 0)))
        return CanonicalizeReport(out, written, rows, sessions, total, minimum_effects(self.results, before, after),
                                  in_memory, verified, verified == total.after, changes,
                                  "none" if data is None else "written" if written else "unwritten")


def canonicalize_paths(paths: Sequence[str], options: CanonicalOptions = CanonicalOptions(),
                       input_format: str = "auto", template: str = "auto", tokenizer: str = "auto",
                       stdin: IO[bytes] | None = None, redact: bool = False,
                       before: Callable[[Sequence[Request]], Sequence[Reuse] | None] | None = None) -> CanonicalRun:
    """Read ``paths`` (``-`` reads ``stdin``) and canonicalize every request (``redact``: the
    run's skip reasons and report redacted, see :attr:`CanonicalRun.redact`).

    Explicit template / tokenizer specs are checked first, so a bad one fails before
    anything is written. What the rewrite does not repair is reported with lint's own
    code (:func:`~prefixcache.analyzer.canonical.causes.with_lint_causes`). Raises ConfigError (bad spec or reader; an input whose prompts
    were not logged, :func:`~prefixcache.analyzer.prepare.usage_only`, as block traces are
    refused when written) and InputError (missing path). ``before``: given the requests read,
    their reuse figures if the caller already has them (:attr:`CanonicalRun.before`), or None.
    """
    check_specs(template, tokenizer)
    ingest = Ingest(paths, format=input_format, stdin=stdin, require_requests=True)
    requests = tuple(ingest)
    bare = next((r for r in requests if usage_only(r)), None)
    if bare is not None:
        raise ConfigError(f"{bare.provenance.source}: {bare.format} logs hold no prompt text to rewrite (the prompts "
                          "were not logged, only the provider's token counts)")
    skipped = redact_skipped(ingest.summary.skipped) if redact else ingest.summary.skipped
    results = canonicalize_explained(requests, options, template, tokenizer)
    known = before(requests) if before is not None else None
    return CanonicalRun(requests, tuple(results), skipped, template, tokenizer, redact,
                        tuple(known) if known is not None else None)
