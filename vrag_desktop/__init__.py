"""VRAG Desktop: multimodal retrieval-augmented reasoning over your own documents, images and videos.

The package is split in two: :mod:`vrag_desktop.core` holds everything that is not a widget and never
imports Qt; :mod:`vrag_desktop.qt` renders core state. Heavy libraries are imported lazily so that
``import vrag_desktop`` stays fast.
"""

__version__ = "0.1.0"

__all__ = ["__version__"]
