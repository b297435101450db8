"""The model judge: asks a chat model whether a generated answer matches the reference answer.

Protocol as the original's reward (reference §6.4): a prompt with ``## Query``, ``## Reference
Answer`` and ``## Generated Answer`` sections, the model replies ``<judge>True</judge>`` or
``<judge>False</judge>``; no answer at all is judged False without a call (the original sends
"Please Judge False" instead). The instructions are our own wording.

Unlike the original (whose retry counter never decremented, so a persistent failure looped
forever), every verdict ends: after at most ``1 + retries`` calls it is True, False, or
``correct=None`` with an ``error`` saying why. Retries happen in two layers:

- the client's own (:class:`~vrag_desktop.core.endpoints.client.OpenAIChatModel`): 408/429/5xx and
  connection failures, honouring ``Retry-After`` up to its ``max_retry_after``;
- the judge's, around whole calls: a call past ``timeout_s``, an error the client gave up on that
  may pass (rate limit, server error, timeout, unreachable, cut), and a reply that says neither
  True nor False. A refused key (401/403), an unknown model or a rejected request is not retried.

At most ``concurrency`` calls run at once (a semaphore per event loop); a verdict keeps its slot
through its backoff waits, so a rate-limited judge is not pressed harder.
"""

from __future__ import annotations

import asyncio
import random
import re
import time
import weakref
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeAlias

from vrag_desktop.core.endpoints.base import AsyncClosing, EndpointError

if TYPE_CHECKING:
    from vrag_desktop.core.endpoints.base import ChatModel
    from vrag_desktop.core.run.assemble import Endpoint

__all__ = ["JUDGE_INSTRUCTIONS", "Judge", "JudgeItem", "Verdict", "judge_messages", "parse_judgement"]

JUDGE_INSTRUCTIONS = (
    "You grade answers given by a question-answering assistant that reads documents.\n"
    "Compare the generated answer with the reference answer for the query below. The generated "
    "answer is correct when it conveys the same key facts as the reference: different wording, "
    "formatting, units or number style, and extra explanation that does not contradict the "
    "reference, are fine. It is incorrect when it contradicts the reference, leaves out what the "
    "query asks for, hedges between several answers, or declines to answer.\n"
    "Reply with exactly <judge>True</judge> if the generated answer is correct, or "
    "<judge>False</judge> if it is not, and nothing else."
)

JudgeItem: TypeAlias = tuple[str, str, str | None]  # (query, reference answer, generated answer)

_TAGGED = re.compile(r"<judge>\s*(true|false)\s*</judge>", re.I)
_BARE = re.compile(r"[\s\"'`*]*(true|false)[\s\"'`*.!]*", re.I)
_RETRYABLE_KINDS = frozenset({"timeout", "rate_limit", "server", "unreachable", "stream_cut"})
_BACKOFF_MAX_S = 30.0


@dataclass(frozen=True)
class Verdict:
    """One judgement. ``correct`` None: no verdict (``error`` says why). ``raw``: the judge's last
    reply. ``attempts``: calls made (0 when there was no answer to judge). ``seconds``: from getting
    a concurrency slot to the verdict, retries and waits included."""

    correct: bool | None
    raw: str
    attempts: int
    error: str | None
    seconds: float
    #: the endpoint's failure kind when the last call failed ("auth", "not_found", "timeout", …;
    #: "unparsed" for a reply without a verdict): what a caller decides on, not the wording
    error_kind: str | None = None

    @property
    def refused(self) -> bool:
        """The judge can never answer as configured (wrong key, model not served): every later
        verdict would fail the same way."""
        return self.error_kind in ("auth", "not_found")


def judge_messages(query: str, reference: str, answer: str) -> list[dict[str, Any]]:
    """The chat request for one judgement."""
    prompt = (
        f"{JUDGE_INSTRUCTIONS}\n\n## Query\n{query.strip()}\n\n"
        f"## Reference Answer\n{reference.strip()}\n\n## Generated Answer\n{answer.strip()}\n"
    )
    return [{"role": "user", "content": prompt}]


def parse_judgement(reply: str) -> bool | None:
    """True/False from ``<judge>True</judge>`` (any case and spacing; the last tag wins) or from a
    bare True/False that is the whole reply; None when the reply says neither."""
    tagged = _TAGGED.findall(reply)
    if tagged:
        return bool(tagged[-1].lower() == "true")
    bare = _BARE.fullmatch(reply)
    return None if bare is None else bare.group(1).lower() == "true"


class Judge(AsyncClosing):
    """Judges answers with a chat model.

    ``client_or_endpoint``: a ready chat client (kept open; the caller closes it) or an
    :class:`~vrag_desktop.core.run.assemble.Endpoint` (a profile or a URL), whose client the judge
    makes on first use, inside the running loop, and closes in :meth:`aclose`. ``model`` overrides
    the served model name per request. ``timeout_s`` bounds each call; ``retries`` is the number of
    calls after the first; ``backoff_s`` the first wait between calls (doubling, jittered, at most
    30 s)."""

    def __init__(
        self,
        client_or_endpoint: ChatModel | Endpoint,
        *,
        model: str | None = None,
        timeout_s: float = 60.0,
        retries: int = 3,
        concurrency: int = 4,
        backoff_s: float = 1.0,
    ) -> None:
        if timeout_s <= 0:
            raise ValueError(f"timeout_s must be positive, not {timeout_s}")
        if retries < 0:
            raise ValueError(f"retries must be 0 or more, not {retries}")
        if concurrency < 1:
            raise ValueError(f"concurrency must be at least 1, not {concurrency}")
        if backoff_s < 0:
            raise ValueError(f"backoff_s must be 0 or more, not {backoff_s}")
        from vrag_desktop.core.run.assemble import Endpoint

        self._endpoint: Endpoint | None = None
        self._client: ChatModel | None = None
        if isinstance(client_or_endpoint, Endpoint):
            self._endpoint = client_or_endpoint
        else:
            self._client = client_or_endpoint
        self.model = model
        self.timeout_s = timeout_s
        self.retries = retries
        self.concurrency = concurrency
        self.backoff_s = backoff_s
        self._slots: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, asyncio.Semaphore] = (
            weakref.WeakKeyDictionary()
        )
        self._rng = random.Random()

    # ---- lifecycle ------------------------------------------------------------------------------
    @property
    def client(self) -> ChatModel:
        """The chat client (made from the endpoint on first use)."""
        if self._client is None:
            assert self._endpoint is not None
            self._client = self._endpoint.make()
        return self._client

    async def aclose(self) -> None:
        """Close the client if the judge made it from an endpoint."""
        if self._endpoint is None or self._client is None:
            return
        client, self._client = self._client, None
        if client is not None:
            from vrag_desktop.core.run.assemble import close_model

            await close_model(client)

    def _slot(self) -> asyncio.Semaphore:
        loop = asyncio.get_running_loop()
        slot = self._slots.get(loop)
        if slot is None:
            slot = self._slots[loop] = asyncio.Semaphore(self.concurrency)
        return slot

    # ---- judging --------------------------------------------------------------------------------
    async def verdicts(self, items: Iterable[JudgeItem]) -> list[Verdict]:
        """Verdicts for many ``(query, reference, answer)`` items, in their order, at most
        ``concurrency`` calls at a time."""
        return list(await asyncio.gather(*(self.verdict(q, r, a) for q, r, a in items)))

    async def verdict(self, query: str, reference: str, answer: str | None) -> Verdict:
        """Whether ``answer`` (the generated answer's text, e.g. from
        :func:`~vrag_desktop.core.eval.answers.last_answer`) matches ``reference``. Never raises
        for endpoint failures: they end as ``correct=None`` with ``error``."""
        if answer is None or not answer.strip():
            return Verdict(False, "", 0, None, 0.0)
        messages = judge_messages(query, reference, answer)
        params: dict[str, Any] = {"temperature": 0}
        if self.model:
            params["model"] = self.model
        async with self._slot():
            started = time.monotonic()
            raw, error, kind = "", "", ""
            for attempt in range(1, self.retries + 2):
                try:
                    result = await asyncio.wait_for(
                        self.client.chat(messages, stream=False, **params), self.timeout_s
                    )
                except asyncio.TimeoutError:
                    error, kind = f"the judge did not answer within {self.timeout_s:g} s", "timeout"
                except EndpointError as exc:
                    error, kind = _describe(exc), exc.kind
                    if exc.kind not in _RETRYABLE_KINDS:
                        return Verdict(None, raw, attempt, error, time.monotonic() - started, kind)
                else:
                    raw = result.content
                    correct = parse_judgement(raw)
                    if correct is not None:
                        return Verdict(correct, raw, attempt, None, time.monotonic() - started)
                    error = f"the judge's reply says neither True nor False: {_clip(raw)!r}"
                    kind = "unparsed"
                if attempt <= self.retries:
                    await asyncio.sleep(self._delay(attempt))
            attempts = self.retries + 1
            tries = f" (after {attempts} attempts)" if attempts > 1 else ""
            return Verdict(None, raw, attempts, error + tries, time.monotonic() - started, kind)

    def _delay(self, attempt: int) -> float:
        base = min(_BACKOFF_MAX_S, self.backoff_s * 2 ** (attempt - 1))
        return base * (0.5 + 0.5 * self._rng.random())


def _describe(exc: EndpointError) -> str:
    """The client's message (keys already redacted), led by what to do about it."""
    if exc.kind == "auth":
        return f"the judge endpoint refused the API key; check the judge's key: {exc}"
    if exc.kind == "not_found":
        return f"the judge model is not served there; check the judge's model name: {exc}"
    return f"the judge call failed: {exc}"


def _clip(text: str, limit: int = 200) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"
