"""``prefixcache lint`` / ``rules`` / ``rule`` end to end: formats, exit codes, config."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from prefixcache.analyzer.config import LintConfig, load_config
from prefixcache.analyzer.errors import ConfigError
from prefixcache.cli.app import app
from tests.conftest import CASES, SAMPLES, need

runner = CliRunner()


def lint(*args: str, **kw):
    return runner.invoke(app, ["lint", *args], catch_exceptions=False, **kw)


def test_json_report_schema_and_exit_code(cases):
    res = lint(str(cases / "timestamp_in_system.jsonl"), "--format", "json")
    assert res.exit_code == 1
    doc = json.loads(res.stdout)
    s = doc["summary"]
    assert s["requests"] == 5 and s["prompt_tokens"] == sum(r["prompt_tokens"] for r in doc["requests"])
    assert s["reusable_tokens"] + s["new_tokens"] + s["lost_tokens"] == s["prompt_tokens"]
    assert set(s["lost_tokens_by_code"]) == {"PC101"}
    for key in ("session", "index", "prompt_tokens", "reusable_tokens", "shared_with"):
        assert key in doc["requests"][0]
    f = next(f for f in doc["findings"] if f["code"] == "PC101")
    for key in ("code", "name", "severity", "session", "request", "segment", "json_path", "char", "token", "message", "fix"):
        assert key in f
    assert (f["request"], f["segment"], f["json_path"], f["line"]) == (1, "system", "messages[0].content", 1)


def test_clean_log_exits_zero_unless_below_fail_under(cases):
    path = str(cases / "clean_append_only.jsonl")
    assert lint(path, "-f", "text").exit_code == 0
    res = lint(path, "-f", "text", "--fail-under", "0.9")
    assert res.exit_code == 1 and "77.6%" in res.stdout


def test_select_ignore_and_fail_on(cases):
    path = str(cases / "timestamp_in_system.jsonl")
    res = lint(path, "-f", "json", "--select", "PC2,PC3")
    assert res.exit_code == 0 and json.loads(res.stdout)["findings"] == []
    # the waterfall still names the true cause
    assert set(json.loads(res.stdout)["summary"]["lost_tokens_by_code"]) == {"PC101"}
    res = lint(path, "-f", "json", "--ignore", "PC101")
    assert {f["code"] for f in json.loads(res.stdout)["findings"]} == {"PC103"} and res.exit_code == 1
    assert lint(path, "-f", "json", "--ignore", "PC101", "--fail-on", "error").exit_code == 0
    assert lint(path, "--select", "PC999").exit_code == 2


def test_sarif_github_and_text(cases):
    path = str(cases / "tool_order_shuffle.jsonl")
    sarif = json.loads(lint(path, "-f", "sarif").stdout)
    assert sarif["version"] == "2.1.0"
    run = sarif["runs"][0]
    assert {r["id"] for r in run["tool"]["driver"]["rules"]} >= {"PC001", "PC201", "PC602"}
    (result,) = run["results"]
    assert result["ruleId"] == "PC201" and result["level"] == "error"
    assert result["locations"][0]["physicalLocation"]["region"]["startLine"] == 4
    gh = lint(path, "-f", "github").stdout.splitlines()
    assert gh[0].startswith("::error file=") and "line=4" in gh[0] and "title=PC201 tool-order" in gh[0]
    text = lint(path, "-f", "text").stdout
    assert ":4: PC201 error [tool-order]" in text


def test_rich_report_shows_summary_waterfall_and_fix(cases):
    res = lint(str(cases / "sliding_window.jsonl"), env={"COLUMNS": "140"})
    out = res.stdout
    assert res.exit_code == 1
    assert "Sessions" in out and "Waterfall" in out and "lost · PC403 history-truncated" in out
    assert "PC403 history-truncated" in out and "fix:" in out and "was:" in out


def test_redact_hides_prompt_text(cases):
    out = lint(str(cases / "timestamp_in_system.jsonl"), "-f", "json", "--redact").stdout
    assert "10:31" not in out and "xxh64" in out


def test_config_file(tmp_path, monkeypatch, cases):
    (tmp_path / "prefixcache.toml").write_text('select = ["PC1"]\nignore = ["PC103"]\nfail-on = "error"\nblock-size = 64\n')
    monkeypatch.chdir(tmp_path)
    cfg = load_config()
    assert cfg == LintConfig(block_size=64, select=("PC1",), ignore=("PC103",), fail_on="error",
                             source=str(tmp_path / "prefixcache.toml"))
    doc = json.loads(lint(str(cases / "timestamp_in_system.jsonl"), "-f", "json").stdout)
    assert {f["code"] for f in doc["findings"]} == {"PC101"} and doc["summary"]["block_size"] == 64
    # command-line options win over the file
    assert lint(str(cases / "timestamp_in_system.jsonl"), "-f", "json", "--block-size", "16").exit_code == 1


def test_pyproject_table_and_bad_config(tmp_path, monkeypatch, cases):
    (tmp_path / "pyproject.toml").write_text('[tool.prefixcache]\nfail-under = 0.5\n[tool.prefixcache.severity]\nPC101 = "info"\n')
    sub = tmp_path / "pkg"
    sub.mkdir()
    monkeypatch.chdir(sub)
    cfg = load_config()
    assert cfg.fail_under == 0.5 and cfg.severity == {"PC101": "info"}
    doc = json.loads(lint(str(cases / "timestamp_in_system.jsonl"), "-f", "json").stdout)
    assert {f["severity"] for f in doc["findings"] if f["code"] == "PC101"} == {"info"}
    (tmp_path / "prefixcache.toml").write_text("blocksize = 3\n")
    with pytest.raises(ConfigError, match="unknown key 'blocksize'"):
        load_config(start=sub)
    res = runner.invoke(app, ["lint", str(cases / "timestamp_in_system.jsonl")])
    assert res.exit_code == 2 and "blocksize" in res.stderr


def test_missing_input_is_a_usage_error(tmp_path):
    res = runner.invoke(app, ["lint", str(tmp_path / "nope.jsonl")])
    assert res.exit_code == 2 and "nope.jsonl" in res.stderr


def test_rules_and_rule_commands():
    res = runner.invoke(app, ["rules"], env={"COLUMNS": "200"})
    assert res.exit_code == 0 and "PC101" in res.stdout and "PC602" in res.stdout
    doc = json.loads(runner.invoke(app, ["rule", "PC403", "--json"]).stdout)
    assert doc["name"] == "history-truncated" and doc["why_it_breaks_caching"] and doc["fix_safety"]
    out = runner.invoke(app, ["rule", "volatile-timestamp"], env={"COLUMNS": "120"}).stdout
    for section in ("What it does", "Why it breaks caching", "Example", "Use instead", "Fix safety"):
        assert section in out
    assert runner.invoke(app, ["rule", "PC999"]).exit_code == 2


def test_mixed_directory_end_to_end(tmp_path):
    """A directory of mixed real logs (all samples) plus the synthetic cases, in one run."""
    need(SAMPLES)
    need(CASES)
    res = lint(str(SAMPLES), str(CASES / "*.jsonl"), "-f", "json")
    assert res.exit_code == 1
    doc = json.loads(res.stdout)
    s = doc["summary"]
    assert s["reusable_tokens"] + s["new_tokens"] + s["lost_tokens"] == s["prompt_tokens"]
    assert s["sessions"] == len(doc["sessions"]) >= 20
    formats = {r["source"].rsplit("/", 1)[-1] for r in doc["requests"]}
    assert len(formats) == 17  # 8 samples + 9 cases, every file linted
    codes = {f["code"] for f in doc["findings"]}
    assert {"PC101", "PC201", "PC203", "PC301", "PC302", "PC403", "PC404", "PC503", "PC602"} <= codes
