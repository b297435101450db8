"""GRPO / GGPO reinforcement-learning runs for VRAG agents; launched by the app as its own process.

Installed as its own distribution (``trainer/pyproject.toml``) in its own environment; the import
name ``vrag_trainer`` cannot collide with the unrelated ``trainer`` project on PyPI.
"""

__version__ = "0.1.0"
