"""What one request to an OpenAI-compatible server has received: the pieces of an answer, filled
from streamed SSE chunks or from one plain completion.

Why apart from the client: reading a chunk is pure (a dict in, text and counts out), the same for
every server, and can be read and tested without one; :mod:`.client` keeps the retry loop.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from vrag_desktop.core.endpoints.base import ChatResult, DeltaCallback
from vrag_desktop.core.endpoints.failures import StreamErrorEvent

__all__ = ["Received"]


@dataclass
class Received:
    """What one attempt has received so far."""

    content: list[str] = field(default_factory=list)
    reasoning: list[str] = field(default_factory=list)
    delivered: bool = False  # some delta reached on_delta: no retry any more
    done: bool = False  # [DONE] seen
    finish_reason: str | None = None
    prompt_tokens: int = 0
    completion_tokens: int = 0

    def result(self, seconds: float) -> ChatResult:
        return ChatResult(
            "".join(self.content),
            "".join(self.reasoning),
            self.prompt_tokens,
            self.completion_tokens,
            self.finish_reason,
            seconds,
        )

    def absorb(self, chunk: dict[str, Any], on_delta: DeltaCallback | None) -> None:
        """One streamed chunk: its deltas go to ``on_delta`` as they come; an error event raises."""
        if (chunk.get("error") or chunk.get("object") == "error") and not chunk.get("choices"):
            err = chunk.get("error") or chunk  # {"error": {...}} or vLLM's bare ErrorResponse
            raise StreamErrorEvent(str(err.get("message", err) if isinstance(err, dict) else err))
        usage = chunk.get("usage")
        if isinstance(usage, dict):
            self._count(usage)
        for choice in chunk.get("choices") or []:
            if not isinstance(choice, dict) or choice.get("index", 0) != 0:
                continue
            delta = choice.get("delta") or {}
            think = delta.get("reasoning_content") or delta.get("reasoning")
            for kind, text, parts in (
                ("think", think, self.reasoning),
                ("content", delta.get("content"), self.content),
            ):
                if isinstance(text, str) and text:
                    parts.append(text)
                    if on_delta is not None:
                        self.delivered = True
                        on_delta(kind, text)
            if choice.get("finish_reason"):
                self.finish_reason = str(choice["finish_reason"])

    def absorb_completion(self, data: dict[str, Any], on_delta: DeltaCallback | None) -> None:
        """A whole (not streamed) completion; ``on_delta`` still hears it, once, at the end."""
        choices = data.get("choices") or []
        if not choices:
            raise StreamErrorEvent("the server's answer has no choices")
        message = choices[0].get("message") or {}
        self.content.append(message.get("content") or "")
        self.reasoning.append(message.get("reasoning_content") or message.get("reasoning") or "")
        self.finish_reason = choices[0].get("finish_reason")
        self._count(data.get("usage") or {})
        if on_delta is not None:  # the caller's view stays the same whether or not we streamed
            if self.reasoning[0]:
                on_delta("think", self.reasoning[0])
            if self.content[0]:
                on_delta("content", self.content[0])

    def _count(self, usage: dict[str, Any]) -> None:
        self.prompt_tokens = int(usage.get("prompt_tokens") or 0)
        self.completion_tokens = int(usage.get("completion_tokens") or 0)
