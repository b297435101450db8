"""Words for endpoint profiles, their keys and connection checks: pure functions, no widgets.

Why pure: the key's origin must be described without ever touching the key, and tests check
these sentences without a window.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from vrag_desktop.core.endpoints.client import ConnectionCheck

KIND_LABELS = {
    "local-vllm": "Local vLLM server",
    "dashscope": "DashScope (Alibaba Cloud)",
    "custom": "OpenAI-compatible",
}
_VERDICT_HEAD = {
    "unreachable": "Cannot connect",
    "auth": "Key rejected",
    "not_found": "Model not found",
    "timeout": "No answer",
    "rate_limit": "Rate limited",
    "server": "Server error",
}


_KEY_WORDS = {  # source -> (where the key is, the key field's placeholder)
    "keyring": ("Key stored in the system keyring", "In the system keyring; type to replace"),
    "session": (
        "Key kept for this session only (forgotten when the app quits)",
        "Kept for this session; type to replace",
    ),
}


def key_source_text(source: str | None, needs_key: bool, env_vars: list[str] | None = None) -> str:
    """Where a key comes from, in words (never the key)."""
    if source in _KEY_WORDS:
        return _KEY_WORDS[source][0]
    if source and source.startswith("env:"):
        return f"Key from ${source[4:]}"
    if not needs_key:
        return "No key needed for a local server"
    alt = f" (or set ${env_vars[-1]})" if env_vars else ""
    return f"No key set{alt}"


def key_placeholder(source: str | None) -> str:
    """Short enough for the key field: where the key is, and that typing replaces it."""
    if source in _KEY_WORDS:
        return _KEY_WORDS[source][1]
    if source and source.startswith("env:"):
        return f"From ${source[4:]}; type to override"
    return "Type or paste the API key"


def verdict_text(check: ConnectionCheck, model: str) -> tuple[str, str]:
    """(headline, detail) for a connection check."""
    if check.ok:
        n = len(check.models)
        ms = f", {check.latency * 1000:.0f} ms" if check.latency is not None else ""
        head = f"Connected: {n} model{'s' if n != 1 else ''}{ms}"
        return head, check.message
    head = _VERDICT_HEAD.get(check.kind or "", "Connection failed")
    if check.kind == "auth" and "none is set" in check.message:
        head = "Key needed"
    return head, check.message
