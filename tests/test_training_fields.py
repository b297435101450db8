"""Every training-config field acts or is refused (issue 29, item 6): each field names the test that
shows it changing the run (or refusing it by name). A new field fails this test until it has one;
``UNPROVEN`` lists, honestly, the fields whose effect is wired but not yet shown by a test."""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

from vrag_desktop.core.training.config import TrainConfig

ROOT = Path(__file__).resolve().parents[1]
T = "trainer/tests/"
TRAINING = T + "test_training.py::test_real_steps_change_the_weights_and_write_the_run"
TRL_ARGS = T + "test_fields.py::test_trl_arguments_follow_the_config"
PLAN = "tests/test_training_plan.py::"
DAPO = T + "test_dapo.py::"
VAL = T + "test_validation.py::"
LORA = T + "test_lora.py::test_lora_grpo_trains_only_the_adapter_against_the_base_and_exports_both_ways"

FIELD_TESTS: dict[str, str] = {
    "algorithm": TRAINING,
    "agent": TRAINING,
    "model": TRAINING,
    "dataset": T + "test_data.py::test_unified_json_verl_parquet_and_app_datasets_read_the_same",
    "corpora": T
    + "test_run_lifecycle.py::test_items_outside_the_corpus_are_named_and_a_run_without_any_is_refused",
    "search_url": T + "test_run_lifecycle.py::test_a_search_server_that_goes_down_mid_rollout_stops_the_run",
    "data_dir": T + "test_data.py::test_unified_json_verl_parquet_and_app_datasets_read_the_same",
    "output_dir": PLAN + "test_the_data_layout_names_training_and_evaluations",
    "name": PLAN + "test_the_data_layout_names_training_and_evaluations",
    "seed": TRL_ARGS,
    "group_size": TRL_ARGS,
    "prompts_per_step": TRL_ARGS,
    "max_prompt_length": T
    + "test_fields.py::test_max_prompt_length_ends_a_trajectory_whose_prompt_is_longer",
    "max_response_length": T + "test_generation.py::test_grpo_args_hand_generation_to_trls_vllm_when_asked",
    "max_model_len": T
    + "test_policy_masks.py::test_context_and_image_limits_end_the_rollout_at_a_turn_boundary",
    "max_images": T
    + "test_policy_masks.py::test_context_and_image_limits_end_the_rollout_at_a_turn_boundary",
    "temperature": TRL_ARGS,
    "learning_rate": TRL_ARGS,
    "warmup_steps": TRL_ARGS,
    "kl_coef": TRL_ARGS,
    "clip_ratio": TRL_ARGS,
    "entropy_coef": TRL_ARGS,
    "grad_clip": TRL_ARGS,
    "epochs": TRL_ARGS,
    "ppo_epochs": T + "test_ppo_epochs.py::test_ppo_epochs_reuse_the_rollouts_and_the_clip_acts",
    "max_steps": TRL_ARGS,
    "gradient_checkpointing": TRL_ARGS,
    "dtype": T + "test_fields.py::test_device_and_dtype_follow_the_config",
    "device": T + "test_fields.py::test_device_and_dtype_follow_the_config",
    "reward.judge": "tests/test_eval_reward.py::test_custom_weights_are_not_renormalised",
    "reward.format": "tests/test_eval_reward.py::test_custom_weights_are_not_renormalised",
    "reward.ndcg": "tests/test_eval_reward.py::test_custom_weights_are_not_renormalised",
    "judge.kind": T + "test_run_lifecycle.py::test_a_judge_that_fails_or_talks_junk_is_counted_not_fatal",
    "engine": PLAN + "test_engine_verl_is_refused_with_the_command_to_use",
    "generator": T + "test_generation.py::test_grpo_args_hand_generation_to_trls_vllm_when_asked",
    "vllm_mode": T + "test_generation.py::test_grpo_args_hand_generation_to_trls_vllm_when_asked",
    "vllm_url": "tests/test_vllm_rollouts.py::"
    + "test_grpo_with_rollouts_from_a_real_vllm_server_loads_each_steps_adapter",
    "gpus": T + "test_processes.py::test_two_processes_average_their_gradients_and_write_the_run_once",
    "save_steps": TRL_ARGS,
    "save_total_limit": TRL_ARGS,
    "samples_per_step": T
    + "test_processes.py::test_two_processes_average_their_gradients_and_write_the_run_once",
    "tensorboard": TRL_ARGS,
    "clip_ratio_high": DAPO + "test_clip_higher_maps_to_trl_and_verl_and_the_options_default_off",
    "dynamic_sampling.enabled": DAPO + "test_uniform_groups_are_filtered_and_resampled",
    "dynamic_sampling.max_resample_rounds": DAPO
    + "test_a_step_with_no_varied_group_at_the_budget_is_skipped",
    "overlong.enabled": DAPO + "test_a_step_with_no_varied_group_at_the_budget_is_skipped",
    "overlong.buffer": DAPO + "test_a_step_with_no_varied_group_at_the_budget_is_skipped",
    "overlong.penalty": DAPO + "test_a_step_with_no_varied_group_at_the_budget_is_skipped",
    "init_from": T + "test_sft.py::test_a_grpo_run_starts_from_the_sft_result",
    "sft.batch_size": T + "test_sft.py::test_sft_arguments_follow_the_config",
    "lora.enabled": LORA,
    "lora.rank": LORA,
    "lora.target_modules": T
    + "test_lora.py::test_target_modules_stay_in_the_language_model_unless_vision_is_asked",
    "lora.vision": T + "test_lora.py::test_target_modules_stay_in_the_language_model_unless_vision_is_asked",
    "validation.dataset": VAL + "test_best_validation_is_checkpointed_kept_through_rotation_and_exported",
    "validation.eval_steps": VAL + "test_no_validation_set_splits_the_dataset_and_says_so",
    "validation.fraction": VAL + "test_no_validation_set_splits_the_dataset_and_says_so",
    "validation.max_items": "tests/test_training_validation.py::test_max_items_caps_the_validation_set_and_says_so",
}

#: Wired to the run but not yet shown by a test of their own (why each acts: the code path).
UNPROVEN: dict[str, str] = {
    "max_turns": "RolloutSpec.max_turns -> the agent's turn budget (runner._build)",
    "search_top_k": "RolloutSpec.top_k -> the agent's search (runner._build)",
    "micro_batch_rows": "chunks(rows, micro_batch_rows) in AgentGRPOTrainer.training_step (memory only)",
    "vllm_gpu_memory_utilization": "GRPOConfig.vllm_gpu_memory_utilization (needs vLLM on a GPU)",
    "judge.profile": "RunJudge -> Endpoint.from_profile",
    "judge.base_url": "RunJudge -> Endpoint.from_url",
    "judge.model": "RunJudge -> Endpoint.from_url / from_profile",
    "judge.api_key_env": "RunJudge reads the key from this environment variable",
    "judge.retries": "core Judge(retries=...)",
    "judge.timeout": "core Judge(timeout_s=...)",
    "judge.workers": "core Judge(concurrency=...)",
    "judge.anls_threshold": "RunJudge: anls(answer, reference) >= threshold",
    "lora.alpha": "peft LoraConfig(lora_alpha=...) (LoRA owner)",
    "lora.dropout": "peft LoraConfig(lora_dropout=...) (LoRA owner)",
    "lora.qlora": "bitsandbytes 4-bit loading, refused without a GPU (LoRA owner)",
}


def _fields(cls: type, prefix: str = "") -> list[str]:
    out: list[str] = []
    for f in dataclasses.fields(cls):
        sub = f.default_factory() if f.default_factory is not dataclasses.MISSING else f.default  # type: ignore[misc]
        if dataclasses.is_dataclass(sub):
            out += _fields(type(sub), f"{prefix}{f.name}.")
        else:
            out.append(prefix + f.name)
    return out


def test_every_config_field_acts_or_is_refused_by_a_named_test() -> None:
    names = set(_fields(TrainConfig))
    missing = sorted(names - FIELD_TESTS.keys() - UNPROVEN.keys())
    assert not missing, f"fields with no test showing their effect (or refusal): {missing}"
    assert not (FIELD_TESTS.keys() & UNPROVEN.keys())
    assert not (FIELD_TESTS.keys() - names), "a listed field no longer exists"
    for name, ref in FIELD_TESTS.items():
        path, _, func = ref.partition("::")
        text = (ROOT / path).read_text(encoding="utf-8")
        assert re.search(rf"^def {func}\(", text, re.M), f"{name}: {ref} does not exist"
