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
