"""The verl agent loop's verl-free parts with real rollouts: outputs per segment, GGPO weights,
the rollout-server generator adapter and the row reader."""

from __future__ import annotations

import asyncio
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest
from conftest import ScriptedGenerator
from vrag_trainer.data import load_train_data
from vrag_trainer.policy import Limits
from vrag_trainer.rewards import RunJudge
from vrag_trainer.rollout import Rollout, RolloutSpec, run_rollout
from vrag_trainer.verl.agent_loop import (
    RolloutContext,
    ServerGenerator,
    item_from_row,
    rollout_outputs,
    run_agent,
)

from vrag_desktop.core.agents.searchers import HttpSearcher
from vrag_desktop.core.endpoints.base import EndpointError
from vrag_desktop.core.training.config import JudgeConfig, TrainConfig


def _rollout(processor: Any, gen: Any, url: str, toy_data: Path, dataset_file: Path, agent: str) -> Rollout:
    cfg = TrainConfig(model="m", dataset=str(dataset_file), corpora=("toy",), data_dir=str(toy_data))
    data = load_train_data(cfg, toy_data)
    spec = RolloutSpec(agent, processor, gen, lambda: HttpSearcher(url), Limits(8192, 256, 10))
    r, _ = asyncio.run(
        run_rollout(spec, data.items[0], data.golden[0], 0, judge=RunJudge(JudgeConfig(kind="exact")))
    )
    return r


def test_vrag_rollout_becomes_one_output_with_its_images(
    processor, search_url, toy_data, dataset_file
) -> None:  # type: ignore[no-untyped-def]
    replies = [
        "<search>revenue Alpha Corp</search>",
        "<bbox>[0, 0, 150, 100]</bbox>",
        "<answer>42 million dollars</answer>",
    ]
    gen = ScriptedGenerator(processor, lambda _t, _n, call: replies[min(call, 3) - 1])
    r = _rollout(processor, gen, search_url, toy_data, dataset_file, "vrag")
    assert r.error is None and r.correct
    (out,) = rollout_outputs(r, "grpo", prompt_length=8192, response_length=10240, rollout_uid="x")
    seg = r.segments[0]
    assert out["prompt_ids"] == seg.input_ids[: seg.prompt_len]
    assert out["prompt_ids"] + out["response_ids"] == seg.input_ids
    assert out["response_mask"] == seg.loss_mask[seg.prompt_len :] and out["response_mask"][0] == 1
    assert len(out["multi_modal_data"]["images"]) == seg.n_images == 2  # the page and its crop
    image_pad = processor.tokenizer.convert_tokens_to_ids("<|image_pad|>")
    assert all(
        m == 0 for t, m in zip(out["response_ids"], out["response_mask"], strict=True) if t == image_pad
    )
    assert out["reward_score"] == pytest.approx(r.reward) and out["response_logprobs"] is None
    assert out["extra_fields"]["group_suffix"] == "::x" and out["extra_fields"]["ggpo_weight"] == 1
    # a prompt_length shorter than the context moves the rest into the response, masked
    (short,) = rollout_outputs(r, "grpo", prompt_length=10, response_length=10240, rollout_uid="x")
    assert len(short["prompt_ids"]) == 10 and short["response_mask"][: seg.prompt_len - 10] == [0] * (
        seg.prompt_len - 10
    )
    with pytest.raises(ValueError, match="max_response_length"):
        rollout_outputs(r, "grpo", prompt_length=10, response_length=20, rollout_uid="x")


def _vimrag_reply(text: str, n_images: int, call: int) -> str:
    calls = {
        1: '{"name": "add_search_node", "arguments": {"id": "n1", "parent_ids": ["root"], "query": "Alpha revenue"}}',
        2: '{"name": "summarize_and_memorize", "arguments": {"summarize": "revenue page", "memorize": '
        '[{"information_id": "Picture 1", "is_useful": true, "key_timestamp": [], "priority_score": 5}]}}',
        3: '{"name": "add_search_node", "arguments": {"id": "n2", "parent_ids": ["root"], "query": "Beta bikes"}}',
        4: '{"name": "summarize_and_memorize", "arguments": {"summarize": "nothing", "memorize": [{"information_id": '
        '"Picture 1", "is_useful": false, "key_timestamp": [], "priority_score": 1}]}}',
    }
    default = (
        '{"name": "add_answer_node", "arguments": {"parent_ids": ["n1"], "answer": "42 million dollars"}}'
    )
    return f"<tool_call>{calls.get(call, default)}</tool_call>"


def test_vimrag_ggpo_outputs_one_row_per_node_with_the_graph_mask(
    processor, search_url, toy_data, dataset_file
) -> None:  # type: ignore[no-untyped-def]
    r = _rollout(
        processor, ScriptedGenerator(processor, _vimrag_reply), search_url, toy_data, dataset_file, "vimrag"
    )
    outs = rollout_outputs(r, "ggpo", prompt_length=8192, response_length=10240, rollout_uid="k")
    assert [o["extra_fields"]["node_id"] for o in outs] == ["n1", "n2", "answer"]
    assert [o["extra_fields"]["ggpo_weight"] for o in outs] == [1, 0, 1]  # n2 is off the answer path
    assert "off the answer path" in outs[1]["extra_fields"]["ggpo_mask_reason"]
    assert sum(outs[1]["response_mask"]) == 0 and sum(outs[0]["response_mask"]) > 0
    assert {o["reward_score"] for o in outs} == {r.reward}
    grpo = rollout_outputs(r, "grpo", prompt_length=8192, response_length=10240, rollout_uid="k")
    assert [o["extra_fields"]["ggpo_weight"] for o in grpo] == [1, 1, 1]


class FakeServer:
    """verl's AsyncLLMServerManager.generate, scripted: records what the adapter sends."""

    def __init__(self, processor: Any, replies: list[str]) -> None:
        self.tok = processor.tokenizer
        self.replies = replies
        self.calls: list[dict[str, Any]] = []

    async def generate(
        self,
        request_id: str,
        *,
        prompt_ids: list[int],
        sampling_params: dict[str, Any],
        image_data: Any = None,
    ) -> Any:
        self.calls.append(
            dict(request_id=request_id, prompt_ids=prompt_ids, params=sampling_params, images=image_data)
        )
        ids = [
            *self.tok.encode(self.replies[len(self.calls) - 1], add_special_tokens=False),
            self.tok.eos_token_id,
        ]
        return SimpleNamespace(token_ids=ids, log_probs=[-0.5] * len(ids), stop_reason="completed")


def test_run_agent_drives_the_rollout_server(processor, search_url, toy_data, dataset_file) -> None:  # type: ignore[no-untyped-def]
    cfg = TrainConfig(
        model="m", dataset=str(dataset_file), search_url=search_url, judge=JudgeConfig(kind="exact")
    )
    ctx = RolloutContext(cfg, RunJudge(cfg.judge))
    server = FakeServer(processor, ["<answer>42 million dollars</answer>"])
    row = {
        "extra_info": {
            "question": "What was the revenue of Alpha Corp in 2023?",
            "answer": "42 million dollars",
            "index": 3,
        },
        "reward_model": {"ground_truth": "42 million dollars"},
        "file_name": "alpha.pdf",
        "reference_page": np.array([1]),
        "raw_prompt": [],
    }
    outs = asyncio.run(
        run_agent(
            ctx,
            "vrag",
            processor,
            server,
            {"temperature": 1.0, "top_p": 1.0},
            row,
            prompt_length=8192,
            response_length=10240,
        )
    )
    (out,) = outs
    call = server.calls[0]
    assert call["params"]["max_tokens"] == cfg.max_response_length and call["params"]["top_p"] == 1.0
    assert call["prompt_ids"] == out["prompt_ids"] and call["images"] is None
    assert out["response_logprobs"] == [-0.5] * len(out["response_ids"])
    assert out["extra_fields"]["reward_format"] == 0.0  # answered without searching: the original's rule


def test_server_generator_sends_images_and_refuses_pixels_without_them(processor) -> None:  # type: ignore[no-untyped-def]
    server = FakeServer(processor, ["x", "y"])
    gen = ServerGenerator(server, {"temperature": 1.0}, "rid")
    with pytest.raises(EndpointError, match="images"):
        asyncio.run(gen.generate([1, 2], [object()], [object()], max_new_tokens=4, temperature=1.0))
    out = asyncio.run(
        gen.generate([1, 2], [object()], [object()], max_new_tokens=64, temperature=0.7, images=["img"])
    )
    assert server.calls[0]["images"] == ["img"] and server.calls[0]["request_id"] == "rid"
    assert server.calls[0]["params"] == {"temperature": 0.7, "max_tokens": 64} and out.finish == "stop"


def test_item_from_row_reads_numpy_rows() -> None:
    item, golden, index = item_from_row(
        {
            "extra_info": {
                "question": "q",
                "answer": "a",
                "index": np.int64(4),
                "reference_page": np.array([2, 3]),
            },
            "file_name": "doc.pdf",
        }
    )
    assert (item.query, item.reference_answer, item.reference_page, index) == ("q", "a", (2, 3), 4)
    assert golden == ("doc_2", "doc_3")
    with pytest.raises(ValueError, match="question"):
        item_from_row({"extra_info": {}})
