"""Issue 24 items 3 and 8: one cause vocabulary, and a rewrite never claims a figure its output
does not reproduce.

lint names each break; ``diff`` of the same pair, the HTML report's excerpt of it and
``canonicalize`` (applied or reported) name the same code, because they call lint's
classifier rather than a second one. canonicalize's after-figure is lint's figure of the
written log.
"""

from __future__ import annotations

import json

import orjson
import pytest
from typer.testing import CliRunner

from prefixcache.analyzer import api
from prefixcache.analyzer.canonical.causes import canonicalize_explained, lint_codes, lint_results
from prefixcache.analyzer.canonical.run import canonicalize_paths
from prefixcache.analyzer.html.excerpts import break_diffs
from prefixcache.analyzer.ingest import Ingest
from prefixcache.analyzer.lint.diff import diff_requests
from prefixcache.analyzer.lint.rules import REGISTRY
from prefixcache.cli.app import app
from tests.analyzer.canonical.drift_logs import flip_flop_sections, write
from tests.helpers import CASES, SAMPLES, existing

CASE_FILES = sorted(p.name for p in existing(CASES).glob("*.jsonl"))


def _breaks(path: str) -> dict[tuple[str, int], str]:
    """(session, index) → lint's primary code, for every in-session break lint reports."""
    out = {}
    for key, res in lint_results(Ingest([path])).items():
        pair = [f for f in res.findings if REGISTRY[f.code].scope == "pair" and res.compared_with
                and res.compared_with[0] == key[0]]
        if pair:
            out[key] = pair[0].code
    return out


def _same_codes(path: str) -> dict[tuple[str, int], str]:
    breaks = _breaks(path)
    results = {(c.original.session, c.original.index): c for c in canonicalize_explained(list(Ingest([path])))}
    for (session, index), code in breaks.items():
        assert diff_requests([path], f"{session}:{index}").cause_code == code, (path, session, index)
        canon = {t.code for t in results[(session, index)].transformations}
        # listed at the break, or repaired by an earlier rewrite of the same code (a request that
        # returns to the first-sent form needs no rewrite once the drifted one was restored)
        earlier = {t.code for (s, i), c in results.items() if s == session and i < index
                   for t in c.transformations if t.applied}
        assert code in canon or code in earlier, (path, session, index, code, canon)
    doc = orjson.loads(b"".join(api.lint([path]).json_chunks()))
    for excerpt in break_diffs([path], doc):
        row = doc["requests"][excerpt["row"]]
        key = (row["session"], row["index"])
        if key in breaks:
            assert excerpt["diff"]["cause_code"] == breaks[key]
    return breaks


@pytest.mark.parametrize("case", CASE_FILES)
def test_lint_diff_canonicalize_and_report_name_one_code(case: str) -> None:
    _same_codes(str(CASES / case))


def test_section_flip_flop_is_pc402_everywhere(tmp_path) -> None:
    """The case of the issue: sections alternate between two orders; lint and diff said
    PC402, canonicalize PC401 (its own classifier)."""
    path = str(write(tmp_path / "flip.jsonl", flip_flop_sections()))
    breaks = _same_codes(path)
    assert sorted(breaks.values()) == ["PC402", "PC402", "PC402"]
    codes = {t.code for c in canonicalize_explained(list(Ingest([path]))) for t in c.transformations}
    assert "PC401" not in codes


def test_written_log_lints_at_the_figure_canonicalize_prints(tmp_path) -> None:
    """Item 8: Claude Code's hidden system prompt is not in the log; ``--to openai`` cannot carry
    it. The after-figure is the written file's, lint's figure of that file equals it, and the
    in-memory figure (which counted the hidden prefix) is reported apart."""
    src = str(existing(SAMPLES / "claude_code_session_v1.0.98_fe5e1c67.jsonl"))
    out = tmp_path / "cc.openai.jsonl"
    res = CliRunner().invoke(app, ["canonicalize", src, "--to", "openai", "--out", str(out), "--json"])
    assert res.exit_code == 0, res.output
    doc = json.loads(res.output)
    after, verified, memory = doc["total"]["after"], doc["verified"], doc["in_memory"]
    linted = orjson.loads(b"".join(api.lint([str(out)]).json_chunks()))["summary"]
    assert (linted["prompt_tokens"], linted["reusable_tokens"]) == (after["prompt_tokens"], after["reusable_tokens"])
    assert verified == after and doc["agrees"] is True
    assert memory["prompt_tokens"] > after["prompt_tokens"]  # the hidden prefix was counted in memory only
    # nothing was rewritten, so no request "crossed the provider minimum" because of a rewrite (before:
    # 20 such warnings, all from the hidden prefix the OpenAI file cannot carry)
    assert doc["transformations"] == [] and doc["provider_minimum"] == []


@pytest.mark.slow
def test_both_figures_are_printed(tmp_path) -> None:
    """Item 8, the terminal report: canonicalize's claim and lint's figure of the written file, and the note."""
    src = str(existing(SAMPLES / "claude_code_session_v1.0.98_fe5e1c67.jsonl"))
    out = tmp_path / "cc.openai.jsonl"
    text = CliRunner().invoke(app, ["canonicalize", src, "--to", "openai", "--out", str(out)]).output
    after = orjson.loads(b"".join(api.lint([str(out)]).json_chunks()))["summary"]
    pct = f"{after['reusable_tokens'] / after['prompt_tokens']:.1%}"
    assert f"canonicalize {after['reusable_tokens']:,} of {after['prompt_tokens']:,} ({pct}); lint of the written " \
           f"log {after['reusable_tokens']:,}" in " ".join(text.split())
    assert "cannot carry all of it" in text


def test_every_case_rewrite_is_verified(tmp_path) -> None:
    for case in CASE_FILES:
        run = canonicalize_paths([str(CASES / case)])
        out = tmp_path / case
        with out.open("wb") as fh:
            n = run.write(fh)
        report = run.report(str(out), n, out.read_bytes())
        assert report.agrees and report.verified == report.total.after == report.in_memory, case


def test_cross_session_break_is_pc602_in_canonicalize_too(tmp_path) -> None:
    """session_id_in_system: session 2's first request breaks against session 1 only at the
    per-session uuid of the system prompt. lint and diff call it PC602; canonicalize moves the
    uuid (the PC102 rewrite) and names its rows and change sets PC602 too, while a value that
    changes within a session (timestamp_in_system's clock) keeps PC101."""
    path = str(CASES / "session_id_in_system.jsonl")
    lint = lint_results(Ingest([path]))
    key = next(k for k, r in lint.items() if any(f.code == "PC602" for f in r.findings))
    assert diff_requests([path], f"{key[0]}:{key[1]}", against="session_id_in_system#1:2").cause_code == "PC602"
    run = canonicalize_paths([path])
    with open(tmp_path / "out.jsonl", "wb") as fh:
        run.write(fh)
    report = run.report(str(tmp_path / "out.jsonl"), len(run.results), (tmp_path / "out.jsonl").read_bytes())
    at_break = [t for t in report.transformations if (t.session, t.index) == key and t.applied]
    assert at_break and {t.code for t in at_break} == {"PC602"}
    assert "moved as PC102 is" in at_break[0].description and at_break[0].request_recovered_tokens > 0
    assert {t.code for t in report.transformations if t.applied} == {"PC602"}
    assert all(ch.codes == ["PC602"] and [r.code for r in ch.rules] == ["PC602"] for ch in report.changes)
    clock = canonicalize_paths([str(CASES / "timestamp_in_system.jsonl")])
    assert {t.code for c in clock.results for t in c.transformations if t.applied} == {"PC101"}
    assert lint_codes(clock.results, lint_results(Ingest([str(CASES / "timestamp_in_system.jsonl")]))) == {}
