"""The Training panel: launch, watch, stop, resume and inspect GRPO/GGPO runs (issue 12)."""
