"""Evaluation: retrieval and answer metrics, the model judge, the training reward, and the
evaluation jobs that run them over a dataset (one implementation each; the trainer imports them)."""
