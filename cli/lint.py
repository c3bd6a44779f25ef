"""``prefixcache lint``: reusable prefix per request, where reuse broke, and why.

Streams: requests are ingested, rendered, tokenized and linted one at a time; the
report is printed at the end (``text``/``github`` lines could be streamed, but one
ordering for every format keeps outputs comparable). Formats: ``rich`` (terminal
report), ``text``, ``json`` (README: lint JSON schema), ``sarif`` (2.1.0),
``github`` (workflow commands). Exit codes: 0 clean, 1 findings at or above
``--fail-on`` or reusable fraction below ``--fail-under``, 2 usage or input error.
"""

from __future__ import annotations

import sys
from pathlib import Path
from dataclasses import dataclass, field
from typing import Optional

import orjson
import typer
from rich.markup import escape

from prefixcache.analyzer.lint.config import FORMATS, LintConfig, load_config, parse_fraction
from prefixcache.analyzer.errors import ConfigError
from prefixcache.analyzer.canonical.rewrite import canonicalize_requests
from prefixcache.analyzer.ingest import Ingest
from prefixcache.analyzer.model import Request
from prefixcache.analyzer.canonical.writers import write_requests
from prefixcache.analyzer.lint.engine import Linter, RequestResult, Waterfall, select_rules
from prefixcache.analyzer.prepare import Preparer
from prefixcache.analyzer.lint.rules import REGISTRY, Finding, severity_rank

from prefixcache.cli.common import EXIT_ERROR, EXIT_FINDINGS, EXIT_OK, atomic_output, console, err, fail, handle_errors, progress, report_skipped
from prefixcache.cli.lint_report import print_rich

SARIF_SCHEMA = "https://json.schemastore.org/sarif-2.1.0.json"


@dataclass
class LintRun:
    """Everything one lint run produced, for the report writers."""

    config: LintConfig
    linter: Linter
    results: list[RequestResult] = field(default_factory=list)
    findings: list[Finding] = field(default_factory=list)
    skipped: tuple = ()
    files: int = 0
    notes: dict = field(default_factory=dict)


def _split(values: Optional[list[str]]) -> Optional[tuple[str, ...]]:
    if not values:
        return None
    return tuple(v.strip() for item in values for v in item.split(",") if v.strip())


def lint_paths(paths: list[str], cfg: LintConfig, input_format: str = "auto") -> LintRun:
    """Ingest ``paths``, lint every request (streaming), return the collected run."""
    try:
        rules = select_rules(cfg.select, cfg.ignore)
    except KeyError as exc:
        raise ConfigError(f"--select/--ignore: {exc.args[0]}") from None
    linter = Linter(block_size=cfg.block_size, rules=rules, redact=cfg.redact, severity=cfg.severity)
    ingest = Ingest(paths, format=input_format, stdin=sys.stdin.buffer if "-" in paths else None)
    preparer = Preparer(template=cfg.template, tokenizer=cfg.tokenizer)
    run = LintRun(cfg, linter)
    with progress("lint", enabled=None if cfg.format == "rich" else False) as bar:
        for request in ingest:
            res = linter.feed(preparer.prepare(request))
            run.results.append(res)
            run.findings.extend(res.findings)
            bar.advance()
    summary = ingest.summary
    run.skipped, run.files, run.notes = summary.skipped, summary.files, preparer.notes
    return run


def report_dict(run: LintRun) -> dict:
    """The documented JSON report (README: lint JSON schema)."""
    total = run.linter.total.to_dict()
    total["sessions"] = len(run.linter.sessions)
    total["block_size"] = run.config.block_size
    total["findings"] = len(run.findings)
    total["findings_by_severity"] = {s: sum(f.severity == s for f in run.findings) for s in ("error", "warning", "info")}
    return {
        "summary": total,
        "sessions": [{"session": name, **w.to_dict()} for name, w in run.linter.sessions.items()],
        "requests": [r.to_dict() for r in run.results],
        "findings": [f.to_dict() for f in run.findings],
        "skipped": [{"source": s.source, "record": s.record, "field": s.field, "reason": s.reason, "bad": s.bad}
                    for s in run.skipped],
        "tokenizers": {(k or "(no model name)"): v for k, v in run.notes.items()},
    }


def _level(severity: str) -> str:
    return {"error": "error", "warning": "warning", "info": "note"}[severity]


def request_name(session: str, index: int) -> str:
    """How every report names a request: ``session <id> request <n>``."""
    return f"session {session} request {index}"


def sarif_dict(run: LintRun) -> dict:
    """SARIF 2.1.0: one rule per code (with its documentation), one result per finding.

    The physical location is the log file, with the line where the request's record
    starts when the reader knows it (JSONL records); for items inside one JSON
    document (a trajectory step) no region is given (a record number is not a
    line), and the logical location carries the full JSON path instead.
    """
    rules = []
    for code, rule in sorted(REGISTRY.items()):
        doc = rule.doc()
        rules.append({
            "id": code, "name": rule.name,
            "shortDescription": {"text": doc["summary"].splitlines()[0]},
            "fullDescription": {"text": doc["What it does"]},
            "help": {"text": "\n\n".join(f"{sec}: {doc[sec]}" for sec in ("Why it breaks caching", "Use instead", "Fix safety"))},
            "defaultConfiguration": {"level": _level(rule.severity)},
        })
    results = []
    for f in run.findings:
        loc = {"physicalLocation": {"artifactLocation": {"uri": f.source or "-"}}}
        if f.file_line is not None:
            loc["physicalLocation"]["region"] = {"startLine": f.file_line}
        path = f.json_path or f.pointer
        if path:
            loc["logicalLocations"] = [{"fullyQualifiedName": path, "kind": "member"}]
        results.append({
            "ruleId": f.code, "level": _level(f.severity), "message": {"text": f"{f.message}. Fix: {f.fix}"},
            "locations": [loc],
            "properties": {"session": f.session, "request": f.request, "record": f.record, "segment": f.segment,
                           "char": f.char, "token": f.token, "lost_tokens": f.lost_tokens, "certain": f.certain},
        })
    driver = {"name": "prefixcache", "informationUri": "https://github.com/prefixcache/prefixcache", "rules": rules}
    return {"$schema": SARIF_SCHEMA, "version": "2.1.0", "runs": [{"tool": {"driver": driver}, "results": results}]}


def _gh_escape(text: str, prop: bool = False) -> str:
    text = text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")
    return text.replace(":", "%3A").replace(",", "%2C") if prop else text


def github_lines(run: LintRun) -> list[str]:
    """GitHub Actions workflow commands (``::error file=…,line=…,title=…::message``).

    ``line`` is given only when the record's line in the file is known; otherwise
    the annotation is file-level and the message names the JSON path.
    """
    cmd = {"error": "error", "warning": "warning", "info": "notice"}
    out = []
    for f in run.findings:
        props = [f"file={_gh_escape(f.source, True)}"] + ([f"line={f.file_line}"] if f.file_line is not None else [])
        props.append(f"title={_gh_escape(f'{f.code} {f.name}', True)}")
        where = f"{request_name(f.session, f.request)}, {f.json_path or f.pointer or f.segment}"
        out.append(f"::{cmd[f.severity]} {','.join(props)}::{_gh_escape(f'{where}: {f.message}. Fix: {f.fix}')}")
    out += [f"::notice title=prefixcache summary::{_gh_escape(line)}" for line in summary_lines(run)]
    return out


def summary_lines(run: LintRun) -> list[str]:
    """The run in one line (requests, reusable fraction, lost tokens by code,
    findings), plus one line on usage-only requests when there are any."""
    t = run.linter.total
    lost = ", ".join(f"{c} {n:,}" for c, n in t.lost_tokens_by_code.most_common()) or "none"
    sessions = len(run.linter.sessions)
    if t.content_requests:
        head = (f"{t.requests} request(s) in {sessions} session(s): {t.reusable_tokens:,} of "
                f"{t.prompt_tokens:,} prompt tokens reusable ({t.reusable_fraction:.1%}"
                + (f", {t.content_requests} request(s) with logged prompts" if t.usage_only_requests else "")
                + f"); lost: {lost}; {len(run.findings)} finding(s)")
    else:
        head = (f"{t.requests} request(s) in {sessions} session(s), none with a logged prompt: no reusable-prefix "
                f"figures; {len(run.findings)} finding(s)")
    return [head] + ([usage_only_line(t)] if t.usage_only_requests else [])


def usage_only_line(w: Waterfall) -> str:
    """What the log itself reports for requests whose prompts were not logged."""
    frac = w.usage_only_cached_fraction
    cached = (f", {w.usage_only_cached_tokens:,} cached ({frac:.1%}, the provider's reported hits)"
              if frac is not None else ", cached tokens not reported")
    return (f"usage only: {w.usage_only_requests} request(s) whose prompts were not logged (only the provider's "
            f"token counts): reported {w.usage_only_prompt_tokens:,} prompt tokens{cached}; no content analysis "
            f"is possible for them, and they are left out of the reusable figures")


def text_lines(run: LintRun) -> list[str]:
    """Plain text: one line per finding, then the summary.

    ``file:line: CODE severity [name] session S request N, where (char, token): message``;
    ``file:`` alone, with the JSON path, when the record's line is unknown.
    """
    out = []
    for f in run.findings:
        loc = f"{f.source}:{f.file_line}:" if f.file_line is not None else f"{f.source}:"
        where = f.json_path or (f.pointer if f.file_line is None and f.pointer else f.segment)
        pos = ", ".join(p for p in (f"char {f.char}" if f.char is not None else "",
                                    f"token {f.token}" if f.token is not None else "") if p)
        lost = f" ({f.lost_tokens:,} tokens lost)" if f.lost_tokens else ""
        out.append(f"{loc} {f.code} {f.severity} [{f.name}] {request_name(f.session, f.request)}, {where}"
                   f"{f' ({pos})' if pos else ''}: {f.message}{lost}")
    out += summary_lines(run)
    return out


def below_fail_under(run: LintRun) -> str | None:
    """The message when the run's reusable fraction is below ``--fail-under``, else None."""
    total = run.linter.total
    if run.config.fail_under is None or not total.prompt_tokens or total.reusable_fraction >= run.config.fail_under:
        return None
    return (f"{total.reusable_fraction:.1%} of prompt tokens reusable, below --fail-under "
            f"{run.config.fail_under:.1%}")


def exit_code(run: LintRun) -> int:
    """1 when a finding reaches ``fail_on`` or reuse is below ``fail_under``, else 0.

    ``fail_under`` judges the reusable fraction of logged prompts; a run with none
    (usage-only logs) has no such fraction and is not failed by it (the CLI says so).
    """
    threshold = severity_rank(run.config.fail_on)
    if any(severity_rank(f.severity) >= threshold for f in run.findings):
        return EXIT_FINDINGS
    return EXIT_FINDINGS if below_fail_under(run) else EXIT_OK


def emit(run: LintRun) -> None:
    """Write the report in the configured format to stdout."""
    fmt = run.config.format
    if fmt == "json":
        sys.stdout.write(orjson.dumps(report_dict(run), option=orjson.OPT_INDENT_2).decode() + "\n")
    elif fmt == "sarif":
        sys.stdout.write(orjson.dumps(sarif_dict(run), option=orjson.OPT_INDENT_2).decode() + "\n")
    elif fmt == "github":
        sys.stdout.write("\n".join(github_lines(run)) + "\n")
    elif fmt == "text":
        sys.stdout.write("\n".join(text_lines(run)) + "\n")
    else:
        print_rich(console, run.linter, run.results, run.findings, run.notes)


def fixed_copies(paths: list[str], input_format: str) -> list[str]:
    """``lint --fix``: canonicalize every input (same engine and options as ``canonicalize``)
    and write each file's requests, in its own format, to ``NAME.fixed.EXT`` beside it.

    The originals are never touched. Returns the paths of the copies. Raises
    ConfigError for stdin (no place for a copy) and for formats that cannot be
    written back (block traces, usage-only logs).
    """
    if "-" in paths:
        raise ConfigError("--fix writes a copy beside each input file: it cannot take stdin (use canonicalize --out)")
    ingest = Ingest(paths, format=input_format)
    requests = [r for r in ingest if ".fixed." not in Path(r.provenance.source).name]  # never re-fix a copy
    by_source: dict[str, list[Request]] = {}
    for req in canonicalize_requests(requests):
        by_source.setdefault(req.provenance.source, []).append(req)
    copies = []
    for source, reqs in by_source.items():
        src = Path(source)
        target = src.with_name(f"{src.stem}.fixed{src.suffix or '.jsonl'}")
        try:
            with atomic_output(target) as fh:
                write_requests(reqs, fh)
        except ConfigError as exc:
            raise ConfigError(f"--fix cannot write {src.name} back in its own format ({exc}); "
                              "use prefixcache canonicalize --to openai") from None
        err.print(f"fixed copy: {escape(str(target))} ({len(reqs)} request(s))", highlight=False)
        copies.append(str(target))
    return copies


def register(app: typer.Typer) -> None:
    """Add the ``lint`` command to ``app``."""

    @app.command("lint")
    @handle_errors
    def lint(
        paths: list[str] = typer.Argument(..., help="Log files, directories (recursive), globs, or - for stdin."),
        fmt: Optional[str] = typer.Option(None, "--format", "-f", help=f"Report format: {', '.join(FORMATS)} (default rich)."),
        as_json: bool = typer.Option(False, "--json", help="Shorthand for --format json."),
        input_format: str = typer.Option("auto", "--input-format", help="Force a log format; default: detect per file."),
        select: Optional[list[str]] = typer.Option(None, "--select", help="Only these rules: codes (PC101), prefixes (PC1), names or groups (volatile); comma-separated, repeatable."),
        ignore: Optional[list[str]] = typer.Option(None, "--ignore", help="Skip these rules (codes, prefixes, names or groups)."),
        block_size: Optional[int] = typer.Option(None, "--block-size", help="Block size for the block-aligned figure (tokens, default 16)."),
        fail_under: Optional[str] = typer.Option(None, "--fail-under", help="Exit 1 when reusable/prompt tokens is below this: a fraction (0.8) or a percentage (80%)."),
        fail_on: Optional[str] = typer.Option(None, "--fail-on", help="Lowest severity that exits 1: info, warning (default), error."),
        redact: Optional[bool] = typer.Option(None, "--redact/--no-redact", help="Show lengths and hashes instead of prompt text."),
        tokenizer: Optional[str] = typer.Option(None, "--tokenizer", "--model", help="Tokenizer spec (default auto)."),
        template: Optional[str] = typer.Option(None, "--template", help="Chat template spec (default auto)."),
        config: Optional[str] = typer.Option(None, "--config", help="Config file (default: prefixcache.toml or [tool.prefixcache] in pyproject.toml)."),
        skip_bad: bool = typer.Option(False, "--skip-bad", help="Report unreadable records and go on instead of exit 2."),
        fix: bool = typer.Option(False, "--fix", help="Write a cache-stable copy of each input beside it (NAME.fixed.EXT, the canonicalize engine), then lint the copies."),
    ) -> None:
        """Find where each prompt's reusable prefix breaks, why, and what it costs."""
        if as_json and fmt not in (None, "json"):
            raise fail(f"--json and --format {escape(fmt)} contradict each other; give one")
        cfg = load_config(config).merged(
            format="json" if as_json else fmt, select=_split(select), ignore=_split(ignore), block_size=block_size,
            fail_under=parse_fraction(fail_under, "--fail-under") if fail_under is not None else None,
            fail_on=fail_on, redact=redact, tokenizer=tokenizer, template=template,
        )
        if fix:
            paths = fixed_copies(paths, input_format)
            input_format = "auto"
        run = lint_paths(paths, cfg, input_format)
        emit(run)
        if cfg.fail_under is not None and not run.linter.total.prompt_tokens:
            err.print("[yellow]note:[/] --fail-under not applied: no request of the run has a logged prompt "
                      "(usage-only logs), so there is no reusable fraction to judge", highlight=False)
        if report_skipped(run.skipped, skip_bad):
            raise typer.Exit(EXIT_ERROR)
        gate = below_fail_under(run)
        if gate:
            if cfg.format == "github":
                sys.stdout.write(f"::error title=prefixcache fail-under::{_gh_escape(gate)}\n")
            err.print(f"[red]fail:[/] {escape(gate)}", highlight=False)
        raise typer.Exit(exit_code(run))
