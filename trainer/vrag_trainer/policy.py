"""The policy as the agents see it: a :class:`~vrag_desktop.core.endpoints.base.ChatModel` that
records, token by token, what the policy saw and wrote, so training sees exactly that.

Token in, token out. The agents speak OpenAI messages; a trainer that re-tokenised the assistant
text afterwards would train on tokens the policy never produced (turn separators lost, merges
changed: verl #3720, #6921). Here the sequence is built incrementally:

* the first call of a segment renders the messages with the chat template and tokenises them with
  the processor (images expanded into their vision tokens) — mask 0;
* the generated ids are appended as they came from the generator — mask 1;
* the next call's messages must extend the previous request by the assistant reply plus new
  messages (an observation, a correction); only the *new* messages are rendered (the template's
  text after the reply, found by rendering with and without them) and tokenised — mask 0 — after
  the glue that closes the assistant turn (``<|im_end|>`` if the reply was cut, then ``\\n``);
* a call whose messages do not extend the previous request starts a new **segment**: VimRAG
  rebuilds its context at every graph node, so it yields one sequence per node, as GGPO describes;
  VRAG yields one sequence per rollout.

Every image the policy was shown is kept with its processed pixels in order, so the training
forward pass gets all of them, crops included. Limits are enforced at turn boundaries: a turn that
would pass ``max_model_len`` or ``max_images`` is not appended (never half an image block) and the
call fails with a ``bad_request`` :class:`EndpointError`, which ends the agent's run; the segment
is marked truncated and trains on what it has.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Any, Protocol

from vrag_desktop.core.endpoints.base import ChatResult, DeltaCallback, EndpointError, Messages
from vrag_desktop.core.endpoints.hf_messages import openai_to_hf_messages

__all__ = ["Generated", "Generator", "Limits", "PolicyChat", "Segment", "vision_token_ids"]

_SENTINEL = "\u0000VRAG-SENTINEL\u0000"


@dataclass
class Generated:
    """What a generator returns: the new token ids (eos included when it stopped on one), their
    sampling log-probabilities when the engine reports them, and why it stopped."""

    ids: list[int]
    logprobs: list[float] | None = None
    finish: str = "stop"  # stop | length


class Generator(Protocol):
    """Continues a token sequence: Hugging Face ``generate``, vLLM, or verl's rollout server."""

    async def generate(
        self,
        prompt_ids: list[int],
        pixel_values: Any,
        image_grid_thw: Any,
        *,
        max_new_tokens: int,
        temperature: float,
        images: list[Any] | None = None,
    ) -> Generated: ...


@dataclass(frozen=True)
class Limits:
    """The config's lengths. ``max_prompt_length`` bounds the prompt a sequence starts from (the
    system prompt and question; for VimRAG each node's rebuilt context), as verl's
    ``data.max_prompt_length`` bounds the dataset prompt; ``max_model_len`` the whole sequence."""

    max_model_len: int = 10240
    max_response_length: int = 2048
    max_images: int = 25
    max_prompt_length: int = 8192


@dataclass
class Segment:
    """One training sequence: ``input_ids`` with ``loss_mask`` 1 exactly on generated tokens."""

    input_ids: list[int] = field(default_factory=list)
    loss_mask: list[int] = field(default_factory=list)
    logprobs: list[float] = field(default_factory=list)  # aligned with input_ids (NaN where unknown)
    pixel_values: list[Any] = field(default_factory=list)  # one tensor of patch rows per image
    image_grid_thw: list[Any] = field(default_factory=list)  # one (t, h, w) row per image
    images: list[Any] = field(default_factory=list)  # the PIL images, for saving samples
    replies: list[str] = field(default_factory=list)  # decoded generated text per turn
    prompt_len: int = 0  # tokens before the first generated one
    truncated: bool = False
    # filled in by the rollout: which graph node this segment built, and what it retrieved
    node_id: str | None = None
    retrieved: list[str] = field(default_factory=list)
    step: int = 0

    @property
    def n_images(self) -> int:
        return len(self.pixel_values)

    @property
    def generated_tokens(self) -> int:
        return sum(self.loss_mask)


VISION_TOKENS = ("<|image_pad|>", "<|video_pad|>", "<|vision_start|>", "<|vision_end|>")


def vision_token_ids(tokenizer: Any) -> frozenset[int]:
    """Ids of the vision placeholders: generating one would break the image/feature alignment of
    every later forward pass, so generators suppress them and :class:`PolicyChat` cuts at one."""
    unk = getattr(tokenizer, "unk_token_id", None)
    ids = {tokenizer.convert_tokens_to_ids(t) for t in VISION_TOKENS}
    return frozenset(i for i in ids if isinstance(i, int) and i != unk)


class PolicyChat:
    """A ChatModel over a :class:`Generator` that records :attr:`segments`."""

    model_name = "policy"

    def __init__(
        self,
        processor: Any,
        generator: Generator,
        limits: Limits | None = None,
        *,
        max_pixels: int | None = None,
        temperature: float = 1.0,
    ) -> None:
        self.processor = processor
        self.tokenizer = processor.tokenizer
        self.generator = generator
        self.limits = limits or Limits()
        self.max_pixels = max_pixels
        self.temperature = temperature
        self.segments: list[Segment] = []
        self._last_request: list[dict[str, Any]] | None = None
        self._last_ids: list[int] = []
        self._eos_text = self.tokenizer.eos_token or ""
        self._tail = self._assistant_tail()
        self.vision_ids = vision_token_ids(self.tokenizer)

    # ---- the template --------------------------------------------------------------------------
    def _render(self, conversation: list[dict[str, Any]], generation_prompt: bool) -> str:
        try:
            text = self.processor.apply_chat_template(
                conversation, tokenize=False, add_generation_prompt=generation_prompt
            )
        except Exception as exc:  # jinja refused the messages
            raise EndpointError(f"the chat template refused the messages: {exc}", kind="bad_request") from exc
        return str(text)

    def _assistant_tail(self) -> str:
        """What the template writes after an assistant message's text (Qwen: ``<|im_end|>\\n``)."""
        conv = [
            {"role": "user", "content": [{"type": "text", "text": "q"}]},
            {"role": "assistant", "content": [{"type": "text", "text": _SENTINEL}]},
        ]
        text = self._render(conv, False)
        return text.split(_SENTINEL, 1)[1] if _SENTINEL in text else ""

    def _encode(self, text: str, images: list[Any]) -> tuple[list[int], Any, Any]:
        try:
            enc = self.processor(text=[text], images=images or None, return_tensors="pt")
        except Exception as exc:
            raise EndpointError(f"the processor refused the input: {exc}", kind="bad_request") from exc
        grid = enc.get("image_grid_thw")
        return enc["input_ids"][0].tolist(), enc.get("pixel_values"), grid

    def _glue(self) -> str:
        """Text closing the previous assistant turn, given how its generated ids ended."""
        ended_on_eos = bool(self._last_ids) and self._last_ids[-1] == self.tokenizer.eos_token_id
        if ended_on_eos and self._eos_text and self._tail.startswith(self._eos_text):
            return self._tail[len(self._eos_text) :]
        return self._tail

    # ---- one call ------------------------------------------------------------------------------
    def _extends(self, request: list[dict[str, Any]]) -> bool:
        last = self._last_request
        if last is None or not self.segments:
            return False
        n = len(last)
        return len(request) > n + 1 and request[n].get("role") == "assistant" and request[:n] == last

    def _context(self, request: list[dict[str, Any]]) -> tuple[Segment, list[int], Any, Any, list[Any]]:
        """The segment to continue and the tokens, pixels and images to append before generating."""
        if self._extends(request):
            seg = self.segments[-1]
            k = len(self._last_request or [])
            # earlier turns only need rendering: their images were processed when they came
            seen, _ = openai_to_hf_messages(request[: k + 1], self.max_pixels, decode=False)
            fresh, new_images = openai_to_hf_messages(request[k + 1 :], self.max_pixels)
            conversation = seen + fresh
            before = self._render(conversation[: k + 1], False)
            after = self._render(conversation, True)
            if not after.startswith(before):
                raise EndpointError(
                    "the chat template is not prefix-stable (earlier turns render differently once "
                    "more messages follow); token-in/token-out training needs one that is",
                    kind="bad_request",
                )
            ids, pixels, grid = self._encode(self._glue() + after[len(before) :], new_images)
            return seg, ids, pixels, grid, new_images
        conversation, images = openai_to_hf_messages(request, self.max_pixels)
        seg = Segment()
        self.segments.append(seg)
        ids, pixels, grid = self._encode(self._render(conversation, True), images)
        return seg, ids, pixels, grid, images

    async def chat(
        self, messages: Messages, *, stream: bool = True, on_delta: DeltaCallback | None = None, **params: Any
    ) -> ChatResult:
        request = list(messages)
        seg, ids, pixels, grid, images = await asyncio.to_thread(self._context, request)
        lim = self.limits
        room = lim.max_model_len - len(seg.input_ids) - len(ids)
        long_prompt = not seg.prompt_len and len(seg.input_ids) + len(ids) > lim.max_prompt_length
        if room < 1 or long_prompt or seg.n_images + len(images) > lim.max_images:
            seg.truncated = True
            what = "context length" if room < 1 else "prompt length" if long_prompt else "image limit"
            raise EndpointError(
                f"the trajectory reached the {what} ({len(seg.input_ids) + len(ids)} tokens, "
                f"{seg.n_images + len(images)} images); it ends here",
                kind="bad_request",
            )
        seg.input_ids += ids
        seg.loss_mask += [0] * len(ids)
        seg.logprobs += [float("nan")] * len(ids)
        if pixels is not None and grid is not None and len(images):
            sizes = [int(g.prod()) for g in grid]
            seg.pixel_values += list(pixels.split(sizes, dim=0))
            seg.image_grid_thw += list(grid)
            seg.images += images
        if not seg.prompt_len:
            seg.prompt_len = len(seg.input_ids)
        asked = params.get("max_tokens") or params.get("max_completion_tokens") or lim.max_response_length
        max_new = max(1, min(int(asked), lim.max_response_length, room))
        out = await self.generator.generate(
            list(seg.input_ids),
            seg.pixel_values,
            seg.image_grid_thw,
            max_new_tokens=max_new,
            temperature=self.temperature,
            images=list(seg.images),
        )
        cut = next((i for i, t in enumerate(out.ids) if t in self.vision_ids), None)
        if cut is not None:  # a vision placeholder the policy wrote would have no image behind it
            out = Generated(out.ids[:cut], out.logprobs[:cut] if out.logprobs else None, "stop")
        seg.input_ids += out.ids
        seg.loss_mask += [1] * len(out.ids)
        lps = out.logprobs if out.logprobs is not None and len(out.logprobs) == len(out.ids) else None
        seg.logprobs += lps if lps is not None else [float("nan")] * len(out.ids)
        text = self.tokenizer.decode(out.ids, skip_special_tokens=True)
        seg.replies.append(text)
        self._last_request = request
        self._last_ids = out.ids
        if on_delta is not None and text:
            on_delta("content", text)
        return ChatResult(
            content=text,
            prompt_tokens=len(seg.input_ids) - len(out.ids),
            completion_tokens=len(out.ids),
            finish_reason=out.finish,
        )
