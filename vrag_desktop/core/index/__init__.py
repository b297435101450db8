"""Vector index (FAISS) and the index builder."""
