"""What crosses the wire besides text: images as OpenAI content parts, and secrets kept out of
anything shown or saved. Every endpoint error message goes through :func:`redact`, so API keys never
reach the UI or the logs; every URL that is written down goes through :func:`redact_url`, so
credentials in a URL (``user:pass@``, ``?api_key=``) never reach a file."""

from __future__ import annotations

import base64
import io
import json
import re
import urllib.parse
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from vrag_desktop.core.images import flatten_rgb, open_upright

if TYPE_CHECKING:
    from PIL import Image

REDACTED = "***"
URL_REDACTED = "REDACTED"  # in URLs: plain letters, so the URL stays valid and readable
_BEARER = re.compile(r"(Bearer\s+)[A-Za-z0-9._~+/=-]{4,}", re.I)
_URL_USERINFO = re.compile(r"(\w+://)[^/@\s]+@")
_URL_IN_TEXT = re.compile(r"\b[A-Za-z][A-Za-z0-9+.-]*://[^\s'\"<>]+")
# Query or fragment parameter names that carry a credential (compared lower-case, "-" as "_"):
# exact names, and names ending in one of the suffixes (x-amz-signature, client_secret, id_token…).
_SECRET_PARAMS = frozenset(
    {"key", "apikey", "api_key", "token", "access_token", "secret", "password", "passwd", "pwd"}
    | {"sig", "signature", "credential", "auth", "authorization", "code", "session"}
)
_SECRET_SUFFIXES = ("_key", "_token", "_secret", "_password", "_signature", "_credential", "apikey")


def _secret_param(name: str) -> bool:
    norm = urllib.parse.unquote_plus(name).strip().lower().replace("-", "_")
    return norm in _SECRET_PARAMS or norm.endswith(_SECRET_SUFFIXES)


def _redact_params(params: str) -> str:
    """``a=1&api_key=x`` -> ``a=1&api_key=REDACTED``; other parameters are kept byte for byte."""
    out = []
    for part in params.split("&"):
        name, sep, _value = part.partition("=")
        out.append(f"{name}={URL_REDACTED}" if sep and _secret_param(name) else part)
    return "&".join(out)


def redact_url(url: str) -> str:
    """``url`` as it may be written down: userinfo (``user:pass@``) becomes ``REDACTED@`` and the
    value of every secret-looking query or fragment parameter (key, api_key, token, sig…) becomes
    ``REDACTED``. The one function for every URL that is saved or logged; requests keep the real
    URL. Text that is no URL comes back unchanged."""
    if "://" not in url:
        return url
    try:
        parts = urllib.parse.urlsplit(url)
    except ValueError:  # e.g. a bad IPv6 literal: redact what the text pattern finds
        return _URL_USERINFO.sub(lambda m: m.group(1) + URL_REDACTED + "@", url)
    netloc = parts.netloc
    if "@" in netloc:
        netloc = URL_REDACTED + "@" + netloc.rpartition("@")[2]
    query, fragment = _redact_params(parts.query), parts.fragment
    if "=" in fragment:  # OAuth's implicit flow puts tokens here
        fragment = _redact_params(fragment)
    if (netloc, query, fragment) == (parts.netloc, parts.query, parts.fragment):
        return url  # nothing to hide: exactly as given
    return urllib.parse.urlunsplit((parts.scheme, netloc, parts.path, query, fragment))


def redact_urls(value: Any) -> Any:
    """``value`` with :func:`redact_url` applied to every URL in it: a string (URLs inside text
    too), or the strings of a JSON-like structure (dicts, lists), as a copy."""
    if isinstance(value, str):
        return _URL_IN_TEXT.sub(lambda m: redact_url(m.group(0)), value) if "://" in value else value
    if isinstance(value, Mapping):
        return {k: redact_urls(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [redact_urls(v) for v in value]
    return value


def redact(text: str, secrets: Iterable[str | None]) -> str:
    """``text`` with every secret replaced by ``***`` (also URL- and JSON-escaped forms), plus any
    ``Bearer <token>`` and URL credentials (userinfo, secret query parameters: :func:`redact_url`).
    Servers echo keys in error bodies; we show those bodies. Secrets shorter than 4 characters are
    no real keys (placeholders) and are left alone."""
    out = str(text)
    variants: set[str] = set()
    for s in secrets:
        if s and len(s) >= 4:
            variants.update({s, urllib.parse.quote(s, safe=""), json.dumps(s)[1:-1]})
    for v in sorted(variants, key=len, reverse=True):
        out = out.replace(v, REDACTED)
    out = _BEARER.sub(lambda m: m.group(1) + REDACTED, out)
    out = _URL_USERINFO.sub(lambda m: m.group(1) + REDACTED + "@", out)
    return str(redact_urls(out))


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
