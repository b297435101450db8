"""The trainer's tests: run by scripts/test.sh with the trainer's own interpreter (.venv-trainer), after
the app's suite. Offline like the app's: models are built by the tests, never downloaded."""

import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
