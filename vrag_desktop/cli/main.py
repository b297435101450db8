"""``vrag-desktop`` command line: the parser and the dispatch; each command group has its module.

Heavy libraries are imported inside the commands that need them, so ``--help`` is instant.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence

from vrag_desktop import __version__
from vrag_desktop.cli.common import EXIT_ERROR, EXIT_INTERRUPTED, EXIT_OK, CLIError

__all__ = ["EXIT_ERROR", "EXIT_INTERRUPTED", "EXIT_OK", "CLIError", "main"]


def _parser() -> argparse.ArgumentParser:
    from vrag_desktop.cli import ask as cli_ask
    from vrag_desktop.cli import cache as cli_cache
    from vrag_desktop.cli import endpoints as cli_endpoints
    from vrag_desktop.cli import eval as cli_eval
    from vrag_desktop.cli import index as cli_index
    from vrag_desktop.cli import models as cli_models
    from vrag_desktop.cli import runtime as cli_runtime
    from vrag_desktop.cli import search as cli_search
    from vrag_desktop.cli import train as cli_train
    from vrag_desktop.cli import update as cli_update

    p = argparse.ArgumentParser(
        prog="vrag-desktop",
        description="Multimodal retrieval-augmented reasoning over your own documents, images and videos. "
        "Without a command, opens the desktop app.",
    )
    p.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    p.add_argument(
        "--data-dir",
        metavar="DIR",
        help="where corpora and indexes live (default: $VRAG_DESKTOP_DATA_DIR "
        "or the per-user data directory)",
    )
    menu = p.add_mutually_exclusive_group()
    menu.add_argument(
        "--install-desktop",
        action="store_true",
        help="add this app to the desktop's application menu (a .desktop entry and icons in "
        "$XDG_DATA_HOME, ~/.local/share) and exit; run it again after moving the app",
    )
    menu.add_argument("--uninstall-desktop", action="store_true", help="remove that menu entry and exit")
    sub = p.add_subparsers(dest="command", metavar="COMMAND")
    cli_index.add_index_parser(sub)
    cli_search.add_parsers(sub)
    cli_index.add_corpus_parser(sub)
    cli_ask.add_parsers(sub)
    cli_runtime.add_parsers(sub)
    cli_eval.add_parsers(sub)
    cli_train.add_parsers(sub)
    cli_cache.add_parsers(sub)
    cli_endpoints.add_parsers(sub)
    cli_models.add_parsers(sub)
    cli_update.add_parsers(sub)
    gui = sub.add_parser("gui", help="open the desktop app (the default when no command is given)")
    gui.add_argument(
        "paths",
        nargs="*",
        metavar="PATH",
        help="files or folders to add to a corpus (given to the running app, if one is open)",
    )
    return p


#: Every command name, so that ``vrag-desktop FILE…`` (a file manager's "Open with") means ``gui FILE…``.
COMMANDS = (
    "index",
    "search",
    "serve-search",
    "corpus",
    "ask",
    "runs",
    "runtime",
    "eval",
    "train",
    "cache",
    "endpoints",
    "models",
    "update-check",
    "gui",
)


def _open_with(raw: list[str]) -> list[str]:
    """``[--data-dir D] PATH…`` where the first non-option is an existing path, not a command: ``gui``."""
    i = 0
    while i < len(raw) and raw[i].startswith("-"):
        i += 2 if raw[i] == "--data-dir" else 1
    if i < len(raw) and raw[i] not in COMMANDS and os.path.exists(raw[i]):
        return [*raw[:i], "gui", *raw[i:]]
    return raw


def _gui_args(raw: list[str]) -> argparse.Namespace | None:
    """``[--data-dir D] [gui [PATH…]]`` read without the commands' parsers, else None (the full parser
    reads it). Why: building those imports every command's module, ~0.1 s before the window shows."""
    data_dir, i = None, 0
    while i < len(raw) and raw[i].startswith("-"):
        if raw[i] == "--data-dir" and i + 1 < len(raw):
            data_dir, i = raw[i + 1], i + 2
        elif raw[i].startswith("--data-dir="):
            data_dir, i = raw[i].split("=", 1)[1], i + 1
        else:
            return None  # --help, --version, --install-desktop, a typo: argparse's
    rest = raw[i:]
    if rest[:1] not in ([], ["gui"]) or any(a.startswith("-") for a in rest[1:]):
        return None
    return argparse.Namespace(
        command="gui", data_dir=data_dir, paths=rest[1:], install_desktop=False, uninstall_desktop=False
    )


def _frozen_environment() -> None:
    """In the frozen app: PyInstaller's bootloader points ``LD_LIBRARY_PATH`` at the bundle (for this
    process it was read at start already). Every program the app starts — a PDF viewer through
    xdg-open or Qt's ``QDesktopServices``, a system Python making an engine's environment — must
    get the machine's libraries instead, so the variable goes back to what it was. (The app's own
    helper processes are the bundle's executable: its bootloader sets it again.)"""
    if not getattr(sys, "frozen", False):
        return
    orig = os.environ.pop("LD_LIBRARY_PATH_ORIG", None)
    if orig:
        os.environ["LD_LIBRARY_PATH"] = orig
    else:
        os.environ.pop("LD_LIBRARY_PATH", None)


def main(argv: Sequence[str] | None = None) -> int:
    _frozen_environment()
    raw = list(sys.argv[1:] if argv is None else argv)
    if raw[:1] and raw[0].startswith("--vrag-"):  # the frozen app, started as a helper child
        from vrag_desktop.core.corpus.derive_process import CHILD_FLAG, child_entry

        if raw[0] == CHILD_FLAG:
            child_entry(raw[1:])
            return 0
        from vrag_desktop.core.runtime.guard import GUARD_FLAG, guard_main

        if raw[0] == GUARD_FLAG:  # the watchdog of a foreground child (core/runtime/guard.py)
            return guard_main(raw[1:])
    raw = _open_with(raw)
    args = _gui_args(raw) or _parser().parse_args(raw)
    if args.install_desktop or args.uninstall_desktop:
        from vrag_desktop.core import desktop_entry

        return desktop_entry.main(["--uninstall"] if args.uninstall_desktop else [])
    if args.command in (None, "gui"):
        from vrag_desktop.core.runtime.leaving import leave
        from vrag_desktop.qt.app import main as gui_main

        # a thread still embedding or importing torch must not abort the exit (core/runtime/leaving.py)
        return leave(gui_main(data_dir=args.data_dir, paths=getattr(args, "paths", None) or []))
    _quiet_libraries()
    from vrag_desktop.core.datadir import DataDirTooNew, check
    from vrag_desktop.core.paths import resolve_data_dir

    try:
        check(resolve_data_dir(args.data_dir))
    except DataDirTooNew as exc:
        print(f"vrag-desktop: error: {exc}", file=sys.stderr)
        return EXIT_ERROR
    try:
        from vrag_desktop.cli import ask as cli_ask
        from vrag_desktop.cli import cache as cli_cache
        from vrag_desktop.cli import endpoints as cli_endpoints
        from vrag_desktop.cli import eval as cli_eval
        from vrag_desktop.cli import index as cli_index
        from vrag_desktop.cli import models as cli_models
        from vrag_desktop.cli import runtime as cli_runtime
        from vrag_desktop.cli import search as cli_search
        from vrag_desktop.cli import train as cli_train
        from vrag_desktop.cli import update as cli_update

        handler = {
            "index": cli_index.cmd_index,
            "search": cli_search.cmd_search,
            "serve-search": cli_search.cmd_serve,
            "corpus": cli_index.cmd_corpus,
            "ask": cli_ask.cmd_ask,
            "runs": cli_ask.cmd_runs,
            "runtime": cli_runtime.cmd_runtime,
            "eval": cli_eval.cmd_eval,
            "train": cli_train.cmd_train,
            "cache": cli_cache.cmd_cache,
            "endpoints": cli_endpoints.cmd_endpoints,
            "models": cli_models.cmd_models,
            "update-check": cli_update.cmd_update_check,
        }[args.command]
        code = int(handler(args))
        sys.stdout.flush()  # here, not at exit: a reader that went away is seen below
        return code
    except BrokenPipeError:
        return _reader_gone()
    except KeyboardInterrupt:
        print("\nInterrupted.", file=sys.stderr)
        return EXIT_INTERRUPTED
    except CLIError as exc:
        print(f"vrag-desktop: error: {exc}", file=sys.stderr)
        return EXIT_ERROR
    except Exception as exc:
        from vrag_desktop.core.corpus.corpus import CorpusError
        from vrag_desktop.core.embedders.base import EmbedderError
        from vrag_desktop.core.endpoints.profiles import ProfileError
        from vrag_desktop.core.search.engine import SearchError

        if isinstance(exc, CorpusError | EmbedderError | SearchError | ProfileError):
            print(f"vrag-desktop: error: {exc}", file=sys.stderr)
            return EXIT_ERROR
        message = _storage_message(exc, args.data_dir)
        if message is not None:
            print(f"vrag-desktop: error: {message}", file=sys.stderr)
            return EXIT_ERROR
        raise


#: The status of a command whose output's reader went away: killed by SIGPIPE, as the shell counts it.
EXIT_PIPE = 128 + 13


def _reader_gone() -> int:
    """``vrag-desktop search … | head``: the reader stopped reading, so stop quietly, as Unix tools
    do (they die of SIGPIPE), instead of a traceback. What is still buffered for stdout cannot be
    written; it goes to the null device, so the interpreter's last flush at exit fails no more."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError):  # stdout is not a file descriptor (a test's capture)
        pass
    return EXIT_PIPE


def _storage_message(exc: BaseException, data_dir: str | None) -> str | None:
    """A full or read-only disk, or a corpus manifest SQLite cannot read: one line, no traceback."""
    import sqlite3

    from vrag_desktop.core.corpus.errors import storage_message
    from vrag_desktop.core.paths import resolve_data_dir

    root = resolve_data_dir(data_dir)
    if isinstance(exc, OSError | sqlite3.OperationalError):
        message = storage_message(exc, root)
        if message is not None:
            return message
    if isinstance(exc, sqlite3.DatabaseError):
        return (
            f"a corpus manifest under {root} cannot be read ({exc}); `vrag-desktop corpus list` shows "
            "which, and `vrag-desktop corpus check NAME --repair` rebuilds it"
        )
    return None


def _quiet_libraries() -> None:
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
    import logging

    logging.getLogger("transformers").setLevel(logging.ERROR)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
