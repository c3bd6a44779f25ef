"""``prefixcache report``: the HTML holds the JSON of the commands it names, number for number.

Each test writes a report with the CLI, reads back the documents the page embeds
(``<script type="application/json" id="doc-…">``) and the commands it shows, runs those
commands and compares: every figure in the tables and charts is one of the documents'.
The browser checks (console errors, rendered charts, a screenshot) are in
``test_report_html_browser.py``.
"""

from __future__ import annotations

import html
import re
import shlex
from pathlib import Path

import orjson
import pytest
from markupsafe import escape
from typer.testing import CliRunner

from prefixcache.cli.app import app
from tests.helpers import CASES, EXAMPLES, FIXTURES, SAMPLES, existing

CASE = CASES / "timestamp_in_system.jsonl"
REPLAY = FIXTURES / "replay" / "agent_session_chatml_tools.jsonl"


def report(tmp: Path, *args: str, name: str = "r.html") -> str:
    out = tmp / name
    res = CliRunner().invoke(app, ["report", *args, "-o", str(out)])
    assert res.exit_code == 0, res.output
    return out.read_text()


def island(page: str, name: str):
    m = re.search(rf'<script type="application/json" id="{name}">(.*?)</script>', page, re.S)
    assert m, f"no {name} in the page"
    return orjson.loads(m.group(1))


def shown_command(page: str, name: str) -> list[str]:
    m = re.search(rf'<pre class="cmd" data-command="{name}">(.*?)</pre>', page, re.S)
    assert m, f"no {name} command in the page"
    argv = shlex.split(html.unescape(m.group(1)))
    assert argv[0] == "prefixcache"
    return argv[1:]


def run_json(argv: list[str]):
    res = CliRunner().invoke(app, argv)
    assert res.exit_code in (0, 1), res.output
    return orjson.loads(res.stdout)


def cells(page: str) -> dict[str, str]:
    return {k: html.unescape(v) for k, v in re.findall(r'<td class="num" data-key="([^"]+)">([^<]*)</td>', page)}


@pytest.fixture(scope="module")
def case_page(tmp_path_factory) -> str:
    # an engine's page (capacity sweep, belady); the case's gpt-4.1 alone picks openai (test_report_answers.py)
    return report(tmp_path_factory.mktemp("case"), str(existing(CASE)), "--cache", "vllm")


def test_embedded_documents_are_the_commands_json(case_page) -> None:
    lint = island(case_page, "doc-lint")
    assert lint == run_json(shown_command(case_page, "lint"))
    sim = island(case_page, "doc-simulate")
    assert sim == run_json(shown_command(case_page, "simulate"))
    assert [r["policy"] for r in sim["results"]] == ["lru"] * 5 + ["belady"] * 5


def test_summary_cells_are_the_documents_figures(case_page) -> None:
    lint, sim, shown = island(case_page, "doc-lint"), island(case_page, "doc-simulate"), cells(case_page)
    s = lint["summary"]
    for key in ("requests", "sessions", "prompt_tokens", "reusable_tokens", "new_tokens", "lost_tokens", "findings"):
        assert shown[f"summary.{key}"] == f"{s[key]:,}", key
    assert shown["summary.reusable_fraction"] == f"{100 * s['reusable_fraction']:.1f}%"
    for code, v in s["lost_tokens_by_code"].items():
        assert shown[f"summary.lost_tokens_by_code.{code}"] == f"{v:,}"
    row = island(case_page, "doc-answers")["row"]  # the 100% lru row: no --capacity given, never the 5% one
    assert sim["results"][row]["capacity"] == "100%" and sim["results"][row]["policy"] == "lru"
    assert shown[f"sim.results.{row}.cached_tokens"] == f"{sim['results'][row]['cached_tokens']:,}"
    assert s["lost_tokens_by_code"] == {"PC101": 3144}  # the case's break, in the page


def test_charts_carry_the_documents_numbers(case_page) -> None:
    lint, sim = island(case_page, "doc-lint"), island(case_page, "doc-simulate")
    s = lint["summary"]
    (wf,) = island(case_page, "data-fig-waterfall")["data"]
    assert wf["y"][:3] == [s["prompt_tokens"], -s["new_tokens"], -s["lost_tokens_by_code"]["PC101"]]
    assert wf["text"][-1] == f"{s['reusable_tokens']:,}"
    turns = island(case_page, "data-fig-session-0")["data"]
    bars = [t for t in turns if t["type"] == "bar"]
    totals = [sum(t["y"][i] for t in bars) for i in range(len(lint["requests"]))]
    assert totals == [r["prompt_tokens"] for r in lint["requests"]]  # reused + new + lost = prompt
    (marks,) = [t for t in turns if t["type"] == "scatter"]
    assert sorted(marks["customdata"]) == sorted({i for i, r in enumerate(lint["requests"])
                                                  if any(f["request"] == r["index"] for f in lint["findings"])})
    curves = island(case_page, "data-fig-capacity-0")["data"]
    lru = next(t for t in curves if t["name"] == "lru")
    assert lru["y"] == [r["hit_ratio_tokens"] for r in sim["results"] if r["policy"] == "lru"]
    assert next(t for t in curves if t["name"].startswith("ideal"))["y"][0] == sim["results"][0]["ideal_hit_ratio"]
    assert any(t["name"] == "belady (offline bound)" for t in curves)


def test_findings_and_notes_are_listed(case_page) -> None:
    lint = island(case_page, "doc-lint")
    assert case_page.count('<div class="finding"') == len(lint["findings"]) == 5
    assert "first divergent token" in case_page
    for note in lint["tokenizers"].values():
        assert html.escape(note) in case_page
    assert 'id="tokenizer-badge">tokenizer approximate' in case_page  # cl100k standing in for o200k


def test_redact_leaves_no_prompt_text(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("PREFIXCACHE_REDACT_KEY", "report-test")  # the shown lint command's hashes then match
    secret = "You are a coding agent"
    plain = report(tmp_path, str(CASE), name="plain.html")
    assert secret in plain
    redacted = report(tmp_path, str(CASE), "--redact", name="redacted.html")
    assert secret not in redacted and "2026-03-02" not in redacted
    assert "--redact" in shown_command(redacted, "lint")
    assert island(redacted, "doc-lint") == run_json(shown_command(redacted, "lint"))


def test_replay_section_shows_the_rows(tmp_path) -> None:
    page = report(tmp_path, str(EXAMPLES / "agent_session.jsonl"), "--template", "chatml_tools",
                  "--replay", str(existing(REPLAY)))
    rows = [orjson.loads(line) for line in REPLAY.read_bytes().splitlines()]
    assert island(page, "doc-replay") == [{k: v for k, v in r.items() if k != "output_ids"} for r in rows]
    cdf = island(page, "data-fig-ttft")["data"]
    assert [t["name"] for t in cdf] == ["cold", "warm", "canonical"]
    cold = sorted(r["ttft_s"] for r in rows if r["pass_name"] == "cold")
    assert cdf[0]["x"] == cold and cdf[0]["y"][-1] == 1.0 and len(cdf[0]["y"]) == len(cold) == 6
    scatter = island(page, "data-fig-scatter")["data"]
    warm = next(t for t in scatter if t["name"] == "warm")
    assert warm["y"] == [r["cached_tokens"] for r in rows if r["pass_name"] == "warm"]
    assert warm["x"] == [r["predicted_cached"] for r in rows if r["pass_name"] == "warm"]
    for r in rows:
        assert f"{r['ttft_s']:.3f}" in page


ROUTERS = "round-robin,session,cache-aware,oracle"


def fleet_doc(tmp: Path, log: Path) -> tuple[dict, Path]:
    doc = run_json(["simulate", str(log), "--replicas", "4", "--router", ROUTERS, "--json"])
    saved = tmp / "fleet.json"
    saved.write_bytes(orjson.dumps(doc))
    return doc, saved


@pytest.fixture(scope="module")
def claude_fleet_page(tmp_path_factory) -> tuple[dict, Path, str]:
    """The Claude Code sample's fleet document, where it was saved, and its report page (built
    once: two tests read the same page)."""
    tmp = tmp_path_factory.mktemp("claude")
    log = existing(SAMPLES / "claude_code_session_v1.0.98_fe5e1c67.jsonl")
    fleet, saved = fleet_doc(tmp, log)
    return fleet, saved, report(tmp, str(log), "--simulate", str(saved))


def test_fleet_section_shows_the_fleet_document(claude_fleet_page) -> None:
    fleet, saved, page = claude_fleet_page
    assert island(page, "doc-fleet") == fleet
    assert f"cat {saved}" in html.unescape(page)
    assert 'id="capacity"' in page and island(page, "doc-simulate")["cache"] == "vllm"  # curves simulated here
    rows = fleet["results"]
    assert [r["router"] for r in rows] == ROUTERS.split(",")
    bars = island(page, "data-fig-fleet")["data"]
    assert [t["x"] for t in bars] == [[r["router"] for r in rows]] * 4
    ceiling, cap, routing, achieved = (t["y"] for t in bars)
    assert ceiling == [fleet["ceiling_tokens"]] * len(rows)
    assert cap == [r["capacity_loss_tokens"] for r in rows] and routing == [r["routing_loss_tokens"] for r in rows]
    assert achieved == [r["cached_tokens"] for r in rows]
    assert all(c - a - b == d for c, a, b, d in zip(ceiling, cap, routing, achieved))  # the decomposition
    ttft = island(page, "data-fig-fleet-ttft")["data"]
    assert [t["name"] for t in ttft] == ["P50", "P95", "P99"]
    for t in ttft:
        assert t["y"] == [r[f"ttft_{t['name'].lower()}_s"] for r in rows]
    shown = cells(page)
    for key in ("requests", "prompt_tokens", "ceiling_tokens", "pooled_tokens"):
        assert shown[f"fleet.{key}"] == f"{fleet[key]:,}"
    assert shown["fleet.ceiling_hit_ratio"] == f"{100 * fleet['ceiling_hit_ratio']:.1f}%"
    for n, r in enumerate(rows):
        for key in ("capacity_loss_tokens", "routing_loss_tokens", "cached_tokens", "restored_tokens"):
            assert shown[f"fleet.results.{n}.{key}"] == f"{r[key]:,}"
        for q in (50, 95, 99):
            assert shown[f"fleet.results.{n}.ttft.p{q}"] == f"{r['ttft'][f'p{q}']:.3f}" == f"{r[f'ttft_p{q}_s']:.3f}"
        assert shown[f"fleet.results.{n}.hit_ratio_tokens"] == f"{100 * r['hit_ratio_tokens']:.1f}%"


def test_saved_simulate_document_without_a_fleet(tmp_path) -> None:
    sim = run_json(["simulate", str(CASE), "--json", "--capacity", "10%,50%"])
    del sim["agreement"], sim["cost"]  # absent optional keys: sections left out, no error
    saved = tmp_path / "sim.json"
    saved.write_bytes(orjson.dumps(sim))
    page = report(tmp_path, str(CASE), "--simulate", str(saved), name="nofleet.html")
    assert island(page, "doc-simulate") == sim
    assert 'id="fleet"' not in page and 'id="capacity"' in page


def test_fleet_document_of_the_previous_release_still_reads(tmp_path) -> None:
    """A fleet document saved before ``ttft`` existed (flat ``ttft_p*_s`` keys only) is shown
    with those figures as written; count, mean and max, which it never held, stay unknown."""
    fleet, saved = fleet_doc(tmp_path, CASE)
    for row in fleet["results"]:
        del row["ttft"]
    saved.write_bytes(orjson.dumps(fleet))
    page = report(tmp_path, str(CASE), "--simulate", str(saved), name="oldfleet.html")
    shown = cells(page)
    for n, r in enumerate(fleet["results"]):
        for q in (50, 95, 99):
            assert shown[f"fleet.results.{n}.ttft.p{q}"] == f"{r[f'ttft_p{q}_s']:.3f}"


def test_fleet_document_missing_keys_is_an_input_error(tmp_path) -> None:
    fleet, saved = fleet_doc(tmp_path, CASE)
    del fleet["results"][0]["ttft_p99_s"]
    saved.write_bytes(orjson.dumps(fleet))
    res = CliRunner().invoke(app, ["report", str(CASE), "--simulate", str(saved), "-o", str(tmp_path / "x.html")])
    assert res.exit_code == 2 and "results[0] is not a router row (missing ttft_p99_s)" in res.output


def test_break_markers_carry_the_diff_librarys_excerpt(case_page) -> None:
    lint, diffs = island(case_page, "doc-lint"), island(case_page, "doc-diffs")
    marked = {(f["session"], f["request"]) for f in lint["findings"]}
    expect = [i for i, r in enumerate(lint["requests"]) if (r["session"], r["index"]) in marked and r["compared_with"]]
    assert [d["row"] for d in diffs] == expect and len(expect) == 4
    for d in diffs:
        argv = shlex.split(d["command"])
        assert argv[:2] == ["prefixcache", "diff"]
        assert run_json(argv[1:]) == d["diff"]  # the page's excerpt is diff --json, byte for byte
        row = lint["requests"][d["row"]]
        assert (d["diff"]["request"]["session"], d["diff"]["request"]["index"]) == (row["session"], row["index"])
        assert [d["diff"]["against"]["session"], d["diff"]["against"]["index"]] == row["compared_with"]
        block = case_page[case_page.index(f'<div class="diff-excerpt" data-row="{d["row"]}">'):]
        block = block[:block.index('<pre class="cmd">')]
        assert f'{d["diff"]["shared_tokens"]:,}</b>' in block
        for t in d["diff"]["request"]["tokens"] + d["diff"]["against"]["tokens"]:
            assert f">{t['id']}</td>" in block and str(escape(t["text"].replace("\n", "↵"))) in block
        assert str(escape(d["diff"]["request"]["json_path"])) in block


def test_redacted_diff_excerpts_hold_ids_not_text(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("PREFIXCACHE_REDACT_KEY", "report-test")
    page = report(tmp_path, str(CASE), "--redact", name="redacted.html")
    diffs = island(page, "doc-diffs")
    assert diffs
    for d in diffs:
        for side in (d["diff"]["request"], d["diff"]["against"]):
            assert all(t["text"] == "" and isinstance(t["id"], int) for t in side["tokens"])
            assert side["text_before"].startswith("<") and " chars, h:" in side["text_after"]
    assert "this text" not in page and "10:31" not in page


def test_claude_code_session_under_5_mb(claude_fleet_page) -> None:
    page = claude_fleet_page[2]
    assert len(page.encode()) < 5_000_000
    lint = island(page, "doc-lint")
    assert lint["summary"]["requests"] == 170
    assert page.count('class="chart session-chart"') == len(lint["sessions"]) == 6


@pytest.mark.parametrize("args, message", [
    (["-", "-o", "x.html"], "reads its logs twice"),
    ([str(CASE), "-o", str(CASE)], "is an input of this run"),
    ([str(CASE), "-o", "r.html", "--replay", str(CASE)], "not a replay result row"),
    ([str(CASE), "-o", "r.html", "--simulate", str(REPLAY)], "not JSON"),
    ([str(CASE), "-o", "r.html", "--capacity", "5 parsecs"], "capacity"),
])
def test_bad_inputs_exit_2(tmp_path, monkeypatch, args, message) -> None:
    monkeypatch.chdir(tmp_path)
    res = CliRunner().invoke(app, ["report", *args])
    assert res.exit_code == 2 and message in res.output, res.output
    assert not (tmp_path / "r.html").exists()


def test_existing_output_needs_force(tmp_path) -> None:
    out = tmp_path / "r.html"
    out.write_text("old")
    res = CliRunner().invoke(app, ["report", str(CASE), "-o", str(out)])
    assert res.exit_code == 2 and "--force" in res.output and out.read_text() == "old"


def _formatted(value, out: set[str]) -> set[str]:
    """Every way the page may print the numbers in ``value`` (a parsed JSON document)."""
    if isinstance(value, dict):
        for v in value.values():
            _formatted(v, out)
    elif isinstance(value, list):
        out.add(f"{len(value):,}")
        for v in value:
            _formatted(v, out)
    elif isinstance(value, (int, float)) and not isinstance(value, bool):
        out.update({str(value), f"{value:,}", f"{100 * value:.1f}%", f"${value:,.4f}", f"{value:.3f}"})
    return out


@pytest.mark.parametrize("extra", [[], ["--replay", str(REPLAY), "--template", "chatml_tools"]])
def test_every_figure_cell_is_a_documents_number(tmp_path, extra) -> None:
    log = EXAMPLES / "agent_session.jsonl" if extra else CASE
    page = report(tmp_path, str(log), *extra)
    known = _formatted([island(page, "doc-lint"), island(page, "doc-simulate"), island(page, "doc-diffs"),
                        island(page, "doc-canonicalize"), island(page, "doc-answers"),  # the first screen's USD
                        island(page, "doc-replay") if extra else []], set())
    shown = [html.unescape(v).strip() for v in re.findall(r'<td class="num"[^>]*>([^<]*)</td>', page)]
    assert len(shown) > 40
    assert [v for v in shown if v not in known and v != "—"] == []


def test_script_closing_text_in_the_log_stays_inside_the_json(tmp_path) -> None:
    evil = "</script><script>alert(1)</script>"
    log = tmp_path / "evil.jsonl"
    log.write_text(CASE.read_text().replace('"gpt-4.1"', orjson.dumps(evil).decode()))
    page = report(tmp_path, str(log))
    assert page.count("<script") == page.count("</script>")
    assert {r["model"] for r in island(page, "doc-lint")["requests"]} == {evil}
    assert "alert(1)</script>" not in page


def test_usage_only_log_has_no_simulation_and_says_so(tmp_path) -> None:
    page = report(tmp_path, str(existing(SAMPLES / "openhands_trajectory_events_basic_gui_mode.json")))
    lint = island(page, "doc-lint")
    assert lint["summary"]["prompt_tokens"] == 0 and 'id="doc-simulate"' not in page
    assert 'id="fig-waterfall"' not in page and 'id="capacity"' not in page
    assert cells(page)["summary.usage_only.requests"] == f"{lint['summary']['usage_only']['requests']:,}"
    assert len(lint["skipped"]) == page.count("<td>note</td>") + page.count("<td>error</td>") > 0


@pytest.mark.parametrize("flag", ["--simulate", "--replay"])
def test_unreadable_saved_document_names_the_file_once(tmp_path, flag) -> None:
    missing = tmp_path / "absent.json"
    res = CliRunner().invoke(app, ["report", str(CASE), flag, str(missing), "-o", str(tmp_path / "x.html")])
    assert res.exit_code == 2
    assert f"error: {missing}: cannot read" in " ".join(res.output.split()) and "<input>" not in res.output
