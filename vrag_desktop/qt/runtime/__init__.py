"""The Runtime dock: endpoint profiles, the local vLLM server, its log."""
