"""The public test cases of the peer promptcachelint 0.1.0 (PyPI, MIT licence; its ``tests/`` in the
sdist: ``conftest.py``, ``test_analyze.py``, ``test_diff_and_detectors.py``, ``test_review_*.py``) as
logs prefixcache reads: Anthropic Messages ``{timestamp, request, response}`` pairs.

Each :class:`PeerCase` rebuilds one of its cases from its data — the request shapes its
``anthropic_body`` / ``turn`` helpers produce (a ~6,400-character system prompt, ``claude-opus-5``,
marks on the system block and the newest turn), the times and the usage it feeds — and names the codes
the peer expects (``CL0nn``) and ours for the same thing. Generated at test time; nothing is copied
but the case data. Where the two disagree the case says so (``ours`` differs from ``peer``'s meaning)
and docs/methods/peers.md explains why.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

#: The peer's long system prompt (its ``conftest.LONG``): 200 repetitions of one sentence.
LONG = "You are a meticulous assistant. " * 200
#: A fixed epoch for the cases' times (the peer uses 1.0, 2.0, ... seconds).
T0 = 1_790_000_000.0


def body(*, system: str = LONG, tools: list[dict] | None = None, history: list[dict] | None = None,
         user: str = "hello", mark_system: bool = True, mark_last: bool = False, top_level: bool = False,
         model: str = "claude-opus-5", ttl: str | None = None, **extra: Any) -> dict[str, Any]:
    """One Anthropic request body shaped as the peer's ``anthropic_body`` builds it."""
    cc: dict[str, Any] = {"type": "ephemeral", **({"ttl": ttl} if ttl else {})}
    sys_block: dict[str, Any] = {"type": "text", "text": system, **({"cache_control": dict(cc)} if mark_system else {})}
    last: dict[str, Any] = {"type": "text", "text": user, **({"cache_control": dict(cc)} if mark_last else {})}
    out: dict[str, Any] = {"model": model, "max_tokens": 1024, "system": [sys_block],
                           "messages": [*(history or []), {"role": "user", "content": [last]}]}
    if tools is not None:
        out["tools"] = tools
    if top_level:
        out["cache_control"] = {"type": "ephemeral"}
    return out | extra


def tool(name: str) -> dict[str, Any]:
    """The peer's one-parameter tool definition."""
    return {"name": name, "description": f"{name} tool",
            "input_schema": {"type": "object", "properties": {"q": {"type": "string"}}}}


def turn(n: int, **kw: Any) -> dict[str, Any]:
    """A growing conversation: ``n`` completed exchanges plus one new user turn, the newest turn marked."""
    history: list[dict] = []
    for i in range(n):
        history += [{"role": "user", "content": [{"type": "text", "text": f"q{i}"}]},
                    {"role": "assistant", "content": f"a{i}"}]
    return body(history=history, user=f"q{n}", mark_last=True, **kw)


@dataclass(frozen=True)
class PeerCase:
    """One peer case: ``records`` (body, seconds after :data:`T0`, usage ``(input, read, write)`` or
    None), the peer's test it comes from, the codes the peer expects, the lint codes we expect (and
    must not report: ``absent``), and ``agree``: False where we deliberately differ (peers.md)."""

    name: str
    test: str
    records: list[tuple[dict, float, tuple[int, int, int] | None]]
    peer: tuple[str, ...]
    ours: tuple[str, ...]
    absent: tuple[str, ...] = ()
    agree: bool = True
    note: str = ""
    extra: dict = field(default_factory=dict)

    def write(self, path: Path) -> Path:
        """The case as a JSONL log of request/response pairs."""
        lines = []
        for b, at, usage in self.records:
            rec: dict[str, Any] = {"timestamp": T0 + at, "request": b}
            if usage is not None:
                i, r, w = usage
                rec["response"] = {"model": b["model"], "usage": {"input_tokens": i, "cache_read_input_tokens": r,
                                                                   "cache_creation_input_tokens": w,
                                                                   "output_tokens": 10}}
            lines.append(json.dumps(rec))
        path.write_text("\n".join(lines) + "\n")
        return path


def _lookback_history(parallel: bool) -> list[dict]:
    if parallel:  # one assistant turn with 25 parallel tool calls, then their 25 results
        return [{"role": "user", "content": [{"type": "text", "text": "q0"}]},
                {"role": "assistant", "content": [{"type": "tool_use", "id": f"t{i}", "name": "f", "input": {}}
                                                  for i in range(25)]},
                {"role": "user", "content": [{"type": "tool_result", "tool_use_id": f"t{i}", "content": "ok"}
                                             for i in range(25)]}]
    return [{"role": "user", "content": [{"type": "text", "text": "q0"}]}] + [
        {"role": "assistant", "content": f"step {i}"} for i in range(25)]


def _marked_tools(names: str) -> list[dict]:
    return [tool(n) | {"cache_control": {"type": "ephemeral"}} for n in names]


#: The peer's cases that concern request-side cache configuration (its CL003, CL004, CL007, CL010,
#: CL011, CL013, CL014) and the clean baseline.
CASES: tuple[PeerCase, ...] = (
    PeerCase("clean-conversation", "test_analyze.py::test_clean_conversation_has_no_findings_and_sums_usage",
             [(turn(0), 1, (10, 0, 1600)), (turn(1), 2, (10, 1600, 20)), (turn(2), 3, (10, 1620, 20))],
             peer=(), ours=(), absent=("PC601", "PC603", "PC604", "PC605", "PC606", "PC607")),
    PeerCase("no-breakpoint", "test_diff_and_detectors.py::test_no_breakpoint_and_too_short",
             [(body(mark_system=False, user="q0"), 1, (1610, 0, 0)),
              (body(mark_system=False, user="q1", history=[{"role": "user", "content": [{"type": "text", "text": "q0"}]},
                                                          {"role": "assistant", "content": "a0"}]), 2, (1620, 0, 0))],
             peer=("CL010",), ours=("PC603",),
             note="the peer reports the first request alone; we report once the prefix is sent again"),
    PeerCase("too-short", "test_diff_and_detectors.py::test_no_breakpoint_and_too_short",
             [(turn(0, system="tiny system prompt"), 1, None), (turn(1, system="tiny system prompt"), 2, None)],
             peer=("CL011",), ours=(), absent=("PC601",), agree=False,
             note="a ~10-token prompt: below the minimum, but under 64 shared tokens there is no reuse to lose"),
    PeerCase("below-minimum", "test_diff_and_detectors.py::test_no_breakpoint_and_too_short (a reused prefix)",
             [(turn(0, model="claude-opus-4-6"), 1, (1610, 0, 0)), (turn(1, model="claude-opus-4-6"), 2, (1620, 0, 0))],
             peer=("CL011",), ours=("PC601",),
             note="the peer's ~1,600-token prefix on a 4,096-token model"),
    PeerCase("too-many-breakpoints", "test_diff_and_detectors.py::test_too_many_breakpoints",
             [(body(tools=_marked_tools("abcd")), 1, None)], peer=("CL013",), ours=("PC604",)),
    PeerCase("automatic-mark-takes-a-slot", "test_review_fixes.py::test_top_level_cache_control_counts_as_a_slot",
             [(body(tools=_marked_tools("abc"), top_level=True), 1, None)], peer=("CL013",), ours=("PC604",)),
    PeerCase("breakpoint-moved-back", "test_analyze.py::test_breakpoint_moved_back_and_write_without_read",
             [(turn(0), 1, None),
              (body(history=[{"role": "user", "content": [{"type": "text", "text": "q0"}]},
                             {"role": "assistant", "content": "a0"}], user="q1"), 2, None)],
             peer=("CL004",), ours=("PC605",)),
    PeerCase("write-without-read", "test_analyze.py::test_breakpoint_moved_back_and_write_without_read",
             [(body(user="unique 1", mark_system=False, mark_last=True), 1, (0, 0, 1700)),
              (body(user="unique 2", mark_system=False, mark_last=True), 2, (0, 0, 1700))],
             peer=("CL014",), ours=("PC607",)),
    PeerCase("marked-head-not-read", "test_review_round2.py::test_marked_head_with_no_reads_is_an_unexplained_miss_not_placement",
             [(body(user=f"unique {i}", mark_last=True), i, (0, 0, 1700)) for i in range(2)],
             peer=("CL005",), ours=(), absent=("PC607",),
             note="a marked, identical head read 0: provider-side, not placement (simulate classifies it)"),
    PeerCase("lookback-exceeded", "test_analyze.py::test_lookback_exceeded",
             [(turn(0), 1, None), (body(history=_lookback_history(False), user="q1", mark_last=True), 2, None)],
             peer=("CL007",), ours=("PC606",)),
    PeerCase("parallel-tool-calls", "test_review_fixes.py::test_parallel_tool_calls_do_not_trigger_lookback_warning",
             [(turn(0), 1, None), (body(history=_lookback_history(True), user="x q1", mark_last=True), 2, None)],
             peer=(), ours=("PC606",), agree=False,
             note="50 content blocks: the docs count content blocks, the peer collapses tool runs"),
)


#: Scope cases for simulate (the peer's CL003): a model switch and a thinking switch.
SCOPE_CASES: tuple[PeerCase, ...] = (
    PeerCase("model-switch", "test_review_round3.py::test_marked_head_across_models_is_not_an_unexplained_miss",
             [(body(user=f"u{i}", mark_last=True, model=m), i, (0, 0, 1700))
              for i, m in enumerate(["claude-opus-5", "claude-sonnet-5"])],
             peer=("CL003",), ours=()),
    PeerCase("model-switch-conversation", "test_analyze.py::test_scope_changes",
             [(turn(0), 1, None), (turn(1, model="claude-sonnet-5"), 2, None)], peer=("CL003",), ours=()),
    PeerCase("thinking-switch", "test_analyze.py::test_scope_changes",
             [(turn(0), 1, None), (turn(1) | {"thinking": {"type": "adaptive"}}, 2, None)], peer=("CL003",), ours=()),
)
