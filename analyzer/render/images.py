"""Images in a rendered prompt: the placeholder text that stands for one, and what a provider bills for it.

A layout cannot render an image's tokens, only mark where it sits. The placeholder
(:func:`placeholder`) names the image by its content digest spelled in base32 (so that
the volatile-value finder, which looks for hex ids, never takes a picture for a request
id: a changed image is named as an image change, PC404) and its size. Its ~10 tokens are
not what the provider bills; :func:`image_tokens` is, from the published formulas:

* **OpenAI** (``provider:openai``; GPT-4o / GPT-4.1 / GPT-5 family, "Images and vision"
  guide, *Calculating costs*): ``detail: low`` costs 85 tokens; otherwise the image is
  scaled to fit in 2048×2048, then its shortest side scaled to 768 px (never up), and it
  costs 85 + 170 per 512-px tile (``ceil(w/512)·ceil(h/512)``).
* **Anthropic** (``provider:anthropic``; "Vision" docs, *Evaluate image size*): an image
  whose long edge exceeds 1568 px is scaled down to it, and costs ``ceil(w·h/750)`` tokens.

Chat templates of open models drop images (a warning says so) and their vision encoders
vary per model: no count is claimed for them (None).

In the token stream an image with a published count is that many pseudo-ids derived from
its digest (:func:`prefixcache.analyzer.tokenize.session.with_images`, found by
:data:`PLACEHOLDER`): lint and simulate see a resent image as the same tokens and a
replaced one as different tokens of the right length.
"""

from __future__ import annotations

import base64
import math
import re
from typing import Iterable

from prefixcache.analyzer.model import ContentPart


#: An image placeholder in rendered text: its tag (``img-<base32>`` / ``link-<base32>``) is group 1.
PLACEHOLDER = re.compile(r"\[image ((?:img|link)-[a-z2-7]+)(?: \d+x\d+)?\]")
#: Layouts whose provider publishes an image-token formula (:func:`image_tokens`).
OPENAI_LAYOUTS = ("provider:openai", "provider:openai-harmony")


def image_tag(p: ContentPart) -> str:
    """An image's name in its placeholder: ``img-<base32 of the sha256 digest>`` (``link-`` for a
    URL digest), base32 so the volatile-value finder never takes it for a hex request id."""
    kind, _, hexdigest = p.digest.partition(":")
    try:
        tag = base64.b32encode(bytes.fromhex(hexdigest)).decode().rstrip("=").lower()
    except ValueError:
        tag = hexdigest
    return f"{'img' if kind == 'sha256' else 'link'}-{tag}"


def placeholder(p: ContentPart) -> str:
    """The text a layout writes for a non-text part: ``[image img-<base32> WxH]`` for an
    image, ``[<type> <digest>]`` otherwise."""
    if p.type != "image":
        return f"[{p.type} {p.digest}]"
    size = f" {p.width}x{p.height}" if p.width and p.height else ""
    return f"[image {image_tag(p)}{size}]"


def image_costs(parts: Iterable[ContentPart], renderer: str) -> dict[str, tuple[str, int]]:
    """Placeholder tag → (the image's digest, its billed tokens by :func:`image_tokens`) for every
    image of ``parts`` the provider of ``renderer`` publishes a count for (empty otherwise)."""
    out: dict[str, tuple[str, int]] = {}
    for p in parts:
        n = image_tokens(p, renderer)
        if n:
            out[image_tag(p)] = (p.digest, n)
    return out


def openai_image_tokens(width: int, height: int, detail: str | None = None) -> int:
    """OpenAI's image tokens for a ``width``×``height`` px image (see the module doc)."""
    if detail == "low":
        return 85
    w, h = float(width), float(height)
    if max(w, h) > 2048:
        s = 2048 / max(w, h)
        w, h = w * s, h * s
    if min(w, h) > 768:
        s = 768 / min(w, h)
        w, h = w * s, h * s
    return 85 + 170 * math.ceil(w / 512) * math.ceil(h / 512)


def anthropic_image_tokens(width: int, height: int) -> int:
    """Anthropic's image tokens for a ``width``×``height`` px image (see the module doc)."""
    w, h = float(width), float(height)
    if max(w, h) > 1568:
        s = 1568 / max(w, h)
        w, h = w * s, h * s
    return math.ceil(w * h / 750)


def image_tokens(p: ContentPart, renderer: str) -> int | None:
    """What the provider of layout ``renderer`` bills for image part ``p`` (tokens); None for a
    part that is no image, an image of unknown size (sent by URL) or a renderer with no
    published formula."""
    if p.type != "image" or not p.width or not p.height:
        return None
    if renderer in OPENAI_LAYOUTS:
        return openai_image_tokens(p.width, p.height, p.detail)
    if renderer == "provider:anthropic":
        return anthropic_image_tokens(p.width, p.height)
    return None
