"""Endpoint profiles: which server, which model, and where its API key lives.

Profiles persist as JSON in a config dir (never a key in it). Keys go to the OS keyring (service
``vrag-desktop``, username = profile name). Where no keyring backend exists (headless Linux),
storing raises :class:`NoSecureStoreError` saying so; the key can then come from an environment
variable (``VRAG_DESKTOP_API_KEY_<NAME>``, and ``DASHSCOPE_API_KEY`` for DashScope) or be kept in
memory for this session only. Lookup order: session key, keyring, environment.

The *active* profile is the one current model: the app's Ask panel, evaluations and training judges
and ``vrag-desktop ask`` use it unless told otherwise. A fresh data directory has none (no cloud
service is ever chosen for the person), and asking then says how to choose one.

Importing this module stays cheap: ``keyring`` and the ``openai`` client load only when used.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import re
import threading
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field, fields, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from vrag_desktop.core.fsutil import atomic_write_text, set_aside_if_damaged

if TYPE_CHECKING:
    from vrag_desktop.core.endpoints.client import OpenAIChatModel

log = logging.getLogger(__name__)

ProfileKind = Literal["local-vllm", "dashscope", "custom"]
KINDS: tuple[str, ...] = ("local-vllm", "dashscope", "custom")
KEYRING_SERVICE = "vrag-desktop"
PROFILES_FILE = "endpoints.json"
ENV_PREFIX = "VRAG_DESKTOP_API_KEY_"

DASHSCOPE = "DashScope"
LOCAL_VLLM = "Local vLLM"
CUSTOM = "Custom"
DASHSCOPE_BASE_URL = "https://dashscope.aliyuncs.com/compatible-mode/v1"
DASHSCOPE_MODEL = "qwen3.5-plus"
DASHSCOPE_ENV = "DASHSCOPE_API_KEY"
#: What to do when no model is chosen, for the app, the command line and the Python API alike.
NO_MODEL_CHOSEN = (
    "no model is chosen yet. In the app, choose one in the welcome dialog or with Runtime → Make "
    "active; on the command line give --endpoint NAME (a profile: DashScope, Local vLLM, Custom or "
    "one of yours) or --base-url URL --model NAME."
)

_SECRET_NAME = re.compile(r"api[_-]?key|authorization|secret|password", re.I)
_SESSION_LOCK = threading.Lock()
_SESSION_KEYS: dict[tuple[str, str], str] = {}  # (config dir, profile name) -> key, this process only


class ProfileError(ValueError):
    """A profile is invalid or missing (message says which and why)."""


class ApiKeyStoreError(RuntimeError):
    """An API key could not be stored."""


class NoSecureStoreError(ApiKeyStoreError):
    """No keyring backend exists on this machine, so keys cannot be saved securely."""


class NoModelChosenError(ProfileError):
    """No profile is active yet: a fresh data directory chooses no model (least of all a cloud one)
    until the person does."""

    def __init__(self) -> None:
        super().__init__(NO_MODEL_CHOSEN)


@dataclass
class EndpointProfile:
    """One endpoint. ``params`` are default sampling params (temperature, top_p, max_tokens...),
    ``extra_body`` goes into every request (e.g. ``chat_template_kwargs``), ``api_key_env`` names an
    extra environment variable to read the key from."""

    name: str
    kind: ProfileKind
    base_url: str = ""
    model: str = ""
    extra_body: dict[str, Any] = field(default_factory=dict)
    params: dict[str, Any] = field(default_factory=dict)
    connect_timeout: float = 10.0
    total_timeout: float = 600.0
    max_attempts: int = 4
    api_key_env: str = ""

    @property
    def builtin(self) -> bool:
        return self.name in _BUILTIN_NAMES

    @property
    def needs_key(self) -> bool:
        """A local vLLM takes any key; hosted services need one."""
        return self.kind != "local-vllm"

    def env_vars(self) -> list[str]:
        """Environment variables the key is read from, in order."""
        names = [self.api_key_env] if self.api_key_env else []
        names.append(env_var_for(self.name))
        if self.kind == "dashscope":
            names.append(DASHSCOPE_ENV)
        return list(dict.fromkeys(names))

    def validate(self) -> None:
        if not self.name.strip() or len(self.name) > 80 or any(c in self.name for c in "\r\n\t"):
            raise ProfileError(f"invalid profile name {self.name!r}")
        if self.kind not in KINDS:
            raise ProfileError(f"profile {self.name!r}: kind must be one of {', '.join(KINDS)}")
        if self.base_url and not re.match(r"https?://[^\s/]+", self.base_url):
            raise ProfileError(f"profile {self.name!r}: base URL must start with http:// or https://")
        if self.max_attempts < 1 or self.connect_timeout <= 0 or self.total_timeout <= 0:
            raise ProfileError(f"profile {self.name!r}: timeouts and attempts must be positive")
        for where in (self.extra_body, self.params):
            bad = _secret_looking_keys(where)
            if bad:
                raise ProfileError(
                    f"profile {self.name!r}: {bad[0]!r} looks like a credential; keys "
                    "are stored with set_api_key, never in the profile file"
                )

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> EndpointProfile:
        known = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in data.items() if k in known})


def env_var_for(name: str) -> str:
    """``VRAG_DESKTOP_API_KEY_<NAME>``: the name upper-cased, other characters as ``_``."""
    return ENV_PREFIX + (re.sub(r"[^A-Z0-9]+", "_", name.upper()).strip("_") or "DEFAULT")


def builtin_profiles() -> list[EndpointProfile]:
    """DashScope, Local vLLM (URL and model filled in when the app starts the server), Custom."""
    return [
        EndpointProfile(DASHSCOPE, "dashscope", DASHSCOPE_BASE_URL, DASHSCOPE_MODEL),
        EndpointProfile(LOCAL_VLLM, "local-vllm"),
        EndpointProfile(CUSTOM, "custom"),
    ]


_BUILTIN_NAMES = frozenset(p.name for p in builtin_profiles())


def _secret_looking_keys(obj: Any, path: str = "") -> list[str]:
    found: list[str] = []
    if isinstance(obj, Mapping):
        for k, v in obj.items():
            here = f"{path}.{k}" if path else str(k)
            if _SECRET_NAME.search(str(k)):
                found.append(here)
            found += _secret_looking_keys(v, here)
    return found


def secure_store_available() -> bool:
    """Whether ``keyring`` has a real backend here (not the fail / null one)."""
    import keyring
    from keyring.backends import chainer, fail

    backend = keyring.get_keyring()
    if isinstance(backend, fail.Keyring) or type(backend).__module__ == "keyring.backends.null":
        return False
    return not (isinstance(backend, chainer.ChainerBackend) and not backend.backends)


def _read_document(path: Path) -> dict[str, Any]:
    """The one place ``endpoints.json`` is parsed: its document, or ``FileNotFoundError`` (none
    yet), ``OSError`` or ``ValueError`` (damaged: not JSON, not text, not a profiles document)."""
    data = json.loads(path.read_text(encoding="utf-8"))
    if not isinstance(data, dict) or not isinstance(data.get("profiles", []), list):
        raise ValueError("not a profiles document")
    return data


class ProfileStore:
    """The profiles of one config dir, and their keys."""

    def __init__(self, config_dir: str | Path, *, environ: Mapping[str, str] | None = None) -> None:
        """``environ`` (default ``os.environ``) is where env-var keys are looked up."""
        self.config_dir = Path(config_dir)
        self.path = self.config_dir / PROFILES_FILE
        self._environ = environ
        self._lock = threading.RLock()
        self._profiles: dict[str, EndpointProfile] = {p.name: p for p in builtin_profiles()}
        self._active: str | None = None  # no model chosen yet: never a cloud service by default
        self._load()

    # ---- profiles -------------------------------------------------------------------------------
    def _load(self) -> None:
        """Read the file; a damaged one reads as the built-ins and is left as it is (readers never
        write: a listing, ``ask`` choosing its profile, the app's panels): only :meth:`_write` moves
        it aside, to ``endpoints.json.bad``, before it saves over it."""
        try:
            data = _read_document(self.path)
        except FileNotFoundError:
            return
        except (OSError, ValueError) as exc:
            log.warning(
                "endpoint profiles in %s unreadable (%s); using defaults, the file is left as it is "
                "until the next change moves it to %s",
                self.path,
                exc,
                self.path.name + ".bad",
            )
            return
        for entry in data.get("profiles", []):
            try:
                p = EndpointProfile.from_dict(entry)
                if p.builtin:  # a built-in keeps its kind whatever the file says
                    p = replace(p, kind=self._profiles[p.name].kind)
                p.validate()
            except (ValueError, TypeError, AttributeError) as exc:
                log.warning("skipping an invalid endpoint profile in %s: %s", self.path, exc)
                continue
            self._profiles[p.name] = p
        if data.get("active") in self._profiles:
            self._active = data["active"]

    def _set_aside_if_damaged(self) -> None:
        """Before a save: a damaged file on disk (damaged now, whatever it was at load) goes to
        ``endpoints.json.bad``, where a person can read it, rather than being overwritten. A move
        that fails raises ``OSError``: then nothing is saved and nothing lost."""
        bad = set_aside_if_damaged(self.path, _read_document)
        if bad is not None:
            log.warning("endpoint profiles in %s unreadable; moved to %s", self.path, bad.name)

    def _write(self) -> None:
        doc = {
            "version": 1,
            "active": self._active,
            "profiles": [p.to_dict() for p in self._profiles.values()],
        }
        text = json.dumps(doc, indent=2, ensure_ascii=False)
        with _SESSION_LOCK:  # belt and braces: a key typed into some field must not reach the disk
            leaked = [n for (d, n), k in _SESSION_KEYS.items() if d == self._dir_key and k and k in text]
        if leaked:
            raise ProfileError(f"refusing to save profiles: the API key of {leaked[0]!r} appears in a field")
        self._set_aside_if_damaged()
        atomic_write_text(self.path, text + "\n", mkdir=True)

    def names(self) -> list[str]:
        with self._lock:
            return list(self._profiles)

    def profiles(self) -> list[EndpointProfile]:
        with self._lock:
            return [replace(p) for p in self._profiles.values()]

    def get(self, name: str | None) -> EndpointProfile:
        """Profile ``name``; None or "" (the active one of a store where none is chosen) raises
        :class:`NoModelChosenError`, saying how to choose one."""
        if not name:
            raise NoModelChosenError()
        with self._lock:
            if name not in self._profiles:
                raise ProfileError(f"no endpoint profile named {name!r}")
            return replace(self._profiles[name])

    def save(self, profile: EndpointProfile) -> None:
        """Add or replace a profile (built-ins keep their kind) and write the file."""
        profile.validate()
        with self._lock:
            if profile.builtin and profile.kind != self._profiles[profile.name].kind:
                raise ProfileError(
                    f"{profile.name!r} is a built-in {self._profiles[profile.name].kind} profile"
                )
            self._profiles[profile.name] = replace(profile)
            self._write()

    def delete(self, name: str) -> None:
        """Remove a user profile and forget its key. Built-ins cannot go (see :meth:`reset`)."""
        with self._lock:
            self.get(name)
            if name in _BUILTIN_NAMES:
                raise ProfileError(f"{name!r} is built in and cannot be deleted (reset it instead)")
            del self._profiles[name]
            if self._active == name:
                self._active = None  # the person chooses the next one; no silent fallback
            self._write()
        self.forget_api_key(name)

    def reset(self, name: str) -> None:
        """Put a built-in profile back to its defaults (its key is kept)."""
        with self._lock:
            default = {p.name: p for p in builtin_profiles()}.get(name)
            if default is None:
                raise ProfileError(f"{name!r} is not a built-in profile")
            self._profiles[name] = default
            self._write()

    @property
    def active(self) -> str | None:
        """The current model: the profile the app's Ask panel, evaluations, training judges and
        ``vrag-desktop ask`` use unless told otherwise. None until the person chooses one."""
        return self._active

    def set_active(self, name: str | None) -> None:
        """Make ``name`` the current model (None: no model chosen)."""
        with self._lock:
            if name is not None:
                self.get(name)
            self._active = name
            self._write()

    def set_local_server(self, base_url: str, model: str) -> EndpointProfile:
        """Called by the app once it started vLLM: record where it listens and its served name."""
        with self._lock:
            profile = replace(self._profiles[LOCAL_VLLM], base_url=base_url.rstrip("/"), model=model)
            self.save(profile)
            return replace(profile)

    # ---- keys -----------------------------------------------------------------------------------
    @property
    def _dir_key(self) -> str:
        return str(self.config_dir.resolve())

    def set_api_key(self, name: str, key: str, *, session_only: bool = False) -> str:
        """Store ``name``'s key in the keyring, or in memory for this process (``session_only``).
        Returns ``"keyring"`` or ``"session"``. Raises :class:`NoSecureStoreError` when there is no
        keyring (the message lists the alternatives)."""
        profile = self.get(name)
        if not key:
            self.forget_api_key(name)
            return "session" if session_only else "keyring"
        if session_only:
            with _SESSION_LOCK:
                _SESSION_KEYS[(self._dir_key, name)] = key
            return "session"
        import keyring
        import keyring.errors

        if not secure_store_available():
            raise NoSecureStoreError(self._no_store_message(profile))
        try:
            keyring.set_password(KEYRING_SERVICE, name, key)
        except keyring.errors.NoKeyringError:
            raise NoSecureStoreError(self._no_store_message(profile)) from None
        except keyring.errors.KeyringError as exc:
            raise ApiKeyStoreError(
                f"the system keyring refused to store the API key for {name!r} "
                f"({type(exc).__name__}); keep it for this session or set "
                f"{profile.env_vars()[0]}"
            ) from None
        with _SESSION_LOCK:  # the stored key now wins over an older session one
            _SESSION_KEYS.pop((self._dir_key, name), None)
        return "keyring"

    @staticmethod
    def _no_store_message(profile: EndpointProfile) -> str:
        env = " or ".join(profile.env_vars())
        return (
            f"No secure credential store (system keyring) is available on this machine, so the "
            f"API key for {profile.name!r} cannot be saved. Either keep it for this session only "
            f"(it is forgotten when the app quits), or set the environment variable {env} before "
            "starting VRAG Desktop."
        )

    def forget_api_key(self, name: str) -> None:
        """Drop the session key and the keyring entry (if any) of ``name``."""
        with _SESSION_LOCK:
            _SESSION_KEYS.pop((self._dir_key, name), None)
        if not secure_store_available():
            return
        import keyring
        import keyring.errors

        with contextlib.suppress(keyring.errors.KeyringError):  # nothing stored, or store locked
            keyring.delete_password(KEYRING_SERVICE, name)

    def api_key_source(self, name: str) -> str | None:
        """Where ``name``'s key comes from: ``"session"``, ``"keyring"``, ``"env:<VAR>"``, None."""
        return self._lookup(name)[1]

    def api_key(self, name: str) -> str | None:
        """``name``'s key: session, then keyring, then environment variables."""
        return self._lookup(name)[0]

    def _lookup(self, name: str) -> tuple[str | None, str | None]:
        profile = self.get(name)
        with _SESSION_LOCK:
            key = _SESSION_KEYS.get((self._dir_key, name))
        if key:
            return key, "session"
        if secure_store_available():
            import keyring
            import keyring.errors

            try:
                key = keyring.get_password(KEYRING_SERVICE, name)
            except keyring.errors.KeyringError as exc:
                log.warning("keyring lookup for %r failed: %s", name, type(exc).__name__)
                key = None
            if key:
                return key, "keyring"
        env = os.environ if self._environ is None else self._environ
        for var in profile.env_vars():
            if env.get(var):
                return env[var], f"env:{var}"
        return None, None

    # ---- models ---------------------------------------------------------------------------------
    def to_model(self, name: str | None = None, **overrides: Any) -> OpenAIChatModel:
        """An :class:`OpenAIChatModel` for profile ``name`` (default: the active one) with its key.
        ``overrides`` go to the client's constructor. Raises :class:`NoModelChosenError` when no
        name is given and none is active."""
        from vrag_desktop.core.endpoints.client import OpenAIChatModel

        profile = self.get(name or self._active)
        if not profile.base_url:
            hint = " (the app fills it in when it starts the server)" if profile.kind == "local-vllm" else ""
            raise ProfileError(f"profile {profile.name!r} has no base URL yet{hint}")
        if not profile.model:
            raise ProfileError(f"profile {profile.name!r} names no model")
        kwargs: dict[str, Any] = {
            "connect_timeout": profile.connect_timeout,
            "total_timeout": profile.total_timeout,
            "max_attempts": profile.max_attempts,
            "extra_body": profile.extra_body,
            "default_params": profile.params,
            **overrides,
        }
        return OpenAIChatModel(profile.base_url, profile.model, self.api_key(profile.name), **kwargs)
