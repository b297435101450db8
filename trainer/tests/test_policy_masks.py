"""Token-in/token-out recording, checked token by token against hand-built trajectories: the
VRAG agent's text, page-image and crop turns, VimRAG's one segment per graph node, and limits."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest
from conftest import ScriptedGenerator
from vrag_trainer.data import load_train_data
from vrag_trainer.policy import Limits, PolicyChat, Segment
from vrag_trainer.rewards import RunJudge
from vrag_trainer.rollout import Rollout, RolloutSpec, run_rollout

from vrag_desktop.core.agents.searchers import HttpSearcher
from vrag_desktop.core.training.config import JudgeConfig, TrainConfig


def _data(toy_data: Path, dataset_file: Path) -> Any:
    cfg = TrainConfig(model="m", dataset=str(dataset_file), corpora=("toy",), data_dir=str(toy_data))
    return load_train_data(cfg, toy_data)


def _rollout(
    processor: Any, gen: Any, search_url: str, data: Any, agent: str, k: int = 0, limits: Limits | None = None
) -> Rollout:
    spec = RolloutSpec(agent, processor, gen, lambda: HttpSearcher(search_url), limits or Limits(4096, 64, 5))
    judge = RunJudge(JudgeConfig(kind="exact"))
    rollout, _ = asyncio.run(run_rollout(spec, data.items[k], data.golden[k], k, judge=judge))
    return rollout


def _expected_mask(processor: Any, ids: list[int]) -> list[int]:
    """Hand rule: 1 from the token after each ``<|im_start|>assistant\\n`` through its ``<|im_end|>``."""
    tok = processor.tokenizer
    start = tok.convert_tokens_to_ids("<|im_start|>")
    end = tok.convert_tokens_to_ids("<|im_end|>")
    header = [start, *tok.encode("assistant\n", add_special_tokens=False)]
    mask, inside, i = [0] * len(ids), False, 0
    while i < len(ids):
        if not inside and ids[i : i + len(header)] == header:
            i += len(header)
            inside = True
            continue
        if inside:
            mask[i] = 1
            if ids[i] == end:
                inside = False
        i += 1
    return mask


def test_vrag_text_image_and_crop_turns_token_by_token(processor, search_url, toy_data, dataset_file) -> None:  # type: ignore[no-untyped-def]
    replies = [
        "<think>find it</think><search>revenue Alpha Corp</search>",
        "<bbox>[0, 0, 150, 100]</bbox>",
        "<answer>42 million dollars</answer>",
    ]
    gen = ScriptedGenerator(processor, lambda _t, _n, call: replies[call - 1])
    data = _data(toy_data, dataset_file)
    policy_box: dict[str, PolicyChat] = {}
    real_init = PolicyChat.__init__

    def spy(self: PolicyChat, *a: Any, **k: Any) -> None:
        real_init(self, *a, **k)
        policy_box["p"] = self

    PolicyChat.__init__ = spy  # type: ignore[method-assign]
    try:
        r = _rollout(processor, gen, search_url, data, "vrag")
    finally:
        PolicyChat.__init__ = real_init  # type: ignore[method-assign]
    policy = policy_box["p"]
    assert r.error is None and r.answer == "42 million dollars"
    assert (
        r.parts.format == 1.0
        and r.parts.judge is True
        and r.reward == pytest.approx(0.8 + 0.2 * r.parts.ndcg)
    )
    assert len(r.segments) == 1  # VRAG: one sequence per rollout
    seg = r.segments[0]
    assert seg.replies == replies
    assert seg.n_images == 2  # the page and the crop, both kept for the training pass

    # hand-built: the agent's final conversation, rendered and tokenised in one go
    request = policy._last_request
    assert request is not None
    conv = [*request, {"role": "assistant", "content": replies[-1]}]
    from vrag_desktop.core.endpoints.hf_messages import openai_to_hf_messages

    hf, images = openai_to_hf_messages(conv, None)
    text = processor.apply_chat_template(hf, tokenize=False, add_generation_prompt=False)
    assert text.endswith("<|im_end|>\n")
    want = processor(text=[text[: -len("\n")]], images=images, return_tensors="pt")
    assert seg.input_ids == want["input_ids"][0].tolist()
    assert seg.loss_mask == _expected_mask(processor, seg.input_ids)
    # every generated token is a policy token, exactly: the three replies and their eos
    gen_ids = [t for t, m in zip(seg.input_ids, seg.loss_mask, strict=True) if m]
    eos = processor.tokenizer.eos_token_id
    want_gen = [
        t for rep in replies for t in [*processor.tokenizer.encode(rep, add_special_tokens=False), eos]
    ]
    assert gen_ids == want_gen
    # images: grids match the vision tokens in the sequence, pixels match the grids
    pad = processor.tokenizer.convert_tokens_to_ids("<|image_pad|>")
    merge = processor.image_processor.merge_size**2
    assert sum(int(g.prod()) // merge for g in seg.image_grid_thw) == seg.input_ids.count(pad)
    assert [int(p.shape[0]) for p in seg.pixel_values] == [int(g.prod()) for g in seg.image_grid_thw]
    assert (want["image_grid_thw"] == __import__("torch").stack(seg.image_grid_thw)).all()
    # observations are never trained
    assert seg.loss_mask[seg.prompt_len - 1] == 0 and seg.loss_mask[seg.prompt_len] == 1


def test_a_reply_cut_by_length_gets_a_masked_end_of_turn(processor) -> None:  # type: ignore[no-untyped-def]
    tok = processor.tokenizer

    class Cut:
        async def generate(self, prompt_ids: list[int], *a: Any, max_new_tokens: int, **k: Any) -> Any:
            from vrag_trainer.policy import Generated

            return Generated(tok.encode("<search>x", add_special_tokens=False), None, "length")

    policy = PolicyChat(processor, Cut(), Limits(4096, 16, 5))
    msgs: list[dict[str, Any]] = [{"role": "user", "content": "q"}]
    first = asyncio.run(policy.chat(msgs))
    msgs += [{"role": "assistant", "content": first.content}, {"role": "user", "content": "more"}]
    asyncio.run(policy.chat(msgs))
    seg = policy.segments[0]
    text = tok.decode(seg.input_ids)
    assert "<search>x<|im_end|>\n<|im_start|>user\nmore<|im_end|>\n<|im_start|>assistant\n" in text
    end = tok.convert_tokens_to_ids("<|im_end|>")
    cut_end = seg.input_ids.index(end, seg.prompt_len)
    assert seg.loss_mask[cut_end] == 0  # the policy never wrote that end-of-turn: not trained


def test_vision_tokens_the_policy_writes_are_cut(processor) -> None:  # type: ignore[no-untyped-def]
    tok = processor.tokenizer
    pad = tok.convert_tokens_to_ids("<|image_pad|>")

    class Rogue:
        async def generate(self, *a: Any, **k: Any) -> Any:
            from vrag_trainer.policy import Generated

            return Generated([*tok.encode("<answer>a", add_special_tokens=False), pad, pad], None, "length")

    policy = PolicyChat(processor, Rogue(), Limits(4096, 16, 5))
    out = asyncio.run(policy.chat([{"role": "user", "content": "q"}]))
    assert pad not in policy.segments[0].input_ids and out.content == "<answer>a"


def test_context_and_image_limits_end_the_rollout_at_a_turn_boundary(  # type: ignore[no-untyped-def]
    processor, search_url, toy_data, dataset_file
) -> None:
    replies = ["<search>revenue Alpha Corp</search>", "<search>Beta Oslo</search>", "<answer>x</answer>"]
    gen = ScriptedGenerator(processor, lambda _t, _n, call: replies[min(call, 3) - 1])
    data = _data(toy_data, dataset_file)
    r = _rollout(processor, gen, search_url, data, "vrag", limits=Limits(4096, 64, max_images=1))
    seg = r.segments[0]
    assert seg.truncated and seg.n_images == 1  # the second page was never appended
    pad = processor.tokenizer.convert_tokens_to_ids("<|image_pad|>")
    merge = processor.image_processor.merge_size**2
    assert sum(int(g.prod()) // merge for g in seg.image_grid_thw) == seg.input_ids.count(pad)
    assert r.answer is None and r.reward == 0.0 and r.error and "image limit" in r.error
    # context length: the prompt and the first reply fit, the first observation (a page: at least 4
    # image tokens, the vision markers and the turns' headers) does not
    prompt_len = len(gen.calls[0][0])
    limit = prompt_len + len(processor.tokenizer.encode(replies[0], add_special_tokens=False)) + 1 + 8
    gen2 = ScriptedGenerator(processor, lambda _t, _n, call: replies[min(call, 3) - 1])
    r2 = _rollout(processor, gen2, search_url, data, "vrag", limits=Limits(limit, 32, 5))
    assert r2.segments[0].truncated and r2.segments[0].n_images == 0 and "context length" in (r2.error or "")
    assert len(r2.segments[0].input_ids) <= limit


def _search(node: str, query: str) -> str:
    args = {"id": node, "parent_ids": ["root"], "query": query}
    return f"<tool_call>{json.dumps({'name': 'add_search_node', 'arguments': args})}</tool_call>"


def _vimrag_reply(text: str, n_images: int, call: int) -> str:
    if call == 1:
        return _search("n1", "Alpha revenue")
    if call == 2:
        return (
            '<tool_call>{"name": "summarize_and_memorize", "arguments": {"summarize": "revenue page", '
            '"memorize": [{"information_id": "Picture 1", "is_useful": true, "key_timestamp": [], '
            '"priority_score": 5}]}}</tool_call>'
        )
    if call == 3:
        return _search("n2", "Beta bikes")
    if call == 4:
        return (
            '<tool_call>{"name": "summarize_and_memorize", "arguments": {"summarize": "nothing", '
            '"memorize": [{"information_id": "Picture 1", "is_useful": false, "key_timestamp": [], '
            '"priority_score": 1}]}}</tool_call>'
        )
    args = {"parent_ids": ["n1"], "answer": "42 million dollars"}
    return f"<tool_call>{json.dumps({'name': 'add_answer_node', 'arguments': args})}</tool_call>"


def test_vimrag_yields_one_segment_per_graph_node(processor, search_url, toy_data, dataset_file) -> None:  # type: ignore[no-untyped-def]
    gen = ScriptedGenerator(processor, _vimrag_reply)
    data = _data(toy_data, dataset_file)
    r = _rollout(processor, gen, search_url, data, "vimrag", limits=Limits(8192, 256, 10))
    assert r.error is None, r.error
    assert [s.node_id for s in r.segments] == ["n1", "n2", "answer"]
    assert [len(s.replies) for s in r.segments] == [2, 2, 1]  # search + memorize share a node's segment
    assert r.answer_path == ["root", "n1", "answer"] and r.correct and r.parts.format == 1.0
    for seg in r.segments:
        assert seg.loss_mask == _expected_mask(processor, seg.input_ids)
        assert seg.prompt_len == seg.loss_mask.index(1)
    # each node's context is rebuilt: the answer segment starts from the linearised graph, not the chat
    assert (
        r.segments[2].input_ids[: r.segments[2].prompt_len]
        != r.segments[0].input_ids[: r.segments[2].prompt_len]
    )
    assert r.segments[0].retrieved and "alpha_1" in r.segments[0].retrieved[0]


def test_segments_are_plain_records() -> None:
    seg = Segment(input_ids=[1, 2, 3], loss_mask=[0, 1, 1])
    assert seg.generated_tokens == 2 and seg.n_images == 0
