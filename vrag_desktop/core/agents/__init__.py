"""Agents that answer from a corpus: VRAG (search + crop/zoom) and VimRAG (multimodal memory graph).

Both emit one typed event stream (:mod:`vrag_desktop.core.agents.events`)."""
