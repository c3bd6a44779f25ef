"""Issue 25 item 6: the columnar block-hash trace (``prefixcache trace``, Parquet): what goes in comes
out, a block-hash trace through it gives the same simulate and lint documents, byte for byte, and a
file that is not one of ours fails with one line naming the file and what is wrong."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from prefixcache.analyzer.cache.index.block_hash import hash_blocks
from prefixcache.analyzer.ingest import Ingest
from prefixcache.analyzer.prepare import Preparer
from tests.helpers import SAMPLES, cli_app, existing

MOONCAKE = "mooncake_kvtrace_synthetic_trace.jsonl"
TESTER = "kvcache_tester_claudecode_hashids64_trace_0001.json"
SWE = "swe_agent_traj_function_calling_with_per_step_messages_marshmallow-1867.traj"


def _run(*args: str):
    res = CliRunner().invoke(cli_app(), [str(a) for a in args])
    assert "Traceback" not in res.stderr, res.stderr
    return res


def _trace(tmp_path: Path, *logs: str, name: str = "t.parquet") -> Path:
    out = tmp_path / name
    res = _run("trace", *(existing(SAMPLES / log) for log in logs), "-o", out)
    assert res.exit_code == 0, res.stderr
    return out


@pytest.mark.parametrize("log", [MOONCAKE, TESTER])
def test_a_block_trace_through_parquet_gives_the_same_documents(tmp_path, log) -> None:
    parquet = _trace(tmp_path, log)
    for args in (["simulate", "--cache", "blocks", "--capacity", "5%,10%", "--policy", "lru,belady", "--json"],
                 ["lint", "--json"]):
        original, again = _run(args[0], SAMPLES / log, *args[1:]), _run(args[0], parquet, *args[1:])
        assert again.exit_code == original.exit_code and again.stdout == original.stdout, args[0]


def test_a_text_log_is_tokenized_once_into_block_ids(tmp_path) -> None:
    import pyarrow.parquet as pq

    table = pq.read_table(_trace(tmp_path, SWE)).to_pylist()
    preparer = Preparer()
    prepared = [preparer.prepare(r) for r in Ingest([str(SAMPLES / SWE)])]
    assert len(table) == len(prepared) == 13
    for row, p in zip(table, prepared):
        ids = p.tokens.ids
        full = [h - (1 << 64) if h >= 1 << 63 else h for h in hash_blocks(ids, 16)]
        assert row["input_length"] == len(ids) and row["block_size"] == 16 and row["session"] == p.request.session
        assert row["hash_ids"][:len(full)] == full and len(row["hash_ids"]) == -(-len(ids) // 16)  # + the partial one
        assert row["source"].endswith(SWE) and row["format"] == "swe-agent"
    # the file simulates like any block-hash trace: every request of the log, its tokens
    res = _run("simulate", tmp_path / "t.parquet", "--cache", "blocks", "--json")
    assert res.exit_code == 0, res.stderr
    assert f'"prompt_tokens":{sum(len(p.tokens.ids) for p in prepared)}' in res.stdout


def test_an_existing_output_is_kept_and_a_foreign_parquet_is_named(tmp_path) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    out = _trace(tmp_path, MOONCAKE)
    before = out.read_bytes()
    res = _run("trace", SAMPLES / MOONCAKE, "-o", out)
    assert res.exit_code == 2 and "--force" in res.stderr and out.read_bytes() == before
    foreign = tmp_path / "foreign.parquet"
    pq.write_table(pa.table({"session": ["a"], "hash_ids": [[1, 2]]}), foreign)
    res = _run("simulate", foreign, "--cache", "blocks")
    assert res.exit_code == 2 and "foreign.parquet" in res.stderr and "no column 'request'" in res.stderr, res.stderr
    bad = tmp_path / "bad.parquet"
    rows = pq.read_table(out).slice(0, 3).to_pylist()
    rows[1]["input_length"] = -4
    pq.write_table(pa.Table.from_pylist(rows, schema=pq.read_schema(out)), bad)
    res = _run("lint", bad)
    assert res.exit_code == 2 and "bad.parquet:2" in res.stderr and "input_length" in res.stderr, res.stderr


def test_an_unknown_executor_is_one_error_naming_the_flag() -> None:
    res = _run("lint", SAMPLES / MOONCAKE, "--executor", "dask")
    assert res.exit_code == 2 and "--executor dask: expected local, ray or ray:ADDRESS" in res.stderr, res.stderr
