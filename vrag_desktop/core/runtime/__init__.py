"""Local runtimes the app launches and supervises: a general process supervisor (vLLM servers now,
training runs later), the vLLM launcher, and GPU detection with memory pre-flight. No Qt here."""
