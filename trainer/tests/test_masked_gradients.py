"""The loss the trainer uses gives exactly zero gradient to every token the environment wrote (the
prompt, search results, page images, crops) and to GGPO's masked segments, and a non-zero one to
every token the policy wrote: GRPO (VRAG: search, crop, answer) and GGPO (VimRAG graph nodes).

Real runs (``runner.start``: rollouts with a scripted policy against the real search server, rows,
micro-batches, TRL's loss, backward), two updates on one batch (``ppo_epochs`` 2): the first with
ratio 1, the second against the old log-probs, with the policy moved and some ratios clipped.

Where the gradient is read: the backbone's last hidden state (the final norm's output). The LM head
turns row ``p`` of it into the logits that score token ``p + 1`` and nothing else reads it, so its
gradient at ``p`` is exactly the gradient of token ``p + 1``'s term of the loss (through the
logits). Gradients at the input embeddings would not show the mask: an observation token is read,
through attention, by the policy's later tokens, and rightly gets gradient that way.
"""

from __future__ import annotations

import itertools
from typing import Any

import pytest
import torch
from conftest import ScriptedGenerator
from test_training import ANSWERS, _config, _topic, vimrag_script
from vrag_trainer import runner
from vrag_trainer.batch import chunks


def vrag_crop_script(processor: Any) -> ScriptedGenerator:
    """Search (a page image comes back), crop it (the crop comes back), answer: right and wrong in
    turn per question, so every group's advantages are ±."""
    seen: dict[str, int] = {}

    def reply(text: str, _n_images: int, _call: int) -> str:
        topic = _topic(text)
        turn = text.count("<|im_start|>assistant")
        if turn == 1:
            return f"<think>look it up</think><search>{topic} facts</search>"
        if turn == 2:
            return "<think>zoom in</think><bbox>[0, 0, 150, 100]</bbox>"
        seen[topic] = seen.get(topic, 0) + 1
        return f"<answer>{ANSWERS[topic] if seen[topic] % 2 else 'no idea'}</answer>"

    return ScriptedGenerator(processor, reply)


class _Capture:
    """Keeps the final norm's output of every forward pass that builds a graph (the loss passes;
    the reference and old log-prob passes run without gradients) with its gradient retained."""

    def __init__(self) -> None:
        self.hidden: list[torch.Tensor] = []
        self.rows: list[Any] = []
        self.handle: Any = None

    def on_step(self, trainer: Any, _rollouts: Any, rows: Any) -> None:
        self.rows.append(rows)
        if self.handle is None:
            model = trainer.accelerator.unwrap_model(trainer.model)
            norms = [m for n, m in model.named_modules() if n.endswith("language_model.norm")]
            assert len(norms) == 1, [n for n, _ in model.named_modules() if n.endswith("norm")]
            self.handle = norms[0].register_forward_hook(self._keep)

    def _keep(self, _module: Any, _inputs: Any, output: torch.Tensor) -> None:
        if output.requires_grad:
            output.retain_grad()
            self.hidden.append(output)


def _trained_targets(rows: list[Any], width: int) -> tuple[torch.Tensor, list[int]]:
    """(rows, width) booleans: does position ``p`` predict a trained token (``p + 1`` in the loss)?
    Rows in the micro-batch's order, laid out as the collator does (prompt left-padded, the rest
    right-padded, so a row is shifted by its prompt padding); also each row's shift."""
    p_len = max(r.segment.prompt_len for r in rows)
    want = torch.zeros((len(rows), width), dtype=torch.bool)
    shifts = []
    for i, r in enumerate(rows):
        shift = p_len - r.segment.prompt_len
        shifts.append(shift)
        for j, m in enumerate(r.segment.loss_mask):
            if m and r.weight and j > 0:
                want[i, shift + j - 1] = True
    return want, shifts


def _runs(mask: list[int]) -> list[tuple[int, int]]:
    """The [start, end) spans of 1s: one per policy turn."""
    out, start = [], None
    for j, m in enumerate([*mask, 0]):
        if m and start is None:
            start = j
        elif not m and start is not None:
            out.append((start, j))
            start = None
    return out


@pytest.mark.parametrize("algorithm,agent", [("grpo", "vrag"), ("ggpo", "vimrag")])
def test_masked_tokens_get_exactly_zero_gradient_and_the_policys_tokens_do_not(  # type: ignore[no-untyped-def]
    algorithm, agent, tiny_model_dir, dataset_file, toy_data, search_url, processor, tmp_path
) -> None:
    cfg = _config(
        tiny_model_dir, dataset_file, toy_data, search_url,
        algorithm=algorithm, agent=agent, max_turns=4 if agent == "vrag" else 6,
        ppo_epochs=2,
    )  # fmt: skip
    script = vrag_crop_script if agent == "vrag" else vimrag_script
    cap = _Capture()
    rc = runner.start(cfg, str(tmp_path / "run"), generator=lambda _m, p: script(p), on_step=cap.on_step)
    assert rc == runner.EXIT_OK
    # one batch of rollouts, two updates on it, one loss pass per micro-batch (none is skipped:
    # GGPO weighs micro-batches by rows, and every GRPO row here has loss tokens)
    assert len(cap.rows) == 1
    rows = cap.rows[0]
    parts = chunks(rows, cfg.micro_batch_rows)  # the micro-batches, as the trainer makes them
    assert len(parts) > 1 and len(cap.hidden) == 2 * len(parts)
    pad = processor.tokenizer.convert_tokens_to_ids("<|image_pad|>")

    # the rollouts are multi-turn with observations between the policy's turns, images included
    assert all(r.advantage != 0 for r in rows)
    kept = [r for r in rows if r.weight]
    if agent == "vrag":
        assert len(rows) == 4 and len(kept) == 4
        for r in rows:
            seg = r.segment
            turns = _runs(seg.loss_mask)
            assert len(turns) == 3 and seg.n_images == 2  # search → page, crop → crop, answer
            for (_, end), (start, _) in itertools.pairwise(turns):
                assert pad in seg.input_ids[end:start]  # the page, then the crop, between the turns
    else:
        assert len(kept) < len(rows), "GGPO masked no segment"
        assert any(pad in r.segment.input_ids[a:b] for r in rows for (_, a), (b, _) in _pairs(r))

    trained = 0
    for n, hidden in enumerate(cap.hidden):
        update, part = n // len(parts) + 1, parts[n % len(parts)]
        assert hidden.grad is not None
        norm = hidden.grad.detach().float().norm(dim=-1)  # (rows, positions)
        assert norm.shape[0] == len(part)
        want, shifts = _trained_targets(part, norm.size(1))
        zero = norm == 0
        leak = (~zero & ~want).nonzero().tolist()
        wrong_zero = (zero & want).nonzero().tolist()
        assert not leak, f"update {update}: gradient on masked positions {leak[:10]}"
        assert not wrong_zero, f"update {update}: no gradient on the policy's tokens {wrong_zero[:10]}"
        for i, r in enumerate(part):  # so every image token the environment inserted is at 0
            ids = r.segment.input_ids
            assert all(norm[i, shifts[i] + j - 1] == 0 for j in range(1, len(ids)) if ids[j] == pad)
        trained += int(want.sum())
    assert trained == 2 * sum(sum(r.segment.loss_mask) for r in kept)


def _pairs(row: Any) -> list[tuple[tuple[int, int], tuple[int, int]]]:
    turns = _runs(row.segment.loss_mask)
    return list(itertools.pairwise(turns))
