"""Logs built the way issue 24 describes each drift: an OpenAI Chat session whose system prompt
drifts in one way, its conversation growing append-only otherwise.

Each builder returns the JSONL lines (one request body a line); :func:`write` saves them.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Callable, Sequence

#: Sections of a system prompt (Markdown headings, several lines each), in their first-sent order.
SECTIONS = (
    "# Identity\nYou are a coding agent working in the user's repository.\nYou act only through the tools.",
    "## Rules\n1. Read a file before you change it.\n2. Prefer small, reviewable edits.\n"
    "3. Run the tests after every change to code.\n4. Never print secrets found in the workspace.",
    "## Style\nKeep the user's style: indentation, quotes and naming.\nExplain destructive commands first.",
    "## Project notes\nThe repository is a small web service in Python 3.11; sources under app/, tests under "
    "tests/.\nDatabase access goes through app/db.py; never open raw connections.",
    "## Tools\nUse the search tool before guessing where a symbol is defined.\nUse the patch tool for edits.",
    "## Reporting\nReport what you verified, not what you expect.\nKeep answers short unless asked for detail.",
)
TURNS = ("Fix the failing test in tests/test_dates.py.", "Now add a test for leap years.",
         "Also handle two-digit years.", "Update the changelog.", "Run the whole suite.")
TOOLS = [{"type": "function", "function": {"name": "read_file", "description": "Read a file.",
                                           "parameters": {"type": "object", "properties": {"path": {"type": "string"}},
                                                          "required": ["path"]}}}]


def session(systems: Sequence[str], model: str = "gpt-4.1") -> list[str]:
    """One session of ``len(systems)`` requests: request k sends ``systems[k]`` and the first
    k+1 user turns (each answered)."""
    lines = []
    for k, system in enumerate(systems):
        msgs: list[dict] = [{"role": "system", "content": system}]
        for j in range(k + 1):
            msgs.append({"role": "user", "content": TURNS[j % len(TURNS)] + f" (step {j})"})
            if j < k:
                msgs.append({"role": "assistant", "content": f"Done with step {j}: the change is in and tests pass."})
        lines.append(json.dumps({"model": model, "user": "s1", "messages": msgs, "tools": TOOLS}))
    return lines


def flip_flop_sections(n: int = 4) -> list[str]:
    """Item 2: the system prompt's sections alternate between two orders (requests 1 and 3
    swap two sections, requests 0 and 2 send the first order)."""
    first = "\n\n".join(SECTIONS)
    swapped = list(SECTIONS)
    swapped[2], swapped[3] = swapped[3], swapped[2]
    return session([first if k % 2 == 0 else "\n\n".join(swapped) for k in range(n)])


def _stamp(k: int) -> str:
    return f"2026-03-02T10:31:{k:02d}.{137 + k:03d}Z"


def _memory(stamp: str) -> str:
    return f'<memory updated="{stamp}">\nThe user prefers pytest over unittest.\nThe project pins Python 3.11.\n</memory>'


def memory_block(n: int = 4, stamp: Callable[[int], str] = _stamp) -> list[str]:
    """Item 1: a ``<memory updated="...">...</memory>`` block whose attribute is a millisecond
    timestamp that changes on every request, between other sections."""
    def system(k: int) -> str:
        return "\n\n".join([SECTIONS[0], _memory(stamp(k)), *SECTIONS[1:]])
    return session([system(k) for k in range(n)])


def memory_and_flip_flop(n: int = 4) -> list[str]:
    """Two drifts in one request: the ``<memory updated="...">`` timestamp of :func:`memory_block`
    changes on every request, and requests 1 and 3 also swap two sections (:func:`flip_flop_sections`)."""
    def system(k: int) -> str:
        sections = list(SECTIONS)
        if k % 2:
            sections[2], sections[3] = sections[3], sections[2]
        return "\n\n".join([sections[0], _memory(_stamp(k)), *sections[1:]])
    return session([system(k) for k in range(n)])


def write(path: Path, lines: Sequence[str]) -> Path:
    """Write ``lines`` as a JSONL file at ``path``; returns it."""
    path.write_text("".join(line + "\n" for line in lines))
    return path
