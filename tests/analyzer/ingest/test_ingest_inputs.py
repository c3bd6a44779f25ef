"""Opening inputs: compressed files streamed, directory walks that list non-logs as skipped, FIFOs."""

from __future__ import annotations

import bz2
import gzip
import io
import json
import os
import shutil
from pathlib import Path

import pytest
import zstandard
from click.testing import CliRunner

from prefixcache.analyzer.errors import InputError
from prefixcache.analyzer.ingest import Ingest
from tests.helpers import FIXTURES, cli_app, existing

OTEL = FIXTURES / "formats" / "samples" / "otel_genai_session_a" / "otel_openllmetry_session_a.jsonl"
SERVER_CACHED = [0, 436, 556, 948, 1177, 1404, 1607]


def _compress(codec: str, data: bytes) -> bytes:
    if codec == "gz":
        return gzip.compress(data)
    if codec == "bz2":
        return bz2.compress(data)
    return zstandard.ZstdCompressor().compress(data)


@pytest.mark.parametrize("codec", ["gz", "zst", "bz2"])
def test_compressed_file_reads_like_plain(tmp_path: Path, codec: str) -> None:
    data = existing(OTEL).read_bytes()
    p = tmp_path / f"spans.jsonl.{codec}"
    p.write_bytes(_compress(codec, data))
    plain = list(Ingest([str(OTEL)]))
    packed = list(Ingest([str(p)]))
    assert [r.messages for r in packed] == [r.messages for r in plain]
    assert [r.usage.cached_tokens for r in packed] == SERVER_CACHED
    assert packed[0].provenance.line == 1


def test_compressed_stdin_and_a_misnamed_file(tmp_path: Path) -> None:
    data = gzip.compress(existing(OTEL).read_bytes())
    assert len(list(Ingest(["-"], stdin=io.BytesIO(data)))) == 7
    p = tmp_path / "spans.jsonl"  # gzip bytes under a plain name: the magic number decides
    p.write_bytes(data)
    assert len(list(Ingest([str(p)]))) == 7


def test_damaged_compressed_file_is_one_bad_skip(tmp_path: Path) -> None:
    data = gzip.compress(existing(OTEL).read_bytes())
    p = tmp_path / "spans.jsonl.gz"
    p.write_bytes(data[: len(data) // 2])
    ing = Ingest([str(p)])
    list(ing)
    bad = ing.summary.bad
    assert bad and any("damaged gzip data" in s.reason for s in bad)


def test_walk_lists_non_logs_as_skipped_notes(tmp_path: Path) -> None:
    shutil.copy(existing(OTEL), tmp_path / "a.jsonl")
    (tmp_path / "notes.md").write_text("# not a log\n")
    (tmp_path / "data.json").write_text('{"hello": "world"}\n')
    (tmp_path / "empty.jsonl").write_text("")
    (tmp_path / ".hidden.jsonl").write_text("x\n")
    ing = Ingest([str(tmp_path)])
    assert len(list(ing)) == 7
    s = ing.summary
    assert not s.bad and s.files == 3  # notes.md is never opened
    reasons = {Path(k.source).name: k.reason for k in s.skipped if k.record == 0}
    assert reasons["notes.md"].startswith("not a log file (suffix .md)")
    assert "unknown format" in reasons["data.json"] and "empty file" in reasons["empty.jsonl"]
    assert ".hidden.jsonl" not in reasons


def test_named_files_stay_strict(tmp_path: Path) -> None:
    p = tmp_path / "data.json"
    p.write_text('{"hello": "world"}\n')
    ing = Ingest([str(p)])
    list(ing)
    assert [s.bad for s in ing.summary.skipped] == [True]


def test_walk_reads_the_hidden_aider_history(tmp_path: Path) -> None:
    src = existing(FIXTURES / "formats" / "samples" / "aider_llm_history_friendly_names_first6.aider.llm.history")
    shutil.copy(src, tmp_path / ".aider.llm.history")
    reqs = list(Ingest([str(tmp_path)]))
    assert len(reqs) == 6 and {r.format for r in reqs} == {"aider"}


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no FIFOs on this platform")
def test_fifo_in_a_walk_is_never_opened(tmp_path: Path) -> None:
    shutil.copy(existing(OTEL), tmp_path / "a.jsonl")
    os.mkfifo(tmp_path / "pipe.jsonl")  # opening it would block forever
    ing = Ingest([str(tmp_path)])
    assert len(list(ing)) == 7
    [note] = [s for s in ing.summary.skipped if s.source.endswith("pipe.jsonl")]
    assert "not a regular file (FIFO)" in note.reason and not note.bad


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no FIFOs on this platform")
def test_fifo_named_explicitly_is_read_once_without_blocking(tmp_path: Path, monkeypatch) -> None:
    """A FIFO named explicitly is read like stdin; when no writer opens it within the wait it is an
    empty input (exit 2), never a hang."""
    monkeypatch.setenv("PREFIXCACHE_PIPE_TIMEOUT", "0.5")
    fifo = tmp_path / "pipe.jsonl"
    os.mkfifo(fifo)
    result = CliRunner().invoke(cli_app(), ["inspect", str(fifo), "--json"])
    assert result.exit_code == 2 and "pipe.jsonl" in result.output and "empty" in result.output


def test_fifo_whose_writer_starts_late_is_read(tmp_path: Path) -> None:
    """``<(slow producer)``: the writer opens the FIFO after the read began; its records are read."""
    import subprocess

    fifo = tmp_path / "late.jsonl"
    os.mkfifo(fifo)
    writer = subprocess.Popen(["sh", "-c", f"sleep 1; cat {existing(OTEL)} > {fifo}"])
    try:
        assert len(list(Ingest([str(fifo)]))) == 7
    finally:
        writer.wait(timeout=30)


def test_device_named_explicitly_is_refused() -> None:
    with pytest.raises(InputError, match="not a regular file \\(character device\\).*stdin"):
        Ingest(["/dev/null"])


def test_simulate_compares_predicted_with_the_server_cached_tokens() -> None:
    """The OpenLLMetry spans carry the server's cached tokens: simulate reports predicted vs reported."""
    args = ["simulate", str(existing(OTEL)), "--tokenizer", "smollm2", "--template", "tokenizer", "--cache",
            "blocks", "--block-size", "1", "--per-request", "--json"]
    result = CliRunner().invoke(cli_app(), args)
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    calls = doc["calls"]
    assert [c["reported_cached_tokens"] for c in calls] == SERVER_CACHED
    assert [c["reported_prompt_tokens"] for c in calls][:2] == [c["prompt_tokens"] for c in calls][:2] == [389, 509]
    assert doc["agreement"]["within_tolerance"] == 7


def test_fixture_folder_reads_clean() -> None:
    """Every fixture and real sample of the new formats together: detected, accounted for, no error."""
    ing = Ingest([str(existing(FIXTURES / "formats"))])
    formats = {r.format for r in ing}
    assert formats == {"openinference", "cline-task", "opencode", "vllm-log", "sglang-log", "otel-genai",
                       "gemini-cli", "aider", "openai-chat"}  # openai-chat: the OTel sample's ground-truth bodies
    assert not ing.summary.bad
    notes = {Path(s.source).name: s.reason for s in ing.summary.skipped if s.record == 0}
    assert "not a log file" in notes["README.md"] and "unknown format" in notes["responses_session_a.jsonl"]


def test_formats_doc_shows_the_real_simulate_table() -> None:
    """docs/formats.md "OpenTelemetry GenAI": the predicted-vs-reported rows are this command's output."""
    args = ["simulate", str(OTEL.relative_to(FIXTURES.parent.parent)), "--tokenizer", "smollm2", "--template",
            "tokenizer", "--cache", "blocks", "--block-size", "1", "--per-request"]
    env = {"COLUMNS": "110"}
    result = CliRunner().invoke(cli_app(), args, env=env)
    assert result.exit_code == 0, result.output
    doc = (FIXTURES.parent.parent / "docs" / "formats.md").read_text()
    assert "$ prefixcache " + " ".join(args[:2]) in doc
    rows = [line for line in result.stdout.splitlines() if line.startswith("│ newfmt-session-a") and "│    -" not in line]
    shown = [line for line in doc.splitlines() if line.startswith("│ newfmt-session-a")]
    assert shown and set(shown) <= set(rows)
