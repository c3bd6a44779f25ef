"""The report's first screen, read in a real browser: four answers equal to the commands' JSON.

For three real samples (a hosted DeepSeek log, a hosted Claude Code log, the Mooncake block
trace for an engine) the page is opened offline in headless Chromium at 1200×900; every
answer (``[data-answer]`` in ``#answers``) must be visible without scrolling, and its text
must equal the figure of the JSON that the commands the page shows print when run here:
``lint --json``, ``simulate --json`` (on the provider ``--cache auto`` chose from the logged
model, or vLLM), ``canonicalize --review --to openai --json``. The sizing line is checked once
more against a plain ``simulate --capacity Nblocks`` run at the capacity it names. Skipped
without ``/usr/bin/chromium`` (``PREFIXCACHE_STRICT_SKIPS=1`` fails instead), like
``test_report_html_browser.py``, whose browser fixture this file shares.
"""

from __future__ import annotations

import orjson
import pytest
from typer.testing import CliRunner

from prefixcache.analyzer.cache.simulate.sizing import kv_size
from prefixcache.cli.app import app
from tests.analyzer.html.test_report_html import shown_command
from tests.analyzer.html.test_report_html_browser import browser, load  # noqa: F401  (the fixture)
from tests.helpers import SAMPLES, existing

pytestmark = [pytest.mark.browser, pytest.mark.slow]

#: sample → (cache --cache auto must choose, whether the log reports cached tokens)
SAMPLES_SHOWN = {
    "deepseek": ("mini_swe_agent_v1.1_deepseek_reasoner_pvlib-1606.traj.json", "deepseek", True),
    "claude_code": ("claude_code_session_v1.0.98_fe5e1c67.jsonl", "anthropic", True),
    "mooncake": ("mooncake_kvtrace_synthetic_trace.jsonl", "vllm", False),
}

VIEWPORT_HEIGHT = 900  # the browser fixture's viewport: the first screen


def run_json(argv: list[str]) -> dict | None:
    """``prefixcache ARGV`` 's JSON (None when the command refuses the input, exit 2)."""
    res = CliRunner().invoke(app, argv)
    if res.exit_code == 2:
        return None
    assert res.exit_code in (0, 1), res.output
    return orjson.loads(res.stdout)


def n(v: int) -> str:
    return f"{v:,}"


def usd(v: float) -> str:
    return f"${v:,.4f}"


@pytest.mark.parametrize("name", list(SAMPLES_SHOWN))
def test_first_screen_answers_equal_the_commands_json(browser, tmp_path, name) -> None:  # noqa: F811
    file, cache, hosted = SAMPLES_SHOWN[name]
    log = str(existing(SAMPLES / file))
    out = tmp_path / f"{name}.html"
    res = CliRunner().invoke(app, ["report", log, "-o", str(out)])
    assert res.exit_code == 0, res.output
    text = out.read_text()
    lint = run_json(shown_command(text, "lint"))
    sim = run_json(shown_command(text, "simulate"))
    canon = run_json(shown_command(text, "canonicalize"))

    page, errors, remote = load(browser, out)
    assert not errors and not remote, (errors, remote)
    answers = page.locator("#answers [data-answer]")
    assert answers.count() >= 8
    got: dict[str, str] = {}
    for i in range(answers.count()):
        el = answers.nth(i)
        key, box = el.get_attribute("data-answer"), el.bounding_box()
        assert box is not None and box["y"] + box["height"] <= VIEWPORT_HEIGHT, (key, box)  # no scrolling
        got[key] = el.inner_text().strip()

    # which cache: the logged model's provider, never a capacity row for a hosted log
    assert got["cache"] == sim["cache"] == cache
    if hosted:
        assert [r["capacity"] for r in sim["results"]] == ["unbounded"]
    row = 0 if hosted else next(i for i, r in enumerate(sim["results"]) if r["policy"] == "lru" and r["capacity"] == "100%")
    r = sim["results"][row]

    # 1. reusable and served (reported where the log says)
    s = lint["summary"]
    assert got["reuse.prompt_tokens"] == n(s["prompt_tokens"]) and got["reuse.reusable_tokens"] == n(s["reusable_tokens"])
    assert got["reuse.reusable_fraction"] == f"{100 * s['reusable_fraction']:.1f}%"
    assert got["reuse.served_tokens"] == n(r["cached_tokens"])
    if hosted:
        assert got["reuse.reported.cached_tokens"] == n(sim["reported"]["cached_tokens"])
        assert got["reuse.reported.prompt_tokens"] == n(sim["reported"]["prompt_tokens"])
        c = sim["cost"]
        assert got["reuse.cost.billed"] == usd(c["reported_usd_with_cache"])
        assert got["reuse.cost.without"] == usd(c["reported_usd_without_cache"])
        assert got["reuse.cost.predicted"] == usd(c["usd_with_cache"])
    else:
        assert "reuse.cost.billed" not in got and "reuse.reported.cached_tokens" not in got

    # 2. lost, and to what
    for code, tok in r["drift_by_rule"].items():
        if tok:
            assert got[f"loss.drift · {code}.tokens"] == n(tok)
    pc = (sim.get("analyses") or {}).get("provider_calls")
    if hosted:
        for cls, label in (("provider_side", "provider-side (routing or eviction at the provider)"),
                           ("ttl", "TTL (idle past the provider's retention)")):
            assert got[f"loss.{label}.tokens"] == n(pc["lost_tokens"][cls])
            assert got[f"loss.{label}.usd"] == usd(pc["lost_dollars"][cls])
    else:
        assert pc is None
        assert got["loss.capacity (evicted before reuse).tokens"] == n(r["lost_tokens_by_cause"]["capacity"])
    assert got["loss.granularity (partial blocks / units).tokens"] == n(r["lost_tokens_by_cause"]["granularity"])

    # 3. what fixing is worth: canonicalize before / after, and lint's losses that need a change in the agent
    if canon is not None:
        assert got["fix.before"] == n(canon["total"]["before"]["reusable_tokens"])
        assert got["fix.after"] == n(canon["in_memory"]["reusable_tokens"])
        assert orjson.loads(page.locator("#doc-canonicalize").text_content()) == canon
    else:
        assert name == "mooncake" and "fix.before" not in got  # a block trace holds no prompt text to rewrite
    for code, tok in s["lost_tokens_by_code"].items():
        if tok:
            assert got.get(f"fix.manual.{code}.tokens", got.get(f"fix.rule.{code}.tokens")) is not None
    for code, tok in s["lost_tokens_by_code"].items():
        if f"fix.manual.{code}.tokens" in got:
            assert got[f"fix.manual.{code}.tokens"] == n(tok)

    # 4. sizing: the GiB of KV that reaches 90% of the ideal, and a plain simulate at that capacity agrees
    z = sim["analyses"]["sizing"]
    assert z["target"] == 0.9 and z["kv_bytes_per_token"] == 131072  # llama-3-8b, the default preset
    assert got["sizing.capacity_bytes"] == kv_size(z["capacity_bytes"]) == f"{z['capacity_bytes'] / 2**30:,.2f} GiB"
    assert n(z["capacity_tokens"]) in got["sizing.line"] and n(z["hit_tokens"]) in got["sizing.line"]
    blocks = z["capacity_blocks"]
    at = run_json(["simulate", log, "--cache", "vllm", "--capacity", f"{blocks}blocks,{blocks - 1}blocks", "--json"])
    assert at["results"][0]["cached_tokens"] == z["hit_tokens"] >= 0.9 * z["ideal_tokens"]
    assert at["results"][1]["cached_tokens"] < 0.9 * z["ideal_tokens"]  # the smallest such cache

    # every warning of lint and simulate, counted on the first screen and listed in the notes
    warnings = list(dict.fromkeys([*lint["warnings"], *sim["warnings"]]))
    extra = 0 if canon is not None else 1  # why canonicalize gave nothing
    assert got["warnings.count"] == str(len(warnings) + extra)
    listed = page.locator("#notes ul.warnings li").all_inner_texts() if warnings or extra else []
    assert [w.strip() for w in listed][:len(warnings)] == warnings
    page.close()


def test_hosted_deepseek_headlines_the_billed_cost_not_a_capacity_row(browser, tmp_path) -> None:  # noqa: F811
    """The issue's example: a hosted DeepSeek log's first screen quotes the cost its reported usage
    implies ($0.000922, 4 calls), not a 5%-capacity vLLM prediction."""
    log = str(existing(SAMPLES / SAMPLES_SHOWN["deepseek"][0]))
    out = tmp_path / "ds.html"
    assert CliRunner().invoke(app, ["report", log, "-o", str(out)]).exit_code == 0
    page, errors, _ = load(browser, out)
    card = page.locator("#answer-reuse").inner_text()
    assert "$0.0009" in card and "capacity" not in card and "15,616" in card  # reported cached tokens
    assert page.locator("#answer-reuse").bounding_box()["y"] < VIEWPORT_HEIGHT
    page.locator("#answers").screenshot(path=str(tmp_path / "answers.png"))
    assert not errors
    page.close()
