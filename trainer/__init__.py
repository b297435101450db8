"""GRPO / GGPO reinforcement-learning runs for VRAG agents; launched by the app as its own process."""
