"""Model endpoints: an async client for any OpenAI-compatible server (local vLLM, DashScope, custom)."""
