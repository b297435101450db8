"""Serving a finished training run: which model folder, under which served name, and the endpoint
profile that lets Ask and Evaluation use it.

Why here and Qt-free: the Training dock's "Serve…" button only decides and shows; the server itself
is started by the Runtime dock's one supervisor (:class:`~vrag_desktop.qt.runtime.vllm_section.
VLLMSection`). What to serve (the run's ``export`` folder, checked to be a model), what to call it
and the ``local-vllm`` profile named after the run are plain functions over the run directory and
the :class:`ProfileStore`, so the CLI or a test can use them as the dock does.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, replace
from pathlib import Path

from vrag_desktop.core.endpoints.profiles import (
    CUSTOM,
    DASHSCOPE,
    LOCAL_VLLM,
    EndpointProfile,
    ProfileError,
    ProfileStore,
)
from vrag_desktop.core.runtime.settings import VLLMSettings
from vrag_desktop.core.training.rundir import TrainRun

__all__ = [
    "NeedsExport",
    "ServeError",
    "ServePlan",
    "model_dir_problem",
    "plan_serve",
    "profile_name_for",
    "save_run_profile",
    "serve_settings",
    "served_name_for",
]

_WEIGHTS = ("*.safetensors", "*.bin", "model.safetensors.index.json", "pytorch_model.bin.index.json")
_BUILTIN = {DASHSCOPE, LOCAL_VLLM, CUSTOM}


class ServeError(ValueError):
    """The run cannot be served as it is (the message says why and what to do)."""


class NeedsExport(ServeError):
    """No exported model yet, but a complete checkpoint to export (``step``)."""

    def __init__(self, message: str, step: int) -> None:
        super().__init__(message)
        self.step = step


@dataclass(frozen=True)
class ServePlan:
    """What serving a run means: the model folder, vLLM's served name, the profile's name."""

    run_name: str
    model_dir: Path
    served_name: str
    profile_name: str


def served_name_for(run_name: str) -> str:
    """vLLM's ``--served-model-name`` for a run: its name with anything but letters, digits, ``.``,
    ``_`` and ``-`` turned into ``-`` (``"grpo 7/b"`` → ``"grpo-7-b"``); never empty."""
    name = re.sub(r"[^A-Za-z0-9._-]+", "-", run_name).strip("-._")
    return name[:80] or "trained-model"


def profile_name_for(run_name: str) -> str:
    """The endpoint profile's name: the run's name (a built-in's name gets `` (trained)``)."""
    name = re.sub(r"[\r\n\t]+", " ", run_name).strip() or "trained model"
    if name in _BUILTIN:
        name += " (trained)"
    return name[:80]


def model_dir_problem(path: str | os.PathLike[str]) -> str | None:
    """Why ``path`` is not a Hugging Face model folder vLLM can load (None: it looks like one)."""
    p = Path(path)
    if not p.is_dir():
        return f"{p} is not a folder."
    if not (p / "config.json").is_file():
        return f"{p} is not a model folder (config.json is missing); delete it and export the run again."
    if not any(any(p.glob(pattern)) for pattern in _WEIGHTS):
        return f"{p} holds no model weights (*.safetensors); delete it and export the run again."
    return None


def plan_serve(root: str | os.PathLike[str]) -> ServePlan:
    """What serving the run at ``root`` means. Raises :class:`NeedsExport` when there is only a
    checkpoint, :class:`ServeError` when there is nothing to serve or the export is not a model."""
    run = TrainRun(root)
    name = run.root.name
    export = run.export_dir
    if export.exists():
        problem = model_dir_problem(export)
        if problem is not None:
            raise ServeError(problem)
        return ServePlan(name, export, served_name_for(name), profile_name_for(name))
    ckpt = run.last_checkpoint()
    if ckpt is not None:
        raise NeedsExport(
            f"{name} has no exported model yet; export checkpoint {ckpt.step} first.", ckpt.step
        )
    raise ServeError(
        f"{name} has no exported model and no complete checkpoint yet: train (or resume) it until "
        "it saves a checkpoint, then export it."
    )


def serve_settings(settings: VLLMSettings, plan: ServePlan) -> VLLMSettings:
    """``settings`` (the Runtime dock's) with the run's model folder and served name."""
    return replace(settings, model=str(plan.model_dir), served_model_name=plan.served_name)


def save_run_profile(store: ProfileStore, plan: ServePlan, base_url: str, model: str) -> EndpointProfile:
    """Create or update the ``local-vllm`` profile named after the run, pointing at ``base_url``
    serving ``model`` (its other settings are kept). Raises :class:`ServeError` when a profile of
    another kind has that name, ``ProfileError``/``OSError`` when it cannot be saved."""
    if not base_url:
        raise ServeError("The local vLLM server has no address yet.")
    try:
        existing: EndpointProfile | None = store.get(plan.profile_name)
    except ProfileError:
        existing = None
    if existing is not None and existing.kind != "local-vllm":
        raise ServeError(
            f"An endpoint profile named {plan.profile_name!r} already exists for another kind of server "
            f"({existing.kind}); rename or delete it first."
        )
    base = existing or EndpointProfile(plan.profile_name, "local-vllm")
    profile = replace(base, base_url=base_url.rstrip("/"), model=model)
    store.save(profile)
    return store.get(plan.profile_name)
