"""The library entry points: what the commands compute, callable from Python.

>>> from prefixcache.analyzer.api import SimulateOptions, parse_capacities, simulate
>>> report = simulate(["logs/"], SimulateOptions(cache="sglang", capacities=parse_capacities("5%,20%")))
>>> orjson.dumps(report)          # the ``simulate --json`` document, byte for byte

One name per command (each returns the typed report its ``--json`` prints; see
docs/schemas): ``Inspection`` (inspect), ``lint_paths`` (lint), ``simulate``,
``canonicalize_paths`` (canonicalize), ``check_templates`` (check); below them the
stages ``Ingest`` (logs → requests) and ``Preparer`` (requests → rendered, tokenized
prompts). Replay lives one layer up, in :mod:`prefixcache.replay.run` (it needs torch).

This facade is also the one layer that composes features: ``simulate`` names each
request's drift with lint's rule codes (:func:`prefixcache.analyzer.lint.engine.drift_causes`),
which the cache layer below lint cannot import. Errors are :class:`~prefixcache.analyzer.errors.PrefixcacheError`
subclasses: ConfigError for bad options, InputError for unreadable inputs.
"""

from __future__ import annotations

from typing import Callable, Sequence

from prefixcache.analyzer.cache.capacity import kv_shape, parse_capacities
from prefixcache.analyzer.cache.fleet_report import FleetReport
from prefixcache.analyzer.cache.fleet_study import FleetOptions, fleet_report
from prefixcache.analyzer.cache.timing import fit_replay
from prefixcache.analyzer.cache.report import SimulateReport, SimulateReportWithRequests
from prefixcache.analyzer.cache.study import SimulateOptions, simulate_report
from prefixcache.analyzer.cache.workload import to_sim_requests
from prefixcache.analyzer.canonical.report import canonicalize_paths
from prefixcache.analyzer.canonical.rewrite import CanonicalOptions
from prefixcache.analyzer.check.report import check_templates
from prefixcache.analyzer.errors import PrefixcacheError
from prefixcache.analyzer.ingest import Ingest
from prefixcache.analyzer.lint.config import LintConfig
from prefixcache.analyzer.lint.engine import drift_causes
from prefixcache.analyzer.lint.report import lint_paths
from prefixcache.analyzer.prepare import Preparer
from prefixcache.analyzer.prepare.inspect import Inspection

__all__ = ["CanonicalOptions", "FleetOptions", "FleetReport", "Ingest", "Inspection", "LintConfig", "Preparer", "SimulateOptions", "SimulateReport",
           "SimulateReportWithRequests", "canonicalize_paths", "check_templates", "lint_paths", "parse_capacities",
           "simulate", "simulate_fleet"]


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
    ingest, preparer, items, reqs, causes = _simulated(inputs, options, on_prepared)
    return simulate_report(items, reqs, options, shape, ingest.summary, preparer.notes, causes)


def simulate_fleet(inputs: Sequence[str] | Ingest, options: SimulateOptions | None = None,
                   fleet: FleetOptions | None = None, *,
                   on_prepared: Callable[[], None] | None = None) -> FleetReport:
    """Simulate a fleet of replicas behind routers over logs (``simulate --replicas``):
    the workload ceiling, the pooled cache and each router's hits, lost tokens by
    cause (``routing``, ``tier_restore_slower`` included) and TTFT. ``options`` give
    the cache, one policy and one per-replica capacity; ``inputs`` and
    ``on_prepared`` as :func:`simulate`. The KV shape and the calibration file are
    read before the logs."""
    options = options or SimulateOptions()
    fleet = fleet or FleetOptions()
    shape = kv_shape(options.kv_model, options.model_config, options.kv_dtype)
    fit = fit_replay(fleet.calibrate) if fleet.calibrate else None
    ingest, preparer, items, reqs, causes = _simulated(inputs, options, on_prepared)
    return fleet_report(items, reqs, options, fleet, shape, ingest.summary, preparer.notes, causes, fit)


def _simulated(inputs: Sequence[str] | Ingest, options: SimulateOptions, on_prepared: Callable[[], None] | None):
    """The inputs read and prepared for the simulator: (ingest, preparer, prepared items in
    input order, simulator requests in arrival order, lint's drift cause per request order).
    A log lint cannot name causes for still has its drift counted, only not named."""
    ingest = inputs if isinstance(inputs, Ingest) else Ingest(inputs, format=options.input_format)
    preparer = Preparer(template=options.template, tokenizer=options.tokenizer)
    items = []
    for request in ingest:
        items.append(preparer.prepare(request))
        if on_prepared is not None:
            on_prepared()
    reqs = to_sim_requests(items)
    causes: dict[int, str] = {}
    if reqs:
        try:
            causes = drift_causes(items, reqs)
        except (ImportError, PrefixcacheError, ValueError):
            causes = {}
    return ingest, preparer, items, reqs, causes
