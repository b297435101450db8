"""VRAG Desktop: multimodal retrieval-augmented reasoning over your own documents, images and videos.

The package is split in two: :mod:`vrag_desktop.core` holds everything that is not a widget and never
imports Qt; :mod:`vrag_desktop.qt` renders core state. Heavy libraries are imported lazily so that
``import vrag_desktop`` stays fast.
"""

from typing import Any

from vrag_desktop._version import __version__

__all__ = ["VRAG", "VimRAG", "__version__"]


def __getattr__(name: str) -> Any:
    """``from vrag_desktop import VRAG, VimRAG`` without importing the agents at package import."""
    if name in ("VRAG", "VimRAG"):
        from vrag_desktop import api

        return getattr(api, name)
    raise AttributeError(f"module 'vrag_desktop' has no attribute {name!r}")
