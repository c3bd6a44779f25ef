"""Issue 11 item 7: advice depends on who controls the fix (self-hosted engine, hosted API,
agent harness)."""

from __future__ import annotations

from prefixcache.analyzer.lint.config import LintConfig
from prefixcache.analyzer.lint.run import lint_paths
from prefixcache.analyzer.lint.rules import REGISTRY
from prefixcache.analyzer.lint.rules.control import Control, advice, control_of
from prefixcache.analyzer.model import Provenance, Request
from tests.helpers import CASES, SAMPLES

DEEPSEEK = SAMPLES / "mini_swe_agent_v1.1_deepseek_reasoner_pvlib-1606.traj.json"


def _req(fmt, model):
    return Request("s", 0, fmt, Provenance("x", 1), model=model)


def test_who_controls_what():
    assert control_of(_req("openai-chat", "deepseek-reasoner")) == Control(None, "DeepSeek")
    assert control_of(_req("mini-swe-agent", "deepseek/deepseek-reasoner")) == Control("mini-swe-agent", "DeepSeek")
    assert control_of(_req("openai-chat", "Qwen/Qwen2.5-7B-Instruct")) == Control(None, None)
    assert control_of(_req("claude-code", "claude-sonnet-4")) == Control("Claude Code", "Anthropic")


def test_hosted_deepseek_user_is_not_told_to_choose_a_template():
    # the API's own DeepSeek-V3.2 encoding (auto) keeps the reasoning, so PC503 fires only when the log is
    # rendered V3.1-style; the advice must still not tell a hosted-API user to pick another template
    run = lint_paths([str(DEEPSEEK)], LintConfig(template="deepseek_v3"))
    pc503 = [f for f in run.findings if f.code == "PC503"]
    assert pc503 and all("Choose a chat template" not in f.fix and "DeepSeek" in f.fix for f in pc503)


def test_self_hosted_engine_keeps_the_template_fix():
    fix = REGISTRY["PC503"].fix
    assert advice("PC503", fix, Control(None, None)) == fix
    assert "Choose a chat template" in fix


def test_harness_prompt_points_at_the_agent():
    text = advice("PC101", REGISTRY["PC101"].fix, Control("Claude Code", "Anthropic"))
    assert text.startswith("Claude Code builds this prompt") and REGISTRY["PC101"].fix in text


def test_own_client_on_hosted_api_keeps_client_fixes():
    run = lint_paths([str(CASES / "timestamp_in_system.jsonl")], LintConfig())
    assert {f.fix for f in run.findings if f.code == "PC101"} == {REGISTRY["PC101"].fix}
