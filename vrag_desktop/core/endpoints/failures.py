"""How a chat request failed, in kinds a person can act on (unreachable, auth, not_found,
rate_limit, timeout, server, bad_request, stream_cut) and whether it is worth retrying.

Kept apart from the client: the classification is pure (an exception in, a :class:`Failure` out),
so it is read and tested without the retry loop around it.
"""

from __future__ import annotations

import email.utils
import re
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

_CONNECT_FAILURES = frozenset({"ConnectError", "ConnectTimeout", "ProxyError", "UnsupportedProtocol"})
_RETRYABLE_STATUS = frozenset({408, 429, 500, 502, 503, 504})
_MODEL_MISSING = re.compile(
    r"model\b.{0,80}\b(not (found|exist|served)|does not exist|unknown|invalid)"
    r"|(unknown|invalid) model",
    re.I | re.S,
)


@dataclass
class Failure:
    kind: str
    detail: str
    status: int | None = None
    retryable: bool = False
    retry_after: float | None = None


class Cut(Exception):
    """The stream ended (or broke) before ``[DONE]`` and without a finish_reason."""


class StreamErrorEvent(Exception):
    """The server put an error object in the stream (vLLM does on engine failures)."""


def retry_after(headers: Mapping[str, str] | None) -> float | None:
    """Seconds the server asked us to wait (``retry-after-ms``, ``Retry-After`` seconds or date)."""
    if not headers:
        return None
    ms = headers.get("retry-after-ms")
    if ms:
        try:
            return max(0.0, float(ms) / 1000)
        except ValueError:
            pass
    value = headers.get("retry-after")
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        try:
            when = email.utils.parsedate_to_datetime(value)
        except (TypeError, ValueError):
            return None
        return max(0.0, when.timestamp() - time.time())


def transport_errors() -> tuple[tuple[type[BaseException], ...], tuple[type[BaseException], ...]]:
    """(timeout errors, all transport errors) of the SDK's HTTP library (httpx2 or httpx)."""
    timeouts: list[type[BaseException]] = []
    errors: list[type[BaseException]] = []
    for name in ("httpx2", "httpx"):
        try:
            mod = __import__(name)
        except ImportError:
            continue
        timeouts.append(mod.TimeoutException)
        errors.append(mod.RequestError)
    return tuple(timeouts), tuple(errors)


def classify(exc: BaseException, connect_timeout: float, read_timeout: float) -> Failure | None:
    """How a failed attempt failed; ``None`` for exceptions that are not ours to translate."""
    import openai

    timeouts, transport = transport_errors()
    if isinstance(exc, Cut):
        return Failure("stream_cut", str(exc), retryable=True)
    if isinstance(exc, StreamErrorEvent):
        return Failure("server", f"the server reported an error mid-answer: {exc}", retryable=True)
    if isinstance(exc, openai.APIStatusError):
        return status_failure(exc)
    if isinstance(exc, openai.APITimeoutError):
        cause = exc.__cause__
        if cause is not None and type(cause).__name__ == "ConnectTimeout":
            return Failure(
                "unreachable",
                f"no connection within {connect_timeout:g} s",
                retryable=True,
            )
        return Failure("timeout", f"no answer within {read_timeout:g} s")
    if isinstance(exc, openai.APIConnectionError):
        cause = exc.__cause__
        why = str(cause or exc) or type(cause or exc).__name__
        if cause is None or type(cause).__name__ in _CONNECT_FAILURES:
            return Failure("unreachable", f"cannot connect ({why})", retryable=True)
        return Failure(
            "stream_cut",
            f"the connection broke before the answer ended ({why})",
            retryable=True,
        )
    if isinstance(exc, timeouts):  # raised while reading the stream
        return Failure("timeout", f"the stream went silent for {read_timeout:g} s")
    if isinstance(exc, transport):
        why = str(exc) or type(exc).__name__
        return Failure(
            "stream_cut",
            f"the connection broke before the answer ended ({why})",
            retryable=True,
        )
    if isinstance(exc, openai.APIError):
        return Failure("other", str(exc))
    return None


def status_failure(exc: Any) -> Failure:
    """How an HTTP error status (and its body) failed, in the client's kinds."""
    status = int(exc.status_code)
    body = exc.body
    if isinstance(body, dict):
        err = body.get("error", body)
        detail = str(err.get("message", err) if isinstance(err, dict) else err)
    elif body:
        detail = str(body)
    else:
        detail = str(getattr(exc, "message", "") or exc)
    detail = " ".join(detail.split())[:400]  # HTML error pages of proxies, on one line
    headers = getattr(getattr(exc, "response", None), "headers", None)
    if status in (401, 403):
        kind = "auth"
    elif status == 404 or (400 <= status < 500 and _MODEL_MISSING.search(detail)):
        kind = "not_found"
    elif status == 429:
        kind = "rate_limit"
    elif status == 408:
        kind = "timeout"
    elif status >= 500:
        kind = "server"
    elif 400 <= status < 500:
        kind = "bad_request"
    else:
        kind = "other"
    return Failure(kind, detail, status, status in _RETRYABLE_STATUS, retry_after(headers))
