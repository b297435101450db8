"""DAPO's options (issue 30, item 2), each off by default: dynamic sampling in real tiny-model GRPO
runs (a group whose rewards are all equal is dropped and a new prompt rolled out in its place,
counted; a step with no group left at the budget is skipped, said in the log, with no update), and
the maths of the soft overlong punishment and the clip-higher mapping to TRL and verl."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from test_training import _changed, _config, _weights, vrag_script
from vrag_trainer import runner
from vrag_trainer.policy import Segment
from vrag_trainer.rollout import Rollout
from vrag_trainer.sampling import overlong_penalty, reply_lengths, shape_overlong
from vrag_trainer.trl_trainer import grpo_args
from vrag_trainer.verl.config import unsupported, verl_settings

from vrag_desktop.core.eval.reward import RewardParts
from vrag_desktop.core.training.config import ConfigError, TrainConfig
from vrag_desktop.core.training.rundir import TrainRun


def _run(
    tmp_path: Path, fixtures: tuple[Any, ...], right: Any, rounds: int, **over: Any
) -> tuple[TrainRun, list[Any]]:
    model, dataset, data, url = fixtures
    sampling = {"enabled": True, "max_resample_rounds": rounds}
    cfg = _config(model, dataset, data, url, max_steps=1, dynamic_sampling=sampling, **over)
    steps: list[Any] = []
    rc = runner.start(
        cfg,
        str(tmp_path / "run"),
        generator=lambda _m, p: vrag_script(p, right),
        on_step=lambda _t, rollouts, rows: steps.append((list(rollouts), list(rows))),
    )
    assert rc == runner.EXIT_OK
    return TrainRun.open(tmp_path / "run"), steps


def test_uniform_groups_are_filtered_and_resampled(  # type: ignore[no-untyped-def]
    tiny_model_dir, dataset_file, toy_data, search_url, tmp_path
) -> None:
    # Alpha's first two answers are both right (a uniform group); every other group alternates
    right = lambda topic, k: k <= 2 or k % 2 == 1 if topic == "Alpha" else k % 2 == 1  # noqa: E731
    run, steps = _run(tmp_path, (tiny_model_dir, dataset_file, toy_data, search_url), right, rounds=2)
    (rollouts, rows), = steps  # fmt: skip
    groups = {r.group for r in rollouts}
    assert len(rollouts) == 6 and len(groups) == 3  # two asked for, one resampled in round 1
    assert max(groups) >= 2  # the resampled group has its own id, even for a prompt drawn again
    trained = {rollouts[row.rollout].group for row in rows}
    assert len(trained) == 2 and all(row.weight for row in rows)
    uniform = groups - trained
    assert [r.uid for r in rollouts if r.group in uniform] == ["q1", "q1"]  # Alpha's group
    for g in trained:
        assert len({r.reward for r in rollouts if r.group == g}) == 2
    (m,) = run.metrics()
    assert m["groups_filtered"] == 1 and m["resample_rounds"] == 1 and m["skipped_steps"] == 0
    assert m["grad_norm"] > 0 and m["segments"] == 4
    assert "skipped" not in run.log_path.read_text(encoding="utf-8")


def test_a_step_with_no_varied_group_at_the_budget_is_skipped(  # type: ignore[no-untyped-def]
    tiny_model_dir, dataset_file, toy_data, search_url, tmp_path
) -> None:
    # overlong shaping on too: every reply is past 256 - 250 tokens, so each loses the same share
    overlong = {"enabled": True, "buffer": 250, "penalty": 0.5}
    fixtures = (tiny_model_dir, dataset_file, toy_data, search_url)
    run, steps = _run(tmp_path, fixtures, lambda _t, _k: True, rounds=1, overlong=overlong)
    (rollouts, _rows), = steps  # fmt: skip
    assert len(rollouts) == 8  # 2 groups, then 2 more in the one resample round: all right
    penalties = [-0.5 * (max(reply_lengths(r.segments[0])) - 6) / 250 for r in rollouts]
    for r, p in zip(rollouts, penalties, strict=True):  # format 0.1 + judge 0.7 + NDCG 0.2, shaped
        assert p < 0 and r.reward == pytest.approx(0.1 + 0.7 + 0.2 * r.parts.ndcg + p)
    by_round = [sum(penalties[:4]) / 4, sum(penalties[4:]) / 4]  # logged once a round
    (m,) = run.metrics()
    assert m["groups_filtered"] == 4 and m["resample_rounds"] == 1 and m["skipped_steps"] == 1
    assert m["reward/overlong"] == pytest.approx(sum(by_round) / 2)
    assert m["grad_norm"] == 0 and "kl" not in m and "clip_fraction" not in m  # no loss was computed
    log = run.log_path.read_text(encoding="utf-8")
    assert "step 1 skipped: every group's rollouts got the same reward" in log
    assert "after 1 resample round(s); no update was made" in log
    assert run.state()["status"] == "finished"
    assert _changed(_weights(tiny_model_dir), _weights(run.checkpoint_dir(1))) == 0


def _rollout(loss_mask: list[int], reward: float = 1.0, search_errors: int = 0) -> Rollout:
    seg = Segment(input_ids=[0] * len(loss_mask), loss_mask=loss_mask)
    parts = RewardParts(format=1.0, judge=True, ndcg=0.0)
    return Rollout(
        "u", 0, [seg], "a", False, parts, reward, (), [], [], None, 0.0, search_errors=search_errors
    )


def test_overlong_penalty_is_dapos_soft_punishment() -> None:
    # max 100, buffer 20: free up to 80 tokens, then linear to -penalty at 100, and -penalty beyond
    assert [overlong_penalty(n, 100, 20, 1.0) for n in (10, 80, 85, 90, 100, 130)] == [
        0.0, 0.0, -0.25, -0.5, -1.0, -1.0,
    ]  # fmt: skip
    assert overlong_penalty(90, 100, 20, 0.5) == -0.25
    # replies are the runs of generated tokens; the longest one is judged against the per-turn limit
    assert reply_lengths(Segment(loss_mask=[0, 0, 1, 1, 1, 0, 0, 1, 1])) == [3, 2]
    long_, short, broken = (
        _rollout([0] + [1] * 90 + [0] * 5 + [1] * 10),
        _rollout([1] * 50),
        _rollout([1] * 99, 0.5, 1),
    )
    assert shape_overlong([long_, short, broken], 100, 20, 1.0) == [-0.5, 0.0]
    assert (long_.reward, short.reward, broken.reward) == (0.5, 1.0, 0.5)  # a spoilt rollout is untouched


def test_clip_higher_maps_to_trl_and_verl_and_the_options_default_off(tmp_path: Path) -> None:
    base = TrainConfig(model="m", dataset="d")
    assert not base.dynamic_sampling.enabled and not base.overlong.enabled and base.clip_ratio_high == 0
    args = grpo_args(base, str(tmp_path), use_cpu=True, bf16=False, logging_dir=None)
    assert args.epsilon == args.epsilon_high == 0.2  # symmetric, the original's
    high = base.with_changes(clip_ratio_high=0.28)
    args = grpo_args(high, str(tmp_path), use_cpu=True, bf16=False, logging_dir=None)
    assert (args.epsilon, args.epsilon_high) == (0.2, 0.28)
    actor = verl_settings(high, tmp_path, train_file="t.parquet")["actor_rollout_ref"]["actor"]
    assert (actor["clip_ratio_low"], actor["clip_ratio_high"]) == (0.2, 0.28)
    actor = verl_settings(base, tmp_path, train_file="t.parquet")["actor_rollout_ref"]["actor"]
    assert actor["clip_ratio_high"] == 0.2
    with pytest.raises(ConfigError, match=r"clip_ratio_high: must be 0 .* or at least clip_ratio"):
        base.with_changes(clip_ratio_high=0.1)
    with pytest.raises(ConfigError, match=r"overlong\.buffer: must be below max_response_length"):
        TrainConfig.from_mapping(
            {"model": "m", "dataset": "d", "overlong": {"enabled": True, "buffer": 4096}}
        )
    with pytest.raises(ConfigError, match=r"dynamic_sampling.max_resample: unknown field \(did you mean"):
        TrainConfig.from_mapping({"model": "m", "dataset": "d", "dynamic_sampling": {"max_resample": 2}})
    on = TrainConfig.from_mapping(
        {"model": "m", "dataset": "d", "overlong": {"enabled": True, "buffer": 128, "penalty": 0.5}}
    )
    assert (on.overlong.buffer, on.overlong.penalty) == (128, 0.5)
    assert "not mapped to verl" in (unsupported(on) or "")
