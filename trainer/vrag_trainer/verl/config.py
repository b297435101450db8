"""A run's config → what ``python -m verl.trainer.main_ppo`` needs: its settings (as a full YAML
file and as Hydra overrides), the training data as verl parquet, and launch scripts.

Pure functions of the :class:`TrainConfig` (plus where the run lives), so they are tested without
verl. The mapping keeps the original VRAG-RL settings (reference §6.5): GRPO advantages, KL loss
``low_var_kl``, clip 0.2, ``ppo_epochs`` 1, actor learning rate with warm-up steps, vLLM rollouts with
``limit_images`` = ``max_images``. verl's file logger opens its path with ``"wb"``: every launch
(a resume included) therefore gets a new path, chosen by the launch script at start time.
"""

from __future__ import annotations

import json
import shlex
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from vrag_desktop.core.training.config import TrainConfig

__all__ = [
    "AGENT_LOOPS",
    "EXTERNAL_LIB",
    "NEW_KEYS",
    "Bundle",
    "agent_loops_yaml",
    "file_logger_path",
    "hydra_overrides",
    "launch_script",
    "prepare",
    "ray_recipe",
    "unsupported",
    "verl_settings",
    "write_bundle",
    "yaml_text",
]

#: The module every verl process imports (agent loops, the GGPO loss and advantage estimator).
EXTERNAL_LIB = "vrag_trainer.verl.agent_loop"
#: Our agent → the agent loop name registered for it.
AGENT_LOOPS = {"vrag": "vrag_agent", "vimrag": "vimrag_agent"}
#: Keys verl's ``ppo_trainer.yaml`` does not declare: a Hydra override must add them with ``+``.
NEW_KEYS = ("actor_rollout_ref.rollout.limit_images", "vrag.", "ray_kwargs.ray_init.runtime_env")


def unsupported(cfg: TrainConfig) -> str | None:
    """Why verl cannot run ``cfg`` yet (None: it can). A bundle that cannot run is not written:
    VimRAG gives one verl output per graph node, which verl's stock agent-loop manager cannot
    batch (a multi-output manager is needed, docs/trainer.md); GGPO's masks are per graph node."""
    missing = (
        "a multi-output agent-loop manager (rollout.agent.agent_loop_manager_class) that repeats "
        "each prompt's rows per segment and keys segment_grpo's groups by rollout, which is not written yet"
    )
    if cfg.algorithm == "ggpo":  # GGPO trains VimRAG only (the config refuses it with VRAG)
        return (
            "algorithm: GGPO masks VimRAG graph nodes (a VRAG rollout is one segment with no graph), "
            f"and VimRAG on verl needs {missing}. Use algorithm grpo on verl, or `vrag_trainer ggpo` (TRL)"
        )
    if cfg.dynamic_sampling.enabled or cfg.overlong.enabled:
        return (
            "dynamic_sampling / overlong: DAPO's group filtering and overlong shaping are not mapped "
            "to verl's recipe yet; turn them off for verl, or train with `vrag_trainer grpo` (TRL)"
        )
    if cfg.agent == "vimrag":
        return (
            f"agent: VimRAG gives one verl output per graph node, and verl's stock agent-loop manager "
            f"takes one per sample; it needs {missing}. Train VimRAG with `vrag_trainer {cfg.algorithm}` "
            "(TRL) on one machine"
        )
    return None


def file_logger_path(run_dir: str | Path, launch_id: str) -> Path:
    """verl's JSON-lines metrics for one launch (``"wb"`` would erase an earlier launch's)."""
    return Path(run_dir) / "verl" / f"metrics-{launch_id}.jsonl"


def _tensor_parallel(gpus_per_node: int) -> int:
    return 2 if gpus_per_node >= 2 and gpus_per_node % 2 == 0 else 1  # the original's TP=2


def verl_settings(
    cfg: TrainConfig,
    run_dir: str | Path,
    *,
    train_file: str | Path,
    nodes: int = 1,
    gpus_per_node: int = 1,
    config_file: str | Path | None = None,
) -> dict[str, Any]:
    """The verl config values we set (nested like ``ppo_trainer.yaml``); the rest keep verl's."""
    if nodes < 1 or gpus_per_node < 1:
        raise ValueError("nodes and gpus_per_node must be at least 1")
    run = Path(run_dir)
    ggpo = cfg.algorithm == "ggpo"
    micro = cfg.micro_batch_rows
    actor: dict[str, Any] = {
        "optim": {
            "lr": cfg.learning_rate,
            "lr_warmup_steps": cfg.warmup_steps,
            "lr_scheduler_type": "constant",
            "clip_grad": cfg.grad_clip,
        },
        "grad_clip": cfg.grad_clip,
        "ppo_mini_batch_size": cfg.prompts_per_step,  # one optimiser step per pass over the batch
        "ppo_micro_batch_size_per_gpu": micro,
        "ppo_epochs": cfg.ppo_epochs,  # passes per rollout step, against the old log-probs
        "use_kl_loss": cfg.kl_coef > 0,
        "kl_loss_coef": cfg.kl_coef,
        "kl_loss_type": "low_var_kl",
        "clip_ratio": cfg.clip_ratio,
        "clip_ratio_low": cfg.clip_ratio,
        "clip_ratio_high": cfg.clip_ratio_high or cfg.clip_ratio,  # DAPO's clip-higher; 0: symmetric
        "entropy_coeff": cfg.entropy_coef,
        # GRPO: token mean over the step (the original); GGPO: per segment, then over all segments
        "loss_agg_mode": "seq-mean-token-mean" if ggpo else "token-mean",
        "policy_loss": {"loss_mode": "ggpo" if ggpo else "vanilla"},
        "fsdp_config": {"param_offload": False, "optimizer_offload": False},
    }
    rollout: dict[str, Any] = {
        "name": "vllm",
        "mode": "async",
        "n": cfg.group_size,
        "temperature": cfg.temperature,
        "gpu_memory_utilization": cfg.vllm_gpu_memory_utilization,
        "tensor_model_parallel_size": _tensor_parallel(gpus_per_node),
        "max_model_len": cfg.max_model_len,
        "limit_images": cfg.max_images,
        "calculate_log_probs": True,
        "log_prob_micro_batch_size_per_gpu": micro,
        "multi_turn": {
            "enable": True,
            "max_assistant_turns": cfg.max_turns + 1,  # the forced final answer turn
            "max_user_turns": cfg.max_turns,
        },
        "agent": {
            "default_agent_loop": AGENT_LOOPS[cfg.agent],
            "agent_loop_config_path": str(run / "verl" / "agent_loops.yaml"),
        },
    }
    out: dict[str, Any] = {
        "algorithm": {
            # VimRAG rows are segments: their group statistics must count each rollout once
            "adv_estimator": "grpo" if cfg.agent == "vrag" else "segment_grpo",
            "norm_adv_by_std_in_grpo": True,
            "use_kl_in_reward": False,
            "kl_ctrl": {"kl_coef": 0.0},
        },
        "data": {
            "train_files": str(train_file),
            "val_files": str(train_file),
            "train_batch_size": cfg.prompts_per_step,
            "max_prompt_length": cfg.max_prompt_length,
            "max_response_length": cfg.max_model_len,  # a whole segment fits after its context
            "return_raw_chat": True,
            "filter_overlong_prompts": False,
            "truncation": "error",
            "image_key": "images",
            "shuffle": True,
            "seed": cfg.seed,
        },
        "actor_rollout_ref": {
            "hybrid_engine": True,
            "model": {
                "path": cfg.model,
                "external_lib": EXTERNAL_LIB,
                "enable_gradient_checkpointing": cfg.gradient_checkpointing,
                "use_remove_padding": True,
            },
            "actor": actor,
            "ref": {"log_prob_micro_batch_size_per_gpu": micro},
            "rollout": rollout,
        },
        "reward_model": {"enable": False},  # the agent loop scores each rollout itself
        "trainer": {
            "project_name": "vrag-desktop",
            "experiment_name": cfg.name or run.name,
            "logger": ["console", "file", "tensorboard"] if cfg.tensorboard else ["console", "file"],
            "nnodes": nodes,
            "n_gpus_per_node": gpus_per_node,
            "total_epochs": cfg.epochs,
            "total_training_steps": cfg.max_steps or None,
            "save_freq": cfg.save_steps,
            "max_actor_ckpt_to_keep": cfg.save_total_limit,
            "test_freq": -1,
            "val_before_train": False,
            "resume_mode": "auto",
            "default_local_dir": str(run / "verl" / "checkpoints"),
            "device": "cuda",
        },
        "vrag": {"train_config": cfg.to_dict()},
    }
    if config_file is not None:
        out["vrag"]["config_file"] = str(config_file)
    return out


def _flatten(d: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    flat: dict[str, Any] = {}
    for k, v in d.items():
        if isinstance(v, Mapping) and v and not (prefix + k).startswith("vrag.train_config"):
            flat.update(_flatten(v, f"{prefix}{k}."))
        else:
            flat[prefix + k] = v
    return flat


def _float(v: float) -> str:
    """``1e-06`` → ``1.0e-06``: YAML 1.1 (PyYAML) reads a float without a dot as a string."""
    text = repr(float(v))
    mant, e, exp = text.partition("e")
    return f"{mant}.0e{exp}" if e and "." not in mant else text


def _scalar(v: Any) -> str:
    if isinstance(v, float):
        return _float(v)
    if isinstance(v, (list, tuple)):
        return "[" + ", ".join(_scalar(x) for x in v) + "]"
    return json.dumps(v, ensure_ascii=False)


def _value(v: Any) -> str:
    if v is None:
        return "null"
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, float):
        return _float(v)
    if isinstance(v, int):
        return repr(v)
    if isinstance(v, (list, tuple)):
        return "[" + ",".join(_value(x) for x in v) + "]"
    if isinstance(v, Mapping):
        return json.dumps(v, separators=(",", ":"))
    return json.dumps(str(v)) if any(c in str(v) for c in " ,=[]{}:'\"") else str(v)


def hydra_overrides(settings: Mapping[str, Any]) -> list[str]:
    """``key=value`` overrides for ``main_ppo`` (new keys with ``+``); the embedded train config is
    left out (the agent loops read ``vrag.config_file`` instead, which must exist on every node)."""
    flat = {k: v for k, v in _flatten(settings).items() if k != "vrag.train_config"}
    out = []
    for key, value in flat.items():
        plus = "+" if any(key == n or key.startswith(n) for n in NEW_KEYS) else ""
        out.append(f"{plus}{key}={_value(value)}")
    return out


def _yaml_lines(d: Mapping[str, Any], indent: int = 0) -> list[str]:
    """Block mappings with JSON scalars and flow lists (JSON is valid YAML: no yaml dependency)."""
    pad = "  " * indent
    lines: list[str] = []
    for key, value in d.items():
        if isinstance(value, Mapping) and value:
            lines.append(f"{pad}{key}:")
            lines += _yaml_lines(value, indent + 1)
        else:
            lines.append(f"{pad}{key}: {_scalar(value)}")
    return lines


def yaml_text(settings: Mapping[str, Any]) -> str:
    """A full config for ``main_ppo --config-path DIR --config-name NAME``: verl's own
    ``ppo_trainer`` first, then ours on top."""
    head = {"hydra": {"searchpath": ["pkg://verl.trainer.config"]}, "defaults": ["ppo_trainer", "_self_"]}
    lines = ["# generated by `python -m vrag_trainer verl`; regenerate rather than edit"]
    return "\n".join(lines + _yaml_lines(head) + _yaml_lines(settings)) + "\n"


def agent_loops_yaml() -> str:
    """``rollout.agent.agent_loop_config_path``: names → our classes (Hydra ``_target_``)."""
    lines = []
    for name, cls in (("vrag_agent", "VragAgentLoop"), ("vimrag_agent", "VimragAgentLoop")):
        lines += [f"- name: {name}", f"  _target_: {EXTERNAL_LIB}.{cls}"]
    return "\n".join(lines) + "\n"


def launch_script(run_dir: str | Path, config_dir: str | Path, config_name: str = "verl_ppo") -> str:
    """Bash for the head node: a launch id per start, so the file logger never overwrites."""
    run = shlex.quote(str(run_dir))
    cdir = shlex.quote(str(config_dir))
    return f"""#!/usr/bin/env bash
# Start (or resume: resume_mode=auto picks the last checkpoint up) the verl run of {run_dir}.
# One node: run it. Several: start Ray first (see ray_cluster.md), then run it on the head node.
set -euo pipefail
RUN={run}
LAUNCH_ID="$(date -u +%Y%m%dT%H%M%SZ)-$$"
mkdir -p "$RUN/verl" "$RUN/tensorboard"
export VERL_USE_EXTERNAL_MODULES={EXTERNAL_LIB}
export VERL_FILE_LOGGER_PATH="$RUN/verl/metrics-$LAUNCH_ID.jsonl"
export TENSORBOARD_DIR="$RUN/tensorboard"
ENV_VARS=+ray_kwargs.ray_init.runtime_env.env_vars
exec python3 -m verl.trainer.main_ppo --config-path {cdir} --config-name {config_name} \\
  "$ENV_VARS.VERL_USE_EXTERNAL_MODULES=$VERL_USE_EXTERNAL_MODULES" \\
  "$ENV_VARS.VERL_FILE_LOGGER_PATH=$VERL_FILE_LOGGER_PATH" \\
  "$ENV_VARS.TENSORBOARD_DIR=$TENSORBOARD_DIR" \\
  "$@" 2>&1 | tee -a "$RUN/verl/train-$LAUNCH_ID.log"
"""


def ray_recipe(run_dir: str | Path, nodes: int, gpus_per_node: int, port: int = 6379) -> str:
    """The multi-node steps, as Markdown (Ray first, then the same launch script on the head)."""
    script = Path(run_dir) / "verl" / "launch.sh"
    return f"""# Launching this run on {nodes} node(s) × {gpus_per_node} GPU(s)

Every node needs: the trainer's verl environment (verl 0.9.1, vLLM, this project installed), the
model at `actor_rollout_ref.model.path`, this run directory at the same path (a shared file
system), and network access to the search server (`search_url`) and the judge.

1. Head node: `ray start --head --port={port} --num-gpus={gpus_per_node}`
2. Each other node: `ray start --address=<head-ip>:{port} --num-gpus={gpus_per_node}`
3. Check: `ray status` lists {nodes * gpus_per_node} GPUs.
4. Head node: `bash {script}` (extra Hydra overrides may follow, e.g. `trainer.save_freq=10`).

Stop: Ctrl-C (or `ray stop` everywhere); start the same script again to resume from the last
checkpoint (`resume_mode=auto`); metrics of each start go to a new `verl/metrics-<launch>.jsonl`.
Export: `python -m verl.model_merger merge --backend fsdp --local_dir
<run>/verl/checkpoints/global_step_<N>/actor --target_dir <run>/export`.
"""


@dataclass(frozen=True)
class Bundle:
    """What :func:`write_bundle` wrote."""

    run_dir: Path
    yaml_path: Path
    overrides_path: Path
    data_path: Path
    script_path: Path
    recipe_path: Path
    rows: int

    def instructions(self) -> str:
        return (
            f"verl bundle written to {self.run_dir / 'verl'} ({self.rows} training rows)\n"
            f"one node:  bash {self.script_path}\n"
            f"a cluster: start Ray as {self.recipe_path} says, then run the same script on the head node"
        )


def write_bundle(
    cfg: TrainConfig,
    run_dir: str | Path,
    items: Any,
    *,
    nodes: int = 1,
    gpus_per_node: int = 1,
) -> Bundle:
    """Write config, data (through the app's verl exporter) and scripts into ``<run>/verl``;
    ``ValueError`` (nothing written) for a run verl cannot run (:func:`unsupported`)."""
    why = unsupported(cfg)
    if why is not None:
        raise ValueError(why)
    from vrag_desktop.core.fsutil import atomic_write_json
    from vrag_desktop.core.run.export import export_dataset_rl

    run = Path(run_dir).expanduser().resolve()
    vdir = run / "verl"
    vdir.mkdir(parents=True, exist_ok=True)
    atomic_write_json(run / "config.json", cfg.to_dict())
    data = vdir / "train.parquet"
    rows = export_dataset_rl(items, data, agent=cfg.agent)
    settings = verl_settings(
        cfg, run, train_file=data, nodes=nodes, gpus_per_node=gpus_per_node, config_file=run / "config.json"
    )
    yaml_path = vdir / "verl_ppo.yaml"
    yaml_path.write_text(yaml_text(settings), encoding="utf-8")
    overrides = vdir / "overrides.txt"
    overrides.write_text("\n".join(hydra_overrides(settings)) + "\n", encoding="utf-8")
    (vdir / "agent_loops.yaml").write_text(agent_loops_yaml(), encoding="utf-8")
    script = vdir / "launch.sh"
    script.write_text(launch_script(run, vdir), encoding="utf-8")
    script.chmod(0o755)
    recipe = vdir / "ray_cluster.md"
    recipe.write_text(ray_recipe(run, nodes, gpus_per_node), encoding="utf-8")
    return Bundle(run, yaml_path, overrides, data, script, recipe, rows)


def prepare(cfg: TrainConfig, out: str | Path, *, nodes: int = 1, gpus_per_node: int | None = None) -> Bundle:
    """The ``vrag_trainer verl`` command: check the run, read and match its data, write the bundle.
    Refusals (:class:`~vrag_trainer.runner.RunRefused`) name the field, as a local start's do."""
    from vrag_desktop.core.paths import resolve_data_dir
    from vrag_desktop.core.run.export import ExportError
    from vrag_desktop.core.training.rundir import TrainRun, TrainRunError
    from vrag_trainer.data import DataError, load_train_data
    from vrag_trainer.runner import RunRefused

    why = unsupported(cfg)
    if why is not None:
        raise RunRefused(why)
    if not cfg.search_url:
        raise RunRefused(
            "search_url: a verl run needs a search server every node can reach "
            "(start one with `vrag-desktop serve-search` and put its URL here)"
        )
    if cfg.judge.kind == "profile":
        raise RunRefused(
            "judge.kind: endpoint profiles live on this machine; use url, exact or anls on a cluster"
        )
    root = Path(out).expanduser()
    existing = root / "config.json"
    if existing.is_file():
        try:
            same = TrainRun.open(root).config() == cfg
        except TrainRunError:
            same = False
        if not same:
            raise RunRefused(f"{root} already holds a different run; choose another --out")
    else:
        try:
            TrainRun.create(root, cfg)
        except TrainRunError as exc:
            raise RunRefused(str(exc)) from exc
    try:
        data = load_train_data(cfg, resolve_data_dir(cfg.data_dir or None))
        return write_bundle(cfg, root, data.items, nodes=nodes, gpus_per_node=gpus_per_node or cfg.gpus or 1)
    except (DataError, ExportError, ValueError) as exc:
        raise RunRefused(str(exc)) from exc
