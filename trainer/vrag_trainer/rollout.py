"""One rollout: the project's own VRAG or VimRAG agent answers a dataset item with the policy
(:class:`~vrag_trainer.policy.PolicyChat`), searching the project's search server, and the result
is scored with the evaluation's core functions (format, NDCG, judge, composite reward).

Nothing here is a re-implementation of the agents: :func:`vrag_desktop.core.run.assemble.build_agent`
builds the same agent the app runs, so what is trained is what is served.
"""

from __future__ import annotations

import contextlib
import shutil
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from vrag_desktop.core.agents.events import AgentError, Answer, SearchResults
from vrag_desktop.core.agents.searchers import Searcher
from vrag_desktop.core.datasets import DatasetItem
from vrag_desktop.core.eval.answers import format_score, last_answer
from vrag_desktop.core.eval.metrics import copies_key, first_seen, ndcg_original
from vrag_desktop.core.eval.reward import RewardParts, RewardWeights, composite_reward
from vrag_desktop.core.run.assemble import VIMRAG, AgentOptions, build_agent
from vrag_desktop.core.run.store import RunRecorder
from vrag_trainer.policy import Generator, Limits, PolicyChat, Segment

__all__ = ["Rollout", "RolloutSpec", "run_rollout", "segment_nodes"]


@dataclass(frozen=True)
class RolloutSpec:
    """How rollouts are run (the same for every rollout of a run)."""

    agent: str
    processor: Any
    generator: Generator
    searcher: Callable[[], Searcher]
    limits: Limits
    max_turns: int = 4
    top_k: int = 3
    temperature: float = 1.0
    weights: RewardWeights = field(default_factory=RewardWeights)


@dataclass
class Rollout:
    """A finished rollout with its reward; ``segments`` are its training sequences."""

    uid: str
    group: int  # its GRPO group: the dataset row's index (+ k·len(dataset) if resampled, sampling.py)
    segments: list[Segment]
    answer: str | None
    forced: bool
    parts: RewardParts
    reward: float
    golden: tuple[str, ...]
    retrieved: list[str]
    answer_path: list[str]
    error: str | None
    seconds: float
    judge_error: str | None = None
    run_id: str | None = None
    search_errors: int = 0  # the search server failed during the rollout (not the policy's fault)
    truncated: bool = False  # it reached the context length or the image limit

    @property
    def usable(self) -> bool:
        """Trainable: the policy, not the infrastructure, decided how it went."""
        return self.search_errors == 0

    @property
    def correct(self) -> bool:
        """GGPO's "positive rollout": the judge (or metric) said the answer is right."""
        return bool(self.parts.judge)

    @property
    def turns(self) -> int:
        return sum(len(s.replies) for s in self.segments)


def segment_nodes(segments: Sequence[Segment]) -> None:
    """Name the graph node each VimRAG segment built, from its first tool call (search and
    memorize of one node share a segment; the answer segment is ``answer``)."""
    from vrag_desktop.core.agents import vimrag_prompts as P
    from vrag_desktop.core.agents.memory_graph import ANSWER_ID

    for seg in segments:
        for reply in seg.replies:
            try:
                call = P.parse_tool_call(reply)
            except P.ToolCallError:
                continue
            if call.name == P.ADD_ANSWER_NODE:
                seg.node_id = ANSWER_ID
            else:
                node = call.arguments.get("id") or call.arguments.get("node_id")
                seg.node_id = str(node) if node else None
            break


async def run_rollout(
    spec: RolloutSpec,
    item: DatasetItem,
    golden: Sequence[str],
    group: int,
    *,
    judge: Callable[[str, str, str | None], Any],
    samples: Path | None = None,
    settings: dict[str, Any] | None = None,
) -> tuple[Rollout, RunRecorder | None]:
    """Run the agent on ``item``; score it. With ``samples`` the run is recorded there as an app
    run (the recorder is returned open, so the caller can add the step's masks before closing)."""
    t0 = time.perf_counter()
    policy = PolicyChat(spec.processor, spec.generator, spec.limits, temperature=spec.temperature)
    recorder = RunRecorder(samples, spec.agent, item.query, settings) if samples is not None else None
    scratch = None if recorder else Path(tempfile.mkdtemp(prefix="vrag-rollout-"))
    image_dir = recorder.image_dir if recorder else scratch
    assert image_dir is not None
    options = AgentOptions(max_steps=spec.max_turns, top_k=spec.top_k, enable_thinking=False)
    searcher = spec.searcher()
    agent = build_agent(spec.agent, policy, searcher, image_dir, options)
    gold = set(golden)
    retrieved: list[str] = []
    answer_event: Answer | None = None
    error: str | None = None
    search_errors = 0
    tracking = getattr(spec.generator, "rollout", None)  # lets a batching generator wait for us
    try:
        stream = agent.run(item.query)
        async with contextlib.aclosing(stream), tracking() if tracking else contextlib.nullcontext():
            async for ev in stream:
                if recorder:
                    recorder.record(ev)
                if isinstance(ev, SearchResults):
                    keys = [copies_key(ev.hits[i].sources, ev.hits[i].page, gold) for i in ev.shown]
                    retrieved += keys
                    if policy.segments:
                        policy.segments[-1].retrieved += keys
                elif isinstance(ev, Answer):
                    answer_event = ev
                elif isinstance(ev, AgentError) and ev.kind == "search":
                    search_errors += 1
                if isinstance(ev, AgentError) and not ev.recoverable:
                    error = f"{ev.kind}: {ev.content}" if ev.kind else ev.content
    finally:
        if scratch is not None:
            shutil.rmtree(scratch, ignore_errors=True)
    segments = [s for s in policy.segments if s.generated_tokens > 0]
    for i, s in enumerate(segments):
        s.step = i
    forced = bool(answer_event and answer_event.forced)
    answer_path: list[str] = []
    if spec.agent == VIMRAG:
        segment_nodes(segments)
        graph = getattr(agent, "last_graph", None)
        answer_path = graph.answer_path() if graph is not None else []
        # VimRAG answers by tool call, not <answer> tags: its format check is "searched, then
        # answered through add_answer_node" (the original's rule in this agent's grammar)
        searched = any(s.node_id and s.node_id != "answer" for s in segments)
        fmt = 1.0 if searched and answer_event is not None and not forced else 0.0
        answer = answer_event.content if answer_event is not None and not forced else None
    else:
        turns = [{"role": "assistant", "content": r} for s in segments for r in s.replies]
        fmt = format_score(turns)
        answer = last_answer(turns)
    verdict = await judge(item.query, item.reference_answer, answer) if fmt > 0 else None
    correct = None if verdict is None else verdict[0]
    parts = RewardParts(
        format=fmt, judge=correct, ndcg=ndcg_original(first_seen(retrieved), gold) if gold else 0.0
    )
    out = Rollout(
        uid=item.uid,
        group=group,
        segments=segments,
        answer=answer,
        forced=forced,
        parts=parts,
        reward=composite_reward(parts, spec.weights),
        golden=tuple(golden),
        retrieved=retrieved,
        answer_path=answer_path,
        error=error,
        seconds=time.perf_counter() - t0,
        judge_error=None if verdict is None else verdict[1],
        run_id=recorder.id if recorder else None,
        search_errors=search_errors,
        truncated=any(s.truncated for s in policy.segments),
    )
    return out, recorder
