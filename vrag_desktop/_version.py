"""The one place the version is written (pyproject reads it; the package re-exports it).

A module of its own so that ``core`` can name the version without importing the package's
``__init__``, whose lazy ``VRAG``/``VimRAG`` attributes lead to the API layer above core.
"""

__version__ = "0.1.0"
