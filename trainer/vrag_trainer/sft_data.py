"""The SFT warm start's sequences, built by the code that builds the RL rows, so SFT trains on the
token sequences RL later samples and trains (template, images, observations, turn glue).

* **Labelled items** (:func:`teacher_segments`): the real agent (:func:`~vrag_trainer.rollout.run_rollout`,
  the app's own VRAG / VimRAG code against the search server) answers each item with a
  :class:`Teacher` in the model's place. The teacher searches for the question, then answers with
  the reference answer: VRAG ``<search>question</search>`` then ``<answer>reference</answer>``;
  VimRAG ``add_search_node`` (the question), ``summarize_and_memorize`` (every returned item kept)
  and ``add_answer_node`` (the reference). It writes no ``<think>``: it has no reasoning to show,
  and made-up reasoning would teach filler. Each trajectory is scored as RL scores it (format, the
  exact judge); one the agent did not accept as a right, well-formed answer is left out, named.
* **History's SFT export** (:func:`export_segments`): each sample's messages are replayed through
  :class:`~vrag_trainer.policy.PolicyChat` in the agent's message shapes (``<image>`` tags become
  image parts of the files beside the export), the assistant turns coming from a :class:`Teacher`
  that replies with the recorded text.

Either way the loss mask is PolicyChat's: 1 exactly on the tokens the model writes (a reply and
its end-of-turn token), 0 on the prompt, observations, images and the template's glue.
"""

from __future__ import annotations

import asyncio
import json
import logging
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from vrag_desktop.core.datasets import DatasetItem
from vrag_desktop.core.endpoints.base import EndpointError
from vrag_desktop.core.training.config import JudgeConfig, TrainConfig
from vrag_desktop.core.training.sft import IMAGE_TAG, ExportSample
from vrag_trainer.policy import Generated, Limits, PolicyChat, Segment

__all__ = ["SftRows", "Teacher", "export_segments", "teacher_segments", "vimrag_teacher", "vrag_teacher"]

log = logging.getLogger("vrag_trainer")
_ITEM = re.compile(r"\n((?:Text|Picture|Video) \d+):")


class Teacher:
    """A :class:`~vrag_trainer.policy.Generator` writing ``reply(prompt_text, call_no)`` (call_no
    from 1), tokenised as the tokenizer encodes it, plus the end-of-turn token. A reply longer than
    the turn allows is not cut (training on half a tool call would be wrong): ``failure`` says why,
    and a ``bad_request`` ends the agent's run there, as a context limit does."""

    def __init__(self, tokenizer: Any, reply: Callable[[str, int], str]) -> None:
        self.tok = tokenizer
        self.reply = reply
        self.calls = 0
        self.failure: str | None = None

    async def generate(
        self,
        prompt_ids: list[int],
        pixel_values: Any,
        image_grid_thw: Any,
        *,
        max_new_tokens: int,
        temperature: float,
        images: list[Any] | None = None,
    ) -> Generated:
        self.calls += 1
        text = self.reply(self.tok.decode(prompt_ids, skip_special_tokens=False), self.calls)
        ids = [*self.tok.encode(text, add_special_tokens=False), self.tok.eos_token_id]
        if len(ids) > max_new_tokens:
            self.failure = (
                f"reply {self.calls} is {len(ids)} tokens, more than max_response_length (or the "
                f"context left) allows ({max_new_tokens}): {text[:60]!r}"
            )
            raise EndpointError(self.failure, kind="bad_request")
        return Generated(ids, None, "stop")


def vrag_teacher(question: str, answer: str) -> Callable[[str, int], str]:
    """VRAG: search for the question, then answer (at once when the agent allows no search)."""

    def reply(prompt: str, call: int) -> str:
        from vrag_desktop.core.agents.vrag_protocol import ANSWER_NOW

        if call == 1 and not prompt.rstrip().endswith(ANSWER_NOW):
            return f"<search>{question}</search>"
        return f"<answer>{answer}</answer>"

    return reply


def _call(name: str, **arguments: Any) -> str:
    return (
        f"<tool_call>\n{json.dumps({'name': name, 'arguments': arguments}, ensure_ascii=False)}\n</tool_call>"
    )


def vimrag_teacher(question: str, answer: str) -> Callable[[str, int], str]:
    """VimRAG: one search node for the question, every returned item memorised as useful, then the
    answer node on it."""
    from vrag_desktop.core.agents import vimrag_prompts as P

    def reply(prompt: str, call: int) -> str:
        if call == 1:
            return _call(P.ADD_SEARCH_NODE, id="n1", parent_ids=["root"], query=question)
        if call == 2:
            shown = prompt.rsplit("<tool_response>", 1)[-1]
            labels = list(dict.fromkeys(_ITEM.findall(shown)))
            memorize = [
                {"information_id": label, "is_useful": True, "key_timestamp": [], "priority_score": 3}
                for label in labels
            ]
            return _call(P.SUMMARIZE_AND_MEMORIZE, summarize=f"Retrieved for: {question}", memorize=memorize)
        return _call(P.ADD_ANSWER_NODE, parent_ids=["n1"], answer=answer)

    return reply


@dataclass
class SftRows:
    """What an SFT run trains on: its sequences, and what was left out (id, why)."""

    segments: list[Segment] = field(default_factory=list)
    problems: list[tuple[str, str]] = field(default_factory=list)
    trajectories: int = 0
    notes: list[str] = field(default_factory=list)

    def lines(self) -> list[str]:
        tokens = sum(s.generated_tokens for s in self.segments)
        out = [
            f"SFT: {len(self.segments)} sequence(s) from {self.trajectories} trajectorie(s), "
            f"{tokens} trained token(s) (the model's own turns; prompt, observations and images masked)"
        ]
        out += self.notes
        out += [f"  left out {uid}: {why}" for uid, why in self.problems]
        return out


async def teacher_segments(
    cfg: TrainConfig,
    items: Sequence[DatasetItem],
    golden: Sequence[Sequence[str]],
    processor: Any,
    searcher: Callable[[], Any],
    *,
    concurrency: int = 4,
) -> SftRows:
    """The teacher's trajectory of every item (see the module docstring)."""
    from vrag_desktop.core.eval.reward import RewardWeights
    from vrag_trainer.rewards import RunJudge
    from vrag_trainer.rollout import RolloutSpec, run_rollout

    limits = Limits(cfg.max_model_len, cfg.max_response_length, cfg.max_images, cfg.max_prompt_length)
    judge = RunJudge(JudgeConfig(kind="exact"))
    make = vimrag_teacher if cfg.agent == "vimrag" else vrag_teacher
    gate = asyncio.Semaphore(concurrency)
    out = SftRows()
    seen_reference = 0

    async def one(i: int) -> tuple[int, Any, str | None]:
        item = items[i]
        teacher = Teacher(processor.tokenizer, make(item.query, item.reference_answer.strip()))
        spec = RolloutSpec(
            cfg.agent,
            processor,
            teacher,
            searcher,
            limits,
            max_turns=cfg.max_turns,
            top_k=cfg.search_top_k,
            temperature=1.0,
            weights=RewardWeights(cfg.reward.judge, cfg.reward.format, cfg.reward.ndcg),
        )
        async with gate:
            rollout, _ = await run_rollout(spec, item, golden[i], i, judge=judge)
        return i, (None if teacher.failure else rollout), teacher.failure

    done = await asyncio.gather(*(one(i) for i in range(len(items))))
    for i, r, why in sorted(done, key=lambda t: t[0]):
        uid = items[i].uid
        if r is None:
            out.problems.append((uid, f"the teacher's {why}"))
        elif r.error or r.search_errors:
            out.problems.append(
                (uid, f"the agent did not accept the teacher's trajectory: {r.error or 'search failed'}")
            )
        elif not (r.parts.format == 1.0 and r.correct) or r.forced or r.truncated:
            what = (
                "was cut by a length or image limit"
                if r.truncated
                else "was not scored right and well-formed"
            )
            out.problems.append((uid, f"the teacher's trajectory {what} (answer {r.answer!r})"))
        else:
            out.segments += r.segments
            out.trajectories += 1
            seen_reference += bool(golden[i]) and r.parts.ndcg > 0
    with_pages = sum(1 for i, _, _ in done if golden[i])
    if with_pages:
        out.notes.append(
            f"  the teacher's search found the reference page in {seen_reference} of {with_pages} "
            "trajectorie(s) that name one (it answers with the reference either way)"
        )
    return out


# ---- History's SFT export ------------------------------------------------------------------------
def _agent_messages(sample: ExportSample) -> list[dict[str, Any]]:
    """The export's messages in the shapes the agent sends: user contents as lists of parts, each
    ``<image>`` an ``image_url`` part of its file; assistant contents as their text."""
    images = iter(sample.images)
    out: list[dict[str, Any]] = []
    for m in sample.messages:
        if m["role"] == "assistant":
            out.append({"role": "assistant", "content": m["content"]})
            continue
        parts: list[dict[str, Any]] = []
        pieces = m["content"].split(IMAGE_TAG)
        for k, piece in enumerate(pieces):
            if k:
                parts.append({"type": "image_url", "image_url": {"url": next(images).as_uri()}})
            if piece:
                parts.append({"type": "text", "text": piece})
        out.append({"role": m["role"], "content": parts})
    return out


async def replay(sample: ExportSample, processor: Any, limits: Limits) -> tuple[list[Segment], str | None]:
    """The sample's segments as PolicyChat builds them; (segments, why it was cut short or None)."""
    messages = _agent_messages(sample)
    turns = [m["content"] for m in messages if m["role"] == "assistant"]
    teacher = Teacher(processor.tokenizer, lambda _p, n: turns[n - 1])
    chat = PolicyChat(processor, teacher, limits)
    for k, m in enumerate(messages):
        if m["role"] != "assistant":
            continue
        try:
            await chat.chat(messages[:k])
        except EndpointError as exc:  # a length or image limit: train on the turns that fit
            if teacher.failure:
                return [], f"its {teacher.failure}"
            kept = [s for s in chat.segments if s.generated_tokens]
            return kept, str(exc)
    return chat.segments, None


async def export_segments(samples: Sequence[ExportSample], processor: Any, cfg: TrainConfig) -> SftRows:
    """Every sample of an SFT export, replayed (see the module docstring)."""
    limits = Limits(cfg.max_model_len, cfg.max_response_length, cfg.max_images, cfg.max_prompt_length)
    out = SftRows()
    cut = 0
    for sample in samples:
        segments, why = await replay(sample, processor, limits)
        if not segments:
            out.problems.append((sample.id, why or "nothing the model wrote fits"))
            continue
        if why:
            cut += 1
            log.warning("SFT sample %s: %s; its turns before that are trained", sample.id, why)
        out.segments += segments
        out.trajectories += 1
    if cut:
        out.notes.append(
            f"  {cut} trajectorie(s) were cut at a length or image limit (their first turns train)"
        )
    return out


def sample_text(processor: Any, segment: Segment) -> str:
    """A segment as text, the trained tokens in ``[[...]]`` (for the log and for tests)."""
    tok = processor.tokenizer
    out: list[str] = []
    run: list[int] = []
    mode = 0
    for t, m in zip(segment.input_ids, segment.loss_mask, strict=True):
        if m != mode and run:
            text = tok.decode(run, skip_special_tokens=False)
            out.append(f"[[{text}]]" if mode else text)
            run = []
        mode = m
        run.append(t)
    if run:
        text = tok.decode(run, skip_special_tokens=False)
        out.append(f"[[{text}]]" if mode else text)
    return "".join(out)
