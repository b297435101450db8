"""The ``vrag-desktop`` command line: one module per command group, all calling into ``core``."""

from vrag_desktop.cli.main import main

__all__ = ["main"]
