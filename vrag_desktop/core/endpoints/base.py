"""What an agent needs from a model endpoint, and nothing more (so agents test against any double).

Messages are OpenAI chat messages; images are ``{"type": "image_url", "image_url": {"url": data-URI}}``
parts. Streaming deltas are delivered through ``on_delta(kind, text)`` with kind ``"think"``
(``reasoning_content`` / ``reasoning``) or ``"content"``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar


class EndpointError(RuntimeError):
    """A model call failed for good (after retries). ``kind`` says how, for the UI and the agent:
    ``unreachable``, ``auth`` (401/403), ``rate_limit`` (429), ``server`` (5xx), ``timeout``,
    ``stream_cut``, ``bad_request`` (4xx), ``not_found`` (model), ``other``. The message never
    contains an API key."""

    def __init__(self, message: str, kind: str = "other", status: int | None = None) -> None:
        super().__init__(message)
        self.kind = kind
        self.status = status


@dataclass
class ChatResult:
    content: str
    reasoning: str = ""
    prompt_tokens: int = 0
    completion_tokens: int = 0
    finish_reason: str | None = None
    model_seconds: float = 0.0


DeltaCallback = Callable[[str, str], None]
#: A conversation as sent: OpenAI chat messages (``role``, ``content`` as text or typed parts).
Messages = Sequence[dict[str, Any]]
_C = TypeVar("_C", bound="AsyncClosing")


class AsyncClosing:
    """``async with client:`` closes it (its ``aclose``) however the block ends: one rule for the
    HTTP client, the in-process model and the judge."""

    async def aclose(self) -> None:
        raise NotImplementedError

    async def __aenter__(self: _C) -> _C:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()


class ChatModel(Protocol):
    """An async chat endpoint. Cancelling the awaiting task cancels the request (and its stream)."""

    model_name: str

    async def chat(
        self, messages: Messages, *, stream: bool = True, on_delta: DeltaCallback | None = None, **params: Any
    ) -> ChatResult: ...
