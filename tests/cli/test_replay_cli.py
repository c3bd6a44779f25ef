"""`prefixcache replay` end to end on the embedded model: real samples verify, the three
passes, streaming + resume, Ctrl-C, and clear errors."""

from __future__ import annotations

import orjson
import pytest
from typer.testing import CliRunner

from prefixcache.cli.app import app
from tests.helpers import EXAMPLES, SAMPLES, existing, validate

pytestmark = pytest.mark.slow
runner = CliRunner()
MINI = "mini_swe_agent_legacy_list_github_issue.traj.json"


def _replay(args: list[str]):
    res = runner.invoke(app, ["replay", "--json", "--device", "cpu", *args])
    summary = orjson.loads(res.stdout.strip().splitlines()[-1]) if res.exit_code in (0, 1, 130) else None
    return res, summary


def _rows(path) -> list[dict]:
    return [orjson.loads(line) for line in path.read_bytes().splitlines()]


def test_real_sample_hits_match_simulator_and_verify(tmp_path):
    sample = existing(SAMPLES / MINI)
    out = tmp_path / "r.jsonl"
    res, summary = _replay([str(sample), "--max-requests", "2", "--max-prompt-tokens", "1024",
                            "--pass", "cold,warm", "--verify", "all", "--out", str(out)])
    assert res.exit_code == 0, res.output
    passes = {p["pass_name"]: p for p in summary["passes"]}
    assert set(passes) == {"cold", "warm"}
    assert passes["cold"]["cached_tokens"] == 0 and passes["cold"]["prompt_tokens"] == 864 + 1001
    warm = passes["warm"]
    # call 1 re-sends call 0's 864-token prompt (minus the generation prompt) and more
    assert 832 <= warm["cached_tokens"] <= 864 and warm["computed_tokens"] == 1865 - warm["cached_tokens"]
    assert warm["simulator_equal"] is True
    assert warm["verified"] == 1 and warm["mismatches"] == 0 and warm["max_abs_dlogit"] < 1e-3
    rows = _rows(out)
    assert [(r["pass_name"], r["position"]) for r in rows] == [(p, i) for p in ("cold", "warm") for i in (0, 1)]
    assert all(r["cached_tokens"] == r["predicted_cached"] for r in rows if r["pass_name"] != "cold")
    assert all(r["kv_bytes"] == 0 for r in rows if r["pass_name"] == "cold")


def test_examples_three_passes_then_resume(tmp_path):
    log = str(EXAMPLES / "agent_session.jsonl")
    out = tmp_path / "r.jsonl"
    base = [log, "--max-prompt-tokens", "192", "--out", str(out)]
    res, first = _replay([*base, "--max-requests", "3", "--repeat", "2"])
    assert res.exit_code == 0, res.output
    passes = {p["pass_name"]: p for p in first["passes"]}
    # the model's own template drops the tools and tool calls the requests carry: said, once per kind
    assert [w.split(":")[0] for w in first["warnings"]] == ["the model's own chat template drops tools",
                                                           "the model's own chat template drops tool calls"]
    assert first["truncated_prompts"] == 2 and first["max_prompt_tokens"] == 192 and first["repeat"] == 2
    # the per-second clock in the system prompt breaks the warm prefix a few tokens in;
    # canonicalization moves it out and the prefix is reused
    assert passes["canonical"]["cached_tokens"] > 5 * passes["warm"]["cached_tokens"] > 0
    rows = _rows(out)
    assert len(rows) == 9 and {r["run"] for r in rows} == {first["run"]}
    for r in rows:  # TTFT is the median (low) of the repeated prefills; the row keeps that run's stamps
        assert len(r["ttft_samples"]) == 2 and r["ttft_s"] == pytest.approx(min(r["ttft_samples"]))
    kept = out.read_bytes()
    res, _ = _replay([*base, "--max-requests", "4", "--resume", "--block-size", "64"])
    assert res.exit_code == 2 and "holds results of another run" in _err(res)
    assert out.read_bytes() == kept
    with out.open("ab") as f:
        f.write(orjson.dumps(rows[-1])[:30])  # a torn last line, as from a run killed mid-write
    res, second = _replay([*base, "--max-requests", "4", "--resume"])
    assert res.exit_code == 0, res.output
    rows = _rows(out)
    keys = [(r["pass_name"], r["position"]) for r in rows]
    assert len(rows) == 12 and len(set(keys)) == 12
    assert rows[:9] == _rows(out)[:9]
    again = {p["pass_name"]: p for p in second["passes"]}
    assert all(p["requests"] == 4 for p in again.values())
    # the resumed cache passes rebuilt the same cache state: request 3 hits as predicted
    assert all(r["cached_tokens"] == r["predicted_cached"] for r in rows if r["pass_name"] != "cold")
    assert again["canonical"]["cached_tokens"] > passes["canonical"]["cached_tokens"]


def test_ctrl_c_keeps_finished_requests_and_prints_summary(tmp_path, monkeypatch):
    from prefixcache.replay.local import hf

    real, calls = hf.HFEngine.generate, []

    def interrupted(self, ids, **kw):
        calls.append(1)
        if len(calls) == 4:  # warm-up, cold #0, cold #1, then Ctrl-C
            raise KeyboardInterrupt
        return real(self, ids, **kw)

    monkeypatch.setattr(hf.HFEngine, "generate", interrupted)
    out = tmp_path / "r.jsonl"
    res, summary = _replay([str(EXAMPLES / "agent_session.jsonl"), "--max-prompt-tokens", "128", "--out", str(out)])
    assert res.exit_code == 130
    assert summary["interrupted"] is True and summary["passes"][0]["requests"] == 2
    assert [r["position"] for r in _rows(out)] == [0, 1]


def _err(res) -> str:
    return " ".join(res.stderr.split())


def test_unusable_model_is_a_clear_error(tmp_path):
    res = runner.invoke(app, ["replay", str(EXAMPLES / "agent_session.jsonl"), "--model", str(tmp_path / "x.gguf")])
    assert res.exit_code == 2 and "no such GGUF file" in _err(res)
    res = runner.invoke(app, ["replay", str(EXAMPLES / "agent_session.jsonl"), "--model", str(tmp_path)])
    assert res.exit_code == 2 and "not a model folder" in _err(res)
    res = runner.invoke(app, ["replay", str(EXAMPLES / "agent_session.jsonl"), "--pass", "cold,hot"])
    assert res.exit_code == 2 and "--pass hot" in _err(res)
    res = runner.invoke(app, ["replay", str(EXAMPLES / "agent_session.jsonl"), "--model", str(tmp_path / "no" / "model")])
    assert res.exit_code == 2 and "no such model folder or file" in _err(res)


@pytest.mark.parametrize("args", [["--verify-every", "0", "--verify", "sample"], ["--max-requests", "0"],
                                  ["--max-prompt-tokens", "0"], ["--repeat", "0"], ["--block-size", "0"],
                                  ["--max-new-tokens", "0"], ["--tol", "-1"]])
def test_counts_below_one_fail_before_any_work(args):
    res = runner.invoke(app, ["replay", str(EXAMPLES / "agent_session.jsonl"), *args])
    assert res.exit_code == 2 and f"Invalid value for '{args[0]}'" in _err(res)


@pytest.mark.parametrize("capacity,message", [("0", "--capacity 0: less than one block"),
                                              ("8tok", "--capacity 8tok: less than one block"),
                                              ("-1GiB", "--capacity -1GiB: a capacity cannot be negative"), ("5%,10%", "one capacity"),
                                              ("0%", "--capacity 0%: less than one block")])
def test_bad_capacity_is_a_usage_error_before_any_work(capacity, message):
    res = runner.invoke(app, ["replay", str(EXAMPLES / "agent_session.jsonl"), "--capacity", capacity])
    assert res.exit_code == 2 and message in _err(res)


def test_deprecated_capacity_spelling_still_checked():
    res = runner.invoke(app, ["replay", str(EXAMPLES / "agent_session.jsonl"), "--capacity-blocks", "0"])
    assert res.exit_code == 2 and "--capacity-blocks is deprecated" in _err(res)
    assert "--capacity 0blocks: less than one block" in _err(res)


def test_out_never_overwrites_an_input_or_an_earlier_run(tmp_path):
    log = str(EXAMPLES / "agent_session.jsonl")
    res = runner.invoke(app, ["replay", log, "--out", log, "--force"])
    assert res.exit_code == 2 and "is an input of this run" in _err(res)
    earlier = tmp_path / "r.jsonl"
    earlier.write_bytes(b"kept\n")
    res = runner.invoke(app, ["replay", log, "--out", str(earlier)])
    assert res.exit_code == 2 and "pass --resume or --force to overwrite it" in _err(res)
    res = runner.invoke(app, ["replay", log, "--out", str(earlier), "--resume", "--force"])
    assert res.exit_code == 2 and "give one" in _err(res)
    res = runner.invoke(app, ["replay", log, "--resume"])
    assert res.exit_code == 2 and "--resume needs --out" in _err(res)
    res = runner.invoke(app, ["replay", log, "--format", "sarif"])
    assert res.exit_code == 2 and "choose one of rich, json" in _err(res)
    assert earlier.read_bytes() == b"kept\n"


def test_unloadable_model_files_are_one_line_errors(tmp_path, monkeypatch):
    monkeypatch.setenv("PREFIXCACHE_CACHE", str(tmp_path / "cache"))  # a GGUF would be converted there
    (tmp_path / "corrupt.gguf").write_bytes(b"GGUF\x03\x00\x00\x00 not really")
    (tmp_path / "random.gguf").write_bytes(bytes(range(256)) * 8)
    (tmp_path / "badcfg").mkdir()
    (tmp_path / "badcfg" / "config.json").write_text("{not json")
    (tmp_path / "nocfg").mkdir()
    cases = [("corrupt.gguf", "cannot load GGUF model"), ("random.gguf", "cannot load GGUF model"),
             ("badcfg", "unusable model"), ("nocfg", "not a model folder (no config.json)"),
             ("missing", "no such model folder or file")]
    for name, message in cases:
        res = runner.invoke(app, ["replay", str(EXAMPLES / "agent_session.jsonl"), "--model", str(tmp_path / name)])
        assert res.exit_code == 2 and message in _err(res), (name, res.stderr)
        assert len(res.stderr.strip().splitlines()) == 1 and "Traceback" not in res.output, res.stderr


def test_json_summary_is_the_library_report(tmp_path, monkeypatch):
    """``--json`` prints ``orjson.dumps(report)`` of the library's :class:`ReplayReport`:
    its keys in order and the token figures (timings vary from run to run)."""
    from prefixcache.replay.local import session as replay_run

    built = []
    real = replay_run.build_report
    monkeypatch.setattr(replay_run, "build_report", lambda *a, **kw: built.append(real(*a, **kw)) or built[-1])
    out = tmp_path / "r.jsonl"
    out.write_bytes(b"an earlier run\n")
    res = runner.invoke(app, ["replay", str(EXAMPLES / "agent_session.jsonl"), "--format", "json", "--device", "cpu",
                              "--pass", "cold,warm", "--max-prompt-tokens", "256", "--out", str(out), "--force"])
    assert res.exit_code == 0, res.output
    assert res.stdout.encode() == orjson.dumps(built[0]) + b"\n"
    doc = orjson.loads(res.stdout)
    assert list(doc) == ["model", "device", "dtype", "block_size", "policy", "requests", "run", "template", "repeat",
                         "capacity_blocks", "max_prompt_tokens", "truncated_prompts", "truncated_canonical_prompts",
                         "dropped_hidden_prefixes", "skipped_records", "warnings", "passes", "interrupted"]
    fixed = {k: doc[k] for k in ("model", "device", "dtype", "block_size", "policy", "requests", "template", "repeat",
                                 "capacity_blocks", "max_prompt_tokens", "truncated_prompts",
                                 "truncated_canonical_prompts", "dropped_hidden_prefixes", "skipped_records",
                                 "interrupted")}
    assert fixed == {"model": "SmolLM2-135M-Instruct.Q4_1", "device": "cpu", "dtype": "float32", "block_size": 16,
                     "policy": "lru", "requests": 6, "template": "model", "repeat": 1, "capacity_blocks": None,
                     "max_prompt_tokens": 256, "truncated_prompts": 4, "truncated_canonical_prompts": 0,
                     "dropped_hidden_prefixes": 0, "skipped_records": 0, "interrupted": False}
    assert [w.split(":")[0] for w in doc["warnings"]] == ["the model's own chat template drops tools",
                                                          "the model's own chat template drops tool calls"]
    tokens = [{k: p[k] for k in ("pass_name", "requests", "prompt_tokens", "cached_tokens", "computed_tokens",
                                 "avoided_prefill", "verified", "mismatches", "simulator_equal")} for p in doc["passes"]]
    assert tokens == [
        {"pass_name": "cold", "requests": 6, "prompt_tokens": 1422, "cached_tokens": 0, "computed_tokens": 1422,
         "avoided_prefill": 0, "verified": 0, "mismatches": 0, "simulator_equal": None},
        {"pass_name": "warm", "requests": 6, "prompt_tokens": 1422, "cached_tokens": 80, "computed_tokens": 1342,
         "avoided_prefill": 80, "verified": 2, "mismatches": 0, "simulator_equal": True}]
    assert doc["passes"][1]["hit_rate"] == 80 / 1422 and doc["passes"][1]["kv_bytes_peak"] == 61194240
    rows = [orjson.loads(line) for line in out.read_bytes().splitlines()]
    assert len(rows) == 12  # --force started the file over
    validate(doc, "replay")
    for row in rows:
        validate(row, "replay-result")
