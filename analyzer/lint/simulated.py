"""``simulate`` and ``simulate --replicas`` over logs, with each request's drift named by lint.

:func:`simulate` and :func:`simulate_fleet` read and prepare the logs, reduce each request
to a compact simulator request, and name its drift with lint's rule codes
(:class:`~prefixcache.analyzer.lint.engine.DriftCauses`), which the cache layer below lint
cannot import; then they build the cache layer's reports
(:func:`~prefixcache.analyzer.cache.simulate.study.simulate_report`,
:func:`~prefixcache.analyzer.cache.fleet.study.fleet_report`). Callers go through
:mod:`prefixcache.analyzer.api`. Errors are PrefixcacheError subclasses (ConfigError for
bad options, InputError for unreadable inputs).
"""

from __future__ import annotations

import dataclasses
import os
from array import array
from typing import TYPE_CHECKING, Callable, Sequence

import numpy as np

from prefixcache.analyzer.cache.capacity import kv_shape
from prefixcache.analyzer.cache.simulate.document import SimulateReport
from prefixcache.analyzer.cache.index.compact import Shared
from prefixcache.analyzer.cache.index.radix import PrefixIndex
from prefixcache.analyzer.cache.simulate.reuse import Reuse
from prefixcache.analyzer.cache.simulate.study import SimulateOptions, columnar_trace, simulate_report, trace_report
from prefixcache.analyzer.cache.workload import KeptItems, SimStream
from prefixcache.analyzer.errors import PrefixcacheError
from prefixcache.analyzer.ingest import Ingest

if TYPE_CHECKING:  # imported where used: simulate on a trace needs neither the fleet nor lint's engine
    from prefixcache.analyzer.cache.fleet.document import FleetReport
    from prefixcache.analyzer.cache.fleet.study import FleetOptions
    from prefixcache.analyzer.lint.engine import DriftCauses
    from prefixcache.analyzer.prepare import Preparer
    from prefixcache.analyzer.prepare.size_check import SizeCheck

#: Names this module used to import at the top, given on first use (the preparer imports the renderer).
_LAZY = {"SizeCheck": "prefixcache.analyzer.prepare.size_check", "SessionSizes": "prefixcache.analyzer.prepare.size_check",
         "Preparer": "prefixcache.analyzer.prepare", "DriftCauses": "prefixcache.analyzer.lint.engine"}


def __getattr__(name: str):
    """The names of :data:`_LAZY`, imported from their module on first use."""
    import importlib

    where = _LAZY.get(name)
    if where is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(where), name)

def simulate(inputs: Sequence[str] | Ingest, options: SimulateOptions | None = None, *,
             on_prepared: Callable[[], None] | None = None) -> SimulateReport:
    """Simulate a prefix cache over logs: hit tokens, avoided prefill, lost tokens by cause.

    ``inputs``: log paths (files, directories, globs, ``-``), read with
    ``options.input_format``; or an :class:`~prefixcache.analyzer.ingest.Ingest` the
    caller made, whose ``summary.skipped`` then lists the records left out.
    ``on_prepared`` is called once per request prepared (progress). Returns a
    :class:`SimulateReportWithRequests` when ``options.per_request``. The KV shape
    (byte capacities) is resolved before any input is read.
    """
    options = options or SimulateOptions()
    shape = kv_shape(options.kv_model, options.model_config, options.kv_dtype)
    if columnar_trace(options):
        ingest = inputs if isinstance(inputs, Ingest) else Ingest(inputs, format=options.input_format)
        report = _columnar(ingest, options, shape, on_prepared)
        if report is not None:
            return report
        inputs = ingest
    ingest, preparer, items, reqs, causes, sizes, overlaps = _read(inputs, options, on_prepared)
    report = simulate_report(items, reqs, options, shape, ingest.summary, preparer.notes, causes,
                             trace_overlaps=overlaps, sizes=sizes.by_request)
    return dataclasses.replace(report, warnings=[*report.warnings, *sizes.warnings()])


def _columnar(ingest: Ingest, options: SimulateOptions, shape, on_prepared: Callable[[], None] | None
              ) -> SimulateReport | None:
    """:func:`simulate` on the columnar block-trace path: the trace read into columns
    (:func:`~prefixcache.analyzer.ingest.readers.trace_columns.read_columns`), sessions, baseline and
    lint's PC002 drift in one pass (:func:`~prefixcache.analyzer.cache.index.trace_sessions.trace_drift`),
    the grid on arrays (:func:`~prefixcache.analyzer.cache.simulate.study.trace_report`). None when the
    input is not a trace this path reads (the caller takes the object path). The same report as the
    object path: same requests, sessions, drift extents and causes (PC002, lint's
    :data:`~prefixcache.analyzer.lint.rules.TRACE_DIVERGENCE`)."""
    from prefixcache.analyzer.cache.index.trace_sessions import trace_drift
    from prefixcache.analyzer.ingest import IngestSummary
    from prefixcache.analyzer.ingest.readers.trace_columns import read_columns
    from prefixcache.analyzer.lint.rules.trace import TRACE_DIVERGENCE

    trace = read_columns(ingest, options.input_format)
    if trace is None:
        return None
    n = len(trace)
    summary = IngestSummary(1, n, n, 1, ())
    ingest.remember(summary)
    if on_prepared is not None:
        for _ in range(n):
            on_prepared()
    trace = trace.in_arrival_order()
    drift = trace_drift(trace.offsets, trace.ids, trace.tokens, trace.block_size, trace.session)
    code = TRACE_DIVERGENCE.code
    causes: list[str | None] = [None] * n
    for i in np.flatnonzero(drift.lost > 0).tolist():
        causes[i] = code
    return trace_report(trace, drift, causes, options, shape, summary)


def simulate_fleet(inputs: Sequence[str] | Ingest, options: SimulateOptions | None = None,
                   fleet: FleetOptions | None = None, *,
                   on_prepared: Callable[[], None] | None = None) -> FleetReport:
    """Simulate a fleet of replicas behind routers over logs (``simulate --replicas``):
    the workload ceiling, the pooled cache and each router's hits, lost tokens by
    cause (``routing``, ``tier_restore_slower`` included) and TTFT. ``options`` give
    the cache, one policy and one per-replica capacity; ``inputs`` and
    ``on_prepared`` as :func:`simulate`. The KV shape and the calibration file are
    read before the logs."""
    from prefixcache.analyzer.cache.fleet.study import FleetOptions, fleet_report
    from prefixcache.analyzer.cache.fleet.timing import calibration_of

    options = options or SimulateOptions()
    fleet = fleet or FleetOptions()
    shape = kv_shape(options.kv_model, options.model_config, options.kv_dtype)
    fit, links = calibration_of(fleet.calibrate) if fleet.calibrate else (None, None)
    ingest, preparer, items, reqs, causes, sizes = _simulated(inputs, options, on_prepared)
    report = fleet_report(items, reqs, options, fleet, shape, ingest.summary, preparer.notes, causes, fit, links)
    return dataclasses.replace(report, warnings=[*report.warnings, *sizes.warnings()])


def _simulated(inputs: Sequence[str] | Ingest, options: SimulateOptions, on_prepared: Callable[[], None] | None):
    """:func:`_read` without the trace overlaps: (ingest, preparer, items, requests, drift causes, size check)."""
    return _read(inputs, options, on_prepared)[:6]


def _read(inputs: Sequence[str] | Ingest, options: SimulateOptions, on_prepared: Callable[[], None] | None):
    """The inputs read and prepared for the simulator: (ingest, preparer, the prepared items
    in input order — :class:`~.cache.workload.Kept` parts once their prompts are dropped, in
    columns (:class:`~.cache.workload.KeptItems`) —,
    simulator requests in arrival order, lint's drift cause per request order, the
    prompt-size check of the prepared prompts against their billed counts, and lint's drift
    extent of each block-trace request in arrival order — :attr:`DriftCauses.trace_overlaps`,
    so the simulator's baseline need not infer trace sessions a second time; None when lint
    stopped).

    Streamed: each request is prepared, its drift linted (in arrival order while that is
    the input order) and reduced to a compact simulator request before the next is read.
    When the logged times turn out not to be in input order, drift is linted on a second
    pass in arrival order (:func:`~prefixcache.analyzer.lint.order.sorted_stream`: only the
    requests read before their turn are held, never their prepared prompts; inputs that
    cannot be read twice, stdin or FIFOs, are held whole instead). A log lint cannot name causes for still has its drift counted, only
    not named."""
    from prefixcache.analyzer.lint.engine import DriftCauses
    from prefixcache.analyzer.lint.order import sorted_stream
    from prefixcache.analyzer.prepare import Preparer
    from prefixcache.analyzer.prepare.size_check import SizeCheck
    from prefixcache.analyzer.sequence import arrival_order

    ingest = inputs if isinstance(inputs, Ingest) else Ingest(inputs, format=options.input_format)
    preparer = Preparer(template=options.template, tokenizer=options.tokenizer)
    hold = not _rereadable(ingest)
    stream, held = SimStream(), []
    items = [] if hold else KeptItems()
    lint: DriftCauses | None = DriftCauses(render=_renderer(preparer))
    sizes = SizeCheck(by_request=True)
    for request in ingest:
        p = preparer.prepare(request)
        sizes.add(p)
        stream.add(p)
        items.append(p)
        if hold:
            held.append(p)
        elif lint is not None and stream.in_input_order:
            lint = _fed(lint, p)
        if on_prepared is not None:
            on_prepared()
    reqs = stream.requests()
    if not reqs:
        return ingest, preparer, items, reqs, {}, sizes, None
    if hold or not stream.in_input_order:  # a second pass in arrival order, prepared prompts never held
        second = preparer if hold else Preparer(template=options.template, tokenizer=options.tokenizer)
        lint = DriftCauses(render=_renderer(second))
        again = (p for _, p in arrival_order(held, lambda p: p.request.timestamp)) if hold else map(
            second.prepare, (r for _, r in sorted_stream(ingest, lambda r: r.timestamp)))
        for p in again:
            if (lint := _fed(lint, p)) is None:
                break
    if lint is None:
        return ingest, preparer, items, reqs, {}, sizes, None
    return ingest, preparer, items, reqs, lint.of(reqs), sizes, lint.trace_overlaps


class SimulatedTee:
    """``simulate`` over the requests another pass prepares, so a run that lints and simulates
    one input (``prefixcache report``) reads, renders and tokenizes it once: pass it as
    :func:`~prefixcache.analyzer.lint.run.lint_paths`' ``tee``, then call :meth:`report` with
    the lint run's ingest summary and tokenizer notes. Lint hands over the requests in the one
    arrival order with its result for each, whose ``lost_code`` is the drift cause simulate
    names (:meth:`~prefixcache.analyzer.lint.engine.DriftCauses.record`), and calls
    :meth:`restart` when the times went backwards and it starts over in sorted order. What is
    staged is what :func:`_simulated` stages (the simulator's requests, the
    :class:`~.cache.workload.Kept` parts in columns, the prompt-size check), put back in input order,
    so the report equals :func:`simulate`'s over the same inputs and ``options``."""

    def __init__(self, options: SimulateOptions) -> None:
        self.options = options
        self.shape = kv_shape(options.kv_model, options.model_config, options.kv_dtype)
        self.restart()

    def restart(self) -> None:
        """Drop what was staged (lint starts over in arrival order)."""
        from prefixcache.analyzer.lint.engine import DriftCauses
        from prefixcache.analyzer.prepare.size_check import SizeCheck

        self.stream, self.sizes, self.causes = SimStream(), SizeCheck(by_request=True), DriftCauses()
        self.kept, self.positions = KeptItems(), array("q")  # kept parts in the order fed, and their input positions
        self.checked: dict[str, list[int]] = {}  # session → input positions of its size-checked calls

    def add(self, pos: int, p, result) -> None:
        """Stage prepared request ``p`` (input position ``pos``) and lint's ``result`` for it."""
        if self.sizes.add(p) is not None:
            self.checked.setdefault(p.request.session, []).append(pos)
        self.stream.add(p)
        self.kept.append(p)
        self.positions.append(pos)
        if p.tokens is not None or p.request.trace is not None:
            self.causes.record(p, result)

    @property
    def in_input_order(self) -> bool:
        """True when lint fed the requests in input order (its arrival order was the input order)."""
        pos = np.frombuffer(self.positions, dtype=np.int64)
        return bool(np.all(pos[1:] > pos[:-1]))

    def items(self) -> KeptItems:
        """The kept parts (:class:`~.cache.workload.KeptItems`, ~80 bytes a request) in input order."""
        if self.in_input_order:
            return self.kept
        return self.kept.permuted(np.argsort(np.frombuffer(self.positions, dtype=np.int64), kind="stable"))

    def reuse_of(self, requests: Sequence) -> list[Reuse] | None:
        """:func:`~prefixcache.analyzer.cache.simulate.reuse.reuse` of ``requests`` (the same input
        read again, input order) from the token ids staged, without preparing them again: what
        ``canonicalize`` reports as its ``before`` figures. The staged requests are taken in input
        order (lint fed them in arrival order; their ids are the ones a preparer in input order
        gives, as the simulate document of :meth:`report` relies on too). None where they are not
        exactly ``requests`` with prompts (a block trace, a usage-only record, another input)."""
        staged = self.stream.requests()  # arrival order: the order lint fed them in
        if len(staged) != len(self.positions) or len(staged) != len(requests):
            return None
        reqs = [staged[i] for i in np.argsort(np.frombuffer(self.positions, dtype=np.int64), kind="stable")]
        if any(s.tokens is None or (s.source, s.record, s.session, s.index) != (
                r.provenance.source, r.provenance.record, r.session, r.index) for s, r in zip(reqs, requests)):
            return None
        index = PrefixIndex()
        return [Reuse(1, s.num_tokens, index.insert(s.tokens.ids() if isinstance(s.tokens, Shared) else s.tokens,
                                                    n).length) for n, s in enumerate(reqs)]

    def size_check(self) -> SizeCheck:
        """The prompt-size check as :func:`_simulated` makes it, in input order: sessions in the
        order of their first checked call, each session's calls in input order."""
        from prefixcache.analyzer.prepare.size_check import SessionSizes, SizeCheck

        where, out = self.checked, SizeCheck()
        for name in sorted(self.sizes.sessions, key=lambda s: min(where[s])):
            s = self.sizes.sessions[name]
            order = sorted(range(len(s.rows)), key=where[name].__getitem__)
            out.sessions[name] = SessionSizes(name, [s.rows[i] for i in order], s.exact)
        out.by_request = self.sizes.by_request
        return out

    def report(self, summary, notes, options: SimulateOptions | None = None) -> SimulateReport:
        """The simulate report of what was staged; ``summary``: the
        :class:`~prefixcache.analyzer.ingest.IngestSummary` of the pass that fed it, ``notes``:
        its preparer's tokenizer notes (model → note); ``options``: the options to simulate with
        when they were chosen after the pass (the cache ``report --cache auto`` picks from the
        logged models; staging does not depend on the cache), else those given at construction."""
        items = self.items()
        reqs = self.stream.requests()
        report = simulate_report(items, reqs, options or self.options, self.shape, summary, notes, self.causes.of(reqs),
                                 sizes=self.sizes.by_request)
        return dataclasses.replace(report, warnings=[*report.warnings, *self.size_check().warnings()])


def _renderer(preparer: Preparer) -> Callable:
    """A request's rendering as ``preparer`` makes it: what lets :class:`DriftCauses` hold its
    earlier requests without their renderings (rendered again only to explain a break)."""
    return lambda r: preparer.pipeline(r.model).renderer.render(r)


def _fed(lint: DriftCauses, p) -> DriftCauses | None:
    """``lint`` after feeding it ``p``; None once lint cannot name causes for this log."""
    try:
        lint.feed(p)
    except (ImportError, PrefixcacheError, ValueError):
        return None
    return lint


def _rereadable(ingest: Ingest) -> bool:
    """True when every input of ``ingest`` is a regular file (a second pass reads the same)."""
    return all(s.name != "-" and os.path.isfile(s.name) for s in ingest.sources)
