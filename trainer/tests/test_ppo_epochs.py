"""Several updates per batch of rollouts (``ppo_epochs``, TRL's ``num_iterations``): with 2 the
rollouts are made once for two optimiser steps, and the second step's ratio π/π_old moves, so the
clip acts (``clip_fraction`` > 0) for GRPO's token-level and GGPO's sequence-level objective; with 1
(the original's setting) every step is on fresh rollouts and the ratio is 1 (no clipping)."""

from __future__ import annotations

from typing import Any

import pytest
from test_training import _config, vimrag_script, vrag_script
from vrag_trainer import runner

from vrag_desktop.core.training.rundir import TrainRun


@pytest.mark.parametrize(
    "algorithm,agent,ppo_epochs", [("grpo", "vrag", 1), ("grpo", "vrag", 2), ("ggpo", "vimrag", 2)]
)
def test_ppo_epochs_reuse_the_rollouts_and_the_clip_acts(  # type: ignore[no-untyped-def]
    algorithm, agent, ppo_epochs, tiny_model_dir, dataset_file, toy_data, search_url, tmp_path
) -> None:
    cfg = _config(
        tiny_model_dir, dataset_file, toy_data, search_url,
        algorithm=algorithm, agent=agent, max_turns=3 if agent == "vrag" else 6,
        ppo_epochs=ppo_epochs, learning_rate=2e-2,  # high: the policy moves far in one update
    )  # fmt: skip
    script = vrag_script if agent == "vrag" else vimrag_script
    batches: list[int] = []  # the step at which rollouts were made

    def on_step(trainer: Any, _rollouts: Any, _rows: Any) -> None:
        batches.append(int(trainer.state.global_step) + 1)

    rc = runner.start(cfg, str(tmp_path / "run"), generator=lambda _m, p: script(p), on_step=on_step)
    assert rc == runner.EXIT_OK
    rows = TrainRun.open(tmp_path / "run").metrics()
    assert [r["step"] for r in rows] == [1, 2]
    clip = [r["clip_fraction"] for r in rows]
    assert clip[0] == 0.0  # the first update of a batch: π = π_old
    for r in rows:  # the batch's reward is logged with each of its updates
        assert 0.0 < r["reward"] < 1.0 and r["grad_norm"] > 0, r
    if ppo_epochs == 1:
        assert batches == [1, 2] and clip[1] == 0.0
        assert all("ppo_epoch" not in r for r in rows)
    else:
        assert batches == [1]  # one batch of rollouts for both updates
        assert [r["ppo_epoch"] for r in rows] == [1.0, 2.0]
        assert rows[1]["reward"] == rows[0]["reward"] and "rollout_seconds" not in rows[1]
        assert clip[1] > 0.0, rows[1]
