"""The vLLM server a ``vllm_mode: app_server`` run samples its rollouts from: what it must be
started with, and what is wrong with the one running.

Why here: the New-run dialog offers to start that server through the app's own runtime supervisor
(the Runtime dock's vLLM section) and must know the flags; the CLI user reads the same reasons.
The trainer needs (trainer/vrag_trainer/vllm_http.py): the weights the run starts from (the base
model, or a warm start's full weights: the adapter trains on top of them), LoRA adapters loaded
at run time (``--enable-lora``, ``VLLM_ALLOW_RUNTIME_LORA_UPDATING``) up to the run's rank (a
``--max-lora-rank`` vLLM accepts), token ids with images (``--enable-scale-out``), a context of at
least ``max_model_len`` and room for ``max_images`` images a prompt.

The command line has no dialog: :func:`check_app_server` finds the server at ``vllm_url`` through
the state files ``runtime start`` and the app write (their recorded flags), probes it, and asks the
same :func:`rollout_problem`, so both doors say the same words before a trainer starts.
"""

from __future__ import annotations

import os
import shlex
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from vrag_desktop.core.runtime.vllm import VLLM_LORA_RANKS

if TYPE_CHECKING:
    from vrag_desktop.core.runtime.settings import VLLMSettings
    from vrag_desktop.core.runtime.state import RecordedProcess
    from vrag_desktop.core.runtime.vllm import VLLMConfig
    from vrag_desktop.core.training.config import TrainConfig

__all__ = [
    "CANNOT_START",
    "ServerCheck",
    "check_app_server",
    "needs_rollout_server",
    "rollout_problem",
    "rollout_rank",
    "rollout_settings",
    "served_model",
    "start_command",
]


#: How :func:`rollout_problem` begins when no server could serve the run (no button to offer).
CANNOT_START = "the rollout server cannot be started for this run"


def needs_rollout_server(cfg: TrainConfig) -> bool:
    return cfg.generator == "vllm" and cfg.vllm_mode == "app_server"


def rollout_rank(cfg: TrainConfig) -> int:
    """The smallest ``--max-lora-rank`` vLLM accepts that holds the run's adapter."""
    rank = int(cfg.lora.rank)
    return next((r for r in VLLM_LORA_RANKS if r >= rank), rank)


def served_model(cfg: TrainConfig) -> str:
    """The weights the rollout server must serve: those the run starts from. Raises ``ValueError``
    when they exist only once the run starts (a LoRA warm start, merged into the run's folder then)
    or ``init_from`` is refused (``ConfigError``)."""
    if not cfg.init_from:
        return cfg.model
    from vrag_desktop.core.training.warmstart import check_init_from

    start = check_init_from(cfg)
    if start is None:
        return cfg.model
    if start.adapter:
        raise ValueError(
            f"init_from is a LoRA adapter ({start.describe()}), merged into the run's folder only when "
            "the run starts, so no server can serve it before: export that run (merged) and start from "
            "its export"
        )
    return str(start.path)


def rollout_settings(base: VLLMSettings, cfg: TrainConfig) -> VLLMSettings:
    """``base`` (the Runtime dock's settings: environment, port, memory share, dtype…) serving the
    weights the run starts from with the flags its rollouts need; larger limits already set are
    kept. Raises ``ValueError`` as :func:`served_model`."""
    return replace(
        base,
        model=served_model(cfg),
        served_model_name="",
        max_model_len=max(cfg.max_model_len, base.max_model_len or 0),
        limit_images=max(cfg.max_images, base.limit_images or 0),
        runtime_lora=True,
        max_lora_rank=max(rollout_rank(cfg), base.max_lora_rank or 0),
        scale_out=True,
    )


def _same_model(server: VLLMConfig, model: str) -> bool:
    """``server`` serves ``model``: the same name or folder, or the hub id whose downloaded copy it
    serves under that id (:meth:`VLLMConfig.from_models_folder`)."""
    if model in (server.model, server.served_model_name):
        return True
    pa, pb = Path(os.path.expanduser(server.model)), Path(os.path.expanduser(model))
    return pa.exists() and pb.exists() and pa.resolve() == pb.resolve()


def rollout_problem(cfg: TrainConfig, server: VLLMConfig | None, ready: bool) -> str | None:
    """Why the app's server (``server``, None when none was started; ``ready`` when it answers)
    cannot serve this run's rollouts, in words for the person; None when it can."""
    if not needs_rollout_server(cfg):
        return None
    try:
        model = served_model(cfg)
    except ValueError as exc:
        return f"{CANNOT_START}: {exc}"
    if server is None or not ready:
        return "the rollout server (the app's vLLM server) is not running"
    why = []
    if not _same_model(server, model):
        why.append(f"it serves {server.model}, the run starts from {model}")
    if not server.runtime_lora:
        why.append("it cannot load adapters while it runs (--enable-lora, runtime LoRA updating)")
    elif (server.max_lora_rank or 16) < cfg.lora.rank:
        why.append(
            f"its --max-lora-rank {server.max_lora_rank or 16} is below the run's LoRA rank {cfg.lora.rank}"
        )
    if not server.scale_out:
        why.append("it was started without --enable-scale-out (turns with images)")
    if server.max_model_len and server.max_model_len < cfg.max_model_len:
        why.append(f"its context {server.max_model_len} is shorter than max_model_len {cfg.max_model_len}")
    limit = (server.limit_mm_per_prompt or {}).get("image")
    if limit is not None and limit < cfg.max_images:
        why.append(f"it takes {limit} images a prompt, the run up to {cfg.max_images}")
    if not why:
        return None
    return "the running vLLM server cannot serve this run's rollouts: " + "; ".join(why)


# ---- the command line's check: the background server a state file records -------------------------
@dataclass(frozen=True)
class ServerCheck:
    """What :func:`check_app_server` found: ``problem`` (the run must not start: one line, with the
    command that fixes it), or a ``warning`` to say once before it starts (flags not checkable)."""

    problem: str | None = None
    warning: str | None = None


def start_command(cfg: TrainConfig) -> str:
    """The ``vrag-desktop runtime start`` line that serves this run's rollouts at its ``vllm_url``
    (the flags :func:`rollout_settings` gives the app's server). Raises ``ValueError`` as
    :func:`served_model`."""
    argv = ["vrag-desktop", "runtime", "start", served_model(cfg), "--enable-lora"]
    argv += ["--max-lora-rank", str(rollout_rank(cfg)), "--enable-scale-out"]
    argv += ["--max-model-len", str(cfg.max_model_len), "--limit-images", str(cfg.max_images)]
    where = _address(cfg.vllm_url)
    return shlex.join(argv + (["--port", str(where[1])] if where else []))


def _address(url: str) -> tuple[str, int] | None:
    """``(host, port)`` of a URL, every loopback name as one; None when it has no host."""
    try:
        parts = urlsplit(url.strip())
        port = parts.port or (443 if parts.scheme == "https" else 80)
    except ValueError:
        return None
    host = (parts.hostname or "").lower()
    if not host:
        return None
    from vrag_desktop.core.search.guard import is_loopback, is_wildcard

    this_machine = is_loopback(host) or is_wildcard(host)  # a server bound to every address too
    return ("loopback" if this_machine else host), port


def _recorded(data_dir: str | os.PathLike[str]) -> list[RecordedProcess]:
    """The live vLLM servers the state files record: the command line's, then the app's. Read only:
    a stale file is left for ``runtime status`` (or the app's next launch) to clean up."""
    from vrag_desktop.core.runtime.settings import app_state_path, cli_state_path
    from vrag_desktop.core.runtime.state import RecordedProcess, StateFile, recorded_process

    found = []
    for path in (cli_state_path(data_dir), app_state_path(data_dir)):
        state = StateFile(path).peek()
        if state is not None and isinstance(state.get("pid"), int) and recorded_process(state) is not None:
            found.append(RecordedProcess(StateFile(path), state))
    return found


def _no_answer(info: dict[str, Any]) -> str:
    if info.get("error"):
        return str(info["error"])
    if info.get("health") not in (None, 200):
        return f"/health answered {info['health']}"
    return f"/v1/models lists {info.get('models') or 'nothing'}"


def check_app_server(
    cfg: TrainConfig,
    data_dir: str | os.PathLike[str],
    *,
    api_key: str | None = None,
    timeout: float = 10.0,
) -> ServerCheck:
    """Whether the server at ``cfg.vllm_url`` can serve this run's rollouts, checked from the
    command line before a trainer starts (the app's New-run dialog checks its own server).

    A server a state file records (``runtime start``, or the app's) at that address is probed
    (``/health`` and ``/v1/models`` with ``api_key``, the one the trainer will send) and judged
    from its recorded flags by :func:`rollout_problem`, the dialog's own words. One answering there
    that no state file records (started by hand) cannot be judged: a warning. Nothing answering is
    refused, naming the recorded server's address when it serves elsewhere."""
    from vrag_desktop.core.runtime.vllm import config_from_state, server_info

    if not needs_rollout_server(cfg) or cfg.algorithm == "sft":  # SFT samples nothing
        return ServerCheck()
    cannot = rollout_problem(cfg, None, ready=False)
    if cannot is not None and cannot.startswith(CANNOT_START):
        return ServerCheck(cannot)
    url, fix = cfg.vllm_url, start_command(cfg)
    servers = _recorded(data_dir)
    here = [r for r in servers if _address(str(r.state.get("base_url") or "")) == _address(url)]
    if here:
        rec = here[0]
        info = server_info(str(rec.state["base_url"]), timeout=timeout, api_key=api_key)
        ready = info["health"] == 200 and rec.state.get("served_model_name") in info["models"]
        ready = ready and not rec.state.get("stopping_at")
        problem = rollout_problem(cfg, config_from_state(rec.state), ready)
        if problem is None:
            return ServerCheck()
        app = rec.state.get("mode") == "app"
        if not ready:
            wait = "the app's Runtime dock" if app else "'vrag-desktop runtime status'"
            how = f"wait until {wait} says it is ready"
            if str(info.get("error") or "").startswith("/v1/models answered 401"):
                how = "the trainer sends $VLLM_API_KEY as its key: set it to the server's"
            return ServerCheck(f"{problem}: {rec.describe()} does not serve yet ({_no_answer(info)}); {how}")
        if "runtime_lora" not in rec.state:
            problem += " (its state file, from an older version, does not record its flags)"
        if app:
            return ServerCheck(
                f"{problem}; restart it from the app's New-run dialog, or stop it in the Runtime "
                f"dock and run: {fix}"
            )
        return ServerCheck(f"{problem}; stop it (vrag-desktop runtime stop) and run: {fix}")
    info = server_info(url, timeout=timeout, api_key=api_key)
    if info["health"] == 200:
        listed = ", ".join(str(m) for m in info["models"]) or "nothing"
        note = f"; {info['error']}" if info["error"] else ""
        return ServerCheck(
            warning=f"the vLLM server at {url} (serving {listed}{note}) was not started by vrag-desktop, "
            f"so its flags cannot be checked; the run needs what this command gives: {fix}"
        )
    if servers:
        other, base = servers[0], servers[0].state.get("base_url")
        return ServerCheck(
            f"nothing answers at vllm_url {url} ({_no_answer(info)}); the vLLM server a state file "
            f"records (pid {other.pid}, {other.state.get('served_model_name')}) serves at {base}: set "
            f"vllm_url to that (--set vllm_url={base}), or start one at {url} with: {fix}"
        )
    return ServerCheck(f"{cannot} (nothing answers at {url}: {_no_answer(info)}); start it with: {fix}")
