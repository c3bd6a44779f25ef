"""Images in a rendered prompt: the placeholder text that stands for one, and what a provider bills for it.

A layout cannot render an image's tokens, only mark where it sits. The placeholder
(:func:`placeholder`) names the image by its content digest spelled in base32 (so that
the volatile-value finder, which looks for hex ids, never takes a picture for a request
id: a changed image is named as an image change, PC404) and its size. Its ~10 tokens are
not what the provider bills; :func:`image_tokens` is, from the published formulas:

* **OpenAI** (``provider:openai`` / ``provider:openai-harmony``; "Images and vision" guide,
  *Calculating costs*), two systems chosen by the model. **Tiles** (GPT-4o, GPT-4.1,
  GPT-4.5, GPT-5 / 5.1, o1/o3): ``detail: low`` costs the base; otherwise the image is
  scaled to fit in 2048×2048, then its shortest side scaled to 768 px (never up), and it
  costs base + tile per 512-px tile (``ceil(w/512)·ceil(h/512)``); base / tile 85 / 170
  (GPT-4o, 4.1, 4.5, and any other model), 70 / 140 (GPT-5), 75 / 150 (o1, o3), 2,833 /
  5,667 (GPT-4o-mini). **Patches** (GPT-4.1-mini / -nano, o4-mini, GPT-5-mini / -nano,
  GPT-5.2 and later): the 32-px patches that cover the image (scaled down to fit 1,536 of
  them), times the model's multiplier: 1.62 / 2.46 (GPT-4.1-mini / -nano), 1.72 (o4-mini,
  codex-mini), 1.2 / 1.5 (GPT-5-mini / -nano: what the API bills and OpenAI's pricing-page
  calculator uses; the guide's table says 1.62 / 2.46, which the bill contradicts), 1.2
  (GPT-5.2 and later: measured by users on the OpenAI developer forum, not in the guide).
  Checked on real bills (pydantic-ai's recorded API calls, tests/fixtures/images/SOURCES.md):
  a 597×566 JPEG costs gpt-4o 765 (prompt 779 billed, ours 776) and gpt-5-mini 410 (the call
  that added it grew by 456 billed tokens, ours by 457; the guide's 1.62 says 554, the tile
  rule 765).
* **Anthropic** (``provider:anthropic``; "Vision" docs, *Evaluate image size*): an image
  whose long edge exceeds 1568 px is scaled down to it, and costs ``ceil(w·h/750)`` tokens.
  Checked on a real bill: the same JPEG (451 tokens) grew claude-sonnet-4-5's prompt by 534
  billed tokens, ours by 532.
* **Google Gemini** (any layout, chosen by the *model*: a ``gemini-…`` name, ``models/`` or
  Vertex ``publishers/google/models/`` prefix allowed; ai.google.dev "Understand and count
  tokens", Gemini 2.0 and later): an image with both sides at most 384 px costs 258 tokens;
  a larger one is cropped and scaled into 768×768 tiles of 258 tokens each
  (``258·ceil(w/768)·ceil(h/768)``); Gemini 1.x: a fixed 258 per image. Checked on a real
  bill: gemini-2.5-flash reported 516 image tokens for a 597×566 JPEG and a 400×301 PNG
  (2 × 258). **Gemini 3** and later bill an image by its ``media_resolution`` instead
  (ai.google.dev "Media resolution", *Token counts*): low 280, medium 560, high 1,120 (the
  default for images), ultra high 2,240 — a per-part ``mediaResolution`` is kept as the
  part's ``detail``. Google calls these budgets a maximum: gemini-3-flash-preview reported
  2,190 image tokens for those two pictures (ours 2,240, +2.3%). The Gemini models are laid
  out with the generic ``chatml_tools`` stand-in, which drops non-text parts;
  :class:`ImageText` writes their placeholders into the message text first, so their tokens
  are in the stream too.

Chat templates of open models drop images (a warning says so) and their vision encoders
vary per model: no count is claimed for them (None).

In the token stream an image with a published count is that many pseudo-ids derived from
its digest (:func:`prefixcache.analyzer.tokenize.session.with_images`, found by
:data:`PLACEHOLDER`): lint and simulate see a resent image as the same tokens and a
replaced one as different tokens of the right length.
"""

from __future__ import annotations

import base64
import dataclasses
import math
import re
from typing import Any, Iterable

from prefixcache.analyzer.model import ContentPart, Message, RenderedPrompt, Request


#: An image placeholder in rendered text: its tag (``img-<base32>`` / ``link-<base32>``) is group 1.
PLACEHOLDER = re.compile(r"\[image ((?:img|link)-[a-z2-7]+)(?: \d+x\d+)?\]")
#: Layouts whose provider publishes an image-token formula (:func:`image_tokens`).
OPENAI_LAYOUTS = ("provider:openai", "provider:openai-harmony")
#: Gemini 3+ image tokens per ``media_resolution`` level (the default for images is ``high``).
GEMINI_MEDIA_RESOLUTION = {"low": 280, "medium": 560, "high": 1120, "ultra_high": 2240}
_GEMINI = re.compile(r"gemini-(\d+)")


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


def text_with_parts(m: Message) -> str:
    """A message's text, then one placeholder line per non-text part (:func:`placeholder`)."""
    return "\n".join([m.content] + [placeholder(p) for p in m.parts]) if m.parts else m.content


def gemini_generation(model: str | None) -> int | None:
    """The major version of a Gemini model name (``gemini-2.5-pro`` → 2; a ``models/`` or
    ``publishers/google/models/`` prefix allowed), or None for a model that is not Gemini."""
    base = (model or "").lower().rsplit("/", 1)[-1]
    m = _GEMINI.match(base)
    return int(m.group(1)) if m else (0 if base.startswith("gemini") else None)


def image_costs(parts: Iterable[ContentPart], renderer: str, model: str | None = None) -> dict[str, tuple[str, int]]:
    """Placeholder tag → (the image's digest, its billed tokens by :func:`image_tokens`) for every
    image of ``parts`` the provider of ``model`` (Gemini) or of ``renderer`` publishes a count
    for (empty otherwise)."""
    out: dict[str, tuple[str, int]] = {}
    for p in parts:
        n = image_tokens(p, renderer, model)
        if n:
            out[image_tag(p)] = (p.digest, n)
    return out


#: OpenAI models costed by 32-px patches, and their multipliers (first prefix that matches).
#: gpt-5-mini / -nano bill 1.2 / 1.5 (OpenAI's pricing-page calculator, and the real bill in
#: tests/fixtures/images/), not the 1.62 / 2.46 of the vision guide's table.
OPENAI_PATCH_MODELS = (("gpt-5-nano", 1.5), ("gpt-5-mini", 1.2), ("gpt-4.1-nano", 2.46), ("gpt-4.1-mini", 1.62),
                       ("o4-mini", 1.72), ("codex-mini", 1.72))
#: gpt-5.2 and later (their -mini / -nano too) bill patches at 1.2 (measured, see the module doc).
_GPT5_MINOR = re.compile(r"gpt-5\.(\d+)")
#: OpenAI tile models' (base, per-tile) tokens by model prefix (first that matches); any other model: 85 / 170.
OPENAI_TILE_MODELS = (("gpt-4o-mini", 2833, 5667), ("gpt-5", 70, 140), ("o1", 75, 150), ("o3", 75, 150))
#: Most 32-px patches a patch model reads (an image past it is scaled down).
OPENAI_MAX_PATCHES = 1536


def _openai_patches(width: int, height: int) -> int:
    """32-px patches covering a ``width``×``height`` image once scaled to at most 1,536 of them."""
    w, h = float(width), float(height)
    if math.ceil(w / 32) * math.ceil(h / 32) > OPENAI_MAX_PATCHES:
        s = math.sqrt(32 * 32 * OPENAI_MAX_PATCHES / (w * h))
        s *= min(math.floor(w * s / 32) / (w * s / 32), math.floor(h * s / 32) / (h * s / 32))
        w, h = float(int(w * s)), float(int(h * s))
    return min(math.ceil(w / 32) * math.ceil(h / 32), OPENAI_MAX_PATCHES)


def openai_image_tokens(width: int, height: int, detail: str | None = None, model: str | None = None) -> int:
    """OpenAI's image tokens for a ``width``×``height`` px image sent to ``model`` (see the module
    doc: patches for the patch models, else tiles)."""
    base_name = (model or "").lower().rsplit("/", 1)[-1]
    minor = _GPT5_MINOR.match(base_name)
    multiplier = 1.2 if minor and int(minor.group(1)) >= 2 else next(
        (m for prefix, m in OPENAI_PATCH_MODELS if base_name.startswith(prefix)), None)
    if multiplier is not None:
        return round(_openai_patches(width, height) * multiplier)
    base, tile = next(((b, t) for prefix, b, t in OPENAI_TILE_MODELS if base_name.startswith(prefix)), (85, 170))
    if detail == "low":
        return base
    w, h = float(width), float(height)
    if max(w, h) > 2048:
        s = 2048 / max(w, h)
        w, h = w * s, h * s
    if min(w, h) > 768:
        s = 768 / min(w, h)
        w, h = w * s, h * s
    return base + tile * math.ceil(w / 512) * math.ceil(h / 512)


def anthropic_image_tokens(width: int, height: int) -> int:
    """Anthropic's image tokens for a ``width``×``height`` px image (see the module doc)."""
    w, h = float(width), float(height)
    if max(w, h) > 1568:
        s = 1568 / max(w, h)
        w, h = w * s, h * s
    return math.ceil(w * h / 750)


def gemini_image_tokens(width: int, height: int, generation: int = 2, resolution: str | None = None) -> int:
    """Gemini's image tokens for a ``width``×``height`` px image on a model of major version
    ``generation`` with the part's ``media_resolution`` level (see the module doc)."""
    if generation >= 3:
        return GEMINI_MEDIA_RESOLUTION.get(resolution or "high", GEMINI_MEDIA_RESOLUTION["high"])
    if generation == 1 or (width <= 384 and height <= 384):
        return 258
    return 258 * math.ceil(width / 768) * math.ceil(height / 768)


def image_tokens(p: ContentPart, renderer: str, model: str | None = None) -> int | None:
    """What the provider bills for image part ``p`` (tokens): Google's count when ``model`` is a
    Gemini model, else that of the provider of layout ``renderer``; None for a part that is no
    image, an image of unknown size (sent by URL; a Gemini 3 image costs its resolution's count
    whatever its size) or a provider with no published formula."""
    if p.type != "image":
        return None
    gen = gemini_generation(model)
    if gen is not None and gen >= 3:
        return gemini_image_tokens(0, 0, gen, p.detail)
    if not p.width or not p.height:
        return None
    if gen is not None:
        return gemini_image_tokens(p.width, p.height, gen, p.detail)
    if renderer in OPENAI_LAYOUTS:
        return openai_image_tokens(p.width, p.height, p.detail, model)
    if renderer == "provider:anthropic":
        return anthropic_image_tokens(p.width, p.height)
    return None


def _as_text(m: Message) -> Message:
    """``m`` with its image parts written as placeholder lines into its text (other parts kept)."""
    images = tuple(p for p in m.parts if p.type == "image")
    if not images:
        return m
    blocks = (*m.text_blocks, *map(placeholder, images)) if m.text_blocks is not None else None
    return dataclasses.replace(m, content=text_with_parts(dataclasses.replace(m, parts=images)), text_blocks=blocks,
                               parts=tuple(p for p in m.parts if p.type != "image"))


class ImageText:
    """A renderer that writes each message's images as placeholder lines into the message's text
    before ``inner`` renders it: for a chat template that drops non-text parts (the generic
    ``chatml_tools`` stand-in) standing in for a provider that bills images by a published count
    (Gemini), so the placeholder is in the prompt and the token stream carries the image at its
    count (:func:`image_costs`). ``name`` and ``exact`` are ``inner``'s; requests without images
    are passed through unchanged."""

    def __init__(self, inner: Any) -> None:  # a prefixcache.analyzer.render.Renderer (not imported: a cycle)
        self.inner = inner
        self.name, self.exact = inner.name, inner.exact

    def render(self, request: Request) -> RenderedPrompt:
        """``inner``'s rendering of ``request`` with its images as placeholder text."""
        if any(p.type == "image" for m in request.messages for p in m.parts):
            request = dataclasses.replace(request, messages=tuple(_as_text(m) for m in request.messages))
        return self.inner.render(request)
