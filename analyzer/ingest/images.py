"""Image parts of a logged message: identified by their content, with their size in pixels.

Readers turn every non-text part into a :class:`~prefixcache.analyzer.model.ContentPart`.
For an image the identity that matters to a prefix cache is its *content*: the same
picture sent again is the same tokens, a re-encoded or edited one is not. So
:func:`content_part` gives an image part the digest ``sha256:<first 16 hex>`` of its
decoded bytes (an inline ``data:`` URL or base64 source), or ``url:<digest of the URL>``
for an image sent by reference (its bytes are not in the log), and its width and height
read from the image header with the ``imagesize`` package (PNG, JPEG, GIF, WebP, ...;
None when the bytes are not logged or not an image). The provider's image tokens are
costed from those pixels in :mod:`prefixcache.analyzer.render.images`.

Shapes read: OpenAI Chat ``{"type": "image_url", "image_url": {"url", "detail"}}``,
Responses ``{"type": "input_image", "image_url": "...", "detail"}``, Anthropic
``{"type": "image", "source": {"type": "base64", "media_type", "data"} | {"type": "url",
"url"}}``, OpenTelemetry GenAI ``{"type": "blob", "modality": "image", "mime_type",
"content"}`` and Gemini ``Part`` objects, which carry no ``type`` (:func:`gemini_part`:
``{"inlineData": {"mimeType", "data"}}``, ``{"fileData": {"mimeType", "fileUri"}}``, the
snake-case ``inline_data`` / ``file_data`` of the Python SDK, and a Gemini 3 per-part
``mediaResolution`` kept as ``detail``). Any other part keeps the JSON digest
(:func:`~.jsonio.digest`).
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import io
from typing import Any

from prefixcache.analyzer.ingest.jsonio import digest
from prefixcache.analyzer.model import ContentPart

#: Part types that hold an image (``blob``: OpenTelemetry GenAI, when its modality or MIME type is an image).
IMAGE_TYPES = frozenset({"image_url", "input_image", "image", "blob"})
#: Gemini ``mediaResolution`` levels (``MEDIA_RESOLUTION_<LEVEL>``) kept as a part's ``detail``.
MEDIA_RESOLUTIONS = ("low", "medium", "high", "ultra_high")


def _source(part: dict[str, Any]) -> tuple[str | None, str | None]:
    """(data URL / URL, detail) of an image part, or (None, None)."""
    kind = part.get("type")
    if kind == "image_url":
        obj = part.get("image_url")
        if isinstance(obj, dict):
            return (obj.get("url") if isinstance(obj.get("url"), str) else None), obj.get("detail")
        return (obj if isinstance(obj, str) else None), part.get("detail")
    if kind == "input_image":
        url = part.get("image_url")
        return (url if isinstance(url, str) else None), part.get("detail")
    if kind == "image":
        src = part.get("source")
        if isinstance(src, dict) and src.get("type") == "base64" and isinstance(src.get("data"), str):
            return f"data:{src.get('media_type') or 'image'};base64,{src['data']}", None
        if isinstance(src, dict) and isinstance(src.get("url"), str):
            return src["url"], None
    if kind == "blob":
        mime = str(part.get("mime_type") or "")
        if (part.get("modality") == "image" or mime.startswith("image/")) and isinstance(part.get("content"), str):
            return f"data:{mime or 'image'};base64,{part['content']}", None
    return None, None


def _gemini_resolution(part: dict[str, Any]) -> str | None:
    """A Gemini part's ``mediaResolution`` level (``low`` … ``ultra_high``), or None."""
    res = part.get("mediaResolution", part.get("media_resolution"))
    if isinstance(res, dict):
        res = res.get("level")
    level = str(res or "").lower().removeprefix("media_resolution_")
    return level if level in MEDIA_RESOLUTIONS else None


def gemini_part(part: Any) -> ContentPart | None:
    """The :class:`ContentPart` of a Gemini ``Part`` holding an image (``inlineData`` base64 bytes,
    or ``fileData`` by URI), with its pixel size and ``mediaResolution`` as ``detail``; None for a
    part that holds no image (text, function calls and responses, other media)."""
    if not isinstance(part, dict):
        return None
    inline = part.get("inlineData", part.get("inline_data"))
    ref = part.get("fileData", part.get("file_data"))
    blob = inline if isinstance(inline, dict) else ref if isinstance(ref, dict) else None
    if blob is None:
        return None
    mime = str(blob.get("mimeType", blob.get("mime_type")) or "")
    if not mime.startswith("image/"):
        return None
    data, uri = blob.get("data"), blob.get("fileUri", blob.get("file_uri"))
    if isinstance(data, str):
        url = f"data:{mime};base64,{data}"
    elif isinstance(uri, str):
        url = uri
    else:
        return None
    return _image(url, _gemini_resolution(part))


def _decoded(url: str) -> bytes | None:
    """The bytes of a base64 ``data:`` URL (standard or URL-safe alphabet, padding optional: the
    Gemini API's JSON accepts and the google-genai SDK sends URL-safe base64), or None."""
    if not url.startswith("data:") or ";base64," not in url[:100]:
        return None
    data = url.split(",", 1)[1]
    try:
        if "-" in data or "_" in data:
            return base64.urlsafe_b64decode(data.strip() + "=" * (-len(data.strip()) % 4))
        return base64.b64decode(data, validate=False)
    except (binascii.Error, ValueError):
        return None


def content_part(kind: str, part: dict[str, Any]) -> ContentPart:
    """The :class:`ContentPart` of one non-text part: for an image, its content digest, pixel
    size and ``detail``; for anything else the JSON digest."""
    if kind not in IMAGE_TYPES:
        return ContentPart(kind, digest(part))
    url, detail = _source(part)
    if url is None:
        return ContentPart(kind, digest(part))
    return _image(url, detail)


def _image(url: str, detail: Any) -> ContentPart:
    """The image part of a ``data:`` URL (content digest, pixel size) or of a URL (its digest)."""
    data = _decoded(url)
    if data is None:
        return ContentPart("image", "url:" + hashlib.sha256(url.encode()).hexdigest()[:16],
                           detail=detail if isinstance(detail, str) else None)
    width = height = None
    try:
        import imagesize

        w, h = imagesize.get(io.BytesIO(data))
        if w > 0 and h > 0:
            width, height = int(w), int(h)
    except (ImportError, ValueError, OSError):
        pass
    return ContentPart("image", "sha256:" + hashlib.sha256(data).hexdigest()[:16], width=width, height=height,
                       detail=detail if isinstance(detail, str) else None)
