"""Whether the current model can answer, from what is known without a network call.

Why a rule of its own: the app disables Ask while a question could only fail (no model chosen, a
DashScope profile without a key, the local vLLM server not running) and says in one line why and
where it is fixed; the command line can say the same before it starts. Only facts the app holds are
used — the profile, where its key would come from, the state files of the servers the app and the
command line supervise, and whether the model the local server would start is on disk (the models
folder, or Hugging Face's cache where vLLM would find it). A URL that was never tested, or did not
answer last time, is *not* a reason: only trying tells, and a run says clearly when it cannot connect.

:func:`readiness` is pure (tested without Qt or a network); :func:`known_for` gathers the facts
(a keyring lookup and a few state files: call it off a GUI thread); :func:`check` does both.
"""

from __future__ import annotations

import contextlib
import os
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from vrag_desktop.core.endpoints.profiles import LOCAL_VLLM, EndpointProfile, ProfileError

if TYPE_CHECKING:
    from vrag_desktop.core.endpoints.profiles import ProfileStore

#: Where a problem is fixed: choose a model, add a key, the local server, the profile's fields, the
#: Models view (download the model the local server would start).
Fix = Literal["", "choose", "key", "server", "endpoint", "models"]
#: The app's own vLLM server, as its Runtime panel knows it.
AppServer = Literal["stopped", "starting", "ready", "stopping", "crashed"]


@dataclass(frozen=True)
class LocalServer:
    """A vLLM server the app or ``vrag-desktop runtime start`` supervises (from its state file)."""

    base_url: str
    ready: bool


@dataclass(frozen=True)
class Known:
    """What the app knows about a profile without asking the network.

    ``has_key``: a key is set (session, keyring or environment); ``servers``: supervised servers
    running now; ``app_server``: the state of the server this app started (``stopped`` when none);
    ``missing_model``: the Hugging Face id the local server would start (its settings) when it is
    neither downloaded to the models folder nor in Hugging Face's cache ("" otherwise).
    """

    has_key: bool = False
    servers: tuple[LocalServer, ...] = ()
    app_server: AppServer = "stopped"
    missing_model: str = ""


@dataclass(frozen=True)
class Readiness:
    """Ready, or one line saying why not, with what fixes it (``fix``) and a button's words
    (``action``); ``model``: the model the fix is about (``fix == "models"``: the one to download)."""

    ready: bool
    reason: str = ""
    fix: Fix = ""
    action: str = ""
    profile: str | None = None
    model: str = ""


def _same_url(a: str, b: str) -> bool:
    return bool(a) and a.rstrip("/") == b.rstrip("/")


def readiness(profile: EndpointProfile | None, known: Known) -> Readiness:
    """Can ``profile`` (None: no model chosen) answer, as far as ``known`` tells?"""
    if profile is None:
        return Readiness(False, "No model is chosen yet.", "choose", "Choose a model…")
    name = profile.name
    edit = f"Edit {name}…"
    if profile.kind == "local-vllm" and name == LOCAL_VLLM:
        return _local(profile, known)
    if not profile.base_url:
        return Readiness(False, f"{name} has no server address yet.", "endpoint", edit, name)
    if not profile.model:
        return Readiness(False, f"{name} names no model.", "endpoint", edit, name)
    if profile.kind == "dashscope" and not known.has_key:
        return Readiness(False, "DashScope needs an API key.", "key", "Add the key…", name)
    return Readiness(True, profile=name)


def _local(profile: EndpointProfile, known: Known) -> Readiness:
    """The app's Local vLLM profile answers only while a server it supervises serves its address."""
    name = profile.name
    url = profile.base_url
    if url and any(s.ready and _same_url(s.base_url, url) for s in known.servers):
        return Readiness(True, profile=name)
    if known.app_server == "starting" or any(not s.ready for s in known.servers):
        return Readiness(False, "The local vLLM server is still starting.", "server", "Show the server", name)
    if known.app_server == "stopping":
        return Readiness(False, "The local vLLM server is stopping.", "server", "Show the server", name)
    if known.app_server == "crashed":
        return Readiness(
            False, "The local vLLM server stopped unexpectedly.", "server", "Show the server", name
        )
    if known.app_server == "ready":  # serving, but not where the profile points (edited meanwhile)
        return Readiness(
            False,
            "The local vLLM server serves another address than the profile.",
            "server",
            "Show the server",
            name,
        )
    if known.missing_model:  # a server would first have to fetch it (gigabytes, unseen): download it here
        model = known.missing_model
        return Readiness(
            False, f"The local model {model} is not downloaded yet.", "models", "Download it…", name, model
        )
    return Readiness(False, "The local vLLM server is not running.", "server", "Start the server…", name)


def local_servers(runtime_dir: str | os.PathLike[str]) -> tuple[LocalServer, ...]:
    """The supervised vLLM servers alive now, read from their state files without changing any (the
    app's leftover scan is what removes stale ones)."""
    from vrag_desktop.core.runtime.state import STATE_SUFFIX, StateFile, recorded_process

    folder = Path(runtime_dir)
    found = []
    with contextlib.suppress(OSError):
        for path in sorted(folder.glob(f"*{STATE_SUFFIX}")):
            state = StateFile(path).peek()
            if not state or not state.get("base_url") or state.get("stopping_at"):
                continue
            if recorded_process(state) is not None:
                found.append(LocalServer(str(state["base_url"]), bool(state.get("ready_at"))))
    return tuple(found)


def missing_local_model(data_dir: str | os.PathLike[str]) -> str:
    """The Hugging Face id the app's local vLLM server would start (``config/vllm.json``) when no copy
    of it is on this machine — not in the models folder, not in Hugging Face's cache — else "".
    Files only: no network, nothing written (a local folder or an empty setting is never missing)."""
    from vrag_desktop.core.runtime.settings import read_vllm_settings

    model = read_vllm_settings(data_dir).model.strip()  # defaults ("") when missing or damaged
    if not model:
        return ""
    parts = model.split("/")
    if len(parts) != 2 or not all(parts) or os.path.exists(os.path.expanduser(model)):
        return ""
    from vrag_desktop.core.models.store import ModelStore
    from vrag_desktop.core.paths import DataLayout

    if ModelStore(DataLayout(Path(data_dir))).downloaded_path(model) is not None or _in_hf_cache(model):
        return ""
    return model


def _in_hf_cache(repo_id: str) -> bool:
    """A snapshot of ``repo_id`` with its config in Hugging Face's cache (vLLM loads it from there)."""
    env = os.environ
    cache = env.get("HF_HUB_CACHE") or os.path.join(
        env.get("HF_HOME") or os.path.join(env.get("XDG_CACHE_HOME") or "~/.cache", "huggingface"), "hub"
    )
    snapshots = Path(os.path.expanduser(cache)) / f"models--{repo_id.replace('/', '--')}" / "snapshots"
    with contextlib.suppress(OSError):
        return any((s / "config.json").exists() for s in snapshots.iterdir())
    return False


def known_for(
    store: ProfileStore,
    profile: EndpointProfile | None,
    data_dir: str | os.PathLike[str],
    app_server: AppServer = "stopped",
) -> Known:
    """Gather what :func:`readiness` needs for ``profile`` (may block on the keyring: not on a GUI
    thread). Only what the profile's rule reads is looked up."""
    from vrag_desktop.core.runtime.settings import runtime_dir

    if profile is None:
        return Known(app_server=app_server)
    has_key = False
    if profile.kind == "dashscope":
        with contextlib.suppress(ProfileError):
            has_key = store.api_key_source(profile.name) is not None
    servers: tuple[LocalServer, ...] = ()
    missing = ""
    if profile.kind == "local-vllm":
        servers = local_servers(runtime_dir(data_dir))
        if profile.name == LOCAL_VLLM:
            missing = missing_local_model(data_dir)
    return Known(has_key=has_key, servers=servers, app_server=app_server, missing_model=missing)


def check(store: ProfileStore, data_dir: str | os.PathLike[str], name: str | None = None) -> Readiness:
    """The readiness of profile ``name`` (None: the active one) for a process that runs no server of
    its own (the command line, a script)."""
    chosen = name or store.active
    profile = store.get(chosen) if chosen else None
    return readiness(profile, known_for(store, profile, data_dir))


__all__ = [
    "Known",
    "LocalServer",
    "Readiness",
    "check",
    "known_for",
    "local_servers",
    "missing_local_model",
    "readiness",
]
