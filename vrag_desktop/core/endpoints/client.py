"""`OpenAIChatModel`: the one chat client for every OpenAI-compatible server (local vLLM, DashScope,
custom), built on the ``openai`` SDK's ``AsyncOpenAI``.

Why our own retry loop: the SDK's retries cannot know whether streamed text already reached the user
(retrying then would show a second, different answer), so the SDK's are off (``max_retries=0``) and
ours retry 408/429/5xx/connection failures with exponential backoff + jitter, honouring
``Retry-After``, and never after a delta was delivered. Why raw SSE parsing: the SDK's stream hides
whether ``data: [DONE]`` arrived, and a stream that just stops must not pass for a finished answer.

Every error message goes through :func:`redact` so API keys never reach the UI or the logs.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import random
import time
import weakref
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar, TypeVar

from vrag_desktop.core.endpoints.base import AsyncClosing, ChatResult, DeltaCallback, EndpointError, Messages
from vrag_desktop.core.endpoints.content import image_data_uri, image_part, redact
from vrag_desktop.core.endpoints.failures import Cut, Failure, classify
from vrag_desktop.core.endpoints.received import Received
from vrag_desktop.core.endpoints.sse import PACE_S, sse_data

__all__ = [
    "ConnectionCheck",
    "OpenAIChatModel",
    "StreamInterrupted",
    "image_data_uri",
    "image_part",
    "redact",
]


# Arguments ``chat.completions.create`` takes by name; any other chat() param goes into extra_body
# (vLLM's top_k, repetition_penalty, min_p, chat_template_kwargs...).
_SDK_PARAMS = frozenset(
    {
        "temperature",
        "top_p",
        "max_tokens",
        "max_completion_tokens",
        "stop",
        "seed",
        "n",
        "presence_penalty",
        "frequency_penalty",
        "logit_bias",
        "logprobs",
        "top_logprobs",
        "response_format",
        "tools",
        "tool_choice",
        "parallel_tool_calls",
        "reasoning_effort",
        "user",
    }
)

# ---- helpers -----------------------------------------------------------------------------------


_T = TypeVar("_T")


def _merge(base: Mapping[str, Any], extra: Mapping[str, Any]) -> dict[str, Any]:
    """``base`` updated by ``extra``, merging nested dicts (so chat_template_kwargs combine)."""
    out = dict(base)
    for k, v in extra.items():
        out[k] = _merge(out[k], v) if isinstance(v, Mapping) and isinstance(out.get(k), Mapping) else v
    return out


# ---- results and errors ------------------------------------------------------------------------


class StreamInterrupted(EndpointError):
    """A streamed answer stopped part-way (``kind`` ``stream_cut`` or ``timeout``) after text was
    delivered; ``partial`` holds what arrived, so the caller can show it as incomplete."""

    def __init__(self, message: str, kind: str, partial: ChatResult, status: int | None = None) -> None:
        super().__init__(message, kind=kind, status=status)
        self.partial = partial

    @property
    def partial_text(self) -> str:
        return self.partial.content

    @property
    def partial_reasoning(self) -> str:
        return self.partial.reasoning


@dataclass
class ConnectionCheck:
    """Verdict of :meth:`OpenAIChatModel.check`, worded for a "Test connection" button."""

    ok: bool
    message: str
    models: list[str] = field(default_factory=list)
    latency: float | None = None  # seconds for the probe request
    kind: str | None = None  # EndpointError kind when not ok


# ---- the client --------------------------------------------------------------------------------


class OpenAIChatModel(AsyncClosing):
    """An async :class:`~.base.ChatModel` over any OpenAI-compatible server.

    Timeouts: ``connect_timeout`` to open a connection, ``read_timeout`` for silence between bytes,
    ``total_timeout`` for one whole request (a stream included). Retries: at most ``max_attempts``
    requests per call; waits ``backoff_base * 2**(n-1)`` (x0.5-1 jitter, capped at ``backoff_max``)
    or what ``Retry-After`` says; gives up at once when that exceeds ``max_retry_after``.
    ``extra_body`` / ``default_params`` apply to every call (call params win).
    """

    def __init__(
        self,
        base_url: str,
        model: str,
        api_key: str | None = None,
        *,
        connect_timeout: float = 10.0,
        read_timeout: float = 120.0,
        total_timeout: float = 600.0,
        max_attempts: int = 4,
        backoff_base: float = 0.5,
        backoff_max: float = 20.0,
        max_retry_after: float = 60.0,
        extra_body: Mapping[str, Any] | None = None,
        default_params: Mapping[str, Any] | None = None,
        default_headers: Mapping[str, str] | None = None,
        include_usage: bool = True,
        on_retry: Callable[[int, float, EndpointError], None] | None = None,
        stream_pace_s: float = PACE_S,
    ) -> None:
        if max_attempts < 1:
            raise ValueError("max_attempts must be at least 1")
        self.base_url = base_url.rstrip("/")
        self.model_name = model
        self.connect_timeout = connect_timeout
        self.read_timeout = read_timeout
        self.total_timeout = total_timeout
        self.max_attempts = max_attempts
        self.backoff_base = backoff_base
        self.backoff_max = backoff_max
        self.max_retry_after = max_retry_after
        self.extra_body = dict(extra_body or {})
        self.default_params = dict(default_params or {})
        self.default_headers = dict(default_headers or {})
        self.include_usage = include_usage
        self.on_retry = on_retry
        self.stream_pace_s = stream_pace_s  # the shortest time between two reads of a stream (sse.py)
        self._api_key = api_key
        self._sdk: Any = None
        self._sdk_loop: weakref.ref[asyncio.AbstractEventLoop] | None = None
        self._rng = random.Random()

    def __repr__(self) -> str:  # no key, ever
        url = redact(self.base_url, [self._api_key])
        return f"OpenAIChatModel(base_url={url!r}, model={self.model_name!r})"

    @property
    def has_api_key(self) -> bool:
        return bool(self._api_key)

    # ---- SDK client -----------------------------------------------------------------------------
    def _client(self) -> Any:
        """The ``AsyncOpenAI`` for the running loop (its connection pool is bound to one loop)."""
        loop = asyncio.get_running_loop()
        if self._sdk is None or self._sdk_loop is None or self._sdk_loop() is not loop:
            import openai

            # Always pass key and URL: otherwise the SDK falls back to OPENAI_API_KEY and
            # OPENAI_BASE_URL and would send the user's OpenAI key to whatever server this is.
            self._sdk = openai.AsyncOpenAI(
                api_key=self._api_key or "EMPTY",
                base_url=self.base_url,
                max_retries=0,
                timeout=openai.Timeout(
                    self.total_timeout,
                    connect=self.connect_timeout,
                    read=self.read_timeout,
                    write=self.read_timeout,
                ),
                default_headers=self.default_headers or None,
            )
            for attr in ("organization", "project", "admin_api_key"):  # nor OPENAI_ORG_ID & co
                if hasattr(self._sdk, attr):
                    setattr(self._sdk, attr, None)
            self._sdk_loop = weakref.ref(loop)
        return self._sdk

    async def aclose(self) -> None:
        """Close pooled connections (call from the loop that used the model)."""
        sdk, loop_ref = self._sdk, self._sdk_loop
        self._sdk = self._sdk_loop = None
        if sdk is not None and loop_ref is not None and loop_ref() is asyncio.get_running_loop():
            await sdk.close()  # a pool of another (finished) loop cannot be closed from here

    # ---- chat -----------------------------------------------------------------------------------
    async def chat(
        self, messages: Messages, *, stream: bool = True, on_delta: DeltaCallback | None = None, **params: Any
    ) -> ChatResult:
        """One chat completion. Streams by default, feeding ``on_delta("think"|"content", text)``.

        ``params``: sampling params (temperature, top_p, max_tokens, ...), ``model`` to override the
        served name, ``extra_body``; unknown names go into the request body as-is. Raises
        :class:`EndpointError` (or :class:`StreamInterrupted`, carrying the partial answer).
        ``model_seconds`` counts the whole call, retries included."""
        kwargs = self._request_kwargs(messages, stream, params)
        started = time.monotonic()
        attempt = 0
        while True:
            attempt += 1
            acc = Received()
            one = self._stream_attempt if stream else self._plain_attempt
            _, fail = await self._within(one(kwargs, on_delta, acc), self.total_timeout, "no complete answer")
            if fail is None:
                return acc.result(time.monotonic() - started)
            if fail.kind == "bad_request" and "stream_options" in fail.detail and "stream_options" in kwargs:
                kwargs.pop("stream_options")  # an old server that rejects it: ask again without
                self.include_usage = False
                attempt -= 1
                continue
            if acc.delivered:  # the caller has seen text: a second answer would contradict it
                raise self._interrupted(fail, acc, started) from None
            if not fail.retryable or attempt >= self.max_attempts:
                if fail.kind == "stream_cut" and (acc.content or acc.reasoning):
                    raise self._interrupted(fail, acc, started) from None
                raise self._error(fail, attempt) from None
            delay = self._delay(attempt, fail.retry_after)
            if delay is None:
                raise self._error(fail, attempt) from None
            if self.on_retry is not None:
                self.on_retry(attempt, delay, self._error(fail, attempt))
            await asyncio.sleep(delay)

    def _request_kwargs(self, messages: Messages, stream: bool, params: Mapping[str, Any]) -> dict[str, Any]:
        merged = {**self.default_params, **params}
        extra = _merge(self.extra_body, merged.pop("extra_body", None) or {})
        kwargs: dict[str, Any] = {
            "model": merged.pop("model", None) or self.model_name,
            "messages": list(messages),
        }
        for name, value in merged.items():
            if name in _SDK_PARAMS:
                kwargs[name] = value
            else:
                extra[name] = value
        if extra:
            kwargs["extra_body"] = extra
        if stream:
            kwargs["stream"] = True
            if self.include_usage:
                kwargs["stream_options"] = {"include_usage": True}
        return kwargs

    async def _stream_attempt(
        self, kwargs: dict[str, Any], on_delta: DeltaCallback | None, acc: Received
    ) -> None:
        client = self._client()
        async with (
            client.chat.completions.with_streaming_response.create(**kwargs) as resp,
            contextlib.aclosing(sse_data(resp.iter_text(), self.stream_pace_s)) as events,
        ):
            async for data in events:
                if data == "[DONE]":
                    acc.done = True
                    break
                try:
                    chunk = json.loads(data)
                except ValueError:
                    continue  # malformed line: skip, as the original did
                if isinstance(chunk, dict):
                    acc.absorb(chunk, on_delta)
        if not acc.done and acc.finish_reason is None:
            raise Cut("the stream ended before [DONE]")

    async def _plain_attempt(
        self, kwargs: dict[str, Any], on_delta: DeltaCallback | None, acc: Received
    ) -> None:
        completion = await self._client().chat.completions.create(**kwargs)
        data = completion.model_dump() if hasattr(completion, "model_dump") else dict(completion)
        acc.absorb_completion(data, on_delta)

    # ---- errors and retries ---------------------------------------------------------------------
    def _delay(self, attempt: int, retry_after: float | None) -> float | None:
        """Seconds before the next attempt; ``None``: the server asks for too long a wait."""
        if retry_after is not None:
            if retry_after > self.max_retry_after:
                return None
            return retry_after * (1 + 0.1 * self._rng.random())
        base = min(self.backoff_max, self.backoff_base * 2 ** (attempt - 1))
        return base * (0.5 + 0.5 * self._rng.random())

    _WHAT: ClassVar[dict[str, str]] = {
        "unreachable": "cannot reach the server",
        "auth": "the server refused the API key",
        "rate_limit": "rate limited",
        "server": "server error",
        "timeout": "timed out",
        "stream_cut": "the answer was cut off",
        "bad_request": "the server rejected the request",
        "not_found": "not found (model not served?)",
        "other": "request failed",
    }

    def _message(self, fail: Failure, attempts: int | None = None) -> str:
        what = self._WHAT.get(fail.kind, "request failed")
        if fail.kind == "auth" and not self._api_key:
            what = "the server requires an API key and none is set"
        if (
            fail.kind == "bad_request" and "context length" in fail.detail.lower()
        ):  # vLLM's and OpenAI's words
            what = (
                "the conversation no longer fits the model's context (serve it with a longer context, "
                "or use fewer steps or a smaller top-k)"
            )
        status = f" (HTTP {fail.status})" if fail.status else ""
        tries = f" after {attempts} attempts" if attempts and attempts > 1 else ""
        if fail.retry_after is not None and fail.retry_after > self.max_retry_after:
            tries += f"; the server asks to wait {fail.retry_after:g} s"
        text = f"{what}{status}{tries} at {self.base_url} (model {self.model_name!r}): {fail.detail}"
        return redact(text, [self._api_key])

    async def _within(self, work: Awaitable[_T], limit: float, late: str) -> tuple[_T | None, Failure | None]:
        """``work`` given ``limit`` seconds: (its value, None), or (None, how it failed). Exceptions that
        are not the endpoint's (``classify`` gives None) propagate."""
        try:
            return await asyncio.wait_for(work, limit), None
        except asyncio.TimeoutError:
            return None, Failure("timeout", f"{late} within {limit:g} s")
        except Exception as exc:
            fail = classify(exc, self.connect_timeout, self.read_timeout)
            if fail is None:
                raise
            return None, fail

    def _error(self, fail: Failure, attempts: int) -> EndpointError:
        return EndpointError(self._message(fail, attempts), kind=fail.kind, status=fail.status)

    def _interrupted(self, fail: Failure, acc: Received, started: float) -> StreamInterrupted:
        kind = "timeout" if fail.kind == "timeout" else "stream_cut"
        return StreamInterrupted(
            self._message(Failure(kind, fail.detail, fail.status)),
            kind,
            acc.result(time.monotonic() - started),
            fail.status,
        )

    # ---- models and connection test -------------------------------------------------------------
    async def list_models(self, *, timeout: float | None = None) -> list[str]:
        """Names the server serves (``GET /models``), one attempt; raises :class:`EndpointError`."""
        limit = timeout if timeout is not None else min(self.total_timeout, 30.0)

        async def fetch() -> list[str]:
            page = await self._client().models.list()
            return [str(m.id) for m in getattr(page, "data", [])]

        ids, fail = await self._within(fetch(), limit, "no answer")
        if fail is None:
            return ids or []
        raise self._error(fail, 1) from None

    async def check(self, *, timeout: float = 15.0) -> ConnectionCheck:
        """Probe the endpoint for a "Test connection" button: reachable? key accepted? model served?
        Servers without ``/models`` get a one-token chat instead."""
        started = time.monotonic()
        try:
            models = await self.list_models(timeout=timeout)
        except EndpointError as exc:
            if exc.kind == "not_found" and exc.status == 404:
                return await self._check_by_chat(timeout)
            return ConnectionCheck(False, self._verdict(exc, timeout), [], None, exc.kind)
        latency = time.monotonic() - started
        where = f"{self.base_url} ({latency * 1000:.0f} ms)"
        if not self.model_name:
            return ConnectionCheck(
                True,
                f"Connected to {where}; it serves {', '.join(models) or 'no models'}.",
                models,
                latency,
            )
        if models and self.model_name not in models:
            shown = ", ".join(models[:8]) + (", ..." if len(models) > 8 else "")
            return ConnectionCheck(
                False,
                f"Connected to {where}, but model {self.model_name!r} is not served there. Served: {shown}.",
                models,
                latency,
                "not_found",
            )
        return ConnectionCheck(
            True, f"Connected to {where}; model {self.model_name!r} is available.", models, latency
        )

    async def _check_by_chat(self, timeout: float) -> ConnectionCheck:
        probe = OpenAIChatModel(
            self.base_url,
            self.model_name,
            self._api_key,
            connect_timeout=self.connect_timeout,
            read_timeout=timeout,
            total_timeout=timeout,
            max_attempts=1,
            extra_body=self.extra_body,
            default_headers=self.default_headers,
        )
        started = time.monotonic()
        try:
            await probe.chat([{"role": "user", "content": "ping"}], stream=False, max_tokens=1)
        except EndpointError as exc:
            return ConnectionCheck(False, self._verdict(exc, timeout), [], None, exc.kind)
        finally:
            await probe.aclose()
        latency = time.monotonic() - started
        return ConnectionCheck(
            True,
            f"Connected to {self.base_url} ({latency * 1000:.0f} ms); model {self.model_name!r} answered.",
            [self.model_name],
            latency,
        )

    def _verdict(self, exc: EndpointError, timeout: float) -> str:
        url = self.base_url
        if exc.kind == "unreachable":
            return f"Cannot reach {url}: nothing answers there. Is the server running and the address right?"
        if exc.kind == "auth":
            if not self._api_key:
                return f"{url} needs an API key, and none is set for this endpoint."
            return f"{url} rejected the API key (HTTP {exc.status}). Check the key."
        if exc.kind == "not_found":
            return f"Model {self.model_name!r} is not served at {url}."
        if exc.kind == "timeout":
            return f"{url} did not answer within {timeout:g} s."
        return redact(str(exc), [self._api_key])
