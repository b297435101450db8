"""What every ``vrag-desktop`` command shares: exit codes, the one-line error, the library."""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from vrag_desktop.core.corpus.library import Library

EXIT_OK, EXIT_ERROR, EXIT_INTERRUPTED = 0, 1, 130


class CLIError(Exception):
    """An error to print as one line and exit 1 (no traceback for the user)."""


def library(args: argparse.Namespace) -> Library:
    """The corpora under ``--data-dir`` (or the default data directory)."""
    from vrag_desktop.core.corpus.library import Library

    return Library(args.data_dir)


def err(msg: str, quiet: bool = False) -> None:
    """A status line on stderr (stdout stays clean for ``--json``)."""
    if not quiet:
        print(msg, file=sys.stderr)
