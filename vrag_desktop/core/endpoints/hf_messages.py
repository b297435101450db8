"""OpenAI chat messages → the conversation and images a Hugging Face processor takes, for the
local model (:mod:`.local_hf`): what an OpenAI-compatible server does with the same messages. Images
(``data:`` URIs, ``file://`` URLs, paths, PIL images) are read upright, flattened on white and
capped at ``max_pixels``."""

from __future__ import annotations

import base64
import binascii
import math
import urllib.parse
import urllib.request
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from vrag_desktop.core.endpoints.base import EndpointError
from vrag_desktop.core.images import flatten_rgb, open_upright

if TYPE_CHECKING:  # pragma: no cover - typing only
    from PIL import Image

__all__ = ["bad_request", "decode_image_url", "openai_to_hf_messages"]


def bad_request(message: str) -> EndpointError:
    """A permanent refusal of the request (the agents end the run rather than retry)."""
    return EndpointError(message, kind="bad_request")


def _open_image(data: bytes | str | Path, where: str) -> Image.Image:
    try:
        return flatten_rgb(open_upright(data))
    except Exception as exc:  # PIL raises many kinds: not an image, truncated, too big...
        raise bad_request(f"{where}: cannot decode the image ({type(exc).__name__}: {exc})") from exc


def decode_image_url(url: object, where: str = "image") -> Image.Image:
    """An RGB PIL image from an OpenAI ``image_url`` URL: a ``data:`` URI or a ``file://`` URL.
    Remote URLs are refused: the local model never goes online."""
    if not isinstance(url, str) or not url:
        raise bad_request(f"{where}: image_url has no url")
    if url.startswith("data:"):
        header, sep, payload = url[5:].partition(",")
        if not sep:
            raise bad_request(f"{where}: malformed data URI (no ',')")
        try:
            if header.endswith(";base64"):
                data = base64.b64decode(payload, validate=False)
            else:
                data = urllib.parse.unquote_to_bytes(payload)
        except (binascii.Error, ValueError) as exc:
            raise bad_request(f"{where}: the data URI's base64 is invalid ({exc})") from exc
        return _open_image(data, where)
    parts = urllib.parse.urlsplit(url)
    if parts.scheme == "file":
        path = Path(urllib.request.url2pathname(parts.path))
        if not path.is_file():
            raise bad_request(f"{where}: image file not found: {path}")
        return _open_image(path, where)
    raise bad_request(
        f"{where}: the local model only takes images as data: URIs or file:// URLs "
        f"(got a {parts.scheme or 'schemeless'} URL)"
    )


def _limit_pixels(img: Image.Image, max_pixels: int | None) -> Image.Image:
    from PIL import Image as PILImage

    if not max_pixels or img.width * img.height <= max_pixels:
        return img
    scale = math.sqrt(max_pixels / (img.width * img.height))
    size = (max(1, int(img.width * scale)), max(1, int(img.height * scale)))
    return img.resize(size, PILImage.Resampling.BICUBIC)


def openai_to_hf_messages(
    messages: Sequence[Mapping[str, Any]], max_pixels: int | None = None, *, decode: bool = True
) -> tuple[list[dict[str, Any]], list[Image.Image]]:
    """OpenAI chat messages → (the processor's conversation, the images in order of appearance).

    ``decode=False`` leaves image parts as bare ``{"type": "image"}`` placeholders and returns no
    images: enough to render the chat template, without decoding pictures already processed
    (the trainer re-renders a growing conversation every turn).

    String contents stay strings (chat templates treat them as plain text, Qwen3's reasoning
    templates rely on that for assistant turns); list contents become ``{"type": "text"}`` and
    ``{"type": "image"}`` parts. Raises ``EndpointError(kind="bad_request")`` on anything else."""
    conversation: list[dict[str, Any]] = []
    images: list[Image.Image] = []
    if not messages:
        raise bad_request("no messages to answer")
    for i, msg in enumerate(messages):
        if not isinstance(msg, Mapping):
            raise bad_request(f"message {i} is a {type(msg).__name__}, not a dict")
        role = msg.get("role")
        if role not in ("system", "user", "assistant"):
            raise bad_request(f"message {i}: unsupported role {role!r} (system, user or assistant)")
        content = msg.get("content")
        if content is None:
            content = ""
        if isinstance(content, str):
            conversation.append({"role": role, "content": content})
            continue
        if not isinstance(content, Sequence):
            raise bad_request(f"message {i}: content must be a string or a list of parts")
        parts: list[dict[str, Any]] = []
        for j, part in enumerate(content):
            where = f"message {i} part {j}"
            kind = part.get("type") if isinstance(part, Mapping) else None
            if kind == "text":
                parts.append({"type": "text", "text": str(part.get("text") or "")})
            elif kind in ("image_url", "image") and not decode:
                parts.append({"type": "image"})
            elif kind == "image_url":
                ref = part.get("image_url")
                url = ref.get("url") if isinstance(ref, Mapping) else ref
                img = _limit_pixels(decode_image_url(url, where), max_pixels)
                images.append(img)
                parts.append({"type": "image", "image": img})
            elif kind == "image":  # already decoded (a PIL image) or a local path
                raw = part.get("image")
                if isinstance(raw, (str, Path)):
                    img = _open_image(Path(raw), where)
                elif hasattr(raw, "convert") and hasattr(raw, "size"):
                    img = flatten_rgb(raw)
                else:
                    raise bad_request(f"{where}: an image part needs a PIL image or a file path")
                img = _limit_pixels(img, max_pixels)
                images.append(img)
                parts.append({"type": "image", "image": img})
            else:
                raise bad_request(f"{where}: unsupported content part type {kind!r}")
        conversation.append({"role": role, "content": parts})
    return conversation, images
