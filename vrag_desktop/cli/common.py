"""What every ``vrag-desktop`` command shares: exit codes, the one-line error, the library."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Generator
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from vrag_desktop.core.corpus.library import Library

EXIT_OK, EXIT_ERROR, EXIT_INTERRUPTED = 0, 1, 130


class CLIError(Exception):
    """An error to print as one line and exit 1 (no traceback for the user)."""


def command_group(sub: Any, name: str, *, metavar: str = "ACTION", **kw: Any) -> Any:
    """A command whose actions are subcommands (``vrag-desktop NAME ACTION``): one action is
    required, its name lands in ``args.NAME_command``. Returns the actions' subparsers."""
    return sub.add_parser(name, **kw).add_subparsers(dest=f"{name}_command", metavar=metavar, required=True)


def library(args: argparse.Namespace) -> Library:
    """The corpora under ``--data-dir`` (or the default data directory)."""
    from vrag_desktop.core.corpus.library import Library

    return Library(args.data_dir)


def err(msg: str, quiet: bool = False) -> None:
    """A status line on stderr (stdout stays clean for ``--json``)."""
    if not quiet:
        print(msg, file=sys.stderr)


def make_env(gen: Generator[str, None, Path], error: type[Exception] = CLIError) -> Path | None:
    """Run an environment build (:func:`core.runtime.venv.build_venv`), its lines on stderr, and
    return the new interpreter; None after Ctrl-C (pip is killed; the same command finishes the
    environment later). A failed step raises ``error`` with pip's last lines."""
    from vrag_desktop.core.progress import Cancelled
    from vrag_desktop.core.runtime.proctree import signals_interrupt
    from vrag_desktop.core.runtime.venv import EnvCreateError

    try:
        with signals_interrupt():  # SIGTERM/SIGHUP as Ctrl-C: pip is stopped, not orphaned
            while True:
                try:
                    err(next(gen))
                except StopIteration as stop:
                    return stop.value
    except KeyboardInterrupt:
        err("\nInterrupted: the environment is incomplete; run the same command again to finish it.")
        return None
    except (EnvCreateError, Cancelled, TimeoutError) as exc:
        raise error(str(exc) or type(exc).__name__) from exc
    finally:
        gen.close()  # kills the running pip
