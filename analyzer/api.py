"""The library entry points: what the commands compute, callable from Python.

>>> from prefixcache.analyzer.api import SimulateOptions, parse_capacities, simulate
>>> report = simulate(["logs/"], SimulateOptions(cache="sglang", capacities=parse_capacities("5%,20%")))
>>> orjson.dumps(report)          # the ``simulate --json`` document, byte for byte

One function per command, each taking the inputs and one ``*Options`` value, returning
the typed report its ``--json`` prints (see docs/schemas): :func:`inspect`,
:func:`lint` (and :func:`fixed_copies` for ``lint --fix``), :func:`diff`,
:func:`simulate`, :func:`simulate_fleet`, :func:`canonicalize`, :func:`check`,
:func:`report`. The commands call only these (replay lives one layer up,
:func:`prefixcache.replay.open_replay`: it needs torch). Below them are the stages
``Ingest`` (logs → requests) and ``Preparer`` (requests → rendered, tokenized prompts).

This module only composes: the work stays in the feature packages. Redaction is decided
here for every command: an entry point whose options say ``redact`` turns it on for the
process with the options' ``redact_key`` (:func:`prefixcache.analyzer.redact.use`: the
hashes of one run compare), and the report it returns is already redacted by the feature.
Errors are :class:`~prefixcache.analyzer.errors.PrefixcacheError` subclasses: ConfigError
for bad options, InputError for unreadable inputs.
"""

from __future__ import annotations

import importlib
from contextlib import nullcontext
from dataclasses import dataclass
from typing import IO, TYPE_CHECKING, Callable, Sequence

from prefixcache.analyzer import redact
from prefixcache.analyzer.errors import ConfigError

if TYPE_CHECKING:  # the types named below; imported on first use (a command imports what it runs)
    from prefixcache.analyzer.cache.capacity import parse_capacities
    from prefixcache.analyzer.cache.fleet.document import FleetReport
    from prefixcache.analyzer.cache.fleet.study import FleetOptions
    from prefixcache.analyzer.cache.simulate.document import SimulateReport, SimulateReportWithRequests
    from prefixcache.analyzer.cache.simulate.study import SimulateOptions
    from prefixcache.analyzer.canonical.fix import FixedCopy
    from prefixcache.analyzer.canonical.rewrite import CanonicalOptions
    from prefixcache.analyzer.canonical.run import CanonicalizeOptions, CanonicalRun
    from prefixcache.analyzer.check.checker import TemplateReport
    from prefixcache.analyzer.check.run import CheckOptions
    from prefixcache.analyzer.columnar import TraceCounts
    from prefixcache.analyzer.export import ExportCounts
    from prefixcache.analyzer.html import ReportDocuments, ReportOptions
    from prefixcache.analyzer.ingest import Ingest
    from prefixcache.analyzer.lint.config import LintConfig
    from prefixcache.analyzer.lint.diff import DiffOptions, DiffReport
    from prefixcache.analyzer.lint.run import LintOptions, LintRun
    from prefixcache.analyzer.lint.simulated import simulate, simulate_fleet
    from prefixcache.analyzer.prepare import Preparer
    from prefixcache.analyzer.prepare.inspect import InspectOptions, Inspection

#: Names this module gives, by the module that defines them: imported on first use
#: (:func:`__getattr__`), so ``simulate`` on a trace does not import the HTML report, canonicalize
#: or check (start-up, issue 25 item 5). ``from prefixcache.analyzer.api import X`` works as before.
_LAZY = {
    "FleetReport": "prefixcache.analyzer.cache.fleet.document",
    "FleetOptions": "prefixcache.analyzer.cache.fleet.study",
    "SimulateReport": "prefixcache.analyzer.cache.simulate.document",
    "SimulateReportWithRequests": "prefixcache.analyzer.cache.simulate.document",
    "SimulateOptions": "prefixcache.analyzer.cache.simulate.study",
    "parse_capacities": "prefixcache.analyzer.cache.capacity",
    "FixedCopy": "prefixcache.analyzer.canonical.fix",
    "CanonicalOptions": "prefixcache.analyzer.canonical.rewrite",
    "CanonicalizeOptions": "prefixcache.analyzer.canonical.run",
    "CanonicalRun": "prefixcache.analyzer.canonical.run",
    "TemplateReport": "prefixcache.analyzer.check.checker",
    "CheckOptions": "prefixcache.analyzer.check.run",
    "TraceCounts": "prefixcache.analyzer.columnar",
    "ExportCounts": "prefixcache.analyzer.export",
    "ReportDocuments": "prefixcache.analyzer.html",
    "ReportOptions": "prefixcache.analyzer.html",
    "Ingest": "prefixcache.analyzer.ingest",
    "LintConfig": "prefixcache.analyzer.lint.config",
    "DiffOptions": "prefixcache.analyzer.lint.diff",
    "DiffReport": "prefixcache.analyzer.lint.diff",
    "LintOptions": "prefixcache.analyzer.lint.run",
    "LintRun": "prefixcache.analyzer.lint.run",
    "Preparer": "prefixcache.analyzer.prepare",
    "InspectOptions": "prefixcache.analyzer.prepare.inspect",
    "Inspection": "prefixcache.analyzer.prepare.inspect",
    "simulate": "prefixcache.analyzer.lint.simulated",
    "simulate_fleet": "prefixcache.analyzer.lint.simulated",
}


def __getattr__(name: str):
    """The names of :data:`_LAZY`, imported from their module on first use."""
    where = _LAZY.get(name)
    if where is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(where), name)
    globals()[name] = value
    return value


__all__ = ["CanonicalOptions", "CanonicalizeOptions", "CheckOptions", "DiffOptions", "FleetOptions", "FleetReport",
           "Ingest", "InspectOptions", "LintConfig", "LintOptions", "Preparer", "ReportOptions", "SimulateOptions",
           "SimulateReport", "SimulateReportWithRequests", "canonicalize", "check", "diff", "fixed_copies", "inspect",
           "lint", "parse_capacities", "trace", "TraceOptions", "report", "simulate", "simulate_fleet"]

#: ``on_request`` callbacks: called once per request read (a progress bar).
Progress = Callable[[], None]


def inspect(paths: Sequence[str], options: InspectOptions | None = None, *,
            stdin: IO[bytes] | None = None) -> Inspection:
    """The ``inspect`` pass over ``paths`` (``-`` reads ``stdin``): iterate it for one
    :class:`~prefixcache.analyzer.prepare.inspect.InspectRecord` per request (streamed), then
    read its ``summary``. Raises ConfigError for a bad reader or spec, InputError for a
    missing path."""
    from prefixcache.analyzer.prepare.inspect import InspectOptions, Inspection

    options = options or InspectOptions()
    redact.use(options.redact, options.redact_key)
    return Inspection(paths, options.input_format, options.tokenizer, options.template, stdin, options.redact,
                      options.executor)


def lint(paths: Sequence[str], options: LintOptions | None = None, *, stdin: IO[bytes] | None = None,
         on_request: Progress | None = None) -> LintRun:
    """Lint ``paths`` (:func:`~prefixcache.analyzer.lint.run.lint_paths`): the run whose
    documents ``lint`` prints, redacted when ``options.redact``."""
    from prefixcache.analyzer.lint.run import LintOptions, lint_paths

    options = options or LintOptions()
    redact.use(options.redact, options.redact_key)
    return lint_paths(paths, options.config, options.input_format, stdin, on_request, options.executor)


def fixed_copies(paths: Sequence[str], options: LintOptions | None = None) -> list[FixedCopy]:
    """``lint --fix``: the cache-stable copy of every input (``NAME.fixed.EXT``,
    :func:`~prefixcache.analyzer.canonical.fix.fixed_copies`), to write before linting them.
    The template and tokenizer specs of ``options`` are checked first, so a bad one fails
    before any copy is written."""
    from prefixcache.analyzer.canonical.fix import fixed_copies as _fixed_copies
    from prefixcache.analyzer.lint.run import LintOptions
    from prefixcache.analyzer.prepare.inspect import check_specs

    options = options or LintOptions()
    redact.use(options.redact, options.redact_key)
    check_specs(options.config.template, options.config.tokenizer)
    return _fixed_copies(paths, options.input_format)


def diff(paths: Sequence[str], options: DiffOptions, *, stdin: IO[bytes] | None = None) -> DiffReport:
    """Both rendered prompts of ``options.request`` and ``options.against`` around their first
    differing token (:func:`~prefixcache.analyzer.lint.diff.diff_requests`)."""
    from prefixcache.analyzer.lint.diff import diff_requests

    redact.use(options.redact, options.redact_key)
    return diff_requests(paths, options.request, options.against, options.input_format, options.template,
                         options.tokenizer, options.window, options.width, stdin, options.redact)


def canonicalize(paths: Sequence[str], options: CanonicalizeOptions | None = None, *,
                 stdin: IO[bytes] | None = None) -> CanonicalRun:
    """Read and canonicalize ``paths``; the run writes the rewritten log
    (``run.write(fh, options.to)``) and builds the report (``run.report(options.out, n)``)."""
    from prefixcache.analyzer.canonical.run import CanonicalizeOptions, canonicalize_paths

    options = options or CanonicalizeOptions()
    redact.use(options.redact, options.redact_key)
    return canonicalize_paths(paths, options.rules, options.input_format, options.template, options.tokenizer,
                              stdin, options.redact)


def check(templates: Sequence[str], options: CheckOptions) -> list[TemplateReport]:
    """Check every Jinja2 template against every context of ``options``
    (:func:`~prefixcache.analyzer.check.run.check_templates`): one report per template."""
    from prefixcache.analyzer.check.run import check_templates

    return check_templates(templates, options.contexts, options.tokenizer, options.min_stable_tokens,
                           options.min_stable_fraction, options.vary, options.search_path, options.seed,
                           options.first_line)


def report(paths: Sequence[str], options: ReportOptions | None = None, *,
           on_request: Progress | None = None) -> ReportDocuments:
    """The documents of one HTML report (:func:`~prefixcache.analyzer.html.gather`); render
    them with :func:`~prefixcache.analyzer.html.render_html`."""
    from prefixcache.analyzer.html import ReportOptions, gather

    options = options or ReportOptions()
    redact.use(options.redact, options.redact_key)
    return gather(paths, options, on_request)


@dataclass(frozen=True)
class TraceOptions:
    """The options of ``trace``: the log reader, the template and tokenizer specs, the block size
    (tokens) of the ids of prompts with text, and the executor of render and tokenize."""

    input_format: str = "auto"
    template: str = "auto"
    tokenizer: str = "auto"
    block_size: int = 16
    executor: str = "local"


@dataclass(frozen=True)
class ExportOptions:
    """The options of ``export``: the format (``mooncake`` or ``aiperf``), the block size (tokens per
    hash id), the log reader and the template and tokenizer specs."""

    to: str = "mooncake"
    block_size: int = 512
    input_format: str = "auto"
    template: str = "auto"
    tokenizer: str = "auto"


def export(paths: Sequence[str], out: IO[bytes], options: ExportOptions = ExportOptions(), *,
           stdin: IO[bytes] | None = None, on_request: Progress | None = None) -> tuple[ExportCounts, Ingest]:
    """Read, render and tokenize ``paths`` and write their text-free block-hash trace in the peers'
    format to ``out`` (:func:`~prefixcache.analyzer.export.export_trace`): the counts written and the
    ingest pass (its ``summary`` has the skipped records). Raises ConfigError for a bad spec,
    format or block size."""
    from prefixcache.analyzer.export import FORMATS, export_trace
    from prefixcache.analyzer.ingest import Ingest
    from prefixcache.analyzer.prepare import Preparer
    from prefixcache.analyzer.prepare.inspect import check_specs

    if options.to not in FORMATS:  # before any log is read
        raise ConfigError(f"--to {options.to}: choose from {', '.join(FORMATS)}")
    check_specs(options.template, options.tokenizer)
    ingest = Ingest(paths, format=options.input_format, stdin=stdin, require_requests=True)
    preparer = Preparer(options.template, options.tokenizer)

    def stream():
        for r in ingest:
            if on_request is not None:
                on_request()
            yield preparer.prepare(r)

    return export_trace(stream(), out, options.to, options.block_size), ingest


def trace(paths: Sequence[str], out: IO[bytes], options: TraceOptions = TraceOptions(), *,
          stdin: IO[bytes] | None = None, on_request: Progress | None = None) -> tuple[TraceCounts, Ingest]:
    """Read, render and tokenize ``paths`` once and write their columnar block-hash trace (Parquet) to
    ``out`` (:func:`~prefixcache.analyzer.columnar.write_trace`): the counts written and the ingest
    pass (its ``summary`` has the skipped records). Raises ConfigError for a bad spec or executor."""
    from prefixcache.analyzer.columnar import write_trace
    from prefixcache.analyzer.ingest import Ingest
    from prefixcache.analyzer.prepare import Preparer
    from prefixcache.analyzer.prepare.inspect import check_specs
    from prefixcache.analyzer.prepare.parallel import open_pool, parse_executor, prepare_stream

    check_specs(options.template, options.tokenizer)
    ex = parse_executor(options.executor)
    ingest = Ingest(paths, format=options.input_format, stdin=stdin, require_requests=True)
    preparer = Preparer(options.template, options.tokenizer)

    def stream():
        for _, p in prepare_stream(((None, r) for r in ingest), lambda: preparer, pool):
            if on_request is not None:
                on_request()
            yield p

    with open_pool(ex, options.template, options.tokenizer) or nullcontext() as pool:
        counts = write_trace(stream(), out, options.block_size)
    return counts, ingest
