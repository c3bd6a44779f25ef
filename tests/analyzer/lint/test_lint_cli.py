"""``prefixcache lint`` / ``rules`` / ``rule`` end to end: formats, exit codes, config."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from prefixcache.analyzer.lint.config import LintConfig, load_config
from prefixcache.analyzer.errors import ConfigError
from prefixcache.cli.app import app
from prefixcache.analyzer.lint.rules import RULES
from tests.helpers import CASES, SAMPLES, existing

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
    assert res.exit_code == 1 and "77.7%" in res.stdout
    # percentages and fractions both parse; the run is at 77.7% (harmony framing for its gpt-5 model)
    assert lint(path, "-f", "text", "--fail-under", "90%").exit_code == 1
    assert lint(path, "-f", "text", "--fail-under", "75 %").exit_code == 0
    assert lint(path, "-f", "text", "--fail-under", "0.75").exit_code == 0
    for bad in ("75", "150%", "most"):
        res = runner.invoke(app, ["lint", path, "--fail-under", bad])
        assert res.exit_code == 2 and "fail-under" in res.stderr, bad


def test_json_shorthand(cases):
    path = str(cases / "timestamp_in_system.jsonl")
    assert json.loads(lint(path, "--json").stdout) == json.loads(lint(path, "--format", "json").stdout)
    res = runner.invoke(app, ["lint", path, "--json", "--format", "text"])
    assert res.exit_code == 2 and "--json" in res.stderr


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
    # group names (as `prefixcache rules` shows them) and rule names select too
    res = lint(path, "-f", "json", "--select", "volatile")
    assert {f["code"] for f in json.loads(res.stdout)["findings"]} == {"PC101", "PC103"}
    res = lint(path, "-f", "json", "--select", "Volatile", "--ignore", "volatile-value-early")
    assert {f["code"] for f in json.loads(res.stdout)["findings"]} == {"PC101"}
    res = lint(path, "-f", "json", "--select", "tools,history")
    assert res.exit_code == 0 and json.loads(res.stdout)["findings"] == []
    res = runner.invoke(app, ["lint", path, "--select", "volatil"])
    assert res.exit_code == 2 and "groups: history, provider" in res.stderr


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
    assert ":4: PC201 error [tool-order] session tool_order_shuffle#1 request 3, tools" in text


def test_single_document_logs_get_no_made_up_line(tmp_path):
    """Trajectory steps live inside one JSON document: the record number is not a
    line, so github annotations are file-level and SARIF carries the JSON path."""
    swe = existing(SAMPLES / "swe_agent_traj_function_calling_with_per_step_messages_marshmallow-1867.traj")
    gh = [ln for ln in lint(str(swe), "-f", "github").stdout.splitlines() if ln.startswith("::warning")]
    assert len(gh) == 7 and all(",line=" not in ln for ln in gh)
    assert f"session {swe.stem} request 6, trajectory[5].messages[3].content:" in gh[0]
    result = json.loads(lint(str(swe), "-f", "sarif").stdout)["runs"][0]["results"][0]
    loc = result["locations"][0]
    assert "region" not in loc["physicalLocation"]
    assert loc["logicalLocations"][0]["fullyQualifiedName"] == "trajectory[5].messages[3].content"
    text = lint(str(swe), "-f", "text").stdout.splitlines()[0]
    assert text.startswith(f"{swe}: PC404 warning [history-rewritten] session {swe.stem} request 6, trajectory[5]")


def test_usage_only_log_reports_the_providers_counts(tmp_path):
    """OpenHands trajectories: prompts not logged. Honest output: reported prompt and
    cached tokens, no findings, no reusable fraction, and --fail-under not judged."""
    path = str(existing(SAMPLES / "openhands_trajectory_events_basic_gui_mode.json"))
    res = lint(path, "-f", "text", "--fail-under", "50%")
    assert res.exit_code == 0 and "--fail-under not applied" in res.stderr
    assert "none with a logged prompt" in res.stdout
    assert "reported 17,297 prompt tokens, 11,793 cached (68.2%" in res.stdout
    doc = json.loads(lint(path, "--json").stdout)
    assert doc["summary"]["prompt_tokens"] == 0 and doc["summary"]["reusable_fraction"] is None
    assert doc["summary"]["usage_only"] == {"requests": 4, "reported_prompt_tokens": 17297,
                                            "reported_cached_tokens": 11793, "reported_cached_fraction": 0.681795}
    assert all(r["usage_only"] and r["prompt_tokens"] is None for r in doc["requests"])
    rich = lint(path, env={"COLUMNS": "200"}).stdout
    assert "prompts not logged" in rich and "Waterfall" not in rich and "No findings" not in rich


def test_encrypted_reasoning_does_not_fail_ci():
    path = str(existing(SAMPLES / "codex_rollout_synthetic_fixture_claude-code-log.jsonl"))
    res = lint(path, "-f", "github")
    assert res.exit_code == 0 and res.stdout.startswith("::notice file=") and ",line=8," in res.stdout
    assert lint(path, "-f", "text", "--fail-on", "info").exit_code == 1


def test_rich_report_shows_summary_waterfall_and_fix(cases):
    res = lint(str(cases / "sliding_window.jsonl"), env={"COLUMNS": "200"})
    out = res.stdout
    assert res.exit_code == 1
    assert "Sessions" in out and "Waterfall" in out and "lost · PC403 history-truncated" in out
    assert "PC403 history-truncated" in out and "fix:" in out and "was:" in out


def test_redact_hides_prompt_text(cases):
    out = lint(str(cases / "timestamp_in_system.jsonl"), "-f", "json", "--redact").stdout
    assert "10:31" not in out and "chars, h:" in out


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
    (sub / "prefixcache.toml").write_text('fail-under = "80%"\n')
    assert load_config(start=sub).fail_under == pytest.approx(0.8)
    (sub / "prefixcache.toml").write_text('fail-under = 80\n')
    with pytest.raises(ConfigError, match="fail-under: must be between 0 and 1"):
        load_config(start=sub)
    (sub / "prefixcache.toml").unlink()
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
    res = runner.invoke(app, ["rules"], env={"COLUMNS": "80"})
    assert res.exit_code == 0 and "PC101" in res.stdout and "PC602" in res.stdout
    # not a terminal: plain aligned lines, nothing cut, whatever the width
    lines = res.stdout.splitlines()
    assert lines[1 + len(RULES)] == "" and lines[2 + len(RULES)].startswith("Severity")  # then the severity table
    lines = lines[: 1 + len(RULES)]
    assert lines[0].split() == ["code", "name", "group", "severity", "scope", "finds"]
    assert lines[1].startswith("PC001  unclassified-divergence  -") and lines[1].endswith("say why for sure.")
    assert all(ln == ln.rstrip() and "│" not in ln for ln in lines)
    doc = json.loads(runner.invoke(app, ["rule", "PC403", "--json"]).stdout)
    assert doc["name"] == "history-truncated" and doc["why_it_breaks_caching"] and doc["fix_safety"]
    out = runner.invoke(app, ["rule", "volatile-timestamp"], env={"COLUMNS": "120"}).stdout
    for section in ("What it does", "Why it breaks caching", "Example", "Use instead", "Fix safety"):
        assert section in out
    assert runner.invoke(app, ["rule", "PC999"]).exit_code == 2


def test_mixed_directory_end_to_end(tmp_path):
    """A directory of mixed real logs (all samples) plus the synthetic cases, in one run."""
    existing(SAMPLES)
    existing(CASES)
    res = lint(str(SAMPLES), str(CASES / "*.jsonl"), "-f", "json")
    assert res.exit_code == 1
    doc = json.loads(res.stdout)
    s = doc["summary"]
    assert s["reusable_tokens"] + s["new_tokens"] + s["lost_tokens"] == s["prompt_tokens"]
    content = [r for r in doc["requests"] if not r["usage_only"]]
    assert s["prompt_tokens"] == sum(r["prompt_tokens"] for r in content)
    assert s["usage_only"]["requests"] == 4 == len(doc["requests"]) - len(content)
    assert s["sessions"] == len(doc["sessions"]) >= 20
    formats = {r["source"].rsplit("/", 1)[-1] for r in doc["requests"]}
    assert len(formats) == 17  # 8 samples + 9 cases, every file linted
    codes = {f["code"] for f in doc["findings"]}
    assert {"PC101", "PC201", "PC203", "PC301", "PC302", "PC403", "PC404", "PC503", "PC602"} <= codes


def test_fix_writes_a_cache_stable_copy_and_lints_it(cases, tmp_path):
    """`lint --fix`: the canonicalize engine writes NAME.fixed.EXT beside each input; the
    original is untouched; the copy's per-second clock no longer breaks the prefix."""
    src = tmp_path / "timestamp_in_system.jsonl"
    src.write_bytes((cases / "timestamp_in_system.jsonl").read_bytes())
    before = json.loads(lint(str(src), "--format", "json").stdout)
    res = lint("--fix", str(src), "--format", "json")
    fixed = tmp_path / "timestamp_in_system.fixed.jsonl"
    assert fixed.exists() and src.read_bytes() == (cases / "timestamp_in_system.jsonl").read_bytes()
    after = json.loads(res.stdout)
    assert {f["code"] for f in before["findings"]} >= {"PC101"}
    assert "PC101" not in {f["code"] for f in after["findings"]}
    assert after["summary"]["reusable_tokens"] > 2 * before["summary"]["reusable_tokens"]
    assert len(fixed.read_text().splitlines()) == 5
    assert lint("--fix", "-", input="{}").exit_code == 2  # no place for a copy of stdin


def test_fail_under_says_why_it_failed(cases):
    res = lint(str(cases / "clean_append_only.jsonl"), "--fail-under", "80%", "--format", "github")
    assert res.exit_code == 1
    assert "below --fail-under 80.0%" in res.stderr
    assert "::error title=prefixcache fail-under::" in res.stdout


def test_fix_never_refixes_its_own_copies(cases, tmp_path):
    src = tmp_path / "timestamp_in_system.jsonl"
    src.write_bytes((cases / "timestamp_in_system.jsonl").read_bytes())
    assert lint("--fix", str(src), "--format", "json").exit_code == 0
    assert lint("--fix", str(tmp_path), "--format", "json", "--force").exit_code == 0
    assert sorted(p.name for p in tmp_path.iterdir()) == ["timestamp_in_system.fixed.jsonl", "timestamp_in_system.jsonl"]


def test_fix_refuses_to_overwrite_an_earlier_copy_without_force(cases, tmp_path):
    src = tmp_path / "timestamp_in_system.jsonl"
    src.write_bytes((cases / "timestamp_in_system.jsonl").read_bytes())
    copy = tmp_path / "timestamp_in_system.fixed.jsonl"
    copy.write_text("mine\n")
    res = runner.invoke(app, ["lint", "--fix", str(src), "--format", "json"])
    assert res.exit_code == 2 and "pass --force" in res.stderr and copy.read_text() == "mine\n"
    res = lint("--fix", str(src), "--format", "json", "--force")
    assert res.exit_code == 0 and len(copy.read_text().splitlines()) == 5
