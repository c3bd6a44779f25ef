"""o200k_base / o200k_harmony offline: tiktoken's own encodings on the rank file bpe-openai ships."""

from __future__ import annotations

import gzip
import hashlib

import pytest
import tiktoken

from prefixcache.analyzer.tokenize import choose_auto, get_tokenizer
from prefixcache.analyzer.tokenize import offline


@pytest.fixture()
def fresh_cache(tmp_path, monkeypatch):
    """An empty tiktoken cache and no network: only the shipped file can make o200k loadable."""
    monkeypatch.setenv("TIKTOKEN_CACHE_DIR", str(tmp_path))
    monkeypatch.setenv("PREFIXCACHE_OFFLINE", "1")
    return tmp_path


def test_shipped_rank_file_is_the_published_one() -> None:
    src = offline.shipped("o200k_base")
    assert src is not None, "bpe-openai (extra offline) ships o200k_base.tiktoken.gz"
    data = gzip.decompress(src.read_bytes())
    # The SHA-256 tiktoken_ext/openai_public.py expects for o200k_base.tiktoken.
    assert hashlib.sha256(data).hexdigest() == "446a9538cb6c348e3516120d7c08b09f57c36495e2acfffe59a5bf8b0cfb1a2d"
    assert len(data.splitlines()) == 199998


def test_seed_lets_tiktoken_load_o200k_offline(fresh_cache) -> None:
    assert offline.seed("o200k_base")
    url = offline.RANK_FILES["o200k_base"].url
    assert (fresh_cache / hashlib.sha1(url.encode()).hexdigest()).is_file()
    from tiktoken_ext.openai_public import o200k_base

    enc = tiktoken.Encoding(**o200k_base())  # tiktoken's own constructor, loading from its cache
    # Published test vectors: "hello world" -> [24912, 2375]; vocabulary 200,019 ids.
    assert enc.encode("hello world") == [24912, 2375]
    assert enc.n_vocab == 200019
    assert enc.encode("hello <|endoftext|>", allowed_special="all")[-1] == 199999
    # tiktoken's test_simple / test_basic_roundtrip on this encoding.
    for token in range(10_000):
        assert enc.encode_single_token(enc.decode_single_token_bytes(token)) == token
    for value in ("hello", "hello ", " hello  ", "hello world", "请考试我的软件！12345"):
        assert enc.decode(enc.encode(value)) == value


def test_harmony_special_tokens(fresh_cache) -> None:
    tok = get_tokenizer("o200k_harmony")
    assert tok.exact
    ids = tok.encode("<|start|>user<|message|>hi<|end|><|start|>assistant<|channel|>final<|message|>ok<|return|>")
    assert ids[:3] == [200006, 1428, 200008] and 200007 in ids and 200005 in ids and ids[-1] == 200002


def test_auto_is_exact_for_current_openai_models(fresh_cache) -> None:
    for model in ("gpt-4o", "gpt-4.1-mini", "gpt-5.1-codex-max", "o3", "azure/gpt-4o"):
        c = choose_auto(model)
        assert (c.spec, c.exact) == ("o200k_base", True), model
    c = choose_auto("openai/gpt-oss-20b")
    assert (c.spec, c.exact) == ("o200k_harmony", True)


def test_a_corrupt_shipped_file_is_never_seeded(fresh_cache, monkeypatch) -> None:
    bad = offline.RankFile(offline.RANK_FILES["o200k_base"].url, "0" * 64, "bpe_openai", ("data", "o200k_base.tiktoken.gz"))
    monkeypatch.setitem(offline.RANK_FILES, "o200k_base", bad)
    assert not offline.seed("o200k_base")
    assert list(fresh_cache.iterdir()) == []


def test_caching_switched_off_is_not_seeded(monkeypatch) -> None:
    monkeypatch.setenv("TIKTOKEN_CACHE_DIR", "")
    assert offline.tiktoken_cache_path("x") is None and not offline.seed("o200k_base")
