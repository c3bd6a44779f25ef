"""``--redact`` on diff, inspect and canonicalize (lint and report have their own tests): a
secret in the input never reaches stdout, stderr or a JSON document; and lint prints only
the error when it could read nothing."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from tests.helpers import cli_app

SECRET = "S3CRETk9q7w2"


def _log(tmp_path: Path) -> Path:
    """One session of 3 requests whose system prompt holds a per-request clock and an id with the secret."""
    path = tmp_path / "secret.jsonl"
    msgs: list[dict] = []
    lines = []
    for i in range(3):
        system = (f"You are a coding agent. CONVERSATION_ID: {SECRET}{i}x1 api key sk-live-{SECRET}.\n"
                  f"Current time: 2026-03-02 10:31:0{i} UTC\nFollow the rules.")
        msgs = msgs + [{"role": "user", "content": f"step {i} for {SECRET}"}]
        lines.append(json.dumps({"model": "gpt-4o", "messages": [{"role": "system", "content": system}, *msgs]}))
        msgs = msgs + [{"role": "assistant", "content": f"done {i}"}]
    path.write_text("\n".join(lines) + "\n")
    return path


def _unknown(tmp_path: Path) -> Path:
    path = tmp_path / "unknown.jsonl"
    path.write_text(json.dumps({"api_key": f"sk-live-{SECRET}", "x": 1}) + "\n")
    return path


def _run(*args: str):
    res = CliRunner().invoke(cli_app(), list(args))
    assert "Traceback" not in res.stderr, res.stderr
    return res


def _commands(tmp_path: Path, log: str) -> list[list[str]]:
    out = str(tmp_path / "canonical.jsonl")
    return [
        ["diff", log, "-r", "1"], ["diff", log, "-r", "2", "--json"],
        ["inspect", log], ["inspect", log, "--json"],
        ["canonicalize", log, "-o", out, "--force"], ["canonicalize", log, "-o", out, "--force", "--json"],
    ]


def test_without_redact_the_secret_shows(tmp_path: Path) -> None:
    """The check below is not vacuous: diff and canonicalize print the secret when not redacting."""
    log = str(_log(tmp_path))
    for args in (["diff", log, "-r", "1"], ["canonicalize", log, "-o", str(tmp_path / "c.jsonl"), "--json"]):
        res = _run(*args)
        assert SECRET in res.stdout + res.stderr, args


@pytest.mark.parametrize("index", range(6))
def test_redact_hides_the_secret(tmp_path: Path, index: int) -> None:
    args = _commands(tmp_path, str(_log(tmp_path)))[index]
    res = _run(*args, "--redact")
    assert res.exit_code in (0, 1), (args, res.stderr)
    assert SECRET not in res.stdout + res.stderr, args
    assert args[0] == "inspect" or "chars, h:" in res.stdout + res.stderr, args  # inspect prints counts only
    if "--json" in args:
        text = res.stdout if args[0] != "inspect" else res.stdout.splitlines()[0]
        assert json.loads(text)


@pytest.mark.parametrize("command", ["diff", "inspect", "canonicalize"])
def test_redact_covers_errors_and_skip_reasons(tmp_path: Path, command: str) -> None:
    bad = str(_unknown(tmp_path))
    args = {"diff": ["diff", str(_log(tmp_path)), "-r", f"{SECRET}:1"], "inspect": ["inspect", bad, "--json"],
            "canonicalize": ["canonicalize", bad, "-o", str(tmp_path / "c.jsonl")]}[command]
    plain = _run(*args)
    assert plain.exit_code == 2 and SECRET in plain.stdout + plain.stderr
    res = _run(*args, "--redact")
    assert res.exit_code == 2 and SECRET not in res.stdout + res.stderr and "api_key" not in res.stdout + res.stderr
    assert res.stderr.startswith("error: ")
    assert "chars, h:" in res.stdout + res.stderr


def test_redact_key_gives_the_same_hashes_across_commands(tmp_path: Path) -> None:
    """Under one --redact-key, the diff of a break and canonicalize hash the same value alike."""
    log = str(_log(tmp_path))
    diff = json.loads(_run("diff", log, "-r", "1", "--json", "--redact", "--redact-key", "k").stdout)
    again = json.loads(_run("diff", log, "-r", "1", "--json", "--redact", "--redact-key", "k").stdout)
    other = json.loads(_run("diff", log, "-r", "1", "--json", "--redact", "--redact-key", "k2").stdout)
    assert diff == again and diff != other
    assert all(t["text"] == "" for t in diff["request"]["tokens"])


def test_canonicalize_redact_refuses_stdout(tmp_path: Path) -> None:
    res = _run("canonicalize", str(_log(tmp_path)), "-o", "-", "--redact")
    assert res.exit_code == 2 and SECRET not in res.stdout + res.stderr and "give --out a file" in res.stderr


@pytest.mark.parametrize("fmt", ["rich", "text"])
def test_lint_on_an_unreadable_file_prints_only_the_error(tmp_path: Path, fmt: str) -> None:
    res = _run("lint", str(_unknown(tmp_path)), "--format", fmt)
    assert res.exit_code == 2 and res.stdout == ""
    assert [line.split(":")[0] for line in res.stderr.strip().splitlines()] == ["error"]


def test_lint_json_on_an_unreadable_file_keeps_its_document(tmp_path: Path) -> None:
    res = _run("lint", str(_unknown(tmp_path)), "--json")
    assert res.exit_code == 2 and json.loads(res.stdout)["skipped"][0]["bad"] is True


def test_a_redact_key_alone_turns_redaction_on(tmp_path: Path, monkeypatch) -> None:
    """Fresh-user trial: ``--redact-key K`` without ``--redact`` printed the secret. A typed key implies
    ``--redact``; ``--no-redact`` (lint) wins; a key from the environment alone only keys the hashes."""
    log = str(_log(tmp_path))
    for args in (["diff", log, "-r", "1"], ["lint", log], ["inspect", log, "--json"],
                 ["canonicalize", log, "-o", str(tmp_path / "k.jsonl"), "--force", "--json"]):
        res = _run(*args, "--redact-key", "K1")
        assert SECRET not in res.stdout + res.stderr, args
        assert args[0] == "inspect" or "h:" in res.stdout + res.stderr, args  # inspect prints no prompt text
    assert SECRET in _run("lint", log, "--redact-key", "K1", "--no-redact").stdout
    monkeypatch.setenv("PREFIXCACHE_REDACT_KEY", "K1")
    assert SECRET in _run("diff", log, "-r", "1").stdout


def test_redacted_diff_has_no_token_ids(tmp_path: Path) -> None:
    """Ids decode back to the text with a public tokenizer: a redacted diff carries no token cells."""
    log = str(_log(tmp_path))
    plain = json.loads(_run("diff", log, "-r", "1", "--json").stdout)
    assert plain["request"]["tokens"] and plain["against"]["tokens"]
    doc = json.loads(_run("diff", log, "-r", "1", "--json", "--redact").stdout)
    assert doc["request"]["tokens"] == [] and doc["against"]["tokens"] == []
    assert doc["shared_tokens"] == plain["shared_tokens"]


def test_report_redacts_skip_reasons_in_the_page(tmp_path: Path) -> None:
    """Fresh-user trial: the HTML page held an unreadable file's raw skip reason (its first bytes)."""
    bad = tmp_path / "unknown.log"
    bad.write_text(f"sk-live-{SECRET} is my key and this is junk\n")
    page = tmp_path / "rep.html"
    res = _run("report", str(bad), "--template", "chatml_tools", "--redact", "-o", str(page))
    assert res.exit_code == 2 and SECRET not in res.stderr
    html = page.read_text()
    assert SECRET not in html and "unknown format (starts with &lt;40 chars, h:" in html


def test_diff_on_an_unreadable_log_names_the_reason(tmp_path: Path) -> None:
    bad = str(_unknown(tmp_path))
    res = _run("diff", bad, "-r", "1")
    assert res.exit_code == 2 and "no requests in the log" in res.stderr and "unknown format" in res.stderr
    res = _run("diff", bad, "-r", "1", "--redact")
    assert res.exit_code == 2 and "unknown format (starts with <" in res.stderr and SECRET not in res.stderr
