"""Shared Qt infrastructure: running core work off the GUI thread, the error sink, theme, thumbnails."""
