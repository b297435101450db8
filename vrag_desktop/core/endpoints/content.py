"""What crosses the wire besides text: images as OpenAI content parts, and secrets kept out of
anything shown. Every endpoint error message goes through :func:`redact`, so API keys never reach
the UI or the logs."""

from __future__ import annotations

import base64
import io
import json
import re
import urllib.parse
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from vrag_desktop.core.images import flatten_rgb, open_upright

if TYPE_CHECKING:
    from PIL import Image

REDACTED = "***"
_BEARER = re.compile(r"(Bearer\s+)[A-Za-z0-9._~+/=-]{4,}", re.I)
_URL_USERINFO = re.compile(r"(\w+://)[^/@\s]+@")


def redact(text: str, secrets: Iterable[str | None]) -> str:
    """``text`` with every secret replaced by ``***`` (also URL- and JSON-escaped forms), plus any
    ``Bearer <token>`` and URL credentials. Servers echo keys in error bodies; we show those bodies.
    Secrets shorter than 4 characters are no real keys (placeholders) and are left alone."""
    out = str(text)
    variants: set[str] = set()
    for s in secrets:
        if s and len(s) >= 4:
            variants.update({s, urllib.parse.quote(s, safe=""), json.dumps(s)[1:-1]})
    for v in sorted(variants, key=len, reverse=True):
        out = out.replace(v, REDACTED)
    out = _BEARER.sub(lambda m: m.group(1) + REDACTED, out)
    return _URL_USERINFO.sub(lambda m: m.group(1) + REDACTED + "@", out)


_MIME = {"jpeg": "jpeg", "jpg": "jpeg", "png": "png", "webp": "webp", "gif": "gif"}


def image_data_uri(image: str | Path | Image.Image | bytes, fmt: str = "jpeg", quality: int = 90) -> str:
    """``data:image/<fmt>;base64,...`` for a PIL image, an image file or encoded bytes
    (re-encoded in ``fmt``). The subtype matters: some servers reject the original's bare
    ``data:image;base64``."""
    from PIL import Image as PILImage

    key = fmt.lower()
    if key not in _MIME:
        raise ValueError(f"unsupported image format {fmt!r} (use one of {sorted(_MIME)})")
    subtype = _MIME[key]
    img = image if isinstance(image, PILImage.Image) else open_upright(image)
    if subtype == "jpeg":
        img = flatten_rgb(img)
    buf = io.BytesIO()
    save_kw: dict[str, Any] = {"quality": quality} if subtype in ("jpeg", "webp") else {}
    img.save(buf, format=subtype.upper(), **save_kw)
    return f"data:image/{subtype};base64," + base64.b64encode(buf.getvalue()).decode("ascii")


def image_part(
    image: str | Path | Image.Image | bytes, fmt: str = "jpeg", quality: int = 90
) -> dict[str, Any]:
    """An OpenAI ``image_url`` content part carrying ``image`` as a data URI."""
    return {"type": "image_url", "image_url": {"url": image_data_uri(image, fmt, quality)}}
