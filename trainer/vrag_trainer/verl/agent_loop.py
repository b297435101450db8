"""verl agent loops that run the project's own agents: ``vrag_agent`` and ``vimrag_agent``.

Imported on every verl process (``actor_rollout_ref.model.external_lib`` and
``VERL_USE_EXTERNAL_MODULES``); the classes are also named in ``agent_loops.yaml`` for
``rollout.agent.agent_loop_config_path``. Each ``run()`` is one rollout: the agent answers the
row's question through :class:`~vrag_trainer.policy.PolicyChat`, whose generator is verl's rollout
server (:class:`ServerGenerator`), searching the project's search server, scored by the core reward
functions — the same :func:`~vrag_trainer.rollout.run_rollout` the one-workstation trainer runs.

Outputs (:func:`segment_to_output`): ``prompt_ids`` = the segment's context before its first
generated token, ``response_ids`` = the rest (turns and observations), ``response_mask`` = our
loss mask times the GGPO weight, the segment's images, the rollout's reward. VRAG gives one
output per rollout (verl's stock manager). VimRAG gives one per graph node: verl must then run a
multi-output agent loop manager (``rollout.agent.agent_loop_manager_class``, as VAGEN's
``multi_output.py`` does) that repeats each prompt's rows per segment and sets the row's ``uid`` to
``uid + extra_fields["group_suffix"]`` so ``segment_grpo`` counts each rollout once. That manager
is not part of this package yet (docs/trainer.md).
"""

from __future__ import annotations

import importlib.util
import json
import time
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from vrag_desktop.core.datasets import DatasetItem
from vrag_desktop.core.endpoints.base import EndpointError
from vrag_desktop.core.eval.metrics import golden_keys
from vrag_desktop.core.training.config import TrainConfig
from vrag_trainer.ggpo import training_rows
from vrag_trainer.policy import Generated, Limits, Segment
from vrag_trainer.rollout import Rollout

__all__ = [
    "RolloutContext",
    "ServerGenerator",
    "item_from_row",
    "rollout_outputs",
    "run_agent",
    "segment_to_output",
]


class ServerGenerator:
    """A :class:`~vrag_trainer.policy.Generator` over verl's ``AsyncLLMServerManager``: token ids
    and PIL images in, token ids and log-probs out; one sticky ``request_id`` per rollout so a
    multi-turn trajectory reuses its server's prefix cache."""

    def __init__(self, server_manager: Any, sampling_params: Mapping[str, Any], request_id: str = "") -> None:
        self.server = server_manager
        self.sampling = dict(sampling_params)
        self.request_id = request_id or uuid.uuid4().hex
        self.calls = 0
        self.seconds = 0.0

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
        if pixel_values is not None and len(pixel_values) and not images:
            raise EndpointError(
                "verl's rollout server needs the images themselves: PolicyChat must pass images=",
                kind="bad_request",
            )
        params = {**self.sampling, "max_tokens": int(max_new_tokens), "temperature": float(temperature)}
        t0 = time.perf_counter()
        out = await self.server.generate(
            self.request_id, prompt_ids=list(prompt_ids), sampling_params=params, image_data=images or None
        )
        self.seconds += time.perf_counter() - t0
        self.calls += 1
        ids = [int(t) for t in out.token_ids]
        lps = [float(x) for x in out.log_probs] if getattr(out, "log_probs", None) else None
        finish = "length" if len(ids) >= max_new_tokens else "stop"
        return Generated(ids, lps, finish)


def _plain(value: Any) -> Any:
    """numpy arrays and scalars (what verl's dataset rows hold) → Python values."""
    if hasattr(value, "tolist"):
        return value.tolist()
    return value


def item_from_row(row: Mapping[str, Any]) -> tuple[DatasetItem, tuple[str, ...], int]:
    """A verl row (the app's exporter wrote it) → the dataset item, its golden keys and its index."""
    extra = {k: _plain(v) for k, v in dict(_plain(row.get("extra_info")) or {}).items()}
    reward = dict(_plain(row.get("reward_model")) or {})
    file_name = str(_plain(row.get("file_name")) or extra.get("file_name") or "")
    pages = _plain(row.get("reference_page"))
    if pages is None:
        pages = extra.get("reference_page")
    pages = pages if pages is not None else []
    pages = tuple(int(p) for p in pages)
    index = int(_plain(row.get("index", extra.get("index", 0))) or 0)
    question = str(extra.get("question") or "")
    if not question:
        raise ValueError("the verl row has no extra_info.question (write the data with `vrag_trainer verl`)")
    answer = str(extra.get("answer") or reward.get("ground_truth") or "")
    item = DatasetItem(
        uid=str(extra.get("uid") or f"row-{index}"),
        query=question,
        reference_answer=answer,
        file_name=file_name,
        reference_page=pages,
    )
    return item, tuple(golden_keys(file_name, pages)) if file_name else (), index


def segment_to_output(
    segment: Segment,
    *,
    reward: float,
    weight: int,
    reason: str,
    prompt_length: int,
    response_length: int,
    group_suffix: str,
    rollout: Rollout | None = None,
) -> dict[str, Any]:
    """One ``AgentLoopOutput``'s fields. The split sits at the first generated token but never
    past ``prompt_length`` (verl pads prompts to it; earlier context then rides in the response
    with mask 0); a response longer than ``response_length`` is refused, never cut mid-image."""
    ids, mask = segment.input_ids, segment.loss_mask
    split = min(segment.prompt_len or len(ids), prompt_length)
    response = ids[split:]
    if len(response) > response_length:
        raise ValueError(
            f"a segment of {len(ids)} tokens does not fit verl's prompt_length + response_length "
            f"({prompt_length} + {response_length}); raise data.max_response_length"
        )
    lps = segment.logprobs[split:]
    known = all(lp == lp for lp, m in zip(lps, mask[split:], strict=True) if m)  # NaN != NaN
    out: dict[str, Any] = {
        "prompt_ids": list(ids[:split]),
        "response_ids": list(response),
        "response_mask": [m * weight for m in mask[split:]],
        "response_logprobs": [lp if lp == lp else 0.0 for lp in lps] if known and lps else None,
        "multi_modal_data": {"images": list(segment.images)} if segment.images else {},
        "reward_score": float(reward),
        "num_turns": 2 * len(segment.replies) + 1,
        "extra_fields": {
            "node_id": segment.node_id,
            "ggpo_weight": int(weight),
            "ggpo_mask_reason": reason,
            "group_suffix": group_suffix,
            "truncated": segment.truncated,
            "segment": segment.step,
        },
    }
    if rollout is not None:
        out["extra_fields"].update(
            correct=rollout.correct,
            reward_format=rollout.parts.format,
            reward_judge=float(rollout.parts.judge or 0),
            reward_ndcg=rollout.parts.ndcg,
            judge_failed=rollout.parts.judge_failed,
            search_failed=not rollout.usable,
        )
    return out


def rollout_outputs(
    rollout: Rollout, algorithm: str, *, prompt_length: int, response_length: int, rollout_uid: str
) -> list[dict[str, Any]]:
    """Every segment of ``rollout`` as an output; weights and reasons exactly as the TRL path's
    :func:`~vrag_trainer.ggpo.training_rows` decides them. A rollout without one generated token
    yields a single empty-loss row so verl's batch keeps its shape."""
    suffix = f"::{rollout_uid}" + ("" if rollout.usable else "::skip")
    rows = training_rows([rollout], algorithm)
    if not rows:
        empty = Segment(input_ids=[0, 0], loss_mask=[0, 0], logprobs=[float("nan")] * 2, prompt_len=1)
        return [
            segment_to_output(
                empty,
                reward=rollout.reward,
                weight=0,
                reason=rollout.error or "no generated token",
                prompt_length=prompt_length,
                response_length=response_length,
                group_suffix=suffix,
                rollout=rollout,
            )
        ]
    return [
        segment_to_output(
            row.segment,
            reward=rollout.reward,
            weight=row.weight,
            reason=row.reason,
            prompt_length=prompt_length,
            response_length=response_length,
            group_suffix=suffix,
            rollout=rollout,
        )
        for row in rows
    ]


@dataclass
class RolloutContext:
    """What every rollout of a worker shares: the run's config and its judge."""

    cfg: TrainConfig
    judge: Any

    @classmethod
    def from_trainer_config(cls, config: Any) -> RolloutContext:
        from vrag_desktop.core.paths import resolve_data_dir
        from vrag_trainer.rewards import RunJudge

        section = config.get("vrag") if hasattr(config, "get") else None
        if not section:
            raise ValueError("the verl config has no `vrag` section: generate it with `vrag_trainer verl`")
        data = section.get("train_config")
        if data is None and section.get("config_file"):
            data = json.loads(Path(str(section["config_file"])).read_text(encoding="utf-8"))
        if hasattr(data, "items") and not isinstance(data, dict):
            from omegaconf import OmegaConf  # verl's configs are OmegaConf objects

            data = OmegaConf.to_container(data, resolve=True)
        cfg = TrainConfig.from_mapping(data)  # type: ignore[arg-type]
        if not cfg.search_url:
            raise ValueError("search_url: a verl run needs a search server every node can reach")
        return cls(cfg, RunJudge(cfg.judge, resolve_data_dir(cfg.data_dir or None)))


async def run_agent(
    ctx: RolloutContext,
    agent: str,
    processor: Any,
    server_manager: Any,
    sampling_params: Mapping[str, Any],
    row: Mapping[str, Any],
    *,
    prompt_length: int,
    response_length: int,
    searcher: Any = None,
) -> list[dict[str, Any]]:
    """One rollout of ``agent`` on a verl row, as output dicts (one per segment)."""
    from vrag_desktop.core.agents.searchers import HttpSearcher
    from vrag_desktop.core.eval.reward import RewardWeights
    from vrag_trainer.rollout import RolloutSpec, run_rollout

    cfg = ctx.cfg
    item, golden, index = item_from_row(row)
    rollout_uid = uuid.uuid4().hex[:12]
    gen = ServerGenerator(server_manager, sampling_params, rollout_uid)
    spec = RolloutSpec(
        agent,
        processor,
        gen,
        searcher or (lambda: HttpSearcher(cfg.search_url)),
        Limits(cfg.max_model_len, cfg.max_response_length, cfg.max_images),
        max_turns=cfg.max_turns,
        top_k=cfg.search_top_k,
        temperature=float(sampling_params.get("temperature", cfg.temperature)),
        weights=RewardWeights(cfg.reward.judge, cfg.reward.format, cfg.reward.ndcg),
    )
    rollout, _ = await run_rollout(spec, item, golden, index, judge=ctx.judge)
    outs = rollout_outputs(
        rollout,
        cfg.algorithm,
        prompt_length=prompt_length,
        response_length=response_length,
        rollout_uid=rollout_uid,
    )
    for o in outs:
        o["extra_fields"]["generate_seconds"] = gen.seconds
        o["extra_fields"]["rollout_seconds"] = rollout.seconds
    return outs


_CONTEXT: RolloutContext | None = None


def _install() -> None:
    """Define and register the agent-loop classes (only where verl is installed)."""
    from verl.experimental.agent_loop.agent_loop import (  # type: ignore[import-not-found,unused-ignore]
        AgentLoopBase,
        AgentLoopMetrics,
        AgentLoopOutput,
        register,
    )

    from vrag_trainer.verl.loss import register as register_losses

    register_losses()

    class _AgentLoop(AgentLoopBase):  # type: ignore[misc,valid-type]
        agent = "vrag"

        async def run(self, sampling_params: dict[str, Any], **kwargs: Any) -> Any:
            global _CONTEXT
            if _CONTEXT is None:
                _CONTEXT = RolloutContext.from_trainer_config(self.config)
            rollout_cfg = self.config.actor_rollout_ref.rollout
            outs = await run_agent(
                _CONTEXT,
                self.agent,
                self.processor,
                self.server_manager,
                sampling_params,
                kwargs,
                prompt_length=int(rollout_cfg.prompt_length),
                response_length=int(rollout_cfg.response_length),
            )
            built = []
            for o in outs:
                metrics = AgentLoopMetrics(generate_sequences=o["extra_fields"]["generate_seconds"])
                built.append(AgentLoopOutput(metrics=metrics, **o))
            return built if self.agent == "vimrag" else built[0]

    for name, agent, loop in (
        ("VragAgentLoop", "vrag", "vrag_agent"),
        ("VimragAgentLoop", "vimrag", "vimrag_agent"),
    ):
        cls = type(name, (_AgentLoop,), {"agent": agent, "__module__": __name__, "__qualname__": name})
        globals()[name] = register(loop)(cls)


if importlib.util.find_spec("verl") is not None and importlib.util.find_spec("verl.experimental") is not None:
    _install()
