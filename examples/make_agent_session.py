"""Writes examples/agent_session.jsonl: a small coding-agent session (OpenAI Chat
Completions request bodies, one per line) written for this project.

Each request re-sends the whole conversation, as agents do. The system prompt opens
with a per-second clock, the classic cache breaker (goose #2431): every request's
reusable prefix ends a few tokens in. Run: python examples/make_agent_session.py
"""

import json
from pathlib import Path

SYSTEM = """Current time: {clock} UTC
You are a coding agent working in the user's repository. You act only through the tools below.

Rules:
1. Read a file before you change it.
2. Prefer small, reviewable edits.
3. Run the tests after every change to code.
4. Never print secrets found in the workspace.
5. When a command fails, read its output before retrying.
6. Keep the user's style: indentation, quotes, naming.
7. Report what you verified, not what you expect."""

TOOLS = [
    {"type": "function", "function": {"name": "read_file", "description": "Read a text file from the repository.",
     "parameters": {"type": "object", "properties": {"path": {"type": "string", "description": "Path relative to the repository root."}}, "required": ["path"]}}},
    {"type": "function", "function": {"name": "run_shell", "description": "Run a shell command in the repository and return its output.",
     "parameters": {"type": "object", "properties": {"command": {"type": "string"}, "timeout_s": {"type": "integer", "description": "Seconds before the command is killed."}}, "required": ["command"]}}},
    {"type": "function", "function": {"name": "apply_patch", "description": "Apply a unified diff to the repository.",
     "parameters": {"type": "object", "properties": {"patch": {"type": "string"}}, "required": ["patch"]}}},
]

TURNS = [
    ("The test suite fails on test_parse_date. Can you fix it?", None),
    (None, ("call_1", "run_shell", {"command": "pytest -q tests/test_dates.py"},
            "F.\n=== FAILURES ===\ntest_parse_date: AssertionError: assert parse_date('2024-02-30') is None\n1 failed, 1 passed in 0.04s")),
    (None, ("call_2", "read_file", {"path": "app/dates.py"},
            "from datetime import date\n\n\ndef parse_date(text):\n    y, m, d = (int(p) for p in text.split('-'))\n    return date(y, m, d)\n")),
    (None, ("call_3", "apply_patch", {"patch": "--- a/app/dates.py\n+++ b/app/dates.py\n@@\n def parse_date(text):\n     y, m, d = (int(p) for p in text.split('-'))\n-    return date(y, m, d)\n+    try:\n+        return date(y, m, d)\n+    except ValueError:\n+        return None\n"},
            "Patch applied: app/dates.py (1 hunk)")),
    (None, ("call_4", "run_shell", {"command": "pytest -q"}, "....\n4 passed in 0.05s")),
]


def main() -> None:
    messages = []
    lines = []
    clocks = ["10:02:11", "10:02:19", "10:02:26", "10:02:40", "10:02:47", "10:02:55"]
    for turn, (user, call) in enumerate(TURNS + [("Thanks. Anything else to check?", None)]):
        if user and messages:
            messages.append({"role": "assistant", "content": "Fixed: parse_date now returns None for impossible dates; all 4 tests pass."})
        if user:
            messages.append({"role": "user", "content": user})
        if call:
            cid, name, args, output = call
            messages.append({"role": "assistant", "content": None, "tool_calls": [
                {"id": cid, "type": "function", "function": {"name": name, "arguments": json.dumps(args)}}]})
            messages.append({"role": "tool", "tool_call_id": cid, "content": output})
        body = {"model": "SmolLM2-135M-Instruct", "user": "demo-session",
                "messages": [{"role": "system", "content": SYSTEM.format(clock="2026-11-29 " + clocks[turn])}] + messages,
                "tools": TOOLS}
        lines.append(json.dumps(body))
        if user and turn == len(TURNS):
            break
    Path(__file__).with_name("agent_session.jsonl").write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
