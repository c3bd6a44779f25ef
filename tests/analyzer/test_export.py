"""``prefixcache export --to mooncake|aiperf``: a text-free block-hash trace that our Mooncake reader
reads back with the same lengths and the same block sharing as the logs it came from."""

from __future__ import annotations

import io

import orjson
import pytest
from typer.testing import CliRunner

from prefixcache.analyzer import api
from prefixcache.analyzer.columnar import block_ids
from prefixcache.analyzer.errors import ConfigError
from prefixcache.analyzer.ingest import Ingest
from prefixcache.analyzer.prepare import Preparer
from prefixcache.analyzer.sequence import arrival_order
from prefixcache.cli.app import app
from tests.helpers import CASES, SAMPLES

LOGS = sorted(str(p) for p in CASES.glob("*.jsonl"))
TIMED = str(SAMPLES / "claude_code_session_v1.0.98_fe5e1c67.jsonl")


def _original(paths: list[str], block_size: int) -> list[tuple[int, list[int]]]:
    """(input tokens, chained block hashes) of every request with a prompt, in arrival order."""
    prep = Preparer("auto", "auto")
    rows = []
    for r in Ingest(paths):
        p = prep.prepare(r)
        got = block_ids(p, block_size)
        if got is not None:
            rows.append((r.timestamp, (len(p.tokens.ids), got[0])))
    return [x[1] for _, x in arrival_order(rows, lambda t: t[0])]


@pytest.mark.parametrize("block_size", [16, 512])
def test_mooncake_round_trip_keeps_lengths_and_sharing(tmp_path, block_size):
    out = tmp_path / f"cases_blksz_{block_size}.jsonl"
    with out.open("wb") as fh:
        counts, _ = api.export(LOGS, fh, api.ExportOptions("mooncake", block_size))
    original = _original(LOGS, block_size)
    back = [r for r in Ingest([str(out)])]
    assert counts.requests == len(back) == len(original) == 50 and counts.sessions == 10
    assert all(r.format == "mooncake" and r.trace.block_size == block_size for r in back)
    assert [r.trace.input_length for r in back] == [n for n, _ in original]
    # the same sharing: one exported id per original block hash and one hash per id, in first-seen order
    forward: dict[int, int] = {}
    backward: dict[int, int] = {}
    for (n, hashes), r in zip(original, back):
        ids = r.trace.hash_ids
        assert len(ids) == len(hashes) == -(-n // block_size)
        for h, i in zip(hashes, ids):
            assert forward.setdefault(h, i) == i and backward.setdefault(i, h) == h
    assert sorted(backward) == list(range(len(backward))) == list(range(counts.blocks))
    text = out.read_text()
    assert '"role"' not in text and "content" not in text  # no text, only numbers
    assert counts.no_output_length == 50 and counts.untimed  # the cases log neither


def test_aiperf_records_and_timestamps(tmp_path):
    buf = io.BytesIO()
    counts, _ = api.export([TIMED], buf, api.ExportOptions("aiperf", 64))
    recs = [orjson.loads(line) for line in buf.getvalue().splitlines()]
    assert len(recs) == counts.requests > 5 and not counts.untimed
    assert all(set(r) == {"timestamp", "input_length", "output_length", "hash_ids"} for r in recs)
    stamps = [r["timestamp"] for r in recs]
    assert stamps[0] == 0 and stamps == sorted(stamps) and stamps[-1] > 0  # ms from the first request
    reqs = [r for r in Ingest([TIMED]) if r.usage is not None and r.usage.output_tokens is not None]
    assert counts.no_output_length == counts.requests - len(reqs)  # logged output lengths are kept
    assert all(len(r["hash_ids"]) == -(-r["input_length"] // 64) for r in recs)


def test_bad_options_and_cli(tmp_path):
    with pytest.raises(ConfigError):
        api.export(LOGS, io.BytesIO(), api.ExportOptions("vllm"))
    runner = CliRunner()
    out = tmp_path / "t.jsonl"
    res = runner.invoke(app, ["export", *LOGS[:2], "--to", "mooncake", "-o", str(out), "--block-size", "16"])
    assert res.exit_code == 0, res.output
    assert "request(s)" in res.output and "blksz_16" in res.output  # how to read it back at 16 tokens
    res = runner.invoke(app, ["export", LOGS[0], "--to", "mooncake", "-o", str(out)])
    assert res.exit_code == 2  # never over an existing file without --force
    res = runner.invoke(app, ["export", LOGS[0], "--to", "csv", "-o", str(tmp_path / "x.jsonl")])
    assert res.exit_code == 2 and "--to csv" in res.output


def test_export_labels_full_and_partial_blocks_as_simulate_counts_them(tmp_path):
    """A fresh user's trip (stop 33): export said "13 distinct block ids" of the DeepSeek sample where
    ``simulate --cache blocks --block-size 512`` said "9 unique blocks". Both are right: the trace carries
    an id per started block (4 prompts, 4 partial last blocks); vLLM caches only full blocks. The export
    now says both figures, and its full-block count is simulate's."""
    log = str(SAMPLES / "mini_swe_agent_v1.1_deepseek_reasoner_pvlib-1606.traj.json")
    out = tmp_path / "ds.jsonl"
    res = CliRunner().invoke(app, ["export", log, "--to", "mooncake", "-o", str(out)], env={"COLUMNS": "400"})
    assert res.exit_code == 0, res.output
    text = " ".join(res.output.split())
    assert "13 distinct 512-token block id(s): 9 full block(s)" in text and "and 4 partial last block(s)" in text
    sim = CliRunner().invoke(app, ["simulate", log, "--cache", "blocks", "--block-size", "512", "--json"])
    assert orjson.loads(sim.stdout)["unique_blocks"] == 9
    recs = [orjson.loads(line) for line in out.read_bytes().splitlines()]
    full = {i for r in recs for i in r["hash_ids"][:r["input_length"] // 512]}
    assert len(full) == 9 and len({i for r in recs for i in r["hash_ids"]}) == 13
