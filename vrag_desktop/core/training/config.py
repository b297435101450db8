"""A training run's configuration: one typed, validated record the CLI, the app's panel and the
trainer process all read, so a mistake is named (field and reason) before any GPU is touched.

Defaults are the original VRAG-RL settings (reference §6.5): group 5, learning rate 1e-6 with 5
warm-up steps, KL 0.01 with the low-variance (k3) estimator, clip 0.2, 4 turns, 2,048 tokens per
turn, a 10,240-token context, 25 images, temperature 1.0, reward 0.7·judge + 0.1·format + 0.2·NDCG.

Files are JSON, or TOML on Python 3.11+. Unknown keys are refused with the nearest known name, so a
typo never silently trains with a default.
"""

from __future__ import annotations

import difflib
import importlib
import json
import math
import os
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field, fields, replace
from pathlib import Path
from typing import Any

from vrag_desktop.core.training.lora import LORA_TARGETS, LoraConfig, check_lora, lora_from
from vrag_desktop.core.training.sampling import DAPO_TABLES, DynamicSamplingConfig, OverlongConfig, check_dapo
from vrag_desktop.core.training.sft import SFT_TABLES, SftConfig, check_sft
from vrag_desktop.core.training.validation import (
    RESUME_SAFE_VALIDATION,
    VALIDATION_TABLES,
    ValidationConfig,
    check_validation,
)

__all__ = [
    "AGENTS",
    "ALGORITHMS",
    "DEFAULT_AGENTS",
    "GENERATORS",
    "GGPO_NEEDS_VIMRAG",
    "JUDGE_KINDS",
    "LORA_TARGETS",
    "RESUME_SAFE",
    "ConfigError",
    "JudgeConfig",
    "LoraConfig",
    "RewardConfig",
    "TrainConfig",
    "changed_fields",
    "load_config",
    "merge_overrides",
]

#: ``sft``: the supervised warm start (core/training/sft.py), run and supervised like the RL runs.
ALGORITHMS = ("grpo", "ggpo", "sft")
AGENTS = ("vrag", "vimrag")
#: The agent an algorithm trains when the config names none: GGPO's mask is made of VimRAG's graph
#: nodes, so GGPO trains VimRAG; GRPO trains VRAG, as the original VRAG-RL does.
DEFAULT_AGENTS = {"grpo": "vrag", "ggpo": "vimrag", "sft": "vrag"}
GENERATORS = ("hf", "vllm")
#: ``app_server``: the app's own vLLM server over HTTP at ``vllm_url``, the LoRA adapter loaded into
#: it after each step (trainer/vrag_trainer/vllm_http.py).
VLLM_MODES = ("colocate", "server", "app_server")
ENGINES = ("trl", "verl")
DEVICES = ("auto", "cpu", "cuda")
DTYPES = ("auto", "bf16", "fp16", "fp32")
#: How answers are judged: a model behind an endpoint profile or URL, or a metric needing no model.
JUDGE_KINDS = ("profile", "url", "exact", "anls")

#: Fields a resumed run may change (they do not alter what was learnt so far).
RESUME_SAFE = frozenset(
    {
        "max_steps",
        "save_steps",
        "save_total_limit",
        "samples_per_step",
        "tensorboard",
        "name",
        "judge",
        "vllm_url",
    }
)
#: Fields of a table a resumed run may change, by dotted name (the rest of the table may not).
RESUME_SAFE_FIELDS = RESUME_SAFE_VALIDATION


#: Why GGPO with the VRAG agent is refused (the trap: it runs, and learns only from failures).
GGPO_NEEDS_VIMRAG = (
    "GGPO trains the VimRAG agent, not VRAG: its mask keeps only the segments on the graph's path "
    "to the answer, and the VRAG agent's segments have no graph node, so every correct rollout would "
    "be masked out and the run would learn only from its failures; set agent to vimrag (or leave it "
    "out), or train VRAG with grpo"
)


class ConfigError(ValueError):
    """A configuration value is wrong; the message starts with the field's dotted name."""

    def __init__(self, field_name: str, problem: str) -> None:
        super().__init__(f"{field_name}: {problem}")
        self.field = field_name
        self.problem = problem


@dataclass(frozen=True)
class JudgeConfig:
    """Who decides whether an answer is right. ``profile``: an endpoint profile of the app (None:
    the active one); ``url``: any OpenAI-compatible server (key from the environment variable
    ``api_key_env``); ``exact`` / ``anls``: a metric against the reference, no model (cheap, and
    what the toy tasks use). A judge call is retried ``retries`` times, then counted as a failure
    (reward part 0), never crashing a step."""

    kind: str = "profile"
    profile: str | None = None
    base_url: str = ""
    model: str = ""
    api_key_env: str = ""
    retries: int = 3
    timeout: float = 60.0
    workers: int = 10
    anls_threshold: float = 0.5


@dataclass(frozen=True)
class RewardConfig:
    """Weights of the composite reward (:mod:`vrag_desktop.core.eval.reward`)."""

    judge: float = 0.7
    format: float = 0.1
    ndcg: float = 0.2


@dataclass(frozen=True)
class TrainConfig:
    """Everything a run needs. Required: ``model`` and ``dataset``. ``agent`` left empty is the
    algorithm's own (:data:`DEFAULT_AGENTS`)."""

    algorithm: str = "grpo"
    agent: str = ""
    model: str = ""  # a local Hugging Face directory, or a hub id (downloaded when online)
    dataset: str = ""  # a dataset file (unified JSON, JSON lines, parquet) or an app dataset's name
    init_from: str = ""  # start from these weights: a run, a checkpoint or a model folder (warmstart.py)
    corpora: tuple[str, ...] = ()  # the app corpora the agent searches (empty: all)
    search_url: str = ""  # a running search server; empty: the trainer serves `corpora` itself
    data_dir: str = ""  # the app's data directory (empty: the default)
    output_dir: str = ""  # the run directory (empty: <data>/training/<name>)
    name: str = ""
    seed: int = 0
    # rollout
    group_size: int = 5
    prompts_per_step: int = 32
    max_turns: int = 4
    search_top_k: int = 3
    max_prompt_length: int = 8192
    max_response_length: int = 2048  # per model turn
    max_model_len: int = 10240  # a trajectory longer than this is cut at a turn boundary
    max_images: int = 25
    temperature: float = 1.0
    # optimisation
    learning_rate: float = 1e-6
    warmup_steps: int = 5
    kl_coef: float = 0.01
    clip_ratio: float = 0.2
    clip_ratio_high: float = 0.0  # DAPO's clip-higher upper bound; 0: clip_ratio (symmetric)
    entropy_coef: float = 0.0
    grad_clip: float = 1.0
    epochs: int = 1
    ppo_epochs: int = 1  # updates per batch of rollouts (the original's 1); above 1 the clip acts
    max_steps: int = 0  # 0: as many as `epochs` take
    micro_batch_rows: int = 4  # rows per forward pass (memory), gradients accumulated over a step
    gradient_checkpointing: bool = False
    dtype: str = "auto"
    device: str = "auto"
    # rewards
    reward: RewardConfig = field(default_factory=RewardConfig)
    judge: JudgeConfig = field(default_factory=JudgeConfig)
    lora: LoraConfig = field(default_factory=LoraConfig)
    dynamic_sampling: DynamicSamplingConfig = field(default_factory=DynamicSamplingConfig)
    overlong: OverlongConfig = field(default_factory=OverlongConfig)
    validation: ValidationConfig = field(default_factory=ValidationConfig)  # the held-out curve
    sft: SftConfig = field(default_factory=SftConfig)
    # engines
    engine: str = "trl"
    generator: str = "hf"
    vllm_mode: str = "colocate"
    vllm_gpu_memory_utilization: float = 0.6
    vllm_url: str = ""  # vllm_mode app_server: the running server's OpenAI base URL (http://host:port/v1)
    gpus: int = 0  # 0: every visible GPU (or the CPU)
    # run directory
    save_steps: int = 25
    save_total_limit: int = 3
    samples_per_step: int = 2  # trajectories kept per step as app run files
    tensorboard: bool = True

    # ---- validation ---------------------------------------------------------------------------
    def __post_init__(self) -> None:
        if self.agent == "" and isinstance(self.algorithm, str):
            object.__setattr__(self, "agent", DEFAULT_AGENTS.get(self.algorithm, "vrag"))
        _check(self)

    @classmethod
    def from_mapping(cls, data: Mapping[str, Any]) -> TrainConfig:
        """Build from parsed JSON/TOML; unknown keys and wrong types raise :class:`ConfigError`."""
        if not isinstance(data, Mapping):
            raise ConfigError(
                "config", f"must be a mapping of field names to values, not {type(data).__name__}"
            )
        kwargs = _fields_from(cls, data, "")
        tables = (
            ("reward", RewardConfig),
            ("judge", JudgeConfig),
            *DAPO_TABLES,
            *VALIDATION_TABLES,
            *SFT_TABLES,
        )
        for name, sub in tables:
            if name in kwargs:
                value = kwargs[name]
                if not isinstance(value, Mapping):
                    raise ConfigError(name, f"must be a table of fields, not {type(value).__name__}")
                kwargs[name] = sub(**_fields_from(sub, value, name + "."))
        if "lora" in kwargs:
            kwargs["lora"] = lora_from(kwargs["lora"])
        if "corpora" in kwargs:
            value = kwargs["corpora"]
            if isinstance(value, str):
                value = [value]
            if not isinstance(value, (list, tuple)) or not all(isinstance(v, str) for v in value):
                raise ConfigError("corpora", "must be a list of corpus names")
            kwargs["corpora"] = tuple(value)
        try:
            return cls(**kwargs)
        except TypeError as exc:  # a wrong type the checks did not name
            raise ConfigError("config", str(exc)) from exc

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["corpora"] = list(self.corpora)
        out["lora"]["target_modules"] = list(self.lora.target_modules)
        return out

    def with_changes(self, **changes: Any) -> TrainConfig:
        return replace(self, **changes)

    def resolved_output_dir(self, data_root: Path) -> Path:
        if self.output_dir:
            return Path(self.output_dir).expanduser()
        from vrag_desktop.core.paths import DataLayout

        return DataLayout(data_root).training / (self.name or f"{self.algorithm}-{self.agent}")


def load_config(path: str | os.PathLike[str], **overrides: Any) -> TrainConfig:
    """Read and validate a config file (``.json``; ``.toml`` on Python 3.11+)."""
    p = Path(path).expanduser()
    try:
        text = p.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ConfigError("config", f"no such file: {p}") from None
    except OSError as exc:
        raise ConfigError("config", f"cannot read {p}: {exc.strerror or exc}") from None
    if p.suffix.lower() == ".toml":
        try:
            tomllib: Any = importlib.import_module("tomllib")
        except ModuleNotFoundError:  # Python 3.10
            raise ConfigError("config", "TOML needs Python 3.11 or later; use a .json file") from None
        try:
            data: Any = tomllib.loads(text)
        except tomllib.TOMLDecodeError as exc:
            raise ConfigError("config", f"{p.name} is not valid TOML: {exc}") from None
    else:
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            raise ConfigError("config", f"{p.name} is not valid JSON: {exc}") from None
    if isinstance(data, dict):
        data = merge_overrides(data, overrides)
    return TrainConfig.from_mapping(data)


def merge_overrides(data: Mapping[str, Any], overrides: Mapping[str, Any]) -> dict[str, Any]:
    """``data`` with ``overrides`` applied; a dotted key (``judge.kind``) sets a field of a table,
    keeping its other fields (``--set`` on the command line)."""
    out = dict(data)
    for key, value in overrides.items():
        head, _, rest = str(key).partition(".")
        if not rest:
            out[head] = value
            continue
        sub = out.get(head, {})
        if not isinstance(sub, Mapping):
            raise ConfigError(head, f"must be a table of fields, not {type(sub).__name__}")
        out[head] = merge_overrides(sub, {rest: value})
    return out


def changed_fields(old: TrainConfig, new: TrainConfig) -> list[str]:
    """Dotted names of the fields that differ and that a resumed run may not change."""
    a, b = _flat(old.to_dict()), _flat(new.to_dict())
    return sorted(
        k
        for k in a.keys() | b.keys()
        if a.get(k) != b.get(k) and k.split(".")[0] not in RESUME_SAFE and k not in RESUME_SAFE_FIELDS
    )


# ---- helpers ------------------------------------------------------------------------------------
def _flat(d: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    out: dict[str, Any] = {}
    for k, v in d.items():
        if isinstance(v, Mapping):
            out.update(_flat(v, f"{prefix}{k}."))
        else:
            out[f"{prefix}{k}"] = v
    return out


def _fields_from(cls: type, data: Mapping[str, Any], prefix: str) -> dict[str, Any]:
    known = {f.name: f for f in fields(cls)}
    kwargs: dict[str, Any] = {}
    for key, value in data.items():
        if key not in known:
            near = difflib.get_close_matches(str(key), known, n=1)
            hint = f" (did you mean {near[0]!r}?)" if near else ""
            raise ConfigError(f"{prefix}{key}", f"unknown field{hint}")
        kwargs[key] = value
    return kwargs


def _num(
    name: str,
    value: Any,
    *,
    integer: bool = False,
    low: float | None = None,
    high: float | None = None,
    low_open: bool = False,
) -> None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ConfigError(name, f"must be a number, not {value!r}")
    if integer and not isinstance(value, int):
        raise ConfigError(name, f"must be a whole number, not {value!r}")
    if not math.isfinite(value):
        raise ConfigError(name, f"must be finite, not {value!r}")
    if low is not None and (value <= low if low_open else value < low):
        raise ConfigError(name, f"must be {'>' if low_open else '>='} {low}, not {value!r}")
    if high is not None and value > high:
        raise ConfigError(name, f"must be <= {high}, not {value!r}")


def _choice(name: str, value: Any, allowed: tuple[str, ...]) -> None:
    if value not in allowed:
        raise ConfigError(name, f"must be one of {', '.join(allowed)}, not {value!r}")


def _text(name: str, value: Any, required: bool = False) -> None:
    if not isinstance(value, str):
        raise ConfigError(name, f"must be text, not {value!r}")
    if required and not value.strip():
        raise ConfigError(name, "is required")


def _check_vllm(c: TrainConfig) -> None:
    _text("vllm_url", c.vllm_url)
    app_server = c.generator == "vllm" and c.vllm_mode == "app_server"
    if c.vllm_url and not app_server:
        raise ConfigError("vllm_url", "is read only with generator vllm and vllm_mode app_server")
    if not app_server:
        if c.generator == "vllm" and c.device == "cpu":
            raise ConfigError("generator", "vllm generates on a GPU; use hf with device cpu")
        return
    if not c.vllm_url.startswith(("http://", "https://")):
        raise ConfigError(
            "vllm_url", "vllm_mode app_server needs the running vLLM server's URL (http://host:port/v1)"
        )
    if c.gpus > 1:
        raise ConfigError(
            "gpus", "vllm_mode app_server trains in one process (one adapter per step); use gpus 1"
        )
    if not c.lora.enabled:
        raise ConfigError(
            "vllm_mode",
            "app_server loads the trained LoRA adapter into the running server after each step; "
            "full fine-tuning would reload the whole model every step: set lora.enabled, or use "
            "vllm_mode colocate or server",
        )


def _check(c: TrainConfig) -> None:
    _choice("algorithm", c.algorithm, ALGORITHMS)
    _choice("agent", c.agent, AGENTS)
    if c.algorithm == "ggpo" and c.agent == "vrag":
        raise ConfigError("agent", GGPO_NEEDS_VIMRAG)
    _text("model", c.model, required=True)
    _text("dataset", c.dataset, required=True)
    for name in ("search_url", "data_dir", "output_dir", "name"):
        _text(name, getattr(c, name))
    if c.search_url and not c.search_url.startswith(("http://", "https://")):
        raise ConfigError("search_url", f"must be an http(s) URL, not {c.search_url!r}")
    _num("seed", c.seed, integer=True, low=0)
    _num("group_size", c.group_size, integer=True)
    if c.group_size < 2:
        raise ConfigError(
            "group_size",
            f"must be >= 2 (rollouts per prompt), not {c.group_size}: GRPO learns from how the "
            "rollouts of one prompt differ (each one's advantage is its reward against its group's "
            "mean), and a group of one has nothing to be compared with, so the run cannot learn",
        )
    for name in (
        "prompts_per_step",
        "max_turns",
        "search_top_k",
        "max_prompt_length",
        "max_response_length",
        "max_model_len",
        "max_images",
        "epochs",
        "ppo_epochs",
        "micro_batch_rows",
        "save_steps",
        "save_total_limit",
    ):
        _num(name, getattr(c, name), integer=True, low=1)
    for name in ("warmup_steps", "max_steps", "samples_per_step"):
        _num(name, getattr(c, name), integer=True, low=0)
    if c.max_response_length >= c.max_model_len:
        raise ConfigError("max_response_length", f"must be below max_model_len ({c.max_model_len})")
    _num("temperature", c.temperature, low=0.0, low_open=True, high=10.0)
    _num("learning_rate", c.learning_rate, low=0.0, low_open=True, high=1.0)
    _num("kl_coef", c.kl_coef, low=0.0)
    _num("clip_ratio", c.clip_ratio, low=0.0, low_open=True, high=1.0)
    _num("entropy_coef", c.entropy_coef, low=0.0)
    _num("grad_clip", c.grad_clip, low=0.0, low_open=True)
    _num("gpus", c.gpus, integer=True, low=0)
    _num("vllm_gpu_memory_utilization", c.vllm_gpu_memory_utilization, low=0.05, high=0.95)
    for name in ("gradient_checkpointing", "tensorboard"):
        if not isinstance(getattr(c, name), bool):
            raise ConfigError(name, f"must be true or false, not {getattr(c, name)!r}")
    _choice("dtype", c.dtype, DTYPES)
    _choice("device", c.device, DEVICES)
    _choice("engine", c.engine, ENGINES)
    _choice("generator", c.generator, GENERATORS)
    _choice("vllm_mode", c.vllm_mode, VLLM_MODES)
    if not isinstance(c.reward, RewardConfig):
        raise ConfigError("reward", "must be a table with judge, format and ndcg weights")
    for name in ("judge", "format", "ndcg"):
        _num(f"reward.{name}", getattr(c.reward, name), low=0.0)
    if c.reward.judge + c.reward.format + c.reward.ndcg <= 0:
        raise ConfigError("reward", "the weights must not all be 0")
    j = c.judge
    if not isinstance(j, JudgeConfig):
        raise ConfigError("judge", "must be a table (kind, profile, base_url, model, ...)")
    _choice("judge.kind", j.kind, JUDGE_KINDS)
    if j.profile is not None:
        _text("judge.profile", j.profile)
    for name in ("base_url", "model", "api_key_env"):
        _text(f"judge.{name}", getattr(j, name))
    if j.kind == "url":
        if not j.base_url.startswith(("http://", "https://")):
            raise ConfigError("judge.base_url", "a url judge needs an http(s) base URL")
        if not j.model:
            raise ConfigError("judge.model", "a url judge needs the served model name")
    _num("judge.retries", j.retries, integer=True, low=0, high=20)
    _num("judge.timeout", j.timeout, low=0.0, low_open=True)
    _num("judge.workers", j.workers, integer=True, low=1, high=256)
    _num("judge.anls_threshold", j.anls_threshold, low=0.0, high=1.0)
    check_lora(c)
    _check_vllm(c)
    check_dapo(c)
    check_validation(c)
    check_sft(c)
