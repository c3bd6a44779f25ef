"""Issue 11 item 8: ``prefixcache diff LOG --request SESSION:K [--against K']``."""

from __future__ import annotations

import json

import orjson
import pytest
from typer.testing import CliRunner

from prefixcache.analyzer.errors import ConfigError
from prefixcache.analyzer.lint.diff import diff_requests, parse_request
from prefixcache.cli.app import app
from tests.helpers import CASES

ARGS = CASES / "toolcall_args_reserialized.jsonl"
SESSION = "toolcall_args_reserialized#1"


def test_diff_points_at_the_token_lint_reports():
    r = diff_requests([str(ARGS)], f"{SESSION}:3")
    assert (r.request.index, r.against.index) == (3, 2)
    assert r.shared_tokens == 1031 and r.first_diff_char == 4843  # lint: char 4843, token 1031 (o200k_base)
    assert r.cause_code == "PC301" and r.request.json_path == "messages[2].tool_calls[0].function.arguments"
    first = next(c for c in r.request.tokens if c.position == r.shared_tokens)
    other = next(c for c in r.against.tokens if c.position == r.shared_tokens)
    assert first.id != other.id and (first.text, other.text) == ("end", "path")
    assert r.request.text_after.startswith("end_line") and r.against.text_after.startswith("path")
    assert orjson.loads(orjson.dumps(r))["request"]["tokens"][0]["position"] == r.shared_tokens - 8


def test_diff_against_and_identical():
    r = diff_requests([str(CASES / "clean_append_only.jsonl")], "2", against="1")
    # append-only: request 1 is a token prefix of request 2; its generation prompt is where the texts part
    assert not r.identical and r.cause_code is None and r.shared_tokens == r.against.prompt_tokens == 1232
    assert (r.against.segment, r.request.segment) == ("generation prompt", "messages[6]")
    same = diff_requests([str(ARGS)], f"{SESSION}:3", against=f"{SESSION}:3")
    assert same.identical and same.first_diff_char is None


def test_diff_request_errors():
    assert parse_request("a:b:3") == ("a:b", 3)
    for bad in ("x", "s:-1"):
        with pytest.raises(ConfigError):
            parse_request(bad)
    with pytest.raises(ConfigError, match="has no previous one"):
        diff_requests([str(ARGS)], f"{SESSION}:0")
    with pytest.raises(ConfigError, match="requests 0 to 5"):
        diff_requests([str(ARGS)], f"{SESSION}:9")


def test_diff_cli_text_and_json():
    runner = CliRunner()
    res = runner.invoke(app, ["diff", str(ARGS), "--request", f"{SESSION}:3", "--window", "2"])
    assert res.exit_code == 1, res.output
    assert "first difference at token 1,031" in res.output and "PC301" in res.output
    res = runner.invoke(app, ["diff", str(ARGS), "-r", f"{SESSION}:3", "--json"])
    doc = json.loads(res.output)
    assert list(doc) == ["request", "against", "shared_tokens", "first_diff_char", "identical", "tokenizer", "exact",
                         "cause_code", "cause", "extends", "broke"]
    res = runner.invoke(app, ["diff", str(ARGS), "-r", "nope:1"])
    assert res.exit_code == 2 and "no session 'nope'" in res.output


def test_diff_exits_0_when_the_previous_prompt_is_a_prefix():
    """Issue 24 item 6: an append-only turn is not a break: "request N-1 is a prefix of request N", exit 0."""
    runner = CliRunner()
    clean = str(CASES / "clean_append_only.jsonl")
    res = runner.invoke(app, ["diff", clean, "--request", "3"])
    assert res.exit_code == 0, res.output
    assert "request 2 is a prefix of request 3" in res.output and "first difference" not in res.output
    doc = json.loads(runner.invoke(app, ["diff", clean, "-r", "3", "--json"]).output)
    assert doc["extends"] is True and doc["broke"] is False and doc["identical"] is False
    assert doc["shared_tokens"] == doc["against"]["prompt_tokens"] < doc["request"]["prompt_tokens"]
    # a broken prefix still exits 1 and names lint's cause
    res = runner.invoke(app, ["diff", str(CASES / "tool_order_shuffle.jsonl"), "-r", "3", "--json"])
    assert res.exit_code == 1 and json.loads(res.output)["broke"] is True


def test_diff_page_shows_real_output():
    """docs/commands/diff.md "Real output" (COLUMNS=120)."""
    from tests.test_doc_figures import assert_shows, documented, run

    argv = ["diff", "tests/fixtures/cases/toolcall_args_reserialized.jsonl", "--request",
            f"{SESSION}:3", "--window", "4"]
    code, out, _ = run(argv, columns=120)
    assert code == 1
    assert_shows(out, documented("docs/commands/diff.md", "$ prefixcache diff tests/fixtures/cases/"
                                 "toolcall_args_reserialized.jsonl --request 'toolcall_args_reserialized#1:3' "
                                 "--window 4"))
