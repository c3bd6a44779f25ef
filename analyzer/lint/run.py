"""One lint run and every document it prints: JSON, SARIF 2.1.0, GitHub workflow commands,
plain text, and the CI verdict.

:func:`lint_paths` is the one entry point (ingest → prepare → :class:`Linter`, streaming);
the :class:`LintRun` it returns builds the documents: :meth:`LintRun.report` (the typed
JSON document, :class:`~prefixcache.analyzer.lint.document.LintReport`),
:meth:`LintRun.as_sarif`, :meth:`LintRun.github_lines`, :meth:`LintRun.text_lines`,
:meth:`LintRun.summary_lines` and :meth:`LintRun.verdict` (fail-on / fail-under, as data:
the CLI maps it to the exit code). Every report names a request ``session S request N``.
"""

from __future__ import annotations

from contextlib import nullcontext
from dataclasses import dataclass, field
from pathlib import PurePath
from typing import IO, Callable, Iterator, Protocol, Sequence
from urllib.parse import quote

from prefixcache import __version__
from prefixcache.analyzer.errors import ConfigError
from prefixcache.analyzer.ingest import Ingest, IngestSummary
from prefixcache.analyzer.lint.config import LintConfig
from prefixcache.analyzer.lint.document import LintReport, json_chunks, lint_summary, request_row, session_figures
from prefixcache.analyzer.lint.tenants import DivergenceBucket, GroupFigures, Tenants
from prefixcache.analyzer.prepare.size_check import SizeCheck
from prefixcache.analyzer.lint.engine import Linter, RequestResult, Waterfall, select_rules
from prefixcache.analyzer.lint.order import RESTART, arrival_stream
from prefixcache.analyzer.lint.rules import REGISTRY, Finding, severity_rank
from prefixcache.analyzer.lint.spill import ResultStore
from prefixcache.analyzer.model import Skipped
from prefixcache.analyzer.prepare import Prepared, Preparer
from prefixcache.analyzer.prepare.parallel import open_pool, parse_executor, prepare_stream
from prefixcache.analyzer.prepare.inspect import check_specs, skipped_records, tokenizer_notes
from prefixcache.analyzer.redact import redact_skipped

SARIF_SCHEMA = "https://json.schemastore.org/sarif-2.1.0.json"
INFORMATION_URI = "https://github.com/prefixcache/prefixcache"
_SARIF_LEVEL = {"error": "error", "warning": "warning", "info": "note"}
_GITHUB_COMMAND = {"error": "error", "warning": "warning", "info": "notice"}


@dataclass(frozen=True, slots=True)
class LintOptions:
    """The options of ``lint``: the effective settings (``config``: the config file merged
    with the command line, :meth:`LintConfig.merged`; its ``redact`` says whether findings,
    skip reasons and errors show lengths and keyed hashes instead of prompt text), the log
    reader (``input_format``, ``auto`` = detect per file) and ``redact_key``, the key of
    those hashes (:func:`~prefixcache.analyzer.redact.set_key`; None: a random key per run)."""

    config: LintConfig = field(default_factory=LintConfig)
    input_format: str = "auto"
    redact_key: str | None = None
    #: Where render and tokenize run (``--executor``: local, ray, ray:ADDRESS; :mod:`~prefixcache.analyzer.prepare.parallel`).
    executor: str = "local"

    @property
    def redact(self) -> bool:
        """Whether the run is redacted (the config's ``redact``)."""
        return self.config.redact


class PreparedTee(Protocol):
    """What :func:`lint_paths` hands every prepared request to, besides its linter."""

    def add(self, pos: int, prepared: Prepared, result: RequestResult) -> None:
        """One request (input position ``pos``), prepared, and lint's result for it."""

    def restart(self) -> None:
        """Everything handed so far is void: lint starts over in arrival order."""


def request_name(session: str, index: int) -> str:
    """How every report names a request: ``session <id> request <n>``."""
    return f"session {session} request {index}"


def github_escape(text: str, prop: bool = False) -> str:
    """``text`` escaped for a workflow command's message (``prop``: for a property value)."""
    text = text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")
    return text.replace(":", "%3A").replace(",", "%2C") if prop else text


@dataclass(frozen=True, slots=True)
class Verdict:
    """Whether a lint run fails CI: ``failing_findings`` at or above ``fail-on``, and
    ``below_fail_under`` (the message when the reusable fraction is below ``fail-under``,
    else None). ``fail_under_not_applied`` is True when ``fail-under`` was given but no
    request had a logged prompt (usage-only logs): there is no fraction to judge."""

    failing_findings: int
    below_fail_under: str | None
    fail_under_not_applied: bool

    @property
    def failed(self) -> bool:
        """True when the run fails CI (the CLI exits 1)."""
        return self.failing_findings > 0 or self.below_fail_under is not None

    def github_lines(self) -> list[str]:
        """The workflow command that marks a fail-under failure (none otherwise)."""
        gate = self.below_fail_under
        return [f"::error title=prefixcache fail-under::{github_escape(gate)}"] if gate else []


@dataclass(frozen=True, slots=True)
class LintRun:
    """Everything one lint run produced: per-request results and every reported finding
    (``store``, on disk: :mod:`prefixcache.analyzer.lint.spill`; :attr:`results` and
    :attr:`findings` read them back in input order), the run's and each session's
    waterfall, skipped input records, the number of files read, what ``auto`` chose
    per model (``notes``) and the block sizes of its block-aligned figures."""

    config: LintConfig
    store: ResultStore
    total: Waterfall
    sessions: dict[str, Waterfall]
    skipped: tuple[Skipped, ...]
    files: int
    notes: dict[str | None, str]
    #: Block sizes of the block-aligned figures (tokens): see :attr:`block_size`.
    block_sizes: frozenset[int] = frozenset()
    #: The prompt-size check's lines: sessions whose prompts are not the billed ones.
    size_warnings: tuple[str, ...] = ()
    #: Figures per tenant and per tag, and the divergence histogram (:mod:`.tenants`).
    tenants: tuple[GroupFigures, ...] = ()
    tags: tuple[GroupFigures, ...] = ()
    divergence: tuple[DivergenceBucket, ...] = ()
    #: The ingest pass's counts (the last pass when the times went backwards); None when not read.
    ingest: IngestSummary | None = None

    @property
    def results(self) -> tuple[RequestResult, ...]:
        """Per-request results, input order (rebuilt from the store at each call)."""
        return self.store.results()

    @property
    def findings(self) -> tuple[Finding, ...]:
        """Every reported finding, input order (rebuilt from the store at each call)."""
        return tuple(f for r in self.store.results() for f in r.findings)

    @property
    def block_size(self) -> int:
        """Block size of the block-aligned figure (tokens): ``--block-size``, or a block-hash
        trace's own block size when the run's figures all come from traces of one block size
        (Mooncake 512, kv-cache-tester 64, Bailian 16)."""
        sizes = self.block_sizes
        return next(iter(sizes)) if len(sizes) == 1 else self.config.block_size

    def report(self) -> LintReport:
        """The typed JSON document (``orjson.dumps(run.report())`` is ``--format json``)."""
        results = self.results
        findings = [f for r in results for f in r.findings]
        return LintReport(
            summary=lint_summary(self.total, len(self.sessions), self.block_size, self.store.by_severity),
            sessions=[session_figures(name, w) for name, w in self.sessions.items()],
            requests=[request_row(r) for r in results], findings=findings,
            skipped=skipped_records(self.skipped), tokenizers=tokenizer_notes(self.notes),
            warnings=list(self.size_warnings), tenants=list(self.tenants), tags=list(self.tags),
            divergence=list(self.divergence),
        )

    def json_chunks(self) -> Iterator[bytes]:
        """``--format json`` (``orjson.dumps(run.report(), option=OPT_INDENT_2)``) as byte chunks,
        rows serialized one at a time from the store: the document is never held whole."""
        head = LintReport(
            summary=lint_summary(self.total, len(self.sessions), self.block_size, self.store.by_severity),
            sessions=[], requests=[], findings=[],
            skipped=skipped_records(self.skipped), tokenizers=tokenizer_notes(self.notes),
            warnings=list(self.size_warnings), tenants=list(self.tenants), tags=list(self.tags),
            divergence=list(self.divergence),
        )
        sessions = (session_figures(name, w) for name, w in self.sessions.items())
        return json_chunks(head, self.store.rows(), self.store.finding_dicts(), sessions)

    def as_sarif(self) -> dict:
        """SARIF 2.1.0: one rule per code (with its documentation), one result per finding.

        The physical location is the log file, with the line where the request's record
        starts when the reader knows it (JSONL records); for items inside one JSON
        document (a trajectory step) no region is given (a record number is not a
        line), and the logical location carries the full JSON path instead.
        """
        driver = {"name": "prefixcache", "version": __version__, "informationUri": INFORMATION_URI,
                  "rules": [_sarif_rule(code) for code in sorted(REGISTRY)]}
        results = [_sarif_result(f) for f in self.findings]
        return {"$schema": SARIF_SCHEMA, "version": "2.1.0", "runs": [{"tool": {"driver": driver}, "results": results}]}

    def github_lines(self) -> list[str]:
        """GitHub Actions workflow commands (``::error file=…,line=…,title=…::message``), then
        the summary as notices, the prompt-size check's warnings as warnings. ``line`` is given only
        when the record's line in the file is known; otherwise the annotation is file-level and the
        message names the JSON path."""
        out = []
        for f in self.findings:
            props = [f"file={github_escape(f.source, True)}"] + ([f"line={f.file_line}"] if f.file_line is not None else [])
            props.append(f"title={github_escape(f'{f.code} {f.name}', True)}")
            where = f"{request_name(f.session, f.request)}, {f.json_path or f.pointer or f.segment}"
            out.append(f"::{_GITHUB_COMMAND[f.severity]} {','.join(props)}::"
                       f"{github_escape(f'{where}: {f.message}. Fix: {f.fix}')}")
        return (out + [f"::notice title=prefixcache summary::{github_escape(line)}" for line in self.summary_lines()]
                + [f"::warning title=prefixcache prompt size::{github_escape(w)}" for w in self.size_warnings])

    def text_lines(self) -> list[str]:
        """Plain text: one line per finding, then the summary.

        ``file:line: CODE severity [name] session S request N, where (char, token): message``;
        ``file:`` alone, with the JSON path, when the record's line is unknown. The prompt-size
        check's warnings (the prompts analysed are not the billed ones) follow, ``warning: …``.
        """
        return [_text_line(f) for f in self.findings] + self.summary_lines() + [f"warning: {w}" for w in self.size_warnings]

    def summary_lines(self) -> list[str]:
        """The run in one line (requests, reusable fraction, lost tokens by code, findings),
        plus one line on usage-only requests when there are any."""
        t, n, sessions = self.total, self.store.findings, len(self.sessions)
        lost = ", ".join(f"{c} {k:,}" for c, k in t.lost_tokens_by_code.most_common()) or "none"
        if t.content_requests:
            head = (f"{t.requests} request(s) in {sessions} session(s): {t.reusable_tokens:,} of "
                    f"{t.prompt_tokens:,} prompt tokens reusable ({t.reusable_fraction:.1%}"
                    + (f", {t.content_requests} request(s) with logged prompts" if t.usage_only_requests else "")
                    + f"); lost: {lost}; {n} finding(s)")
        else:
            head = (f"{t.requests} request(s) in {sessions} session(s), none with a logged prompt: no "
                    f"reusable-prefix figures; {n} finding(s)")
        return [head] + ([usage_only_line(t)] if t.usage_only_requests else [])

    def verdict(self) -> Verdict:
        """Fail-on and fail-under judged (``fail_under`` judges the reusable fraction of
        logged prompts, counting tokens lost to ``ttl`` as reusable: idle time is not a prompt
        defect, so ``--ttl`` never changes the exit code; a run with no logged prompt is not
        failed by it)."""
        cfg, total = self.config, self.total
        threshold = severity_rank(cfg.fail_on)
        failing = sum(n for sev, n in self.store.by_severity.items() if severity_rank(sev) >= threshold)
        below = None
        kept = (total.reusable_tokens + total.ttl_tokens) / total.prompt_tokens if total.prompt_tokens else 0.0
        if cfg.fail_under is not None and total.prompt_tokens and kept < cfg.fail_under:
            below = (f"{kept:.1%} of prompt tokens reusable{' (before TTL expiry)' if total.ttl_tokens else ''}, "
                     f"below --fail-under {cfg.fail_under:.1%}")
        return Verdict(failing, below, cfg.fail_under is not None and not total.prompt_tokens)


def usage_only_line(w: Waterfall) -> str:
    """What the log itself reports for requests whose prompts were not logged."""
    frac = w.usage_only_cached_fraction
    cached = (f", {w.usage_only_cached_tokens:,} cached ({frac:.1%}, the provider's reported hits)"
              if frac is not None else ", cached tokens not reported")
    return (f"usage only: {w.usage_only_requests} request(s) whose prompts were not logged (only the provider's "
            f"token counts): reported {w.usage_only_prompt_tokens:,} prompt tokens{cached}; no content analysis "
            f"is possible for them, and they are left out of the reusable figures")


def _sarif_rule(code: str) -> dict:
    rule = REGISTRY[code]
    doc = rule.doc()
    return {
        "id": code, "name": rule.name,
        "shortDescription": {"text": doc["summary"].splitlines()[0]},
        "fullDescription": {"text": doc["What it does"]},
        "help": {"text": "\n\n".join(f"{sec}: {doc[sec]}" for sec in ("Why it breaks caching", "Use instead",
                                                                        "Fix safety"))},
        "defaultConfiguration": {"level": _SARIF_LEVEL[rule.severity]},
    }


def sarif_uri(source: str) -> str:
    """A log path as a SARIF ``artifactLocation.uri`` (SARIF 2.1.0 §3.10, RFC 3986): an absolute
    path as a ``file://`` URI, a relative one as a percent-encoded relative reference
    (``sp ace#.jsonl`` → ``sp%20ace%23.jsonl``; plain relative paths stay as they are); stdin as ``-``."""
    if not source or source == "-":
        return "-"
    path = PurePath(source)
    return path.as_uri() if path.is_absolute() else quote(path.as_posix(), safe="/")


def _sarif_result(f: Finding) -> dict:
    loc: dict = {"physicalLocation": {"artifactLocation": {"uri": sarif_uri(f.source)}}}
    if f.file_line is not None:
        loc["physicalLocation"]["region"] = {"startLine": f.file_line}
    path = f.json_path or f.pointer
    if path:
        loc["logicalLocations"] = [{"fullyQualifiedName": path, "kind": "member"}]
    return {
        "ruleId": f.code, "level": _SARIF_LEVEL[f.severity], "message": {"text": f"{f.message}. Fix: {f.fix}"},
        "locations": [loc],
        "properties": {"session": f.session, "request": f.request, "record": f.record, "segment": f.segment,
                       "char": f.char, "token": f.token, "lost_tokens": f.lost_tokens, "certain": f.certain},
    }


def _text_line(f: Finding) -> str:
    loc = f"{f.source}:{f.file_line}:" if f.file_line is not None else f"{f.source}:"
    where = f.json_path or (f.pointer if f.file_line is None and f.pointer else f.segment)
    pos = ", ".join(p for p in (f"char {f.char}" if f.char is not None else "",
                                f"token {f.token}" if f.token is not None else "") if p)
    lost = f" ({f.lost_tokens:,} tokens lost)" if f.lost_tokens else ""
    return (f"{loc} {f.code} {f.severity} [{f.name}] {request_name(f.session, f.request)}, {where}"
            f"{f' ({pos})' if pos else ''}: {f.message}{lost}")


def lint_paths(paths: Sequence[str], cfg: LintConfig, input_format: str = "auto", stdin: IO[bytes] | None = None,
               on_request: Callable[[], None] | None = None, executor: str = "local", tee: PreparedTee | None = None
               ) -> LintRun:
    """Ingest ``paths``, lint every request, return the collected run.

    Requests are linted in the one arrival order
    (:func:`~prefixcache.analyzer.sequence.arrival_order`: by logged time across all
    files, stable; input order when any request has no time), the order ``simulate``
    and ``replay`` use, so an earlier request is never credited with reusing a later
    one's tokens. Results and findings are listed in input order. The order is streamed
    (:func:`~prefixcache.analyzer.lint.order.arrival_stream`): requests are not held,
    and a log whose times go backwards is read twice.

    ``input_format`` is the log reader (``auto`` = detect per file); ``stdin`` what ``-``
    reads (default the process's stdin); ``on_request`` is called after each request (a
    progress bar). With ``cfg.redact`` the findings and the skip reasons carry no prompt
    text (lengths and keyed hashes). ``tee`` gets every prepared request with its result,
    in the order linted (:class:`PreparedTee`: ``prefixcache report`` simulates from them,
    so the input is prepared once). Raises ConfigError for unknown selectors or readers and
    for a bad tokenizer or template (explicit specs are checked before any work), InputError
    for a missing path.
    """
    try:
        rules = select_rules(cfg.select, cfg.ignore)
    except KeyError as exc:
        raise ConfigError(f"--select/--ignore: {exc.args[0]}") from None
    check_specs(cfg.template, cfg.tokenizer)
    ex = parse_executor(executor)
    ingest = Ingest(paths, format=input_format, stdin=stdin, require_requests=True)
    linter, preparer, store = _start(cfg, rules)
    sizes, tenants = SizeCheck(), Tenants()
    items = ((pos, None if pos == RESTART else request) for pos, request in arrival_stream(ingest, lambda r: r.timestamp))
    with open_pool(ex, cfg.template, cfg.tokenizer) or nullcontext() as pool:
        for pos, prepared in prepare_stream(items, lambda: preparer, pool):
            if prepared is None:  # times went backwards: lint afresh in sorted order
                store.close()
                linter, preparer, store = _start(cfg, rules)
                sizes, tenants = SizeCheck(), Tenants()
                if tee is not None:
                    tee.restart()
                continue
            sizes.add(prepared)
            result = linter.feed(prepared)
            tenants.add(prepared.request, result)
            store.add(pos, result)
            if tee is not None:
                tee.add(pos, prepared, result)
            if on_request is not None:
                on_request()
    summary = ingest.summary
    skipped = redact_skipped(summary.skipped) if cfg.redact else summary.skipped  # reasons quote input
    return LintRun(cfg, store, linter.total, linter.sessions, skipped, summary.files, preparer.notes,
                   frozenset(linter.block_sizes), tuple(sizes.warnings()), tuple(tenants.figures()),
                   tuple(tenants.tag_figures()), tuple(tenants.histogram()), summary)


def _start(cfg: LintConfig, rules: Sequence) -> tuple[Linter, Preparer, ResultStore]:
    """A fresh linter, preparer and result store (input position → result, on disk)."""
    preparer = Preparer(template=cfg.template, tokenizer=cfg.tokenizer)
    linter = Linter(block_size=cfg.block_size, rules=rules, redact=cfg.redact, severity=cfg.severity,
                    render=lambda r: preparer.pipeline(r.model).renderer.render(r), ttl=cfg.ttl)
    return linter, preparer, ResultStore()
