"""Corpus ingestion: discovering source files, deriving items (pages, images, clips, texts), the manifest."""
