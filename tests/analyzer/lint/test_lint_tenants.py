"""A multi-tenant log: two tenants' conversations interleaved in one file change nothing about either,
and lint sums the figures per tenant and histograms where prefixes broke."""

from __future__ import annotations

import json

from prefixcache.analyzer.lint.config import LintConfig
from prefixcache.analyzer.lint.run import lint_paths
from tests.helpers import CASES, existing

A, B = "timestamp_in_system", "tool_order_shuffle"


def _interleaved(tmp_path, named: bool):
    rows = {name: existing(CASES / f"{name}.jsonl").read_text().splitlines() for name in (A, B)}
    out = []
    for i in range(max(map(len, rows.values()))):
        for name, lines in rows.items():
            if i < len(lines):
                body = json.loads(lines[i])
                if named:
                    body["user"] = name
                out.append(json.dumps(body))
    path = tmp_path / ("gateway_named.jsonl" if named else "gateway.jsonl")
    path.write_text("\n".join(out) + "\n")
    return path


def test_tenants_interleaved_are_linted_as_if_alone(tmp_path):
    """Both cases start with the same messages, so only the ``user`` field tells them apart (a log naming
    no tenant would chain them as one conversation: nothing in the messages differs)."""
    alone = {name: lint_paths([str(CASES / f"{name}.jsonl")], LintConfig()).total for name in (A, B)}
    run = lint_paths([str(_interleaved(tmp_path, True))], LintConfig())
    assert len(run.sessions) == 2
    within = run.total.lost_tokens_by_code.copy()
    cross = within.pop("PC602")  # B's first request vs A's: a cache shared by both serves the common system prompt
    assert within == sum((w.lost_tokens_by_code for w in alone.values()), type(within)())  # no drift across tenants
    assert [r.lost_code for r in run.results if r.index == 0] == [None, "PC602"] and cross == 445
    figures = {g.name: g for g in run.tenants}
    assert set(figures) == {A, B}
    for name in (A, B):
        assert figures[name].prompt_tokens == alone[name].prompt_tokens
    assert figures[A].reusable_tokens == alone[A].reusable_tokens
    broke = [b for b in run.divergence if b.requests]
    assert sum(b.lost_tokens for b in broke) == run.total.lost_tokens


def test_simulate_drift_stays_inside_each_tenant(tmp_path):
    from click.testing import CliRunner

    from tests.helpers import cli_app

    def drift(path):
        doc = json.loads(CliRunner().invoke(cli_app(), ["simulate", str(path), "--json"]).stdout)
        return doc["results"][0]["lost_tokens_by_cause"]["drift"]
    assert drift(_interleaved(tmp_path, True)) == sum(drift(CASES / f"{n}.jsonl") for n in (A, B))
