"""Images: identified by content, costed by the providers' published formulas, and a replaced image named as such."""

from __future__ import annotations

import base64
import json
import struct
import zlib

from prefixcache.analyzer.ingest import Ingest
from prefixcache.analyzer.lint.config import LintConfig
from prefixcache.analyzer.lint.run import lint_paths
from prefixcache.analyzer.model import ContentPart
from prefixcache.analyzer.render.images import anthropic_image_tokens, image_tokens, openai_image_tokens, placeholder


def _png(width: int, height: int, seed: int) -> str:
    """A valid PNG (one grey row per line) as a data URL."""
    def chunk(tag: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + tag + data + struct.pack(">I", zlib.crc32(tag + data) & 0xFFFFFFFF)
    raw = b"".join(b"\x00" + bytes([seed % 256]) * width for _ in range(height))
    png = (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", width, height, 8, 0, 0, 0, 0))
           + chunk(b"IDAT", zlib.compress(raw)) + chunk(b"IEND", b""))
    return "data:image/png;base64," + base64.b64encode(png).decode()


def test_published_examples() -> None:
    # OpenAI "Calculating costs": 1024x1024 high = 765; 2048x4096 high = 1105; low = 85.
    assert openai_image_tokens(1024, 1024) == 765 and openai_image_tokens(2048, 4096) == 1105
    assert openai_image_tokens(4096, 4096, "low") == 85
    # Anthropic "Vision": a 1092x1092 image is about 1,590 tokens; 200x200 about 54.
    assert anthropic_image_tokens(1092, 1092) == 1590 and anthropic_image_tokens(200, 200) == 54
    p = ContentPart("image", "sha256:00112233445566ff", width=1024, height=1024)
    assert image_tokens(p, "provider:openai") == 765 and image_tokens(p, "chatml_tools") is None
    assert "img-" in placeholder(p) and "00112233" not in placeholder(p)  # never a hex id


def _body(images: list[str], turns: int) -> dict:
    content = [{"type": "text", "text": "What is in this picture?"}] + [
        {"type": "image_url", "image_url": {"url": u, "detail": "high"}} for u in images]
    later = [{"role": "assistant", "content": "A grey square."}, {"role": "user", "content": "And now?"},
             {"role": "assistant", "content": "Still grey."}, {"role": "user", "content": "Sure?"}]
    return {"model": "gpt-4o", "messages": [{"role": "system", "content": "You describe pictures."},
                                            {"role": "user", "content": content}] + later[:turns]}


def test_a_replaced_image_is_an_image_change_not_a_volatile_id(tmp_path) -> None:
    a, b = _png(1024, 1024, 1), _png(1024, 1024, 2)
    log = tmp_path / "vision.jsonl"
    log.write_text(json.dumps(_body([a], 2)) + "\n" + json.dumps(_body([b], 4)) + "\n")
    reqs = list(Ingest([str(log)]))
    first, second = (r.messages[1].parts[0] for r in reqs)
    assert (first.width, first.height, first.type) == (1024, 1024, "image")
    assert first.digest.startswith("sha256:") and first.digest != second.digest
    run = lint_paths([str(log)], LintConfig())
    # the image is 765 tokens in the token stream (OpenAI's count for 1024x1024), so the prompt is
    # below OpenAI's 1,024-token caching minimum: PC601 (info) says so
    (finding,) = [f for r in run.results for f in r.findings if f.code != "PC601"]
    assert finding.code == "PC404" and "an image was replaced" in finding.message
    assert finding.lost_tokens >= 765  # the replaced image's tokens and everything after it
    same = tmp_path / "same.jsonl"
    same.write_text(json.dumps(_body([a], 2)) + "\n" + json.dumps(_body([a], 4)) + "\n")
    again = lint_paths([str(same)], LintConfig())
    assert not [f for r in again.results for f in r.findings if f.code != "PC601"]
    assert again.results[1].reusable_tokens > 765  # the same picture resent: a prefix hit through it


def test_images_are_in_the_token_stream_at_the_published_count(tmp_path) -> None:
    from prefixcache.analyzer.prepare.prepared import Preparer
    log = tmp_path / "vision.jsonl"
    log.write_text(json.dumps(_body([_png(1024, 1024, 1)], 0)) + "\n" + json.dumps(_body([], 0)) + "\n")
    with_image, without = (Preparer().prepare(r) for r in Ingest([str(log)]))
    assert with_image.tokens.image_tokens == 765 and without.tokens.image_tokens == 0
    placeholder_tokens = 15  # about what the placeholder text tokenizes to, replaced by the 765 pseudo-ids
    assert 765 <= len(with_image.tokens.ids) - len(without.tokens.ids) <= 765 + placeholder_tokens
    assert sum(1 for i in with_image.tokens.ids if i < 0) == 765  # pseudo-ids from the image's digest


def test_gemini_published_counts() -> None:
    from prefixcache.analyzer.render.images import gemini_generation, gemini_image_tokens

    # ai.google.dev "Understand and count tokens": both sides <= 384 px: 258; else 258 per 768x768 tile
    assert gemini_image_tokens(384, 384) == 258 and gemini_image_tokens(300, 200) == 258
    assert gemini_image_tokens(385, 100) == 258 and gemini_image_tokens(768, 768) == 258
    assert gemini_image_tokens(769, 768) == 516 and gemini_image_tokens(1600, 900) == 258 * 3 * 2
    assert gemini_image_tokens(4000, 3000, generation=1) == 258  # Gemini 1.x: fixed per image
    # Gemini 3: by media_resolution (high is the images' default)
    assert gemini_image_tokens(100, 100, 3) == 1120 and gemini_image_tokens(100, 100, 3, "low") == 280
    assert [gemini_generation(m) for m in ("gemini-2.5-pro", "models/gemini-3-pro-preview",
                                           "publishers/google/models/gemini-2.0-flash", "gpt-4o")] == [2, 3, 2, None]
    p = ContentPart("image", "sha256:00112233445566ff", width=1600, height=900)
    # the model's provider bills the image, whatever layout lays the prompt out
    assert image_tokens(p, "chatml_tools", "gemini-2.5-pro") == 1548
    assert image_tokens(p, "provider:openai", "gemini-2.5-flash") == 1548
    assert image_tokens(p, "chatml_tools", "qwen3") is None


def _gemini_session(model: str) -> dict:
    """A Gemini CLI ConversationRecord: a pasted picture, then ``read_file`` of a screenshot."""
    small, shot = _png(300, 200, 7), _png(1600, 900, 8)
    inline = lambda url: {"inlineData": {"mimeType": "image/png", "data": url.split(",", 1)[1]}}  # noqa: E731
    tokens = {"input": 0, "output": 0, "cached": 0, "thoughts": 0, "tool": 0, "total": 0}
    return {"sessionId": "s-img", "projectHash": "abc", "startTime": "2026-01-01T00:00:00Z",
            "messages": [
                {"id": "u1", "timestamp": "2026-01-01T00:00:01Z", "type": "user",
                 "content": [{"text": "What is in this picture?"}, inline(small)]},
                {"id": "g1", "timestamp": "2026-01-01T00:00:02Z", "type": "gemini", "model": model,
                 "content": "A grey rectangle. Let me look at the screenshot.", "tokens": tokens,
                 "toolCalls": [{"id": "read_file-1", "name": "read_file", "args": {"absolute_path": "/s.png"},
                                "status": "success",
                                "result": [{"functionResponse": {"id": "read_file-1", "name": "read_file",
                                                                 "response": {"output": "Binary content provided."}}},
                                           inline(shot)]}]},
                {"id": "g2", "timestamp": "2026-01-01T00:00:03Z", "type": "gemini", "model": model,
                 "content": "The screenshot is grey too.", "tokens": tokens}]}


def test_gemini_cli_images_are_in_the_token_stream_at_googles_count(tmp_path) -> None:
    from prefixcache.analyzer.prepare.prepared import Preparer

    log = tmp_path / "session-img.json"
    log.write_text(json.dumps(_gemini_session("gemini-2.5-pro")))
    first, second = reqs = list(Ingest([str(log)]))
    (pasted,) = first.messages[0].parts
    assert (pasted.type, pasted.width, pasted.height) == ("image", 300, 200) and pasted.digest.startswith("sha256:")
    tool = second.messages[-1]
    assert tool.role == "tool" and [(p.width, p.height) for p in tool.parts] == [(1600, 900)]
    prep = Preparer()
    a, b = (prep.prepare(r) for r in reqs)
    assert "images at Google's published counts" in prep.notes["gemini-2.5-pro"]
    assert not any("not rendered" in w for w in a.rendered.warnings + b.rendered.warnings)
    assert a.tokens.image_tokens == 258 and b.tokens.image_tokens == 258 + 1548
    assert sum(i < 0 for i in b.tokens.ids) == 258 + 1548  # pseudo-ids from the images' digests
    # the pasted picture sent again is the same tokens: call 2 starts with all of call 1's prompt
    # but its last few tokens (the generation prompt)
    shared = next((k for k, (x, y) in enumerate(zip(a.tokens.ids, b.tokens.ids)) if x != y), len(a.tokens.ids))
    assert shared >= len(a.tokens.ids) - 5 and sum(i < 0 for i in a.tokens.ids[:shared]) == 258
    # Gemini 3 bills by media_resolution: 1,120 an image by default
    log.write_text(json.dumps(_gemini_session("gemini-3-pro-preview")))
    assert [Preparer().prepare(r).tokens.image_tokens for r in Ingest([str(log)])] == [1120, 2240]


def test_opentelemetry_image_blobs_are_images() -> None:
    from prefixcache.analyzer.ingest.images import content_part

    data = _png(640, 480, 3).split(",", 1)[1]
    p = content_part("blob", {"type": "blob", "modality": "image", "mime_type": "image/png", "content": data})
    assert (p.type, p.width, p.height) == ("image", 640, 480) and p.digest.startswith("sha256:")
    audio = content_part("blob", {"type": "blob", "modality": "audio", "mime_type": "audio/wav", "content": "AAAA"})
    assert audio.type == "blob"
