"""Issue 16 item 3 (lint on block traces): per-request results spill to a temporary file
(:mod:`prefixcache.analyzer.lint.spill`) and read back exactly, in input order."""

from __future__ import annotations

import random

import orjson

from prefixcache.analyzer.lint.config import LintConfig
from prefixcache.analyzer.lint.document import request_row
from prefixcache.analyzer.lint.engine import Linter
from prefixcache.analyzer.lint.run import lint_paths
from prefixcache.analyzer.lint.spill import ResultStore
from prefixcache.analyzer.ingest import Ingest
from prefixcache.analyzer.prepare import Preparer
from tests.helpers import SAMPLES

TRACE = str(SAMPLES / "mooncake_kvtrace_synthetic_trace.jsonl")


def _results(path: str) -> list:
    linter, preparer = Linter(), Preparer()
    return [linter.feed(preparer.prepare(r)) for r in Ingest([path])]


def test_store_reads_back_every_result_exactly_in_input_order():
    results = _results(TRACE)
    assert any(r.findings for r in results) and any(r.shared_with for r in results)
    order = list(range(len(results)))
    random.Random(3).shuffle(order)  # positions may arrive out of order (times across files)
    store = ResultStore()
    for pos in order:
        store.add(pos, results[pos])
    assert len(store) == len(results)
    assert store.results() == tuple(results)
    assert [orjson.dumps(row) for row in store.rows()] == [orjson.dumps(request_row(r)) for r in results]
    assert list(store.finding_dicts()) == [orjson.loads(orjson.dumps(f)) for r in results for f in r.findings]
    assert store.findings == sum(len(r.findings) for r in results)
    store.close()


def test_run_counts_findings_from_the_store():
    run = lint_paths([TRACE], LintConfig(format="json"))
    findings = run.findings
    assert run.store.findings == len(findings) > 0
    assert dict(run.store.by_severity) == {s: sum(f.severity == s for f in findings)
                                          for s in {f.severity for f in findings}}
    assert run.report().summary.findings == len(findings)
    assert [f for r in run.results for f in r.findings] == list(findings)
