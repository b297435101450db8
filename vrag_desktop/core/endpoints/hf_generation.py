"""Controlling one local generation: the flags shared with its worker thread, the validated decoding
settings, and the transformers streamer and stopping criterion (built lazily, so importing this
costs nothing until a local model runs)."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from vrag_desktop.core.endpoints.hf_messages import bad_request as _bad

log = logging.getLogger(__name__)

# Call params the OpenAI client would send that have no meaning here: accepted, ignored quietly.
_IGNORED_QUIETLY = frozenset({"model", "extra_body", "n", "user", "stream_options"})


# ---- control ------------------------------------------------------------------------


class Control:
    """Flags one generation shares with its worker thread."""

    def __init__(self) -> None:
        self.cancelled = threading.Event()  # the caller gave up: stop as soon as possible
        self.stopped = threading.Event()  # a stop string appeared: stop, the answer is complete

    def halt(self) -> bool:
        return self.cancelled.is_set() or self.stopped.is_set()


@dataclass
class Settings:
    """One call's decoding settings, validated on the loop before any work starts."""

    max_new_tokens: int
    temperature: float | None = None
    top_p: float | None = None
    top_k: int | None = None
    repetition_penalty: float | None = None
    seed: int | None = None
    min_tokens: int | None = None
    ignore_eos: bool = False
    stop: list[str] = field(default_factory=list)


class Cancelled(Exception):
    """Internal: the generation was cancelled before it started."""


_classes: dict[str, Any] = {}


def runtime_classes() -> tuple[Any, Any]:
    """(streamer sink class, stopping criterion class), built on first use (lazy transformers)."""
    if not _classes:
        import torch
        from transformers import StoppingCriteria, StoppingCriteriaList, TextStreamer

        class _Sink(TextStreamer):  # type: ignore[misc]
            """Incremental decode (TextStreamer's word-boundary logic), stop strings cut OpenAI-style
            (the stop text itself is never delivered), each finished piece handed to ``emit``."""

            def __init__(
                self,
                tokenizer: Any,
                stops: list[str],
                control: Control,
                emit: Callable[[str], None] | None,
            ) -> None:
                super().__init__(tokenizer, skip_prompt=True, skip_special_tokens=True)
                self.stops = stops
                self.hold = max((len(s) for s in stops), default=1) - 1
                self.control = control
                self.emit = emit
                self.buf = ""
                self.parts: list[str] = []
                self.stop_hit = False

            def _out(self, text: str) -> None:
                if text:
                    self.parts.append(text)
                    if self.emit is not None:
                        self.emit(text)

            def on_finalized_text(self, text: str, stream_end: bool = False) -> None:
                if self.stop_hit:
                    return
                if not self.stops:
                    self._out(text)
                    return
                self.buf += text
                hits = [i for i in (self.buf.find(s) for s in self.stops) if i >= 0]
                if hits:
                    self._out(self.buf[: min(hits)])
                    self.buf = ""
                    self.stop_hit = True
                    self.control.stopped.set()
                    return
                keep = 0 if stream_end else min(self.hold, len(self.buf))
                self._out(self.buf[: len(self.buf) - keep])
                self.buf = self.buf[len(self.buf) - keep :]

        class _Halt(StoppingCriteria):  # type: ignore[misc]
            def __init__(self, control: Control) -> None:
                self.control = control

            def __call__(self, input_ids: Any, scores: Any, **kwargs: Any) -> Any:
                return torch.full(
                    (input_ids.shape[0],),
                    self.control.halt(),
                    dtype=torch.bool,
                    device=input_ids.device,
                )

        def halt(control: Control) -> Any:
            return StoppingCriteriaList([_Halt(control)])

        _classes["sink"], _classes["halt"] = _Sink, halt  # type: ignore[assignment]
    return _classes["sink"], _classes["halt"]


def decoding_settings(p: Mapping[str, Any], default_max_new_tokens: int) -> Settings:
    """One call's decoding settings from OpenAI-style params, validated (a clear 400-style error),
    before any work starts; params with no meaning for a local model are ignored."""
    limit = None
    for key in ("max_tokens", "max_completion_tokens", "max_new_tokens"):
        if p.get(key) is not None:
            limit = p[key]
            break
    s = Settings(max_new_tokens=default_max_new_tokens if limit is None else limit)

    def number(key: str, kind: type, ok: Callable[[Any], bool], rule: str) -> Any:
        value = p.get(key)
        if value is None:
            return None
        try:
            value = kind(value)
        except (TypeError, ValueError):
            raise _bad(f"{key} must be a number, got {p[key]!r}") from None
        if isinstance(p[key], bool) or not ok(value):
            raise _bad(f"{key} {rule}, got {p[key]!r}")
        return value

    if isinstance(s.max_new_tokens, bool) or not isinstance(s.max_new_tokens, int) or s.max_new_tokens < 1:
        raise _bad(f"max_tokens must be a positive integer, got {s.max_new_tokens!r}")
    s.temperature = number("temperature", float, lambda v: v >= 0, "must be >= 0")
    s.top_p = number("top_p", float, lambda v: 0 < v <= 1, "must be in (0, 1]")
    s.top_k = number("top_k", int, lambda v: v >= 0, "must be >= 0")
    s.repetition_penalty = number("repetition_penalty", float, lambda v: v > 0, "must be > 0")
    s.seed = number("seed", int, lambda v: True, "")
    s.min_tokens = number("min_tokens", int, lambda v: v >= 0, "must be >= 0")
    s.ignore_eos = bool(p.get("ignore_eos") or False)
    stop = p.get("stop")
    if isinstance(stop, str):
        stop = [stop]
    if stop is not None and not (isinstance(stop, (list, tuple)) and all(isinstance(x, str) for x in stop)):
        raise _bad(f"stop must be a string or a list of strings, got {stop!r}")
    s.stop = [x for x in (stop or []) if x]
    known = {
        "max_tokens",
        "max_completion_tokens",
        "max_new_tokens",
        "temperature",
        "top_p",
        "top_k",
        "repetition_penalty",
        "seed",
        "stop",
        "min_tokens",
        "ignore_eos",
    }
    ignored = sorted(k for k in p if k not in known and k not in _IGNORED_QUIETLY)
    if ignored:
        log.debug("local model ignores params %s", ignored)
    return s
