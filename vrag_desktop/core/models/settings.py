"""Where models come from: the hub endpoint (a mirror), offline mode, the token, local folders.

The command line reads these too, so they live with the data in ``<data>/config/models.json``
(docs/formats.md, "Where a setting lives"); the token never does: it goes to the system keyring
(service ``vrag-desktop``, as the endpoint profiles' keys), or stays in memory for this session,
or comes from ``HF_TOKEN`` / ``hf auth login``.

Offline mode is absolute: with it on (or ``HF_HUB_OFFLINE`` set) no function here or in the
downloader opens a connection; each network action raises :class:`OfflineError` instead.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import threading
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path

from vrag_desktop.core.fsutil import atomic_write_json, set_aside_if_damaged
from vrag_desktop.core.models.errors import ModelError, OfflineError
from vrag_desktop.core.paths import DataLayout

log = logging.getLogger(__name__)

SETTINGS_FILE = "models.json"
DEFAULT_ENDPOINT = "https://huggingface.co"
#: The keyring entry of the Hugging Face token (service ``vrag-desktop``, as endpoint keys).
TOKEN_USERNAME = "huggingface-token"
_TRUE = {"1", "true", "yes", "on"}

_SESSION_TOKENS: dict[str, str] = {}
_SESSION_LOCK = threading.Lock()


@dataclass(frozen=True)
class ModelSettings:
    """``endpoint`` None: ``$HF_ENDPOINT`` or the Hugging Face Hub. ``local_folders``: model folders
    the person added (shown in the list; never deleted by the app)."""

    endpoint: str | None = None
    offline: bool = False
    local_folders: tuple[str, ...] = field(default_factory=tuple)

    @property
    def effective_endpoint(self) -> str:
        return (self.endpoint or os.environ.get("HF_ENDPOINT") or DEFAULT_ENDPOINT).rstrip("/")

    def offline_reason(self) -> str | None:
        """Why nothing may go to the network, or None when it may."""
        if self.offline:
            return "offline mode is on (Settings → Models, or `vrag-desktop models settings --online`)"
        for var in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE"):
            if os.environ.get(var, "").strip().lower() in _TRUE:
                return f"offline: {var} is set in the environment"
        return None

    def require_online(self, action: str) -> None:
        """Raise :class:`OfflineError` naming ``action`` when offline."""
        reason = self.offline_reason()
        if reason:
            raise OfflineError(f"cannot {action}: {reason}")


def settings_path(layout: DataLayout) -> Path:
    return layout.config / SETTINGS_FILE


def _read_document(path: Path) -> object:
    """The one place ``models.json`` is parsed (``OSError``/``ValueError``: damaged)."""
    return json.loads(path.read_text(encoding="utf-8"))


def load_settings(layout: DataLayout) -> ModelSettings:
    """The saved settings; defaults when there are none or the file is damaged. A damaged file is
    left as it is (readers never write: a listing, a status, the update check); a save
    (:func:`update_settings`) moves it aside to ``models.json.bad`` first."""
    path = settings_path(layout)
    try:
        raw = _read_document(path)
    except FileNotFoundError:
        return ModelSettings()
    except (OSError, ValueError) as exc:
        log.warning("model settings %s unreadable (%s); using defaults", path, exc)
        return ModelSettings()
    if not isinstance(raw, dict):
        return ModelSettings()
    endpoint = raw.get("endpoint")
    folders = raw.get("local_folders") or []
    return ModelSettings(
        endpoint=endpoint if isinstance(endpoint, str) and endpoint.strip() else None,
        offline=bool(raw.get("offline", False)),
        local_folders=tuple(str(f) for f in folders if isinstance(f, str)),
    )


def save_settings(layout: DataLayout, settings: ModelSettings) -> None:
    if settings.endpoint is not None:
        check_endpoint(settings.endpoint)
    data = {**asdict(settings), "local_folders": list(settings.local_folders), "schema_version": 1}
    atomic_write_json(settings_path(layout), data, mkdir=True)


def update_settings(layout: DataLayout, **changes: object) -> ModelSettings:
    """Load, change some fields, save (a damaged file moved aside first); returns the new settings."""
    set_aside_if_damaged(settings_path(layout), _read_document)
    new = replace(load_settings(layout), **changes)  # type: ignore[arg-type]
    save_settings(layout, new)
    return new


def check_endpoint(url: str) -> str:
    """``url`` without a trailing slash, or :class:`ModelError` when it is not an http(s) URL."""
    from urllib.parse import urlsplit

    parts = urlsplit(url.strip())
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise ModelError(f"the hub endpoint must be an http(s) URL such as {DEFAULT_ENDPOINT}, not {url!r}")
    return url.strip().rstrip("/")


# ---------------------------------------------------------------- the token


def _key(layout: DataLayout) -> str:
    return str(layout.root.resolve())


def set_token(layout: DataLayout, token: str, *, session_only: bool = False) -> str:
    """Keep the Hugging Face token in the keyring (``"keyring"``) or for this process only
    (``"session"``). Raises :class:`ModelError` when no keyring exists and ``session_only`` is off."""
    from vrag_desktop.core.endpoints.profiles import KEYRING_SERVICE, secure_store_available

    token = token.strip()
    if not token:
        forget_token(layout)
        return "session" if session_only else "keyring"
    if session_only:
        with _SESSION_LOCK:
            _SESSION_TOKENS[_key(layout)] = token
        return "session"
    import keyring
    import keyring.errors

    if not secure_store_available():
        raise ModelError(
            "no system keyring on this machine, so the token cannot be saved: keep it for this session "
            "only, or set HF_TOKEN in the environment"
        )
    try:
        keyring.set_password(KEYRING_SERVICE, TOKEN_USERNAME, token)
    except keyring.errors.KeyringError as exc:
        raise ModelError(
            f"the system keyring refused the token ({type(exc).__name__}); set HF_TOKEN instead"
        ) from None
    with _SESSION_LOCK:
        _SESSION_TOKENS.pop(_key(layout), None)
    return "keyring"


def forget_token(layout: DataLayout) -> None:
    from vrag_desktop.core.endpoints.profiles import KEYRING_SERVICE, secure_store_available

    with _SESSION_LOCK:
        _SESSION_TOKENS.pop(_key(layout), None)
    if secure_store_available():
        import keyring
        import keyring.errors

        with contextlib.suppress(keyring.errors.KeyringError):
            keyring.delete_password(KEYRING_SERVICE, TOKEN_USERNAME)


def stored_token(layout: DataLayout) -> tuple[str | None, str | None]:
    """``(token, source)`` from the session or the keyring only (never the network)."""
    from vrag_desktop.core.endpoints.profiles import KEYRING_SERVICE, secure_store_available

    with _SESSION_LOCK:
        token = _SESSION_TOKENS.get(_key(layout))
    if token:
        return token, "session"
    if secure_store_available():
        import keyring
        import keyring.errors

        try:
            token = keyring.get_password(KEYRING_SERVICE, TOKEN_USERNAME)
        except keyring.errors.KeyringError as exc:
            log.warning("keyring lookup of the Hugging Face token failed: %s", type(exc).__name__)
            token = None
        if token:
            return token, "keyring"
    if os.environ.get("HF_TOKEN"):
        return os.environ["HF_TOKEN"], "env:HF_TOKEN"
    return None, None


def resolve_token(layout: DataLayout) -> str | None:
    """The token to send: the app's own, else ``hf auth login``'s (read from its file)."""
    token, _ = stored_token(layout)
    if token:
        return token
    try:
        from huggingface_hub import get_token

        return get_token()
    except Exception:  # a broken login file must not stop a public download
        return None
