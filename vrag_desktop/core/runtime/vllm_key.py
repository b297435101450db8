"""The local vLLM server's API key: passed in vLLM's environment, never on its command line.

Why: a process's arguments are readable by every user of the machine (``ps``, ``/proc/<pid>/cmdline``)
and we write them to the state file and the log's start line; its environment is readable only by
its owner. vLLM reads ``VLLM_API_KEY`` when ``--api-key`` is not given, so the key goes there. A key
that still arrives as ``--api-key X`` / ``--api-key=X`` among extra arguments is *moved* there by
:func:`split_api_key` (the launch goes on, and the argv that is shown or written has no key).
"""

from __future__ import annotations

from collections.abc import Sequence

__all__ = ["API_KEY_ENV", "API_KEY_FLAG", "has_api_key_flag", "split_api_key"]

API_KEY_ENV = "VLLM_API_KEY"
API_KEY_FLAG = "--api-key"


def split_api_key(args: Sequence[str]) -> tuple[list[str], str | None]:
    """``args`` without any ``--api-key X`` / ``--api-key=X``, and the key they gave (the last one
    wins, as in argparse; None: none). A bare ``--api-key`` at the end is dropped (no value)."""
    out: list[str] = []
    key: str | None = None
    items = [str(a) for a in args]
    i = 0
    while i < len(items):
        arg = items[i]
        if arg == API_KEY_FLAG:
            if i + 1 < len(items):
                key = items[i + 1]
            i += 2
            continue
        if arg.startswith(API_KEY_FLAG + "="):
            key = arg[len(API_KEY_FLAG) + 1 :]
        else:
            out.append(arg)
        i += 1
    return out, (key or None)


def has_api_key_flag(args: Sequence[str]) -> bool:
    """Whether ``args`` carry an API key (``--api-key``) at all."""
    return any(str(a) == API_KEY_FLAG or str(a).startswith(API_KEY_FLAG + "=") for a in args)
